"""Numerical building blocks shared by the array-layer estimators.

Log-sum-exp over the last axis, chunking of observations so that temporaries stay small,
threaded maps over those chunks and over items handed on as they are made, a
cache-friendly transpose of a block of columns, and sums of log-likelihood columns within
groups. NumPy only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

__all__ = [
    "exp_and_logsumexp",
    "logsumexp_columns",
    "elpd_standard_error",
    "obs_chunks",
    "read_columns",
    "map_chunks",
    "map_ordered",
    "map_as_ready",
    "transpose_columns",
    "sum_by_group",
    "top_positive",
    "release_freed_memory",
    "THREADS",
    "threads",
    "reserve_a_core",
    "CHUNK_BYTES",
]

T = TypeVar("T")
R = TypeVar("R")

#: Threads working on chunks of observations at once (NumPy releases the GIL in the heavy
#: operations); set BAYESIJ_THREADS to change it.
THREADS = int(os.environ.get("BAYESIJ_THREADS", os.cpu_count() or 1))


def map_chunks(work: Callable[[slice], None], chunks: list[slice]) -> None:
    """Run ``work(chunk)`` for every chunk on up to :func:`threads` threads (results by
    side effect, e.g. writing into preallocated output columns)."""
    if len(chunks) <= 1 or threads() <= 1:
        for chunk in chunks:
            work(chunk)
        return
    with one_blas_thread(), ThreadPoolExecutor(min(threads(), len(chunks))) as pool:
        list(pool.map(work, chunks))


_RESERVED = [0]  # cores kept free for readers of lazy blocks (reserve_a_core)


def threads() -> int:
    """Threads the maps over chunks use now: ``THREADS``, less the cores reserved for
    readers (:func:`reserve_a_core`), at least 1."""
    return max(1, THREADS - _RESERVED[0])


@contextlib.contextmanager
def reserve_a_core():
    """A context in which the maps over chunks leave one core to a thread that reads (or
    computes) the next lazy block meanwhile: on 2 cores the reader of dask chunks and two
    kernel threads slowed each other, WAIC over 10 delayed blocks took 1.6 times the
    blocks' own time, 0.9 times with one kernel thread. BLAS is held to one thread too."""
    with _BLAS_LOCK:
        _RESERVED[0] += 1
    try:
        with one_blas_thread():
            yield
    finally:
        with _BLAS_LOCK:
            _RESERVED[0] -= 1


_BLAS_LOCK = threading.Lock()
_BLAS_USERS: list = []  # [the limiter] while any call holds BLAS at one thread


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's controller of the BLAS libraries loaded, found once per process (a
    search of the loaded libraries takes 4 ms: seven per audit)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread():
    """A context in which BLAS runs one thread per call: our threads already share the
    cores, and a multi-threaded BLAS inside each of them oversubscribes them.

    Counted over the process: the first of concurrent calls (threads of the user's) sets the
    limit and the last one out restores BLAS as it found it. (Nested ``threadpool_limits``
    contexts entered and left out of order would leave it at one thread for good.)
    """
    with _BLAS_LOCK:
        if not _BLAS_USERS:
            _BLAS_USERS.append([_blas_controller().limit(limits=1, user_api="blas"), 0])
        _BLAS_USERS[0][1] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0][1] -= 1
            if not _BLAS_USERS[0][1]:
                _BLAS_USERS.pop()[0].restore_original_limits()


def map_ordered(work: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """``work(item)`` for each item on up to :func:`threads` threads, results in order; at
    most ``threads() + 1`` items are taken from ``items`` ahead of the results (a lazy
    source is never read whole)."""
    workers = threads()
    if workers <= 1:
        yield from map(work, items)
        return
    with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[R]] = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def map_as_ready(
    work: Callable[[int, T], R], produce: Callable[[Callable[[int, T], None]], object], n: int
) -> list[R]:
    """``work(i, item)`` for each of the ``n`` items that ``produce(submit)`` hands to
    ``submit(i, item)`` as it makes them, each started as soon as it is handed; the
    results in the order of ``i``. ``produce`` runs in this thread with a core of its own
    (:func:`reserve_a_core`) while the items are worked on with the others; once it is
    done, on up to :func:`threads` threads. (With one thread, each item is worked on when
    it is handed.)"""
    results: list = [None] * n
    workers = threads()
    if workers <= 1:

        def now(i: int, item: T) -> None:
            results[i] = work(i, item)

        produce(now)
        return results
    slots = threading.Semaphore(workers - 1)  # one more once produce is done

    def held(i: int, item: T) -> R:
        with slots:
            return work(i, item)

    with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
        futures: dict[int, Future[R]] = {}
        with reserve_a_core():
            produce(lambda i, item: futures.__setitem__(i, pool.submit(held, i, item)))
        slots.release()
        for i, future in futures.items():
            results[i] = future.result()
    return results


