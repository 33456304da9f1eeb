"""Running an estimator block by block over a lazy log-likelihood (a function, or a
dask-backed array), locally or as tasks on a ``dask.distributed`` Client, and joining the
per-observation results."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.lazy import LazyArray

__all__ = ["by_blocks"]


def by_blocks(source, compute: Callable, methods, options: dict, client=None) -> dict:
    """``compute(block, start, stop, methods, options)`` over every block of ``source``,
    joined along the observations.

    ``compute`` returns a dict of NamedTuples of per-observation arrays (None fields stay
    None). Locally the next block is read while the current one is computed. With
    ``client``, each block is a task on the cluster: a function source is
    evaluated there; a dask-backed array's block is computed by the cluster and handed to
    the task.
    """
    bounds = source.bounds()
    if client is None:
        parts = _prefetching(source, compute, bounds, methods, options)
    else:
        if not callable(getattr(client, "submit", None)):
            raise fail("client", f"a {type(client).__name__}", "a dask.distributed Client")
        futures = []
        for a, b in bounds:
            if isinstance(source, LazyArray):
                block = client.compute(source.array[:, :, a:b].data)
                futures.append(client.submit(compute, block, a, b, methods, options, pure=False))
            else:
                futures.append(
                    client.submit(
                        _evaluate_then, source, compute, a, b, methods, options, pure=False
                    )
                )
        parts = client.gather(futures)
    return _join(parts)


def _prefetching(source, compute, bounds, methods, options) -> list:
    """Blocks in order, the next one read (or evaluated) in a second thread while the
    current one is computed: NumPy releases the GIL, so reading and computing overlap.
    At most two blocks are in memory."""
    parts = []
    with ThreadPoolExecutor(max_workers=1) as reader:
        pending = reader.submit(source.block, *bounds[0])
        for index, (start, stop) in enumerate(bounds):
            block = pending.result()
            if index + 1 < len(bounds):
                pending = reader.submit(source.block, *bounds[index + 1])
            parts.append(compute(block, start, stop, methods, options))
            del block
    return parts


def _evaluate_then(source, compute, start, stop, methods, options):
    return compute(source.block(start, stop), start, stop, methods, options)


def _join(parts: list[dict]) -> dict:
    out = {}
    for key, first in parts[0].items():
        fields = []
        for name in first._fields:
            values = [getattr(part[key], name) for part in parts]
            fields.append(None if values[0] is None else np.concatenate(values))
        out[key] = type(first)(*fields)
    return out
