"""The labelled IJ covariance against the array layer and its own table."""

import numpy as np
import pytest

import bayesij
from bayesij import array
from conjugate import noise_dominated_slope


def test_ij_covariance_result(post):
    result = bayesij.ij_covariance(post)
    raw = array.ij_covariance(post.quantities.values, post.log_lik.values)
    np.testing.assert_array_equal(result.covariance.values, raw.covariance)
    np.testing.assert_array_equal(result.variance.values, np.diag(raw.covariance))
    np.testing.assert_array_equal(
        result.variance_corrected.values, np.diag(raw.covariance_corrected)
    )
    np.testing.assert_allclose(
        result.ratio.values, np.diag(raw.covariance_corrected) / np.diag(raw.posterior_covariance)
    )
    table = result.table()
    assert list(table.index) == ["mu", "s"]
    assert {
        "posterior_sd",
        "ij_sd",
        "ij_variance",
        "ij_variance_corrected",
        "mcse_ij_variance",
        "variance_ratio",
        "sd_ratio",
    } <= set(table.columns)
    positive = table["variance_ratio"] > 0  # the sd ratio is NaN where noise dominates
    np.testing.assert_allclose(table["sd_ratio"][positive] ** 2, table["variance_ratio"][positive])
    assert table["sd_ratio"][~positive].isna().all()
    text = str(result)
    assert text.startswith("IJ bootstrap covariance over 12 observations (1200 draws, 4 chain")
    # s does not enter the likelihood's dependence on data: its IJ variance is noise.
    assert "Monte Carlo noise dominates the IJ variance of s" in text
    # ... far below its posterior variance: no number of draws would show IJ variability.
    assert result.draws_needed["s"] == 1200
    assert "far below its posterior variance" in text and "the data barely move it" in text


def test_a_noise_dominated_ij_variance_says_how_many_draws_would_measure_it():
    result = bayesij.ij_covariance(noise_dominated_slope())
    needed = result.draws_needed.iloc[0]
    scale = max(result.variance_corrected.iloc[0], result.posterior_variance.iloc[0])
    assert needed == np.ceil(40 * (2 * result.mcse.iloc[0] / scale) ** 2) > 40
    assert f"undetermined; about {needed:.3g} draws (now 40) would measure it" in str(result)


@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_the_ij_matches_the_ols_sandwich_on_a_heavy_tailed_field_experiment():
    # The flat-prior regression of tests/helpers/ols_amip.py (N = 10^4, 1 % outliers): the
    # IJ sd of the treatment effect within 25 % of the OLS sandwich (HC0) sd, and decided.
    from ols_amip import heavy_tailed_experiment

    from bayesij.refit import FlatPriorRegressionBackend

    X, y = heavy_tailed_experiment(10_000, seed=0)
    post = FlatPriorRegressionBackend(X, y, draws=4000, seed=1).fit(np.ones(y.size))
    unscaled = np.linalg.inv(X.T @ X)
    residual = y - X @ (unscaled @ X.T @ y)
    sandwich = np.sqrt(np.diag(unscaled @ (X.T * residual**2) @ X @ unscaled))
    result = bayesij.ij_covariance(post, quantities=["beta[1]", "beta[2]"])
    ij_sd = result.table()["ij_sd"].to_numpy()
    np.testing.assert_allclose(ij_sd, sandwich, rtol=0.25)
    assert "undetermined" not in str(result)
