"""Leave-future-out's bookkeeping against exact arithmetic: the origins and the cumulative
sums from which every block of the future is summed (Bürkner, Gabry & Vehtari 2020)."""

import numpy as np
import pytest

from bayesij.array.lfo import cumulative_log_lik, lfo_origins, psis_lfo
from bayesij.array.psis import psis_chunk, tail_length


def test_origins_run_from_min_train_to_the_last_full_horizon():
    np.testing.assert_array_equal(lfo_origins(10, 6, 1), [6, 7, 8, 9])
    np.testing.assert_array_equal(lfo_origins(10, 6, 3), [6, 7])
    np.testing.assert_array_equal(lfo_origins(10, 7, 3), [7])
    with pytest.raises(ValueError, match=r"^min_train: found 8 with horizon 3 for 10"):
        lfo_origins(10, 8, 3)
    with pytest.raises(ValueError, match=r"^horizon: "):
        lfo_origins(10, 5, 0)


def test_cumulative_sums_give_every_block():
    rng = np.random.default_rng(0)
    log_lik = rng.normal(size=(5, 9))
    cumulative = cumulative_log_lik(log_lik)
    assert cumulative.shape == (5, 10)
    for a in range(9):
        for b in range(a, 10):
            np.testing.assert_allclose(
                cumulative[:, b] - cumulative[:, a], log_lik[:, a:b].sum(axis=1), atol=1e-12
            )


def _weighted_log_mean(block, log_weights):
    weights = np.exp(log_weights - log_weights.max())
    return np.log(np.sum(weights * np.exp(block)) / weights.sum())


def test_psis_lfo_adds_the_observations_since_the_fit_forward_and_removes_them_backward():
    rng = np.random.default_rng(3)
    log_lik = rng.normal(-1.0, 0.3, size=(4000, 12))
    cumulative = cumulative_log_lik(log_lik)
    exact = psis_lfo(cumulative, 5, 5, 2)  # the fit itself: equal weights, no k-hat
    assert np.isnan(exact.pareto_k)
    np.testing.assert_allclose(exact.elpd, np.log(np.mean(np.exp(log_lik[:, 5:7].sum(1)))))
    for origin, fitted_to in ((8, 5), (5, 8)):  # forward: + l_5..l_7; backward: - l_5..l_7
        step = psis_lfo(cumulative, origin, fitted_to, 2)
        sign = 1.0 if origin > fitted_to else -1.0
        ratios = sign * log_lik[:, 5:8].sum(axis=1)
        smoothed = psis_chunk(ratios[:, None], tail_length(4000, np.ones(1)))
        block = log_lik[:, origin : origin + 2].sum(axis=1)
        assert step.pareto_k == pytest.approx(smoothed.pareto_k[0], rel=1e-9)  # sum order
        np.testing.assert_allclose(
            step.elpd, _weighted_log_mean(block, smoothed.log_weights[:, 0]), rtol=1e-9
        )


def test_the_residuals_are_each_draws_share_of_the_relative_error():
    # Equal weights: residual_s = (g_s / mean g - 1) / S, whose norm is the relative SE of
    # the mean, sd(g) / (mean g sqrt(S)) up to the ddof.
    rng = np.random.default_rng(4)
    log_lik = rng.normal(-1.0, 0.5, size=(2000, 6))
    step = psis_lfo(cumulative_log_lik(log_lik), 2, 2, 3)
    g = np.exp(log_lik[:, 2:5].sum(axis=1))
    np.testing.assert_allclose(step.residual, (g / g.mean() - 1) / g.size, rtol=1e-10)
    relative_se = g.std() / g.mean() / np.sqrt(g.size)
    np.testing.assert_allclose(np.linalg.norm(step.residual), relative_se, rtol=1e-10)
    assert step.residual.sum() == pytest.approx(0.0, abs=1e-12)
