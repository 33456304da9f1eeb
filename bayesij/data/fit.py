"""The one door: :func:`read` turns any accepted input into a :class:`Fit`, once.

:func:`read` converts the input (:func:`bayesij.data.convert.converted`) into one of three
forms and keeps none of it: an InferenceData's or DataTree's groups as Datasets, draws in
memory as the checked container, a lazy log-likelihood as its block reader. A :class:`Fit`
is everything the package needs to know about a fitted model, asked of that form in one
place:

* **the log-likelihood**, however it is held (a matrix in memory, dask chunks, a
  function), handed out as a :class:`~bayesij.data.source.LogLikSource` by
  :meth:`Fit.source` (with the quantities' draws) and :meth:`Fit.log_lik_source` (alone);
* **the unit** — one rule for every estimator (:func:`bayesij.data.structure.find_units`):
  the grouping the user names with ``groups=``, else a container's own groups, else the
  grouping the fit states (an index variable of ``constant_data`` into a posterior dim, a
  coordinate of the observations named like one), else the observations;
* **the model's structure**: the posterior variables, their dims and sizes, which of them
  are local (a dim over the units or over a grouping of the observations), the terms of
  the ``log_prior`` group;
* **the quantities' draws**, read when first asked for and kept.

The unit and the structure are worked out on first use and kept: an estimator of the
log-likelihood alone (LOO, WAIC over the observations, as ArviZ's) reads neither, and so
no posterior variable. A unit named with ``groups=`` is checked when read.

Nothing above this floor asks what the input was: estimators call :func:`read` (a
:class:`Fit` is returned as it is) and ask the :class:`Fit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import xarray as xr

from bayesij.array.checks import as_float_array, check_finite, check_labels, fail
from bayesij.data.convert import (
    check_has_quantities,
    converted,
    posterior_in_memory,
    posterior_of_groups,
)
from bayesij.data.inference_data import (
    SAMPLE_DIMS,
    FitGroups,
    _group,
    aligned_draws,
    has_groups,
    observed_of_fit,
    posterior_draws,
    predictions_of_fit,
)
from bayesij.data.lazy import LazyArray, LogLikFunction, lazy_reader_of_groups
from bayesij.data.posterior import Posterior, base_name
from bayesij.data.source import (
    LogLikSource,
    log_lik_source_of_fit,
    refuse_whole_matrix,
    source_of_fit,
)
from bayesij.data.structure import (
    ModelStructure,
    Units,
    declared_grouping,
    dim_levels,
    find_units,
    local_names,
    marginal_columns,
    model_structure,
)

__all__ = [
    "Fit",
    "read",
    "as_source",
    "as_log_lik_source",
    "read_draws",
    "named_draws",
    "is_fit",
    "observed_or_fit",
    "predictions_or_fit",
]


@dataclass(frozen=True, eq=False)
class Fit:
    """A fitted model read once: its log-likelihood, its unit and its structure.

    Build one with :func:`read`; every public estimator accepts a :class:`Fit` wherever it
    accepts ``data``, and reads nothing again. The input itself is not kept: :func:`read`
    converts it once into one of three forms (:attr:`content`).

    Attributes
    ----------
    content : FitGroups, Posterior, LazyArray or LogLikFunction
        The input converted: an InferenceData's or DataTree's groups as Datasets
        (:class:`~bayesij.data.inference_data.FitGroups`); draws in memory (an array, a
        Dataset, a DataArray, a Posterior) as the checked container; a lazy
        log-likelihood (dask chunks, a function) as its block reader.
    kind : str
        What the input was (``"InferenceData"``, ``"ndarray"``, ...), for messages.
    var_name : str, list of str or None
        The log-likelihood variable read.
    argument : str
        The name of the argument the input came in, for error messages.
    given_groups : None, False, str, array_like or mapping
        The unit as named to :func:`read` (``groups=``).
    units : Units
        The exchangeable unit (:func:`bayesij.data.structure.find_units`) and the posterior
        dims over units: worked out on first use (reading the fit's structure and, to
        confirm an index, the posterior draws), then kept.

    Examples
    --------
    >>> import numpy as np
    >>> import bayesij
    >>> rng = np.random.default_rng(0)
    >>> fit = bayesij.read(rng.normal(size=(4, 100, 8)))
    >>> fit.units.name, fit.n_obs
    ('observation', 8)
    >>> bayesij.loo(fit).n_units
    8
    """

    content: FitGroups | Posterior | LazyArray | LogLikFunction
    kind: str
    var_name: object
    argument: str = "data"
    given_groups: object = None
    _posteriors: dict = field(default_factory=dict, repr=False)

    @cached_property
    def units(self) -> Units:
        """The exchangeable unit (:func:`bayesij.data.structure.find_units`), found on first
        use."""
        return find_units(self.content, self.given_groups, self.var_name, kind=self.kind)

    @property
    def units_given(self) -> bool:
        """Whether the unit was named (``groups=`` to :func:`read`, a container's own
        groups) rather than to be read from the fit's structure; no structure read."""
        if self.given_groups is not None:
            return True
        return self.is_container and self.content.groups is not None

    def __repr__(self) -> str:
        kind = self.kind
        if self.is_fit_object:
            kind += f" with groups {', '.join(self.groups_of_input)}"
        elif self.lazy:
            kind = f"lazy log-likelihood ({kind})"
        sizes = self.variable_sizes()
        shown = [f"{v}[{n}]" if n > 1 else v for v, n in list(sizes.items())[:8]]
        more = ", ..." if len(sizes) > 8 else ""
        units = self.units.describe()
        if self.units.grouped:
            units += f", {self.units.n_units} units"
        return (
            f"Fit: {kind}; unit: {units}; variables: {', '.join(shown) + more if shown else 'none'}"
        )

    # ----------------------------------------------------------------- what the input is
    @property
    def is_fit_object(self) -> bool:
        """Whether the input was an InferenceData / DataTree (named groups)."""
        return isinstance(self.content, FitGroups)

    @property
    def groups_of_input(self) -> list[str]:
        """The groups of an InferenceData / DataTree (``[]`` for other inputs)."""
        return list(self.content) if self.is_fit_object else []

    @property
    def has_posterior(self) -> bool:
        """Whether the input holds posterior draws of quantities (a posterior group, or a
        Posterior with quantities)."""
        if self.is_container:
            return bool(self.content.quantity_names)
        return "posterior" in self.groups_of_input

    @property
    def has_log_prior(self) -> bool:
        """Whether the input holds a ``log_prior`` group."""
        return "log_prior" in self.groups_of_input

    @property
    def is_container(self) -> bool:
        """Whether the draws are in memory as a :class:`~bayesij.data.posterior.Posterior`
        (an array, a Dataset, a DataArray or a Posterior given)."""
        return isinstance(self.content, Posterior)

    @property
    def n_obs(self) -> int:
        """Number of observations (columns of the log-likelihood); an InferenceData's or
        DataTree's from its sizes, no values read."""
        if self.is_container:
            return self.content.n_obs
        if "log_likelihood" in self.groups_of_input:
            group = self.content["log_likelihood"]
            names = list(group.data_vars) if self.var_name is None else self.var_name
            return sum(
                int(np.prod([n for d, n in group[v].sizes.items() if d not in SAMPLE_DIMS]))
                for v in ([names] if isinstance(names, str) else names)
            )
        return self.log_lik_source(groups=False).n_units

    # ----------------------------------------------------------------- the log-likelihood
    def posterior(self, quantities=None, *, need_quantities: bool = False) -> Posterior:
        """The checked container of the log-likelihood and ``quantities`` (all by default),
        built once per selection."""
        key = ("posterior", _key(quantities))
        if key[1] is _UNKNOWN:  # not a selection: refused with its argument named
            return self._built(quantities)
        post = self.cached(
            key, lambda: self._selected_from_read(quantities) or self._built(quantities)
        )
        if need_quantities:
            check_has_quantities(post, self.argument)
        return post

    def _built(self, quantities) -> Posterior:
        """The container of ``quantities`` read from the converted input."""
        if self.is_fit_object:
            return posterior_of_groups(self.content, self.var_name, quantities, self.argument)
        # A lazy array is read whole, for an estimator that needs the matrix in memory (a
        # function is refused: it has no matrix).
        content = self.content.array if isinstance(self.content, LazyArray) else self.content
        return posterior_in_memory(content, None, quantities, self.argument)

    def cached(self, key, build):
        """What ``build()`` returns, built once per fit (and the fits :func:`read` makes
        of it with other units) under ``key``."""
        if key not in self._posteriors:
            self._posteriors[key] = build()
        return self._posteriors[key]

    def built_container(self) -> Posterior | None:
        """A checked container this fit has built already (its log-likelihood serves an
        estimator of the log-likelihood alone), or None."""
        built = [post for key, post in self._posteriors.items() if key[0] == "posterior"]
        return built[0] if built else None

    def source(
        self, *, groups=None, quantities=None, need_quantities: bool = False, whole_matrix=None
    ) -> LogLikSource:
        """The log-likelihood of the units, with the draws of ``quantities``, as a
        :class:`~bayesij.data.source.LogLikSource`.

        Parameters
        ----------
        groups : None, False or array_like, optional
            None: the fit's unit (:attr:`units`). False: the observations. Labels: one per
            observation.
        quantities, need_quantities, whole_matrix
            As :func:`as_source`.
        """
        if groups is not None and groups is not False:  # a grouping named here
            return read(self, groups=groups).source(
                quantities=quantities, need_quantities=need_quantities, whole_matrix=whole_matrix
            )
        labels = self.unit_labels(groups)
        return source_of_fit(
            self,
            groups=labels,
            quantities=quantities,
            need_quantities=need_quantities,
            whole_matrix=whole_matrix,
        )

    def log_lik_source(self, *, groups=None, whole_matrix=None) -> LogLikSource:
        """The log-likelihood alone, for estimators of it alone (LOO, WAIC, held-out), as a
        :class:`~bayesij.data.source.LogLikSource`; no posterior variable read.

        Parameters
        ----------
        groups : None, False or array_like, optional
            None: the observations unless the units were given (``groups=`` to
            :func:`read`, a container's own groups), as ArviZ's pointwise estimators.
            False: the observations. Labels: one per observation.
        whole_matrix : mapping, optional
            As :func:`as_source`.
        """
        if groups is not None and groups is not False:  # a grouping named here
            return read(self, groups=groups).log_lik_source(whole_matrix=whole_matrix)
        labels = self.unit_labels(groups, pointwise=True)
        return log_lik_source_of_fit(self, groups=labels, whole_matrix=whole_matrix)

    def _selected_from_read(self, quantities) -> Posterior | None:
        """``quantities`` from a container already built that holds them all (derived, not
        checked again), or None."""
        if quantities is None:
            return None
        for key, post in self._posteriors.items():
            if key[0] == "posterior":
                try:
                    return post.select(quantities)
                except ValueError:
                    continue
        return None

    def in_memory(self, caller: str, *, quantities=None, need_quantities: bool = False):
        """The checked container (:meth:`posterior`) for an estimator that needs the whole
        draws x units matrix throughout (``caller``): a lazy log-likelihood is refused."""
        if self.lazy:
            refuse_whole_matrix({"data": caller})
        return self.posterior(quantities, need_quantities=need_quantities)

    @property
    def lazy(self) -> bool:
        """Whether the log-likelihood is read block by block (dask chunks, a function)."""
        return self.lazy_reader() is not None

    def lazy_reader(self):
        """The block reader of a lazy log-likelihood (None for one in memory), built once."""
        if self.is_fit_object:
            return self.cached(
                ("lazy",), lambda: lazy_reader_of_groups(self.content, self.var_name)
            )
        return None if self.is_container else self.content

    def unit_labels(self, groups=None, *, pointwise: bool = False):
        """The group of each observation for ``groups`` (None: the fit's unit; pointwise:
        the observations unless the units were given), or False for the observations."""
        if groups is not None:
            return groups
        if self.given_groups is not None and not isinstance(self.given_groups, (str, bool)):
            return self.given_groups  # labels or a mapping, as given
        if pointwise and not self.units_given:
            return False  # the observations, as ArviZ's: no structure read
        return False if self.units.labels is None else self.units.labels

    def grouping_note(self) -> str | None:
        """What a pointwise result says when the fit records a grouping it was not asked
        for (:func:`bayesij.data.structure.declared_grouping`, no draws read): the grouping,
        and how to ask for it; None otherwise."""
        if self.units_given:
            return None
        declared = self.cached(
            ("declared grouping",), lambda: declared_grouping(self.content, self.var_name)
        )
        if declared is None:
            return None
        name, reason = declared
        return (
            f"The fit records a grouping by {name} ({reason}): these are per-observation "
            f"values, as ArviZ computes them; groups={name!r} gives one per {name} (leave one "
            f"{name} out), the unit of influence, IJ, linearity, AMIP and the audit."
        )

    # ----------------------------------------------------------------- the structure
    def posterior_dims(self) -> dict[str, tuple]:
        """``{variable: its dims beyond (chain, draw)}`` of a posterior group (``{}`` for
        other inputs)."""
        if "posterior" not in self.groups_of_input:
            return {}
        posterior = self.content["posterior"]
        return {
            str(v): tuple(d for d in posterior[v].dims if d not in SAMPLE_DIMS)
            for v in posterior.data_vars
        }

    def variable_sizes(self) -> dict[str, int]:
        """``{variable: number of elements}`` of the posterior, in order (a Posterior's
        variables are the base names of its quantities)."""
        if "posterior" in self.groups_of_input:
            posterior = self.content["posterior"]
            return {
                str(v): int(
                    np.prod([n for d, n in posterior[v].sizes.items() if d not in SAMPLE_DIMS])
                )
                for v in posterior.data_vars
            }
        sizes: dict[str, int] = {}
        for name in self.element_names():
            sizes[base_name(name)] = sizes.get(base_name(name), 0) + 1
        return sizes

    def element_names(self) -> list[str]:
        """A Posterior's quantity names (``[]`` for other inputs: their elements are named
        when read)."""
        return list(self.content.quantity_names) if self.is_container else []

    @property
    def structure(self) -> ModelStructure:
        """The model's variables: global and local, non-centred offsets, deterministics,
        and the ``log_prior`` group's top-level and group-level terms
        (:func:`bayesij.data.structure.model_structure`)."""
        units = self.units
        key = ("structure", units.name, units.dim, tuple(sorted(units.local_dims)))
        return self.cached(key, lambda: model_structure(self.content, self.units))

    def unit_columns(self, terms, labels: list) -> np.ndarray:
        """Per-unit terms (n_chains, n_draws, len(labels)) in the order of the units
        ``labels``: a DataArray's paired by its last dim's labels, an array's by the
        levels of the grouping's posterior dim when it has one column per level
        (:func:`~bayesij.data.structure.marginal_columns`)."""
        levels = dim_levels(self.content, self.units.dim) if self.units.dim else None
        return marginal_columns(terms, labels, levels)

    def local_quantities(self, names: list[str]) -> list[str]:
        """The quantities among ``names`` that are local to the fit's unit: elements of
        variables with a dim over units."""
        return local_names(names, self.content, self.units)

    def posterior_draws(self, quantities=None) -> tuple[np.ndarray, list[str]]:
        """(n_chains, n_draws, K) checked draws of ``quantities`` (every variable by
        default) and their names; no log-likelihood needed."""
        if not self.has_posterior and not self.is_container:
            raise fail(
                self.argument,
                f"a {self.kind} without posterior draws",
                "an InferenceData / DataTree with a posterior group, or a bayesij.Posterior",
            )
        return posterior_draws(self.content, quantities, self.argument)

    def log_prior_group(self) -> xr.Dataset:
        """The ``log_prior`` group, its draws paired by label with the posterior's."""
        if not self.is_fit_object:
            raise fail(
                "log_prior",
                f"None with data a {self.kind}",
                "the log prior: a log_prior group in data, a quantity name, a callable or "
                "an array of draws",
            )
        group = _group(
            self.content, "log_prior", "Save the log prior (e.g. PyMC's compute_log_prior)"
        )
        if self.has_posterior:
            group = aligned_draws(group, self.content["posterior"], "log_prior")
        return group

    def group(self, name: str) -> xr.Dataset:
        """A group of an InferenceData / DataTree as a Dataset (refused, naming the groups
        there are, when missing)."""
        return _group(self.content, name, "", self.argument)


