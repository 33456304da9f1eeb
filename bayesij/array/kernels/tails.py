"""The tails of many rows of draws without sorting the rows: each row's smallest and
largest values in order, its linear quantiles near either end, and the short-lag
autocovariances of the indicators below them (ArviZ's split-chain tail ESS).

For rows of ``n`` finite values:

1. **extremes**: a threshold per row at about ``1.8 count`` values from either end, from a
   partial sort of every 16th value; one compiled pass copies the values beyond each
   threshold (typically 2 ``count`` of ``n``) and NumPy's vectorised sort orders those
   (rows where the sample misled are sorted whole);
2. **quantiles** as ``np.quantile``'s default (``(n - 1) p`` between its two order
   statistics, the same interpolation), read from the extremes;
3. **indicators**: for ``row <= quantile``, split in two halves as ArviZ's split-chain ESS,
   each half's mean and its biased autocovariances ``sum_t c_t c_t+k / h`` at the first
   lags (the centred sums of :func:`bayesij.array.ess._short_autocovariance`), counted;
4. **k-hat** of the ``M`` largest values above the next, Zhang and Stephens' fit
   compiled (:mod:`bayesij.array.kernels.psis`), one row at a time.

NumPy references: ``np.sort``, ``np.quantile``, the centred sums and
:func:`bayesij.array.psis.right_tail_khat` (``tests/array/kernels/test_tails.py``).

References
----------
.. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
   Rank-normalization, folding, and localization: an improved R-hat for assessing
   convergence of MCMC. Bayesian Analysis 16(2), 667-718 (the tail ESS).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.kernels.fastmath import compiled
from bayesij.array.kernels.psis import _gpd_fit

__all__ = ["row_extremes", "row_quantiles", "indicator_autocovariances", "right_tail_khats"]

#: The thresholds of step 1 come from every ``_STEP``-th value.
_STEP = 16


def row_extremes(rows: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` smallest and the ``count`` largest values of each row, each ascending.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n), finite
    count : int
        At most ``n``.

    Returns
    -------
    smallest, largest : ndarray of shape (n_rows, count)
        As ``np.sort(rows, axis=1)[:, :count]`` and ``[:, -count:]``.
    """
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    n_rows, n = rows.shape
    n_sample = n // _STEP
    rank = int(1.8 * count / _STEP) + 2  # about 1.8 count values beyond the threshold
    if rank >= n_sample or 4 * count > n:
        ordered = np.sort(rows, axis=1)
        return ordered[:, :count], ordered[:, n - count :]
    sample = np.partition(rows[:, : n_sample * _STEP : _STEP], [rank - 1, n_sample - rank], axis=1)
    capacity = int(2.5 * count) + 64
    low = np.empty((n_rows, capacity + 1))  # the last column takes the overflow
    high = np.empty((n_rows, capacity + 1))
    found = np.empty((n_rows, 2), dtype=np.int64)
    _beyond(rows, sample[:, rank - 1].copy(), sample[:, n_sample - rank].copy(), low, high, found)
    width = min(int(np.max(found)), capacity)  # beyond it, only padding
    low = np.sort(low[:, :width], axis=1)
    high = np.sort(high[:, :width], axis=1)
    smallest = low[:, :count]
    largest = high[:, width - count :]
    redo = np.flatnonzero(((found < count) | (found > capacity)).any(axis=1))
    if redo.size:  # the sample misled: these rows sorted whole
        ordered = np.sort(rows[redo], axis=1)
        smallest[redo], largest[redo] = ordered[:, :count], ordered[:, n - count :]
    return smallest, largest


@compiled
def _beyond(rows, low_threshold, high_threshold, low, high, found):
    """Copy each row's values at or below its low threshold to ``low`` and at or above its
    high threshold to ``high`` (without a branch; past the capacity into the last column),
    padded with +inf (-inf for ``high``), counting them into ``found``."""
    capacity = low.shape[1] - 1
    for r in range(rows.shape[0]):
        row = rows[r]
        below = 0
        above = 0
        for s in range(row.shape[0]):
            value = row[s]
            low[r, min(below, capacity)] = value
            high[r, min(above, capacity)] = value
            below += value <= low_threshold[r]
            above += value >= high_threshold[r]
        low[r, below:] = np.inf  # padding that sorts last (first for the high ones)
        high[r, above:] = -np.inf
        found[r, 0] = below
        found[r, 1] = above


def row_quantiles(
    smallest: np.ndarray, largest: np.ndarray, n: int, probs: list[float]
) -> np.ndarray:
    """``np.quantile(rows, probs, axis=1).T`` (linear) from :func:`row_extremes`, shape
    (n_rows, len(probs)); the order statistics each needs must lie among the extremes."""
    out = np.empty((smallest.shape[0], len(probs)))
    for j, p in enumerate(probs):
        virtual = (n - 1) * p
        previous = int(np.floor(virtual))
        if virtual >= n - 1:
            out[:, j] = largest[:, -1]
            continue
        a, b = (_order_statistic(smallest, largest, n, i) for i in (previous, previous + 1))
        t = virtual - previous
        diff = b - a
        out[:, j] = b - diff * (1 - t) if t >= 0.5 else a + diff * t  # np.quantile's lerp
    return out


