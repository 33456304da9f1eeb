"""R loo's relative efficiency by short directly summed lags equals the all-lags FFT path;
ArviZ's split-chain relative ESS (mean and tail) equals the installed ArviZ's, in both
generations, without calling it."""

from pathlib import Path

import numpy as np
import pytest

from bayesij.array.ess import (
    SHORT_LAGS,
    _geyer_stops,
    exp_of_rows,
    log_lik_relative_eff,
    log_lik_relative_eff_rows,
    mean_relative_ess,
    relative_eff_rows,
    split_log_lik_relative_eff_rows,
    split_relative_ess,
    tail_relative_ess_rows,
)
from bayesij.array.kernels.autocorrelation import short_lag_autocorrelations
from peers import ARVIZ_1, load_example


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


def test_arviz_s_r_eff_is_the_mean_ess_of_the_posterior_over_the_draws():
    data = load_example("centered_eight")
    posterior = data["posterior"]
    draws = np.concatenate(
        [posterior[v].values.reshape(4, 500, -1) for v in ("mu", "theta", "tau")], axis=2
    )
    if ARVIZ_1:
        from arviz_stats.loo.loo_helper import _get_r_eff

        expected = _get_r_eff(data, 2000)
    else:
        import arviz as az

        ess = az.ess(data, method="mean")
        expected = np.hstack([ess[v].values.ravel() for v in ess.data_vars]).mean() / 2000
    assert mean_relative_ess(draws) == pytest.approx(expected, rel=1e-12)
    assert mean_relative_ess(draws[:1]) == 1.0  # one chain: ArviZ uses 1


def test_the_tail_ess_of_rows_is_arviz_s():
    rows = np.exp(np.random.default_rng(1).normal(size=(3, 1000)).cumsum(axis=1) * 0.05)
    ours = split_relative_ess(rows.T[None], "tail")  # each row one chain
    if ARVIZ_1:  # each row is one chain
        from arviz_stats.base import array_stats

        def tail_ess(row):
            return array_stats.ess(row[None], method="tail", prob=0.05, relative=True)

    else:
        import arviz as az

        def tail_ess(row):
            return az.ess(row, method="tail", prob=0.05, relative=True)

    expected = [float(tail_ess(row)) for row in rows]
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    assert np.all((ours > 0) & (ours < 1))  # autocorrelated rows


def _autoregressive(n_chains, n_draws, phi, rng):
    noise = rng.standard_t(4, size=(n_chains, n_draws))
    x = np.empty_like(noise)
    x[:, 0] = noise[:, 0]
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize("n_draws", [9, 12, 999])  # short chains: Geyer's loop bounds
@pytest.mark.parametrize("method", ["mean", "tail"])
def test_the_split_chain_ess_is_the_installed_arviz_s(method, n_draws):
    rng = np.random.default_rng(5)
    # phi = -0.9: antithetic draws, the integrated time at its floor 1 / log10(S)
    columns = [_autoregressive(4, n_draws, phi, rng) for phi in (0.0, 0.5, 0.9, 0.99, -0.9)]
    columns += [np.ones((4, n_draws)), rng.integers(0, 2, (4, n_draws)).astype(float)]
    draws = np.stack(columns, axis=2)  # an odd number of draws: the middle one left out
    ours = split_relative_ess(draws, method)
    if ARVIZ_1:
        from arviz_stats.base import array_stats

        def arviz_ess(x):
            options = {"prob": 0.05} if method == "tail" else {}
            return array_stats.ess(
                x, method=method, chain_axis=0, draw_axis=1, relative=True, **options
            )

    else:
        import arviz as az

        def arviz_ess(x):
            options = {"prob": 0.05} if method == "tail" else {}
            return az.ess(x, method=method, relative=True, **options)

    expected = [float(arviz_ess(draws[:, :, j])) for j in range(draws.shape[2])]
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    half = n_draws // 2
    assert ours[5] == 4 * 2 * half  # a constant column: the split draws' number, as ArviZ
    if method == "mean" and n_draws == 999:
        assert ours[4] == pytest.approx(np.log10(4 * 2 * half), rel=1e-12)  # the floor
    assert np.isnan(split_relative_ess(draws[:, :3], method)).all()  # fewer than 4 draws
    with pytest.raises(ValueError, match="method: found 'bulk'"):
        split_relative_ess(draws, "bulk")


