"""The compiled weights of a dropped set against the steps they fuse: R loo's relative
efficiency by FFT (:func:`bayesij.array.ess.relative_eff_rows`), the tail length and NumPy's
Pareto smoothing (:func:`bayesij.array.psis.psis_chunk`, Vehtari et al. 2024), and to the bit
against the separate compiled calls the AMIP step made before."""

import numpy as np
import pytest

from bayesij.array.ess import (
    SHORT_LAGS,
    fft_next_good_size,
    log_lik_relative_eff_rows,
    relative_eff_rows,
)
from bayesij.array.kernels.psis import psis_weight_rows
from bayesij.array.kernels.set_weights import psis_set_weights
from bayesij.array.psis import psis_chunk, tail_length


def _set_lik(phi: float, spread: float, n_chains=4, n_draws=500, seed=0) -> np.ndarray:
    """An autocorrelated (AR(1) with coefficient ``phi``) summed log-likelihood, chains
    contiguous."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n_chains, n_draws))
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=n_chains)
    return (spread * x - 3.0).reshape(-1)


def _fused(lik, n_chains=4):
    n_draws = lik.size // n_chains
    return psis_set_weights(lik, n_chains, fft_next_good_size(n_draws), SHORT_LAGS)


@pytest.mark.parametrize("phi", [0.0, 0.3, 0.6])
@pytest.mark.parametrize("spread", [0.05, 0.5, 2.0])
def test_the_set_weights_are_r_loo_s_psis_of_the_set(phi, spread):
    lik = _set_lik(phi, spread)
    found = _fused(lik)
    assert found is not None
    weights, k = found
    r_eff = relative_eff_rows(np.exp(-lik - (-lik).max()).reshape(1, 4, 500))
    smoothed = psis_chunk(-lik[:, None], tail_length(2000, np.clip(r_eff, 1e-3, None)))
    expected = np.exp(smoothed.log_weights[:, 0] - smoothed.log_weights[:, 0].max())
    np.testing.assert_allclose(weights, expected / expected.sum(), rtol=1e-9, atol=1e-15)
    assert k == pytest.approx(smoothed.pareto_k[0], rel=1e-9, abs=1e-12)
    # the same numbers as the calls it fuses, to the bit
    r_eff = log_lik_relative_eff_rows(-lik[None], 4)
    w, khat, done = psis_weight_rows(lik[None], tail_length(2000, np.clip(r_eff, 1e-3, None)))
    assert done[0]
    np.testing.assert_array_equal(weights, w[0])
    assert k == khat[0]


def test_what_the_fused_weights_leave_to_numpy():
    lik = _set_lik(0.3, 0.5)
    for bad in (np.nan, np.inf, -np.inf):
        broken = lik.copy()
        broken[7] = bad
        assert _fused(broken) is None
    assert _fused(np.full(2000, -2.0)) is None  # equal values: no tail to fit
    slow = _set_lik(0.995, 0.5)  # Geyer's sequence runs past the short lags
    assert np.isfinite(log_lik_relative_eff_rows(-slow[None], 4)).all()  # by FFT
    assert _fused(slow) is None
