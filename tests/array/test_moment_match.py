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


def test_draws_moved_earlier_are_weighted_against_the_density_they_came_from():
    # Posterior N(0, I); target N(m, 1.5^2 I) (the posterior without a term). Draws moved
    # by an earlier match to 0.8 m + 1.2 x keep the density of the x they came from
    # (``proposal``): the weights are target / that density, so the weighted moments are
    # the target's, which the weights against the posterior at the moved draws miss.
    from bayesij.array.moment_match import moment_matched_draws

    rng = np.random.default_rng(3)
    x = rng.normal(size=(4000, 2))
    mean, scale = np.array([3.0, -2.0]), 1.5

    def log_prob(u):
        return -0.5 * np.sum(u**2, axis=1)

    def removed(u):  # log_prob - the target's log density
        return log_prob(u) + 0.5 * np.sum((u - mean) ** 2, axis=1) / scale**2

    moved = 0.8 * mean + 1.2 * x
    found = moment_matched_draws(
        moved,
        log_prob,
        removed,
        log_prob(moved),
        removed(moved),
        400,
        split=False,
        proposal=log_prob(x),
    )
    weights = np.exp(found.log_weights)
    assert found.pareto_k < 0.7
    np.testing.assert_allclose(weights @ found.draws, mean, atol=0.1)
    variance = weights @ (found.draws - weights @ found.draws) ** 2
    np.testing.assert_allclose(variance, scale**2, rtol=0.15)
