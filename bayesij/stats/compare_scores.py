"""Comparing models by a LOO predictive score or metric other than elpd: CRPS, SCRPS, MAE,
MSE, RMSE, R² or accuracy, with the standard error of the paired difference.

Each model's :class:`~bayesij.stats.scores.LooScore` holds its pointwise values on the same
observations, so the difference of two models is estimated observation by observation, as
``loo_compare`` does for elpd (Vehtari, Gelman & Gabry 2017): for a mean of pointwise terms
(CRPS, SCRPS, MAE, MSE, accuracy) the difference's SE is ``sd_n(t_a - t_b) / sqrt(N)``; for
RMSE and R², functions of means, the delta method gives each observation's influence on the
difference (``e^2 / (2 RMSE)`` for RMSE; ``-(e - mean e)^2 / var(y)`` for R² = 1 - var(e) /
var(y)), whose SE is that of a mean. Neither R loo nor arviz-stats compares models by these
(stan-dev/loo#220, #281).

References
----------
.. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
   using leave-one-out cross-validation and WAIC. Statistics and Computing 27, 1413-1432.
.. [2] Bolin, D. and Wallin, J. (2023). Local scale invariance and robustness of proper
   scoring rules. Statistical Science 38(1), 140-159.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from bayesij.array.checks import fail
from bayesij.stats.compare_diagnostics import SMALL_DATA, check_same_groups, khat_flag
from bayesij.stats.scores import LooScore

__all__ = ["compare_scores", "LARGER_IS_BETTER", "COMPARABLE"]

#: Kinds whose larger value is better (the others are errors).
LARGER_IS_BETTER = ("crps", "scrps", "r2", "acc")
#: Kinds compared pointwise (acc_balanced is a mean of two class rates: not here).
COMPARABLE = ("crps", "scrps", "mae", "mse", "rmse", "r2", "acc")
#: The Pareto k above which a unit's LOO term is unreliable (the threshold of 4000 draws and
#: more); the scores do not keep the draws' number.
KHAT_THRESHOLD = 0.7


def compare_scores(results: dict) -> pd.DataFrame:
    """Models compared by one kind of :class:`LooScore` (see :func:`bayesij.compare`).

    Returns a table sorted best first: ``kind`` (each model's estimate), ``diff`` (the
    estimate minus the best one's), ``se_diff`` (of the paired difference), ``p_worse``
    (the normal probability that the model is worse than the best; NaN for the best),
    ``diag_diff`` (``"N < 100"`` where the normal approximation is poorly calibrated),
    ``diag_k`` (``"K k̂ > 0.70"``: LOO terms that are unreliable), ``se`` and ``rank``.
    """
    kind = _common_kind(results)
    check_same_groups(results)
    frame = _pointwise_terms(results, kind)
    estimates = {name: _estimate(kind, frame[name], results[name]) for name in results}
    better = 1.0 if kind in LARGER_IS_BETTER else -1.0
    order = sorted(estimates, key=lambda name: -better * estimates[name])
    best = order[0]
    rows = []
    for rank, name in enumerate(order):
        diff = estimates[name] - estimates[best]
        influence = _influence(kind, frame, results, name) - _influence(kind, frame, results, best)
        se_diff = float(np.std(influence, ddof=1) / np.sqrt(influence.size)) if rank else 0.0
        worse = (
            float("nan")
            if rank == 0
            else float(norm.cdf(0.0, loc=better * diff, scale=se_diff + 1e-12))
        )
        rows.append(
            {
                "model": name,
                kind: estimates[name],
                "diff": diff,
                "se_diff": se_diff,
                "p_worse": worse,
                "diag_diff": f"N < {SMALL_DATA}" if rank and len(frame) < SMALL_DATA else "",
                "diag_k": khat_flag(results[name].pointwise["pareto_k"], KHAT_THRESHOLD),
                "se": results[name].se,
                "rank": rank,
            }
        )
    table = pd.DataFrame(rows).set_index("model")
    table.attrs["kind"] = kind
    return table


def _common_kind(results: dict) -> str:
    kinds = {result.kind for result in results.values()}
    if len(kinds) != 1:
        raise fail("results", f"scores of kinds {sorted(kinds)}", "one kind for every model")
    kind = kinds.pop()
    if kind not in COMPARABLE:
        raise fail(
            "results",
            f"{kind!r} scores",
            f"one of {COMPARABLE} (a balanced accuracy is not a mean over observations)",
        )
    return kind


def _pointwise_terms(results: dict, kind: str) -> pd.DataFrame:
    """Each model's pointwise term (one column each), on the same observations."""
    columns = {}
    index = None
    for name, result in results.items():
        point = result.pointwise
        if index is None:
            index = point.index
        elif not point.index.equals(index):
            raise fail(
                "results",
                f"{name!r} on other observations than {next(iter(results))!r}",
                "scores of every model on the same observations, in the same order",
            )
        columns[name] = _term(kind, point)
    return pd.DataFrame(columns, index=index)


def _term(kind: str, point: pd.DataFrame) -> np.ndarray:
    if kind in ("crps", "scrps"):
        return point["score"].to_numpy()
    error = point["error"].to_numpy()
    if kind == "mae":
        return np.abs(error)
    if kind in ("mse", "rmse"):
        return error**2
    if kind == "acc":
        observed = point["prediction"].to_numpy() + error
        return ((point["prediction"].to_numpy() > 0.5) == (observed == 1)).astype(float)
    return error  # r2: the errors, centred in _estimate / _influence


def _estimate(kind: str, terms: pd.Series, result: LooScore) -> float:
    """The model's estimate from its pointwise terms: its own for R² (a bootstrap mean
    aside, the point R² ``1 - var(e) / var(y)`` is what the differences are of)."""
    values = terms.to_numpy()
    if kind == "rmse":
        return float(np.sqrt(values.mean()))
    if kind == "r2":
        return float(1.0 - values.var() / _observed_variance(result))
    return float(values.mean())


def _influence(kind: str, frame: pd.DataFrame, results: dict, name: str) -> np.ndarray:
    """Each observation's contribution to the model's estimate, to first order: the term
    for a mean; ``e^2 / (2 RMSE)`` for RMSE; ``-(e - mean e)^2 / var(y)`` for R²."""
    values = frame[name].to_numpy()
    if kind == "rmse":
        return values / (2.0 * np.sqrt(values.mean()))
    if kind == "r2":
        return -((values - values.mean()) ** 2) / _observed_variance(results[name])
    return values


def _observed_variance(result: LooScore) -> float:
    point = result.pointwise
    return float(np.var(point["prediction"].to_numpy() + point["error"].to_numpy()))
