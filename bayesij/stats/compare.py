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
        Results of the models on the same units.

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
        column = "elpd_loo" if "elpd_loo" in result.pointwise else "elpd_waic"
        pointwise[name] = result.pointwise[column]
    lengths = {name: len(values) for name, values in pointwise.items()}
    if len(set(lengths.values())) != 1:
        raise fail(
            "results", f"different numbers of units {lengths}", "results computed on the same units"
        )
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
