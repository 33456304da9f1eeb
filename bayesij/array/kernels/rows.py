"""Sums, products and Monte Carlo errors of the held rows of a set of units, read in place.

The AMIP searches keep the centred log-likelihood of the units they will ask for as one
contiguous row each (:class:`bayesij.array.amip_curvature.CentredColumns`). Gathering a
set's rows (``rows[slots]``) copies each before it is used once; here each row is read
where it lies:

* :func:`held_prefix_sums`: the set's rows summed over each of a few dozen prefixes (the
  second-order model), block by block in the order NumPy's ``rows[slots].sum(axis=0)``
  adds them (so the same sums to the bit);
* :func:`held_products`: each row's product with a vector over its first ``n`` draws (a
  screened step's exact influences);
* :func:`held_influence_mcse`: the Monte Carlo error of each unit's weighted influence
  (the linear continuation), in three passes over its row and no temporary.

The last two sum in vectorised (reordered) order, as BLAS does in its own: finite values
only (their callers check).

NumPy references: ``rows[slots[a:b]].sum(axis=0)`` accumulated over the blocks,
``rows[slots][:, :n] @ vector`` and the formula of
:func:`bayesij.array.amip.weighted_influence_mcse` (``tests/array/kernels/test_rows.py``).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.kernels.fastmath import compiled, reordered

__all__ = ["held_prefix_sums", "held_products", "held_influence_mcse"]


def held_prefix_sums(rows: np.ndarray, slots: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The rows ``slots`` of ``rows`` summed over the first ``sizes[g]`` of them.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n)
        C-contiguous float64 or float32 (summed in float64).
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
    precision = np.float32 if rows.dtype == np.float32 else np.float64  # float32 not widened
    _prefix_sums(
        np.ascontiguousarray(rows, dtype=precision),
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


def held_products(rows: np.ndarray, slots: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``rows[slots][:, :n] @ vector`` (k,) with ``n = vector.size``, no row copied.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, S)
        C-contiguous float64 or float32, finite, ``S >= n``.
    slots : ndarray of int, shape (k,)
    vector : ndarray of shape (n,)
        Finite.
    """
    out = np.empty(len(slots))
    _products(rows, np.asarray(slots, dtype=np.int64), np.asarray(vector, np.float64), out)
    return out


@reordered
def _products(rows, slots, vector, out):
    n = vector.shape[0]
    for i in range(slots.shape[0]):
        row = rows[slots[i]]
        total = 0.0
        for s in range(n):
            total += row[s] * vector[s]
        out[i] = total


def held_influence_mcse(
    rows: np.ndarray, slots: np.ndarray, weights: np.ndarray, weighted: np.ndarray
) -> np.ndarray:
    """The Monte Carlo error of each unit's weighted influence over the first ``n`` draws of
    its row (k,): with ``x = rows[slot, :n]``, ``xbar = sum_s w_s x_s``, ``a_s = weighted_s /
    w_s`` (0 where ``w_s = 0``) and ``phi = sum_s weighted_s (x_s - xbar)``,
    ``sqrt(sum_s w_s^2 (a_s (x_s - xbar) - phi)^2)``.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, S)
        C-contiguous float64 or float32, finite, ``S >= n``.
    slots : ndarray of int, shape (k,)
    weights : ndarray of shape (n,)
        Normalised draw weights ``w``, finite.
    weighted : ndarray of shape (n,)
        ``w (g* - g*_w)`` (:func:`bayesij.array.amip.weighted_value`), finite.
    """
    out = np.empty(len(slots))
    _influence_mcse(
        rows,
        np.asarray(slots, dtype=np.int64),
        np.asarray(weights, np.float64),
        np.asarray(weighted, np.float64),
        out,
    )
    return out


@reordered
def _influence_mcse(rows, slots, weights, weighted, out):
    n = weights.shape[0]
    ratio = np.zeros(n)
    for s in range(n):
        if weights[s] > 0:
            ratio[s] = weighted[s] / weights[s]
    for i in range(slots.shape[0]):
        row = rows[slots[i]]
        mean = 0.0
        for s in range(n):
            mean += weights[s] * row[s]
        phi = 0.0
        for s in range(n):
            phi += weighted[s] * (row[s] - mean)
        total = 0.0
        for s in range(n):
            term = weights[s] * (ratio[s] * (row[s] - mean) - phi)
            total += term * term
        out[i] = np.sqrt(total)
