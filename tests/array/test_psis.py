"""Pareto smoothing against the formulas of Vehtari et al. (2024): the tail length
``min(S/5, 3 sqrt(S/r_eff))`` rounded by the rule, the k-hat threshold
``min(1 - 1/log10 S, 0.7)``, and the smoothed tail: the M largest log ratios replaced by the
fitted generalized Pareto quantiles ``cutoff + sigma/k ((1 - (j - 1/2)/M)^-k - 1)``, in
order, truncated at the largest raw ratio, every other draw untouched. (The fit itself:
tests/array/kernels/test_psis.py against Zhang & Stephens 2009.)"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from bayesij.array.psis import (
    gpd_fit,
    khat_tail_length,
    pareto_k_threshold,
    pareto_khat_columns,
    psis_chunk,
    tail_length,
)

#: R loo's saved values (tests/reference/r_loo_ties.R made them).
REFERENCE = Path(__file__).parents[1] / "reference"


def test_tail_length_and_threshold():
    assert tail_length(4000, 1.0, "ceil") == 190  # 3 sqrt(4000) = 189.7
    assert tail_length(4000, 1.0, "floor") == 189
    assert tail_length(100, 1.0, "ceil") == 20  # S / 5
    np.testing.assert_array_equal(tail_length(1000, np.array([0.5, 4.0])), [135, 48])
    assert pareto_k_threshold(4000) == pytest.approx(0.7)
    assert pareto_k_threshold(100) == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"^tail_rule: "):
        tail_length(100, 1.0, "round")


def test_the_smoothed_tail_is_the_fitted_quantiles():
    rng = np.random.default_rng(5)
    log_ratios = rng.standard_t(3, size=(1000, 3))
    tails = np.array([50, 80, 100])
    out = psis_chunk(log_ratios, tails)
    for c in range(3):
        shifted = log_ratios[:, c] - log_ratios[:, c].max()
        m = tails[c]
        order = np.argsort(shifted)
        cutoff = np.exp(shifted[order[-m - 1]])
        exceedances = np.exp(shifted[order[-m:]]) - cutoff
        fit = gpd_fit(exceedances[:, None], np.array([m]))
        k, sigma = fit.k[0], fit.sigma[0]
        assert out.pareto_k[c] == pytest.approx(k, rel=1e-12)
        p = (np.arange(1, m + 1) - 0.5) / m
        quantiles = cutoff + sigma / k * ((1 - p) ** -k - 1)
        expected = np.minimum(np.log(quantiles), 0.0)  # truncated at the largest raw ratio
        np.testing.assert_allclose(out.log_weights[order[-m:], c], expected, rtol=1e-12)
        body = order[:-m]
        np.testing.assert_array_equal(out.log_weights[body, c], shifted[body])


def test_tied_draws_get_r_loo_s_order_so_the_weights_equal_r_s():
    # Repeated MCMC states tie inside the Pareto tail and at its cutoff: R's psis sorts
    # stably (ties in draw order) and keeps the last M by position. A partial sort gave some
    # columns the reverse order (weights off by up to 0.87 in one column).
    table = pd.read_csv(REFERENCE / "log_lik_ties.csv")
    log_lik = table.iloc[:, 1:].to_numpy()
    r = pd.read_csv(REFERENCE / "r_loo_ties.csv")
    r_weights = pd.read_csv(REFERENCE / "r_loo_ties_weights.csv").to_numpy()
    tails = tail_length(log_lik.shape[0], r["r_eff"].to_numpy(), "ceil")
    ours = psis_chunk(-log_lik, tails, "position")
    repeated = [np.unique(column).size < column.size / 2 for column in log_lik.T]
    assert all(repeated)
    normalised = np.exp(ours.log_weights - logsumexp(ours.log_weights, axis=0))
    expected = np.exp(r_weights - logsumexp(r_weights, axis=0))
    np.testing.assert_allclose(normalised, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.pareto_k, r["pareto_k"], rtol=1e-10)


def test_the_khat_tail_length_is_pareto_khat_s():
    # floor(3 sqrt(S / r_eff)) when S r_eff > 225, else floor(S / 5); both tails: [5, S // 2].
    np.testing.assert_array_equal(khat_tail_length(4000, [1.0, 0.25, np.nan]), [189, 379, 800])
    np.testing.assert_array_equal(khat_tail_length(100, [1.0, 3.0]), [20, 17])
    np.testing.assert_array_equal(khat_tail_length(20, [1.0], "both"), [5])
    np.testing.assert_array_equal(khat_tail_length(30, [0.01], "both"), [6])


def test_pareto_khat_of_columns_fits_the_largest_values_above_the_next():
    rng = np.random.default_rng(2)
    values = rng.pareto(2.0, size=(2000, 1)) * [1.0, 10.0, 1e-3]  # k = 1/2, scale-free
    length = khat_tail_length(2000, np.ones(3))
    right = pareto_khat_columns(values, length)
    ordered = np.sort(values, axis=0)
    m = int(length[0])
    by_hand = gpd_fit(ordered[-m:] - ordered[-m - 1], np.full(3, m)).k
    np.testing.assert_allclose(right, by_hand, rtol=1e-12)
    np.testing.assert_allclose(right, right[0], rtol=1e-9)  # scale does not matter
    assert 0.3 < right[0] < 0.7
    both = pareto_khat_columns(np.c_[values[:, 0], -values[:, 0]], np.full(2, m), "both")
    assert both[0] == pytest.approx(both[1]) and both[0] >= right[0] - 1e-12
    constant = pareto_khat_columns(np.ones((100, 1)), np.array([20]))
    assert np.isnan(constant[0])  # all tail values equal: no fit


@pytest.mark.parametrize("tail", ["right", "both"])
def test_pareto_khat_of_columns_equals_arviz_stats(tail):
    array_stats = pytest.importorskip("arviz_stats.base").array_stats
    rng = np.random.default_rng(5)
    values = np.exp(rng.normal(size=(1000, 4)) * [0.5, 1.0, 1.5, 2.0])
    length = khat_tail_length(1000, np.full(4, 0.8), tail)
    ours = pareto_khat_columns(values, length, tail)
    theirs = [
        float(array_stats.pareto_khat(column, r_eff=0.8, tail=tail, chain_axis=None, draw_axis=-1))
        for column in values.T
    ]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
