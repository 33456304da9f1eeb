"""PSIS-LOO of one observation per row in one compiled pass (numba, the vectorised math of
:mod:`bayesij.array.kernels.fastmath`), its draws held in the first-level cache.

:func:`fused_psis_loo` computes the same estimate as :mod:`bayesij.array.psis` and
:func:`bayesij.array.loo._psis_elpd`. For each row of log-likelihood values ``l_s`` with
minimum ``b`` (the body):

1. the raw ratios ``w_s = exp(b - l_s)`` in ``(0, 1]`` by a polynomial exponential that the
   compiler vectorises (within 2 ulp of ``exp``), with ``sum w``, ``sum w^2`` and ``sum 1/w``
   (``lppd = b + log mean 1/w``);
2. the ``M + 1`` largest ratios without sorting the row: a threshold from a histogram of
   every 16th draw, one pass keeping the ratios above it (about 1.8 (M + 1)), a histogram of
   those by the leading bits of the floats (a piecewise-linear log2 scale) and an insertion
   sort of the buckets that reach the top ``M + 1``, out of order only within a bucket;
3. Zhang and Stephens' fit of the generalized Pareto distribution to the ``M`` exceedances
   over the cutoff (the sums of logarithms over the grid as logarithms of running products,
   corrected vectorised ``log1p`` where the grid point is near 0, as
   :func:`bayesij.array.psis._sum_log1p`);
4. the smoothed tail (vectorised exponentials) and the sums elpd, its relative Monte Carlo
   error and ``sum w^2`` need: outside the tail ``w_s exp(l_s - b) = 1``, so only the tail
   is visited again.

Rows that need more than this are left to the general path: a value that is not finite, a
log-likelihood range above 700 (ratios that leave the float range), a tail shorter than 5
draws, a cutoff tied with the tail (repeated draws) under the tie rules that keep such
draws in the tail (under "above" the tail is the draws above the cutoff: done here), a
tail of equal values, a failed fit (k-hat infinite) or weights that underflow at k-hat far
above 1.

Numba compiles the kernel on first use and caches it on disk.

References
----------
.. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
   importance sampling. JMLR 25(72).
.. [2] Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for the
   generalized Pareto distribution. Technometrics 51(3), 316-325.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from bayesij.array.kernels.cache import CACHE
from bayesij.array.kernels.fastmath import (
    MAX_RANGE,
    as_float,
    compiled,
    exp,
    log_positive,
    min_max,
    ratios_and_sums,
    reordered,
)

__all__ = ["FusedLoo", "fused_psis_loo", "psis_weight_rows", "TIES"]

_TINY = float(np.finfo(float).tiny)
_EPS = float(np.finfo(float).eps)
#: Below this sum of weights (scaled to the largest raw ratio) the general path works in logs.
_TINY_TOTAL = 1e-100
#: The threshold of step 2 comes from every ``_STEP``-th draw.
_STEP = 16
#: Fewer tail draws than this and no generalized Pareto fit is made.
_MIN_TAIL = 5
#: The tie rules of :func:`bayesij.array.psis.psis_chunk` as the kernels number them.
TIES = {"above": 0, "position": 1, "quicksort": 2}
#: As ``compiled``, inlined into its caller: the per-row call with its thirteen arrays cost
#: 0.4 ns per draw (10 %).
_inlined = njit(nogil=True, cache=CACHE, error_model="numpy", boundscheck=False, inline="always")


class FusedLoo(NamedTuple):
    """PSIS-LOO per row, each of shape (n_rows,); values are meaningful where ``done``.

    Attributes
    ----------
    lppd, elpd, pareto_k : as :class:`bayesij.array.loo.LooArrays`.
    relative_error : ``sqrt(sum_s (c_s - w_s)^2)``, the input of
        :func:`bayesij.array.loo.mcse_elpd`.
    sum_w2 : sum of the squared normalised weights (ESS ``r_eff / sum_w2``).
    minimum : the smallest log-likelihood value of every row (``-inf`` for an impossible
        observation).
    done : False for the rows left to the general path.
    """

    lppd: np.ndarray
    elpd: np.ndarray
    pareto_k: np.ndarray
    relative_error: np.ndarray
    sum_w2: np.ndarray
    minimum: np.ndarray
    done: np.ndarray
    expectations: np.ndarray | None = None
    expected: np.ndarray | None = None


def fused_psis_loo(
    rows: np.ndarray,
    tail_len: np.ndarray,
    expectation_draws: np.ndarray | None = None,
    ties: str = "position",
) -> FusedLoo:
    """PSIS-LOO of every row of log-likelihood values, one observation per row.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws), float64
        Log-likelihood draws of each observation (contiguous rows are fastest).
    tail_len : ndarray of shape (n_rows,)
        Pareto tail length ``M`` of each row (:func:`bayesij.array.psis.tail_length`).
    expectation_draws : ndarray of shape (K, n_draws), optional
        Draws of K quantities (in the draw order of the rows): their expectations under
        each row's smoothed weights come from the same pass (the weights are never stored).
    ties : {"position", "above", "quicksort"}, default "position"
        The tie rule of :func:`bayesij.array.psis.psis_chunk`. Under "above" draws tied
        with the cutoff stay out of the tail (a shorter tail, done here); under the others
        they join it and the row is left to the general path.

    Returns
    -------
    FusedLoo
    """
    draws = np.zeros((0, rows.shape[1])) if expectation_draws is None else expectation_draws
    draws = np.ascontiguousarray(draws, dtype=np.float64)
    out = np.zeros((8, rows.shape[0]))
    means = np.zeros((rows.shape[0], draws.shape[0]))
    _rows(
        np.ascontiguousarray(rows, dtype=np.float64),
        np.asarray(tail_len, np.int64),
        out,
        draws,
        means,
        TIES[ties],
    )
    lppd, elpd, k, error, sum_w2, minimum, done, expected = out
    if expectation_draws is None:
        return FusedLoo(lppd, elpd, k, error, sum_w2, minimum, done == 1)
    return FusedLoo(lppd, elpd, k, error, sum_w2, minimum, done == 1, means, expected == 1)


@reordered
def _sums_up_to(w, cutoff):
    """Sum and sum of squares of the values of ``w`` at or below ``cutoff``."""
    total = 0.0
    squares = 0.0
    for s in range(w.shape[0]):
        v = w[s] if w[s] <= cutoff else 0.0
        total += v
        squares += v * v
    return total, squares


@compiled
def _keep_at_least(w, threshold, out):
    """Copy the values of ``w`` at or above ``threshold`` to ``out`` (no branch); count."""
    found = 0
    for s in range(w.shape[0]):
        out[found] = w[s]
        found += w[s] >= threshold
    return found


@compiled
def _largest_sorted(w, count, out, spare, counts):
    """The ``count`` largest values of the positive ``w``, ascending, into ``out[:count]``:
    a threshold from every ``_STEP``-th value, the values above it, and of those the top."""
    n = w.shape[0]
    n_sample = n // _STEP
    rank = int(1.8 * count / _STEP) + 2  # a threshold with about 1.8 count values above
    found = 0
    if rank < n_sample:
        for s in range(n_sample):
            spare[s] = w[s * _STEP]
        shift, base, first, _, _ = _top_buckets(spare, n_sample, rank, counts)
        found = _keep_at_least(w, _bucket_floor(first, shift, base), out)
    if found < count:  # the sample misled (or is too small): select from every draw
        _copy(w, 0, n, out)
        found = n
    shift, base, first, n_buckets, kept = _top_buckets(out, found, count, counts)
    position = 0  # where each bucket from `first` up starts, ascending
    for b in range(first, n_buckets):
        size = counts[b]
        counts[b] = position
        position += size
    bits = out.view(np.int64)
    for i in range(found):
        b = (bits[i] >> shift) - base
        if b >= first:
            spare[counts[b]] = out[i]
            counts[b] += 1
    _insertion_sort(spare, kept)  # out of order only within buckets
    _copy(spare, kept - count, kept, out)


@_inlined
def _copy(source, start, stop, out):
    """``out[:stop - start] = source[start:stop]``, as a loop: a slice assignment compiles
    numba's broadcasting and its error messages (seconds at the first call)."""
    for i in range(stop - start):
        out[i] = source[start + i]


