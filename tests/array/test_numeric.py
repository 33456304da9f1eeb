"""The shared numerical pieces against NumPy and SciPy: log-sum-exp, the SE of a sum of
pointwise values in both conventions, chunks that cover every observation once, tiled
transposes, group sums, and threaded maps that keep order."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array import numeric


def test_logsumexp_and_standard_errors():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(50, 7)) * 300
    values[:, 3] = -np.inf
    np.testing.assert_allclose(
        numeric.logsumexp_columns(values)[[0, 1, 2, 4]],
        logsumexp(values, axis=0)[[0, 1, 2, 4]],
        rtol=1e-14,
    )
    assert numeric.logsumexp_columns(values)[3] == -np.inf
    pointwise = rng.normal(size=40)
    for ddof in (0, 1):
        expected = np.sqrt(40 * pointwise.var(ddof=ddof))
        assert numeric.elpd_standard_error(pointwise, ddof) == pytest.approx(expected)
    assert np.isnan(numeric.elpd_standard_error(np.zeros(1), 1))


def test_chunks_cover_every_observation_once():
    chunks = numeric.obs_chunks(100_000, 4000)
    covered = np.concatenate([np.arange(c.start, c.stop) for c in chunks])
    np.testing.assert_array_equal(covered, np.arange(100_000))
    size = chunks[0].stop
    assert size * 4000 * 8 <= numeric.CHUNK_BYTES  # temporaries near 64 MiB
    assert numeric.obs_chunks(10, 10**9)[0] == slice(0, 10)  # at least 256 a chunk


def test_tiled_transpose_group_sums_and_ordered_maps():
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(1000, 30))
    out = np.empty((30, 1000))
    rows = numeric.transpose_columns(matrix, slice(5, 17), out)
    np.testing.assert_array_equal(rows, matrix[:, 5:17].T)
    codes = np.array([0, 1, 0, 2, 1, 0] * 5)
    summed = numeric.sum_by_group(matrix, codes, 3)
    for g in range(3):
        np.testing.assert_allclose(summed[:, g], matrix[:, codes == g].sum(axis=1), atol=1e-13)
    results = list(numeric.map_ordered(lambda x: x * x, iter(range(50))))
    assert results == [x * x for x in range(50)]


@pytest.mark.parametrize("sorted_codes", [False, True])
def test_group_sums_a_few_draws_at_a_time(monkeypatch, sorted_codes):
    """The groups' sums are the same whether the draws are summed in one chunk or several,
    from observations in any order or grouped already (no gather), float32 or float64;
    and no copy of the whole matrix is made (the gathered columns are a chunk's)."""
    rng = np.random.default_rng(2)
    codes = np.repeat(np.arange(7), 9) if sorted_codes else rng.permutation(np.arange(63) % 7)
    matrix = rng.normal(size=(1000, 63))
    whole = numeric.sum_by_group(matrix, codes, 7)
    monkeypatch.setattr(numeric, "CHUNK_BYTES", 8)  # 256 draws a chunk: four chunks
    import tracemalloc

    tracemalloc.start()
    chunked = numeric.sum_by_group(matrix, codes, 7)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(chunked, whole)
    assert peak < 0.75 * matrix.nbytes  # not the whole 504 kB gathered (with the result)
    for g in range(7):
        np.testing.assert_allclose(whole[:, g], matrix[:, codes == g].sum(axis=1), atol=1e-13)
    single = numeric.sum_by_group(matrix.astype(np.float32), codes, 7)
    assert single.dtype == np.float64
    np.testing.assert_allclose(single, whole, atol=1e-5)


def test_blas_threads_are_restored_when_concurrent_calls_end_out_of_order():
    """Two calls hold BLAS at one thread at once and end in the other order than they
    began: the last one out restores what the first one found (not one thread for good)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from bayesij.array.numeric import one_blas_thread

    def blas_threads():
        return [
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        ]

    before = blas_threads()
    first, second = one_blas_thread(), one_blas_thread()
    first.__enter__()
    second.__enter__()
    assert set(blas_threads()) <= {1}
    first.__exit__(None, None, None)
    assert set(blas_threads()) <= {1}  # the second call still runs
    second.__exit__(None, None, None)
    assert blas_threads() == before


def test_top_positive_is_the_stable_sort_cut_to_the_positive_values():
    from bayesij.array.numeric import top_positive

    rng = np.random.default_rng(0)
    for _ in range(500):  # ties, NaN and inf included: the order of a stable argsort
        gain = rng.integers(-3, 4, size=int(rng.integers(1, 30))).astype(float)
        gain[rng.integers(0, gain.size)] = rng.choice([np.nan, np.inf, 1.0])
        k = int(rng.integers(0, gain.size + 2))
        order = np.argsort(-gain, kind="stable")
        np.testing.assert_array_equal(top_positive(gain, k), order[gain[order] > 0][:k])


def test_a_core_reserved_for_a_reader_is_given_back():
    before = numeric.threads()
    with numeric.reserve_a_core():
        assert numeric.threads() == max(1, numeric.THREADS - 1)
        seen = []
        numeric.map_chunks(lambda chunk: seen.append(chunk), numeric.obs_chunks(10, 1))
        assert seen == [slice(0, 10)]
    assert numeric.threads() == before


def test_freed_memory_is_given_back_to_the_system():
    # glibc keeps freed pages of arrays carved from its heap; malloc_trim returns them.
    import sys

    from bayesij.array.numeric import _malloc_trim, release_freed_memory

    def resident() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1])

    if not sys.platform.startswith("linux") or _malloc_trim() is None:
        release_freed_memory()  # a no-op elsewhere
        return
    np.ones(2**21).sum()  # a 16 MB array freed: glibc now carves smaller ones from its heap
    big = [np.ones(2**17) for _ in range(500)]  # 1 MB each
    del big[: len(big) - 1]  # all but the last: the heap's top stays in use
    before = resident()
    release_freed_memory()
    assert resident() < before - 25_000  # pages (4 kB): more than 100 MB given back


@pytest.mark.parametrize("threads", [1, 2])
def test_items_are_worked_on_as_they_are_handed_and_returned_in_order(monkeypatch, threads):
    """``map_as_ready``: an item handed out of order comes back at its index; with two
    threads the first item is worked on while the producer still waits (the producer
    blocks until that work has begun: it never would, were the items worked on only
    after it returned); with one, each is worked on when it is handed."""
    import threading

    monkeypatch.setattr(numeric, "THREADS", threads)
    started = threading.Event()

    def work(i, item):
        started.set()
        return (i, item * item)

    def produce(submit):
        submit(2, 3)
        assert started.wait(timeout=30)
        submit(0, 5)
        submit(1, 7)

    assert numeric.map_as_ready(work, produce, 3) == [(0, 25), (1, 49), (2, 9)]
    with pytest.raises(ZeroDivisionError):
        numeric.map_as_ready(lambda i, item: 1 / item, lambda submit: submit(0, 0), 1)
