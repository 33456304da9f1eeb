"""Diagnostics of an elpd comparison: how far the normal approximation of ``elpd_diff`` can
be trusted, and whether the best of many models is best by chance.

The difference of two models' elpd is estimated by ``elpd_diff`` with standard error
``se_diff``; Sivula, Magnusson, Matamoros & Vehtari (2025) show that the normal
approximation ``elpd_diff ~ N(elpd_diff, se_diff^2)`` is well calibrated unless the models
make similar predictions (``|elpd_diff| < 4``), the data are few (``N < 100``), or the LOO
estimates themselves are biased (high Pareto k). With many candidate models the best one's
lead is biased upwards by the selection itself; McLatchie & Vehtari (2024) compare it with the
order statistic expected if every model were as good as the median one.

These are the checks arviz-stats' ``compare`` and R loo's ``loo_compare`` print; the names
and thresholds are theirs.

References
----------
.. [1] Sivula, T., Magnusson, M., Matamoros, A. A. and Vehtari, A. (2025). Uncertainty in
   Bayesian leave-one-out cross-validation based model comparison. Bayesian Analysis.
.. [2] McLatchie, Y. and Vehtari, A. (2024). Efficient estimation and correction of
   selection-induced bias with order statistics. Statistics and Computing 34, 132.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from bayesij.array.checks import fail

__all__ = [
    "SelectionCheck",
    "check_same_groups",
    "difference_flag",
    "khat_flag",
    "probability_below_zero",
    "selection_check",
]

#: Fewer units than this and the difference's error distribution is skewed (Sivula et al.).
SMALL_DATA = 100
#: Differences smaller than this: the models predict alike, the error is not normal.
SIMILAR_PREDICTIONS = 4.0
#: More models than this and the best one's lead is checked for selection bias.
MANY_MODELS = 11


def check_same_groups(results: dict) -> None:
    """Refuse results over groups that hold other observations: the same labels (or the
    same number of groups) are not the same groups. Observations are paired by their ids,
    in whatever order each fit stored them. Results that do not record their groups'
    observations (K-fold, held-out) are matched by their labels alone."""
    grouped = {n: r.members for n, r in results.items() if getattr(r, "members", None) is not None}
    if len(grouped) < 2:
        return
    first, members = next(iter(grouped.items()))
    for name, other in grouped.items():
        if set(other.index) != set(members.index):
            raise fail(
                "results",
                f"{name!r} over other observations than {first!r} ({other.size} and "
                f"{members.size} observations)",
                "results over the same observations in the same groups",
            )
        paired = other.reindex(members.index).to_numpy()
        differ = [members.index[i] for i in np.flatnonzero(paired != members.to_numpy())[:5]]
        if differ:
            raise fail(
                "results",
                f"{name!r} grouped otherwise than {first!r} (observations {differ} in other "
                "groups)",
                "results over the same groups: each observation in the same group",
            )


def probability_below_zero(elpd_diff: float, se_diff: float) -> float:
    """``P(D < 0)`` for ``D ~ N(elpd_diff, se_diff^2)``: the probability that a model whose
    difference to the reference is ``elpd_diff`` predicts worse than the reference (NaN for
    the reference itself, whose difference is exactly zero)."""
    if elpd_diff == 0.0:
        return float("nan")
    return float(norm.cdf(0.0, loc=elpd_diff, scale=se_diff + 1e-12))


def difference_flag(elpd_diff: float, n_units: int) -> str:
    """``"N < 100"``, ``"|elpd_diff| < 4"`` or ``""``: why the normal approximation of this
    difference may be poorly calibrated (empty for the reference model)."""
    if elpd_diff == 0.0:
        return ""
    if n_units < SMALL_DATA:
        return f"N < {SMALL_DATA}"
    if abs(elpd_diff) < SIMILAR_PREDICTIONS:
        return f"|elpd_diff| < {SIMILAR_PREDICTIONS:g}"
    return ""


def khat_flag(pareto_k: np.ndarray | None, threshold: float | None) -> str:
    """``"K k̂ > t"`` when ``K`` units' Pareto k exceed the threshold ``t`` (their LOO terms
    are biased, favouring the model with more of them), else ``""``; ``""`` for criteria
    without k-hat (WAIC, K-fold, held-out)."""
    if pareto_k is None or threshold is None:
        return ""
    count = int(np.sum(np.asarray(pareto_k) > threshold))
    return f"{count} k̂ > {threshold:.2f}" if count else ""


@dataclass(frozen=True)
class SelectionCheck:
    """The order-statistics check of the best model's lead among many.

    Attributes
    ----------
    best_lead : float
        The largest elpd difference of any model to the median model.
    expected_by_chance : float
        The lead the best of ``n_models - 1`` candidates would have if every candidate were
        as good as the median model: ``Phi^-1(1 - 1/(2(K-1)), 0, sd)`` with ``sd`` the root
        mean square of the differences at or above their median.
    by_chance : bool
        ``best_lead <= expected_by_chance``: the best model's lead may be selection noise;
        average the models (stacking) or use projection predictive selection instead.
    """

    best_lead: float
    expected_by_chance: float
    by_chance: bool


def selection_check(pointwise: pd.DataFrame, order: list) -> SelectionCheck | None:
    """The order-statistics check for more than 11 models (None for fewer, or when every
    model predicts alike).

    Parameters
    ----------
    pointwise : pandas.DataFrame, shape (N, K)
        Each model's pointwise elpd, one column per model, units matched.
    order : list
        The models' names, best elpd first.

    References
    ----------
    .. [1] McLatchie, Y. and Vehtari, A. (2024). Efficient estimation and correction of
       selection-induced bias with order statistics. Statistics and Computing 34, 132.
    """
    if len(order) <= MANY_MODELS:
        return None
    median_model = pointwise[order[len(order) // 2]]
    leads = np.array([float((pointwise[name] - median_model).sum()) for name in order])
    upper = leads[leads >= np.median(leads)]
    sd = float(np.sqrt(np.mean(upper**2)))
    if sd == 0.0 or not np.isfinite(sd):
        return None
    expected = float(norm.ppf(1 - 1 / (2 * (len(order) - 1)), loc=0.0, scale=sd))
    best = float(np.max(leads))
    return SelectionCheck(best, expected, bool(best <= expected))
