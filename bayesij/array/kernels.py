"""Compiled per-observation kernels (numba) and the vectorised math they share: one
observation's draws held in the first-level cache while every quantity it needs is computed,
instead of one NumPy pass over a whole chunk per step. The array-layer estimators call these
and keep the general NumPy path for the rows a kernel leaves (marked not done).

Shared here: a polynomial ``exp`` (Cody-Waite reduction, degree-13 Taylor; within 2 ulp) and
``log`` (mantissa and ``2 atanh``; within 3 ulp), scalar functions that loops inline and the
compiler vectorises (their polynomials with fused multiply-adds, the float bits moved by
register bitcasts), row minima and maxima, sums. Kernels: **the Monte Carlo error of elpd**
(:func:`log_variances`: R loo's variance of ``log(1 + c q)`` over 1000 normal quantiles);
**the relative efficiency** (:func:`short_lag_autocorrelations`: the autocorrelations of
``exp(l)`` lag by lag until Geyer's sequence stops); **WAIC** (:func:`fused_waic_terms`:
lppd, the central moments of ``l`` and the tempered cross-validation term of each row); **the
value checks** (:func:`count_outside`). PSIS-LOO has its own module,
:mod:`bayesij.array.psis_kernel`.

Numba compiles a kernel on first use and caches it on disk.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["count_outside", "fused_waic_terms", "log_variances", "short_lag_autocorrelations"]

#: Compiled without Python's error model or bounds checks, the GIL released (threads).
_compiled = njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)
#: As ``_compiled``, ``a * b + c`` fused into one rounding (FMA): the polynomials of
#: ``exp`` and ``log`` in half the instructions, and no less accurate.
_fused = njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, fastmath={"contract"})
#: As ``_compiled``, reductions reordered (vectorised); only where values are finite.
_reordered = njit(
    nogil=True,
    cache=True,
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
_MAX_RANGE = 700.0


@_reordered
def _min_max(row):
    """Smallest and largest value of a row without NaN (vectorised)."""
    lo = row[0]
    hi = row[0]
    for s in range(row.shape[0]):
        lo = min(lo, row[s])
        hi = max(hi, row[s])
    return lo, hi


@intrinsic
def _as_float(typingctx, bits):
    """The float64 whose bits are the int64 ``bits`` (no conversion: a register bitcast)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@_fused
def _exp(x):
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
    return p * _as_float((np.int64(k) + 1023) << 52)


@_reordered
def _sum(values):
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i]
    return total


@_reordered
def _ratios_and_sums(row, body, ratios):
    """``ratios = exp(body - row)`` (vectorised); return their sum, sum of squares and sum
    of inverses."""
    total = 0.0
    squares = 0.0
    inverses = 0.0
    for s in range(row.shape[0]):
        w = _exp(body - row[s])
        ratios[s] = w
        total += w
        squares += w * w
        inverses += 1.0 / w
    return total, squares, inverses


@_compiled
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


_SQRT2 = math.sqrt(2.0)
#: ``2 atanh(s) = 2 s sum_j s^(2j) / (2j + 1)``: enough terms for |s| <= 3 - 2 sqrt(2).
_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9, _A10, _A11 = (
    2.0 / (2 * j + 1) for j in range(12)
)


@intrinsic
def _as_int(typingctx, value):
    """The int64 whose bits are those of the float64 ``value`` (a register bitcast)."""
    if not isinstance(value, types.Float):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@_fused
