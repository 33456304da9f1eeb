"""The held-out log predictive density ``log mean_s exp(l_sj)`` against SciPy's logsumexp,
and its Monte Carlo error: the delta method ``sd(p) / (mean(p) sqrt(S r_eff))``, which for
independent draws (one chain of iid draws, r_eff near 1) is the spread of the estimate over
replications."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array.holdout import log_predictive_density


def test_elpd_is_log_mean_exp():
    rng = np.random.default_rng(3)
    log_lik = rng.normal(-2, 1, size=(4, 250, 7))
    out = log_predictive_density(log_lik)
    expected = logsumexp(log_lik.reshape(1000, 7), axis=0) - np.log(1000)
    np.testing.assert_allclose(out.elpd, expected, rtol=1e-13)
    with np.errstate(divide="ignore"):
        impossible = np.log(np.array([[0.0, 0.5], [0.0, 0.25], [0.0, 0.25]]))
    np.testing.assert_allclose(log_predictive_density(impossible).elpd, [-np.inf, np.log(1 / 3)])


def test_the_monte_carlo_error_is_the_spread_over_replications():
    rng = np.random.default_rng(4)
    estimates, errors = [], []
    for _ in range(300):
        log_lik = rng.normal(-1, 0.8, size=(1, 400, 1))
        out = log_predictive_density(log_lik)
        estimates.append(out.elpd[0])
        errors.append(out.mcse[0])
    assert np.mean(errors) == pytest.approx(np.std(estimates), rel=0.15)
