"""A Poisson regression recovered from its draws: each observation's count, offset and
slopes against the data and the draws that made the log-likelihood (exact mathematics:
``l = y eta - exp(eta) - log(y!)`` with ``eta = x theta``), and other log-likelihoods not
taken for one."""

import numpy as np
import pytest
from logistic_amip import (
    LOGISTIC,
    POISSON,
    assert_prior_known_from_the_gradient,
    counts_like,
    log_lik,
    sample,
    wells_like,
)
from scipy.special import gammaln

from bayesij.array import amip_logistic
from bayesij.array.amip_counts import poisson_coefficients
from bayesij.array.amip_logistic import RECOVERED, predictors_affine, recover_glm


@pytest.fixture(scope="module")
def counts():
    X, y = counts_like(500, 0)
    beta, gradient = sample(X, y, seed=1, family=POISSON)
    theta = beta.reshape(-1, 4)
    return X, y, theta, log_lik(X, y, theta, POISSON), gradient.reshape(-1, 4)


def _eta(model, theta):
    u = np.linalg.lstsq(model.basis, (theta - model.mean).T, rcond=None)[0].T
    return model.offsets + u @ model.slopes


def test_each_count_and_linear_predictor_is_recovered_exactly(counts):
    X, y, theta, values, _ = counts
    model = recover_glm(theta, values)
    assert model is not None and "Poisson regression" in model.decided_by
    np.testing.assert_array_equal(model.counts, y)
    np.testing.assert_allclose(_eta(model, theta), theta @ X.T, rtol=1e-9, atol=1e-9)
    assert predictors_affine(theta, values[:, :40])


def test_recovered_a_block_at_a_time_it_is_the_model_recovered_at_once(counts, monkeypatch):
    X, y, theta, values, _ = counts
    whole = recover_glm(theta, values)

    def blocks(rows):  # as a lazy log-likelihood is read: 100 observations a block
        for start in range(0, y.size, 100):
            yield values[rows, start : start + 100]

    monkeypatch.setattr(amip_logistic, "TILE_COLUMNS", 64)
    tiled = recover_glm(theta, blocks)
    np.testing.assert_array_equal(tiled.counts, whole.counts)
    for name in ("offsets", "slopes", "precision", "pull"):
        np.testing.assert_allclose(getattr(tiled, name), getattr(whole, name), atol=1e-12)


def test_a_set_s_laplace_approximation_is_the_poisson_posterior_s(counts):
    """The mode and covariance of the posterior without a set: the log posterior's
    gradient, ``sum s_n (y_n - exp(eta_n)) - P u + pull``, is 0 at the mode and its
    Hessian, ``-sum exp(eta_n) s_n s_n' - P``, the inverse of minus the covariance (the
    Poisson formulas written out here)."""
    X, y, theta, values, _ = counts
    model = recover_glm(theta, values)
    dropped = np.array([3, 40, 41, 250])
    mode, cov = amip_logistic._laplace(model, *amip_logistic._kept(model, dropped))
    keep = np.ones(y.size, dtype=bool)
    keep[dropped] = False
    slopes, eta = model.slopes[:, keep], model.offsets[keep] + mode @ model.slopes[:, keep]
    gradient = slopes @ (y[keep] - np.exp(eta)) - model.precision @ mode + model.pull
    np.testing.assert_allclose(gradient, 0.0, atol=1e-8)
    hessian = -(slopes * np.exp(eta)) @ slopes.T - model.precision
    np.testing.assert_allclose(np.linalg.inv(-hessian), cov, rtol=1e-10)


def test_with_the_gradient_the_poisson_regression_s_prior_is_known(counts):
    # The flat-prior draws' score less the Poisson likelihood's gradient: no prior; a
    # normal prior N(0, 2^2 I) on the coefficients adds -theta / 4 to the score.
    X, y, theta, values, gradient = counts
    assert_prior_known_from_the_gradient(theta, values, gradient)


