"""PSIS and IJ leave-future-out from draws (bayesij.stats.lfo) against the closed form of a
conjugate AR(2) model with known noise. (Exact LFO by refits: tests/refit/test_lfo.py.)"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij.refit import ConjugateNormalBackend
from conjugate import ar2_fit, lfo_closed_form

REFERENCE = Path(__file__).parents[1] / "reference"

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
    assert table["refitted"].iloc[0] and np.isnan(table["pareto_k"].iloc[0])  # exact start
    assert np.all(table.loc[table["refitted"], "pareto_k"].iloc[1:] > 0.7)
    assert np.all(table.loc[~table["refitted"], "pareto_k"] <= 0.7)
    error = np.abs(table["elpd"].to_numpy() - truth)
    assert np.all(error < 4 * table["mcse"].to_numpy() + 0.05), error.max()
    assert abs(result.elpd - truth.sum()) < 3 * result.mcse + 0.05


def test_psis_needs_a_backend_and_the_backward_variant_does_not(ar2):
    _, post = ar2
    with pytest.raises(ValueError, match=r"backend: found None; expected a refit backend"):
        bayesij.lfo(post, min_train=MIN_TRAIN)
    without = bayesij.lfo(post, min_train=MIN_TRAIN, method="psis-backward")
    assert without.n_refits == 0 and without.pointwise["pareto_k"].max() > 0.7
    assert "k-hat above 0.7" in str(without)


def _lake_huron(seed: int):
    """Lake Huron levels (R's datasets::LakeHuron), centred, as an AR(2) with intercept,
    known noise sd 0.7 and the conjugate N(0, 100 I) prior: 4 x 500 exact draws."""
    level = pd.read_csv(REFERENCE / "lake_huron.csv")["level"].to_numpy()
    y = level - level.mean()
    lags = np.column_stack([np.ones(y.size - 2), y[1:-1], y[:-2]])
    backend = ConjugateNormalBackend(lags, y[2:], sigma=0.7, draws=2000, chains=4, seed=seed)
    return backend, backend.fit(np.ones(y.size - 2))


@pytest.mark.slow  # a coverage study: the full suite runs it
@pytest.mark.parametrize("horizon", [1, 4])
def test_forward_psis_lfo_on_lake_huron_is_unbiased_and_covered_by_its_mcse(horizon):
    # Bürkner, Gabry and Vehtari's forward algorithm against the closed-form LFO of a real
    # series, over 10 independent sets of 4 x 500 draws: each run is inside 3 of its own
    # MCSEs (+ 0.05) with at most a third of the origins refitted, and the mean error (the
    # bias) is indistinguishable from 0 (within 2.5 standard errors of the mean, + 0.05).
    # At M = 4 one run's Monte Carlo sd is about 0.5 nat with 2000 draws, so no single run
    # can promise 0.15.
    errors, backward_errors = [], []
    for seed in range(10):
        backend, post = _lake_huron(seed)
        truth = lfo_closed_form(backend, 20, horizon).sum()
        result = bayesij.lfo(post, backend, min_train=20, horizon=horizon)
        error = result.elpd - truth
        assert abs(error) <= 3 * result.mcse + 0.05, (seed, error, result.mcse)
        assert result.n_refits <= len(result.pointwise) / 3
        errors.append(error)
        backward = bayesij.lfo(post, min_train=20, horizon=horizon, method="psis-backward")
        backward_errors.append((backward.elpd - truth) / backward.mcse)
    bias_se = np.std(errors, ddof=1) / np.sqrt(len(errors))
    assert abs(np.mean(errors)) < 2.5 * bias_se + 0.05, errors
    # Why backward is not the default: from the full-data draws it is optimistic by several
    # of its own MCSEs (its proposal is narrower than every target).
    assert np.mean(backward_errors) > 3, backward_errors


@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_the_lfo_mcse_is_the_spread_of_the_estimate_over_independent_draws(ar2):
    backend, _ = ar2
    estimates, mcses = [], []
    for seed in range(12):
        fit = ConjugateNormalBackend(backend.model.X, backend.model.y, draws=1000, seed=seed)
        result = bayesij.lfo(fit.fit(np.ones(T)), fit, min_train=MIN_TRAIN, horizon=3)
        estimates.append(result.elpd)
        mcses.append(result.mcse)
    ratio = np.std(estimates, ddof=1) / np.sqrt(np.mean(np.square(mcses)))
    assert 0.5 < ratio < 1.6, ratio


@pytest.mark.parametrize("horizon", [1, 4])
def test_ij_lfo_errors_of_nats_are_called_unreliable_on_lake_huron(horizon):
    backend, post = _lake_huron(0)
    truth = lfo_closed_form(backend, 20, horizon).sum()
    result = bayesij.lfo(post, min_train=20, horizon=horizon, method="ij")
    assert result.elpd - truth > 2  # first order is optimistic by nats here ...
    assert result.verdict == "unreliable"  # ... and the check says so, never "doubtful"
    assert result.unchecked > 0.1 * len(result.pointwise)
    assert f"{result.unchecked} of {len(result.pointwise)} origins unchecked" in str(result)


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
    with pytest.raises(ValueError, match=r"weight_derivative: found a value with method='psis-"):
        bayesij.lfo(
            post, min_train=MIN_TRAIN, method="psis-backward", weight_derivative=post.log_lik.values
        )
