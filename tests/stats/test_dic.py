"""DIC1 and DIC2 against exact values on conjugate models, and bad input."""

import numpy as np
import pytest
from scipy import stats

import bayesij


def test_dic1_and_dic2_agree_for_a_regular_posterior():
    post, at_point = _normal_mean_posterior(ybar_shift=5.0)  # boundary 50 sd away
    result = bayesij.dic(post, log_lik_at_point=at_point)
    np.testing.assert_allclose([result.p_d, result.p_v], [1.0, 1.0], atol=0.03)
    np.testing.assert_allclose(result.dic1, result.dic2, atol=0.05)
    np.testing.assert_allclose(result.dic1_loss - result.btl, result.p_d / 100, rtol=1e-12)


def test_dic1_and_dic2_differ_at_a_boundary():
    """ybar = 0 exactly: u = sqrt(n) mu is half-normal, so p_D = Var(u) = 1 - 2/pi while
    p_V = Var(u^2) / 2 = 1 (Watanabe 2010, section 6: the DICs part when the posterior is not
    normal)."""
    post, at_point = _normal_mean_posterior(ybar_shift=0.0)
    result = bayesij.dic(post, log_lik_at_point=at_point)
    np.testing.assert_allclose(result.p_d, 1 - 2 / np.pi, atol=0.01)
    np.testing.assert_allclose(result.p_v, 1.0, atol=0.03)
    assert result.dic2 - result.dic1 > 0.5
    assert "DIC1 (Spiegelhalter p_D)" in str(result)


def test_dic_without_point_gives_dic2_only():
    post, _ = _normal_mean_posterior(ybar_shift=5.0, n_draws=2000)
    result = bayesij.dic(post)
    assert np.isnan(result.dic1) and np.isfinite(result.dic2)
    assert "DIC1 needs log_lik_at_point" in str(result)


def test_dic_bad_input():
    post, _ = _normal_mean_posterior(ybar_shift=5.0, n_draws=500)
    with pytest.raises(ValueError, match=r"log_lik_at_point: found shape \(3,\); expected one"):
        bayesij.dic(post, log_lik_at_point=np.zeros(3))
    with pytest.raises(ValueError, match=r"log_lik_at_point: found non-finite values"):
        bayesij.dic(post, log_lik_at_point=np.full(100, np.nan))
    with pytest.raises(ValueError, match=r"point: found 'mode'; expected 'mean' or 'median'"):
        bayesij.dic(post, point="mode")
    with pytest.raises(ValueError, match=r"data: found no posterior draws of quantities"):
        bayesij.dic(np.zeros((10, 3)))


def _normal_mean_posterior(ybar_shift, n=100, n_draws=100_000, seed=0):
    """y_i ~ N(mu, 1), flat prior on mu >= 0: mu | y ~ N(ybar, 1/n) truncated at 0."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    y = y - y.mean() + ybar_shift
    scale = 1 / np.sqrt(n)
    lower = (0 - y.mean()) / scale
    mu = stats.truncnorm.rvs(
        lower, np.inf, loc=y.mean(), scale=scale, size=n_draws, random_state=rng
    )
    log_lik = stats.norm.logpdf(y, loc=mu[:, None])
    post = bayesij.from_arrays(mu[:, None], log_lik, quantity_names=["mu"])
    return post, (lambda point: stats.norm.logpdf(y, loc=point["mu"]))
