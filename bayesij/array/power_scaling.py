"""Power-scaling sensitivity: PSIS weights that raise the prior or the likelihood to a power
``alpha`` near 1, and the cumulative Jensen-Shannon distance between the weighted and the
original draws of each quantity.

Raising a component ``c(theta)`` (the log prior, or the summed log-likelihood) to the power
``alpha`` reweights the posterior draws by ``exp((alpha - 1) c)``; the sensitivity of a
quantity is the derivative of the distance between its weighted and unweighted
distributions, ``CJS / |log2 alpha|``, averaged over ``alpha`` just below and above 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bayesij.array.divergences import reweighting_divergence
from bayesij.array.ess import relative_eff
from bayesij.array.psis import psis_chunk

__all__ = [
    "power_scaling_log_weights",
    "power_scaling_weights",
    "cjs_distance",
    "cjs_two_sample",
    "power_sensitivity",
    "scaling_tail",
]


def _tail_relative_eff(component: np.ndarray) -> float:
    """Relative tail ESS of the draws (one chain split in halves): the smaller ESS of the
    indicators of the 5 % and 95 % quantiles, over the number of draws."""
    half = component.size // 2
    values = []
    for prob in (0.05, 0.95):
        indicator = (component <= np.quantile(component, prob)).astype(float)
        if np.ptp(indicator) == 0:
            values.append(1.0)
            continue
        halves = np.stack([indicator[:half], indicator[-half:]])[:, :, None]
        values.append(float(relative_eff(halves)[0]) * 2 * half / component.size)
    return min(values)


def _tail_draws(n_draws: int, r_eff: float) -> int:
    """Tail length of the power-scaling PSIS: ``3 sqrt(S / r_eff)`` (``S / 5`` for small
    ``S r_eff``), at most half and at least 5 draws."""
    raw = np.floor(3 * np.sqrt(n_draws / r_eff)) if n_draws * r_eff > 225 else n_draws // 5
    return int(min(max(raw, 5), n_draws // 2))


def power_scaling_log_weights(component: np.ndarray, alpha: float) -> np.ndarray:
    """Normalised PSIS log weights ``(alpha - 1) c``, shape (S,), of one power-scaling.

    Parameters
    ----------
    component : ndarray of shape (S,)
        The log prior, or the summed log-likelihood, at each draw.
    alpha : float
        The power (near 1).

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    return power_scaling_weights(component, alpha)[0]


def scaling_tail(component: np.ndarray) -> int:
    """The PSIS tail length of a power-scaling of ``component`` (S,)."""
    return _tail_draws(component.size, _tail_relative_eff(component))


