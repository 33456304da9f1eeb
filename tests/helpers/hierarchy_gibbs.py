"""Exact refits of ``benchmarks/audit.py``'s varying-intercept model (``y ~ N(alpha[g],
sigma)``, ``alpha ~ N(mu, tau)``, flat priors) without a set of observations: its Gibbs
sampler, every conditional exact (each from the groups' sums, so a sweep costs
O(groups)), which the benchmark also draws its fit with."""

import numpy as np


def gibbs_draws(y, group, rng, warmup: int, draws: int) -> dict:
    """4 chains x ``draws`` of the exact Gibbs sampler after ``warmup`` sweeps, for ``y``
    (n,) in groups ``group`` (n,; codes 0..G-1, every one present), from the generator
    ``rng``: ``{"mu", "tau", "sigma"}`` of shape (4, draws) and ``"alpha"`` (4, draws, G)."""
    n_groups, n_obs = group.max() + 1, y.size
    count, total = np.bincount(group), np.bincount(group, weights=y)
    squares = float(y @ y)
    mu, tau, sigma = np.full(4, y.mean()), np.ones(4), np.ones(4)
    kept = {"mu": [], "tau": [], "sigma": [], "alpha": []}
    for sweep in range(warmup + draws):
        precision = count / sigma[:, None] ** 2 + 1 / tau[:, None] ** 2
        mean = (total / sigma[:, None] ** 2 + (mu / tau**2)[:, None]) / precision
        alpha = mean + rng.normal(size=mean.shape) / np.sqrt(precision)
        mu = alpha.mean(axis=1) + tau / np.sqrt(n_groups) * rng.normal(size=4)
        spread = ((alpha - mu[:, None]) ** 2).sum(axis=1)
        tau = np.sqrt(spread / 2 / rng.gamma((n_groups - 1) / 2, size=4))
        residual = squares - 2 * alpha @ total + (alpha**2) @ count
        sigma = np.sqrt(residual / 2 / rng.gamma(n_obs / 2, size=4))
        if sweep >= warmup:
            for name, value in zip(kept, (mu, tau, sigma, alpha), strict=True):
                kept[name].append(value)
    return {name: np.stack(values, axis=1) for name, values in kept.items()}


def posterior_means(y, group, seed: int = 5, warmup: int = 300, draws: int = 5000) -> dict:
    """Posterior means of ``mu``, ``tau`` and ``sigma`` given ``y`` (n,) in groups
    ``group`` (n,; the levels present are renumbered), from 4 chains of the exact Gibbs
    sampler, run long enough that they are known to about 0.002."""
    _, group = np.unique(group, return_inverse=True)
    found = gibbs_draws(y, group, np.random.default_rng(seed), warmup, draws)
    return {name: float(np.mean(found[name])) for name in ("mu", "tau", "sigma")}
