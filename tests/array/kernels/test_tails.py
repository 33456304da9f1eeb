"""The compiled tails of rows against NumPy: ``np.sort`` for the extremes, ``np.quantile``
for the quantiles, the centred lagged sums of the indicators as
:func:`bayesij.array.ess._short_autocovariance` computes them, and the NumPy k-hat
:func:`bayesij.array.psis.right_tail_khat`."""

import numpy as np
import pytest

from bayesij.array.ess import _short_autocovariance
from bayesij.array.kernels.tails import (
    indicator_autocovariances,
    right_tail_khats,
    row_extremes,
    row_quantiles,
)
from bayesij.array.psis import right_tail_khat


def _rows(n_rows=60, n=1000, seed=0):
    """Heavy and light tails, negative values, repeated draws (an MCMC chain's), rows
    with few distinct values and rows whose every 16th value misleads the threshold."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_t(3, size=(n_rows, n))
    rows[1::4] = np.exp(rows[1::4])
    k = (n - 1) // 3
    rows[2::4, 1 : 3 * k : 3] = rows[2::4, 0 : 3 * k : 3]  # ties
    rows[3] = np.round(rows[3])  # a handful of values
    rows[5, ::16] = rows[5, ::16].min()  # the sample sees only the smallest value
    rows[6, ::16] = rows[6].max() + 1.0  # and here only values above all others
    rows[7] = 2.5  # constant
    rows[8, -40:] = rows[8].max() + 1.0  # the last 40 values equal, above all the others
    return rows


@pytest.mark.parametrize("count", [5, 60, 200, 400])
def test_the_extremes_are_numpy_s_sorted_ends(count):
    rows = _rows()
    smallest, largest = row_extremes(rows, count)
    ordered = np.sort(rows, axis=1)
    np.testing.assert_array_equal(smallest, ordered[:, :count])
    np.testing.assert_array_equal(largest, ordered[:, -count:])


@pytest.mark.parametrize("n", [1000, 999, 4000])
def test_the_quantiles_are_numpy_s(n):
    rows = _rows(n=n)
    count = n - int(np.floor((n - 1) * 0.95))
    probs = [0.05, 1 - 0.05]
    ours = row_quantiles(*row_extremes(rows, count), n, probs)
    np.testing.assert_array_equal(ours, np.quantile(rows, probs, axis=1).T)
    with pytest.raises(ValueError, match="beyond the"):
        row_quantiles(*row_extremes(rows, 3), n, probs)


def test_the_indicator_autocovariances_are_the_centred_sums():
    rows = _rows(n=1001)  # odd: the middle draw belongs to neither half
    quantiles = np.quantile(rows, [0.05, 0.5, 0.95], axis=1).T
    means, acov = indicator_autocovariances(rows, quantiles, 16)
    half = rows.shape[1] // 2
    for j in range(quantiles.shape[1]):
        below = (rows <= quantiles[:, j, None]).astype(float)
        chains = np.stack([below[:, :half], below[:, -half:]], axis=1)
        np.testing.assert_array_equal(means[:, j], chains.mean(axis=2))
        np.testing.assert_allclose(acov[:, j], _short_autocovariance(chains), atol=1e-14)


@pytest.mark.parametrize("length", [3, 5, 40, 99, 100, 150])
def test_the_compiled_khat_is_numpy_s(length):
    rows = np.sort(_rows(n=1000)[:, -101:], axis=1)  # each row's 101 largest, ascending
    tail_len = np.full(rows.shape[0], length)
    tail_len[::5] = 20  # lengths differ between rows
    ours = right_tail_khats(rows, tail_len, 1000)
    expected = right_tail_khat(rows.T, tail_len, 1000)
    np.testing.assert_allclose(ours, np.where(np.isinf(expected), np.nan, expected), rtol=1e-12)
    assert np.isnan(ours[7])  # all equal
    assert np.isnan(ours[8]) == (length <= 40 or length >= 101)  # a tail of equal values
    assert np.isnan(right_tail_khats(rows, np.full(rows.shape[0], 1000), 1000)).all()
