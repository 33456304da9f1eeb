"""The compiled prefix sums of held rows against NumPy's gather and sum of each block
(``rows[slots[a:b]].sum(axis=0)`` added to the previous prefix): the same sums to the bit."""

import numpy as np
import pytest

from bayesij.array.kernels.rows import held_prefix_sums


@pytest.mark.parametrize("seed", range(3))
def test_prefix_sums_equal_numpy_s_block_sums_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(40, 257)) * np.exp(rng.normal(size=(40, 1)) * 3)
    slots = rng.permutation(40)[:31]
    sizes = np.array([1, 2, 3, 5, 9, 17, 31])
    expected, summed, done = [], np.zeros(257), 0
    for size in sizes:
        summed = summed + rows[slots[done:size]].sum(axis=0)
        expected.append(summed)
        done = size
    np.testing.assert_array_equal(held_prefix_sums(rows, slots, sizes), np.array(expected))


def test_a_repeated_row_counts_each_time():
    rows = np.arange(6.0).reshape(2, 3)
    got = held_prefix_sums(rows, np.array([1, 1, 0]), np.array([2, 3]))
    np.testing.assert_array_equal(got, [[6.0, 8.0, 10.0], [6.0, 9.0, 12.0]])
