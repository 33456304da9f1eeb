"""Leave-future-out (LFO) cross-validation of time series from posterior draws.

The columns are conditional log-likelihood terms in time order,
``l_t = log p(y_t | y_<t, theta)``, so that the joint predictive density of the block
``y_i .. y_{i+M-1}`` given the past is ``exp(sum_{t=i}^{i+M-1} l_t)`` at each draw and the
posterior given ``y_<j`` is the full-data posterior reweighted by ``exp(-sum_{t>=j} l_t)``
(leaving the future out is exact for such chain-structured models: Ghosh et al. 2020,
Proposition 3).

For an origin ``i`` (the first ``i`` observations are the past) and draws from the
posterior given ``y_<j`` (``j >= i``; ``j = T`` for the full data):

* PSIS: importance ratios ``exp(-sum_{t=i}^{j-1} l_t)``, Pareto-smoothed, give
  ``elpd_i = log sum_s w_s exp(sum_{t=i}^{i+M-1} l_st)`` and k-hat;
* IJ: the first-order change of ``E[p_block]`` when the weights of ``t >= i`` go from 1
  to 0, ``elpd_i = log(E[g] - Cov(g, sum_{t>=i} l_t))`` with ``g`` the block's density.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import check_positive_int, fail
from bayesij.array.loo import weighted_elpd
from bayesij.array.numeric import exp_and_logsumexp
from bayesij.array.psis import psis_chunk, tail_length

__all__ = ["LfoStep", "lfo_origins", "cumulative_log_lik", "psis_lfo", "ij_lfo"]


class LfoStep(NamedTuple):
    """One origin's importance-sampling estimate (:func:`psis_lfo`).

    ``residual`` (n_draws,) is each draw's share of the estimate's relative error,
    ``w_s (g_s / E_w[g] - 1)`` with normalised weights ``w``: ``mcse`` is its norm, and the
    Monte Carlo error of a sum of estimates from the same draws is the norm of the sum of
    their residuals (the delta method; errors of estimates that share draws move together).
    """

    elpd: float
    pareto_k: float
    delta_is: float
    mcse: float
    residual: np.ndarray


def lfo_origins(n_times: int, min_train, horizon) -> np.ndarray:
    """The origins ``i = min_train .. n_times - horizon``: the past holds ``i`` observations
    and the block ``i .. i + horizon - 1`` (0-based) is predicted."""
    min_train = check_positive_int(min_train, "min_train")
    horizon = check_positive_int(horizon, "horizon")
    if min_train + horizon > n_times:
        raise fail(
            "min_train",
            f"{min_train} with horizon {horizon} for {n_times} time points",
            "min_train + horizon <= the number of time points (at least one origin)",
        )
    return np.arange(min_train, n_times - horizon + 1)


def cumulative_log_lik(log_lik: np.ndarray) -> np.ndarray:
    """``C[s, t] = sum_{u < t} l_su``, shape (n_draws, n_times + 1), so that any block sum
    ``sum_{t=a}^{b-1} l_t`` is ``C[:, b] - C[:, a]``."""
    out = np.zeros((log_lik.shape[0], log_lik.shape[1] + 1))
    np.cumsum(log_lik, axis=1, out=out[:, 1:])
    return out


def psis_lfo(
    cumulative: np.ndarray, origin: int, fitted_to: int, horizon: int, tail_rule: str = "ceil"
) -> LfoStep:
    """PSIS estimate at one origin from draws of the posterior given the first ``fitted_to``
    observations.

    Parameters
    ----------
    cumulative : ndarray of shape (n_draws, n_times + 1)
        :func:`cumulative_log_lik` of those draws.
    origin, fitted_to, horizon : int
        The log ratios are ``sum_{t=fitted_to}^{origin-1} l_t`` (observations added since
        the fit: forward) or ``-sum_{t=origin}^{fitted_to-1} l_t`` (observations left out
        of it: backward); both are ``C[origin] - C[fitted_to]``. ``origin == fitted_to``
        is the exact fit (equal weights, k-hat NaN).

    Returns
    -------
    LfoStep
        ``mcse`` as R loo's for ``r_eff = 1``; ``delta_is`` the relative change of the
        block's predictive density from the draws' plain mean.

    References
    ----------
    .. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2020). Approximate leave-future-out
       cross-validation for Bayesian time series models. Journal of Statistical Computation
       and Simulation 90(14).
    """
    n_draws = cumulative.shape[0]
    block = cumulative[:, origin + horizon] - cumulative[:, origin]
    if origin == fitted_to:
        log_weights, k = np.zeros(n_draws), float("nan")
    else:
        log_ratios = cumulative[:, origin] - cumulative[:, fitted_to]
        tails = tail_length(n_draws, np.ones(1), tail_rule)
        smoothed = psis_chunk(log_ratios[:, None], tails)
        log_weights, k = smoothed.log_weights[:, 0], float(smoothed.pareto_k[0])
    elpd, mcse, _ = weighted_elpd(block, log_weights)
    normalised = log_weights - exp_and_logsumexp(log_weights)[1]
    weights = np.exp(normalised)
    residual = np.exp(normalised + block - elpd) - weights
    plain = float(exp_and_logsumexp(block)[1] - np.log(n_draws))
    return LfoStep(elpd, k, float(np.expm1(elpd - plain)), mcse, residual)


def ij_lfo(
    cumulative: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    derivative: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """First-order (IJ) LFO from full-data draws: ``(elpd, delta_lin)`` per origin.

    ``elpd_i = log(E[g] - Cov(g, sum_{t>=i} d_t))`` (NaN where the first-order density is
    not positive), ``delta_lin = -Cov(g, sum_{t>=i} d_t) / E[g]``; ``g = exp(block - max
    block)``. ``d_t = d log p(y; theta, w) / d w_t`` at ``w = 1``: the conditional terms
    ``l_t`` themselves (``derivative=None``) for a model whose weighted likelihood is
    ``sum_t w_t l_t``, or, given as the :func:`cumulative_log_lik` of those derivatives, a
    structured model's (an HMM's: the smoothed expectations of the emission log densities).

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466 (the derivative of a posterior expectation in the
       observation weights).
    .. [2] Ghosh, S., Stephenson, W. T., Nguyen, T. D., Deshpande, S. K. and Broderick, T.
           (2020). Approximate cross-validation for structured models. NeurIPS 33.
    """
    n_draws = cumulative.shape[0]
    weight_terms = cumulative if derivative is None else derivative
    total = weight_terms[:, -1]
    elpd = np.empty(origins.size)
    delta = np.empty(origins.size)
    for index, i in enumerate(origins):
        block = cumulative[:, i + horizon] - cumulative[:, i]
        future = total - weight_terms[:, i]
        scaled, _ = exp_and_logsumexp(block)
        mean = scaled.mean()
        covariance = np.dot(scaled - mean, future - future.mean()) / (n_draws - 1)
        delta[index] = -covariance / mean
        with np.errstate(invalid="ignore", divide="ignore"):
            elpd[index] = np.log(mean - covariance) + block.max()
    return elpd, delta
