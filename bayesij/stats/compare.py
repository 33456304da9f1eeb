"""Model comparison by elpd, in the layout of R loo's ``loo_compare``."""

from __future__ import annotations

import pandas as pd

from bayesij.array._numeric import elpd_standard_error
from bayesij.array.checks import fail

__all__ = ["compare"]


def compare(results: dict) -> pd.DataFrame:
    """Compare models by elpd, in the layout of R ``loo_compare`` (best model first).

    Parameters
    ----------
    results : dict of str to LooResult (or WaicResult)
        Results of the models on the same units; units are paired by their ids (the
        pointwise index), so the order of the observations does not matter.

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
    # Units are matched by id, not by position: the same ids in any order.
    reference_name, reference = next(iter(pointwise.items()))
    for name, values in pointwise.items():
        if set(values.index) != set(reference.index) or len(values) != len(reference):
            missing = sorted(set(reference.index) - set(values.index), key=str)[:5]
            extra = sorted(set(values.index) - set(reference.index), key=str)[:5]
            raise fail(
                "results",
                f"{name!r} on other units than {reference_name!r} (missing {missing}, "
                f"extra {extra}, {len(values)} vs {len(reference)} units)",
                "results computed on the same units (observation ids or groups)",
            )
        pointwise[name] = values.loc[reference.index]
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
