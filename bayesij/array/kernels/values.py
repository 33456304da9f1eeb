"""The value check of a log-likelihood or quantity matrix as one compiled count.

NumPy reference: ``numpy.count_nonzero`` of the values outside the limits
(``tests/array/kernels/test_values.py``).
"""

from __future__ import annotations

import math

import numpy as np

from bayesij.array.kernels.fastmath import compiled

__all__ = ["count_outside"]


@compiled
def _count_outside(flat, limit, minus_inf):
    count = 0
    for i in range(flat.shape[0]):
        v = flat[i]
        count += (not v < limit) | ((v < -limit) & ((v != -math.inf) | (not minus_inf)))
    return count


def count_outside(values: np.ndarray, limit: float, minus_inf: bool) -> int:
    """Number of values that are NaN, +inf, beyond ``±limit``, or ``-inf`` unless
    ``minus_inf``: one vectorised pass over a C-contiguous float array (the value checks
    of :mod:`bayesij.array.checks`, at the speed of reading memory)."""
    return int(_count_outside(values.reshape(-1), float(limit), bool(minus_inf)))
