"""The demonstration audit: a real Stan regression in which a few observations matter."""

from __future__ import annotations

import numpy as np

from bayesij.adapters.pystan import from_pystan
from bayesij.data.posterior import Posterior
from bayesij.refit.stan import sample_pystan
from bayesij.stan_models import stan_code

__all__ = ["demo_data", "fit_demo"]


def demo_data(n: int = 80, seed: int = 20261120) -> dict:
    """Data for ``bayesij/stan_models/linear_regression.stan`` with three high-leverage points.

    A weak positive slope (0.3, noise sd 1) over ``n - 3`` ordinary points, plus three
    points far out in x that pull the slope down: the sign of the slope rests on them.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 1.0 + 0.3 * x + rng.normal(size=n)
    x[-3:] = [3.2, 3.6, 4.0]
    y[-3:] = [-2.5, -3.0, -2.0]
    return {"N": n, "K": 1, "X": x[:, None], "y": y, "weights": np.ones(n)}


def fit_demo(
    n: int = 80,
    seed: int = 20261120,
    num_chains: int = 4,
    num_samples: int = 1000,
    progress: bool = False,
) -> tuple[Posterior, dict]:
    """Compile (once; PyStan caches the build) and sample the demo regression.

    Returns the posterior container of ``alpha``, ``beta[1]`` and ``sigma`` and the data.
    ``progress=True`` shows PyStan's progress on stderr.
    """
    data = demo_data(n, seed)
    fit = sample_pystan(
        stan_code("linear_regression"),
        data,
        seed,
        num_chains=num_chains,
        num_samples=num_samples,
        progress=progress,
        num_warmup=1000,
    )
    return from_pystan(fit, quantities=["alpha", "beta", "sigma"]), data
