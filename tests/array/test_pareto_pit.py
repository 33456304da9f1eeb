"""The Pareto-smoothed PIT against exact mathematics: a normal predictive's tail
probabilities beyond most draws, the weighted fit against the unweighted one (equal
weights), and the generalized Pareto distribution function against SciPy's."""

import numpy as np
import pytest
from scipy import stats

from bayesij.array.pareto_pit import (
    gpd_cdf,
    pareto_pit_columns,
    pit_tail_length,
    weighted_gpd_fit,
)
from bayesij.array.psis import gpd_fit


def test_observations_beyond_most_draws_get_the_normal_tail_probability():
    """4000 standard normal draws; observations at the 1e-4 .. 0.999 quantiles: the raw PIT
    is 0 or 1 beyond the draws, the Pareto-smoothed one the tail probability within a
    factor 3 (a normal tail fitted by a Pareto one from 189 draws), and the middle
    untouched."""
    rng = np.random.default_rng(0)
    probs = np.array([1e-4, 1e-3, 0.3, 0.5, 0.999, 0.9999])
    y = stats.norm.ppf(probs)
    draws = rng.normal(size=(4000, probs.size))
    weights = np.full(draws.shape, 1 / 4000)
    raw = (draws < y).mean(axis=0)
    smoothed = pareto_pit_columns(draws, y, weights, raw)
    below = np.where(probs < 0.5, smoothed, 1 - smoothed)  # the tail's own side
    tails = np.minimum(probs, 1 - probs)
    assert np.all((smoothed > 0) & (smoothed < 1))
    np.testing.assert_allclose(smoothed[2:4], raw[2:4])  # inside both cutoffs: unchanged
    far = [0, 1, 4, 5]
    assert np.all(np.abs(np.log(below[far] / tails[far])) < np.log(3))
    assert raw[5] == 1.0 and smoothed[5] < 1 - 1 / 4000 / 1e4
    beyond = pareto_pit_columns(draws[:, :2], np.array([-60.0, 60.0]), weights[:, :2], raw[:2])
    np.testing.assert_array_equal(beyond, [1 / 4000 / 1e4, 1 - 1 / 4000 / 1e4])  # kept inside


def test_equal_weights_give_the_unweighted_fit():
    rng = np.random.default_rng(1)
    x = np.sort(stats.genpareto.rvs(0.3, size=189, random_state=rng))
    k, sigma = weighted_gpd_fit(x, np.full(189, 7.0))
    assert k == pytest.approx(gpd_fit(x[:, None], np.array([189])).k[0], rel=1e-10)
    assert sigma == pytest.approx(gpd_fit(x[:, None], np.array([189])).sigma[0], rel=1e-10)
    uneven = np.linspace(0.1, 2.0, 189)
    assert weighted_gpd_fit(x, uneven) == pytest.approx(weighted_gpd_fit(x, 3 * uneven))
    assert weighted_gpd_fit(x, uneven)[0] != pytest.approx(k, rel=1e-3)
    assert np.isnan(weighted_gpd_fit(np.r_[np.zeros(60), x[:129]], np.ones(189))[0])


@pytest.mark.parametrize("k", [-0.3, 0.0, 1e-16, 0.4])
def test_the_distribution_function_is_scipys(k):
    q = np.array([0.0, 0.3, 2.0, 10.0])
    ours = [gpd_cdf(v, 0.1, 1.5, k) for v in q]
    np.testing.assert_allclose(ours, stats.genpareto.cdf(q, k, loc=0.1, scale=1.5), atol=1e-14)


def test_the_tail_length():
    assert [pit_tail_length(s) for s in (4000, 225, 100, 20)] == [189, 45, 20, 4]
