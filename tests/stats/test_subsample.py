"""LOO subsampling: the difference estimator against the full PSIS-LOO — exact when every
observation is sampled, and its subsampling SE covering the full value at the nominal rate
over many seeds."""

import warnings

import numpy as np
import pytest

import bayesij

N = 2000


def _regression(scale: float, seed: int = 0):
    """Draws of (intercept, slope) near the posterior, normal y: (S, D), X, y. (With
    heavy-tailed y, t with 4 degrees of freedom, a few observations dominate the
    differences elpd - approximation and m = 100 covers 79 % only.)"""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=N)
    y = 1 + 0.5 * x + 1.3 * rng.normal(size=N)
    X = np.column_stack([np.ones(N), x])
    beta = np.array([1.0, 0.5]) + rng.normal(size=(1000, 2)) * 0.03
    return beta, X, y, scale


def _log_lik(data, beta, scale=1.3):
    mean = beta @ data["X"].T
    return -0.5 * ((data["y"] - mean) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


@pytest.fixture(scope="module")
def fit():
    beta, X, y, _ = _regression(1.3)
    matrix = _log_lik({"X": X, "y": y}, beta).reshape(4, 250, N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = bayesij.loo(matrix)
    return beta, X, y, matrix, full


def test_sampling_every_observation_gives_the_full_psis_loo(fit):
    *_, matrix, full = fit
    every = bayesij.loo_subsample(matrix, N)
    assert every.elpd == pytest.approx(full.elpd, rel=1e-12)
    assert every.subsampling_se == 0.0
    assert every.se == pytest.approx(full.se, rel=1e-9)


def test_the_subsampling_se_covers_the_full_value_at_the_nominal_rate(fit):
    *_, matrix, full = fit
    hits, errors = 0, []
    for seed in range(200):
        result = bayesij.loo_subsample(matrix, 100, seed=seed)
        errors.append(result.elpd - full.elpd)
        hits += abs(result.elpd - full.elpd) <= 1.96 * result.subsampling_se
        assert result.se == pytest.approx(full.se, rel=0.25)
    assert 0.90 <= hits / 200 <= 0.99, hits
    assert abs(np.mean(errors)) < 3 * np.std(errors) / np.sqrt(200)  # unbiased


def test_point_approximation_from_a_log_likelihood_function(fit):
    beta, X, y, matrix, full = fit
    lazy = bayesij.loglik_function(_log_lik, {"X": X, "y": y}, beta, n_chains=4)
    lpd = bayesij.loo_subsample(lazy, 200, seed=3)
    plpd = bayesij.loo_subsample(lazy, 200, approximation="plpd", seed=3)
    assert lpd.elpd == pytest.approx(bayesij.loo_subsample(matrix, 200, seed=3).elpd, rel=1e-12)
    for result in (lpd, plpd):
        assert abs(result.elpd - full.elpd) < 4 * result.subsampling_se
    np.testing.assert_allclose(
        plpd.approximations, _log_lik({"X": X, "y": y}, beta.mean(axis=0, keepdims=True))[0]
    )
    with pytest.raises(ValueError, match=r"approximation: found 'plpd' without parameter"):
        bayesij.loo_subsample(matrix, 200, approximation="plpd")


def test_compare_takes_subsampled_results_on_the_same_subsample(fit):
    beta, X, y, matrix, full = fit
    wide = _log_lik({"X": X, "y": y}, beta, scale=2.0).reshape(4, 250, N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full_table = bayesij.compare({"good": full, "wide": bayesij.loo(wide)})
    results = {
        "good": bayesij.loo_subsample(matrix, 150, seed=7),
        "wide": bayesij.loo_subsample(wide, 150, seed=7),
    }
    table = bayesij.compare(results)
    assert list(table.index) == ["good", "wide"] and table.loc["good", "elpd_diff"] == 0
    gap = table.loc["wide", "elpd_diff"] - full_table.loc["wide", "elpd_diff"]
    assert abs(gap) < 4 * table.loc["wide", "subsampling_se_diff"] + 1e-9
    assert table.loc["wide", "se_diff"] == pytest.approx(full_table.loc["wide", "se_diff"], rel=0.3)
    with pytest.raises(ValueError, match=r"results: found 'wide' subsampled on other"):
        bayesij.compare({"good": results["good"], "wide": bayesij.loo_subsample(wide, 150, seed=8)})
    with pytest.raises(ValueError, match=r"results: found a LooResult for 'full' beside"):
        bayesij.compare({"good": results["good"], "full": full})


def test_subsample_arguments_are_checked(fit):
    *_, matrix, _ = fit
    with pytest.raises(ValueError, match=r"observations: found 2001; expected at most the 2000"):
        bayesij.loo_subsample(matrix, N + 1)
    with pytest.raises(ValueError, match=r"approximation: found 'waic'; expected one of"):
        bayesij.loo_subsample(matrix, 100, approximation="waic")
    with pytest.raises(ValueError, match=r"observations: found 1; expected an integer >= 2"):
        bayesij.loo_subsample(matrix, 1)
