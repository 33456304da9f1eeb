"""from_arrays: the container of arrays of draws, laid out (chain, draw, ...) whatever the
input layout, the chains of 2-D input taken from chain_ids in their order, names and
groups attached, nothing copied when the matrix is already float64 (chain, draw, obs)."""

import numpy as np
import pytest

import bayesij


def test_layouts_give_the_same_container():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(3, 50, 2))
    log_lik = rng.normal(size=(3, 50, 4))
    post = bayesij.from_arrays(theta, log_lik, quantity_names=["a", "b"], obs_names=list("wxyz"))
    assert post.quantity_names == ["a", "b"] and post.obs_names == list("wxyz")
    assert np.shares_memory(post.log_lik.values, log_lik)
    # The same draws stacked with their chains interleaved: chain_ids puts them back.
    chains = np.tile([0, 1, 2], 50)
    order = np.argsort(chains, kind="stable")
    stacked_theta = np.empty((150, 2))
    stacked_l = np.empty((150, 4))
    stacked_theta[order] = theta.reshape(150, 2)
    stacked_l[order] = log_lik.reshape(150, 4)
    again = bayesij.from_arrays(stacked_theta, stacked_l, chain_ids=chains)
    np.testing.assert_array_equal(again.log_lik.values, log_lik)
    np.testing.assert_array_equal(again.quantities.values, theta)
    assert again.quantity_names == ["f[1]", "f[2]"] and again.obs_names == [0, 1, 2, 3]


def test_groups_and_bad_shapes():
    post = bayesij.from_arrays(
        np.zeros((1, 10, 1)) + np.arange(10)[None, :, None],
        np.zeros((1, 10, 4)),
        groups=["a", "a", "b", "b"],
    )
    values, units = post.units()
    assert values.shape == (1, 10, 2) and list(units.values) == ["a", "b"]
    with pytest.raises(ValueError, match=r"^log_lik: found 1 chains x 9 draws while quantities"):
        bayesij.from_arrays(np.zeros((1, 10, 1)), np.zeros((1, 9, 4)))
    with pytest.raises(ValueError, match=r"^groups: found shape \(3,\)"):
        bayesij.from_arrays(np.zeros((1, 10, 1)), np.zeros((1, 10, 4)), groups=[1, 2, 3])
