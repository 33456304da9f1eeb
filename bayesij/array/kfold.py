"""Approximate K-fold cross-validation from the full-data draws.

For a fold ``F`` and an observation ``n`` in it, the K-fold predictive density is
``p(x_n | x_-F) = E_-F[p(x_n | theta)]``, each observation of the fold scored separately as
in R loo's ``kfold``. Two approximations from the full posterior:

* PSIS — importance weights ``w_s ∝ 1 / p(x_F | theta_s) = exp(-sum_{m in F} l_m)``,
  Pareto-smoothed per fold: ``log sum_s w_s p(x_n | theta_s)``;
* IJ — the first-order change of ``E[p_n]`` when the fold is removed:
  ``log(E[p_n] - Cov(p_n, sum_{m in F} l_m))`` (NaN where that is not positive).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import (
    as_draws_matrix,
    as_float_array,
    check_log_lik_values,
    fail,
    impossible_columns,
)
from bayesij.array.ess import log_lik_relative_eff
from bayesij.array.numeric import (
    exp_and_logsumexp,
    logsumexp_columns,
    obs_chunks,
    read_columns,
    sum_by_group,
)
from bayesij.array.psis import psis_chunk, tail_length

__all__ = ["FoldElpd", "fold_elpd", "subset_elpd"]


class FoldElpd(NamedTuple):
    """Approximate K-fold results.

    Attributes
    ----------
    psis, ij : ndarray of shape (n_obs,)
        Approximate ``log p(x_n | x_-F(n))``.
    pareto_k : ndarray of shape (n_folds,)
        k-hat of each fold's importance ratios.
    """

    psis: np.ndarray
    ij: np.ndarray
    pareto_k: np.ndarray


def fold_elpd(log_lik, folds, tail_rule: str = "ceil", *, check: bool = True) -> FoldElpd:
    """PSIS and IJ approximations of pointwise K-fold elpd.

    Parameters
    ----------
    log_lik : ndarray of shape (n_chains, n_draws, n_obs)
        Finite log-likelihood.
    folds : array_like of shape (n_obs,)
        Fold code ``0..K-1`` of each observation; every fold must occur.
    tail_rule : {"ceil", "floor"}, default "ceil"

    Returns
    -------
    FoldElpd

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [2] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    """
    log_lik, matrix = _finite_draws(log_lik, check)
    codes = np.asarray(folds)
    n_folds = int(codes.max()) + 1 if codes.size else 0
    if codes.shape != (matrix.shape[1],) or np.unique(codes).size != n_folds:
        raise fail(
            "folds",
            f"shape {codes.shape} with codes {np.unique(codes)[:10]}",
            f"a code 0..K-1 for each of {matrix.shape[1]} observations, all used",
        )
    fold_lik = sum_by_group(matrix, codes, n_folds)
    log_weights, centred, pareto_k = _fold_weights(fold_lik, log_lik.shape[:2], tail_rule)
    psis, ij = np.empty(matrix.shape[1]), np.empty(matrix.shape[1])
    for chunk in obs_chunks(matrix.shape[1], 4 * matrix.shape[0]):
        fold = codes[chunk]
        psis[chunk], ij[chunk] = _held_out_terms(
            read_columns(matrix, chunk), log_weights[:, fold], centred[:, fold]
        )
    return FoldElpd(psis, ij, pareto_k)


def subset_elpd(
    log_lik, subsets, tail_rule: str = "ceil", *, check: bool = True, argument: str = "subsets"
) -> FoldElpd:
    """PSIS and IJ approximations of the elpd of left-out subsets that may overlap (Monte
    Carlo cross-validation, leave-within-series-out folds).

    Parameters
    ----------
    log_lik : ndarray of shape (n_chains, n_draws, n_obs)
    subsets : sequence of array_like of int
        The 0-based positions left out in each fold (non-empty, each position once).

    Returns
    -------
    FoldElpd
        ``psis`` and ``ij`` of shape (n_subsets,): ``sum_{n in O} log p(x_n | x_-O)`` per
        subset; ``pareto_k`` of each subset's importance ratios.

    References
    ----------
    .. [1] Ghosh et al. (2020), Approximate cross-validation for structured models, NeurIPS 33:
           leave-within-structure-out cross-validation (weighting
       scheme (A): the weights of the left-out terms go to 0).
    """
    log_lik, matrix = _finite_draws(log_lik, check)
    positions = [_subset(s, matrix.shape[1], j, argument) for j, s in enumerate(subsets)]
    if not positions:
        raise fail(argument, "no subset", "at least one subset of positions")
    fold_lik = np.column_stack([matrix[:, p].sum(axis=1, dtype=np.float64) for p in positions])
    log_weights, centred, pareto_k = _fold_weights(fold_lik, log_lik.shape[:2], tail_rule)
    psis, ij = np.empty(len(positions)), np.empty(len(positions))
    for j, p in enumerate(positions):
        repeat = np.zeros(p.size, dtype=int)
        terms = _held_out_terms(
            read_columns(matrix, p), log_weights[:, [j]][:, repeat], centred[:, [j]][:, repeat]
        )
        psis[j], ij[j] = terms[0].sum(), terms[1].sum()
    return FoldElpd(psis, ij, pareto_k)


def _subset(subset, n_obs: int, j: int, argument: str) -> np.ndarray:
    positions = np.asarray(subset)
    if (
        positions.ndim != 1
        or positions.size == 0
        or positions.dtype.kind not in "iu"
        or positions.min() < 0
        or positions.max() >= n_obs
        or np.unique(positions).size != positions.size
    ):
        raise fail(
            argument,
            f"subset {j} = {positions.tolist()[:10]}",
            f"distinct integer positions 0..{n_obs - 1}, at least one",
        )
    return positions


def _finite_draws(log_lik, check: bool) -> tuple[np.ndarray, np.ndarray]:
    """(chain, draw, obs) draws and their (draws, obs) matrix, checked finite."""
    log_lik = as_float_array(log_lik, "log_lik", keep_float32=True)
    if log_lik.ndim != 3:
        raise fail("log_lik", f"shape {log_lik.shape}", "(n_chains, n_draws, n_obs)")
    matrix, _ = as_draws_matrix(log_lik, "log_lik", keep_float32=True)
    if check:
        check_log_lik_values(matrix)
    if impossible_columns(matrix).any():  # NaN and +inf are refused above
        raise fail("log_lik", "-inf values", "finite values for K-fold approximations")
    return log_lik, matrix


def _fold_weights(fold_lik: np.ndarray, chains: tuple[int, int], tail_rule: str):
    """Normalised PSIS log-weights ``exp(-fold_lik)`` (draws, folds), the centred fold
    log-likelihoods and the folds' k-hat."""
    n_draws = fold_lik.shape[0]
    r_eff = log_lik_relative_eff(fold_lik.reshape(chains + (fold_lik.shape[1],)))
    smoothed = psis_chunk(-fold_lik, tail_length(n_draws, r_eff, tail_rule))
    log_weights = smoothed.log_weights - logsumexp_columns(smoothed.log_weights)
    return log_weights, fold_lik - fold_lik.mean(axis=0), smoothed.pareto_k


def _held_out_terms(columns, log_weights, centred) -> tuple[np.ndarray, np.ndarray]:
    """PSIS and IJ ``log p(x_n | x_-F)`` of held-out columns (draws, n), given their
    folds' normalised log-weights and centred fold log-likelihoods (draws, n)."""
    n_draws = columns.shape[0]
    psis = logsumexp_columns(log_weights + columns)
    scaled, lse = exp_and_logsumexp(columns.T)
    top = lse - np.log(scaled.sum(axis=1))  # the maximum of each column
    mean = scaled.mean(axis=1)
    covariance = np.einsum("ns,sn->n", scaled - mean[:, None], centred) / (n_draws - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return psis, np.log(mean - covariance) + top
