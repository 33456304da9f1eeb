"""Exact refits of ``benchmarks/audit.py``'s varying-intercept model (``y ~ N(alpha[g],
sigma)``, ``alpha ~ N(mu, tau)``, flat priors) without a set of observations: its Gibbs
sampler, every conditional exact, run long enough that the posterior means are known to
about 0.002."""

import numpy as np


def posterior_means(y, group, seed: int = 5, warmup: int = 300, draws: int = 5000) -> dict:
    """Posterior means of ``mu``, ``tau`` and ``sigma`` given ``y`` (n,) in groups
    ``group`` (n,; the levels present are renumbered), from 4 chains of the exact Gibbs
    sampler."""
    rng = np.random.default_rng(seed)
    _, group = np.unique(group, return_inverse=True)
    n_groups, n_obs = group.max() + 1, y.size
    count, total = np.bincount(group), np.bincount(group, weights=y)
    squares = float(y @ y)
    mu, tau, sigma = np.full(4, y.mean()), np.ones(4), np.ones(4)
    kept = {"mu": [], "tau": [], "sigma": []}
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
            for name, value in zip(kept, (mu, tau, sigma), strict=True):
                kept[name].append(value)
    return {name: float(np.mean(values)) for name, values in kept.items()}
