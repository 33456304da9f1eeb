"""Model comparison by elpd, in the layout of R loo's ``loo_compare``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array._numeric import elpd_standard_error
from bayesij.array.checks import fail

__all__ = ["compare"]


def compare(results: dict) -> pd.DataFrame:
    """Compare models by elpd, in the layout of R ``loo_compare`` (best model first).

    Parameters
    ----------
    results : dict of str to LooResult (or WaicResult)
        Results of the models on the same units. Units are paired by their ids (the
        pointwise index), so the order of the observations does not matter; results whose
        ids are only positions 0..N-1 (no labels, e.g. from plain arrays) are paired by
        position, as R loo and ArviZ do.

    Returns
    -------
    pandas.DataFrame
        Indexed by model name, sorted by elpd: ``elpd_diff`` (to the best, <= 0) and
        ``se_diff`` = ``sqrt(N) sd_n(elpd_n - elpd_best,n)`` with the results' ddof, then
        each model's ``elpd``, ``se``, ``p`` and ``ic`` (-2 elpd).
    """
    if not isinstance(results, dict) or len(results) < 2:
        raise fail(
            "results",
            f"{type(results).__name__} of {len(results)} result(s)"
            if hasattr(results, "__len__")
            else repr(results),
            "a dict of at least two named LooResult or WaicResult objects",
        )
    pointwise = {}
    for name, result in results.items():
        table = getattr(result, "pointwise", None)
        if not isinstance(table, pd.DataFrame) or not {"elpd_loo", "elpd_waic"} & set(table):
            raise fail(
                "results",
                f"a {type(result).__name__} for {name!r}",
                "LooResult or WaicResult objects (bayesij.loo, bayesij.waic)",
            )
        column = "elpd_loo" if "elpd_loo" in table else "elpd_waic"
        pointwise[name] = table[column]
    _match_units(pointwise)
    ddofs = {result.ddof for result in results.values()}
    if len(ddofs) != 1:
        raise fail("results", f"mixed SE conventions ddof={sorted(ddofs)}", "one convention")
    ddof = ddofs.pop()
    frame = pd.DataFrame({name: values.to_numpy() for name, values in pointwise.items()})
    order = frame.sum().sort_values(ascending=False).index
    best = frame[order[0]]
    rows = []
    for name in order:
        result = results[name]
        difference = frame[name] - best
        rows.append(
            {
                "model": name,
                "elpd_diff": float(difference.sum()),
                "se_diff": elpd_standard_error(difference.to_numpy(), ddof),
                "elpd": float(frame[name].sum()),
                "se": result.se,
                "p": result.p_loo if hasattr(result, "p_loo") else result.p_waic,
                "ic": -2 * float(frame[name].sum()),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def _unlabelled(values: pd.Series) -> bool:
    """Ids that are only positions 0..N-1 (the input carried no labels)."""
    index = values.index
    return index.dtype.kind in "iu" and np.array_equal(index.to_numpy(), np.arange(len(index)))


def _match_units(pointwise: dict) -> None:
    """Reorder every model's pointwise values to the units of the first labelled one (in
    place): by id where the ids are the same set, by position where one side has only
    positions; refuse models on other units."""
    labelled = [name for name, values in pointwise.items() if not _unlabelled(values)]
    reference_name = labelled[0] if labelled else next(iter(pointwise))
    reference = pointwise[reference_name]
    for name, values in pointwise.items():
        same_size = len(values) == len(reference)
        if same_size and set(values.index) == set(reference.index):
            pointwise[name] = values.loc[reference.index]
        elif same_size and (_unlabelled(values) or _unlabelled(reference)):
            pointwise[name] = pd.Series(values.to_numpy(), index=reference.index)
        else:
            missing = sorted(set(reference.index) - set(values.index), key=str)[:5]
            extra = sorted(set(values.index) - set(reference.index), key=str)[:5]
            raise fail(
                "results",
                f"{name!r} on other units than {reference_name!r} (missing {missing}, "
                f"extra {extra}, {len(values)} vs {len(reference)} units)",
                "results computed on the same units (observation ids or groups)",
            )
