"""The array layer of the Pareto diagnostics: tail lengths and the smoothing of each tail."""

import numpy as np

from bayesij.array.pareto import pareto_diagnostics, pareto_smooth_columns


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