def exp_and_logsumexp(
    values: np.ndarray, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``exp(values - top)`` and ``log sum exp(values)`` along the last axis.

    ``top`` is the maximum of each row (0 for rows that are all ``-inf``, which give
    ``-inf``, as do empty rows); the exponentials go to ``out`` when given. One pass of exp,
    faster than ``scipy.special.logsumexp``, which handles weights and signs at the cost of
    extra passes.
    """
    if values.shape[-1] == 0:
        return values, np.full(values.shape[:-1], -np.inf)
    top = values.max(axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    scaled = np.subtract(values, top, out=out)
    np.exp(scaled, out=scaled)
    with np.errstate(divide="ignore"):
        return scaled, np.log(scaled.sum(axis=-1)) + top[..., 0]


def logsumexp_columns(values: np.ndarray) -> np.ndarray:
    """``log sum_s exp(values[s, n])`` for each column of (n_draws, n_cols) values."""
    return exp_and_logsumexp(values.T)[1]


def elpd_standard_error(pointwise: np.ndarray, ddof: int) -> float:
    """SE of a sum of pointwise elpd values: ``sqrt(N var_n)`` with divisor ``N - ddof``.

    ``ddof=0`` is ArviZ's convention, ``ddof=1`` R loo's ``sqrt(N) sd_n``. NaN for too few
    values; -inf entries (impossible observations) give NaN.
    """
    n = pointwise.size
    with np.errstate(invalid="ignore"):
        return float(np.sqrt(n * pointwise.var(ddof=ddof))) if n > ddof else np.nan


#: Target size in bytes of the temporary arrays made per chunk of observations.
CHUNK_BYTES = 64 * 2**20

#: The same for a chunk whose temporaries are each passed over by many small element-wise
#: operations (a logistic log-likelihood's ``exp`` and ``log``): they stay in the
#: processor's cache, where 64 MiB go to memory at every operation (twice as long).
CACHE_BYTES = 4 * 2**20


def obs_chunks(n_obs: int, floats_per_obs: int, in_cache: bool = False) -> list[slice]:
    """Slices of observations so that the temporaries of one chunk stay near
    :data:`CHUNK_BYTES` (``in_cache``: :data:`CACHE_BYTES`), at least 256 observations.

    ``floats_per_obs`` is the number of float64 values held per observation of a chunk.
    """
    budget = CACHE_BYTES if in_cache else CHUNK_BYTES
    size = max(256, budget // (8 * max(1, floats_per_obs)))
    return [slice(start, min(start + size, n_obs)) for start in range(0, n_obs, size)]


#: Rows of the draws matrix moved per tile of :func:`transpose_columns`.
TILE = 256


def read_columns(matrix: np.ndarray, chunk) -> np.ndarray:
    """Columns ``chunk`` of a (n_draws, n_obs) matrix as float64: a view of float64 input,
    a converted copy of just these columns of float32 input (never of the whole matrix)."""
    return np.asarray(matrix[:, chunk], dtype=np.float64)


def transpose_columns(matrix: np.ndarray, chunk: slice, out: np.ndarray) -> np.ndarray:
    """Columns ``chunk`` of a (n_draws, n_obs) matrix as contiguous rows, written to ``out``.

    NumPy's transposing copy of a large block is slow (each source row is far from the
    next); moving tiles of ``TILE`` draws keeps every tile in cache, about 7 times faster
    for 4000 draws. ``out`` must have at least ``chunk`` width rows of ``n_draws`` values.
    """
    block = matrix[:, chunk]
    rows = out[: block.shape[1]]
    for start in range(0, block.shape[0], TILE):
        rows[:, start : start + TILE] = block[start : start + TILE].T
    return rows


def sum_by_group(log_lik: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum log-likelihood columns within groups: the log-likelihood of each group.

    Parameters
    ----------
    log_lik : ndarray of shape (n_draws, n_obs)
    codes : ndarray of shape (n_obs,)
        Group code 0..n_groups-1 of each observation; every group must occur.
    n_groups : int

    Returns
    -------
    ndarray of shape (n_draws, n_groups)
    """
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(n_groups))
    in_order = bool(np.all(order == np.arange(order.size)))  # grouped already: no gather
    out = np.empty((log_lik.shape[0], n_groups))
    # A few draws at a time: the gathered columns never a copy of the whole matrix.
    for rows in obs_chunks(log_lik.shape[0], log_lik.shape[1]):
        block = log_lik[rows] if in_order else log_lik[rows][:, order]
        out[rows] = np.add.reduceat(block, starts, axis=1, dtype=np.float64)
    return out


def top_positive(gain: np.ndarray, k: int) -> np.ndarray:
    """Indices of the at most ``k`` largest positive values of ``gain``, largest first,
    ties in index order: ``np.argsort(-gain, kind="stable")`` cut to the positive values
    and to ``k``, without sorting everything (a partition first). NaN is not positive."""
    positive = np.flatnonzero(gain > 0)
    if k <= 0:
        return positive[:0]
    if positive.size > k:
        cut = positive.size - k
        kth = np.partition(gain[positive], cut)[cut]
        positive = positive[gain[positive] >= kth]
    return positive[np.argsort(-gain[positive], kind="stable")][:k]


def release_freed_memory() -> None:
    """Give memory freed by the process back to the operating system where the C library
    keeps it (glibc's ``malloc_trim``, as dask.distributed's workers do; nothing elsewhere).

    Arrays of a few MB are carved from glibc's heap once larger ones have been freed (its
    mmap threshold rises), and freeing them leaves the pages with the process: the lazy
    audit's join, which lets go of each block's results as it copies them, would keep its
    resident memory near twice the results until trimmed.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (another C library, or none found)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
