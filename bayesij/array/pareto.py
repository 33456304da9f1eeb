"""Pareto diagnostics of any Monte Carlo estimate: k-hat of a function's draws, the minimum
sample size, the k-hat threshold and the convergence rate, and Pareto smoothing of the tails.

The k-hat of the draws of a quantity tells whether its mean is estimated reliably by their
plain average: with ``k < 1 - 1 / log10(S)`` the error falls at the rate given by
:func:`convergence_rate`, ``10^(1 / (1 - k))`` draws are needed for a reliable estimate
(:func:`min_sample_size`), and beyond ``k = 0.7`` the mean may not exist (``k >= 1``).

References
----------
.. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
   importance sampling. JMLR 25(72) (section 3 and appendix: the diagnostics).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.ess import split_relative_ess, tail_relative_ess_rows
from bayesij.array.psis import (
    GpdFit,
    gpd_fit,
    khat_tail_length,
    pareto_khat_columns,
)

__all__ = [
    "ParetoDiagnostics",
    "pareto_diagnostics",
    "own_tail_khat_rows",
    "pareto_smooth_columns",
    "min_sample_size",
    "khat_threshold",
    "convergence_rate",
]


class ParetoDiagnostics(NamedTuple):
    """Per column: ``khat``, ``min_ss``, ``khat_threshold`` (one value for all), and
    ``convergence_rate``; ``tail_len`` the draws in each fitted tail."""

    khat: np.ndarray
    min_ss: np.ndarray
    khat_threshold: float
    convergence_rate: np.ndarray
    tail_len: np.ndarray


def khat_threshold(n_draws: int) -> float:
    """``1 - 1 / log10(S)``: above it, ``S`` draws cannot estimate the mean reliably."""
    return 1.0 - 1.0 / np.log10(n_draws)


def min_sample_size(khat) -> np.ndarray:
    """``10^(1 / (1 - max(0, k)))`` draws for a reliable estimate; inf for ``k >= 1``."""
    k = np.maximum(0.0, np.asarray(khat, dtype=float))
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(k < 1, 10.0 ** (1.0 / (1.0 - np.minimum(k, 0.999999))), np.inf)


def convergence_rate(khat, n_draws: int) -> np.ndarray:
    """The relative convergence rate of the error of a plain average, compared with a finite
    variance's ``1 / sqrt(S)``: 1 for ``k <= 0``, 0 for ``k >= 1``, ``1 - 1 / log(S)`` at
    ``k = 1/2`` and the paper's smooth approximation in between:
    ``max(0, (2 (k - 1) S^(2k + 1) + (1 - 2k) S^(2k) + S^2) / ((S - 1) (S - S^(2k))))``.
    """
    k = np.atleast_1d(np.asarray(khat, dtype=float))
    s = float(n_draws)
    rate = np.where(k <= 0, 1.0, 0.0)
    inside = (k > 0) & (k < 1) & (k != 0.5)
    kk = k[inside]
    with np.errstate(over="ignore", invalid="ignore"):
        value = (2 * (kk - 1) * s ** (2 * kk + 1) + (1 - 2 * kk) * s ** (2 * kk) + s**2) / (
            (s - 1) * (s - s ** (2 * kk))
        )
    rate[inside] = np.maximum(0.0, value)
    rate[k == 0.5] = 1 - 1 / np.log(s)
    return rate


def pareto_diagnostics(values: np.ndarray, r_eff, tail: str = "both") -> ParetoDiagnostics:
    """The Pareto diagnostics of each column of ``values`` (n_draws, n_cols).

    Parameters
    ----------
    values : ndarray of shape (n_draws, n_cols)
        Draws of each quantity, chains stacked.
    r_eff : float or ndarray of shape (n_cols,)
        Relative (tail) efficiency, for the tail length.
    tail : {"both", "right", "left"}
    """
    n_draws = values.shape[0]
    length = khat_tail_length(n_draws, r_eff, "both" if tail == "both" else "right")
    length = np.broadcast_to(length, values.shape[1]).copy()
    if tail == "left":
        k = pareto_khat_columns(-values, length, "right")
    else:
        k = pareto_khat_columns(values, length, tail)
    return ParetoDiagnostics(
        khat=k,
        min_ss=min_sample_size(k),
        khat_threshold=khat_threshold(n_draws),
        convergence_rate=convergence_rate(k, n_draws),
        tail_len=length,
    )


#: The tail probability of the tail ESS that sets a function's k-hat tail length.
TAIL_PROB = 0.05


def own_tail_khat_rows(rows: np.ndarray, tail: str = "right") -> np.ndarray:
    """k-hat of each row of draws of a function (each row one chain), its tail length from
    the row's own relative tail ESS, as arviz-stats takes the k-hat of a LOO expectation's
    function: ``pareto_khat_columns(rows.T, khat_tail_length(n, ess, tail), tail)`` with
    ``ess = split_relative_ess(rows.T[None], "tail")``.

    Finite rows are never sorted: their extremes, quantiles and indicator autocovariances
    come from :mod:`bayesij.array.kernels.tails`, the fits from the extremes kept (rows
    whose tail is longer than those are fitted as :func:`pareto_khat_columns`).

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws)
    tail : {"right", "both"}

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    from bayesij.array.kernels.tails import right_tail_khats, row_extremes

    rows = np.asarray(rows, dtype=float)
    n_rows, n = rows.shape
    finite = np.isfinite(rows).all(axis=1)
    if n < 64:
        return _own_tail_khat_sorted(rows, tail)
    if not finite.all():
        k = np.empty(n_rows)
        k[~finite] = _own_tail_khat_sorted(rows[~finite], tail)
        k[finite] = own_tail_khat_rows(rows[finite], tail)
        return k
    values = np.ascontiguousarray(rows)
    p = TAIL_PROB
    count = max(int(np.floor((n - 1) * p)) + 2, n - int(np.floor((n - 1) * (1 - p))))
    count = min(n, max(count, int(3 * np.sqrt(n / 0.5)) + 1))  # tails at r_eff >= 0.5
    smallest, largest = row_extremes(values, count)
    length = khat_tail_length(n, tail_relative_ess_rows(values, (smallest, largest), p), tail)
    fitted = right_tail_khats(largest, length, n)
    if tail == "both":
        fitted = np.maximum(right_tail_khats(-smallest[:, ::-1], length, n), fitted)
    longer = (length + 1 > count) & (length >= 5) & (length < n)
    if longer.any():  # tails beyond the extremes kept
        fitted[longer] = pareto_khat_columns(values[longer].T, length[longer], tail)
    return fitted