def read(data, *, groups=None, var_name=None, argument: str = "data") -> Fit:
    """Read a fitted model once: the log-likelihood, the unit and the model's structure.

    Parameters
    ----------
    data : Fit, Posterior, InferenceData, DataTree, xarray, array_like, dask array or LogLikFunction
        Anything an estimator accepts (a :class:`Fit` is returned as it is, or with the
        units ``groups`` names).
    groups : None, False, str or array_like, optional
        The exchangeable unit: None reads it from the fit (a container's groups, an index
        variable of ``constant_data`` into a posterior dim, a coordinate of the observations
        named like one; else the observations); False: the observations; a name of such a
        dim, coordinate or variable; or labels, one per observation.
    var_name : str or list of str, optional
        The log-likelihood variable of an InferenceData, DataTree or Dataset.
    argument : str, default "data"
        The name of the argument, for error messages.

    Returns
    -------
    Fit

    Examples
    --------
    >>> import numpy as np
    >>> import bayesij
    >>> rng = np.random.default_rng(1)
    >>> log_lik = rng.normal(size=(2, 50, 6))
    >>> fit = bayesij.read(log_lik, groups=["a", "a", "b", "b", "c", "c"])
    >>> fit.units.name, fit.units.n_units
    ('group', 3)
    """
    if isinstance(data, Fit):
        return _reselected(data, groups, var_name)
    if var_name is not None:
        check_labels(var_name, "var_name")
    content, kind = converted(data, var_name, argument)
    fit = Fit(content, kind, var_name, argument, groups)
    if groups is not None:
        fit.units  # noqa: B018 -- a unit named here is checked now, not at first use
    return fit


