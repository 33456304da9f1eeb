"""Fixtures shared by the labelled-estimator tests."""

import pytest

import bayesij


@pytest.fixture
def post(rng):
    """Two quantities over 12 observations, one of them (s) outside the likelihood."""
    theta = rng.normal(size=(4, 300, 2))
    y = rng.normal(size=12)
    log_lik = -0.5 * (y - theta[..., :1]) ** 2 - 0.1 * theta[..., 1:] ** 2
    return bayesij.from_arrays(
        theta, log_lik, quantity_names=["mu", "s"], obs_names=[f"o{i}" for i in range(12)]
    )
