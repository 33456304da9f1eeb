"""Leave-one-out from draws that are not the posterior's: an approximation's (Laplace,
variational, Pathfinder) or the mixture of the leave-one-out posteriors.

*Approximate posterior* (Magnusson, Andersen, Jonasson & Vehtari 2020). Draws
``theta_s ~ g`` with ``log p(theta_s | y)`` (up to a constant) and ``log g(theta_s)``: the
ratio of the leave-``n``-out posterior to ``g`` is ``p(theta | y) / g(theta) / p(y_n |
theta)``, so PSIS smooths ``log p - log g - l_n`` (independent draws: ``r_eff = 1``), and
``elpd_n = log sum_s w_ns p(y_n | theta_s)``, as R loo's ``loo_approximate_posterior``.

*Mixture importance sampling* (Silva & Zanella 2024). Draws from the mixture
``q(theta) ∝ p(theta | y) sum_j 1 / p(y_j | theta)`` — every leave-one-out posterior in one
sample, obtained by adding ``log sum_j exp(-l_j)`` to the model's log density — give each
``p(y_n | y_-n)`` with weights bounded by construction:

    elpd_n = log sum_s 1 / sum_j exp(-l_js) - log sum_s exp(-l_ns) / sum_j exp(-l_js).

References
----------
.. [1] Magnusson, M., Andersen, M. R., Jonasson, J. and Vehtari, A. (2020). Leave-one-out
   cross-validation for Bayesian model comparison in large data. AISTATS 2020.
.. [2] Silva, L. A. and Zanella, G. (2024). Robust leave-one-out cross-validation for
   high-dimensional Bayesian models. Journal of the American Statistical Association 119,
   2369-2381.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bayesij.array.loo import weighted_elpds
from bayesij.array.psis import khat_tail_length, pareto_khat_columns, psis_rows, tail_length

__all__ = ["ApproximateLoo", "approximate_posterior_loo", "mixture_loo"]


class ApproximateLoo(NamedTuple):
    """Per observation (N,): ``elpd``, ``mcse``, ``pareto_k``, ``ess``, ``lppd``."""

    elpd: np.ndarray
    mcse: np.ndarray
    pareto_k: np.ndarray
    ess: np.ndarray
    lppd: np.ndarray


def approximate_posterior_loo(
    log_lik: np.ndarray,
    log_correction: np.ndarray,
    tail_rule: str = "ceil",
    ties: str = "above",
) -> ApproximateLoo:
    """PSIS-LOO from an approximation's draws.

    Parameters
    ----------
    log_lik : ndarray, shape (S, N)
        ``log p(y_n | theta_s)`` at the approximation's draws.
    log_correction : ndarray, shape (S,)
        ``log p(theta_s | y) - log g(theta_s)`` (constants do not matter).
    tail_rule, ties
        As :func:`bayesij.array.psis.psis_rows`; ``r_eff`` is 1 (independent draws).

    Returns
    -------
    ApproximateLoo
        ``lppd`` is R loo's: the plain mean of ``p(y_n | theta_s)`` over the
        approximation's draws.

    References
    ----------
    .. [1] Magnusson, M., Andersen, M. R., Jonasson, J. and Vehtari, A. (2020).
       Leave-one-out cross-validation for Bayesian model comparison in large data.
       AISTATS 2020.
    """
    n_draws = log_lik.shape[0]
    ratios = (log_correction[:, None] - log_lik).T  # (N, S)
    tails = tail_length(n_draws, np.ones(ratios.shape[0]), tail_rule)
    smoothed = psis_rows(ratios, tails, ties)
    elpd, mcse, ess = weighted_elpds(log_lik.T, smoothed.log_weights)
    lppd = logsumexp(log_lik, axis=0) - np.log(n_draws)
    return ApproximateLoo(elpd, mcse, smoothed.pareto_k, ess, lppd)


def mixture_loo(log_lik: np.ndarray) -> ApproximateLoo:
    """Mixture importance-sampling LOO from draws of ``p(theta|y) sum_j 1/p(y_j|theta)``.

    Parameters
    ----------
    log_lik : ndarray, shape (S, N)
        ``log p(y_n | theta_s)`` at the mixture's draws.

    Returns
    -------
    ApproximateLoo
        ``pareto_k`` is the k-hat of each observation's weights ``exp(-l_ns) / sum_j
        exp(-l_js)`` (a diagnostic only: they are bounded by 1, the estimator has finite
        variance whenever the LOO posteriors have finite mean ``p(y_n | theta)``);
        ``lppd`` is ``log E_p[p(y_n | theta)]`` from the same draws weighted back to the
        posterior.

    References
    ----------
    .. [1] Silva, L. A. and Zanella, G. (2024). Robust leave-one-out cross-validation for
       high-dimensional Bayesian models. JASA 119, 2369-2381.
    """
    n_draws = log_lik.shape[0]
    to_posterior = -logsumexp(-log_lik, axis=1)  # log of 1 / sum_j exp(-l_js), (S,)
    log_weights = (to_posterior[:, None] - log_lik).T  # (N, S): weights of each LOO posterior
    elpd, mcse, ess = weighted_elpds(log_lik.T, log_weights)
    posterior = to_posterior - logsumexp(to_posterior)
    lppd = logsumexp(posterior[:, None] + log_lik, axis=0)
    tails = khat_tail_length(n_draws, np.ones(log_lik.shape[1]))
    k = pareto_khat_columns(np.exp(log_weights.T - log_weights.max(axis=1)), tails)
    return ApproximateLoo(elpd, mcse, k, ess, lppd)