def _reselected(fit: Fit, groups, var_name) -> Fit:
    """``fit`` itself, or with the unit ``groups`` / the variable ``var_name`` asked for."""
    if var_name is not None and var_name != fit.var_name:
        if not fit.is_fit_object:
            raise fail(
                "var_name",
                f"{var_name!r} with {fit.argument} a Fit read from a {fit.kind}",
                "var_name=None: the fit holds one log-likelihood (read the input again to "
                "choose another variable of a Dataset)",
            )
        regrouped = Fit(fit.content, fit.kind, var_name, fit.argument, groups)
    elif groups is None:
        return fit
    else:
        regrouped = Fit(fit.content, fit.kind, fit.var_name, fit.argument, groups, fit._posteriors)
    if groups is not None:
        regrouped.units  # noqa: B018 -- the unit named here is checked now
    return regrouped


_UNKNOWN = object()


def _key(quantities):
    """A selection of quantities as a dict key (``_UNKNOWN`` for a value that is none)."""
    if quantities is None or isinstance(quantities, str):
        return quantities
    try:
        key = tuple(quantities)
        hash(key)
    except TypeError:
        return _UNKNOWN
    return key


def is_fit(data) -> bool:
    """Whether ``data`` is a fit with named draws (a :class:`Fit`, a Posterior, an
    InferenceData or DataTree) rather than draws or a log-likelihood as an array."""
    return isinstance(data, (Fit, Posterior)) or has_groups(data)