def test_the_compiled_tail_ess_of_rows_equals_the_sorted_one():
    """Independent, autocorrelated (Geyer's sequence past the short lags: the FFT), tied,
    few-valued and constant rows (a constant indicator gets the number of draws)."""
    from bayesij.array.kernels.tails import row_extremes

    rng = np.random.default_rng(5)
    rows = rng.normal(size=(12, 1001))
    for r, phi in [(1, 0.5), (2, 0.95), (3, 0.995)]:
        rows[r] = _autoregressive(1, 1001, phi, rng)[0]
    rows[4, 1:1000:2] = rows[4, 0:999:2]  # every value twice
    rows[5] = np.round(rows[5])
    rows[6] = np.where(rows[6] > 1.0, 7.0, rows[6])  # 16 % at the maximum
    rows[7] = 3.0
    count = int(np.floor(1000 * 0.05)) + 2  # both quantiles' order statistics
    ours = tail_relative_ess_rows(rows, row_extremes(rows, count), 0.05)
    expected = split_relative_ess(rows.T[None], "tail")
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    assert ours[7] == 1000 / 1001 * 1.0 or ours[7] == expected[7]
    assert ours[3] < 0.05 < ours[0]  # the slow chain is told apart


@pytest.mark.parametrize("n_chains, n_draws", [(4, 1000), (3, 999), (1, 500), (2, 33), (4, 9)])
def test_r_loo_s_split_chain_r_eff_of_rows_is_arviz_s_ess_of_exp(n_chains, n_draws):
    """R loo's relative efficiency from 2.9 on, computed from rows (the compiled short lags
    and ArviZ's Geyer sequence) equals ArviZ's split-chain ESS of the mean of
    ``exp(l - max l)`` (``split_relative_ess``, tested against the installed ArviZ above):
    independent, autocorrelated (past the short lags: ArviZ's own way), antithetic,
    constant, impossible at some draws and everywhere, and widely spread columns; an odd
    number of draws leaves the middle one out, chains too short for the short lags take
    ArviZ's way whole."""
    rng = np.random.default_rng(3)
    columns = [_autoregressive(n_chains, n_draws, phi, rng) for phi in (0.0, 0.5, 0.9, 0.995)]
    columns += [_autoregressive(n_chains, n_draws, -0.9, rng), np.full((n_chains, n_draws), -2.0)]
    impossible = 0.3 * rng.normal(size=(n_chains, n_draws))
    impossible[0, 1] = -np.inf
    columns += [impossible, np.full((n_chains, n_draws), -np.inf)]
    columns += [300.0 * rng.normal(size=(n_chains, n_draws))]  # exp spans past exp(-708)
    log_lik = np.stack(columns, axis=2)
    top = log_lik.max(axis=(0, 1), keepdims=True)
    with np.errstate(invalid="ignore"):
        expected = split_relative_ess(np.exp(log_lik - np.where(np.isfinite(top), top, 0)))
    ours = log_lik_relative_eff(log_lik, split=True)
    np.testing.assert_allclose(ours, expected, rtol=1e-12, equal_nan=True)
    rows = np.ascontiguousarray(np.moveaxis(log_lik, 2, 0)).reshape(log_lik.shape[2], -1)
    np.testing.assert_array_equal(split_log_lik_relative_eff_rows(rows, n_chains), ours)
    if n_draws >= 500 and n_chains >= 3:  # the slowly mixing column (past the short lags)
        assert ours[3] < 0.3 < 0.9 < ours[0]
