"""PSIS and IJ leave-future-out from draws (bayesij.stats.lfo) against the closed form of a
conjugate AR(2) model with known noise. (Exact LFO by refits: tests/refit/test_lfo.py.)"""

import numpy as np
import pytest

import bayesij
from conjugate import ar2_fit, lfo_closed_form

T, MIN_TRAIN = 80, 20


@pytest.fixture(scope="module")
def ar2():
    return ar2_fit(T)


@pytest.mark.parametrize("horizon", [1, 3])
def test_psis_lfo_is_within_a_few_mcse_with_far_fewer_refits(ar2, horizon):
    backend, post = ar2
    result = bayesij.lfo(post, backend, min_train=MIN_TRAIN, horizon=horizon)
    truth = lfo_closed_form(backend, MIN_TRAIN, horizon)
    table = result.pointwise
    assert 0 < result.n_refits < len(table) / 5
    assert table["refitted"].sum() == result.n_refits
    assert np.all(table.loc[table["refitted"], "pareto_k"] > 0.7)
    error = np.abs(table["elpd"].to_numpy() - truth)
    assert np.all(error < 4 * table["mcse"].to_numpy() + 0.05), error.max()
    assert abs(result.elpd - truth.sum()) < 0.5
    without = bayesij.lfo(post, min_train=MIN_TRAIN, horizon=horizon)  # no backend: no refit
    assert without.n_refits == 0 and without.pointwise["pareto_k"].max() > 0.7
    assert "k-hat above 0.7" in str(without)


def test_ij_lfo_reports_its_error_and_its_linearity_verdict(ar2):
    backend, post = ar2
    result = bayesij.lfo(post, min_train=MIN_TRAIN, method="ij")
    truth = lfo_closed_form(backend, MIN_TRAIN, 1)
    error = np.abs(result.pointwise["elpd"].to_numpy() - truth)
    late = result.pointwise["n_past"].to_numpy() >= T - 10  # little future removed
    assert error[late].max() < 0.05
    assert result.verdict in ("doubtful", "unreliable") and result.nonlinearity > 0.1
    assert "Linearity of the first-order approximation" in str(result)


def test_weight_derivatives_equal_to_the_terms_give_the_plain_ij(ar2):
    # A model whose weighted likelihood is sum_t w_t l_t has d log p / d w_t = l_t.
    _, post = ar2
    plain = bayesij.lfo(post, min_train=MIN_TRAIN, horizon=2, method="ij")
    given = bayesij.lfo(
        post, min_train=MIN_TRAIN, horizon=2, method="ij", weight_derivative=post.log_lik.values
    )
    np.testing.assert_allclose(given.pointwise["elpd"], plain.pointwise["elpd"], rtol=0, atol=1e-12)
    doubled = bayesij.lfo(
        post,
        min_train=MIN_TRAIN,
        horizon=2,
        method="ij",
        weight_derivative=2 * post.log_lik.values,
    )
    assert not np.allclose(doubled.pointwise["elpd"], plain.pointwise["elpd"])
    with pytest.raises(ValueError, match=r"weight_derivative: found a value with method='psis'"):
        bayesij.lfo(post, min_train=MIN_TRAIN, weight_derivative=post.log_lik.values)
