"""WAIC's per-observation terms in one compiled pass over each row: lppd, the mean and
central moments 2-4 of the log-likelihood (divisor n) and the tempered cross-validation
term ``log E[p^-beta] - log E[p^(1-beta)]`` (Watanabe 2010).

NumPy reference: the NumPy rows of :func:`bayesij.array.waic.waic_terms`
(``tests/array/kernels/test_waic.py``).
"""

from __future__ import annotations

import math

import numpy as np

from bayesij.array.kernels.fastmath import (
    MAX_RANGE,
    compiled,
    exp,
    min_max,
    ratios_and_sums,
    reordered,
    row_mean,
)

__all__ = ["fused_waic_terms"]


def fused_waic_terms(rows: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """WAIC's per-observation terms of every row of log-likelihood values.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws), float64
    beta : float
        Inverse temperature of the cross-validation term.

    Returns
    -------
    terms : ndarray of shape (6, n_rows)
        ``lppd = log mean exp(l)``, the mean of ``l``, its central moments of order 2, 3, 4
        (divisor ``n_draws``) and ``log mean exp(-beta l) - log mean exp((1 - beta) l)``.
    done : ndarray of shape (n_rows,)
        False where a value is not finite or the range exceeds 700 (the general path).
    """
    out = np.zeros((7, rows.shape[0]))
    _waic_rows(np.ascontiguousarray(rows, dtype=np.float64), float(beta), out)
    return out[:6], out[6] == 1


@compiled
def _waic_rows(rows, beta, out):
    n = rows.shape[1]
    work = np.empty(n)
    for r in range(rows.shape[0]):
        row = rows[r]
        low, high = min_max(row)
        if not (math.isfinite(low) and high - low <= MAX_RANGE):
            continue
        mean = row_mean(row)
        out[1, r] = mean
        out[2, r], out[3, r], out[4, r] = _central_moments(row, mean)
        total, _, inverses = ratios_and_sums(row, low, work)  # exp(low - l), exp(l - low)
        out[0, r] = low + math.log(inverses) - math.log(n)
        if beta == 1.0:  # log mean exp(-l) - log mean exp(0)
            out[5, r] = -low + math.log(total) - math.log(n)
        else:
            out[5, r] = _log_mean_exp(row, -beta, low, high)
            out[5, r] -= _log_mean_exp(row, 1 - beta, low, high)
        out[6, r] = 1.0


@reordered
def _central_moments(row, mean):
    second = third = fourth = 0.0
    for s in range(row.shape[0]):
        deviation = row[s] - mean
        square = deviation * deviation
        second += square
        third += square * deviation
        fourth += square * square
    n = row.shape[0]
    return second / n, third / n, fourth / n


@reordered
def _log_mean_exp(row, alpha, low, high):
    """``log mean exp(alpha l)`` of a finite row (values below ``exp(-708)`` of the largest
    term count as that, far below the rounding of the sum), one vectorised pass."""
    if alpha == 0.0:
        return 0.0
    top = alpha * high if alpha > 0 else alpha * low
    total = 0.0
    for s in range(row.shape[0]):
        total += exp(max(alpha * row[s] - top, -708.0))
    return top + math.log(total) - math.log(row.shape[0])
