"""The closed-form ground truth itself checked against independent computations: the
weighted posterior against a regression on rows repeated by integer weights (the same
likelihood), its draws' moments, the exact leave-one-out predictive against numerical
integration over the posterior, and a weight of 0 as deleting the row."""

import numpy as np
import pytest
from scipy import integrate, stats

from bayesij.refit.conjugate import ConjugateNormal, FlatPriorRegression


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


def _flat_prior_model(n=60, seed=3):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    return FlatPriorRegression(X, 1 + X[:, 1] + rng.standard_t(3, size=n))


def _log_posterior(model, beta, log_sigma, weights):
    """The flat-prior log posterior in (beta, log sigma), written out."""
    sigma = np.exp(log_sigma)
    resid = model.y - model.X @ beta
    return np.sum(weights * (-0.5 * (resid / sigma) ** 2 - log_sigma))


def test_flat_prior_regression_moments_are_those_of_ols_with_a_t_posterior():
    model = _flat_prior_model()
    weights = np.r_[np.zeros(5), np.ones(55)]
    mean, sd = model.posterior_moments(weights)
    X, y = model.X[5:], model.y[5:]
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    rss = np.sum((y - X @ ols) ** 2)
    np.testing.assert_allclose(mean, ols, rtol=1e-10)
    np.testing.assert_allclose(sd, np.sqrt(rss / (55 - 2 - 2) * np.diag(np.linalg.inv(X.T @ X))))
    beta, sigma = model.draws(200_000, np.random.default_rng(1), weights)
    np.testing.assert_allclose(beta.mean(axis=0), mean, atol=4 * sd.max() / np.sqrt(2e5))
    np.testing.assert_allclose(beta.std(axis=0), sd, rtol=0.01)
    # sigma^2 ~ RSS / chi^2_nu: E[sigma^2] = RSS / (nu - 2).
    assert np.mean(sigma**2) == pytest.approx(rss / (53 - 2), rel=0.01)


def test_flat_prior_regression_score_is_the_gradient_of_the_log_posterior():
    model = _flat_prior_model()
    weights = np.r_[0.5, np.ones(59)]
    beta, sigma = np.array([[0.8, 1.3]]), np.array([1.7])
    score = model.grad_log_posterior(beta, sigma, weights)[0]
    point = np.r_[beta[0], np.log(sigma[0])]
    step = 1e-6
    numeric = [
        (
            _log_posterior(model, (point + step * e)[:2], (point + step * e)[2], weights)
            - _log_posterior(model, (point - step * e)[:2], (point - step * e)[2], weights)
        )
        / (2 * step)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(score, numeric, rtol=1e-6)
