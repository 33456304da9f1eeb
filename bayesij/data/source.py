"""The one door for the log-likelihood: every estimator reads its draws through a
:class:`LogLikSource`, and maps its kernel over the source's blocks with :func:`map_blocks`.

:func:`as_source` accepts every input an estimator accepts — a
:class:`~bayesij.data.posterior.Posterior`, an ArviZ ``InferenceData`` or ``DataTree``, an
xarray ``Dataset`` / ``DataArray``, a NumPy array (S, N) or (C, D, N), a dask array or
dask-backed xarray, or a :func:`~bayesij.data.lazy.loglik_function` — and returns one object
that knows its shape, its chains, the labels of its units and how to yield blocks of units:

* an in-memory matrix is one block (the array layer splits it into chunks of observations
  and maps them over threads itself);
* a dask-backed array yields its own chunks along the observations, each read whole, once;
* a log-likelihood function yields blocks of about 64 MiB (or its ``block_size``).

Options that need the whole draws x units matrix (groups, saved smoothed weights, greedy
reweighting, ...) are refused for a lazy source here, in one place, with one message.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from bayesij.array.checks import check_finite, check_log_lik_values, checked_r_eff, fail
from bayesij.array.ess import log_lik_relative_eff, mean_relative_ess
from bayesij.array.numeric import CHUNK_BYTES, release_freed_memory, reserve_a_core
from bayesij.data.convert import unit_index
from bayesij.data.inference_data import log_lik_of_fit, posterior_draws
from bayesij.data.lazy import LazyArray, lazy_quantities
from bayesij.data.posterior import Posterior

__all__ = ["LogLikSource", "map_blocks", "join_blocks"]


@dataclass(frozen=True)
class _InMemory:
    """A (n_chains, n_draws, n_units) matrix already checked (by the Posterior): one block."""

    values: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape[0], self.values.shape[1]

    def bounds(self) -> list[tuple[int, int]]:
        return [(0, self.values.shape[2])]

    def block(self, start: int, stop: int) -> np.ndarray:
        if (start, stop) == (0, self.values.shape[2]):
            return self.values
        return self.values[:, :, start:stop]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(self.values[:, :, np.asarray(positions)], dtype=float)


@dataclass(frozen=True, eq=False)
class LogLikSource:
    """The pointwise log-likelihood of the exchangeable units, however it is held.

    Attributes
    ----------
    reader : object
        Gives ``shape`` (n_chains, draws per chain), ``bounds()`` (the natural blocks of
        units, ``[(start, stop), ...]``), ``block(start, stop)`` (the (n_chains, n_draws,
        stop - start) log-likelihood of those units) and ``rows(positions)``.
    units : xarray.DataArray
        Labels of the units, of dim ``obs`` or ``group``.
    codes : ndarray of shape (n_obs,)
        The unit (0-based) of each observation.
    posterior : Posterior or None
        The checked container of an in-memory input (its groups and quantities); None for
        a lazy log-likelihood.
    quantity_draws : ndarray of shape (n_chains, n_draws, K) or None
        Draws of the selected quantities (only when asked for with ``quantities``).
    quantity_names : list of str
    posterior_reader : callable or None
        Reads the draws of every posterior variable when first asked
        (:meth:`all_posterior_draws`) for a source of the log-likelihood alone
        (:func:`~bayesij.data.fit.as_log_lik_source`).
    grouping : str or None
        Set when the units are the observations of a fit whose structure names a grouping
        (a pointwise estimator, as ArviZ's): that grouping, how it was found and how to
        ask for it, in words.
    """

    reader: object
    units: xr.DataArray
    codes: np.ndarray
    posterior: Posterior | None = None
    quantity_draws: np.ndarray | None = None
    quantity_names: tuple[str, ...] = ()
    posterior_reader: Callable[[], np.ndarray] | None = None
    grouping: str | None = None

    def relative_eff(self, rule: str, convention: str = "bayesij", given=None):
        """The draws' relative efficiency by a peer's rule
        (:data:`bayesij.stats.peers.CONVENTIONS`), or the ``given`` one checked.

        Parameters
        ----------
        rule : {"chains", "split", "posterior"}
            ``"chains"``: None (the kernels compute R loo's ``relative_eff`` of each unit
            from its chains, up to 2.8); ``"split"``: R loo's from 2.9 on, per unit,
            ``posterior::ess_basic`` of ``exp(l_n)`` (the ESS of the mean over split
            chains) over S, a lazy log-likelihood read a block at a time
            (:func:`~bayesij.array.ess.log_lik_relative_eff`); ``"posterior"``: ArviZ's one
            number, the mean relative ESS of every posterior element
            (:func:`~bayesij.array.ess.mean_relative_ess`).
        convention : str
            The convention's name, for the messages of a rule this source cannot follow.
        given : float or array_like, optional
            The caller's ``r_eff``, returned checked as one value per unit.

        Returns
        -------
        None, float or ndarray of shape (n_units,)
        """
        if given is not None:
            return checked_r_eff(given, self.n_units)
        if rule == "posterior":
            return mean_relative_ess(self._posterior_for_r_eff(convention))
        if rule == "split":
            return map_blocks(self, _split_relative_eff).r_eff
        return None

    def _posterior_for_r_eff(self, convention: str) -> np.ndarray:
        """The posterior draws the ``"posterior"`` rule reads, refused (naming the
        convention) for a lazy log-likelihood or a fit without them."""
        draws = self.all_posterior_draws()
        if draws is None:
            raise fail(
                "convention",
                f"{convention!r} with a lazy log-likelihood",
                "r_eff= given with it (ArviZ's number: the posterior's mean ESS over S, "
                "bayesij.array.ess.mean_relative_ess)",
            )
        if draws.shape[2] == 0:
            raise fail(
                "convention",
                f"{convention!r} for a log-likelihood without posterior draws",
                "data with a posterior group (its ESS gives r_eff), or r_eff= given",
            )
        return draws

    def all_posterior_draws(self) -> np.ndarray | None:
        """(n_chains, n_draws, K) draws of every posterior quantity (a peer's r_eff rule
        reads them), checked when read; None for a lazy log-likelihood."""
        if self.posterior is None:
            return None
        draws = self.posterior.quantities.values
        if draws.shape[2] == 0 and self.posterior_reader is not None:
            draws = self.posterior_reader()
        return draws

    @property
    def lazy(self) -> bool:
        """Whether the log-likelihood is read block by block (never whole in memory)."""
        return self.posterior is None

    @property
    def shape(self) -> tuple[int, int]:
        """(n_chains, draws per chain)."""
        return tuple(self.reader.shape)

    @property
    def n_chains(self) -> int:
        return self.shape[0]

    @property
    def n_draws(self) -> int:
        """All draws over all chains."""
        return self.shape[0] * self.shape[1]

    @property
    def n_units(self) -> int:
        return int(self.units.size)

    @property
    def index(self) -> pd.Index:
        """The unit labels as a pandas index named ``obs`` or ``group``."""
        return unit_index(self.units)

    def bounds(self) -> list[tuple[int, int]]:
        """The natural blocks of units: one for a matrix in memory, a dask chunk, or a
        function's block."""
        return self.reader.bounds()

    def block(self, start: int, stop: int) -> np.ndarray:
        """The (n_chains, n_draws, stop - start) log-likelihood of units ``start..stop``,
        checked (finite or -inf)."""
        return self.checked(self.reader.block(start, stop))

    def checked(self, values: np.ndarray) -> np.ndarray:
        """``values`` read from a lazy reader, checked (a matrix in memory was checked when
        its container was built)."""
        if self.lazy:
            check_log_lik_values(values.reshape(-1, values.shape[-1]))
        return values

    def rows(self, positions) -> np.ndarray:
        """The float64 log-likelihood of the units at ``positions`` (any order), checked."""
        positions = np.asarray(positions, dtype=int)
        if positions.size == 0:  # nothing to read (a function is not called)
            return np.empty((*self.shape, 0))
        values = self.reader.rows(positions)
        if self.lazy:
            check_log_lik_values(values.reshape(-1, values.shape[2]))
        return values

    def matrix(self, keep_float32: bool = False) -> np.ndarray:
        """The whole (n_chains, n_draws, n_units) float64 matrix of an in-memory source, for
        options that revisit every unit (a lazy source refuses them in :func:`as_source`,
        so only an in-memory reader, which has ``values``, gets here). ``keep_float32``:
        float32 values as they are, for callers that convert what they read (no float64
        copy of the whole matrix)."""
        if keep_float32 and self.reader.values.dtype == np.float32:
            return self.reader.values
        return np.asarray(self.reader.values, dtype=float)


def source_of_fit(fit, *, groups, quantities, need_quantities, whole_matrix) -> LogLikSource:
    """The :class:`LogLikSource` of a :class:`~bayesij.data.fit.Fit` for ``groups``
    (labels, or False for the observations) with the draws of ``quantities`` (all with
    ``need_quantities``); containers are built once per fit."""
    lazy = fit.lazy_reader()
    if lazy is None:
        post = fit.posterior(quantities, need_quantities=need_quantities)
        return _noted(fit, _in_memory(post, groups, quantities, need_quantities), groups)
    source = _noted(fit, _lazy_source(fit, lazy, groups, whole_matrix), groups)
    if not need_quantities and quantities is None:
        return source
    draws, found = lazy_quantities(fit.content, lazy, quantities)
    check_finite(draws, "quantities")
    return replace(source, quantity_draws=draws, quantity_names=tuple(found))


def log_lik_source_of_fit(fit, *, groups, whole_matrix) -> LogLikSource:
    """The :class:`LogLikSource` of a :class:`~bayesij.data.fit.Fit`'s log-likelihood alone
    for ``groups`` (labels, or False for the observations): an InferenceData's or
    DataTree's posterior variables are not read (a peer's r_eff rule reads them when it
    needs them, :meth:`LogLikSource.all_posterior_draws`), and a result over the
    observations of a fit that records a grouping says so."""
    lazy = fit.lazy_reader()
    if lazy is not None:
        source = _lazy_source(fit, lazy, groups, whole_matrix)
    elif fit.is_fit_object and fit.has_posterior:
        source = _log_lik_of_fit(fit, groups)
    else:
        source = _in_memory(fit.posterior(), groups, None, False)
    return _noted(fit, source, groups)


def _noted(fit, source: LogLikSource, groups) -> LogLikSource:
    """``source``, saying the grouping the fit records when the units are the
    observations and no unit was named (:meth:`~bayesij.data.fit.Fit.grouping_note`)."""
    note = fit.grouping_note() if groups is False else None
    return source if note is None else replace(source, grouping=note)


def _lazy_source(fit, lazy, groups, whole_matrix) -> LogLikSource:
    """A lazy log-likelihood's source over the observations (a grouping, needing the whole
    matrix, is refused, as are the caller's whole-matrix options)."""
    if groups is not False and not fit.units_given:
        raise fail(
            "groups",
            f"the fit's grouping by {fit.units.describe()} with a lazy log-likelihood",
            "groups=False (the observations are the units), or the log-likelihood in memory: "
            "summing each group's terms needs the whole draws x units matrix",
        )
    refuse_whole_matrix({"groups": groups, **(whole_matrix or {})})
    units = xr.DataArray(np.asarray(lazy.obs_names), dims="obs")
    return LogLikSource(lazy, units, np.arange(lazy.n_obs), None)


def _units_of(post: Posterior, groups) -> tuple[Posterior, np.ndarray, xr.DataArray, np.ndarray]:
    """``post`` with the units ``groups`` (False: the observations), the units'
    log-likelihood, labels and the unit code of each observation."""
    if groups is False:
        groups = None
        if post.groups is not None:
            post = post.with_groups(None)
    values, units, codes = post.unit_log_lik(groups)
    return post, values, units, codes


def _in_memory(post: Posterior, groups, quantities, need_quantities) -> LogLikSource:
    post, values, units, codes = _units_of(post, groups)
    draws, names = None, ()
    if need_quantities or quantities is not None:
        draws, names = post.quantities.values, tuple(post.quantity_names)
    return LogLikSource(_InMemory(values), units, codes, post, draws, names)


def _log_lik_of_fit(fit, groups) -> LogLikSource:
    """The log-likelihood of an InferenceData / DataTree with its draws paired with the
    posterior's, the posterior's variables read only when asked (a container the fit has
    built already gives its log-likelihood)."""
    post = fit.built_container() or fit.cached(
        ("log_lik_of_fit",), lambda: log_lik_of_fit(fit.content, fit.var_name, fit.argument)
    )
    post, values, units, codes = _units_of(post, groups)
    reader = partial(_all_draws, fit.content, fit.argument)
    return LogLikSource(_InMemory(values), units, codes, post, posterior_reader=reader)


def _all_draws(data, argument: str) -> np.ndarray:
    return posterior_draws(data, None, argument)[0]


def unit_members(source: LogLikSource) -> pd.Series | None:
    """The unit label of each observation, indexed by the observation's id, when the units
    are groups (None when they are the observations): what a grouped result carries so
    that results are compared only over the same groups, not merely the same labels, and
    by the observations' ids, not their positions."""
    if source.index.name != "group":
        return None
    ids = source.posterior.obs_names if source.posterior is not None else None
    return pd.Series(np.asarray(source.index)[source.codes], index=ids, name="group")


def refuse_whole_matrix(options: Mapping) -> None:
    """The one refusal of whole-matrix options for a lazy log-likelihood. ``{"data":
    "dic"}`` refuses a lazy input to an estimator that needs the matrix throughout."""
    reason = (
        "the whole draws x units matrix in memory, and a lazy log-likelihood is read one "
        "block of observations at a time"
    )
    for name, value in options.items():
        if value is None or value is False:
            continue
        if name == "data":
            raise fail(
                "data",
                f"a lazy log-likelihood for {value}",
                f"a log-likelihood in memory: {value} needs {reason}",
            )
        if isinstance(value, str):  # a choice (method='reweighted'): another one
            found, wanted = repr(value), f"another {name}: {value!r} needs {reason}"
        else:
            found, wanted = name, f"no {name}: it needs {reason}"
        if name == "groups":
            wanted += " (for groups, sum their terms inside the function)"
        raise fail(name, f"{found} with a lazy log-likelihood", wanted)


class _RelativeEff(NamedTuple):
    r_eff: np.ndarray


def _split_relative_eff(block: np.ndarray) -> _RelativeEff:
    """R loo's (2.9 on) relative efficiency of each unit of a (n_chains, n_draws, b) block."""
    return _RelativeEff(log_lik_relative_eff(block, split=True))


#: The largest block of a lazy source read while the one before it is computed: a larger
#: block (a user's dask chunk of hundreds of MB) is read once the kernel let go of the one
#: before, so that at most one is held. Over 305 MiB chunks the second one held cost the
#: lazy audit's pass 0.3 GiB of its 1.35 GiB peak, and reading ahead saved no time
#: measurably (docs/performance.md).
READ_AHEAD_BYTES = 2 * CHUNK_BYTES


def map_blocks(
    source: LogLikSource,
    kernel: Callable,
    *,
    per_unit: Mapping | None = None,
    client=None,
    join: bool = True,
    keep: Callable | None = None,
    blocks: Sequence[int] | None = None,
    read_ahead: bool = True,
):
    """``kernel(block, **per_unit_block)`` over every block of ``source``, joined.

    Parameters
    ----------
    source : LogLikSource
    kernel : callable
        Takes a (n_chains, n_draws, b) block and the per-unit arguments cut to it; returns a
        NamedTuple (or a dict of them) of per-unit arrays with the units on the last axis
        (None fields stay None).
    per_unit : mapping, optional
        ``{name: values}``: arguments with one value per unit (sliced per block); scalars
        and None are passed as they are.
    client : dask.distributed.Client, optional
        Run the blocks of a lazy source as tasks on this cluster (a function is evaluated
        there; a dask chunk is computed by the cluster and handed to the task). A matrix in
        memory is computed here.
    join : bool, default True
        Join the blocks' results along the units (:func:`join_blocks`); False returns
        the list of them in order, for estimators that add up over units (the IJ).
    keep : callable, optional
        ``keep(block, start, part)`` after the kernel of each block of a lazy source read
        here, with the kernel's result ``part``: what the caller keeps of a block it would
        otherwise read again (the AMIP sets' columns), or of its result (which it may
        trim); on a cluster, ``keep(None, start, part)`` as each block's result comes
        back, in order.
    blocks : sequence of int, optional
        Only these blocks (indices into ``source.bounds()``), in that order.
    read_ahead : bool, default True
        Read the next block of a lazy source while the kernel computes the current one
        (blocks of at most :data:`READ_AHEAD_BYTES` as float64); False for a kernel that
        takes little time beside the read (copying or summing some columns), where reading
        ahead gains little and holds a second block, and what computing it takes (a dask
        chunk's or a function's temporaries), beside the first.

    Returns
    -------
    What ``kernel`` returns, for all units (or a list of it per block).

    Notes
    -----
    Locally, the next block is read (or evaluated) in a second thread while the current one
    is checked and computed (the check in the computing thread: on the reader's it competes
    with the kernel's threads, 10 % slower for a function source); NumPy releases the GIL,
    so reading and computing overlap; at most two blocks are in memory (one without
    ``read_ahead``, or where a block is larger than :data:`READ_AHEAD_BYTES`).
    """
    per_unit = dict(per_unit or {})
    bounds = source.bounds()
    if blocks is not None:
        bounds = [bounds[int(index)] for index in blocks]
        if not bounds:
            return []
    if len(bounds) == 1 and (client is None or not source.lazy):  # e.g. a matrix in memory
        start, stop = bounds[0]
        part = kernel(source.block(start, stop), **_cut(per_unit, start, stop))
        return part if join else [part]
    if client is None or not source.lazy:
        keep = keep if source.lazy else None
        ahead = read_ahead and _largest_block_bytes(source, bounds) <= READ_AHEAD_BYTES
        parts = _prefetching(source, kernel, bounds, per_unit, keep, ahead=ahead)
    else:
        parts = _on_cluster(source, kernel, bounds, per_unit, client, keep)
    return join_blocks(parts) if join else parts


def _largest_block_bytes(source: LogLikSource, bounds: list) -> int:
    """The bytes of the largest of the blocks ``bounds`` of ``source`` read as float64."""
    return 8 * source.n_draws * max(stop - start for start, stop in bounds)


def _cut(per_unit: dict, start: int, stop: int) -> dict:
    return {
        name: np.asarray(values)[start:stop] if values is not None and np.ndim(values) else values
        for name, values in per_unit.items()
    }


def _prefetching(source, kernel, bounds, per_unit, keep=None, ahead=True) -> list:
    """The kernel over the blocks, the next block read meanwhile in a second thread (with
    ``ahead``; else once the previous one is let go). While reading is the slower of the
    two (timed on the previous block: dask chunks of delayed computations, a costly
    function), the kernel leaves a core to the reader
    (:func:`bayesij.array.numeric.reserve_a_core`). Memory the kernel freed is given back
    after each block of a lazy source (:func:`~bayesij.array.numeric.release_freed_memory`:
    the per-block results and their trimming leave freed pages that would otherwise add
    up to a large part of what is kept)."""
    parts = []
    read_seconds = [0.0]

    def read(start: int, stop: int) -> np.ndarray:
        begin = time.perf_counter()
        block = source.reader.block(start, stop)
        read_seconds[0] = time.perf_counter() - begin
        return block

    kernel_seconds = np.inf  # the first block: no reserve
    with ThreadPoolExecutor(max_workers=1) as reader:  # reads; the check runs with the kernel
        pending = reader.submit(read, *bounds[0])
        for index, (start, stop) in enumerate(bounds):
            block = source.checked(pending.result())
            pending = None  # the future would hold the block
            following = bounds[index + 1] if index + 1 < len(bounds) else None
            reserve = ahead and following is not None and read_seconds[0] >= kernel_seconds
            if ahead and following is not None:
                pending = reader.submit(read, *following)
            begin = time.perf_counter()
            with reserve_a_core() if reserve else contextlib.nullcontext():
                parts.append(kernel(block, **_cut(per_unit, start, stop)))
                if keep is not None:
                    keep(block, start, parts[-1])
            kernel_seconds = time.perf_counter() - begin
            del block
            if source.lazy:
                release_freed_memory()
            if not ahead and following is not None:
                pending = reader.submit(read, *following)
    return parts


def _on_cluster(source, kernel, bounds, per_unit, client, keep=None) -> list:
    """The kernel over the blocks on the cluster's workers; the results gathered one at a
    time, in order, each handed to ``keep`` (with no block) as it comes back."""
    if not callable(getattr(client, "submit", None)):
        raise fail("client", f"a {type(client).__name__}", "a dask.distributed Client")
    futures = []
    for start, stop in bounds:
        cut = _cut(per_unit, start, stop)
        if isinstance(source.reader, LazyArray):
            block = client.compute(source.reader.array[:, :, start:stop].data)
            futures.append(client.submit(_checked_then, kernel, block, cut, pure=False))
        else:
            futures.append(
                client.submit(_evaluate_then, source, kernel, start, stop, cut, pure=False)
            )
    parts = []
    for index, (start, _) in enumerate(bounds):
        parts.append(futures[index].result())
        futures[index] = None  # the worker may let go of it
        if keep is not None:
            keep(None, start, parts[-1])
    return parts


def _checked_then(kernel, block, cut):
    block = np.asarray(block, dtype=float)
    check_log_lik_values(block.reshape(-1, block.shape[2]))
    return kernel(block, **cut)


def _evaluate_then(source, kernel, start, stop, cut):
    return kernel(source.block(start, stop), **cut)


def join_blocks(parts: list):
    """Per-block results joined along their last (units) axis: arrays as they are,
    NamedTuples field by field, tuples item by item, dicts of them key by key; one part is
    returned as it is (no copy: the audit's single in-memory block holds its AMIP block
    sums once).

    ``parts`` is consumed: its items are replaced by None, and each block's array is let go
    as soon as it is copied into the joined one, so a caller that holds no other reference
    to the parts never holds the blocks' results and the joined result whole at once (the
    lazy audit at N = 10^6: 10.7 GB of per-unit results, 21 GB at the join before).
    """
    if len(parts) == 1:
        return parts[0]
    skeleton, leaves = None, []
    for index in range(len(parts)):  # the parts let go: only their leaves are held
        skeleton, found = _flatten(parts[index])
        leaves.append(found)
        parts[index] = None
    del found  # the last part's leaves are held by ``leaves`` alone
    joined = [_join_leaf(leaves, j) for j in range(len(leaves[0]))]
    return _rebuild(skeleton, iter(joined))


def _flatten(part) -> tuple:
    """``(skeleton, leaves)``: the arrays (or None) of a part in order, and how to rebuild
    it from them (:func:`_rebuild`)."""
    if part is None or isinstance(part, np.ndarray):
        return "leaf", [part]
    if isinstance(part, dict):
        keys, skeletons, leaves = list(part), [], []
        for key in keys:
            inner, found = _flatten(part[key])
            skeletons.append(inner)
            leaves += found
        return ("dict", keys, skeletons), leaves
    skeletons, leaves = [], []
    for value in part:
        inner, found = _flatten(value)
        skeletons.append(inner)
        leaves += found
    return ("tuple", type(part), skeletons), leaves


def _rebuild(skeleton, joined):
    if skeleton == "leaf":
        return next(joined)
    kind, label, inner = skeleton
    values = [_rebuild(child, joined) for child in inner]
    if kind == "dict":
        return dict(zip(label, values, strict=True))
    return tuple(values) if label is tuple else label(*values)


def _join_leaf(leaves: list, j: int):
    """Leaf ``j`` of every block joined along its last axis, each block's copy let go once
    copied (``leaves[i][j] = None``): the joined array and the blocks not yet copied are
    held together, never both whole."""
    if leaves[0][j] is None:
        return None
    dtype = np.result_type(*[leaf[j] for leaf in leaves])
    shape = leaves[0][j].shape[:-1]
    out = np.empty((*shape, sum(leaf[j].shape[-1] for leaf in leaves)), dtype=dtype)
    position = 0
    for leaf in leaves:
        width = leaf[j].shape[-1]
        out[..., position : position + width] = leaf[j]
        leaf[j] = None
        position += width
    if out.nbytes >= 2**26:  # 64 MB let go: give the pages back
        release_freed_memory()
    return out
