"""Regressions for AMIP tests whose exact refits are known (conjugate normal posteriors)."""

import numpy as np

from bayesij import refit


def leveraged_slope(seed):
    """A near-zero slope held up by six high-leverage points (every draw positive), N = 100:
    the influence is strongly nonlinear, so reweighting soon becomes unreliable."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=100)
    y = 0.05 * x + rng.normal(size=100)
    x[:6] = rng.uniform(2.0, 3.0, 6)
    y[:6] = 0.9 * x[:6] + rng.normal(size=6) * 0.3
    backend = refit.ConjugateNormalBackend(np.column_stack([np.ones(100), x]), y, draws=4000)
    return backend, backend.fit(np.ones(100))


def exact_smallest(backend, order):
    """The smallest prefix of ``order`` whose exact posterior has a negative slope."""
    for size in range(1, len(order) + 1):
        weights = np.ones(backend.n_obs)
        weights[list(order[:size])] = 0
        if backend.exact_means(weights)[1] < 0:
            return size
    return None
