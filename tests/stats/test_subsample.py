"""LOO subsampling: the difference estimator against the full PSIS-LOO — exact when every
observation is sampled, and its subsampling SE covering the full value at the nominal rate
over many seeds."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesij
from peers import ARVIZ_1, from_dict

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


@pytest.mark.slow  # a coverage study: the full suite runs it
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
    with pytest.raises(ValueError, match=r"observations: found 2001; expected at most the 2000 o"):
        bayesij.loo_subsample(matrix, N + 1)
    with pytest.raises(ValueError, match=r"approximation: found 'waic'; expected one of"):
        bayesij.loo_subsample(matrix, 100, approximation="waic")
    with pytest.raises(ValueError, match=r"observations: found 1; expected an integer >= 2"):
        bayesij.loo_subsample(matrix, 1)
    with pytest.raises(ValueError, match=r"observations: found position 2000; expected distinct"):
        bayesij.loo_subsample(matrix, np.array([3, 2000]))
    with pytest.raises(ValueError, match=r"observations: found repeated positions; expected"):
        bayesij.loo_subsample(matrix, np.array([3, 3]))
    with pytest.raises(ValueError, match=r"observations: found an array of dtype float64"):
        bayesij.loo_subsample(matrix, np.array([3.0, 4.0]))
    first = bayesij.loo_subsample(matrix, np.array([3, 7]))
    with pytest.raises(ValueError, match=r"observations: found positions already sampled \(\[7\]"):
        bayesij.update_subsample(first, matrix, np.array([7, 9]))
    with pytest.raises(ValueError, match=r"data: found 10 observations; expected the 2000"):
        bayesij.update_subsample(first, matrix[..., :10], 2)
    with pytest.raises(ValueError, match=r"result: found a LooResult; expected a LooSubsample"):
        bayesij.update_subsample(bayesij.loo(matrix[..., :10]), matrix, 2)


def test_explicit_positions_and_an_update_equal_one_subsample_of_their_union(fit):
    *_, matrix, _ = fit
    first = bayesij.loo_subsample(matrix, np.array([10, 400, 7, 1999]))
    np.testing.assert_array_equal(first.sampled, [7, 10, 400, 1999])
    updated = bayesij.update_subsample(first, matrix, np.array([5, 1000]))
    union = bayesij.loo_subsample(matrix, np.array([5, 7, 10, 400, 1000, 1999]))
    assert updated.elpd == pytest.approx(union.elpd, rel=1e-12)
    assert updated.se == pytest.approx(union.se, rel=1e-12)
    pd.testing.assert_frame_equal(updated.pointwise, union.pointwise)
    grown = bayesij.update_subsample(first, matrix, 96, seed=4)  # 96 new ones at random
    assert grown.n_sampled == 100 and set(first.sampled) <= set(grown.sampled)
    assert grown.subsampling_se < first.subsampling_se


def test_the_se_is_r_loo_s_srs_difference_estimator(fit):
    # R loo's srs_diff_est (and arviz-stats' _diff_srs_estimator), written out: the
    # subsampling variance enters the SE as + v / N, which sqrt(N var) alone omits.
    *_, matrix, _ = fit
    result = bayesij.loo_subsample(matrix, 150, seed=3)
    e = result.pointwise["elpd_loo"].to_numpy()
    pi = result.approximations.to_numpy()
    pi_m = result.pointwise["approximation"].to_numpy()
    n, m = pi.size, e.size
    t_pi, t_e = pi.sum(), n * np.mean(e - pi_m)
    v = n**2 * (1 - m / n) * np.var(e - pi_m, ddof=1) / m
    total = t_pi + t_e
    hat_v = (
        np.sum(pi**2) + n * np.mean(e**2 - pi_m**2) - (t_e**2 - v + 2 * t_pi * total - t_pi**2) / n
    )
    assert result.elpd == pytest.approx(total, rel=1e-12)
    assert result.subsampling_se == pytest.approx(np.sqrt(v), rel=1e-12)
    assert result.se == pytest.approx(np.sqrt(hat_v), rel=1e-12)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats needs ArviZ 1.x (Python >= 3.12)")
def test_the_subsampled_loo_equals_arviz_stats(fit):
    import arviz_stats

    *_, matrix, _ = fit
    data = from_dict(
        posterior={"mu": np.random.default_rng(0).normal(size=(4, 250))},
        log_likelihood={"y": matrix},
        observed_data={"y": np.zeros(N)},
    )
    positions = np.sort(np.random.default_rng(1).choice(N, 300, replace=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = arviz_stats.loo_subsample(data, observations=positions, pointwise=True)
    ours = bayesij.loo_subsample(data, positions, convention="arviz-stats")
    assert ours.elpd == pytest.approx(theirs.elpd, rel=1e-12)
    assert ours.subsampling_se == pytest.approx(theirs.subsampling_se, rel=1e-8)
    assert ours.se == pytest.approx(theirs.se, rel=1e-8)


def test_subsampled_comparisons_carry_p_worse_and_the_diagnostics(fit):
    """Every observation sampled: the difference estimator is the full comparison, so its
    p_worse and flags are the full compare's (subsampling SE 0); a subsample adds its SE
    to p_worse's normal approximation."""
    beta, X, y, matrix, full = fit
    wide = _log_lik({"X": X, "y": y}, beta, scale=1.1).reshape(4, 250, N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full_table = bayesij.compare({"good": full, "wide": bayesij.loo(wide)})
        whole = {
            "good": bayesij.loo_subsample(matrix, N, seed=1),
            "wide": bayesij.loo_subsample(wide, N, seed=1),
        }
        table = bayesij.compare(whole)
        part = bayesij.compare(
            {
                "good": bayesij.loo_subsample(matrix, 100, seed=2),
                "wide": bayesij.loo_subsample(wide, 100, seed=2),
            }
        )
    assert table.loc["wide", "subsampling_se_diff"] == pytest.approx(0.0, abs=1e-9)
    assert table.loc["wide", "elpd_diff"] == pytest.approx(full_table.loc["wide", "elpd_diff"])
    worse = norm_cdf(-table.loc["wide", "elpd_diff"] / table.loc["wide", "se_diff"])
    assert table.loc["wide", "p_worse"] == pytest.approx(worse, rel=1e-9)
    for column in ("diag_diff", "diag_elpd"):
        assert list(table[column]) == list(full_table[column])
    assert np.isnan(table.loc["good", "p_worse"]) and list(table["rank"]) == [0, 1]
    both = np.hypot(part.loc["wide", "se_diff"], part.loc["wide", "subsampling_se_diff"])
    expected = norm_cdf(-part.loc["wide", "elpd_diff"] / both)
    assert part.loc["wide", "p_worse"] == pytest.approx(expected, rel=1e-9)


def norm_cdf(x: float) -> float:
    from scipy.stats import norm

    return float(norm.cdf(x))
