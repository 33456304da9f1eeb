"""Labelled influence and IJ covariance: equal to the array layer, grouped, readable."""

import numpy as np
import pytest

import bayesij
from bayesij import array, refit


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
    np.testing.assert_allclose(
        grouped["psi"].sel(group="b").values, single["psi"].values[:, 5:].sum(axis=1), rtol=1e-12
    )
    np.testing.assert_allclose(
        bayesij.influence(post.with_groups(groups))["psi"].values, grouped["psi"].values
    )


def test_quantity_selection_and_bad_input(post):
    assert list(bayesij.influence(post, quantities="s")["quantity"].values) == ["s"]
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'zeta'"):
        bayesij.ij_covariance(post, quantities=["zeta"])
    with pytest.raises(ValueError, match=r"data: found no posterior draws of quantities"):
        bayesij.influence(np.zeros((10, 3)))
    with pytest.raises(ValueError, match=r"groups: found no group for 12 of 12"):
        bayesij.influence(post, groups={"x": 1})
    with pytest.raises(ValueError, match=r"n_blocks: found 1; expected an integer >= 2"):
        bayesij.influence(post, n_blocks=1)


def test_a_score_gives_zero_variance_control_variates_and_a_far_smaller_error():
    from ols_amip import heavy_tailed_experiment

    X, y = heavy_tailed_experiment(1000, seed=0)
    backend = refit.FlatPriorRegressionBackend(X, y, draws=4000, seed=2)
    post, score, theta = backend.fit_with_gradient(np.ones(1000))
    unscaled = np.linalg.inv(X.T @ X)
    exact = (y - X @ (unscaled @ X.T @ y)) * (X @ unscaled[:, 1])
    plain = bayesij.influence(post, quantities="beta[2]")
    cv = bayesij.influence(
        post, quantities="beta[2]", grad_log_posterior=score, unconstrained=theta
    )
    error = {
        k: np.sqrt(np.mean((v["psi"].values[0] - exact) ** 2))
        for k, v in {"plain": plain, "cv": cv}.items()
    }
    assert error["cv"] < error["plain"] / 4, error  # 6.5 times smaller here
    assert np.median(cv["mcse"].values) < np.median(plain["mcse"].values) / 3
    with pytest.raises(ValueError, match=r"^grad_log_posterior: found 1000 draws"):
        bayesij.influence(post, grad_log_posterior=score[:1])
