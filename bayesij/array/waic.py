"""WAIC, Watanabe's functional cumulants and the tempered cross-validation loss, from draws.

Notation (Watanabe 2010): with ``l_n = log p(x_n | theta)`` and posterior expectations taken
as averages over the draws,

* ``F(alpha) = (1/N) sum_n log E[p(x_n | theta)^alpha]`` — the generating function;
* Bayes training loss ``BtL = -F(1)``; Gibbs training loss ``GtL = -(1/N) sum_n E[l_n]``;
* functional variance ``V = sum_n Var(l_n)``; ``WAIC(beta) = BtL + beta V / N``;
* cumulants ``Y1 = -GtL``, ``Y2 = mean_n l*_2``, ``Y3 = mean_n l*_3``,
  ``Y4 = mean_n (l*_4 - 3 l*_2^2)`` with ``l*_k(n) = E[(l_n - E l_n)^k]`` (Remark 6);
* cross-validation loss at inverse temperature beta, ``CvL(beta) = F(-beta) - F(1 - beta)``.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from bayesij.array.checks import fail, impossible_columns, log_lik_matrix
from bayesij.array.numeric import (
    logsumexp_columns,
    map_chunks,
    obs_chunks,
    read_columns,
    transpose_columns,
)

__all__ = [
    "LogLikMoments",
    "log_lik_moments",
    "log_mean_exp",
    "waic_terms",
    "waic_parts",
    "terms_of_rows",
    "WaicParts",
    "functional_cumulants",
    "predicted_cv_gap",
]


class LogLikMoments(NamedTuple):
    """Per-observation posterior summaries of the log-likelihood, each of shape (n_obs,).

    Attributes
    ----------
    lppd : log E[p(x_n | theta)] (log pointwise predictive density).
    mean : E[l_n].
    central2, central3, central4 : E[(l_n - E l_n)^k] for k = 2, 3, 4 (divisor n_draws).
    n_draws : number of draws.
    """

    lppd: np.ndarray
    mean: np.ndarray
    central2: np.ndarray
    central3: np.ndarray
    central4: np.ndarray
    n_draws: int

    def variance(self, ddof: int = 0) -> np.ndarray:
        """Var(l_n) with the given divisor ``n_draws - ddof``."""
        return self.central2 * self.n_draws / (self.n_draws - ddof)


def log_lik_moments(log_lik, *, check: bool = True) -> LogLikMoments:
    """One pass over the draws: lppd and central moments of each observation's log-likelihood.

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
    check : bool, default True
        Check the values (NaN, +inf, at least two draws); ``False`` for input that a
        :class:`~bayesij.posterior.Posterior` or a caller has already checked.

    Returns
    -------
    LogLikMoments
        An observation with ``-inf`` at some draw has ``mean = -inf``, infinite variance and
        fourth moment, and a NaN third moment: its WAIC terms are ``p_waic = inf`` and
        ``elpd_waic = -inf`` (WAIC is undefined there; PSIS-LOO is not).

    References
    ----------
    .. [1] Watanabe, S. (2010). Asymptotic equivalence of Bayes cross validation and widely
       applicable information criterion in singular learning theory. JMLR 11, 3571-3594.
    """
    return waic_terms(log_lik, 1.0, check=check)[0]


class WaicParts(NamedTuple):
    """Per-observation pieces of WAIC, each of shape (n_obs,): the log-likelihood moments
    (``lppd``, ``mean``, central moments 2-4) and the tempered cross-validation term."""

    lppd: np.ndarray
    mean: np.ndarray
    central2: np.ndarray
    central3: np.ndarray
    central4: np.ndarray
    cv_term: np.ndarray


def waic_parts(log_lik, beta: float = 1.0, *, check: bool = True) -> WaicParts:
    """:func:`waic_terms` as one NamedTuple of per-observation arrays (joinable over blocks
    of observations). ``log_lik``: (n_draws, n_obs) or (n_chains, n_draws, n_obs)."""
    m, cv_term = waic_terms(log_lik, beta, check=check)
    return WaicParts(m.lppd, m.mean, m.central2, m.central3, m.central4, cv_term)


def waic_terms(log_lik, beta: float = 1.0, *, check: bool = True):
    """:func:`log_lik_moments` and the tempered cross-validation term of each observation,
    ``log E[p^-beta] - log E[p^(1-beta)]``, in one pass over the draws.

    The chunks of observations are transposed to rows and done by a compiled kernel
    (:func:`bayesij.array.kernels.waic.fused_waic_terms`) on the threads; rows it leaves
    (impossible observations, ranges above 700) by NumPy.

    Returns
    -------
    LogLikMoments
    ndarray of shape (n_obs,)
        The cross-validation term, whose mean over observations is ``CvL(beta)``.
    """
    matrix = log_lik_matrix(log_lik, check, keep_float32=True)
    if not np.isfinite(beta):
        raise fail("beta", repr(beta), "a finite number")
    n_draws, n_obs = matrix.shape
    out = np.empty((6, n_obs))
    chunks = obs_chunks(n_obs, n_draws)
    buffers = threading.local()  # one transposed chunk per thread, freed with this call

    def work(chunk: slice) -> None:
        if not hasattr(buffers, "rows"):
            buffers.rows = np.empty((chunks[0].stop, n_draws))
        terms_of_rows(matrix, chunk, transpose_columns(matrix, chunk, buffers.rows), beta, out)

    map_chunks(work, chunks)
    return LogLikMoments(out[0], out[1], out[2], out[3], out[4], n_draws), out[5]


def terms_of_rows(
    matrix: np.ndarray, chunk: slice, rows: np.ndarray, beta: float, out: np.ndarray
) -> None:
    """The terms of :func:`waic_terms` of the observations ``chunk`` of ``matrix`` (S, N),
    from their values transposed to rows (b, S; only read), into ``out[:, chunk]`` (6, N):
    by the compiled kernel, the rows it leaves by NumPy from ``matrix``'s columns. What
    another pass that transposes the same chunks (PSIS-LOO's, in an audit) calls on them."""
    from bayesij.array.kernels.waic import fused_waic_terms  # compiled: numba

    terms, done = fused_waic_terms(rows, beta)
    out[:, chunk] = terms
    if not done.all():
        columns = np.arange(chunk.start, chunk.stop)[~done]
        out[:, columns] = general_terms(read_columns(matrix, columns), beta)


def general_terms(columns: np.ndarray, beta: float) -> np.ndarray:
    """The terms of :func:`waic_terms` of columns (n_draws, n_cols) by NumPy, shape (6, n_cols):
    the rows the compiled kernel leaves, and its reference
    (:mod:`bayesij.array.kernels.waic`)."""
    n_draws = columns.shape[0]
    out = np.empty((6, columns.shape[1]))
    out[0] = logsumexp_columns(columns) - np.log(n_draws)
    mean = columns.mean(axis=0)
    with np.errstate(invalid="ignore"):
        deviation = columns - mean
    square = deviation**2
    out[1] = mean
    out[2] = square.mean(axis=0)
    out[3] = (square * deviation).mean(axis=0)
    out[4] = (square**2).mean(axis=0)
    out[2:5, impossible_columns(columns)] = np.array([[np.inf], [np.nan], [np.inf]])
    with np.errstate(invalid="ignore"):  # beta > 1, impossible observation: inf - inf, NaN
        out[5] = _log_mean_exp_columns(columns, -beta) - _log_mean_exp_columns(columns, 1 - beta)
    return out


def _log_mean_exp_columns(columns: np.ndarray, alpha: float) -> np.ndarray:
    if alpha == 0:
        return np.zeros(columns.shape[1])  # log E[p^0] = 0, also for impossible observations
    return logsumexp_columns(alpha * columns) - np.log(columns.shape[0])


def log_mean_exp(log_lik, alpha: float, *, check: bool = True) -> np.ndarray:
    """``log E[p(x_n | theta)^alpha]`` for each observation, shape (n_obs,).

    ``F(alpha)`` of Watanabe (2010) is the mean of this over observations.

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
    alpha : float
    check : bool, default True
        As :func:`log_lik_moments`.
    """
    matrix = log_lik_matrix(log_lik, check, keep_float32=True)
    if not np.isfinite(alpha):
        raise fail("alpha", repr(alpha), "a finite number")
    result = np.empty(matrix.shape[1])
    for chunk in obs_chunks(matrix.shape[1], 2 * matrix.shape[0]):
        result[chunk] = _log_mean_exp_columns(read_columns(matrix, chunk), alpha)
    return result


def functional_cumulants(moments: LogLikMoments) -> np.ndarray:
    """Watanabe's functional cumulants ``Y1..Y4`` (Remark 6), shape (4,)."""
    with np.errstate(invalid="ignore"):  # impossible observations: infinite moments
        return np.array(
            [
                moments.mean.mean(),
                moments.central2.mean(),
                moments.central3.mean(),
                (moments.central4 - 3 * moments.central2**2).mean(),
            ]
        )


def predicted_cv_gap(cumulants: np.ndarray, beta: float) -> float:
    """Predicted ``CvL(beta) - WAIC(beta)`` per observation (Watanabe 2010, Theorem 1).

    ``(beta - beta^2) / 2 * Y3``, whose leading term vanishes at ``beta = 1``, where the next
    order gives ``Y4 / 12``.
    """
    if beta == 1:
        return float(cumulants[3] / 12)
    return float((beta - beta**2) / 2 * cumulants[2])
