"""Sums of the held rows of a set of units, read in place.

The second-order model of an AMIP set (:meth:`bayesij.array.amip_curvature.CentredColumns.
prefix_sums`) needs the set's centred log-likelihood summed over each of a few dozen
prefixes of its units. Gathering the prefixes' rows copies each row before summing it; here
each row is added where it lies, block by block in the order NumPy's ``rows[slots].sum(axis=0)``
adds them (so the same sums to the bit).

NumPy reference: ``rows[slots[a:b]].sum(axis=0)`` accumulated over the blocks
(``tests/array/kernels/test_rows.py``).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.kernels.fastmath import compiled

__all__ = ["held_prefix_sums"]


def held_prefix_sums(rows: np.ndarray, slots: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The rows ``slots`` of ``rows`` summed over the first ``sizes[g]`` of them.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n)
        C-contiguous float64.
    slots : ndarray of int, shape (k,)
        Rows of ``rows``, in the order of the set.
    sizes : ndarray of int, shape (G,)
        Increasing, at most ``k``.

    Returns
    -------
    ndarray of shape (G, n)
        Row ``g``: the sum of the previous row and of the rows ``slots[sizes[g-1]:sizes[g]]``
        (added first to one another, in order).
    """
    out = np.empty((len(sizes), rows.shape[1]))
    _prefix_sums(
        np.ascontiguousarray(rows, dtype=np.float64),
        np.asarray(slots, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        out,
    )
    return out


@compiled
def _prefix_sums(rows, slots, sizes, out):
    n = rows.shape[1]
    summed = np.zeros(n)
    block = np.zeros(n)
    done = 0
    for g in range(sizes.shape[0]):
        size = sizes[g]
        if size > done:
            first = rows[slots[done]]
            for s in range(n):
                block[s] = first[s]
            for i in range(done + 1, size):
                row = rows[slots[i]]
                for s in range(n):
                    block[s] += row[s]
            for s in range(n):
                summed[s] = summed[s] + block[s]
        out[g] = summed
        done = max(done, size)
