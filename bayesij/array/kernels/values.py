"""The value check of a log-likelihood or quantity matrix as one compiled count, and the
count of a recovered matrix's values apart from the draws'.

NumPy references: ``numpy.count_nonzero`` of the values outside the limits, and of
``|a - b[:, order]| > rtol (1 + |b[:, order]|)`` (``tests/array/kernels/test_values.py``).
"""

from __future__ import annotations

import math

import numpy as np

from bayesij.array.kernels.fastmath import compiled

__all__ = ["count_outside", "count_apart"]


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


@compiled
def _count_apart(recovered, given, order, rtol):
    count = 0
    for k in range(recovered.shape[0]):
        for j in range(recovered.shape[1]):
            b = given[k, order[j]]
            count += not abs(recovered[k, j] - b) <= rtol * (1.0 + abs(b))
    return count


def count_apart(recovered: np.ndarray, given: np.ndarray, order: np.ndarray, rtol: float) -> int:
    """Number of values of ``recovered`` (K, N) further than ``rtol (1 + |b|)`` from
    ``b = given[:, order]`` (``given`` (K, M), ``order`` (N,) int), NaN counted apart: the
    check of a model recovered from the draws, with no gathered copy of the draws."""
    return int(_count_apart(recovered, given, np.asarray(order, dtype=np.int64), float(rtol)))
