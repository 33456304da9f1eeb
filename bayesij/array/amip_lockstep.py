"""Many greedy AMIP searches sharing their passes over the draws.

Each step of a reweighted search (:func:`bayesij.array.amip.reweighted_steps`) needs one
product ``v @ log_lik`` of a vector over the draws with the whole (draws, units) matrix:
the influence of every unit under the current weights. A search is written as a generator
that yields ``v`` and receives the product; :func:`run_in_lockstep` advances all the
searches of an audit (every quantity and target) together, so that one streaming pass of a
matrix product ``log_lik^T V`` serves all of them. The cost of an audit's AMIP is then the
number of steps of its longest search, not their sum over quantities and targets.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from bayesij.array.numeric import map_chunks, obs_chunks, read_columns

__all__ = ["influence_products", "run_in_lockstep"]


def influence_products(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``vectors^T matrix`` with NaN where a product is not finite.

    Parameters
    ----------
    matrix : ndarray of shape (n_draws, n_units)
        float64 or float32 (converted a chunk of columns at a time, never whole).
    vectors : ndarray of shape (n_draws, n_vectors)

    Returns
    -------
    ndarray of shape (n_vectors, n_units)
        NaN for a unit with ``-inf`` at a draw where a vector is not 0 (no finite
        influence: callers that rank such units replace them by their exact gains).
    """
    n_draws, n_units = matrix.shape
    out = np.empty((vectors.shape[1], n_units))
    rows = np.ascontiguousarray(vectors.T)  # (P, S) @ (S, U): twice as fast as L^T V

    def work(chunk: slice) -> None:
        with np.errstate(invalid="ignore"):
            product = rows @ read_columns(matrix, chunk)
        out[:, chunk] = np.where(np.isfinite(product), product, np.nan)

    floats = n_draws if matrix.dtype != np.float64 else vectors.shape[1]
    map_chunks(work, obs_chunks(n_units, floats))
    return out


def run_in_lockstep(
    matrix: np.ndarray,
    searches: list[Generator[np.ndarray, Any, Any]],
    screen=None,
    done: Callable[[int, Any], None] | None = None,
) -> list:
    """Run generator searches together; return what each returns, in order.

    A search yields a vector ``v`` of length ``n <= n_draws`` and receives
    ``influence_products(matrix[:n], v)`` (its first ``n`` draws: a split-draw search works
    on the first half). Vectors of searches over the same draws go through the matrix in
    one pass per round. With a ``screen`` that knows ``n``, a search receives instead a
    :class:`~bayesij.array.amip_screen.ScreenedInfluence`, whose exact products it reads
    where it needs them.

    Parameters
    ----------
    matrix : ndarray of shape (n_draws, n_units)
    searches : list of generator
    screen : InfluenceScreen, optional
    done : callable, optional
        ``done(i, result)`` as soon as search ``i`` returns, while the others go on (the
        caller may start working on its result meanwhile).
    """
    results: list = [None] * len(searches)
    pending: dict[int, np.ndarray] = {}
    for i, search in enumerate(searches):
        _advance(i, search, None, pending, results, done, first=True)
    while pending:
        rows: dict[int, list[int]] = {}
        for i, vector in pending.items():
            rows.setdefault(vector.size, []).append(i)
        answers = {}
        for n, members in rows.items():
            stacked = np.column_stack([pending[i] for i in members])
            if screen is not None and n in screen.slack:
                products = screen.products(n, stacked)
            else:
                products = influence_products(matrix[:n], stacked)
            answers.update({i: products[j] for j, i in enumerate(members)})
        pending = {}
        for i, product in answers.items():
            _advance(i, searches[i], product, pending, results, done)
    return results


def _advance(i, search, product, pending, results, done=None, first=False) -> None:
    """Send ``product`` to search ``i`` (start it when ``first``); keep its next request or
    its result (handed to ``done`` too)."""
    try:
        pending[i] = next(search) if first else search.send(product)
    except StopIteration as stop:
        results[i] = stop.value
        if done is not None:
            done(i, stop.value)
