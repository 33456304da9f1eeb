"""The compiled prefix sums of held rows against NumPy's gather and sum of each block
(``rows[slots[a:b]].sum(axis=0)`` added to the previous prefix): the same sums to the bit."""

import numpy as np
import pytest

from bayesij.array.kernels.rows import held_influence_mcse, held_prefix_sums, held_products


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


def test_products_and_monte_carlo_errors_of_held_rows_equal_numpy_s():
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(50, 1001))
    slots = np.array([7, 3, 49, 3, 0])
    for n in (1001, 500, 3):
        vector = rng.normal(size=n)
        np.testing.assert_allclose(
            held_products(rows, slots, vector), rows[slots][:, :n] @ vector, rtol=1e-12
        )
        weights = rng.dirichlet(np.ones(n))
        weights[1] = 0.0
        f = rng.normal(size=n)
        weighted = weights * (f - weights @ f)
        columns = rows[slots][:, :n].T
        centred = columns - weights @ columns
        a = np.divide(weighted, weights, out=np.zeros(n), where=weights > 0)
        phi = weighted @ centred
        expected = np.sqrt(weights**2 @ (a[:, None] * centred - phi) ** 2)
        np.testing.assert_allclose(
            held_influence_mcse(rows, slots, weights, weighted), expected, rtol=1e-10
        )