@compiled
def _bucket_floor(bucket, shift, base):
    """The smallest float of a bucket of :func:`_top_buckets`."""
    return as_float((bucket + base) << shift)


@compiled
def _top_buckets(values, n, count, counts):
    """Histogram of the positive ``values[:n]`` in at most 2048 buckets by their leading bits
    (a piecewise-linear log2 scale), into ``counts``. Returns ``(shift, base, first,
    n_buckets, kept)``: bucket ``b`` holds the floats whose bits ``>> shift`` equal
    ``base + b``; buckets ``first`` and above hold the ``count`` largest values, ``kept``
    values in all."""
    bits = values.view(np.int64)
    low = bits[0]
    high = bits[0]
    for i in range(n):
        low = min(low, bits[i])
        high = max(high, bits[i])
    shift = 52
    while shift > 0 and (high >> (shift - 1)) - (low >> (shift - 1)) < 1024:
        shift -= 1
    base = low >> shift
    n_buckets = (high >> shift) - base + 1
    counts[:n_buckets] = 0
    for i in range(n):
        counts[(bits[i] >> shift) - base] += 1
    first = n_buckets - 1
    kept = counts[first]
    while kept < count:
        first -= 1
        kept += counts[first]
    return shift, base, first, n_buckets, kept


@compiled
def _insertion_sort(a, n):
    """Sort ``a[:n]`` in place (fast when values are out of order only locally)."""
    for i in range(1, n):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@compiled
