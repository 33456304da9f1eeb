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


@pytest.mark.parametrize("shape", [0.3, 0.8, 1.2])
def test_the_held_out_k_hat_recovers_a_pareto_tail(shape):
    # exp(l) = U^(-k) is Pareto with tail index 1/k: the k-hat of the predictive density's
    # draws is k, within its sampling error (4000 draws); above 0.7 the refit's Monte
    # Carlo mean of the density is unreliable, and the record says so beside it.
    from bayesij.refit.summary import held_out_khat

    uniforms = [np.random.default_rng(seed).uniform(size=(4, 1000, 1)) for seed in range(8)]
    fits = np.array([held_out_khat(-shape * np.log(u))[0] for u in uniforms])
    assert abs(fits.mean() - shape) < 0.1 and np.all(np.abs(fits - shape) < 0.35), fits
    u, k = uniforms[0], fits[0]
    post = bayesij.from_arrays(np.zeros((4, 1000, 1)), np.concatenate([-shape * np.log(u)] * 2, 2))
    record = summarise(post, points=[0, 1], point_groups=[0, 0])
    assert record["lpd_khat"] == pytest.approx([k, k])
    assert record["lpd_joint_khat"] == pytest.approx(held_out_khat(-2 * shape * np.log(u))[0])
    assert record["lpd_groups_khat"] == pytest.approx([record["lpd_joint_khat"]])
