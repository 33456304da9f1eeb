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

from bayesij.array._numeric import (
    exp_and_logsumexp,
    logsumexp_columns,
    obs_chunks,
    read_columns,
    sum_by_group,
)
from bayesij.array.checks import (
    as_draws_matrix,
    as_float_array,
    check_log_lik_values,
    fail,
    impossible_columns,
)
from bayesij.array.ess import log_lik_relative_eff
from bayesij.array.psis import psis_chunk, tail_length

__all__ = ["FoldElpd", "fold_elpd"]


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
    log_lik = as_float_array(log_lik, "log_lik", keep_float32=True)
    if log_lik.ndim != 3:
        raise fail("log_lik", f"shape {log_lik.shape}", "(n_chains, n_draws, n_obs)")
    matrix, _ = as_draws_matrix(log_lik, "log_lik", keep_float32=True)
    if check:
        check_log_lik_values(matrix)
    if impossible_columns(matrix).any():  # NaN and +inf are refused above
        raise fail("log_lik", "-inf values", "finite values for K-fold approximations")
    codes = np.asarray(folds)
    n_folds = int(codes.max()) + 1 if codes.size else 0
    if codes.shape != (matrix.shape[1],) or np.unique(codes).size != n_folds:
        raise fail(
            "folds",
            f"shape {codes.shape} with codes {np.unique(codes)[:10]}",
            f"a code 0..K-1 for each of {matrix.shape[1]} observations, all used",
        )
    fold_lik = sum_by_group(matrix, codes, n_folds)
    n_draws = matrix.shape[0]
    r_eff = log_lik_relative_eff(fold_lik.reshape(log_lik.shape[:2] + (n_folds,)))
    smoothed = psis_chunk(-fold_lik, tail_length(n_draws, r_eff, tail_rule))
    log_weights = smoothed.log_weights - logsumexp_columns(smoothed.log_weights)
    centred = fold_lik - fold_lik.mean(axis=0)
    psis, ij = np.empty(matrix.shape[1]), np.empty(matrix.shape[1])
    for chunk in obs_chunks(matrix.shape[1], 4 * n_draws):
        columns, fold = read_columns(matrix, chunk), codes[chunk]
        psis[chunk] = logsumexp_columns(log_weights[:, fold] + columns)
        scaled, lse = exp_and_logsumexp(columns.T)
        top = lse - np.log(scaled.sum(axis=1))  # the maximum of each column
        mean = scaled.mean(axis=1)
        covariance = np.einsum("ns,sn->n", scaled - mean[:, None], centred[:, fold]) / (n_draws - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ij[chunk] = np.log(mean - covariance) + top
    return FoldElpd(psis, ij, smoothed.pareto_k)
