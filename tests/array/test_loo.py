"""Array-level pieces of PSIS-LOO checked against their direct definitions."""

import numpy as np
from scipy.special import logsumexp

from bayesij.array.loo import _BLOM, loo_pointwise, mcse_elpd


def test_mcse_series_equals_the_direct_blom_formula():
    # R loo: variance of log(E + sd q) over 1000 Blom quantiles q, i.e. of log1p(c q).
    c = np.r_[np.linspace(0.0, 0.3, 301), [0.31, 0.5, 1.0, 3.0]]
    expected = []
    for value in c:
        z = 1 + value * _BLOM
        logs = np.log(z[z > 0])
        expected.append(np.sqrt(logs.var(ddof=1)))
    np.testing.assert_allclose(mcse_elpd(c, np.ones_like(c)), expected, rtol=1e-12, atol=1e-300)


def test_lppd_of_columns_with_a_huge_log_likelihood_range():
    # A range of 1000 makes exp(min - l) underflow: lppd must come from a log-sum-exp.
    rng = np.random.default_rng(3)
    log_lik = rng.normal(size=(400, 3))
    log_lik[:, 1] *= 400.0
    log_lik[0, 2] = -1000.0
    result = loo_pointwise(log_lik, r_eff=1.0)
    np.testing.assert_allclose(result.lppd, logsumexp(log_lik, axis=0) - np.log(400), rtol=1e-13)