def _grid_log_products(theta, x, m, out, product):
    """``out[j] = sum_i log(1 - theta[j] x[i])`` as logs of running products (NaN where a
    factor is not positive), the product folded into the sum before it leaves 1e+-100.
    Four factors are multiplied together before they join a product (a quarter of the
    dependent multiplications), vectorised over the grid."""
    grid = theta.shape[0]
    out[:grid] = 0.0
    product[:grid] = 1.0
    for start in range(0, m, 16):
        stop = min(start + 16, m)
        quads = start + (stop - start) // 4 * 4
        for i in range(start, quads, 4):
            x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
            for j in range(grid):
                t = theta[j]
                product[j] *= ((1.0 - t * x0) * (1.0 - t * x1)) * ((1.0 - t * x2) * (1.0 - t * x3))
        for i in range(quads, stop):
            for j in range(grid):
                product[j] *= 1.0 - theta[j] * x[i]
        outside = 0  # counted without a branch; folded only when some product left the range
        for j in range(grid):
            outside += not 1e-100 < product[j] < 1e100
        if outside:
            for j in range(grid):
                if not 1e-100 < product[j] < 1e100:
                    out[j] += math.log(product[j]) if product[j] > 0 else math.nan
                    product[j] = 1.0
    for j in range(grid):
        out[j] += math.log(product[j]) if product[j] > 0 else math.nan


@compiled
def _sum_log1p(theta, x, m, scratch):
    """``sum_i log1p(-theta x[i])`` over ``x[:m]``: vectorised logarithms of ``u = 1 - theta
    x`` corrected for the rounding of ``u`` (``log1p(y) = log(u) - ((u - 1) - y) / u``);
    term by term by ``math.log1p`` where some ``u`` is not a positive normal float."""
    u = scratch[0, :m]
    logs = scratch[1, :m]
    normal = True
    for i in range(m):
        u[i] = 1.0 - theta * x[i]
        normal &= _TINY <= u[i] < math.inf
    if not normal:
        total = 0.0
        for i in range(m):
            total += math.log1p(-theta * x[i])
        return total
    log_positive(u, logs)
    total = 0.0
    for i in range(m):
        total += logs[i] - ((u[i] - 1.0) + theta * x[i]) / u[i]
    return total