def power_scaling_weights(component: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """:func:`power_scaling_log_weights` and the Pareto k-hat of their raw ratios (above
    ``min(1 - 1/log10 S, 0.7)`` the reweighted posterior is not reliably reached)."""
    log_ratios = (alpha - 1.0) * component
    if np.ptp(log_ratios) == 0:  # alpha = 1 (or a constant component): the draws themselves
        return np.full(component.size, -np.log(component.size)), float("-inf")
    tail = scaling_tail(component)
    smoothed = psis_chunk(log_ratios[:, None] - np.max(log_ratios), np.array([tail]), "position")
    log_weights = smoothed.log_weights[:, 0]
    return log_weights - logsumexp(log_weights), float(smoothed.pareto_k[0])


def cjs_distance(draws: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Cumulative Jensen-Shannon distance of weighted from unweighted draws, per column.

    Parameters
    ----------
    draws : ndarray of shape (S, K)
    weights : ndarray of shape (S,)
        Normalised weights.

    Returns
    -------
    ndarray of shape (K,)
        ``sqrt((CJS(P||Q) + CJS(Q||P)) / (int F_P + int F_Q))`` in bits, with ``P`` the
        empirical distribution of the draws and ``Q`` the weighted one (Nguyen and Vreeken
        2015's cumulative JS divergence, normalised as Kallioinen et al.).
    """
    order = np.argsort(draws, axis=0, kind="stable")
    return _cjs(np.take_along_axis(draws, order, axis=0), weights[order])


def cjs_two_sample(draws: np.ndarray, moved: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`cjs_distance` between the empirical distribution of ``draws`` (S, K) and
    the weighted one of other draws ``moved`` (S', K) with normalised ``weights`` (S',)
    (moment-matched draws), per column: both ECDFs on the pooled sorted values."""
    n, m = draws.shape[0], moved.shape[0]
    pooled = np.concatenate([draws, moved])
    p_mass = np.r_[np.full(n, 1 / n), np.zeros(m)]
    q_mass = np.r_[np.zeros(n), weights]
    order = np.argsort(pooled, axis=0, kind="stable")
    x = np.take_along_axis(pooled, order, axis=0)
    cdf_p = np.cumsum(p_mass[order], axis=0)[:-1]
    cdf_q = np.cumsum(q_mass[order], axis=0)[:-1]
    return _cjs_from_cdfs(np.diff(x, axis=0), cdf_p, cdf_q)


def _cjs(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`cjs_distance` of draws ``x`` sorted ascending down each column, with the
    weights ``w`` in the same order (both (S, K))."""
    n_draws = x.shape[0]
    width = np.diff(x, axis=0)
    cdf_p = np.linspace(1 / n_draws, 1 - 1 / n_draws, n_draws - 1)[:, None]
    cdf_q = np.cumsum(w, axis=0)[:-1]
    return _cjs_from_cdfs(width, cdf_p, cdf_q)


def _cjs_from_cdfs(width: np.ndarray, cdf_p: np.ndarray, cdf_q: np.ndarray) -> np.ndarray:
    """The normalised symmetric cumulative JS distance from two CDFs on the same steps."""
    int_p, int_q = (cdf_p * width).sum(axis=0), (cdf_q * width).sum(axis=0)
    mid = _log2(0.5 * (cdf_p + cdf_q))
    pq = np.sum(width * cdf_p * (_log2(cdf_p) - mid), axis=0) + 0.5 / np.log(2) * (int_q - int_p)
    qp = np.sum(width * cdf_q * (_log2(cdf_q) - mid), axis=0) + 0.5 / np.log(2) * (int_p - int_q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((np.maximum(pq, 0) + np.maximum(qp, 0)) / (int_p + int_q))


def _log2(values: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(values).shape)
    np.log2(values, out=out, where=values > 0)
    return out


def power_sensitivity(
    draws: np.ndarray,
    component: np.ndarray,
    alphas=(0.99, 1.01),
    order=None,
    measure: str = "cjs_dist",
) -> tuple[np.ndarray, float]:
    """Power-scaling sensitivity of each quantity to one component, shape (K,), and the
    larger k-hat of the two scalings' importance ratios.

    ``(CJS_lower / -log2(alpha_lower) + CJS_upper / log2(alpha_upper)) / 2``, each CJS the
    larger of the distances of ``f`` and of ``-f`` (the distance is not symmetric in the
    direction of the axis).

    Parameters
    ----------
    draws : ndarray of shape (S, K)
        Draws of the quantities.
    component : ndarray of shape (S,)
        Log prior or summed log-likelihood at each draw.
    alphas : (float, float)
        The powers below and above 1.
    order : ndarray of shape (S, K), optional
        ``argsort`` of ``draws`` down each column, when already computed: the draws are
        sorted once for both powers, both signs (``-f`` sorted is ``f`` sorted, reversed)
        and, in :func:`bayesij.psense`, both components.
    measure : str, default "cjs_dist"
        The distance of the scaled posterior from the posterior: the CJS, or one of
        :func:`bayesij.array.divergences.reweighting_divergence`'s measures.
    """
    if order is None:
        order = np.argsort(draws, axis=0, kind="stable")
    x = np.take_along_axis(draws, order, axis=0)
    gradients, khat = [], -np.inf
    for alpha in alphas:
        log_weights, k = power_scaling_weights(component, alpha)
        khat = max(khat, k)
        if measure == "cjs_dist":
            w = np.exp(log_weights)[order]
            distance = np.maximum(_cjs(x, w), _cjs(-x[::-1], w[::-1]))
        else:
            w = np.exp(log_weights)
            distance = np.array([reweighting_divergence(column, w, measure) for column in draws.T])
        gradients.append(distance / abs(np.log2(alpha)))
    return 0.5 * (gradients[0] + gradients[1]), khat