def test_a_set_s_importance_weights_are_those_of_the_poisson_posterior(counts):
    """The importance sample of a set's removal: its draws from the t proposal at the
    Laplace approximation, weighted by the posterior without the set over the proposal,
    ``exp(sum (y_n eta_n - exp(eta_n)) - u'Pu/2 + pull'u - log q(u))`` (written out here)."""
    X, y, theta, values, gradient = counts
    model = recover_glm(theta, values, gradient - theta / 4)
    dropped = np.argsort(-y)[:10]
    u, w, _ = amip_logistic.importance_sample(model, dropped)
    mode, cov = amip_logistic._laplace(model, *amip_logistic._kept(model, dropped))
    drawn, proposal = amip_logistic.t_proposal(mode, cov, amip_logistic.CHECK_DRAWS, 0)
    np.testing.assert_array_equal(u, drawn)
    keep = np.ones(y.size, dtype=bool)
    keep[dropped] = False
    eta = model.offsets[keep] + u @ model.slopes[:, keep]
    log_lik = (y[keep] * eta - np.exp(eta)).sum(axis=1)
    prior = u @ model.pull - 0.5 * np.einsum("si,ij,sj->s", u, model.precision, u)
    log_w = log_lik + prior - proposal
    want = np.exp(log_w - log_w.max())
    np.testing.assert_allclose(w, want / want.sum(), rtol=1e-9)


def test_a_removal_s_moves_are_its_derivatives_in_the_prior_s_precision(counts):
    # As the logistic regression's: the sensitivity toward each batch's estimate of the
    # prior (the implicit function theorem at the mode, the Poisson likelihood's third
    # derivative exp(eta) included) against finite differences of the removal worked out
    # anew at the moved precision.
    X, y, theta, values, _ = counts
    model = recover_glm(theta, values)
    assert len(model.batches)  # the prior from the draws alone: its batches' estimates
    quantity = amip_logistic.affine_in(model, theta[:, 1], theta)
    dropped = np.argsort(-y)[:15]  # the largest counts
    step = 1e-5
    for sign in (0, 1):
        got = amip_logistic.removal(model, dropped, quantity, sign, 1.96)
        for b in (0, 11, 39):
            toward = model.batches[b] - model.precision
            moved = model._replace(
                precision=model.precision + step * toward, batches=np.zeros((0, 4, 4))
            )
            again = amip_logistic.removal(moved, dropped, quantity, sign, 1.96)
            want = (again.mid - got.mid) / step
            assert got.moves[b] == pytest.approx(want, rel=1e-3, abs=1e-6)


@pytest.mark.parametrize(
    ("count", "mean"), [(0, 4.15), (0, 3.83), (17, 6.0), (0, 0.01), (250, 240)]
)
def test_a_count_whose_equation_barely_has_a_root_is_recovered(count, mean):
    # A zero count near a mean of e^(2 - 0.577) = 4.15 has a nearly tangent equation for
    # its expected count: the quadratic's error can leave it without a root (so was one of
    # 500 observations of the counts-like regression, mean 3.83); 17 at a mean of 6 came
    # out one count off the rounding.
    rng = np.random.default_rng(3)
    u = rng.standard_normal((256, 2))
    slopes = np.array([[0.06, 0.03], [0.09, -0.04], [0.12, 0.05]])
    eta = np.log(mean) + u @ slopes.T  # (256, 3)
    values = count * eta - np.exp(eta) - gammaln(count + 1)
    found = poisson_coefficients(values, u, RECOVERED)
    assert found is not None
    np.testing.assert_array_equal(found[-1], count)
    np.testing.assert_allclose(found[0], np.log(mean), rtol=0, atol=1e-10)
    np.testing.assert_allclose(found[1:-1], slopes.T, rtol=0, atol=1e-10)


def test_other_log_likelihoods_are_not_taken_for_poisson_ones(counts):
    X, y, theta, values, _ = counts
    rows = amip_logistic._recovery_rows(theta.shape[0])
    u = amip_logistic._whitened(theta)[2][rows]
    eta = theta @ X.T
    # a negative binomial of size 2 (the data's own law), a fixed size in the model
    size = 2.0
    negative_binomial = (
        gammaln(y + size)
        - gammaln(size)
        - gammaln(y + 1)
        + size * np.log(size / (size + np.exp(eta)))
        + y * (eta - np.log(size + np.exp(eta)))
    )
    assert poisson_coefficients(negative_binomial[rows], u, RECOVERED) is None
    assert recover_glm(theta, negative_binomial) is None
    # a Poisson log-likelihood saved without log(y!): the count is what it says it is
    assert poisson_coefficients(values[rows] + gammaln(y + 1), u, RECOVERED) is None
    # a logistic regression's observations, and normal ones with their sd a parameter
    Xw, yw = wells_like(400, 3)
    beta, _ = sample(Xw, yw, seed=1)
    logistic_theta = beta.reshape(-1, 4)
    logistic = log_lik(Xw, yw, logistic_theta, LOGISTIC)
    logistic_u = amip_logistic._whitened(logistic_theta)[2][rows]
    assert poisson_coefficients(logistic[rows], logistic_u, RECOVERED) is None
    sigma = np.exp(0.1 * np.random.default_rng(0).standard_normal(theta.shape[0]))
    normal = -0.5 * ((np.log1p(y) - eta / 4) / sigma[:, None]) ** 2 - np.log(sigma)[:, None]
    with_sigma = np.column_stack([theta, sigma])
    assert recover_glm(with_sigma, normal - 1.0) is None
    # a value above 0 is no probability's log
    assert poisson_coefficients(np.abs(values[rows]), u, RECOVERED) is None


