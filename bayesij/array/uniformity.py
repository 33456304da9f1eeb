"""Pointwise tests of uniformity combined by the Cauchy combination (Tesso & Vehtari
2026): each sorted PIT value (or each draw's position among chains) is tested on its own,
the p-values are mapped to Cauchy variables and averaged, which stays valid under
arbitrary dependence between the values (LOO-PIT values are dependent), and each value's
Shapley contribution says which values drive the result."""

from __future__ import annotations

import numpy as np
from scipy.special import betainc
from scipy.stats import binom, hypergeom

__all__ = [
    "UNIFORMITY_METHODS",
    "pointwise_p_values",
    "cauchy_combination",
    "shapley_of_mean",
    "chain_rank_p_values",
]

#: The pointwise tests: the i-th order statistic against its Beta(i, n + 1 - i) law
#: ("pot_c"), each value's rank against its Binomial(n, u) law ("prit_c"), each value
#: against the uniform ("piet_c").
UNIFORMITY_METHODS = ("pot_c", "prit_c", "piet_c")


def pointwise_p_values(sorted_values: np.ndarray, method: str) -> np.ndarray:
    """Two-sided p-values (n,) of the pointwise tests of ``method`` for ascending values
    in [0, 1] (n,).

    References
    ----------
    .. [1] Tesso, T. and Vehtari, A. (2026). Pointwise tests of uniformity for dependent
       PIT values with the Cauchy combination. arXiv:2603.02928.
    """
    n = sorted_values.size
    if method == "pot_c":  # the i-th of n uniforms is Beta(i, n + 1 - i)
        order = np.arange(1, n + 1)
        below = betainc(order, order[::-1], sorted_values)
        return 2 * np.minimum(below, 1 - below)
    if method == "prit_c":  # the count at or below u of n uniforms is Binomial(n, u)
        counts = np.searchsorted(sorted_values, sorted_values, side="right")
        lower = binom.cdf(counts, n, sorted_values)
        upper = 1 - binom.cdf(counts - 1, n, sorted_values)
        return 2 * np.minimum(lower, upper)
    return 2 * np.minimum(sorted_values, 1 - sorted_values)  # "piet_c"


def cauchy_combination(p_values: np.ndarray, *, truncate: bool) -> tuple[float, np.ndarray]:
    """The Cauchy combination test's p-value and each test's Cauchy variable
    ``tan((0.5 - p) pi)`` (n,); ``truncate``: terms with ``p >= 0.5`` count as 0 in the mean
    (still divided by n)."""
    cauchy = np.tan((0.5 - p_values) * np.pi)
    terms = np.where(p_values < 0.5, cauchy, 0.0) if truncate else cauchy
    return float(0.5 - np.arctan(np.mean(terms)) / np.pi), cauchy


def shapley_of_mean(values: np.ndarray) -> np.ndarray:
    """Shapley values (n,) of the players of the game ``v(S) = mean of values over S``
    (``v`` of the empty set 0): each value's share of the combined statistic, in closed form
    ``v_i / n + (H_n - 1) / n (v_i - mean of the others)``, ``H_n`` the n-th harmonic
    number."""
    n = values.size
    if n < 2:
        return np.zeros(n)
    harmonic = np.sum(1.0 / np.arange(1, n + 1))
    others = (np.sum(values) - values) / (n - 1)
    return values / n + (harmonic - 1) / n * (values - others)


def chain_rank_p_values(ranks: np.ndarray) -> np.ndarray:
    """Mid-p two-sided p-values (n_draws, n_chains) of each chain's count of fractional
    ranks below ``z_j = j / (n_draws + 1)`` against its hypergeometric law (the chains
    exchangeable: n_draws of the n_chains * n_draws ranks drawn without replacement).

    Parameters
    ----------
    ranks : ndarray of shape (n_chains, n_draws)
        Fractional ranks in [0, 1] of the pooled draws, by chain.
    """
    n_chains, n_draws = ranks.shape
    z = np.arange(1, n_draws + 1) / (n_draws + 1)
    total = n_chains * n_draws
    below = np.floor(z * total).astype(int)  # the pooled ranks below z_j
    ordered = np.sort(ranks, axis=1)
    p_values = np.empty((n_draws, n_chains))
    for chain in range(n_chains):
        count = np.searchsorted(ordered[chain], z, side="right")
        mass = hypergeom.pmf(count, total, n_draws, below)
        lower = hypergeom.cdf(count, total, n_draws, below) - 0.5 * mass
        p_values[:, chain] = 2 * np.minimum(lower, 1 - lower)
    return p_values
