"""Deviance information criteria from posterior draws: DIC1 (Spiegelhalter p_D) and DIC2
(Gelman p_V), and the Bayes training loss that puts them on Watanabe's per-observation scale.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import fail, impossible_columns, log_lik_matrix
from bayesij.array.numeric import logsumexp_columns

__all__ = ["DicTerms", "dic_terms"]


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


def dic_terms(log_lik, log_lik_at_point=None, *, check: bool = True) -> DicTerms:
    """Effective numbers of parameters of DIC1 (p_D) and DIC2 (p_V).

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Must be finite.
    log_lik_at_point : array_like of shape (n_obs,), optional
        ``log p(x_n | theta_hat)`` at a plug-in point; without it ``p_d`` is NaN.
    check : bool, default True
        As :func:`bayesij.array.waic.log_lik_moments`.

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
    matrix = log_lik_matrix(log_lik, check)
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
        raise fail(
            "log_lik_at_point",
            f"shape {point.shape}",
            f"one value per observation, shape ({matrix.shape[1]},)",
        )
    if not np.all(np.isfinite(point)):
        raise fail("log_lik_at_point", "non-finite values", "finite log-likelihood values")
    deviance_at_point = -2 * float(point.sum())
    return DicTerms(mean_deviance, deviance_at_point, mean_deviance - deviance_at_point, p_v, btl)
