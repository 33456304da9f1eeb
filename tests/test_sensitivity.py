"""Labelled influence and IJ covariance: equal to the array layer, grouped, readable."""

import numpy as np
import pytest

import bayesij
from bayesij import array


@pytest.fixture
def post(rng):
    theta = rng.normal(size=(4, 300, 2))
    y = rng.normal(size=12)
    log_lik = -0.5 * (y - theta[..., :1]) ** 2 - 0.1 * theta[..., 1:] ** 2
    return bayesij.from_arrays(theta, log_lik, quantity_names=["mu", "s"],
                               obs_names=[f"o{i}" for i in range(12)])


def test_influence_dataset_matches_array_layer(post):
    scores = bayesij.influence(post)
    assert scores["psi"].dims == ("quantity", "obs") and scores["mcse"].dims == ("quantity", "obs")
    expected = array.influence_scores(post.quantities.values, post.log_lik.values)
    np.testing.assert_array_equal(scores["psi"].values, expected.psi)
    np.testing.assert_array_equal(scores["mcse"].values, expected.mcse)
    assert list(scores["obs"].values) == [f"o{i}" for i in range(12)]


def test_grouped_influence_sums_observations(post):
    groups = ["a"] * 5 + ["b"] * 7
    grouped = bayesij.influence(post, groups=groups)
    single = bayesij.influence(post)
    assert grouped["psi"].dims == ("quantity", "group")
    np.testing.assert_allclose(grouped["psi"].sel(group="b").values,
                               single["psi"].values[:, 5:].sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(bayesij.influence(post.with_groups(groups))["psi"].values,
                               grouped["psi"].values)


def test_ij_covariance_result(post):
    result = bayesij.ij_covariance(post)
    raw = array.ij_covariance(post.quantities.values, post.log_lik.values)
    np.testing.assert_array_equal(result.covariance.values, raw.covariance)
    np.testing.assert_array_equal(result.variance.values, np.diag(raw.covariance))
    np.testing.assert_array_equal(result.variance_corrected.values,
                                  np.diag(raw.covariance_corrected))
    np.testing.assert_allclose(result.ratio.values,
                               np.diag(raw.covariance_corrected)
                               / np.diag(raw.posterior_covariance))
    table = result.table()
    assert list(table.index) == ["mu", "s"]
    assert {"posterior_sd", "ij_sd", "ij_variance", "ij_variance_corrected",
            "mcse_ij_variance", "ratio"} <= set(table.columns)
    text = str(result)
    assert text.startswith("IJ bootstrap covariance over 12 observations (1200 draws, 4 chain")
    # s does not enter the likelihood's dependence on data: its IJ variance is noise.
    assert "Monte Carlo noise dominates the IJ variance of s" in text


def test_quantity_selection_and_bad_input(post):
    assert list(bayesij.influence(post, quantities="s")["quantity"].values) == ["s"]
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'zeta'"):
        bayesij.ij_covariance(post, quantities=["zeta"])
    with pytest.raises(ValueError, match=r"post: found a ndarray; expected a bayesij.Posterior"):
        bayesij.influence(np.zeros((10, 3)))
    with pytest.raises(ValueError, match=r"groups: found no group for 12 of 12"):
        bayesij.influence(post, groups={"x": 1})
    with pytest.raises(ValueError, match=r"n_blocks: found 1; expected an integer >= 2"):
        bayesij.influence(post, n_blocks=1)