def observed_or_fit(data, y, var_name=None, argument: str = "y"):
    """``y`` as given, or (when None) the fit's ``observed_data`` variable of the
    log-likelihood's name (``var_name``, or the one log-likelihood variable), flattened
    row-major as the log-likelihood's observations are: what arviz-stats reads."""
    if y is not None:
        return y
    groups = _fit_groups(data, "observed_data", argument)
    return observed_of_fit(groups, var_name, argument)


def predictions_or_fit(data, y_pred, var_name=None, argument: str = "y_pred"):
    """``y_pred`` as given, or (when None) the fit's ``posterior_predictive`` variable of
    the log-likelihood's name, (chain, draw, obs), its draws paired by label with the
    log-likelihood's."""
    if y_pred is not None:
        return y_pred
    groups = _fit_groups(data, "posterior_predictive", argument)
    return predictions_of_fit(groups, var_name, argument)


def _fit_groups(data, group: str, argument: str) -> FitGroups:
    """The groups of ``data`` read (a Fit's as they are), refused, naming ``argument``,
    where it is no InferenceData or DataTree to read ``group`` from."""
    fit = read(data) if isinstance(data, Fit) or has_groups(data) else None
    if fit is None or not fit.is_fit_object:
        kind = type(data).__name__ if fit is None else fit.kind
        raise fail(
            argument,
            f"None with data of type {kind}",
            f"the values, or an InferenceData/DataTree with a {group!r} group to read them from",
        )
    return fit.content