@compiled
def _gpd_fit(x, m, theta, profile, product, scratch):
    """Zhang-Stephens fit to ascending exceedances ``x[:m]``: (k with the weakly
    informative prior, sigma); NaN where it fails. As :func:`bayesij.array.psis.gpd_fit`."""
    quartile = x[int(math.floor(m / 4 + 0.5)) - 1]
    grid = 30 + int(math.floor(math.sqrt(m)))
    mean_x = 0.0
    for i in range(m):
        mean_x += x[i] / m
    for j in range(grid):
        theta[j] = 1 / x[m - 1] + (1 - math.sqrt(grid / (j + 0.5))) / 3 / quartile
    _grid_log_products(theta[:grid], x, m, profile, product)
    top = -math.inf
    for j in range(grid):
        if abs(theta[j]) * mean_x < 1e-2 or not math.isfinite(profile[j]):
            # near theta = 0 the products lose the sum: term by term
            profile[j] = _sum_log1p(theta[j], x, m, scratch)
        mean_log = profile[j] / m
        profile[j] = m * (math.log(-theta[j] / mean_log) - mean_log - 1)
        if profile[j] > top or math.isnan(profile[j]):
            top = profile[j]
    if math.isnan(top):
        return math.nan, math.nan
    weight_sum = 0.0
    for j in range(grid):
        profile[j] = math.exp(profile[j] - top)
        weight_sum += profile[j]
    theta_hat = 0.0
    for j in range(grid):
        if profile[j] > 0:
            theta_hat += theta[j] * (profile[j] / weight_sum)
    k = _sum_log1p(theta_hat, x, m, scratch) / m
    return (m * k + 10 * 0.5) / (m + 10), -k / theta_hat


@compiled
def _smooth_tail(top, m, k, sigma, smoothed, scratch):
    """Fitted quantiles at ``(z - 1/2) / M`` above the cutoff ``top[0]``, truncated at the
    largest raw ratio 1, into ``smoothed[:m]`` (paired with the ascending ``top[1:]``).
    ``scratch[3]`` keeps ``log1p(-(z - 1/2) / M)`` from the last row with the same ``M``
    (its length in ``scratch[4, 0]``)."""
    log_tail = scratch[3, :m]
    if scratch[4, 0] != m:
        for i in range(m):
            log_tail[i] = math.log1p(-(i + 0.5) / m)
        scratch[4, 0] = m
    if abs(k) < 0.05:  # exp(y) - 1 would lose digits: expm1 term by term
        for i in range(m):
            if abs(k) < _EPS:
                quantile = -log_tail[i] * sigma
            else:
                quantile = math.expm1(-k * log_tail[i]) / k * sigma
            smoothed[i] = min(quantile + top[0], 1.0)
        return
    for i in range(m):
        smoothed[i] = min((exp(-k * log_tail[i]) - 1.0) / k * sigma + top[0], 1.0)


