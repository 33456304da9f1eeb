"""A normal hierarchy's group log-likelihoods with the group effect integrated out, against
the multivariate normal density computed directly (scipy)."""

import numpy as np
import pytest

from bayesij.array.hierarchy import normal_group_log_lik


def test_the_normal_group_log_lik_is_the_multivariate_normal_density():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    codes = np.array([0, 1, 1, 2, 2, 2])
    r = rng.normal(size=(2, 3, 6))
    tau, sigma = rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, (2, 3))
    ours = normal_group_log_lik(r, codes, tau, sigma)
    for c in range(2):
        for s in range(3):
            for g in range(3):
                n = int((codes == g).sum())
                cov = sigma[c, s] ** 2 * np.eye(n) + tau[c, s] ** 2
                expected = multivariate_normal(np.zeros(n), cov).logpdf(r[c, s, codes == g])
                np.testing.assert_allclose(ours[c, s, g], expected, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^tau: found values that are not finite and positive"):
        normal_group_log_lik(r, codes, -1.0, 1.0)


def test_quadrature_over_a_normal_intercept_equals_the_closed_form_and_direct_integration():
    """Gauss-Hermite quadrature of a normal likelihood equals normal_group_log_lik; of a
    logistic one, scipy's adaptive integration of the same integral, per group and draw."""
    from scipy.integrate import quad
    from scipy.special import log_expit

    from bayesij.array.hierarchy import intercept_group_log_lik

    rng = np.random.default_rng(2)
    codes = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    y = rng.normal(size=codes.size)
    mu = rng.normal(size=(2, 3, 1))
    tau, sigma = rng.uniform(0.3, 1.5, (2, 3)), 1.0
    ours = intercept_group_log_lik(
        lambda a: -0.5 * (y - mu - a) ** 2 - 0.5 * np.log(2 * np.pi), codes, tau
    )
    np.testing.assert_allclose(ours, normal_group_log_lik(y - mu, codes, tau, sigma), rtol=1e-9)

    outcome = (rng.uniform(size=codes.size) < 0.4).astype(float)
    eta = rng.normal(-0.3, 0.5, size=(2, 3, codes.size))

    def bernoulli(a):
        return outcome * log_expit(eta + a) + (1 - outcome) * log_expit(-(eta + a))

    ours = intercept_group_log_lik(bernoulli, codes, tau)
    for c, s, g in [(0, 0, 0), (1, 2, 1), (0, 1, 2)]:
        rows, sd = codes == g, tau[c, s]
        direct = np.log(
            quad(
                _bernoulli_integrand,
                -12 * sd,
                12 * sd,
                (eta[c, s, rows], outcome[rows], sd),
                epsabs=0,
                epsrel=1e-12,
            )[0]
        )
        np.testing.assert_allclose(ours[c, s, g], direct, rtol=1e-8)
    with pytest.raises(ValueError, match=r"^tau: found"):
        intercept_group_log_lik(bernoulli, codes, -1.0)
    with pytest.raises(ValueError, match=r"^log_lik_at\(a\): found shape \(2, 3, 4\)"):
        intercept_group_log_lik(lambda a: np.zeros((2, 3, 4)), codes, 1.0)


def _bernoulli_integrand(a, eta, outcome, sd):
    """prod_n p(y_n | eta_n + a) N(a | 0, sd^2), for scipy's quad."""
    from scipy.special import expit

    p = expit(eta + a)
    like = np.prod(np.where(outcome == 1, p, 1 - p))
    return like * np.exp(-0.5 * (a / sd) ** 2) / (sd * np.sqrt(2 * np.pi))


@pytest.mark.parametrize("n_nodes", [0, 2.7, True, "16"])
def test_the_number_of_nodes_is_a_positive_integer(n_nodes):
    from bayesij.array.hierarchy import intercept_group_log_lik

    y, codes = np.array([0.4, -0.3, 1.1, 0.9]), np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"^n_nodes: found"):
        intercept_group_log_lik(lambda a: -0.5 * (y - a) ** 2, codes, 1.0, n_nodes=n_nodes)


def test_a_log_likelihood_that_is_not_finite_is_named_not_integrated_to_nan():
    from bayesij.array.hierarchy import intercept_group_log_lik

    y, codes = np.array([0.4, np.nan, 1.1, 0.9]), np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"^log_lik_at: found a log-likelihood that is not fin"):
        intercept_group_log_lik(lambda a: -0.5 * (y - a) ** 2, codes, 1.0)