def _order_statistic(smallest, largest, n, index):
    """The values of 0-based ascending rank ``index`` from either end's extremes."""
    count = smallest.shape[1]
    if index < count:
        return smallest[:, index]
    if n - index > count:
        raise ValueError(f"rank {index} of {n} lies beyond the {count} extremes kept")
    return largest[:, count - (n - index)]


def indicator_autocovariances(
    rows: np.ndarray, quantiles: np.ndarray, n_lags: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per row and quantile, the two halves of ``row <= quantile`` (each row one chain,
    split as ArviZ's split-chain ESS): their means (n_rows, n_q, 2) and biased
    autocovariances at lags ``0..n_lags-1`` (n_rows, n_q, 2, n_lags).

    An indicator takes two values, so its centred lagged sum is counted, not summed: with
    ``J`` the rarer of the two values (the products do not change when the indicator is
    flipped), ``m`` its mean over the ``h`` draws of a half, ``P_k`` the pairs ``k`` apart
    that are both ``J`` and ``A_k``, ``B_k`` the ``J`` among the first and the last
    ``h - k`` draws, ``sum_t c_t c_t+k = P_k - m (A_k + B_k) + (h - k) m^2``.
    """
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    n_rows, n_q = quantiles.shape
    means = np.empty((n_rows, n_q, 2))
    acov = np.empty((n_rows, n_q, 2, n_lags))
    _indicators(rows, np.ascontiguousarray(quantiles, dtype=np.float64), means, acov)
    return means, acov


@compiled
def _indicators(rows, quantiles, means, acov):
    n = rows.shape[1]
    half = n // 2
    below = np.empty(half, dtype=np.int64)  # positions at or below the quantile
    above = np.empty(half, dtype=np.int64)  # and above it
    pairs = np.empty(acov.shape[3])
    for r in range(rows.shape[0]):
        for j in range(quantiles.shape[1]):
            q = quantiles[r, j]
            for c in range(2):
                start = 0 if c == 0 else n - half
                count = _split_positions(rows[r, start : start + half], q, below, above)
                means[r, j, c] = count / half
                rare = below[:count] if count <= half - count else above[: half - count]
                _counted_autocovariance(rare, half, pairs, acov[r, j, c])


@compiled
def _split_positions(values, q, below, above):
    """The positions of ``values`` at or below ``q`` into ``below``, the others into
    ``above`` (one pass, no branch); returns how many are at or below."""
    count = 0
    for t in range(values.shape[0]):
        below[count] = t
        above[t - count] = t
        count += values[t] <= q
    return count


@compiled
def _counted_autocovariance(positions, h, pairs, out):
    """``out[k] = sum_t c_t c_t+k / h`` of the centred indicator of ``positions`` among
    ``h`` draws (ascending positions), from the pair counts."""
    count = positions.shape[0]
    n_lags = out.shape[0]
    pairs[:] = 0.0
    for a in range(count):
        b = a + 1
        while b < count and positions[b] - positions[a] < n_lags:
            pairs[positions[b] - positions[a]] += 1.0
            b += 1
    pairs[0] = count
    m = count / h
    first = 0  # positions below k
    last = 0  # positions at or above h - k
    for k in range(n_lags):
        while first < count and positions[first] < k:
            first += 1
        while last < count and positions[count - 1 - last] >= h - k:
            last += 1
        out[k] = (pairs[k] - m * ((count - last) + (count - first)) + (h - k) * m * m) / h


def right_tail_khats(ordered: np.ndarray, tail_len: np.ndarray, n_draws: int) -> np.ndarray:
    """:func:`bayesij.array.psis.right_tail_khat` of rows: k-hat of each row's
    ``tail_len`` largest values above the next one, from its largest values ascending.

    Parameters
    ----------
    ordered : ndarray of shape (n_rows, n_kept)
        Each row's largest values, ascending (at least ``tail_len + 1`` of them).
    tail_len : ndarray of shape (n_rows,)
    n_draws : int
        How many values each row had.

    Returns
    -------
    ndarray of shape (n_rows,)
        NaN where the tail is shorter than 5 values, not shorter than ``n_draws``, longer
        than the values kept, all equal, or where the fit fails.
    """
    ordered = np.ascontiguousarray(ordered, dtype=np.float64)
    out = np.empty(ordered.shape[0])
    _khats(ordered, np.asarray(tail_len, dtype=np.int64), n_draws, out)
    return out


@compiled
def _khats(ordered, tail_len, n_draws, out):
    n_kept = ordered.shape[1]
    m_max = max(min(tail_len.max(), n_kept - 1), 1) if tail_len.shape[0] else 1
    x = np.empty(m_max)
    grid = np.empty((3, 31 + int(np.sqrt(m_max))))
    scratch = np.zeros((5, m_max))
    for r in range(ordered.shape[0]):
        m = tail_len[r]
        out[r] = np.nan
        if m < 5 or m >= n_draws or m >= n_kept:
            continue
        row = ordered[r]
        cutoff = row[n_kept - m - 1]
        if not abs(row[n_kept - 1] - row[n_kept - m]) >= _TINY:
            continue
        for i in range(m):
            x[i] = row[n_kept - m + i] - cutoff
        k, _ = _gpd_fit(x, m, grid[0], grid[1], grid[2], scratch)
        out[r] = k


_TINY = float(np.finfo(float).tiny)