@_inlined
def _fitted_tail(row, m, ties, tail_order, work, top, sample, counts, x, grid, scratch, sums):
    """The shared front of both kernels for one row: the raw ratios into ``work`` (their
    sum, sum of squares and sum of inverses into ``sums``), the ``m + 1`` largest into
    ``top``, the generalized Pareto fit of the tail above the cutoff and its smoothed
    values into ``x``. Returns ``(k, tied)``: ``top[tied:]`` is the cutoff and the tail of
    ``m - tied`` draws (under "above" draws tied with the cutoff leave the tail); k is NaN
    where the row is left to the general path (as the module says; with ``tail_order``
    also a tail of repeated values under "quicksort", whose order NumPy's sort decides).
    ``sums[3]`` is the row's minimum ``b`` (ratios ``exp(b - l)``), whatever the outcome."""
    n = row.shape[0]
    body, high = min_max(row)
    sums[3] = body
    if not (math.isfinite(body) and high - body <= MAX_RANGE) or not _MIN_TAIL <= m < n:
        return math.nan, 0
    sums[0], sums[1], sums[2] = ratios_and_sums(row, body, work)
    _largest_sorted(work, m + 1, top, sample, counts)
    cutoff = top[0]
    tied = _cutoff_ties(top, m)
    length = m - tied
    if cutoff < _TINY or (tied and ties != 0) or length < _MIN_TAIL:
        return math.nan, tied
    tail = top[tied + 1 : m + 1]
    if tail[length - 1] - tail[0] < _EPS / 100:  # all equal, as the general path says
        return math.nan, tied
    if tail_order and ties == 2:
        for i in range(length - 1):
            if tail[i] == tail[i + 1]:
                return math.nan, tied
    for i in range(length):
        x[i] = tail[i] - cutoff
    k, sigma = _gpd_fit(x, length, grid[0], grid[1], grid[2], scratch)
    if not (math.isfinite(k) and sigma > 0):
        return math.nan, tied
    _smooth_tail(top[tied:], length, k, sigma, x, scratch)
    return k, tied


@_inlined
def _row(row, m, work, top, sample, counts, x, grid, scratch, sums, out, draws, means, ties, tail):
    """PSIS-LOO of one row into ``out`` (lppd, elpd, k, relative error, sum_w2, minimum,
    done, expected) and the expectations of ``draws`` (K, n) into ``means`` (K,);
    ``tail``: scratch of the tail's draws in order (:func:`_tail_buffers`)."""
    n = row.shape[0]
    k, tied = _fitted_tail(row, m, ties, False, work, top, sample, counts, x, grid, scratch, sums)
    body = out[5] = sums[3]
    if not math.isfinite(k):
        return
    total, squares, inverses = sums[0], sums[1], sums[2]
    top = top[tied:]  # the cutoff, then the tail above it
    m -= tied
    cutoff = top[0]
    raw_sum = raw_squares = new_sum = new_squares = ratio_sum = 0.0
    for i in range(m):
        raw_sum += top[i + 1]
        raw_squares += top[i + 1] * top[i + 1]
        new_sum += x[i]
        new_squares += x[i] * x[i]
        ratio_sum += x[i] / top[i + 1]
    body_sum, body_squares = total - raw_sum, squares - raw_squares
    if body_sum + new_sum < 1e-2 * total or body_squares + new_squares < 1e-2 * squares:
        # the smoothed tail lies far below the raw one (k-hat >> 1): the differences lost
        # their digits, sum the body itself
        body_sum, body_squares = _sums_up_to(work, cutoff)
    total = body_sum + new_sum
    if not total > _TINY_TOTAL:
        return
    sum_w2 = (body_squares + new_squares) / (total * total)
    # Terms w_s exp(l_s - body): 1 for each body draw, smoothed / raw in the tail; the
    # relative error sums (c_s - w_s)^2 with c_s = term_s / terms and w_s normalised.
    terms = n - m + ratio_sum
    square = (n - m) / terms**2 - 2 / terms * (1 - new_sum / total)
    square += sum_w2 - new_squares / (total * total)
    for i in range(m):
        square += (x[i] / top[i + 1] / terms - x[i] / total) ** 2
    out[0] = body + math.log(inverses) - math.log(n)
    out[1] = body + math.log(terms) - math.log(total)
    out[2] = k
    out[3] = math.sqrt(max(square, 0.0))
    out[4] = sum_w2
    out[6] = 1.0
    if draws.shape[0] and _weighted_means(
        work, top, x, m, cutoff, total, draws, sample, means, ties, tail, counts
    ):
        out[7] = 1.0


