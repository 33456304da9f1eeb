"""The candidates of a screened AMIP step in one compiled pass over the units.

A screened step (:meth:`bayesij.array.amip_screen.ScreenedInfluence.top`) knows each unit's
gain ``-direction phi_u`` only within a bound, ``approximate_u -+ scale slack_u``; the units
that could be among the ``m`` largest positive gains outside the excluded ones are those
whose upper end reaches the ``m``-th largest lower end (and zero). NumPy finds that
threshold by a partition of every lower end and the candidates by a dozen passes over
arrays the size of the units; here one pass keeps the ``m`` largest lower ends in a heap and
a second collects the candidates, with the same arithmetic (so the same candidates).

The screen itself (:class:`~bayesij.array.amip_screen.InfluenceScreen`) needs each column's
centred sum of squares and its norm over the first ``n`` draws of each prefix:
:func:`column_moments` takes them in two passes over a block of columns, where NumPy writes a
centred copy and reads the block four times.

NumPy references: the partition of :meth:`~bayesij.array.amip_screen.ScreenedInfluence.top`;
``((x - x.mean(0)) ** 2).sum(0)`` and ``np.linalg.norm(x[:n], axis=0)``
(``tests/array/kernels/test_screen.py``).

References
----------
Broderick, T., Giordano, R. & Meager, R. (2020). An automatic finite-sample robustness
metric: when can dropping a little data make a big difference? arXiv:2011.14999.
"""

from __future__ import annotations

import numpy as np

from bayesij.array.kernels.fastmath import compiled

__all__ = ["screened_candidates", "column_moments"]


def screened_candidates(
    approximate: np.ndarray,
    slack: np.ndarray,
    scale: float,
    excluded: np.ndarray,
    direction: int,
    m: int,
) -> np.ndarray | None:
    """The units that could be among the ``m`` largest positive gains, in index order.

    Parameters
    ----------
    approximate : ndarray of shape (n_units,)
        The screen's approximation of each unit's ``phi``.
    slack : ndarray of shape (n_units,)
        Each unit's bound per unit norm of the vector: the bound is ``scale * slack``.
    scale : float
        The vector's norm.
    excluded : ndarray of bool, shape (n_units,)
        Units that are never candidates (chosen, or always computed exactly).
    direction : int
        +1 or -1: the gain is ``-direction * phi``.
    m : int

    Returns
    -------
    ndarray of int or None
        The units not excluded whose gain's upper end is at least the threshold: the
        ``m``-th largest lower end among them when there are at least ``m`` (and ``m > 0``),
        and at least 0. None when a unit not excluded has a lower end that is NaN (NumPy's
        partition orders NaN last: the caller's NumPy path decides).
    """
    out = np.empty(approximate.size, dtype=np.int64)
    heap = np.empty(max(1, min(int(m), approximate.size)))
    count = _candidates(
        np.asarray(approximate, dtype=np.float64),
        np.asarray(slack, dtype=np.float64),
        float(scale),
        np.asarray(excluded, dtype=np.bool_),
        float(-direction),
        int(m),
        heap,
        out,
    )
    return None if count < 0 else out[:count]


@compiled
def _candidates(approximate, slack, scale, excluded, negated, m, heap, out):
    size, eligible = 0, 0
    for u in range(approximate.shape[0]):
        if excluded[u]:
            continue
        low = negated * approximate[u] - scale * slack[u]
        if low != low:
            return -1
        eligible += 1
        if m <= 0:
            continue
        if size < m:
            _push(heap, size, low)
            size += 1
        elif low > heap[0]:
            _replace_root(heap, size, low)
    threshold = 0.0
    if 0 < m <= eligible and heap[0] > threshold:
        threshold = heap[0]
    count = 0
    for u in range(approximate.shape[0]):
        if not excluded[u] and negated * approximate[u] + scale * slack[u] >= threshold:
            out[count] = u
            count += 1
    return count


@compiled
def _push(heap, size, value):
    """Add ``value`` to the min-heap ``heap[:size]``."""
    i = size
    heap[i] = value
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent


@compiled
def _replace_root(heap, size, value):
    """Replace the smallest value of the min-heap ``heap[:size]`` by ``value``."""
    heap[0] = value
    i = 0
    while True:
        left, smallest = 2 * i + 1, i
        if left < size and heap[left] < heap[smallest]:
            smallest = left
        if left + 1 < size and heap[left + 1] < heap[smallest]:
            smallest = left + 1
        if smallest == i:
            return
        heap[smallest], heap[i] = heap[i], heap[smallest]
        i = smallest


def column_moments(columns: np.ndarray, prefixes) -> tuple[np.ndarray, np.ndarray]:
    """Each column's sum of squares about its mean, and its norm over the first ``n`` rows
    for each ``n`` of ``prefixes``.

    Parameters
    ----------
    columns : ndarray of shape (S, c)
        float64 (any strides); NaN where a column is not finite, as NumPy gives.
    prefixes : sequence of int
        Each at most ``S``.

    Returns
    -------
    centred : ndarray of shape (c,)
    norms : ndarray of shape (len(prefixes), c)
    """
    order = np.argsort(np.asarray(prefixes, dtype=np.int64), kind="stable")
    sizes = np.asarray(prefixes, dtype=np.int64)[order]
    centred = np.empty(columns.shape[1])
    squares = np.zeros((len(sizes), columns.shape[1]))
    _column_moments(np.asarray(columns, dtype=np.float64), sizes, centred, squares)
    norms = np.empty_like(squares)
    norms[order] = np.sqrt(squares)
    return centred, norms


@compiled
def _column_moments(columns, sizes, centred, squares):
    n, c = columns.shape
    sums = np.zeros(c)
    running = np.zeros(c)
    p = 0
    for s in range(n):
        row = columns[s]
        for j in range(c):
            value = row[j]
            sums[j] += value
            running[j] += value * value
        while p < sizes.shape[0] and sizes[p] == s + 1:
            squares[p] = running
            p += 1
    for j in range(c):
        sums[j] = sums[j] / n
        centred[j] = 0.0
    for s in range(n):
        row = columns[s]
        for j in range(c):
            d = row[j] - sums[j]
            centred[j] += d * d
