"""Log-likelihoods that never sit in memory whole: computed block by block from a function
(as R loo's ``loo.function``), or read block by block from a dask-backed array (an xarray
opened with ``chunks=``, a zarr or netCDF store, a dask array).

A source gives ``n_chains``, ``n_draws`` (per chain), ``n_obs``, ``obs_names`` and
``block(start, stop)``: the (n_chains, n_draws, stop - start) float64 log-likelihood of
those observations. Estimators that are sums over observations (PSIS-LOO, WAIC) run block
by block, so peak memory is one block, not the draws x observations matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from bayesij.array.checks import as_float_array, check_positive_int, fail
from bayesij.array.numeric import CHUNK_BYTES
from bayesij.data.inference_data import (
    SAMPLE_DIMS,
    FitGroups,
    aligned_draws,
)
from bayesij.data.posterior import select_names

__all__ = [
    "LogLikFunction",
    "loglik_function",
    "LazyArray",
    "lazy_reader",
    "lazy_reader_of_groups",
    "lazy_quantities",
    "block_bounds",
]


def _rows(data) -> int:
    if isinstance(data, dict):
        lengths = {len(v) for v in data.values()}
        if len(lengths) != 1:
            raise fail("data", f"a dict of columns of lengths {sorted(lengths)}", "one length")
        return lengths.pop()
    return len(data)


def _take(data, positions: np.ndarray):
    if isinstance(data, dict):
        return {key: np.asarray(value)[positions] for key, value in data.items()}
    if hasattr(data, "iloc"):
        return data.iloc[positions]
    return np.asarray(data)[positions]


def _slice(data, start: int, stop: int):
    if isinstance(data, dict):
        return {key: value[start:stop] for key, value in data.items()}
    if hasattr(data, "iloc"):
        return data.iloc[start:stop]
    return data[start:stop]


@dataclass
class LogLikFunction:
    """A log-likelihood defined by a function and evaluated a block of observations at a
    time, never stored (R loo's ``loo.function``).

    Parameters
    ----------
    fn : callable
        ``fn(data_block, draws)`` (or ``fn(data_block)`` when ``draws`` is None) returns the
        log-likelihood of the block's observations at every draw: shape (S, b) or
        (n_chains, n_draws, b), ``S = n_chains * n_draws`` draws in chain order.
    data : array_like, pandas.DataFrame or dict of arrays
        The observations, one per row (a dict: columns of equal length); sliced by rows.
    draws : optional
        Passed to ``fn`` as its second argument (e.g. a (S, D) array of parameter draws).
    n_chains : int, default 1
        Chains the S draws come from (consecutive blocks of ``S / n_chains``), for the
        relative efficiency.
    block_size : int, optional
        Observations per block (default: about 64 MiB of log-likelihood).
    names : list of str, optional
        Names of the columns of ``draws`` when it is an (S, D) array of parameter draws:
        they are then the quantities of :func:`bayesij.influence` (default ``theta[1]``,
        ``theta[2]``, ...).

    Notes
    -----
    The next block is evaluated in a second thread while the current one is scored (two
    blocks in memory at most), so ``fn`` must not rely on being called from one thread;
    NumPy code is fine.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=1000)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(1000), size=(2000, 1))
    >>> lik = bayesij.loglik_function(lambda y_b, m: -0.5 * (y_b - m) ** 2, y, mu, n_chains=4)
    >>> round(bayesij.loo(lik).p_loo, 1)
    1.0
    """

    fn: Callable
    data: Any
    draws: Any = None
    n_chains: int = 1
    block_size: int | None = None
    names: list | None = None
    _shape: tuple[int, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if not callable(self.fn):
            raise fail("fn", f"a {type(self.fn).__name__}", "a function of a block of data")
        self.n_chains = check_positive_int(self.n_chains, "n_chains")
        if self.block_size is not None:
            self.block_size = check_positive_int(self.block_size, "block_size")
        if isinstance(self.data, (str, bytes)) or not hasattr(self.data, "__len__"):
            raise fail("data", f"a {type(self.data).__name__}", "rows of observations")
        self.n_obs = _rows(self.data)
        if self.n_obs < 1:
            raise fail("data", "no observations", "at least one row")

    def _evaluate(self, start: int, stop: int) -> np.ndarray:
        return self._call(_slice(self.data, start, stop), stop - start)

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The log-likelihood of the observations at ``positions`` (any order), (chains,
        draws, len(positions))."""
        array = self._call(_take(self.data, np.asarray(positions)), len(positions))
        if array.shape[:2] != self.shape:
            raise fail("fn", f"draws {array.shape[:2]}", f"the same draws {self.shape} each call")
        return array

    def _call(self, part, width: int) -> np.ndarray:
        """``fn`` of one part of the data, checked and shaped (n_chains, n_draws, width)."""
        values = self.fn(part) if self.draws is None else self.fn(part, self.draws)
        array = as_float_array(values, "fn")
        if array.ndim == 2:
            total = array.shape[0]
            if total % self.n_chains:
                raise fail("fn", f"{total} draws", f"a multiple of n_chains = {self.n_chains}")
            array = array.reshape(self.n_chains, total // self.n_chains, array.shape[1])
        if array.ndim != 3 or array.shape[2] != width:
            raise fail(
                "fn",
                f"shape {array.shape} for {width} observations",
                f"(S, {width}) or (n_chains, n_draws, {width})",
            )
        return array

    @property
    def shape(self) -> tuple[int, int]:
        """(n_chains, n_draws per chain), from one evaluation of the first observation."""
        if self._shape is None:
            first = self._evaluate(0, 1)
            self._shape = first.shape[:2]
        return self._shape

    @property
    def obs_names(self) -> np.ndarray:
        if hasattr(self.data, "index"):
            return np.asarray(self.data.index)
        return np.arange(self.n_obs)

    def block(self, start: int, stop: int) -> np.ndarray:
        array = self._evaluate(start, stop)
        if array.shape[:2] != self.shape:
            raise fail("fn", f"draws {array.shape[:2]}", f"the same draws {self.shape} each call")
        return array

    def bounds(self) -> list[tuple[int, int]]:
        return block_bounds(self.n_obs, self.block_size or _default_block(self.shape))


def loglik_function(fn, data, draws=None, *, n_chains: int = 1, block_size=None, names=None):
    """A :class:`LogLikFunction`: pass it wherever a log-likelihood is accepted.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> def log_lik(block, draws):  # a block of observations at every draw: (S, b)
    ...     return -0.5 * (block[None, :] - draws[:, :1]) ** 2
    >>> lazy = bayesij.loglik_function(log_lik, y, mu.reshape(-1, 1), n_chains=4)
    >>> float(bayesij.loo(lazy).elpd - bayesij.loo(-0.5 * (y - mu) ** 2).elpd)
    0.0
    """
    return LogLikFunction(fn, data, draws, n_chains, block_size, names)


def lazy_quantities(data, source, quantities=None) -> tuple[np.ndarray, list[str]]:
    """Draws of the quantities beside a lazy log-likelihood, (n_chains, n_draws, K), and
    their names: a function's (S, D) parameter draws, or the posterior group of an
    InferenceData / DataTree whose log-likelihood is lazy; ``quantities`` selects by
    variable or element name."""
    draws, names = _all_quantities(data, source)
    if draws.shape[:2] != tuple(source.shape):
        raise fail(
            "data", f"quantity draws {draws.shape[:2]}", f"the log-likelihood's {source.shape}"
        )
    if quantities is None:
        return draws, names
    keep = [names.index(n) for n in select_names(names, quantities)]
    return draws[:, :, keep], [names[k] for k in keep]


def _all_quantities(data, source) -> tuple[np.ndarray, list[str]]:
    if isinstance(source, LogLikFunction):
        draws = np.asarray(source.draws, dtype=float) if source.draws is not None else None
        if draws is None or draws.ndim != 2:
            raise fail(
                "data",
                "a loglik_function without an (S, D) array of draws",
                "the parameter draws as an (S, D) array (they are the quantities)",
            )
        names = source.names or [f"theta[{j + 1}]" for j in range(draws.shape[1])]
        if len(names) != draws.shape[1]:
            raise fail("names", f"{len(names)} names", f"{draws.shape[1]}, one per column")
        return draws.reshape(*source.shape, draws.shape[1]), list(names)
    if isinstance(data, FitGroups) and "posterior" in data:
        from bayesij.data.inference_data import flatten_variables

        posterior = data["posterior"]
        values, names = flatten_variables(posterior, list(posterior.data_vars))
        return np.asarray(values, dtype=float), names
    raise fail(
        "data",
        "a lazy log-likelihood without draws of quantities",
        "an InferenceData / DataTree with a posterior group, or a loglik_function with "
        "(S, D) parameter draws",
    )


@dataclass
class LazyArray:
    """A dask-backed log-likelihood (chain, draw, obs), read one block of observations at a
    time (the blocks follow the dask chunks along the observations)."""

    array: xr.DataArray
    name: str = "log_lik"

    def __post_init__(self) -> None:
        """Refuse a lazy array whose dims or dtype no log-likelihood has, before any chunk
        is read (a dtype as a matrix in memory's would be refused)."""
        if tuple(self.array.dims[:2]) != SAMPLE_DIMS or self.array.ndim != 3:
            raise fail(
                self.name,
                f"a lazy array with dims {self.array.dims}",
                "dims (chain, draw, one observation dim) for a lazy log-likelihood",
            )
        as_float_array(np.empty(0, dtype=self.array.dtype), self.name)

    @property
    def shape(self) -> tuple[int, int]:
        return self.array.sizes["chain"], self.array.sizes["draw"]

    @property
    def n_obs(self) -> int:
        return int(np.prod([self.array.sizes[d] for d in self.array.dims[2:]]))

    @property
    def obs_names(self) -> np.ndarray:
        dim = self.array.dims[2]
        return (
            np.asarray(self.array[dim].values)
            if dim in self.array.coords
            else np.arange(self.n_obs)
        )

    def block(self, start: int, stop: int) -> np.ndarray:
        """Observations ``start .. stop`` (one dask chunk: :meth:`bounds`), computed in the
        calling thread when dask's default scheduler is its local thread pool: a block is
        read in a thread of its own already, and handing one chunk to the pool costs up to
        a fifth more (the pool's threads and the kernel's contend on a 2-core machine). A
        distributed or other configured scheduler is used as configured."""
        part = self.array[:, :, start:stop].data
        if hasattr(part, "dask"):
            part = _computed(part)
        return as_float_array(np.asarray(part), "log_lik")

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The log-likelihood of the observations at ``positions`` (any order), (chains,
        draws, len(positions))."""
        values = np.asarray(self.array[:, :, np.asarray(positions)].values)
        return as_float_array(values, "log_lik")

    def bounds(self) -> list[tuple[int, int]]:
        """The dask chunks along the observations, each read whole and once per pass."""
        chunks = self.array.chunks[2] if self.array.chunks is not None else (self.n_obs,)
        edges = np.concatenate([[0], np.cumsum(chunks)]).astype(int)
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _computed(part) -> np.ndarray:
    """A dask array computed, without the copy dask's ``compute`` makes of a single chunk
    (its ``finalize`` copies it in case it is a buffer the graph holds). Blocks are only read
    here, never written, as a matrix in memory is only read. Several chunks (a block also
    chunked along chains or draws) are joined by dask as usual."""
    import dask

    scheduler = _local_scheduler(part)
    pieces = part.to_delayed().ravel()
    if len(pieces) == 1:
        (value,) = dask.compute(pieces[0], scheduler=scheduler)
        return np.asarray(value)
    return part.compute(scheduler=scheduler)


def _local_scheduler(part):
    """``"sync"`` when dask would run ``part`` on its local thread pool, else None (the
    configured scheduler: a distributed client, processes)."""
    import dask.base
    import dask.threaded

    return "sync" if dask.base.get_scheduler(collections=[part]) is dask.threaded.get else None


def _default_block(shape: tuple[int, int]) -> int:
    """Observations per block of a function source: about 64 MiB of float64."""
    return max(1, CHUNK_BYTES // (8 * shape[0] * shape[1]))


def block_bounds(n_obs: int, size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``0 .. n_obs`` in blocks of at most ``size``."""
    return [(start, min(start + size, n_obs)) for start in range(0, n_obs, size)]


def _is_dask(array) -> bool:
    return hasattr(getattr(array, "data", None), "dask") or hasattr(array, "dask")


def lazy_reader(data, var_name=None) -> LogLikFunction | LazyArray | None:
    """The block reader of a lazy log-likelihood given alone (a function, a dask array, a
    dask-backed DataArray or Dataset of one variable), or None for one in memory."""
    if isinstance(data, LogLikFunction):
        return data
    if hasattr(data, "dask") and hasattr(data, "chunks") and not isinstance(data, xr.DataArray):
        array = xr.DataArray(data, dims=("chain", "draw", "obs")[-data.ndim :])
        if data.ndim == 2:
            array = array.expand_dims("chain")
        return LazyArray(array, "data")
    if isinstance(data, xr.DataArray) and _is_dask(data):
        return LazyArray(data, "data")
    return _lazy_variable(data, var_name) if isinstance(data, xr.Dataset) else None


def lazy_reader_of_groups(groups, var_name=None) -> LazyArray | None:
    """The block reader of a fit's lazy ``log_likelihood`` variable (its draws paired by
    label with the posterior's, as in memory, or refused), or None for one in memory."""
    if "log_likelihood" not in groups:
        return None
    dataset = groups["log_likelihood"]
    if "posterior" in groups:
        dataset = aligned_draws(dataset, groups["posterior"], "log_likelihood")
    return _lazy_variable(dataset, var_name)


def _lazy_variable(dataset: xr.Dataset, var_name) -> LazyArray | None:
    names = list(dataset.data_vars) if var_name is None else [var_name]
    lazy = [n for n in names if isinstance(n, str) and n in dataset and _is_dask(dataset[n])]
    if not lazy:
        return None
    if len(names) != 1:
        raise fail("var_name", f"None with variables {names}", "the name of one lazy variable")
    return LazyArray(dataset[lazy[0]])
