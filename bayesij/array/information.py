"""WAIC, Watanabe's functional cumulants, tempered cross-validation loss, and DIC, from draws.

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

from typing import NamedTuple

import numpy as np

from bayesij._checks import as_draws_matrix, check_log_lik_values, fail, impossible_columns
from bayesij.array.blocks import obs_chunks

__all__ = [
    "LogLikMoments",
    "log_lik_moments",
    "log_mean_exp",
    "logsumexp_columns",
    "exp_and_logsumexp",
    "elpd_standard_error",
    "functional_cumulants",
    "predicted_cv_gap",
    "DicTerms",
    "dic_terms",
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


def elpd_standard_error(pointwise: np.ndarray, ddof: int) -> float:
    """SE of a sum of pointwise elpd values: ``sqrt(N var_n)`` with divisor ``N - ddof``.

    ``ddof=0`` is ArviZ's convention, ``ddof=1`` R loo's ``sqrt(N) sd_n``. NaN for too few
    values; -inf entries (impossible observations) give NaN.
    """
    n = pointwise.size
    with np.errstate(invalid="ignore"):
        return float(np.sqrt(n * pointwise.var(ddof=ddof))) if n > ddof else np.nan


def exp_and_logsumexp(values: np.ndarray, out: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``exp(values - top)`` and ``log sum exp(values)`` along the last axis.

    ``top`` is the maximum of each row (0 for rows that are all ``-inf``, which give
    ``-inf``, as do empty rows); the exponentials go to ``out`` when given. One pass of exp,
    faster than ``scipy.special.logsumexp``, which handles weights and signs at the cost of
    extra passes.
    """
    if values.shape[-1] == 0:
        return values, np.full(values.shape[:-1], -np.inf)
    top = values.max(axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    scaled = np.subtract(values, top, out=out)
    np.exp(scaled, out=scaled)
    with np.errstate(divide="ignore"):
        return scaled, np.log(scaled.sum(axis=-1)) + top[..., 0]


def logsumexp_columns(values: np.ndarray) -> np.ndarray:
    """``log sum_s exp(values[s, n])`` for each column of (n_draws, n_cols) values."""
    return exp_and_logsumexp(values.T)[1]


def _log_lik_matrix(log_lik, check: bool = True) -> np.ndarray:
    matrix, _ = as_draws_matrix(log_lik, "log_lik")
    if check:
        check_log_lik_values(matrix)
    if matrix.shape[0] < 2:
        raise fail("log_lik", f"{matrix.shape[0]} draw", "at least 2 posterior draws")
    return matrix


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
    matrix = _log_lik_matrix(log_lik, check)
    n_draws, n_obs = matrix.shape
    out = np.empty((5, n_obs))
    for chunk in obs_chunks(n_obs, 3 * n_draws):
        columns = matrix[:, chunk]
        out[0, chunk] = logsumexp_columns(columns) - np.log(n_draws)
        mean = columns.mean(axis=0)
        with np.errstate(invalid="ignore"):
            deviation = columns - mean
        square = deviation**2
        out[1, chunk] = mean
        out[2, chunk] = square.mean(axis=0)
        out[3, chunk] = (square * deviation).mean(axis=0)
        out[4, chunk] = (square**2).mean(axis=0)
    impossible = impossible_columns(matrix)
    out[2:, impossible] = np.array([[np.inf], [np.nan], [np.inf]])
    return LogLikMoments(out[0], out[1], out[2], out[3], out[4], n_draws)


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
    matrix = _log_lik_matrix(log_lik, check)
    if not np.isfinite(alpha):
        raise fail("alpha", repr(alpha), "a finite number")
    if alpha == 0:
        return np.zeros(matrix.shape[1])  # log E[p^0] = 0, also for impossible observations
    result = np.empty(matrix.shape[1])
    for chunk in obs_chunks(matrix.shape[1], 2 * matrix.shape[0]):
        result[chunk] = logsumexp_columns(alpha * matrix[:, chunk]) - np.log(matrix.shape[0])
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


class DicTerms(NamedTuple):
    """Ingredients of DIC on the deviance scale ``D(theta) = -2 sum_n l_n(theta)``.

    Attributes
    ----------
    mean_deviance : E[D(theta)].
    deviance_at_point : D(theta_hat), NaN when no plug-in log-likelihood was given.
    p_d : Spiegelhalter's ``E[D] - D(theta_hat) = 2 (log p(y|theta_hat) - E log p(y|theta))``.
    p_v : Gelman's ``Var(D) / 2 = 2 Var(sum_n l_n)`` (divisor n_draws - 1).
    btl : Bayes training loss ``-(1/N) sum_n log E[p(x_n | theta)]``, the base of Watanabe's
        per-observation DIC.
    """

    mean_deviance: float
    deviance_at_point: float
    p_d: float
    p_v: float
    btl: float


def dic_terms(log_lik, log_lik_at_point=None) -> DicTerms:
    """Effective numbers of parameters of DIC1 (p_D) and DIC2 (p_V).

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Must be finite.
    log_lik_at_point : array_like of shape (n_obs,), optional
        ``log p(x_n | theta_hat)`` at a plug-in point; without it ``p_d`` is NaN.

    Returns
    -------
    DicTerms

    References
    ----------
    .. [1] Spiegelhalter, D. J., Best, N. G., Carlin, B. P. and van der Linde, A. (2002).
       Bayesian measures of model complexity and fit. JRSS B 64(4), 583-639.
    .. [2] Gelman, A., Carlin, J. B., Stern, H. S. and Rubin, D. B. (2004). Bayesian Data
       Analysis, 2nd ed., section 6.7.
    """
    matrix = _log_lik_matrix(log_lik)
    if impossible_columns(matrix).any():
        raise fail("log_lik", "-inf values", "finite values for DIC (its deviance is infinite)")
    total = matrix.sum(axis=1)
    mean_deviance = -2 * float(total.mean())
    p_v = 2 * float(total.var(ddof=1))
    btl = -float(np.mean(logsumexp_columns(matrix) - np.log(matrix.shape[0])))
    if log_lik_at_point is None:
        return DicTerms(mean_deviance, np.nan, np.nan, p_v, btl)
    point = np.asarray(log_lik_at_point, dtype=float)
    if point.shape != (matrix.shape[1],):
        raise fail("log_lik_at_point", f"shape {point.shape}",
                   f"one value per observation, shape ({matrix.shape[1]},)")
    if not np.all(np.isfinite(point)):
        raise fail("log_lik_at_point", "non-finite values", "finite log-likelihood values")
    deviance_at_point = -2 * float(point.sum())
    return DicTerms(mean_deviance, deviance_at_point, mean_deviance - deviance_at_point, p_v,
                    btl)
