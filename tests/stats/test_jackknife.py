"""The labelled IJ covariance against the array layer and its own table."""

import numpy as np

import bayesij
from bayesij import array


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
