"""Simultaneous ECDF bands (Säilynoja et al. 2022): the band holds the whole ECDF of fresh
uniform samples with its stated probability; the statistic is its binomial definition; the
pointwise band and, where no simulated sample has an empty first bin, the whole band equal
arviz-stats' ecdf_pit."""

import numpy as np
import pytest
from scipy.stats import binom

from bayesij.array.ecdf_bands import simultaneous_band, uniformity_gamma
from peers import ARVIZ_1


@pytest.mark.parametrize("n", [20, 150])
def test_band_covers_fresh_uniform_samples_with_its_probability(n):
    band = simultaneous_band(n, 0.95, 2000, np.random.default_rng(1))
    samples = np.sort(np.random.default_rng(2).uniform(size=(4000, n)), axis=1)
    ecdf = np.array([np.searchsorted(s, band.grid, side="right") / n for s in samples])
    inside = np.all((ecdf >= band.lower - 1e-12) & (ecdf <= band.upper + 1e-12), axis=1)
    # 0.95 up to the simulation error of the band's level and of this check (about 0.006)
    assert inside.mean() == pytest.approx(0.95, abs=0.02)
    assert band.pointwise_prob > 0.95  # wider than a pointwise 95 % band


def test_gamma_is_its_binomial_definition():
    rng = np.random.default_rng(3)
    values = rng.uniform(size=(5, 30)) ** 1.3
    values[3] = 0.5 + 0.5 * values[3]  # counts of 0 below 0.5
    values[4, 1:] = 0.2 + 0.8 * values[4, 1:]  # a count of exactly 1 up to 0.2
    points = np.arange(1, 30) / 30
    got = uniformity_gamma(values, points)
    for row, value in zip(values, got, strict=True):
        counts = np.array([(row <= z).sum() for z in points])
        low = binom.cdf(counts, 30, points).min()
        high = binom.sf(counts - 1, 30, points).min()  # P(count >= observed)
        assert value == pytest.approx(1 - 2 * min(low, high), abs=1e-12)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' ecdf_pit (Python >= 3.12)")
def test_equals_arviz_stats_where_its_first_bin_is_never_empty():
    from arviz_stats.ecdf_utils import ecdf_pit, get_pointwise_confidence_band

    ours = simultaneous_band(57, 0.95, 1000, np.random.default_rng(214))
    grid, _, lower, upper = ecdf_pit(np.zeros(57), 0.95, 1000, rng=np.random.default_rng(214))
    np.testing.assert_array_equal(ours.grid, grid)
    np.testing.assert_array_equal(ours.lower, lower)
    np.testing.assert_array_equal(ours.upper, upper)
    points = np.arange(1, 200) / 200
    low, high = get_pointwise_confidence_band(0.99, 200, points)
    band = simultaneous_band(200, 0.95, 50, np.random.default_rng(0))
    tail = (1 - 0.99) / 2
    from scipy.special import bdtrik

    np.testing.assert_array_equal(np.ceil(bdtrik(tail, 200, points)) / 200, low)
    np.testing.assert_array_equal(np.ceil(bdtrik(1 - tail, 200, points)) / 200, high)
    assert band.lower.shape == (201,)
