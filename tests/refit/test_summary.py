"""A refit's JSON summary against direct computations: the quantities' means and sds, their
MCSE (sd / sqrt(S r_eff)), and the held-out points' log predictive densities, one by one
and jointly (log mean_s exp(sum_j l_sj))."""

import numpy as np
import pytest
from scipy.special import logsumexp

import bayesij
from bayesij.refit.summary import summarise


def test_summary_of_a_fit():
    rng = np.random.default_rng(2)
    theta = rng.normal([1.0, -2.0], [0.5, 0.1], size=(4, 300, 2))
    log_lik = rng.normal(-1, 0.3, size=(4, 300, 6))
    post = bayesij.from_arrays(theta, log_lik, quantity_names=["a", "b"])
    record = summarise(post, points=[1, 4])
    flat = theta.reshape(1200, 2)
    np.testing.assert_allclose(record["mean"], flat.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(record["sd"], flat.std(axis=0, ddof=1), rtol=1e-13)
    iid = np.array(record["sd"]) / np.sqrt(1200)
    assert np.all((0 < np.array(record["mcse"])) & (np.array(record["mcse"]) < 1.5 * iid))
    held_out = log_lik.reshape(1200, 6)[:, [1, 4]]
    np.testing.assert_allclose(record["lpd"], logsumexp(held_out, axis=0) - np.log(1200))
    joint = logsumexp(held_out.sum(axis=1)) - np.log(1200)
    assert record["lpd_joint"] == pytest.approx(joint, rel=1e-13)
    assert record["quantities"] == ["a", "b"] and record["n_draws"] == 1200
    assert summarise(post)["lpd"] == [] and "lpd_joint" not in summarise(post)
