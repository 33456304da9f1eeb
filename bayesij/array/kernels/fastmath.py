"""The compiled math every kernel shares: how kernels are compiled, and a vectorisable
``exp`` (Cody-Waite reduction, degree-13 Taylor; within 2 ulp) and ``log`` (mantissa and
``2 atanh``; within 3 ulp) as scalar functions that loops inline and the compiler
vectorises (their polynomials with fused multiply-adds, the float bits moved by register
bitcasts), row minima and maxima, sums, and importance ratios with their sums.

NumPy references: ``numpy.exp``, ``numpy.log``, ``min``/``max``/``sum``
(``tests/array/kernels/test_fastmath.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.core import config as numba_config
from numba.extending import intrinsic

from bayesij.array.kernels.cache import CACHE
from bayesij.array.kernels.first_use import listen

listen()  # a line on stderr when the kernels compile for the first time

__all__ = [
    "compiled",
    "fused",
    "reordered",
    "MAX_RANGE",
    "as_float",
    "as_int",
    "exp",
    "log",
    "log_positive",
    "min_max",
    "row_sum",
    "row_mean",
    "ratios_and_sums",
]

#: Compiled without Python's error model or bounds checks, the GIL released (threads).
compiled = njit(nogil=True, cache=CACHE, error_model="numpy", boundscheck=False)


#: As ``compiled``, ``a * b + c`` fused into one rounding (FMA): the polynomials of
#: ``exp`` and ``log`` in half the instructions, and no less accurate.
fused = njit(nogil=True, cache=CACHE, error_model="numpy", boundscheck=False, fastmath={"contract"})


#: As ``compiled``, reductions reordered (vectorised); only where values are finite.
reordered = njit(
    nogil=True,
    cache=CACHE,
    error_model="numpy",
    boundscheck=False,
    fastmath={"nnan", "nsz", "reassoc", "contract", "arcp"},
)


_LN2_HI = 6.93147180369123816490e-01


_LN2_LO = 1.90821492927058770002e-10


_INV_LN2 = 1.44269504088896338700e00


_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = (
    1.0 / math.factorial(j) for j in range(14)
)


#: Widest log-likelihood range of a row done here: every ratio and reciprocal stays finite.
MAX_RANGE = 700.0


_SQRT2 = math.sqrt(2.0)


#: ``2 atanh(s) = 2 s sum_j s^(2j) / (2j + 1)``: enough terms for |s| <= 3 - 2 sqrt(2).
_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9, _A10, _A11 = (
    2.0 / (2 * j + 1) for j in range(12)
)


def _as_float_python(bits):
    """The float64 whose bits are the int64 ``bits`` (pure Python, ``NUMBA_DISABLE_JIT``)."""
    return np.int64(bits).view(np.float64)


def _as_int_python(value):
    """The int64 whose bits are those of the float64 ``value`` (pure Python)."""
    return np.float64(value).view(np.int64)


if getattr(numba_config, "DISABLE_JIT", False):  # debugging, coverage: kernels as Python
    as_float, as_int = _as_float_python, _as_int_python
else:

    @intrinsic
    def as_float(typingctx, bits):
        """The float64 whose bits are the int64 ``bits`` (no conversion: a register
        bitcast)."""
        if not isinstance(bits, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))

        return types.float64(types.int64), codegen

    @intrinsic
    def as_int(typingctx, value):
        """The int64 whose bits are those of the float64 ``value`` (a register bitcast)."""
        if not isinstance(value, types.Float):
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.int64))

        return types.int64(types.float64), codegen


@fused
def exp(x):
    """``exp(x)`` for ``|x| <= 708``: Cody-Waite reduction, a degree-13 Taylor polynomial
    and ``2^k`` from its bits; inlined into loops, which the compiler then vectorises."""
    k = math.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = _C13
    p = _C12 + r * p
    p = _C11 + r * p
    p = _C10 + r * p
    p = _C9 + r * p
    p = _C8 + r * p
    p = _C7 + r * p
    p = _C6 + r * p
    p = _C5 + r * p
    p = _C4 + r * p
    p = _C3 + r * p
    p = _C2 + r * p
    p = _C1 + r * p
    p = _C0 + r * p
    return p * as_float((np.int64(k) + 1023) << 52)


@fused
def log(z):
    """``log(z)`` for positive normal ``z`` (within 3 ulp): the mantissa ``m`` in
    [sqrt(1/2), sqrt(2)) and ``2 atanh((m - 1) / (m + 1))``; inlined into loops, which the
    compiler then vectorises."""
    bits = as_int(z)
    e = ((bits >> 52) & 0x7FF) - 1023
    m = as_float((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000)
    high = m > _SQRT2
    m = m * 0.5 if high else m
    e = e + 1 if high else e
    s = (m - 1.0) / (m + 1.0)
    t = s * s
    p = _A11
    p = _A10 + t * p
    p = _A9 + t * p
    p = _A8 + t * p
    p = _A7 + t * p
    p = _A6 + t * p
    p = _A5 + t * p
    p = _A4 + t * p
    p = _A3 + t * p
    p = _A2 + t * p
    p = _A1 + t * p
    p = _A0 + t * p
    return e * _LN2_HI + (s * p + e * _LN2_LO)


@fused
def log_positive(z, out):
    """``out = log(z)`` for positive normal ``z`` (within 3 ulp), vectorised."""
    for i in range(z.shape[0]):
        out[i] = log(z[i])


@reordered
def min_max(row):
    """Smallest and largest value of a row without NaN (vectorised)."""
    lo = row[0]
    hi = row[0]
    for s in range(row.shape[0]):
        lo = min(lo, row[s])
        hi = max(hi, row[s])
    return lo, hi


@reordered
def row_sum(values):
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i]
    return total


@compiled
def row_mean(values):
    return row_sum(values) / values.shape[0]


@reordered
def ratios_and_sums(row, body, ratios):
    """``ratios = exp(body - row)`` (vectorised); return their sum, sum of squares and sum
    of inverses."""
    total = 0.0
    squares = 0.0
    inverses = 0.0
    for s in range(row.shape[0]):
        w = exp(body - row[s])
        ratios[s] = w
        total += w
        squares += w * w
        inverses += 1.0 / w
    return total, squares, inverses
