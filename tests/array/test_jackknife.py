"""IJ covariance: against the exact bootstrap of a conjugate model, noise correction, MCSE."""

import numpy as np
import pytest

from bayesij.array import ij_covariance, influence_scores
from conjugate import (
    ConjugateNormal,
    exact_bootstrap_means,
    exact_influence,
    heteroskedastic_regression,
)


def _centred_sum_of_squares(psi):
    centred = psi - psi.mean(axis=1, keepdims=True)
    return centred @ centred.T


def test_raw_covariance_is_centred_sum_of_influence_products(rng):
    f = rng.normal(size=(4, 100, 3))
    l = rng.normal(size=(4, 100, 50)) + f[:, :, :1] * rng.normal(size=50)
    psi = influence_scores(f, l).psi
    result = ij_covariance(f, l)
    np.testing.assert_allclose(result.covariance, 50 * np.cov(psi, ddof=0), rtol=1e-12)
    np.testing.assert_allclose(result.posterior_covariance, np.cov(f.reshape(400, 3).T), rtol=1e-12)


@pytest.mark.slow  # a coverage study: the full suite runs it
def test_ij_matches_exact_bootstrap_of_conjugate_model(misspecified_regression, rng):
    """N = 1000, noise sd depends on x but the model says 1: bootstrap variance != posterior."""
    model = misspecified_regression
    boot = exact_bootstrap_means(model, 20000, rng)
    boot_var = boot.var(axis=0)
    se_boot = ((boot - boot.mean(axis=0)) ** 2).std(axis=0) / np.sqrt(len(boot))
    beta = model.draws(4000, rng)
    result = ij_covariance(beta, model.log_lik(beta), np.repeat(np.arange(4), 1000))
    ij = np.diag(result.covariance_corrected)
    mcse = np.diag(result.mcse)
    assert np.all(np.abs(ij - boot_var) < 3.5 * np.sqrt(mcse**2 + se_boot**2))
    # ... while the posterior variance is far from it (the slope's is half the bootstrap's).
    posterior = np.diag(result.posterior_covariance)
    assert np.all(np.abs(posterior - boot_var) > 10 * np.sqrt(mcse**2 + se_boot**2))
    # The exact IJ (from exact influence) is within the bootstrap's own error: the linear
    # approximation is accurate at this N.
    exact_ij = np.diag(_centred_sum_of_squares(exact_influence(model)))
    assert np.all(np.abs(exact_ij - boot_var) < 3.5 * se_boot)


@pytest.mark.slow
def test_noise_correction_removes_inflation_with_few_draws(rng):
    """10 coefficients, 40 iid draws: noise in psi inflates the raw IJ by about p/S = 25%.

    Averaged over 150 draw sets, the raw estimate is visibly inflated while the corrected
    one is unbiased for the exact IJ covariance (the standard error of each average is about
    0.04).
    """
    X, y = heteroskedastic_regression(
        1000, np.random.default_rng(3), p=10, noise=lambda x: np.ones(len(x))
    )
    model = ConjugateNormal(X, y, sigma=1.0)
    truth = np.diag(_centred_sum_of_squares(exact_influence(model)))
    raw, corrected = [], []
    for _ in range(150):
        beta = model.draws(40, rng)
        result = ij_covariance(beta, model.log_lik(beta), n_boot=2)
        raw.append(np.diag(result.covariance) / truth)
        corrected.append(np.diag(result.covariance_corrected) / truth)
    assert np.mean(raw) > 1.15
    assert abs(np.mean(corrected) - 1) < 0.1


@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_block_bootstrap_mcse_matches_spread_over_draw_sets(misspecified_regression, rng):
    model = misspecified_regression
    raws, mcses = [], []
    for _ in range(60):
        beta = model.draws(400, rng)
        result = ij_covariance(beta, model.log_lik(beta), np.repeat(np.arange(4), 100))
        raws.append(np.diag(result.covariance))
        mcses.append(np.diag(result.mcse))
    ratio = np.mean(mcses, axis=0) / np.std(raws, axis=0)
    # The sd of 60 values is itself uncertain by about 10%.
    assert np.all((ratio > 0.7) & (ratio < 1.4)), ratio


def test_chunked_equals_whole(rng, monkeypatch):
    from bayesij.array import numeric

    f = rng.normal(size=(2, 100, 2))
    l = rng.normal(size=(2, 100, 700)) + f[:, :, :1]
    whole = ij_covariance(f, l, n_boot=20)
    monkeypatch.setattr(numeric, "CHUNK_BYTES", 8 * 1000)
    chunked = ij_covariance(f, l, n_boot=20)
    for a, b in zip(whole, chunked, strict=True):
        if isinstance(a, tuple):  # the influence scores: field by field (block sums None)
            for x, y in zip(a, b, strict=True):
                assert (x is None) == (y is None)
                if x is not None:
                    np.testing.assert_allclose(x, y, rtol=1e-10)
            continue
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_impossible_observation_is_an_error(rng):
    l = rng.normal(size=(50, 4))
    l[3, 2] = -np.inf
    with pytest.raises(ValueError, match=r"log_lik: found -inf .* \(first: \[2\]\)"):
        ij_covariance(rng.normal(size=(50, 1)), l)


def test_block_moments_and_bootstrap_sums_equal_their_direct_forms():
    # Log-likelihood far from 0 (mean -1e4, spread 1): the shifted products lose nothing.
    from bayesij.array.blocks import block_moments, draw_blocks
    from bayesij.array.jackknife import _bootstrap_sums

    rng = np.random.default_rng(0)
    draws, k, n = 800, 3, 40
    f = rng.normal(size=(draws, k))
    centred_f = f - f.mean(axis=0)
    log_lik = rng.normal(size=(draws, n)) - 1e4 + 0.3 * f[:, :1]
    blocks = draw_blocks(np.repeat(np.arange(4), draws // 4), 20)
    moments, impossible = block_moments(centred_f, log_lik, blocks)
    centred_l = log_lik - log_lik.mean(axis=0)
    expected_cross = np.stack([centred_f[b].T @ centred_l[b] for b in blocks])
    np.testing.assert_allclose(moments.cross, expected_cross, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(moments.psi, centred_f.T @ centred_l / (draws - 1), atol=1e-12)
    assert not impossible.any()
    counts = rng.multinomial(20, np.full(20, 1 / 20), size=30).astype(float)
    total = counts @ moments.sizes
    mean_f = counts @ moments.sum_f / total[:, None]
    mean_l = counts @ moments.sum_l / total[:, None]
    cross = np.einsum("rb,bkn->rkn", counts, moments.cross)
    boot = cross / total[:, None, None] - mean_f[:, :, None] * mean_l[:, None, :]
    boot *= (total / (total - 1))[:, None, None]
    first, second = _bootstrap_sums(moments, counts)
    np.testing.assert_allclose(first, boot.sum(axis=2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(second, boot @ boot.transpose(0, 2, 1), rtol=1e-10, atol=1e-12)
