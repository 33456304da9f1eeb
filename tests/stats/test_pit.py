"""pit_ecdf and pit_density: the uniformity test holds its size on uniform values and
rejects the PIT of a model whose predictive is too narrow; the density recovers a known
one and the uniform up to the ends; bad input is refused by name."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import bayesij


@pytest.mark.slow  # a coverage study: the full suite runs it
def test_p_values_of_uniform_values_are_uniform():
    rng = np.random.default_rng(5)
    p_values = np.array(
        [
            bayesij.pit_ecdf(rng.uniform(size=60), n_simulations=400, seed=s).p_value
            for s in range(200)
        ]
    )
    assert 0.02 < np.mean(p_values < 0.05) < 0.10
    assert 0.4 < np.mean(p_values) < 0.6


def test_too_narrow_a_predictive_is_rejected():
    rng = np.random.default_rng(0)
    n = 150
    y = rng.normal(0, 1.5, n)
    mu = rng.normal(0, 0.1, (4, 500, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pit = bayesij.loo_pit(norm.logpdf(y, mu, 1.0), y, mu + rng.normal(size=(4, 500, n)))
    result = bayesij.pit_ecdf(pit)
    assert result.outside and result.p_value < 0.01
    assert result.ecdf[-1] == 1 and np.all(np.diff(result.ecdf) >= 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pit": [0.5]}, r"pit: found 1 value\(s\); expected at least 2 values in \[0, 1\]"),
        ({"pit": [0.5, 1.5]}, r"pit: found 2 value\(s\), some outside \[0, 1\]"),
        ({"pit": [0.1, 0.2], "prob": 1.0}, r"prob: found 1"),
        ({"pit": [0.1, 0.2], "n_simulations": 0}, r"n_simulations: found 0"),
    ],
)
def test_bad_input_is_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bayesij.pit_ecdf(**kwargs)


def test_p_value_and_band_by_their_definition():
    from bayesij.array.ecdf_bands import simultaneous_band, uniformity_gamma

    values = np.random.default_rng(6).beta(1.3, 1.0, size=40)
    values[0] = 1.0  # a PIT of exactly 1 is a PIT
    result = bayesij.pit_ecdf(values, prob=0.9, n_simulations=300, seed=3)
    band = simultaneous_band(40, 0.9, 300, np.random.default_rng(3))
    observed = uniformity_gamma(values[None], np.arange(1, 40) / 40)[0]
    assert result.p_value == pytest.approx(np.mean(band.gammas >= observed))
    np.testing.assert_array_equal(result.grid, np.arange(41) / 40)
    np.testing.assert_array_equal(result.lower, band.lower)
    expected_ecdf = [(values <= z).mean() for z in result.grid]
    np.testing.assert_allclose(result.ecdf, expected_ecdf)
    assert result.prob == 0.9 and result.pointwise_prob == band.pointwise_prob


def test_the_pit_density_recovers_a_known_density_and_the_uniform_at_its_ends():
    """Beta(2, 2) values: their density 6x(1 - x) in the interior; uniform samples: 1 up to
    0 and 1 (the reflection; a plain kernel estimate falls to 1/2 there); each integrates
    to 1; the bandwidth is Silverman's rule of the values."""
    rng = np.random.default_rng(3)
    values = rng.beta(2, 2, size=20000)
    result = bayesij.pit_density(values, n_uniform=40, points=200)
    inside = (result.grid > 0.15) & (result.grid < 0.85)
    exact = 6 * result.grid * (1 - result.grid)
    np.testing.assert_allclose(result.density[inside], exact[inside], atol=0.06)
    np.testing.assert_allclose(result.uniform.mean(axis=0), 1.0, atol=0.05)
    np.testing.assert_allclose(result.uniform.mean(axis=0)[[0, -1]], 1.0, atol=0.05)
    np.testing.assert_allclose(np.r_[result.density[None], result.uniform].mean(axis=1), 1.0)
    iqr = np.subtract(*np.percentile(values, [75, 25]))
    silverman = 0.9 * min(values.std(ddof=1), iqr / 1.34) * values.size**-0.2
    assert result.bandwidth == pytest.approx(silverman)
    assert result.uniform.shape == (40, 200)


def test_a_too_wide_predictive_distribution_leaves_the_uniform_spread():
    rng = np.random.default_rng(4)
    y = rng.normal(size=400)
    too_wide = norm.cdf(y, scale=2.0)  # PIT values of a predictive sd twice the truth
    result = bayesij.pit_density(too_wide)
    middle = np.abs(result.grid - 0.5) < 0.1
    assert (result.density[middle] > result.uniform.max(axis=0)[middle]).all()
    calibrated = bayesij.pit_density(norm.cdf(y))
    outside = (calibrated.density > calibrated.uniform.max(axis=0)) | (
        calibrated.density < calibrated.uniform.min(axis=0)
    )
    assert outside.mean() < 0.05
