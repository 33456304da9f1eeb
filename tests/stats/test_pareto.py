"""Pareto diagnostics of any Monte Carlo estimate: k-hat as arviz-stats computes it (Python
>= 3.12), the minimum sample size, threshold and convergence rate by their closed forms,
k-hat near the true tail index, and smoothing by the generalized Pareto quantiles."""

import numpy as np
import pytest
import xarray as xr

import bayesij
from bayesij.array.pareto import convergence_rate, min_sample_size

RNG = np.random.default_rng(11)
DRAWS = {
    "t2": RNG.standard_t(2, size=(4, 1000)),  # k = 1/2
    "cauchy": RNG.standard_cauchy(size=(4, 1000)),  # k = 1
    "normal": RNG.normal(size=(4, 1000)),  # k < 0
    "exp": RNG.exponential(size=(4, 200)),  # right tail k = 0
}


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("tail", ["both", "right", "left"])
def test_khat_and_min_ss_as_arviz_stats(name, tail):
    pytest.importorskip("arviz_stats", reason="arviz-stats 1.x runs with ArviZ 1.x (3.12)")
    draws = DRAWS[name]
    data = xr.DataArray(draws, dims=("chain", "draw"))
    expected = float(data.azstats.pareto_khat(tail=tail))
    table = bayesij.pareto_khat(draws, tail=tail)
    assert table["khat"].iloc[0] == pytest.approx(expected, rel=1e-10, abs=1e-12)
    if tail == "both":
        assert table["min_ss"].iloc[0] == pytest.approx(float(data.azstats.pareto_min_ss()))


def test_khat_is_near_the_tail_index():
    """t(nu) has k = 1/nu; a normal has k < 0 (4 x 1000 draws: within 0.15)."""
    rng = np.random.default_rng(3)
    for nu in (1.0, 2.0, 4.0):
        k = bayesij.pareto_khat(rng.standard_t(nu, size=(4, 1000)), tail="right")["khat"].iloc[0]
        assert k == pytest.approx(1 / nu, abs=0.15)
    assert bayesij.pareto_khat(rng.normal(size=(4, 1000)))["khat"].iloc[0] < 0.1


def test_closed_forms():
    n = 4000
    assert bayesij.pareto_khat(DRAWS["t2"])["khat_threshold"].iloc[0] == pytest.approx(
        1 - 1 / np.log10(n)
    )
    np.testing.assert_allclose(
        min_sample_size([-0.2, 0.0, 0.5, 0.7, 1.0]), [10, 10, 100, 10 ** (1 / 0.3), np.inf]
    )
    rate = convergence_rate([-0.5, 0.0, 0.5, 1.2], n)
    np.testing.assert_allclose(rate, [1.0, 1.0, 1 - 1 / np.log(n), 0.0])
    # Beside k = 1/2 the formula is within 3e-4 of the value at 1/2 (the paper's limit).
    near = convergence_rate([0.5 - 1e-6, 0.5 + 1e-6], n)
    np.testing.assert_allclose(near, 1 - 1 / np.log(n), atol=1e-3)
    assert np.all(np.diff(convergence_rate(np.linspace(0.06, 0.96, 19), n)) < 0)  # not at 1/2


def test_smoothing_replaces_the_tails_by_the_fitted_quantiles():
    draws = DRAWS["t2"]
    result = bayesij.pareto_smooth(draws, tail="right", r_eff=1.0)
    flat, smooth = draws.ravel(), result.values.ravel()
    m = int(np.floor(3 * np.sqrt(flat.size)))
    order = np.argsort(flat)
    untouched = order[: flat.size - m]
    np.testing.assert_array_equal(smooth[untouched], flat[untouched])
    tail = order[-m:]
    assert np.all(np.diff(smooth[tail]) >= 0)  # the order of the draws is kept
    assert smooth[tail].max() <= flat.max()
    # Above the cutoff, and (t(2): k = 1/2) the smoothed tail is lighter than the raw one's
    # largest draws, which a heavy tail makes erratic; the values themselves are compared
    # with arviz-stats' fit in the next test.
    cutoff = flat[order[-m - 1]]
    assert 0.3 < result.diagnostics["khat"].iloc[0] < 0.7
    assert np.all(smooth[tail] > cutoff)
    assert smooth[tail].sum() < flat[tail].sum()
    # The exceedances are generalized Pareto quantiles at (z - 1/2) / M: their ratios depend
    # on k alone (scipy's genpareto; the largest few may be truncated at the largest draw).
    from scipy.stats import genpareto

    k = result.diagnostics["khat"].iloc[0]
    exceed = smooth[tail][: m - 5] - cutoff
    expected = genpareto.ppf((np.arange(1, m - 4) - 0.5) / m, k)
    np.testing.assert_allclose(exceed / exceed[-1], expected / expected[-1], rtol=1e-9)


def test_smoothing_matches_arviz_stats_fit():
    stats = pytest.importorskip("arviz_stats.base", reason="arviz-stats 1.x (Python >= 3.12)")
    flat = DRAWS["t2"].ravel()
    m = int(np.floor(3 * np.sqrt(flat.size)))
    order = np.argsort(flat)
    cutoff = flat[order[-m - 1]]
    k, sigma = stats.array_stats._gpdfit(flat[order[-m:]] - cutoff)
    expected = stats.array_stats._gpinv(np.arange(0.5, m) / m, k, sigma, cutoff)
    expected = np.minimum(expected, flat.max())
    smooth = bayesij.pareto_smooth(DRAWS["t2"], tail="right", r_eff=1.0).values.ravel()
    np.testing.assert_allclose(smooth[order[-m:]], expected, rtol=1e-10)


def test_a_fit_its_quantities_and_bad_input():
    rng = np.random.default_rng(1)
    post = bayesij.from_arrays(
        np.stack([rng.normal(size=(4, 500)), rng.standard_t(2, size=(4, 500))], axis=2),
        rng.normal(-1, 0.1, size=(4, 500, 3)),
        quantity_names=["mu", "heavy"],
    )
    table = bayesij.pareto_khat(post)
    assert list(table.index) == ["mu", "heavy"]
    assert table.loc["heavy", "khat"] > table.loc["mu", "khat"]
    assert bayesij.pareto_khat(post, quantities="heavy").index.tolist() == ["heavy"]
    with pytest.raises(ValueError, match=r"tail: found 'top'; expected 'both', 'right'"):
        bayesij.pareto_khat(post, tail="top")
    with pytest.raises(ValueError, match=r"r_eff: found -1"):
        bayesij.pareto_khat(post, r_eff=-1)
    with pytest.raises(ValueError, match=r"data: found an array of shape \(2, 2, 2, 2\)"):
        bayesij.pareto_khat(np.zeros((2, 2, 2, 2)))