def read_draws(data, quantities=None, argument: str = "data") -> tuple[np.ndarray, list, tuple]:
    """Draws of quantities: a fit's posterior draws of ``quantities`` (anything :func:`read`
    accepts that holds them; no log-likelihood needed), or draws given as an array of shape
    (n_draws,), (n_chains, n_draws) or (n_chains, n_draws, n_quantities).

    Returns
    -------
    draws : ndarray of shape (n_chains, n_draws, n_quantities), checked finite
    names : list of str or None (an array's quantities are unnamed)
    shape : tuple
        The input's shape.
    """
    if is_fit(data):
        values, names = read(data, argument=argument).posterior_draws(quantities)
        return values, names, values.shape
    if quantities is not None:
        raise fail("quantities", repr(quantities), "None for draws given as an array")
    array = as_float_array(data, argument)
    shape = array.shape
    if array.ndim in (1, 2):
        array = array.reshape(1, -1, 1) if array.ndim == 1 else array[:, :, None]
    elif array.ndim != 3:
        raise fail(
            argument,
            f"an array of shape {shape}",
            "draws of shape (n_draws,), (n_chains, n_draws) or (n_chains, n_draws, n_quantities)",
        )
    return array, None, shape


def named_draws(data, value, argument: str) -> np.ndarray:
    """Draws of the posterior variable ``value`` names in the fit ``data``, or ``value``
    itself as a checked array."""
    if not isinstance(value, str):
        array = np.atleast_1d(as_float_array(value, argument))  # a number: one draw's value
        check_finite(array, argument)
        return array
    if not is_fit(data):
        raise fail(
            argument,
            f"the name {value!r} with data a {type(data).__name__}",
            "draws as an array, or a name in an InferenceData, DataTree or Posterior",
        )
    fit = read(data, argument="data")
    available = list(fit.variable_sizes())
    if value not in available:
        raise fail(argument, repr(value), f"a posterior variable ({', '.join(available[:8])})")
    return fit.posterior_draws(value)[0]


