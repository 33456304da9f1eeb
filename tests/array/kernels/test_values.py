"""The compiled value check against a direct NumPy count."""

import numpy as np
import pytest

from bayesij.array.kernels.values import count_apart, count_outside


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("minus_inf", [True, False])
def test_count_outside_equals_a_direct_count(dtype, minus_inf):
    rng = np.random.default_rng(3)
    values = rng.normal(size=(50, 40)).astype(dtype)
    values.flat[rng.choice(values.size, 12, replace=False)] = rng.choice(
        [np.nan, np.inf, -np.inf, 1e31, -1e31, 1e29, -1e29], 12
    )
    magnitude_ok = np.abs(values.astype(float)) < 1e30
    allowed = magnitude_ok | (np.isneginf(values) if minus_inf else False)
    assert count_outside(values, 1e30, minus_inf) == int((~allowed).sum())
    assert count_outside(values[:0], 1e30, minus_inf) == 0


def test_count_apart_equals_a_direct_count_of_the_gathered_values():
    rng = np.random.default_rng(4)
    given = rng.normal(size=(30, 50)) * 100.0
    order = rng.permutation(50)
    recovered = given[:, order] * (1.0 + 1e-9 * rng.normal(size=(30, 50)))
    spots = rng.choice(recovered.size, 9, replace=False)
    recovered.flat[spots[:3]] = np.nan
    moved = np.array([1e-3, -1e-3, 1e-3, -1e-3, 2e-7, -2e-7])
    recovered.flat[spots[3:]] += moved * (1 + np.abs(recovered.flat[spots[3:]]))
    b = given[:, order]
    expected = int(np.count_nonzero(~(np.abs(recovered - b) <= 1e-6 * (1 + np.abs(b)))))
    assert expected == 7  # the NaNs and the 1e-3 moves, not the 2e-7 ones, nor round-off
    assert count_apart(recovered, given, order, 1e-6) == expected