def test_a_count_model_poisson_to_nine_digits_is_not_taken_for_one(counts):
    # A negative binomial of size 10^9 departs from the Poisson by about mu^2 / size: what
    # its best Poisson fit leaves is past RECOVERED (1e-18 of the variance) and below 1e-12,
    # so the threshold alone refuses it (20 observations: too few for the share of astray
    # starts to judge them).
    X, y, theta, _, _ = counts
    rows = amip_logistic._recovery_rows(theta.shape[0])
    u = amip_logistic._whitened(theta)[2][rows]
    X, y = X[:20], y[:20]
    eta = theta[rows] @ X.T
    size, mean = 1e9, np.exp(eta)
    rising = np.array([np.sum(np.log1p(np.arange(int(k)) / size)) for k in y])  # log of
    near = (  # Gamma(y + size) / Gamma(size) / size^y, exactly
        rising + y * eta - (y + size) * np.log1p(mean / size) - gammaln(y + 1)
    )
    assert poisson_coefficients(near, u, RECOVERED) is None
    found = poisson_coefficients(near, u, 1e-12)
    assert found is not None
    np.testing.assert_array_equal(found[-1], y)


def test_too_few_draws_for_the_quadratic_recover_nothing():
    # 20 parameters: the quadratic fit has 231 columns, more than half of 256 draws
    rng = np.random.default_rng(0)
    u = rng.standard_normal((256, 20))
    eta = 1.0 + 0.05 * u @ rng.standard_normal((20, 5))
    values = 2 * eta - np.exp(eta) - np.log(2.0)
    assert poisson_coefficients(values, u, RECOVERED) is None
    assert poisson_coefficients(values, u[:, :10], RECOVERED) is None  # not its draws
    eta = 1.0 + 0.05 * u[:, :10] @ rng.standard_normal((10, 5))  # 10: 66 columns
    found = poisson_coefficients(2 * eta - np.exp(eta) - np.log(2.0), u[:, :10], RECOVERED)
    np.testing.assert_array_equal(found[-1], 2.0)


@pytest.mark.stan
@pytest.mark.slow
def test_a_stan_poisson_regression_s_counts_are_recovered_from_its_draws():
    # stan_models/poisson_regression.stan (exposure offset, normal priors) sampled by
    # PyStan on overdispersed counts: the counts recovered from the HMC draws and the
    # log-likelihood Stan wrote (poisson_log_lpmf, log y! included) are the data's, and
    # each linear predictor is Stan's own eta at every draw.
    pytest.importorskip("stan")
    import bayesij
    from bayesij.refit.stan import build_model
    from bayesij.stan_models import example_data, stan_code

    data = example_data("negbin_regression", n=300, seed=3)
    data = {k: data[k] for k in ("N", "K", "X", "y", "exposure", "weights")}
    model = build_model(stan_code("poisson_regression"), data=data, random_seed=1)
    fit = model.sample(num_chains=4, num_samples=1000, num_warmup=500)
    post = bayesij.from_pystan(fit)
    names = ["alpha", "beta[1]"]
    theta = np.column_stack([post.quantities.sel(quantity=n).values.reshape(-1) for n in names])
    recovered = recover_glm(theta, post.log_lik.values.reshape(theta.shape[0], -1))
    assert recovered is not None
    np.testing.assert_array_equal(recovered.counts, data["y"])
    eta = np.log(data["exposure"]) + theta[:, :1] + theta[:, 1:] @ np.asarray(data["X"]).T
    np.testing.assert_allclose(_eta(recovered, theta), eta, rtol=0, atol=1e-9)
