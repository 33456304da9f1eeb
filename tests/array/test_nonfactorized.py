"""The LOO densities of non-factorized normal and Student-t models per draw (Bürkner, Gabry
& Vehtari 2021) equal the joint density over the marginal of the others (scipy's
multivariate normal and t), from a covariance or a precision (a SAR model's)."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal, multivariate_t

from bayesij.array.nonfactorized import loo_log_densities


def _left_out_directly(y, mu, cov, df=None):
    """log p(y_n | y_-n) = log p(y) - log p(y_-n), one observation at a time."""
    out = []
    for n in range(y.size):
        keep = np.arange(y.size) != n
        sub = cov[np.ix_(keep, keep)]
        if df is None:
            joint = multivariate_normal(mu, cov).logpdf(y)
            rest = multivariate_normal(mu[keep], sub).logpdf(y[keep])
        else:
            joint = multivariate_t(mu, cov, df=df).logpdf(y)
            rest = multivariate_t(mu[keep], sub, df=df).logpdf(y[keep])
        out.append(joint - rest)
    return np.array(out)


@pytest.mark.parametrize("df", [None, 0.6, 4.5])
def test_each_draws_densities_are_joint_over_marginal(df):
    rng = np.random.default_rng(1)
    n_obs = 12
    a = rng.normal(size=(2, 3, n_obs, n_obs))
    covariances = a @ np.swapaxes(a, 2, 3) + n_obs * np.eye(n_obs)
    means = rng.normal(size=(2, 3, n_obs))
    y = rng.normal(size=n_obs) * 3
    freedom = None if df is None else np.full((2, 3), df) + np.arange(3)  # varies by draw
    out = loo_log_densities(y, means, covariances, df=freedom)
    for c, d in np.ndindex(2, 3):
        expected = _left_out_directly(
            y, means[c, d], covariances[c, d], None if df is None else freedom[c, d]
        )
        np.testing.assert_allclose(out[c, d], expected, rtol=1e-10, atol=1e-10)
    from_precision = loo_log_densities(y, means, precision=np.linalg.inv(covariances), df=freedom)
    np.testing.assert_allclose(from_precision, out, rtol=1e-9, atol=1e-9)
    shared = loo_log_densities(y, means, covariances[0, 0], df=freedom)  # one matrix
    np.testing.assert_allclose(shared[0, 0], out[0, 0], rtol=1e-12)


def test_sar_precision_equals_its_covariance():
    """A lag-SAR model's precision (I - rho W)'(I - rho W)/sigma^2 gives the same LOO
    densities as its covariance."""
    rng = np.random.default_rng(2)
    n_obs = 15
    W = (np.abs(np.subtract.outer(np.arange(n_obs), np.arange(n_obs))) == 1).astype(float)
    W /= W.sum(axis=1, keepdims=True)
    rho, sigma = rng.uniform(0.1, 0.6, size=(2, 5)), rng.uniform(0.5, 1.5, size=(2, 5))
    A = np.eye(n_obs) - rho[..., None, None] * W
    precision = np.swapaxes(A, 2, 3) @ A / sigma[..., None, None] ** 2
    mean = np.linalg.solve(A, rng.normal(size=(2, 5, n_obs, 1)))[..., 0]
    y = rng.normal(size=n_obs)
    np.testing.assert_allclose(
        loo_log_densities(y, mean, precision=precision),
        loo_log_densities(y, mean, np.linalg.inv(precision)),
        rtol=1e-9,
    )
    shared = precision[0, 0]  # one matrix for every draw, given as precision or covariance
    np.testing.assert_allclose(
        loo_log_densities(y, mean, precision=shared),
        loo_log_densities(y, mean, np.broadcast_to(np.linalg.inv(shared), precision.shape)),
        rtol=1e-9,
    )


def test_mean_and_draws_must_vary_and_agree():
    with pytest.raises(ValueError, match=r"mean: found one mean and one matrix for all draws"):
        loo_log_densities(np.zeros(4), np.zeros(4), np.eye(4))
    with pytest.raises(ValueError, match=r"mean: found draws \(2, 3\) beside a matrix of draws"):
        loo_log_densities(
            np.zeros(4), np.zeros((2, 3, 4)), np.broadcast_to(np.eye(4), (2, 5, 4, 4))
        )
    with pytest.raises(ValueError, match=r"mean: found shape \(2, 3, 5\)"):
        loo_log_densities(np.zeros(4), np.zeros((2, 3, 5)), np.eye(4))
    with pytest.raises(ValueError, match=r"y: found shape \(1,\)"):
        loo_log_densities(np.zeros(1), np.zeros((2, 3, 1)), np.eye(1))


def test_chunks_of_draws_give_the_same_densities(monkeypatch):
    import bayesij.array.nonfactorized as nonfactorized

    rng = np.random.default_rng(4)
    n_obs = 6
    a = rng.normal(size=(2, 5, n_obs, n_obs))
    covariances = a @ np.swapaxes(a, 2, 3) + n_obs * np.eye(n_obs)
    means, y = rng.normal(size=(2, 5, n_obs)), rng.normal(size=n_obs)
    whole = loo_log_densities(y, means, covariances, df=np.full((2, 5), 3.0))
    monkeypatch.setattr(nonfactorized, "_CHUNK_BYTES", 8 * n_obs * n_obs * 3)  # 3 draws
    np.testing.assert_array_equal(
        loo_log_densities(y, means, covariances, df=np.full((2, 5), 3.0)), whole
    )
    two = loo_log_densities(y[:2], means[..., :2], covariances[..., :2, :2])  # N = 2 works
    assert two.shape == (2, 5, 2) and np.all(np.isfinite(two))


def test_one_chain_of_draws_may_come_without_its_chain_axis():
    rng = np.random.default_rng(7)
    a = rng.normal(size=(1, 4, 5, 5))
    covariances = a @ np.swapaxes(a, 2, 3) + 5 * np.eye(5)
    means, y = rng.normal(size=(1, 4, 5)), rng.normal(size=5)
    expected = loo_log_densities(y, means, covariances, df=np.full((1, 4), 3.0))
    got = loo_log_densities(y, means[0], covariances[0], df=np.full(4, 3.0))
    np.testing.assert_array_equal(got, expected)
