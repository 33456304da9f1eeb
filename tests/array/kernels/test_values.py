"""The compiled value check against a direct NumPy count."""

import numpy as np
import pytest

from bayesij.array.kernels.values import count_outside


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