@reordered
def _weighted_means(work, top, x, m, cutoff, total, draws, body, means, ties, tail, counts):
    """``sum_s w_s f_ks / total`` for each row ``f_k`` of ``draws``: raw ratios ``work`` at
    or below the cutoff, the smoothed ``x[i]`` for the tail draw whose ratio is
    ``top[i + 1]`` (:func:`_tail_in_order`: draws with tied ratios take its places in draw
    order, as the stable sort of the tie rules "above" and "position" does: repeated draws
    of an MCMC sampler). False (nothing written) when tail values are tied under
    "quicksort" (NumPy's sort of the whole row decides)."""
    for i in range(1, m):
        if top[i] == top[i + 1] and ties == 2:
            return False
    order = _tail_in_order(work, cutoff, m, tail, counts)
    if order.shape[0] != m:  # not the tail that ``top`` holds: never seen
        return False
    n = work.shape[0]
    for s in range(n):
        body[s] = work[s] if work[s] <= cutoff else 0.0
    for k in range(draws.shape[0]):
        acc = 0.0
        for s in range(n):
            acc += body[s] * draws[k, s]
        means[k] = acc
    for i in range(m):
        s = order[i]
        for k in range(draws.shape[0]):
            means[k] += x[i] * draws[k, s]
    for k in range(draws.shape[0]):
        means[k] /= total
    return True


@compiled
def _buffers(n, tail_len):
    """The per-row scratch of the kernels for rows of ``n`` draws and these tail lengths:
    ``top``, ``sample`` (n,), ``counts`` (histogram), ``x`` (m_max,), ``scratch`` (5,
    m_max) and the fit's ``grid`` (3, grid points)."""
    m_max = 1
    for length in tail_len:  # a loop: tail_len.max() compiles numba's reduction (a second)
        m_max = max(m_max, length + 1)
    top = np.empty(n)
    sample = np.empty(n)
    counts = np.empty(2048, dtype=np.int64)
    x = np.empty(m_max)
    scratch = np.zeros((5, m_max))
    grid = np.empty((3, 31 + int(math.sqrt(m_max))))
    return top, sample, counts, x, scratch, grid


@compiled
def _cutoff_ties(top, m):
    """How many of the tail values ``top[1:m + 1]`` equal the cutoff ``top[0]``."""
    tied = 0
    while tied < m and top[tied + 1] == top[0]:
        tied += 1
    return tied


@compiled
def _rows(rows, tail_len, out, draws, means, ties):
    work = np.empty(rows.shape[1])
    sums = np.empty(4)
    top, sample, counts, x, scratch, grid = _buffers(rows.shape[1], tail_len)
    tail = _tail_buffers(x.shape[0])
    for i in range(rows.shape[0]):
        _row(
            rows[i],
            tail_len[i],
            work,
            top,
            sample,
            counts,
            x,
            grid,
            scratch,
            sums,
            out[:, i],
            draws,
            means[i],
            ties,
            tail,
        )


