"""Rank-normalised split R-hat, bulk and tail ESS of many columns, equal to the installed
ArviZ generation's (ArviZ 0.23's ``rhat`` / ``ess``, or arviz-stats 1.x's) computed here in
the test on the same draws, and the normal scores' exact values."""

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm, rankdata

from bayesij.array.convergence import (
    average_ranks,
    bulk_ess,
    rank_normal_scores,
    rank_rhat,
    split_rhat,
    tail_ess,
)
from peers import ARVIZ_1


def _draws(n_draws: int, seed: int = 0) -> np.ndarray:
    """Four chains of three quantities: one chain shifted, ties, and a random walk."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, n_draws, 3))
    x[1, :, 0] += 0.3
    x[:, ::7, 1] = 0.0  # ties, averaged in the ranks
    x[:, :, 2] = np.cumsum(x[:, :, 2], axis=1) * 0.1
    return x


def _peer(x: np.ndarray) -> dict:
    """The installed ArviZ generation's R-hat, bulk and tail ESS (tails at 5 % and 95 %:
    arviz-stats' default tail is its ci_prob, 0.89)."""
    if ARVIZ_1:
        import arviz_stats

        tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"x": (("chain", "draw", "k"), x)})})
        return {
            "rhat": arviz_stats.rhat(tree, method="rank")["x"].values,
            "ess_bulk": arviz_stats.ess(tree, method="bulk")["x"].values,
            "ess_tail": arviz_stats.ess(tree, method="tail", prob=(0.05, 0.95))["x"].values,
        }
    import arviz

    dataset = arviz.convert_to_dataset(x)
    return {
        "rhat": arviz.rhat(dataset, method="rank")["x"].values,
        "ess_bulk": arviz.ess(dataset, method="bulk")["x"].values,
        "ess_tail": arviz.ess(dataset, method="tail")["x"].values,
    }


@pytest.mark.parametrize("n_draws", [250, 251])
def test_r_hat_and_ess_are_the_peers(n_draws):
    # An odd chain's middle draw is left out of the split chains, not of the tails'
    # quantiles (as the peers do).
    x = _draws(n_draws)
    ours = {"rhat": rank_rhat(x), "ess_bulk": bulk_ess(x), "ess_tail": tail_ess(x)}
    for column, expected in _peer(x).items():
        np.testing.assert_allclose(ours[column], expected, rtol=1e-10)
    assert ours["rhat"][2] > 1.5  # the random walk


def test_normal_scores_and_the_classic_split_r_hat_are_their_formulas():
    x = np.array([[3.0, 1.0, 2.0, 2.0], [5.0, 4.0, 0.0, 6.0]])[..., None]
    ranks = np.array([[5.0, 2.0, 3.5, 3.5], [7.0, 6.0, 1.0, 8.0]])
    expected = norm.ppf((ranks - 0.375) / (8 + 0.25))
    np.testing.assert_allclose(rank_normal_scores(x)[..., 0], expected, rtol=1e-13)
    halves = np.array([[3.0, 1.0], [5.0, 4.0], [2.0, 2.0], [0.0, 6.0]])
    n = 2
    between = n * halves.mean(axis=1).var(ddof=1)
    within = halves.var(axis=1, ddof=1).mean()
    classic = np.sqrt((between / within + n - 1) / n)
    np.testing.assert_allclose(split_rhat(x), [classic], rtol=1e-13)
    constant = np.ones((2, 8, 1))
    assert np.isnan(rank_rhat(constant)[0])


def _superchains(shift: float, seed: int = 4):
    """16 short chains (50 draws) of two quantities in 4 superchains of 4; superchain 3
    shifted by ``shift`` in quantity 0."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(16, 50, 2))
    ids = np.repeat(np.arange(4), 4)
    x[ids == 3, :, 0] += shift
    return x, ids


def test_nested_r_hat_tells_a_superchain_apart():
    from bayesij.array.convergence import nested_rhat

    mixed, ids = _superchains(0.0)
    assert np.all(nested_rhat(mixed, ids) < 1.05)
    apart, ids = _superchains(2.0)
    rhat = nested_rhat(apart, ids)
    assert rhat[0] > 1.3 and rhat[1] < 1.05
    with pytest.raises(ValueError, match=r"^superchains: found superchains of \[3, 5\] chains"):
        nested_rhat(apart[:8], np.r_[np.zeros(3, int), np.ones(5, int)])


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' rhat_nested and bfmi (Python >= 3.12)")
def test_nested_r_hat_and_bfmi_are_arviz_stats():
    import arviz_stats

    from bayesij.array.convergence import bfmi, nested_rhat

    x, ids = _superchains(0.7)
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"x": (("chain", "draw", "k"), x)})})
    theirs = arviz_stats.rhat_nested(tree, superchain_ids=ids)["x"].values
    np.testing.assert_allclose(nested_rhat(x, ids), theirs, rtol=1e-10)
    energy = np.cumsum(np.random.default_rng(5).normal(size=(4, 300)), axis=1) * 0.2
    stats = xr.DataTree.from_dict(
        {"sample_stats": xr.Dataset({"energy": (("chain", "draw"), energy)})}
    )
    np.testing.assert_allclose(bfmi(energy), arviz_stats.bfmi(stats)["energy"].values, rtol=1e-12)


def test_bfmi_is_arviz_0_23_s():
    import arviz as az

    from bayesij.array.convergence import bfmi

    energy = np.cumsum(np.random.default_rng(5).normal(size=(4, 300)), axis=1) * 0.2
    if ARVIZ_1:
        pytest.skip("ArviZ 0.23's bfmi (Python 3.11)")
    np.testing.assert_allclose(bfmi(energy), az.bfmi(energy), rtol=1e-12)
    assert np.all(bfmi(energy) < 0.3)  # a random walk of energies: poorly explored


_VALUES = st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e300, np.inf, -np.inf, np.nan, 3.0, 3.0])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 9).flatmap(
        lambda n: st.lists(st.lists(_VALUES, min_size=n, max_size=n), min_size=1, max_size=12)
    )
)
def test_average_ranks_are_scipys_rankdata_to_the_bit(rows):
    # Ties (0.0 and -0.0 among them), infinities and a column holding NaN (all NaN), as
    # scipy.stats.rankdata(method="average", axis=0) ranks them.
    values = np.array(rows, dtype=float)
    expected = rankdata(values, method="average", axis=0)
    np.testing.assert_array_equal(average_ranks(values), expected)


def test_average_ranks_of_many_draws_are_scipys():
    x = _draws(1000).reshape(-1, 3)
    np.testing.assert_array_equal(average_ranks(x), rankdata(x, method="average", axis=0))
