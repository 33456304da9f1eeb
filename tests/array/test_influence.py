"""Influence scores: against an independent covariance, exact derivatives and MCSE calibration."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesij.array import influence_scores, numeric, sum_by_group
from conjugate import exact_influence


def test_psi_equals_plain_sample_covariance(rng):
    f = rng.normal(size=(3, 200, 4))
    l = rng.normal(size=(3, 200, 7)) + 0.5 * f[:, :, :1]
    psi = influence_scores(f, l).psi
    stacked = np.cov(f.reshape(600, 4).T, l.reshape(600, 7).T)  # ddof = 1
    np.testing.assert_allclose(psi, stacked[:4, 4:], rtol=1e-12, atol=1e-14)


def test_two_and_three_dimensional_input_agree(rng):
    f = rng.normal(size=(4, 150, 2))
    l = rng.normal(size=(4, 150, 9)) - f[:, :, 1:]
    chains = np.repeat(np.arange(4), 150)
    whole = influence_scores(f, l)
    flat = influence_scores(f.reshape(600, 2), l.reshape(600, 9), chains)
    np.testing.assert_allclose(flat.psi, whole.psi, rtol=1e-13)
    np.testing.assert_allclose(flat.mcse, whole.mcse, rtol=1e-13)


def test_chunked_equals_whole(rng, monkeypatch):
    f = rng.normal(size=(400, 3))
    l = rng.normal(size=(400, 1000)) + f[:, :1]
    whole = influence_scores(f, l)
    monkeypatch.setattr(numeric, "CHUNK_BYTES", 8 * 400 * 10)  # forces chunks of 256 obs
    assert len(numeric.obs_chunks(1000, 400 * 10)) == 4
    chunked = influence_scores(f, l)
    np.testing.assert_allclose(chunked.psi, whole.psi, rtol=1e-12)
    np.testing.assert_allclose(chunked.mcse, whole.mcse, rtol=1e-12)


def test_psi_matches_exact_derivative_within_reported_mcse(misspecified_regression, rng):
    """z = (psi-hat - dE_w[beta]/dw_n) / mcse over 30 independent sets of exact draws.

    The 2000 z-scores of one set share its draws and are strongly correlated, so their mean
    square varies a lot from set to set (sd about 0.8); over 30 sets it is near 1 when the
    MCSE is calibrated (sd about 0.15), and psi-hat averages to the exact derivative.
    """
    model = misspecified_regression
    exact = exact_influence(model)
    chains = np.repeat(np.arange(4), 500)
    mean_square, estimates, mcses = [], [], []
    for _ in range(30):
        beta = model.draws(2000, rng)
        scores = influence_scores(beta, model.log_lik(beta), chains)
        z = (scores.psi - exact) / scores.mcse
        mean_square.append(np.mean(z**2))
        assert np.mean(np.abs(z) > 4) < 0.01
        estimates.append(scores.psi)
        mcses.append(scores.mcse)
    assert 0.65 < np.mean(mean_square) < 1.4
    bias_z = (np.mean(estimates, axis=0) - exact) / (np.mean(mcses, axis=0) / np.sqrt(30))
    assert np.mean(np.abs(bias_z) > 4) < 0.01


def _ar1_chains(rng, n_chains, n_draws, rho, mean, var):
    """Stationary AR(1) chains with N(mean, var) marginals, shape (n_chains, n_draws)."""
    x = np.empty((n_chains, n_draws))
    x[:, 0] = rng.normal(size=n_chains)
    innovations = rng.normal(size=(n_chains, n_draws)) * np.sqrt(1 - rho**2)
    for t in range(1, n_draws):
        x[:, t] = rho * x[:, t - 1] + innovations[:, t]
    return mean + np.sqrt(var) * x


@pytest.mark.slow  # a coverage study: the full suite runs it
def test_mcse_accounts_for_autocorrelation(rng):
    """AR(1) draws (rho = 0.9) of theta ~ N(m, v), l_n = -(y_n - theta)^2 / 2.

    Exactly psi_n = v (y_n - m). Over 300 replications, the reported MCSE matches the
    observed spread of psi-hat, while the iid formula is about sqrt(19) times too small.
    """
    y = np.array([-1.0, 0.5, 2.0])
    m, v = 0.3, 0.04
    estimates, mcses, iid = [], [], []
    for _ in range(300):
        theta = _ar1_chains(rng, 4, 1000, 0.9, m, v)[..., None]
        log_lik = -0.5 * (y - theta) ** 2
        scores = influence_scores(theta, log_lik)
        estimates.append(scores.psi[0])
        mcses.append(scores.mcse[0])
        series = (theta - theta.mean()) * (log_lik - log_lik.mean(axis=(0, 1)))
        iid.append(series.reshape(-1, 3).std(axis=0) / np.sqrt(4000))
    estimates = np.array(estimates)
    np.testing.assert_allclose(estimates.mean(axis=0), v * (y - m), rtol=0.03)
    spread = estimates.std(axis=0)
    np.testing.assert_allclose(np.mean(mcses, axis=0) / spread, 1.0, atol=0.15)
    assert np.all(np.mean(iid, axis=0) / spread < 0.5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shift=st.floats(-1e3, 1e3))
def test_invariances(seed, shift):
    """Permuting observations permutes psi; constants added to a column change nothing."""
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(2, 60, 2))
    l = rng.normal(size=(2, 60, 6)) + f[:, :, :1]
    base = influence_scores(f, l)
    order = rng.permutation(6)
    permuted = influence_scores(f, l[:, :, order])
    np.testing.assert_allclose(permuted.psi, base.psi[:, order], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(permuted.mcse, base.mcse[:, order], rtol=1e-10, atol=1e-12)
    shifted = influence_scores(f + 3.0, l + shift * np.arange(6))
    np.testing.assert_allclose(shifted.psi, base.psi, rtol=1e-6, atol=1e-9)


def test_impossible_observation_gives_nan_with_warning(rng):
    f = rng.normal(size=(100, 1))
    l = rng.normal(size=(100, 3))
    l[5, 1] = -np.inf
    with pytest.warns(RuntimeWarning, match=r"-inf .* 1 observation\(s\) \(columns \[1\]\)"):
        scores = influence_scores(f, l)
    assert np.isnan(scores.psi[0, 1]) and np.isnan(scores.mcse[0, 1])
    assert np.all(np.isfinite(scores.psi[0, [0, 2]]))


def test_sum_by_group_matches_loop(rng):
    l = rng.normal(size=(10, 8))
    codes = np.array([2, 0, 1, 0, 2, 2, 1, 0])
    summed = sum_by_group(l, codes, 3)
    for g in range(3):
        np.testing.assert_allclose(summed[:, g], l[:, codes == g].sum(axis=1))


def test_group_psi_is_sum_of_observation_psi(rng):
    f = rng.normal(size=(300, 2))
    l = rng.normal(size=(300, 6)) + f[:, :1]
    codes = np.array([0, 0, 1, 1, 1, 2])
    grouped = influence_scores(f, sum_by_group(l, codes, 3)).psi
    single = influence_scores(f, l).psi
    expected = np.stack([single[:, codes == g].sum(axis=1) for g in range(3)], axis=1)
    np.testing.assert_allclose(grouped, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "n_draws, chunk", [(10, slice(0, 3)), (600, slice(5, 77)), (1000, slice(250, 256))]
)
def test_tiled_transpose_equals_numpy(rng, n_draws, chunk):
    matrix = rng.normal(size=(n_draws, 100))
    out = np.full((80, n_draws), np.nan)
    rows = numeric.transpose_columns(matrix, chunk, out)
    np.testing.assert_array_equal(rows, matrix[:, chunk].T)


def test_block_sums_kept_in_float32_are_the_float64_ones_rounded():
    rng = np.random.default_rng(2)
    f = rng.normal(size=(4, 300, 2))
    log_lik = -0.5 * (rng.normal(size=20) - f[..., :1]) ** 2
    wide = influence_scores(f, log_lik, keep_blocks=True)
    narrow = influence_scores(f, log_lik, keep_blocks=True, blocks_dtype=np.float32)
    assert (
        narrow.block_sums.dtype == np.float32 and narrow.block_sums.shape == wide.block_sums.shape
    )
    np.testing.assert_allclose(narrow.block_sums, wide.block_sums, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(narrow.psi, wide.psi)
    # The block sums add up to psi times (S - 1) / S ... times S: their mean over draws.
    np.testing.assert_allclose(wide.block_sums.sum(axis=0) / f[..., 0].size, wide.psi, rtol=1e-12)


def test_combinations_of_the_quantities_are_the_combined_quantities_influence():
    """``rows``: the influence, its Monte Carlo error and kept block sums of
    ``f[:, first] + coef * f[:, second]`` from the columns' moments combined equal those of
    the combined draws themselves, an impossible observation NaN in both."""
    rng = np.random.default_rng(5)
    f = rng.normal(size=(4, 250, 3))
    log_lik = -0.5 * (rng.normal(size=20) - f[..., :1] - 0.5 * f[..., 2:]) ** 2
    log_lik[1, 7, 4] = -np.inf
    first, second = np.array([0, 2, 1, 0, 2]), np.array([1, 2, 1, 2, 0])
    coef = np.array([0.7, 0.0, 0.0, -1.3, 2.0])
    combined = f[..., first] + coef * f[..., second]
    with pytest.warns(RuntimeWarning, match="-inf"):
        ours = influence_scores(
            f, log_lik, keep_blocks=True, blocks_of=[4, 0], rows=(first, second, coef)
        )
    with pytest.warns(RuntimeWarning, match="-inf"):
        theirs = influence_scores(combined, log_lik, keep_blocks=True, blocks_of=[4, 0])
    np.testing.assert_allclose(ours.psi, theirs.psi, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ours.mcse, theirs.mcse, rtol=1e-10, atol=1e-15)
    possible = np.arange(20) != 4  # the impossible one's block sums: not finite in both
    np.testing.assert_allclose(
        ours.block_sums[..., possible], theirs.block_sums[..., possible], rtol=1e-12, atol=1e-13
    )
    assert not np.isfinite(ours.block_sums[..., 4]).any()
    assert np.isnan(ours.psi[:, 4]).all() and np.isnan(ours.mcse[:, 4]).all()