def psis_weight_rows(
    rows: np.ndarray, tail_len: np.ndarray, ties: str = "above"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalised PSIS leave-one-out weights of every row of log-likelihood values, one
    observation per row, as :func:`bayesij.array.psis.psis_chunk` smooths ``-rows.T``.

    The ratios ``exp(b - l_s)``, the tail and its fit as :func:`fused_psis_loo`; then each
    draw's weight, the smoothed value of its place in the ascending tail (tied draws in
    draw order, as the stable sort of the tie rules "above" and "position"), normalised.
    Left to the general path (``done`` False, the row's weights unset): the rows
    :func:`fused_psis_loo` leaves, and draws tied with the cutoff inside the tail under
    "position", tied tail draws under "quicksort" (NumPy's sort of the whole row decides
    their order), a tail left shorter than 5 draws or of equal values under "above".

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws)
    tail_len : ndarray of shape (n_rows,)
    ties : {"above", "position", "quicksort"}

    Returns
    -------
    weights : ndarray of shape (n_rows, n_draws)
    pareto_k : ndarray of shape (n_rows,)
    done : ndarray of bool, shape (n_rows,)
    """
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    weights = np.empty(rows.shape)
    k = np.full(rows.shape[0], np.nan)
    done = np.zeros(rows.shape[0], dtype=np.bool_)
    _weight_rows(rows, np.asarray(tail_len, np.int64), TIES[ties], weights, k, done)
    return weights, k, done


@compiled
def _weight_rows(rows, tail_len, ties, weights, k_out, done):
    top, sample, counts, x, scratch, grid = _buffers(rows.shape[1], tail_len)
    tail = _tail_buffers(x.shape[0])
    sums = np.empty(4)
    for i in range(rows.shape[0]):
        work = weights[i]
        k, tied = _fitted_tail(
            rows[i], tail_len[i], ties, True, work, top, sample, counts, x, grid, scratch, sums
        )
        if not math.isfinite(k):
            continue
        if not _place_tail(work, top[tied], tail_len[i] - tied, x, tail, counts):
            continue  # not the tail that ``top`` holds: never seen, left to the general path
        _normalise(work)
        k_out[i] = k
        done[i] = True


@compiled
def _place_tail(work, cutoff, length, smoothed, tail, counts):
    """Each of the ``length`` draws above the ``cutoff`` takes the smoothed value of its
    place in the ascending tail, repeated draws in draw order (as a stable sort;
    :func:`_tail_in_order`). False (``work`` unchanged) where ``length`` draws are not
    above the cutoff."""
    order = _tail_in_order(work, cutoff, length, tail, counts)
    if order.shape[0] != length:
        return False
    for i in range(length):
        work[order[i]] = smoothed[i]
    return True


@compiled
def _tail_buffers(m_max):
    """Scratch of :func:`_tail_in_order` for tails of up to ``m_max`` draws: their draws
    (2, m_max + 1) and ratios (2, m_max + 1), each twice (a counting sort's two sides)."""
    return np.empty((2, m_max + 1), dtype=np.int64), np.empty((2, m_max + 1))


@compiled
def _tail_in_order(work, cutoff, length, tail, counts):
    """The draws whose ratio ``work`` is above ``cutoff``, ascending in ratio, tied ratios
    in draw order (a stable sort): the ``i``-th takes the tail's ``i``-th smoothed value.
    Returns them (a view of ``tail``'s scratch), or fewer or more than ``length`` draws
    where that many are not above the cutoff.

    One pass gathers the tail draws in draw order (branch-free), a counting sort on the
    ratios' leading bits (:func:`_top_buckets`) orders them but within a bucket, and an
    insertion sort (stable) finishes: a draw's place found by bisection in the sorted
    tail cost 45 ns, nine tenths of the expectations' time beside PSIS-LOO's."""
    draws, ratios = tail
    cap = draws.shape[1] - 1
    found = 0
    for s in range(work.shape[0]):
        draws[0, min(found, cap)] = s
        found += work[s] > cutoff
    if found != length or found > cap:
        return draws[0, : min(found, cap)]
    for i in range(found):
        ratios[0, i] = work[draws[0, i]]
    shift, base, _, n_buckets, _ = _top_buckets(ratios[0], found, found, counts)
    start = 0
    for b in range(n_buckets):  # where each bucket starts
        size = counts[b]
        counts[b] = start
        start += size
    bits = ratios[0].view(np.int64)
    for i in range(found):  # in draw order: stable
        b = (bits[i] >> shift) - base
        ratios[1, counts[b]] = ratios[0, i]
        draws[1, counts[b]] = draws[0, i]
        counts[b] += 1
    for i in range(1, found):  # out of order only within a bucket
        v = ratios[1, i]
        d = draws[1, i]
        j = i - 1
        while j >= 0 and ratios[1, j] > v:
            ratios[1, j + 1] = ratios[1, j]
            draws[1, j + 1] = draws[1, j]
            j -= 1
        ratios[1, j + 1] = v
        draws[1, j + 1] = d
    return draws[1, :found]


@reordered
def _normalise(work):
    """``work / sum(work)`` in place (finite positive values: vectorised)."""
    total = 0.0
    for s in range(work.shape[0]):
        total += work[s]
    scale = 1.0 / total
    for s in range(work.shape[0]):
        work[s] *= scale
