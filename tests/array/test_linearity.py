"""The linearity check's pieces against their definitions: the linear change ``-psi =
-Cov(f, l_u)`` (divisor S - 1), the PSIS change ``sum_s w_s f_s - mean f`` with the
smoothed leave-one-out weights of ``-l_u`` (the weights computed here from psis_chunk), and
the nonlinearity index ``sqrt(sum (d_is - d_lin)^2 / sum d_lin^2)`` over units with k-hat at
most the threshold (Giordano & Broderick 2023; Vehtari et al. 2024)."""

import numpy as np
import pytest

from bayesij.array.linearity import LinearityArrays, leave_out_changes, nonlinearity_index
from bayesij.array.psis import psis_chunk, tail_length


def test_changes_are_their_definitions():
    rng = np.random.default_rng(9)
    y = rng.normal(size=12)
    mu = rng.normal(y.mean(), 0.3, size=(2, 500, 1))
    f = np.concatenate([mu, mu**2], axis=2)
    log_lik = -0.5 * (y - mu) ** 2
    changes = leave_out_changes(f, log_lik, r_eff=1.0)
    flat_f, flat_l = f.reshape(1000, 2), log_lik.reshape(1000, 12)
    for u in range(12):
        for k in range(2):
            psi = np.cov(flat_f[:, k], flat_l[:, u])[0, 1]
            assert changes.delta_lin[k, u] == pytest.approx(-psi, rel=1e-10)
    smoothed = psis_chunk(-flat_l, tail_length(1000, np.ones(12)))
    weights = np.exp(smoothed.log_weights)
    weights /= weights.sum(axis=0)
    expected = flat_f.T @ weights - flat_f.mean(axis=0)[:, None]
    np.testing.assert_allclose(changes.delta_is, expected, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(changes.pareto_k, smoothed.pareto_k, rtol=1e-12)


def test_the_index_leaves_out_high_k_units():
    changes = LinearityArrays(
        delta_lin=np.array([[1.0, 2.0, -1.0]]),
        delta_is=np.array([[1.1, 2.0, 5.0]]),
        pareto_k=np.array([0.2, 0.5, 0.9]),
        mcse_lin=np.zeros((1, 3)),
    )
    index, used = nonlinearity_index(changes, 0.7)
    np.testing.assert_array_equal(used, [True, True, False])
    assert index[0] == pytest.approx(np.sqrt(0.01 / 5.0), rel=1e-14)


def test_impossible_units_are_refused():
    log_lik = np.zeros((1, 100, 3))
    log_lik[0, 5, 1] = -np.inf
    with pytest.raises(ValueError, match=r"^log_lik: found -inf values"):
        leave_out_changes(np.random.default_rng(0).normal(size=(1, 100, 1)), log_lik)
