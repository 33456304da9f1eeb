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
