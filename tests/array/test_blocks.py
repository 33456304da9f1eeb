"""Batch-means blocks of draws: contiguous within chains, never spanning two, sizes that
differ by at most one; the batch-means weights of the Monte Carlo variance."""

import numpy as np
import pytest

from bayesij.array.blocks import draw_blocks, error_weights


def test_blocks_stay_within_chains_and_cover_every_draw_once():
    chains = np.repeat([0, 1, 2], [100, 100, 101])
    blocks = draw_blocks(chains, 50)
    assert len(blocks) == 3 * 17  # ceil(50 / 3) per chain
    np.testing.assert_array_equal(np.sort(np.concatenate(blocks)), np.arange(301))
    for rows in blocks:
        assert np.unique(chains[rows]).size == 1
        np.testing.assert_array_equal(rows, np.arange(rows[0], rows[0] + rows.size))
    sizes = [rows.size for rows in blocks[:17]]
    assert max(sizes) - min(sizes) <= 1
    assert len(draw_blocks(np.zeros(3, dtype=int), 50)) == 3  # fewer draws than blocks


def test_error_weights_are_batch_means():
    sizes = np.array([25.0, 25.0, 25.0, 25.0])
    # Equal blocks: B / (B - 1) (1 / B)^2 = 1 / (B (B - 1)).
    np.testing.assert_allclose(error_weights(sizes), np.full(4, 1 / 12), rtol=1e-15)
    unequal = np.array([10.0, 30.0])
    np.testing.assert_allclose(error_weights(unequal), 2 * (unequal / 40) ** 2, rtol=1e-15)


def test_batch_means_variance_of_a_mean_is_right_for_iid_draws():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 4000))  # 400 replicates of 4000 iid draws
    blocks = draw_blocks(np.zeros(4000, dtype=int), 50)
    means = np.stack([x[:, rows].mean(axis=1) for rows in blocks], axis=1)
    errors = means - x.mean(axis=1, keepdims=True)
    weights = error_weights(np.array([rows.size for rows in blocks], dtype=float))
    estimate = (errors**2 @ weights).mean()
    assert estimate == pytest.approx(1 / 4000, rel=0.05)
