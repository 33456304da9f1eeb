"""LOO expectations on arrays against exact mathematics: quantile rules with equal weights
against NumPy's, and the leave-one-out posterior of a shifted normal, whose mean, variance,
sd and quantiles are known (each within a few of its own Monte Carlo SEs). The labelled
function is checked against R loo and arviz-stats in tests/stats/test_loo.py."""

import numpy as np
import pytest
from scipy import stats

from bayesij.array.loo_expectation import (
    QUANTILE_RULES,
    expectation_khat,
    loo_column_weights,
    loo_expectations,
    weighted_quantile,
    weighted_quantile_type7,
)
from bayesij.array.psis import tail_length


@pytest.mark.parametrize("prob", [0.05, 0.3, 0.5, 0.77, 0.95])
def test_equal_weights_give_numpys_quantiles(prob):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(101, 4))
    weights = np.full(values.shape, 1 / 101)
    np.testing.assert_allclose(
        weighted_quantile(values, weights, prob),
        np.quantile(values, prob, axis=0, method="interpolated_inverted_cdf"),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        weighted_quantile_type7(values, weights, prob),
        np.quantile(values, prob, axis=0),
        rtol=1e-12,
    )
    assert set(QUANTILE_RULES) == {"R loo", "type 7"}


def _shifted_normal(n_draws=8000, shifts=(0.2, 0.6, 1.0)):
    """theta ~ N(0, 1) draws and log-likelihoods l_n = a_n theta - a_n^2 / 2: leaving
    observation n out reweights by exp(-a_n theta), a N(-a_n, 1) posterior."""
    rng = np.random.default_rng(7)
    theta = rng.normal(size=(n_draws, 1))
    a = np.asarray(shifts)
    return theta, a * theta - a**2 / 2, a


def _shifted_loo(kind, probs, rule="R loo", r_eff=1.0, diagnostics=True):
    """The LOO expectations of theta for each observation of :func:`_shifted_normal`
    (PSIS weights), and that fit's shifts."""
    theta, matrix, a = _shifted_normal()
    tails = tail_length(matrix.shape[0], np.ones(a.size))
    found = loo_expectations(
        matrix,
        np.repeat(theta, a.size, axis=1),
        lambda chunk, rows: loo_column_weights(matrix, chunk, tails, "above", rows=rows),
        np.full(a.size, r_eff),
        kind,
        probs,
        rule,
        diagnostics,
    )
    return found, a, matrix.shape[0]


@pytest.mark.parametrize("rule", ["R loo", "type 7"])
@pytest.mark.parametrize(
    ("kind", "probs", "exact"),
    [
        ("mean", [None], lambda a, p: -a),
        ("var", [None], lambda a, p: np.ones_like(a)),
        ("sd", [None], lambda a, p: np.ones_like(a)),
        ("median", [0.5], lambda a, p: -a),
        ("quantile", [0.1, 0.9], lambda a, p: -a + stats.norm.ppf(p)),
    ],
)
def test_the_loo_posterior_of_a_shifted_normal(kind, probs, exact, rule):
    (value, mcse, k), a, _ = _shifted_loo(kind, probs, rule)
    for j, p in enumerate(probs):
        assert np.all(np.abs(value[j] - exact(a, p)) < 4 * mcse[j]), (value[j], mcse[j])
        assert np.all(mcse[j] < 0.1)
    assert np.all(k < 0.7) and np.all(np.diff(k[: a.size]) > -0.2)  # larger shifts: heavier
    (bare, no_mcse, no_k), _, _ = _shifted_loo(kind, probs, rule, diagnostics=False)
    np.testing.assert_array_equal(bare, value)
    assert np.isnan(no_mcse).all() and np.isnan(no_k).all()


def test_saved_weights_are_used_as_they_are():
    theta, matrix, a = _shifted_normal(400)
    saved = np.log(np.full(matrix.shape, 1 / 400))
    weights, k = loo_column_weights(matrix, slice(0, 2), None, "above", saved=saved)
    assert k is None and weights.shape == (400, 2)
    np.testing.assert_allclose(weights, 1 / 400)


def test_uniform_weights_give_the_sample_mean_and_unbiased_variance():
    rng = np.random.default_rng(3)
    values = rng.normal(size=(500, 3))
    matrix = np.zeros_like(values)

    def uniform(chunk, rows):
        return np.full((500, rows.shape[0]), 1 / 500), None

    for kind, expected in [
        ("mean", values.mean(axis=0)),
        ("var", values.var(axis=0, ddof=1)),
        ("sd", values.std(axis=0, ddof=1)),
    ]:
        value, _, _ = loo_expectations(
            matrix, values, uniform, np.ones(3), kind, [None], diagnostics=False
        )
        np.testing.assert_allclose(value[0], expected, rtol=1e-12)


def test_expectation_khat_takes_the_ratios_alone_for_two_valued_functions():
    theta, matrix, a = _shifted_normal(2000)
    rows = np.ascontiguousarray(matrix.T)
    binary = np.where(theta.T > 0, 1.0, 0.0).repeat(a.size, axis=0)
    ratios_only = expectation_khat(rows, binary, "median")
    np.testing.assert_array_equal(expectation_khat(rows, binary, "mean"), ratios_only)
    smooth = np.repeat(theta.T, a.size, axis=0)
    assert np.all(expectation_khat(rows, smooth, "mean") >= ratios_only)


def test_the_mean_s_mcse_is_the_importance_sampler_s_own():
    """Self-normalised importance sampling of N(-a, 1) from N(0, 1) draws has asymptotic
    variance exp(a^2) (1 + a^2) / S for the mean: the delta-method MCSE estimates it."""
    (_, mcse, _), a, n_draws = _shifted_loo("mean", [None])
    exact = np.sqrt(np.exp(a**2) * (1 + a**2) / n_draws)
    np.testing.assert_allclose(mcse[0], exact, rtol=0.15)
    (_, halved, _), _, _ = _shifted_loo("mean", [None], r_eff=4.0)
    np.testing.assert_allclose(halved[0], mcse[0] / 2, rtol=1e-12)  # divided by r_eff


@pytest.mark.parametrize("rule", ["R loo", "type 7"])
def test_the_median_s_mcse_is_the_cdf_s_error_over_the_density(rule):
    """At the median q = -a, (1{theta <= q} - 1/2)^2 = 1/4 at every draw, so the weighted
    CDF's SE is exp(a^2 / 2) / (2 sqrt S), and the quantile's is that over the density
    phi(0)."""
    (_, mcse, _), a, n_draws = _shifted_loo("median", [0.5], rule)
    cdf_se = np.exp(a**2 / 2) / (2 * np.sqrt(n_draws))
    np.testing.assert_allclose(mcse[0], cdf_se / stats.norm.pdf(0), rtol=0.2)
