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


@pytest.mark.parametrize("method", ["pot_c", "prit_c", "piet_c"])
def test_the_uniformity_test_equals_arviz_stats(method):
    stats = pytest.importorskip("arviz_stats.base", reason="arviz-stats (Python >= 3.12)")
    rng = np.random.default_rng(3)
    for values in (rng.uniform(size=150), rng.beta(0.7, 0.7, size=150), rng.beta(2, 1, size=40)):
        ours = bayesij.uniformity_test(values, method=method)
        p_value, _, shapley = stats.array_stats.uniformity_test(values, method=method)
        assert ours.p_value == pytest.approx(float(p_value), abs=1e-12)
        np.testing.assert_allclose(ours.shapley, shapley, rtol=1e-10, atol=1e-12)


def test_the_chain_uniformity_test_equals_arviz_stats():
    stats = pytest.importorskip("arviz_stats.base", reason="arviz-stats (Python >= 3.12)")
    from scipy.stats import rankdata

    rng = np.random.default_rng(4)
    draws = rng.normal(size=(4, 120)) + np.array([[0.0], [0.0], [0.2], [0.0]])
    ranks = rankdata(draws, axis=None).reshape(draws.shape) / draws.size
    ours = bayesij.mchain_uniformity_test(ranks)
    p_value, between, within = stats.array_stats.mchain_uniformity_test(ranks)
    assert ours.p_value == pytest.approx(float(p_value), abs=1e-12)
    np.testing.assert_allclose(ours.between, between, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.within, within, rtol=1e-10, atol=1e-12)


def test_a_misspecified_models_loo_pit_fails_the_uniformity_test():
    """A normal model with sd 1 for data of sd 2: LOO-PIT values pile up at the ends, the
    test rejects, and the values with the largest Shapley contributions are the extreme
    ones; data of sd 1 pass."""
    rng = np.random.default_rng(5)
    for sd, rejects in ((2.0, True), (1.0, False)):
        y = rng.normal(0.0, sd, size=100)
        mu = rng.normal(y.mean(), 1 / np.sqrt(100), size=(4, 400, 1))
        post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
        y_rep = rng.normal(mu, 1.0, size=(4, 400, 100))
        pit = bayesij.loo_pit(post, y, y_rep).to_numpy()
        test = bayesij.uniformity_test(pit)
        assert (test.p_value < 0.01) == rejects
        if rejects:
            top = np.argsort(test.shapley)[-5:]
            assert np.all(np.abs(pit[top] - 0.5) > 0.4)


def test_uniformity_tests_refuse_what_is_not_in_the_unit_interval():
    with pytest.raises(ValueError, match=r"^pit: found values outside \[0, 1\] or not finite"):
        bayesij.uniformity_test([0.2, np.nan, 0.5])
    with pytest.raises(ValueError, match=r"^method: found 'ks'; expected one of"):
        bayesij.uniformity_test([0.2, 0.5], method="ks")
    with pytest.raises(ValueError, match=r"^ranks: found shape \(5,\); expected \(n_chains"):
        bayesij.mchain_uniformity_test(np.linspace(0, 1, 5))
