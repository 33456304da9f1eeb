"""The Pareto-smoothed probability integral transform: a weighted ECDF value refined in
either tail of the predictive draws by a generalized Pareto fit, so that an observation
beyond most draws gets a PIT value between 0 and 1 from the fitted tail instead of 0 or 1.

For each observation, with predictive draws ``y_s`` and normalised weights ``w_s``:

1. the ``M = floor(3 sqrt(S))`` largest draws (``floor(S / 5)`` for ``S <= 225``, at most
   ``S / 2``, at least 5) above the next one, the cutoff (lowered by one machine epsilon
   when it equals the smallest of them), get a generalized Pareto fit in which each
   exceedance counts by its weight (Zhang and Stephens' empirical Bayes fit with the weakly
   informative prior on k);
2. where the observation lies above that cutoff and the fit is finite, its PIT is
   ``1 - W (1 - F(y))`` with ``W`` the tail draws' share of the weight and ``F`` the fitted
   distribution function; otherwise the same from the left tail (the draws negated), where
   the observation lies below its cutoff: ``W_left (1 - F_left(-y))``;
3. values are kept within ``[1 / (10^4 S), 1 - 1 / (10^4 S)]``.

This is arviz-stats' ``loo_pit(..., pareto_pit=True)`` (1.3), which arviz-plots' ``pot_c``
and ``piet_c`` uniformity tests of continuous PIT values use.

References
----------
.. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
   importance sampling. JMLR 25(72) (the tail fit and its prior).
.. [2] Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for the
   generalized Pareto distribution. Technometrics 51(3), 316-325.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["pareto_pit_columns", "weighted_gpd_fit", "gpd_cdf", "pit_tail_length"]

_EPS = float(np.finfo(float).eps)


def pit_tail_length(n_draws: int) -> int:
    """The draws in each tail fit: ``floor(3 sqrt(S))`` (``floor(S / 5)`` for ``S <= 225``),
    at most ``S // 2``; a tail shorter than 5 is not fitted."""
    length = int(np.floor(3 * np.sqrt(n_draws))) if n_draws > 225 else n_draws // 5
    return min(length, n_draws // 2)


def weighted_gpd_fit(x: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """Zhang and Stephens' generalized Pareto fit with each exceedance weighted.

    Parameters
    ----------
    x : ndarray of shape (m,)
        Exceedances over the cutoff, ascending, positive.
    weights : ndarray of shape (m,)
        Their weights (normalised here to sum to ``m``).

    Returns
    -------
    k, sigma : float
        ``k`` with the weakly informative prior ``(m k + 5) / (m + 10)``; ``(nan, nan)``
        where the first quartile is not above the smallest exceedance (far from a Pareto
        tail), ``(inf, nan)`` where the fit fails.
    """
    m = x.size
    grid = 30 + int(m**0.5)
    weights = weights / weights.sum() * m
    quartile = x[int((m / 4 + 0.5) - 1)]
    if quartile <= x[0]:
        return np.nan, np.nan
    theta = 1 - np.sqrt(grid / (np.arange(1, grid + 1, dtype=float) - 0.5))
    theta /= 3 * quartile
    theta += 1 / x[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        k_grid = np.log1p(-theta[:, None] * x) @ weights / m
        profile = m * (np.log(-theta / k_grid) - k_grid - 1)
        posterior = np.exp(profile - logsumexp(profile))
    kept = posterior >= 10 * _EPS
    if not kept.all():
        posterior, theta = posterior[kept], theta[kept]
    posterior /= posterior.sum()
    theta_hat = np.sum(theta * posterior)
    with np.errstate(invalid="ignore"):
        k = np.sum(weights * np.log1p(-theta_hat * x)) / m
    sigma = -k / theta_hat
    k = (m * k + 10 * 0.5) / (m + 10)
    if np.isnan(k):
        return np.inf, np.nan
    return float(k), float(sigma)


def gpd_cdf(q: float, mu: float, sigma: float, k: float) -> float:
    """The generalized Pareto distribution function at ``q``, clipped to [0, 1]."""
    z = (q - mu) / sigma
    if abs(k) < 1e-15:
        p = -np.expm1(-z)
    else:
        with np.errstate(divide="ignore"):
            p = -np.expm1(np.log1p(max(k * z, -1.0)) / -k)
    return float(np.clip(p, 0.0, 1.0))


def pareto_pit_columns(
    values: np.ndarray, observed: np.ndarray, weights: np.ndarray, raw_pit: np.ndarray
) -> np.ndarray:
    """Pareto-smoothed PIT of each column (module docstring).

    Parameters
    ----------
    values : ndarray of shape (S, n)
        Predictive draws of each observation.
    observed : ndarray of shape (n,)
    weights : ndarray of shape (S, n)
        Normalised importance weights of the draws.
    raw_pit : ndarray of shape (n,)
        The weighted ECDF's PIT (ties already resolved), refined in the tails.

    Returns
    -------
    ndarray of shape (n,)
    """
    n_draws = values.shape[0]
    length = pit_tail_length(n_draws)
    floor = 1.0 / n_draws / 1e4
    out = np.asarray(raw_pit, dtype=float).copy()
    if length >= 5:
        for j in range(values.shape[1]):
            if np.isfinite(values[:, j]).all():
                out[j] = _refined(values[:, j], observed[j], weights[:, j], out[j], length)
    return np.clip(out, floor, 1.0 - floor)


def _refined(draws, y, weights, pit, length):
    """One observation's PIT refined in the tail beyond which it lies, if any."""
    for sign in (1.0, -1.0):  # the right tail, then the left (the draws negated)
        order = np.argsort(sign * draws)
        ordered = sign * draws[order]
        tail = ordered[-length:]
        if np.all(tail == tail[0]):
            continue
        cutoff = ordered[-length - 1]
        if cutoff == tail[0]:
            cutoff -= _EPS
        tail_weights = weights[order][-length:]
        k, sigma = weighted_gpd_fit(tail - cutoff, tail_weights)
        if np.isfinite(k) and not np.isnan(sigma) and sign * y > cutoff:
            beyond = tail_weights.sum() * (1.0 - gpd_cdf(sign * y, cutoff, sigma, k))
            return 1.0 - beyond if sign > 0 else beyond
    return pit
