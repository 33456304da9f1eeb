"""Approximate leave-one-out cross-validation from posterior draws.

Four estimates of ``elpd_n = log p(x_n | x_-n)`` from the same draws:

* ``"psis"`` — Pareto-smoothed importance sampling with ratios ``1 / p(x_n | theta)``;
* ``"is"`` — plain importance sampling: ``-log E[1 / p(x_n | theta)]`` (harmonic mean);
* ``"ij"`` — infinitesimal jackknife: ``log(E[p_n] - Cov(p_n, l_n))`` with
  ``p_n = p(x_n | theta)``, the first-order change of ``E[p_n]`` when ``x_n`` is removed;
* ``"cumulant"`` — ``k1 - k2/2 + k3/6 - k4/24`` with ``k_j`` the posterior cumulants of
  ``l_n``, the expansion of ``-log E[exp(-l_n)]``.

Every method reports PSIS's ``pareto_k`` as the diagnostic of the importance ratios.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.stats import norm

from bayesij._checks import as_draws_matrix, check_log_lik_values, fail, impossible_columns
from bayesij.array.blocks import obs_chunks
from bayesij.array.ess import relative_eff
from bayesij.array.information import log_lik_moments, logsumexp_columns
from bayesij.array.psis import TIE_RULES, psis_chunk, tail_length

__all__ = ["LooArrays", "loo_pointwise", "METHODS", "mcse_elpd"]

METHODS = ("psis", "is", "ij", "cumulant")

#: Blom's approximate normal order statistics used by R loo's MCSE of elpd.
_BLOM = norm.ppf((np.arange(1, 1001) - 3 / 8) / (1000 - 2 * 3 / 8 + 1))


class LooArrays(NamedTuple):
    """Pointwise leave-one-out results, each of shape (n_obs,).

    Attributes
    ----------
    elpd : estimated ``log p(x_n | x_-n)``.
    p_loo : ``lppd - elpd``.
    lppd : ``log E[p(x_n | theta)]``.
    pareto_k : PSIS k-hat of the importance ratios.
    mcse : Monte Carlo standard error of ``elpd`` (R loo's method; PSIS and IS only).
    ess : PSIS effective sample size ``r_eff / sum_s w_s^2`` (PSIS and IS only).
    r_eff : relative efficiency used for the tail length and the MCSE.
    tail_len : Pareto tail length.
    """

    elpd: np.ndarray
    p_loo: np.ndarray
    lppd: np.ndarray
    pareto_k: np.ndarray
    mcse: np.ndarray
    ess: np.ndarray
    r_eff: np.ndarray
    tail_len: np.ndarray


def _exp_and_lse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``exp(values - top)``, ``top`` and ``log sum exp(values)`` of each column."""
    top = values.max(axis=0)
    top[~np.isfinite(top)] = 0.0
    scaled = np.exp(values - top)
    with np.errstate(divide="ignore"):
        return scaled, top, np.log(scaled.sum(axis=0)) + top


def mcse_elpd(relative_error: np.ndarray, r_eff: np.ndarray) -> np.ndarray:
    """R loo's MCSE of ``elpd_n`` from ``c = sd(E-hat[p_n]) / E[p_n]`` (scale-free form).

    R loo draws 1000 normal quantiles ``z = E + sd q`` (Blom), takes the variance of
    ``log z`` over ``z > 0`` and divides by ``r_eff``. Here ``log z = log E + log1p(c q)``,
    so only ``c`` is needed and no density is exponentiated.
    """
    shifted = 1 + relative_error[:, None] * _BLOM[None, :]
    positive = shifted > 0
    logs = np.log(np.where(positive, shifted, 1.0))
    count = positive.sum(axis=1)
    mean = np.where(positive, logs, 0.0).sum(axis=1) / count
    variance = np.where(positive, (logs - mean[:, None]) ** 2, 0.0).sum(axis=1) / (count - 1)
    return np.sqrt(variance / r_eff)


def _psis_chunk_elpd(log_lik: np.ndarray, tail_len: np.ndarray, r_eff: np.ndarray,
                     smooth: bool, ties: str):
    """elpd, pareto_k, mcse and ess of a chunk; ``smooth=False`` gives plain IS."""
    smoothed = psis_chunk(-log_lik, tail_len, ties)
    log_weights = smoothed.log_weights if smooth else -log_lik - (-log_lik).max(axis=0)
    weights, _, normaliser = _exp_and_lse(log_weights)
    weights /= weights.sum(axis=0)
    terms, top, lse = _exp_and_lse(log_lik + log_weights)
    elpd = lse - normaliser
    # exp(l + lw_norm - elpd): the normalised contributions, summing to 1 in each column.
    contributions = terms / terms.sum(axis=0)
    relative_error = np.sqrt(((contributions - weights) ** 2).sum(axis=0))
    ess = r_eff / (weights**2).sum(axis=0)
    return elpd, smoothed.pareto_k, mcse_elpd(relative_error, r_eff), ess


def _ij_elpd(log_lik: np.ndarray) -> np.ndarray:
    """``log(E[p] - Cov(p, l))``, computed with ``p`` scaled by ``exp(-max l)``."""
    scaled, top, _ = _exp_and_lse(log_lik)
    mean = scaled.mean(axis=0)
    covariance = ((scaled - mean) * (log_lik - log_lik.mean(axis=0))).sum(axis=0) / (
        log_lik.shape[0] - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(mean - covariance) + top


def _cumulant_elpd(log_lik: np.ndarray) -> np.ndarray:
    moments = log_lik_moments(log_lik)
    k2, k3 = moments.central2, moments.central3
    k4 = moments.central4 - 3 * k2**2
    return moments.mean - k2 / 2 + k3 / 6 - k4 / 24


def loo_pointwise(
    log_lik,
    *,
    method: str = "psis",
    r_eff=None,
    chain_ids=None,
    tail_rule: str = "ceil",
    ties: str = "above",
) -> LooArrays:
    """Pointwise approximate leave-one-out elpd from posterior draws, chunked over observations.

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Finite or ``-inf``. An observation impossible under some draw has an infinite
        importance ratio there, so its importance-sampling estimate of ``p(x_n | x_-n)`` is
        0: every method reports ``elpd = -inf``, ``p_loo = inf``, ``pareto_k = inf``.
    method : {"psis", "is", "ij", "cumulant"}, default "psis"
    r_eff : float or array_like of shape (n_obs,), optional
        Relative efficiency of ``exp(l_n)``; default: computed from the chains as R loo's
        ``relative_eff`` does (1 for a single chain gives no autocorrelation correction only
        if the draws are independent).
    chain_ids : array_like of shape (n_draws,), optional
        Chains of the rows of 2-D input.
    tail_rule : {"ceil", "floor"}, default "ceil"
        Rounding of the tail length: "ceil" as R loo (<= 2.10) and ArviZ 0.23, "floor" as the
        PSIS paper, the posterior package and arviz-stats.
    ties : {"above", "position"}, default "above"
        Draws tied with the tail cutoff: left out of the tail as ArviZ, or kept by position
        as R loo (see :func:`bayesij.array.psis.psis_chunk`).

    Returns
    -------
    LooArrays

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    .. [2] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [3] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [4] Watanabe, S. (2010). JMLR 11, 3571-3594.
    """
    if method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")
    if ties not in TIE_RULES:
        raise fail("ties", repr(ties), "'above' (ArviZ) or 'position' (R loo)")
    array = np.asarray(log_lik, dtype=float)
    matrix, chains = as_draws_matrix(array, "log_lik", chain_ids)
    check_log_lik_values(matrix)
    n_draws, n_obs = matrix.shape
    if n_draws < 2:
        raise fail("log_lik", f"{n_draws} draw", "at least 2 posterior draws")
    r_eff = _r_eff(matrix, chains, r_eff)
    tail_len = tail_length(n_draws, r_eff, tail_rule)
    out = np.full((7, n_obs), np.nan)
    impossible = impossible_columns(matrix)
    for chunk in obs_chunks(n_obs, 8 * n_draws + 50 * 250):
        columns = matrix[:, chunk]
        if impossible[chunk].any():  # computed on a stand-in, then set to -inf below
            columns = np.where(np.isneginf(columns), 0.0, columns)
        elpd, k, mcse, ess = _psis_chunk_elpd(columns, tail_len[chunk], r_eff[chunk],
                                              smooth=method != "is", ties=ties)
        out[0, chunk], out[1, chunk] = logsumexp_columns(columns) - np.log(n_draws), k
        if method in ("psis", "is"):
            out[2, chunk], out[3, chunk], out[4, chunk] = elpd, mcse, ess
        elif method == "ij":
            out[2, chunk] = _ij_elpd(columns)
        else:
            out[2, chunk] = _cumulant_elpd(columns)
    lppd, pareto_k, elpd, mcse, ess = out[:5]
    if impossible.any():
        lppd[impossible] = logsumexp_columns(matrix[:, impossible]) - np.log(n_draws)
        elpd[impossible], pareto_k[impossible] = -np.inf, np.inf
        mcse[impossible], ess[impossible] = np.nan, np.nan
    return LooArrays(elpd, lppd - elpd, lppd, pareto_k, mcse, ess, r_eff, tail_len)


def _r_eff(matrix: np.ndarray, chains: np.ndarray, r_eff) -> np.ndarray:
    n_obs = matrix.shape[1]
    if r_eff is None:
        scaled = np.exp(matrix - matrix.max(axis=0))
        return relative_eff(scaled, chains)
    values = np.broadcast_to(np.asarray(r_eff, dtype=float), (n_obs,)).copy()
    if not np.all((values > 0) & np.isfinite(values)):
        raise fail("r_eff", "values that are not finite and positive",
                   f"positive relative efficiencies, a scalar or shape ({n_obs},)")
    return values


