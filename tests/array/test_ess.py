"""R loo's relative efficiency by short directly summed lags equals the all-lags FFT path."""

from pathlib import Path

import numpy as np
import pytest

from bayesij.array.ess import (
    SHORT_LAGS,
    _geyer_stops,
    exp_of_rows,
    log_lik_relative_eff_rows,
    relative_eff_rows,
)
from bayesij.array.kernels.autocorrelation import short_lag_autocorrelations


def _ar1_chains(phi, n_rows=200, n_chains=4, n_draws=1000, seed=0):
    """Log-likelihood-like draws whose exp is an AR(1) chain with coefficient ``phi``."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(n_rows, n_chains, n_draws))
    x = np.empty_like(noise)
    x[..., 0] = noise[..., 0]
    for t in range(1, n_draws):
        x[..., t] = phi * x[..., t - 1] + noise[..., t]
    return 0.3 * x


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.95])
def test_short_lags_equal_the_fft_path(phi):
    draws = _ar1_chains(phi)
    draws[0] = 2.0  # constant: R loo's 0.5
    fast = log_lik_relative_eff_rows(draws.reshape(len(draws), -1), n_chains=4)
    reference = relative_eff_rows(exp_of_rows(draws))
    np.testing.assert_allclose(fast, reference, rtol=1e-12)
    assert fast[0] == 0.5


def test_slowly_mixing_rows_reach_past_the_short_lags():
    draws = _ar1_chains(0.95, n_rows=20)
    rows = draws.reshape(20, -1)
    rho = short_lag_autocorrelations(rows, 4, 1000, SHORT_LAGS)
    assert not _geyer_stops(rho, 1000)[1].any(axis=0).all()  # the FFT fallback was used


def test_chains_shorter_than_the_short_lags():
    draws = _ar1_chains(0.3, n_rows=10, n_draws=12)
    fast = log_lik_relative_eff_rows(draws.reshape(10, -1), n_chains=4)
    np.testing.assert_allclose(fast, relative_eff_rows(exp_of_rows(draws)), rtol=1e-12)


def test_log_lik_relative_eff_with_impossible_draws_equals_the_fft_path():
    from bayesij.array.ess import log_lik_relative_eff

    draws = _ar1_chains(0.4, n_rows=30)
    log_lik = np.moveaxis(draws, 0, 2).copy()  # (chains, draws, observations)
    log_lik[1, 7, 3] = -np.inf  # impossible at one draw: exp 0 there
    log_lik[..., 4] = -np.inf  # impossible at every draw: constant, R loo's 0.5
    expected = relative_eff_rows(exp_of_rows(np.moveaxis(log_lik, 2, 0)))
    np.testing.assert_allclose(log_lik_relative_eff(log_lik), expected, rtol=1e-12)
    assert log_lik_relative_eff(log_lik)[4] == 0.5


def test_very_short_chains_as_r_loo():
    """4 chains of 3 to 8 draws: R loo 2.5.1's relative_eff (saved with
    tests/reference/r_relative_eff_short.R); its Geyer loop does not start for chains of 5
    draws or fewer (r_eff 0.5)."""
    import pandas as pd

    from bayesij.array.ess import relative_eff

    reference = Path(__file__).parents[1] / "reference"
    expected = pd.read_csv(reference / "r_relative_eff_short.csv")
    for draws, rows in expected.groupby("draws"):
        log_lik = pd.read_csv(reference / f"log_lik_short_{draws}.csv").to_numpy()
        values = np.exp(log_lik.reshape(4, draws, 3))
        np.testing.assert_allclose(relative_eff(values), rows["r_eff"], rtol=1e-12)
