"""The array layer of the Pareto diagnostics: tail lengths and the smoothing of each tail."""

import numpy as np
import pytest

from bayesij.array.pareto import (
    _own_tail_khat_sorted,
    own_tail_khat_rows,
    pareto_diagnostics,
    pareto_smooth_columns,
)


def test_columns_are_diagnosed_and_smoothed_independently():
    rng = np.random.default_rng(2)
    values = np.column_stack([rng.standard_t(2, 2000), rng.normal(size=2000)])
    both = pareto_diagnostics(values, 1.0, "both")
    alone = [pareto_diagnostics(values[:, [j]], 1.0, "both").khat[0] for j in range(2)]
    np.testing.assert_allclose(both.khat, alone)
    assert both.tail_len.tolist() == [134, 134]  # floor(3 sqrt(2000))
    left = pareto_diagnostics(values, 1.0, "left").khat
    np.testing.assert_allclose(left, pareto_diagnostics(-values, 1.0, "right").khat)
    smoothed, khat = pareto_smooth_columns(values, 1.0, "both")
    np.testing.assert_allclose(khat, both.khat)
    order = np.argsort(values, axis=0)
    tails = np.zeros_like(values, dtype=bool)
    for j in range(2):
        tails[order[:134, j], j] = tails[order[-134:, j], j] = True
    changed = smoothed != values
    assert not (changed & ~tails).any()  # nothing outside the two tails
    assert changed.sum() >= 2 * 2 * 134 - 8  # the tails (a draw at the truncation may stay)
    # The order is kept: in the raw draws' order the smoothed ones do not decrease.
    for j in range(2):
        assert np.all(np.diff(smoothed[order[:, j], j]) >= 0)


@pytest.mark.parametrize("tail", ["right", "both"])
def test_the_own_tail_khat_of_rows_equals_the_sorted_one(tail):
    """The compiled path (extremes, counted indicators, fits per row) against partial
    sorts of each row: heavy tails, ties, a slow chain whose tail outgrows the extremes
    kept, non-finite values and short rows."""
    rng = np.random.default_rng(4)
    rows = rng.standard_t(2, size=(10, 2000))
    rows[1] = np.exp(rows[1])
    rows[2, 1::2] = rows[2, ::2]
    x = np.zeros(2000)
    for t in range(1, 2000):  # r_eff about 0.005: a tail of about 1900
        x[t] = 0.99 * x[t - 1] + rng.normal()
    rows[3] = x
    rows[4, 7] = np.inf
    rows[5, 9] = np.nan
    ours = own_tail_khat_rows(rows, tail)
    expected = _own_tail_khat_sorted(rows, tail)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    assert np.isfinite(ours[:4]).all()
    short = rows[:, :50]
    np.testing.assert_array_equal(
        own_tail_khat_rows(short, tail), _own_tail_khat_sorted(short, tail)
    )
