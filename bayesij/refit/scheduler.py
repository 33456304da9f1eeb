"""Spend a limited refit budget where the leave-one-out approximation is least trustworthy.

The idea of learning where to sample (Shi, Steinhardt and Liang 2015, AISTATS): order the
candidates by cheap signals in a priority queue, refit in that order, learn from each
result, stop when it no longer pays.
For each point the signals are PSIS's k-hat, the disagreement between PSIS-LOO and IJ-LOO,
the Monte Carlo error of PSIS-LOO and the posterior variance of the point's log-likelihood
(the size of its LOO correction). They combine into an estimated error

    e_n = |elpd_psis_n - elpd_ij_n| + 2 mcse_n,   plus Var(l_n) when k-hat_n > threshold

(IJ undefined: the disagreement counts as Var(l_n)). Refits go in decreasing ``e_n``. After
each round the observed errors ``|exact - psis|`` calibrate the estimates (factor
``c = max(1, median(observed / e))`` once three refits are in) and, after at least three
refits, the campaign stops when the estimated remaining error ``c sqrt(sum of e_n^2 over
points not refitted)`` is below the tolerance, or the budget is spent.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import check_real

__all__ = ["LooPriorities", "loo_priorities", "LooStopRule"]


class LooPriorities(NamedTuple):
    """Estimated approximation errors ``error`` (n_obs,) and the refit ``order``."""

    error: np.ndarray
    order: np.ndarray


def loo_priorities(
    psis_elpd, ij_elpd, mcse, pareto_k, var_log_lik, k_threshold: float
) -> LooPriorities:
    """Estimated error of PSIS-LOO per point and the order in which to refit.

    All arguments are arrays of shape (n_obs,), except ``k_threshold``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> psis, ij = np.array([-1.0, -1.2, -5.0]), np.array([-1.0, -1.2, -3.0])
    >>> mcse, k = np.array([0.01, 0.01, 0.4]), np.array([0.2, 0.3, 0.9])
    >>> int(refit.loo_priorities(psis, ij, mcse, k, np.array([0.1, 0.1, 2.0]), 0.7).order[0])
    2
    """
    k_threshold = check_real(k_threshold, "k_threshold")
    psis_elpd, ij_elpd, mcse, pareto_k, var_log_lik = (
        np.asarray(a, dtype=float) for a in (psis_elpd, ij_elpd, mcse, pareto_k, var_log_lik)
    )
    disagreement = np.abs(psis_elpd - ij_elpd)
    disagreement = np.where(np.isfinite(disagreement), disagreement, var_log_lik)
    error = disagreement + 2 * np.nan_to_num(mcse, nan=0.0)
    error = error + np.where(pareto_k > k_threshold, var_log_lik, 0.0)
    order = np.lexsort((-pareto_k, -error))  # largest error first, then largest k-hat
    return LooPriorities(error, order)


def exact_lpd(record: dict, score: str = "lpd") -> float:
    """A LOO refit's exact log predictive density of its held-out unit: the point's
    (``"lpd"``) or the group's joint one (``"lpd_joint"``), their Monte Carlo SEs
    (``"lpd_mcse"``, ``"lpd_joint_mcse"``) or k-hats (``"lpd_khat"``, ``"lpd_joint_khat"``;
    NaN in a record stored before k-hats were kept)."""
    if score not in record:
        return float("nan")
    return float(np.ravel(record[score])[0])


class LooStopRule:
    """Stop a prioritised LOO campaign once the remaining estimated error is small.

    Called with the finished records (by key) of the campaign; ``keys[i]`` is the key of
    the refit of point ``positions[i]``.
    """

    def __init__(
        self,
        priorities: LooPriorities,
        psis_elpd,
        keys: list[str],
        positions: np.ndarray,
        tolerance: float,
        joint: bool = False,
    ):
        tolerance = check_real(tolerance, "tolerance", 0.0)
        self.score = "lpd_joint" if joint else "lpd"  # a group's joint density, or a point's
        self.error, self.psis = priorities.error, np.asarray(psis_elpd, dtype=float)
        self.position_of = dict(zip(keys, np.asarray(positions).tolist(), strict=True))
        self.tolerance = float(tolerance)
        self.remaining = np.inf

    def calibration(self, records: dict) -> float:
        """``max(1, median(|exact - psis| / e))`` over successful refits (1 before 3)."""
        ratios = []
        for key, record in records.items():
            if record["status"] == "ok":
                n = self.position_of[key]
                if self.error[n] > 0:
                    ratios.append(abs(exact_lpd(record, self.score) - self.psis[n]) / self.error[n])
        return max(1.0, float(np.median(ratios))) if len(ratios) >= 3 else 1.0

    def __call__(self, records: dict) -> bool:
        if len(records) < min(3, len(self.position_of)):  # calibrate on a few refits first
            return False
        done = np.zeros(self.error.size, dtype=bool)
        done[[self.position_of[key] for key in records]] = True
        factor = self.calibration(records)
        self.remaining = factor * float(np.sqrt(np.sum(self.error[~done] ** 2)))
        return self.remaining < self.tolerance