def _log(z):
    """``log(z)`` for positive normal ``z`` (within 3 ulp): the mantissa ``m`` in
    [sqrt(1/2), sqrt(2)) and ``2 atanh((m - 1) / (m + 1))``; inlined into loops, which the
    compiler then vectorises."""
    bits = _as_int(z)
    e = ((bits >> 52) & 0x7FF) - 1023
    m = _as_float((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000)
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


@_fused
def _log_positive(z, out):
    """``out = log(z)`` for positive normal ``z`` (within 3 ulp), vectorised."""
    for i in range(z.shape[0]):
        out[i] = _log(z[i])


@_fused
def _log_variances(scales, quantiles, out):
    logs = np.empty(quantiles.shape[0])
    for r in range(scales.shape[0]):
        for i in range(quantiles.shape[0]):
            logs[i] = _log(max(1.0 + scales[r] * quantiles[i], 1e-300))
        out[r] = _kept_variance(logs, scales[r], quantiles)


@_reordered
def _kept_variance(logs, scale, quantiles):
    """Sample variance of ``logs[i]`` over the ``i`` with ``1 + scale quantiles[i] > 0``
    (vectorised)."""
    count = 0.0
    total = 0.0
    for i in range(logs.shape[0]):
        keep = 1.0 + scale * quantiles[i] > 0
        count += keep
        total += logs[i] if keep else 0.0
    mean = total / count
    squares = 0.0
    for i in range(logs.shape[0]):
        keep = 1.0 + scale * quantiles[i] > 0
        squares += (logs[i] - mean) ** 2 if keep else 0.0
    return squares / (count - 1)


def log_variances(scales: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """Sample variances (divisor count - 1) of ``log(1 + c q)`` over the quantiles ``q``
    where ``1 + c q > 0``, for each scale ``c``: shape (n_scales,). The logarithms are
    vectorised (:func:`_log_positive`), about 1 ns each."""
    out = np.empty(len(scales))
    _log_variances(np.asarray(scales, dtype=np.float64), np.asarray(quantiles, np.float64), out)
    return out


def short_lag_autocorrelations(
    rows: np.ndarray, n_chains: int, fft_size: int, n_lags: int
) -> np.ndarray:
    """Autocorrelations of ``exp(rows)`` at lags ``0..n_lags-1`` as R loo's ``relative_eff``
    combines them over chains, each lag summed directly (no FFT).

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_chains * n_draws)
        Log values, the draws of each chain contiguous; each row is shifted by its maximum
        before ``exp`` (values below ``exp(-708)`` count as ``exp(-708)``, a change far
        below the rounding of the sums).
    n_chains : int
    fft_size : int
        R's FFT size for ``n_draws`` (:func:`bayesij.array.ess.fft_next_good_size`): its
        autocovariances are the lagged sums times ``fft_size / n_draws^2``.
    n_lags : int

    Returns
    -------
    ndarray of shape (n_lags, n_rows)
        ``rho_t = 1 - (W - mean_c acov_c(t)) / var_plus``, ``rho_0 = 1``, as
        :func:`bayesij.array.ess.relative_eff_rows` (NaN for a constant row); NaN after the
        first pair ``rho_2j + rho_2j+1`` that is not positive, where Geyer's sequence stops.
    """
    out = np.empty((n_lags, rows.shape[0]))
    _autocorrelations(np.ascontiguousarray(rows, dtype=np.float64), n_chains, fft_size, out)
    return out


@_compiled
def _autocorrelations(rows, n_chains, fft_size, out):
    n_total = rows.shape[1]
    n = n_total // n_chains
    values = np.empty(n_total)
    means = np.empty(n_chains)
    lagged = np.empty(4)
    for r in range(rows.shape[0]):
        row = rows[r]
        _, high = _min_max(row)
        out[:, r] = math.nan
        out[0, r] = 1.0
        if not math.isfinite(high):  # every draw impossible: constant, as R loo's 0.5
            continue
        for c in range(n_chains):  # each chain's exp(l - high), centred
            chain = slice(c * n, (c + 1) * n)
            means[c] = _centred_exp(row[chain], high, values[chain]) / n
        scale = fft_size / n**2 / n_chains
        for t in range(min(out.shape[0], n)):
            if t % 4 == 0:  # lags t..t+3 in one pass over the draws
                _lagged_sums(values, n, n_chains, t, lagged)
            if t == 0:
                mean_var = lagged[0] * scale * n / (n - 1)
                var_plus = mean_var * (n - 1) / n
                if n_chains > 1:
                    grand = _mean(means)
                    for c in range(n_chains):
                        var_plus += (means[c] - grand) ** 2 / (n_chains - 1)
                continue
            out[t, r] = 1 - (mean_var - lagged[t % 4] * scale) / var_plus
            if t % 2 == 1 and not out[t - 1, r] + out[t, r] > 0:
                break  # Geyer's sequence stops at this pair: later lags are not used


@_reordered
def _centred_exp(chain, high, out):
    """``out = exp(chain - high)`` (values below ``exp(-708)`` count as that) minus its
    mean; returns the sum before centring (vectorised)."""
    total = 0.0
    for s in range(chain.shape[0]):
        v = _exp(max(chain[s] - high, -708.0))
        out[s] = v
        total += v
    mean = total / chain.shape[0]
    for s in range(chain.shape[0]):
        out[s] -= mean
    return total


@_compiled
def _mean(values):
    return _sum(values) / values.shape[0]


@njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, fastmath=True)
def _lagged_sums(centred, n, n_chains, lag, out):
    """``out[j] = sum_c sum_i d[c, i] d[c, i + lag + j]`` for ``j < 4`` (0 where
    ``lag + j >= n``) over chains of ``n`` contiguous finite values: four lags per pass."""
    out[:] = 0.0
    for c in range(n_chains):
        chain = centred[c * n : (c + 1) * n]
        common = max(n - lag - 3, 0)  # i where all four products exist
        # slices indexed by the loop variable alone (no wraparound test): vectorised
        head, lag0, lag1 = chain[:common], chain[lag : lag + common], chain[lag + 1 :]
        lag2, lag3 = chain[lag + 2 :], chain[lag + 3 :]
        s0 = s1 = s2 = s3 = 0.0
        for i in range(common):
            a = head[i]
            s0 += a * lag0[i]
            s1 += a * lag1[i]
            s2 += a * lag2[i]
            s3 += a * lag3[i]
        out[0] += s0
        out[1] += s1
        out[2] += s2
        out[3] += s3
        for j in range(4):  # the last few products of the shorter lags
            for i in range(common, n - lag - j):
                out[j] += chain[i] * chain[i + lag + j]


def fused_waic_terms(rows: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """WAIC's per-observation terms of every row of log-likelihood values.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws), float64
    beta : float
        Inverse temperature of the cross-validation term.

    Returns
    -------
    terms : ndarray of shape (6, n_rows)
        ``lppd = log mean exp(l)``, the mean of ``l``, its central moments of order 2, 3, 4
        (divisor ``n_draws``) and ``log mean exp(-beta l) - log mean exp((1 - beta) l)``.
    done : ndarray of shape (n_rows,)
        False where a value is not finite or the range exceeds 700 (the general path).
    """
    out = np.zeros((7, rows.shape[0]))
    _waic_rows(np.ascontiguousarray(rows, dtype=np.float64), float(beta), out)
    return out[:6], out[6] == 1


@_compiled
def _waic_rows(rows, beta, out):
    n = rows.shape[1]
    work = np.empty(n)
    for r in range(rows.shape[0]):
        row = rows[r]
        low, high = _min_max(row)
        if not (math.isfinite(low) and high - low <= _MAX_RANGE):
            continue
        mean = _mean(row)
        out[1, r] = mean
        out[2, r], out[3, r], out[4, r] = _central_moments(row, mean)
        total, _, inverses = _ratios_and_sums(row, low, work)  # exp(low - l), exp(l - low)
        out[0, r] = low + math.log(inverses) - math.log(n)
        if beta == 1.0:  # log mean exp(-l) - log mean exp(0)
            out[5, r] = -low + math.log(total) - math.log(n)
        else:
            out[5, r] = _log_mean_exp(row, -beta, low, high)
            out[5, r] -= _log_mean_exp(row, 1 - beta, low, high)
        out[6, r] = 1.0


@_reordered
def _central_moments(row, mean):
    second = third = fourth = 0.0
    for s in range(row.shape[0]):
        deviation = row[s] - mean
        square = deviation * deviation
        second += square
        third += square * deviation
        fourth += square * square
    n = row.shape[0]
    return second / n, third / n, fourth / n


@_reordered
def _log_mean_exp(row, alpha, low, high):
    """``log mean exp(alpha l)`` of a finite row (values below ``exp(-708)`` of the largest
    term count as that, far below the rounding of the sum), one vectorised pass."""
    if alpha == 0.0:
        return 0.0
    top = alpha * high if alpha > 0 else alpha * low
    total = 0.0
    for s in range(row.shape[0]):
        total += _exp(max(alpha * row[s] - top, -708.0))
    return top + math.log(total) - math.log(row.shape[0])
