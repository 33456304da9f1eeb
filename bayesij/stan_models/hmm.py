"""The shipped two-state Poisson HMM (``poisson_hmm.stan``) evaluated on posterior draws.

A NumPy forward-backward pass with the emission log densities weighted as in the Stan
program (weighting scheme (A) of Ghosh et al. 2020). It checks the Stan program independently and
computes what one fit's generated quantities cannot: the held-out predictive density of a
leave-within-series-out fold, ``log p(y_t | y_{-O}, theta)`` for ``t`` in ``O``, on the draws
of any fit, so that exact refits and the IJ from the full-data draws score the same thing.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import poisson

__all__ = [
    "hmm_draws",
    "forward_backward",
    "held_out_log_density",
    "log_marginal",
    "fold_elpd",
    "fold_elpd_ij",
]


def hmm_draws(post) -> tuple[np.ndarray, np.ndarray]:
    """``rates`` (S, 2) and ``transitions`` (S, 2, 2) from a posterior of ``poisson_hmm``;
    ``transitions[s, j, k] = P(z_t = k | z_{t-1} = j)`` (Stan's ``Gamma[j][k]``)."""
    flat = post.quantities.values.reshape(-1, post.quantities.shape[-1])
    column = {name: i for i, name in enumerate(post.quantity_names)}
    rates = flat[:, [column["lambda[1]"], column["lambda[2]"]]]
    transitions = np.stack(
        [flat[:, [column[f"Gamma[{j},{k}]"] for k in (1, 2)]] for j in (1, 2)], axis=1
    )
    return rates, transitions


def forward_backward(rates, transitions, y, weights=None):
    """Weighted forward and backward log messages.

    Parameters
    ----------
    rates : ndarray of shape (S, 2)
    transitions : ndarray of shape (S, 2, 2)
    y : ndarray of shape (T,)
    weights : ndarray of shape (T,), optional
        Multiply the emission log densities (default: ones).

    Returns
    -------
    log_alpha, log_beta, log_emission : ndarray of shape (S, T, 2)
        ``log p(y_1..y_t, z_t = k)`` and ``log p(y_{t+1}..y_T | z_t = k)``, weighted, and
        the unweighted ``log p(y_t | z_t = k)``.
    """
    y = np.asarray(y)
    weights = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    log_emission = poisson.logpmf(y[None, :, None], rates[:, None, :])
    weighted = weights[None, :, None] * log_emission
    log_gamma = np.log(transitions)
    stay_away = transitions[:, [1, 0], [0, 1]]  # Gamma[2][1], Gamma[1][2]
    log_start = np.log(stay_away / stay_away.sum(axis=1, keepdims=True))
    n_draws, n_times = rates.shape[0], y.size
    log_alpha = np.empty((n_draws, n_times, 2))
    log_beta = np.zeros((n_draws, n_times, 2))
    log_alpha[:, 0] = log_start + weighted[:, 0]
    for t in range(1, n_times):
        log_alpha[:, t] = logsumexp(log_alpha[:, t - 1, :, None] + log_gamma, axis=1)
        log_alpha[:, t] += weighted[:, t]
    for t in range(n_times - 2, -1, -1):
        after = weighted[:, t + 1] + log_beta[:, t + 1]
        log_beta[:, t] = logsumexp(log_gamma + after[:, None, :], axis=2)
    return log_alpha, log_beta, log_emission


def log_marginal(rates, transitions, y, weights=None) -> np.ndarray:
    """``log p(y; theta, w)`` per draw, shape (S,)."""
    log_alpha, _, _ = forward_backward(rates, transitions, y, weights)
    return logsumexp(log_alpha[:, -1], axis=1)


def held_out_log_density(rates, transitions, y, weights) -> np.ndarray:
    """``log sum_k P(z_t = k | weighted y, theta) p(y_t | z_t = k)``, shape (S, T).

    Where ``weights[t] = 0`` this is the held-out predictive density ``log p(y_t | y_{-O},
    theta)`` of a fold ``O`` (the points of weight 0), the quantity Ghosh et al. (2020) score in
    leave-within-series-out CV.
    """
    log_alpha, log_beta, log_emission = forward_backward(rates, transitions, y, weights)
    log_total = logsumexp(log_alpha[:, -1], axis=1)[:, None, None]
    return logsumexp(log_alpha + log_beta - log_total + log_emission, axis=2)


def _fold_densities(post, y, fold) -> tuple[np.ndarray, np.ndarray]:
    """``log p(y_t | y_{-O}, theta_s)`` for ``t`` in the fold, shape (S, |O|), and the fold."""
    fold = np.asarray(fold, dtype=int)
    weights = np.ones(len(y))
    weights[fold] = 0.0
    rates, transitions = hmm_draws(post)
    return held_out_log_density(rates, transitions, y, weights)[:, fold], fold


def fold_elpd(post, y, fold) -> float:
    """``sum_{t in O} log mean_s p(y_t | y_{-O}, theta_s)`` on the draws of ``post``.

    On the draws of the refit with weights 0 on the fold ``O`` (0-based positions) this is
    the exact leave-within-series-out elpd of the fold.
    """
    log_density, _ = _fold_densities(post, y, fold)
    return float(np.sum(logsumexp(log_density, axis=0) - np.log(log_density.shape[0])))


def fold_elpd_ij(post, y, fold) -> float:
    """The IJ approximation of :func:`fold_elpd` at the refit from the full-data draws.

    ``sum_{t in O} log(E[g_t] - Cov(g_t, sum_{u in O} d_u))`` with ``g_t = p(y_t | y_{-O},
    theta)`` and ``d_u`` the weight derivatives: ``post``'s log-likelihood must be the
    model's ``weight_derivative``. NaN where the first-order density is not positive.

    References
    ----------
    .. [1] Ghosh et al. (2020), Approximate cross-validation for structured models, NeurIPS
       33: leave-within-structure-out CV for HMMs by the IJ, weighting
       scheme (A).
    """
    log_density, fold = _fold_densities(post, y, fold)
    derivative = post.log_lik.values.reshape(-1, post.n_obs)[:, fold].sum(axis=1)
    shift = log_density.max(axis=0)
    density = np.exp(log_density - shift)
    mean = density.mean(axis=0)
    covariance = (density - mean).T @ (derivative - derivative.mean()) / (density.shape[0] - 1)
    with np.errstate(invalid="ignore"):
        return float(np.sum(np.log(mean - covariance) + shift))
