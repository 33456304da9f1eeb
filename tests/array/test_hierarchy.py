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


@pytest.mark.parametrize("tau_shape", [(3, 5), (2, 4, 1), (4,)])
def test_a_tau_of_another_shape_than_the_draws_is_named(tau_shape):
    """(2, 4) draws: a tau per draw must be (2, 4) (a broadcast error before)."""
    from bayesij.array.hierarchy import intercept_group_log_lik, normal_group_log_lik

    mu = np.random.default_rng(0).normal(size=(2, 4, 1))
    y, codes = np.array([0.4, -0.3, 1.1, 0.9]), np.array([0, 0, 1, 1])
    tau = np.ones(tau_shape)
    with pytest.raises(ValueError, match=r"^tau: found shape .*one per draw \(2, 4\)"):
        intercept_group_log_lik(lambda a: -0.5 * (y - mu - a) ** 2, codes, tau)
    with pytest.raises(ValueError, match=r"^tau: found shape"):
        normal_group_log_lik(y - mu, codes, tau=tau, sigma=1.0)
    good = intercept_group_log_lik(lambda a: -0.5 * (y - mu - a) ** 2, codes, np.ones((2, 4)))
    assert good.shape == (2, 4, 2)


def _intercept_and_slope(seed=3, n_groups=4, per_group=5):
    """Each group's observations, covariate and correlated (intercept, slope) prior."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(n_groups), per_group)
    x = rng.normal(size=codes.size)
    cov = np.array([[0.8, 0.3], [0.3, 0.5]])
    return rng, codes, x, cov


def test_two_effects_per_group_integrate_to_the_multivariate_normal_marginal():
    """A normal likelihood with a random intercept and slope, (a0, a1) ~ N(0, Sigma):
    y_g ~ N(m_g, sigma^2 I + Z_g Sigma Z_g'), Z_g = [1, x_g]; the rotated grid is exact."""
    from scipy.stats import multivariate_normal

    from bayesij.array.hierarchy import integrate_effect_vectors

    rng, codes, x, cov = _intercept_and_slope()
    y, sigma = rng.normal(size=codes.size), 0.7
    precision, (_, log_det) = np.linalg.inv(cov), np.linalg.slogdet(2 * np.pi * cov)

    def joint(a):  # (1, 1, G, 2) -> (1, 1, G)
        mean = a[..., codes, 0] + a[..., codes, 1] * x
        obs = -0.5 * ((y - mean) / sigma) ** 2 - np.log(np.sqrt(2 * np.pi) * sigma)
        prior = -0.5 * np.einsum("...i,ij,...j->...", a, precision, a) - 0.5 * log_det
        return np.stack([obs[..., codes == g].sum(-1) for g in range(4)], -1) + prior

    ours = integrate_effect_vectors(joint, (1, 1, 4, 2), np.sqrt(np.diag(cov)), n_nodes=6)
    for g in range(4):
        z = np.column_stack([np.ones(5), x[codes == g]])
        marginal = multivariate_normal(np.zeros(5), sigma**2 * np.eye(5) + z @ cov @ z.T)
        np.testing.assert_allclose(ours[0, 0, g], marginal.logpdf(y[codes == g]), rtol=1e-10)


def test_two_effects_of_a_poisson_group_integrate_as_scipy_does():
    """A Poisson GLMM with an intercept and a slope per group: 16 x 16 rotated nodes
    against SciPy's adaptive double integral."""
    from scipy.integrate import dblquad
    from scipy.special import gammaln

    from bayesij.array.hierarchy import integrate_effect_vectors

    rng, codes, x, cov = _intercept_and_slope(seed=5, n_groups=2)
    y = rng.poisson(np.exp(0.3 + 0.4 * x))
    precision, (_, log_det) = np.linalg.inv(cov), np.linalg.slogdet(2 * np.pi * cov)

    def log_group(g, a0, a1):
        eta = 0.3 + a0 + a1 * x[codes == g]
        prior = -0.5 * np.array([a0, a1]) @ precision @ np.array([a0, a1]) - 0.5 * log_det
        return np.sum(y[codes == g] * eta - np.exp(eta) - gammaln(y[codes == g] + 1)) + prior

    def joint(a):
        eta = 0.3 + a[..., codes, 0] + a[..., codes, 1] * x
        obs = y * eta - np.exp(eta) - gammaln(y + 1)
        prior = -0.5 * np.einsum("...i,ij,...j->...", a, precision, a) - 0.5 * log_det
        return np.stack([obs[..., codes == g].sum(-1) for g in range(2)], -1) + prior

    ours = integrate_effect_vectors(joint, (1, 1, 2, 2), 1.0)
    for g in range(2):
        value, _ = dblquad(
            lambda a1, a0, g=g: np.exp(log_group(g, a0, a1)),
            -8,
            8,
            -8,
            8,
            epsabs=1e-14,
            epsrel=1e-10,
        )
        np.testing.assert_allclose(ours[0, 0, g], np.log(value), rtol=1e-7)
