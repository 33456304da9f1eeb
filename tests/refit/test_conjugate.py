"""The closed-form ground truth itself checked against independent computations: the
weighted posterior against a regression on rows repeated by integer weights (the same
likelihood), its draws' moments, the exact leave-one-out predictive against numerical
integration over the posterior, and a weight of 0 as deleting the row."""

import numpy as np
import pytest
from scipy import integrate, stats

from bayesij.refit.conjugate import ConjugateNormal


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(15), rng.normal(size=15)])
    y = X @ [0.5, -1.0] + rng.normal(size=15) * 0.8
    return ConjugateNormal(X, y, sigma=0.8, prior_cov=4 * np.eye(2))


def test_integer_weights_are_repeated_rows_and_zero_deletes(model):
    weights = np.array([2, 1, 0, 3] + [1] * 11)
    rows = np.repeat(np.arange(15), weights)
    repeated = ConjugateNormal(model.X[rows], model.y[rows], sigma=0.8, prior_cov=4 * np.eye(2))
    for ours, theirs in zip(model.posterior(weights), repeated.posterior(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_draws_have_the_posterior_moments(model):
    mean, cov = model.posterior()
    draws = model.draws(200_000, np.random.default_rng(1))
    standard_errors = np.sqrt(cov.diagonal() / 2e5)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * standard_errors)
    np.testing.assert_allclose(np.cov(draws.T), cov, rtol=0.02, atol=1e-4)


def test_the_loo_predictive_is_the_integral_over_the_posterior(model):
    weights = np.ones(15)
    weights[4] = 0
    mean, cov = model.posterior(weights)
    x, y = model.X[4], model.y[4]
    location, scale = x @ mean, np.sqrt(x @ cov @ x)

    def integrand(z):  # over the linear predictor's posterior
        return stats.norm.pdf(z, location, scale) * stats.norm.pdf(y, z, 0.8)

    value, _ = integrate.quad(integrand, location - 12 * scale, location + 12 * scale)
    assert model.log_predictive(weights, [4])[0] == pytest.approx(np.log(value), rel=1e-9)
    log_lik = model.log_lik(np.array([[0.5, -1.0]]))
    np.testing.assert_allclose(log_lik[0], stats.norm.logpdf(model.y, model.X @ [0.5, -1.0], 0.8))
