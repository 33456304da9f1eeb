"""Held-out evaluation: the log predictive density of new observations from posterior draws.

For held-out points ``j`` with ``l_sj = log p(y~_j | theta_s)`` at posterior draws ``s``,

    elpd_j = log (1/S) sum_s exp(l_sj),

computed as a log-sum-exp (the numerically safe form; Stan User's Guide, held-out
evaluation). Its Monte Carlo error is the delta method on the mean of ``p = exp(l)``:
``sd(p) / (mean(p) sqrt(S r_eff))``, with ``r_eff`` from the chains (R loo's relative
efficiency of ``exp(l)``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import as_draws_matrix, chain_grouping, log_lik_draws
from bayesij.array.ess import relative_eff
from bayesij.array.numeric import exp_and_logsumexp, obs_chunks, read_columns

__all__ = ["HoldoutArrays", "log_predictive_density", "joint_log_predictive_density"]


class HoldoutArrays(NamedTuple):
    """Per held-out point, shape (n_points,): ``elpd``, its Monte Carlo SE ``mcse`` and the
    relative efficiency ``r_eff`` of ``exp(l)``."""

    elpd: np.ndarray
    mcse: np.ndarray
    r_eff: np.ndarray


def log_predictive_density(log_lik, chain_ids=None, *, check: bool = True) -> HoldoutArrays:
    """``log mean_s exp(l_sj)`` of each column and its Monte Carlo standard error.

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_points) or (n_chains, n_draws, n_points)
        Log density of each held-out point at each posterior draw.
    chain_ids : array_like of shape (n_draws,), optional
        Chains of the rows of 2-D input (default one chain).
    check : bool, default True
        Check the values (NaN and +inf are errors; -inf is a density of 0).

    Returns
    -------
    HoldoutArrays

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27 (the
       expected log pointwise predictive density of new data, eq. 1-3).

    Examples
    --------
    >>> import numpy as np
    >>> log_lik = np.log(np.full((100, 2), 0.25))
    >>> np.round(log_predictive_density(log_lik).elpd, 4)  # log 0.25
    array([-1.3863, -1.3863])
    """
    matrix, chains = log_lik_draws(log_lik, chain_ids, check, keep_float32=True)
    n_draws, n_points = matrix.shape
    order, n_chains = chain_grouping(chains)
    out = np.empty((3, n_points))
    for chunk in obs_chunks(n_points, 3 * n_draws):
        columns = read_columns(matrix, chunk)
        out[:, chunk] = _lpd_and_mcse(columns if order is None else columns[order], n_chains)
    return HoldoutArrays(*out)


def _lpd_and_mcse(columns: np.ndarray, n_chains: int) -> np.ndarray:
    """(3, n_cols): lpd, MCSE, r_eff of draws (n_draws, n_cols) sorted by chain."""
    n_draws = columns.shape[0]
    scaled, lse = exp_and_logsumexp(columns.T)
    lpd = lse - np.log(n_draws)
    by_chain = scaled.T.reshape(n_chains, n_draws // n_chains, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = (
            relative_eff(by_chain) if n_draws // n_chains >= 4 else np.ones(columns.shape[1])
        )
        mcse = scaled.std(axis=1, ddof=1) / scaled.mean(axis=1) / np.sqrt(n_draws * efficiency)
    return np.stack([lpd, np.where(np.isfinite(mcse), mcse, np.nan), efficiency])


def joint_log_predictive_density(log_lik, chain_ids=None) -> tuple[float, float]:
    """``log mean_s exp(sum_j l_sj)``: the joint predictive density of all columns (a block
    of future observations given the past, when the columns are conditional terms
    ``log p(y_t | y_<t, theta)``), and its Monte Carlo SE."""
    matrix, chains = as_draws_matrix(log_lik, "log_lik", chain_ids, keep_float32=True)
    total = matrix.sum(axis=1, keepdims=True, dtype=np.float64)
    order, n_chains = chain_grouping(chains)
    lpd, mcse, _ = _lpd_and_mcse(total if order is None else total[order], n_chains)
    return float(lpd[0]), float(mcse[0])
