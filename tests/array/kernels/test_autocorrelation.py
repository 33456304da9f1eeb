"""The short-lag autocorrelations of exp(l) against R loo's formula computed here with
plain NumPy: per-chain autocovariances (R's FFT scaling: lagged sums times M / n^2 for its
FFT size M) combined over chains as ``1 - (W - mean_c acov_c(t)) / var_plus`` (Vehtari et
al. 2021, as R loo's relative_eff), up to where Geyer's sequence stops (NaN after)."""

import numpy as np
import pytest

from bayesij.array.ess import fft_next_good_size
from bayesij.array.kernels.autocorrelation import short_lag_autocorrelations


def _reference(row: np.ndarray, n_chains: int, n_lags: int) -> np.ndarray:
    chains = np.exp(row - row.max()).reshape(n_chains, -1)
    n = chains.shape[1]
    scale = fft_next_good_size(n) / n**2
    centred = chains - chains.mean(axis=1, keepdims=True)
    acov = np.array([[c[: n - t] @ c[t:] * scale for t in range(n_lags)] for c in centred])
    within = acov[:, 0].mean() * n / (n - 1)
    var_plus = within * (n - 1) / n + chains.mean(axis=1).var(ddof=1)
    rho = 1 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    return rho


@pytest.mark.parametrize("phi", [0.0, 0.6, 0.95])
def test_short_lags_equal_r_loo_s_formula(phi):
    rng = np.random.default_rng(4)
    n_chains, n_draws, n_rows, n_lags = 4, 250, 6, 8
    x = np.zeros((n_rows, n_chains, n_draws))
    for t in range(1, n_draws):
        x[..., t] = phi * x[..., t - 1] + rng.normal(size=(n_rows, n_chains))
    rows = np.ascontiguousarray((0.3 * x).reshape(n_rows, -1))
    rho = short_lag_autocorrelations(rows, n_chains, fft_next_good_size(n_draws), n_lags)
    for r in range(n_rows):
        expected = _reference(rows[r], n_chains, n_lags)
        finite = np.isfinite(rho[:, r])
        assert finite[:2].all() and (phi < 0.9 or finite[:6].all())
        np.testing.assert_allclose(rho[finite, r], expected[finite], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_draws", [5, 9, 40, 250])
def test_the_compiled_geyer_sequence_is_numpy_s_to_the_bit(n_draws):
    # The reference: bayesij.array.ess's NumPy Geyer sequence (as R loo), on the
    # autocorrelations of AR(1) chains from independent to strongly correlated, and on
    # made-up sequences with negative pairs, a rising pair (the monotone rule) and a pair
    # past n_draws - 5 (where the loop stops whatever the pair).
    from bayesij.array.ess import _geyer_stops, _geyer_tau
    from bayesij.array.kernels.autocorrelation import geyer_relative_eff

    rng = np.random.default_rng(n_draws)
    n_chains, n_lags, columns = 4, 16, []
    for phi in (0.0, 0.3, 0.6, 0.9, 0.99):
        x = np.zeros((3, n_chains, n_draws))
        for t in range(1, n_draws):
            x[..., t] = phi * x[..., t - 1] + rng.normal(size=(3, n_chains))
        rows = np.ascontiguousarray(x.reshape(3, -1))
        columns.append(short_lag_autocorrelations(rows, n_chains, fft_next_good_size(n_draws), 16))
    made_up = np.full((n_lags, 3), np.nan)
    made_up[:6, 0] = [1.0, 0.5, 0.2, 0.3, -0.4, 0.1]  # rises at the second pair, stops at the third
    made_up[:4, 1] = [1.0, -1.2, 0.4, 0.1]  # the first pair is not positive
    made_up[:, 2] = 1.0 / (1 + np.arange(n_lags))  # never stops within the lags
    rho = np.concatenate([*columns, made_up], axis=1)
    n_total = n_chains * n_draws
    r_eff, stops = geyer_relative_eff(rho, n_total, n_draws)
    expected_stops = _geyer_stops(rho, n_draws)[1].any(axis=0)
    np.testing.assert_array_equal(stops, expected_stops)
    assert stops[-3] and stops[-2]
    assert stops[-1] == (n_draws - 5 <= 2 * (n_lags // 2 - 1))  # the last lags' pair: t >= n - 5
    assert np.isnan(r_eff[~stops]).all()
    expected = n_total / _geyer_tau(rho[:, stops], n_total, n_draws) / n_total
    np.testing.assert_array_equal(r_eff[stops], expected)  # bit for bit