def _own_tail_khat_sorted(rows: np.ndarray, tail: str) -> np.ndarray:
    """:func:`own_tail_khat_rows` by partial sorts (short rows, rows with non-finite
    values: their k-hat is inf or NaN, without a warning)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ess = split_relative_ess(rows.T[None], "tail")
        return pareto_khat_columns(rows.T, khat_tail_length(rows.shape[1], ess, tail), tail)


def pareto_smooth_columns(values: np.ndarray, r_eff, tail: str = "both") -> tuple:
    """``values`` (n_draws, n_cols) with the largest (and smallest, ``tail="both"``) draws of
    each column replaced by the fitted generalized Pareto quantiles at ``(z - 1/2) / M`` above
    the cutoff (at most the largest draw), in the same order; and the k-hat of each column
    (the larger of the tails).

    Returns
    -------
    smoothed : ndarray of shape (n_draws, n_cols)
    khat : ndarray of shape (n_cols,)
    """
    n_draws = values.shape[0]
    length = np.broadcast_to(
        khat_tail_length(n_draws, r_eff, "both" if tail == "both" else "right"), values.shape[1]
    )
    smoothed = np.array(values, dtype=float, copy=True)
    khat = np.full(values.shape[1], -np.inf)
    sides = {"both": (-1.0, 1.0), "right": (1.0,), "left": (-1.0,)}[tail]
    for sign in sides:
        for j in range(values.shape[1]):
            k = _smooth_tail(smoothed[:, j], sign, int(length[j]))
            khat[j] = max(khat[j], k)
    return smoothed, khat


def _smooth_tail(column: np.ndarray, sign: float, m: int) -> float:
    """Smooth the ``m`` largest values of ``sign * column`` in place; return the fit's k."""
    oriented = sign * column
    order = np.argsort(oriented, kind="stable")
    tail = order[-m:]
    cutoff = oriented[order[-m - 1]]
    exceed = oriented[tail] - cutoff
    if not np.isfinite(exceed).all() or np.ptp(exceed) == 0:
        return np.nan
    fit: GpdFit = gpd_fit(exceed[:, None], np.array([m]))
    k, scale = float(fit.k[0]), float(fit.sigma[0])
    p = (np.arange(1, m + 1) - 0.5) / m
    quantile = -np.log1p(-p) * scale if abs(k) < 1e-12 else np.expm1(-k * np.log1p(-p)) / k * scale
    if np.isfinite(quantile).all():
        # Never beyond the largest draw (as posterior and arviz-stats truncate).
        column[tail] = sign * np.minimum(cutoff + quantile, oriented[order[-1]])
    return k