def as_source(
    data,
    *,
    groups=None,
    quantities=None,
    var_name=None,
    need_quantities: bool = False,
    whole_matrix: Mapping | None = None,
    argument: str = "data",
) -> LogLikSource:
    """The log-likelihood of any accepted input, with the draws of its quantities, as a
    :class:`~bayesij.data.source.LogLikSource`: the input read once (:func:`read`; a
    :class:`Fit` is used as it is), then :meth:`Fit.source`.

    Parameters
    ----------
    data : Fit, Posterior, InferenceData, DataTree, xarray, array_like, dask array or LogLikFunction
    groups : None, False or array_like, optional
        The units: None, the fit's; False, the observations; labels, one per observation.
    quantities : str or list of str, optional
        The quantities to read beside the log-likelihood (all with ``need_quantities``).
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData, DataTree or Dataset.
    need_quantities : bool, default False
        Read the draws of the quantities (refusing an input that has none).
    whole_matrix : mapping, optional
        ``{option name: value}`` of the caller's options that need the whole matrix in
        memory: a lazy source with any of them set (not None, not False) is refused.
    argument : str, default "data"
        Name of the argument, for error messages.

    Returns
    -------
    LogLikSource
    """
    fit = read(data, var_name=var_name, argument=argument)
    return fit.source(
        groups=groups,
        quantities=quantities,
        need_quantities=need_quantities,
        whole_matrix=whole_matrix,
    )


def as_log_lik_source(
    data, *, groups=None, var_name=None, whole_matrix: Mapping | None = None, argument="data"
) -> LogLikSource:
    """The log-likelihood alone of any accepted input, for estimators of it alone (LOO,
    WAIC, held-out), as a :class:`~bayesij.data.source.LogLikSource`: the input read once
    (:func:`read`), then :meth:`Fit.log_lik_source`. The posterior group of an
    InferenceData / DataTree is not read (only its draw labels, to pair the draws), so
    that a variable unfit as a quantity (a boolean flag, a NaN in a deterministic, no
    (chain, draw) dims) does not refuse the log-likelihood. The units are the observations
    unless they were given, as ArviZ's pointwise estimators; other arguments as
    :func:`as_source`."""
    fit = read(data, var_name=var_name, argument=argument)
    return fit.log_lik_source(groups=groups, whole_matrix=whole_matrix)
