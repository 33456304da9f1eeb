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

from bayesij.array.psis import gpd_fit, pareto_k_threshold, psis_chunk, tail_length

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
