"""Weighted CRPS and SCRPS against the double sums of their definitions (Gneiting & Raftery
2007; Bolin & Wallin 2023), computed here pair by pair: ``E|X - y| - E|X - X'| / 2`` and
``-E|X - y| / E|X - X'| - log(E|X - X'|) / 2`` for the weighted draws."""

import numpy as np
import pytest

from bayesij.array.scores import weighted_crps


def test_scores_are_the_double_sums():
    rng = np.random.default_rng(6)
    draws = rng.normal(size=(40, 5))
    draws[3:7, 2] = draws[3, 2]  # ties
    y = rng.normal(size=5)
    weights = rng.uniform(size=(40, 5))
    weights /= weights.sum(axis=0)
    crps, scrps = weighted_crps(draws, y, weights)
    for n in range(5):
        x, w = draws[:, n], weights[:, n]
        error = np.sum(w * np.abs(x - y[n]))
        spread = np.sum(w[:, None] * w[None, :] * np.abs(x[:, None] - x[None, :]))
        assert -crps[n] == pytest.approx(error - spread / 2, rel=1e-12)
        assert scrps[n] == pytest.approx(-error / spread - np.log(spread) / 2, rel=1e-12)


def test_a_point_mass_scores_its_absolute_error():
    draws = np.full((10, 1), 2.0)
    crps, scrps = weighted_crps(draws, np.array([3.5]), np.full((10, 1), 0.1))
    assert crps[0] == pytest.approx(-1.5)
    assert np.isnan(scrps[0]) or np.isinf(scrps[0])  # no spread: SCRPS undefined
