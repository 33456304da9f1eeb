"""Moment matching's affine moves (Paananen et al. 2021): after each move the draws have the
importance-weighted moments they were matched to — the mean (shift), the mean and the
marginal variances (scale), the mean and the covariance (covariance) — and the affine maps
compose and invert exactly. (The whole procedure against exact LOO on a conjugate model:
tests/stats/test_moment_match.py.)"""

import numpy as np

from bayesij.array.moment_match import _Affine, _step


def _draws_and_weights():
    rng = np.random.default_rng(7)
    draws = rng.multivariate_normal([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]], size=2000)
    log_w = -0.5 * ((draws[:, 0] - 1.8) / 0.7) ** 2 + 0.3 * draws[:, 1]
    weights = np.exp(log_w - log_w.max())
    return draws, weights / weights.sum()


def test_each_move_matches_the_weighted_moments():
    draws, w = _draws_and_weights()
    weighted_mean = w @ draws
    centred = draws - weighted_mean
    weighted_cov = (centred * w[:, None]).T @ centred
    shifted = _step("shift", draws, w).apply(draws)
    np.testing.assert_allclose(shifted.mean(axis=0), weighted_mean, atol=1e-12)
    np.testing.assert_allclose(np.cov(shifted.T), np.cov(draws.T), atol=1e-12)
    scaled = _step("scale", draws, w).apply(draws)
    np.testing.assert_allclose(scaled.mean(axis=0), weighted_mean, atol=1e-12)
    np.testing.assert_allclose(scaled.var(axis=0), weighted_cov.diagonal(), rtol=1e-10)
    moved = _step("covariance", draws, w).apply(draws)
    np.testing.assert_allclose(moved.mean(axis=0), weighted_mean, atol=1e-12)
    np.testing.assert_allclose(np.cov(moved.T), weighted_cov, rtol=1e-10)


def test_affine_maps_compose_and_invert():
    rng = np.random.default_rng(1)
    first = _Affine(rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3))
    second = _Affine(rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3))
    points = rng.normal(size=(5, 3))
    both = first.then(second)
    np.testing.assert_allclose(both.apply(points), second.apply(first.apply(points)), atol=1e-12)
    np.testing.assert_allclose(first.inverse(first.apply(points)), points, atol=1e-12)
