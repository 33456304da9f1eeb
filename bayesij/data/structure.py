"""The structure of a fit the audit needs: the exchangeable unit and which parameters are
global.

A panel's exchangeable unit is the firm, not the firm-year; a hierarchy's per-group effects
(and their non-centred offsets) do not concentrate as data grow, so the infinitesimal
jackknife over units is not their bootstrap (Giordano & Broderick 2023, the "random effects"
case). :func:`find_units` reads both from the fit where it says them — an integer index
variable of ``constant_data`` over the observations into a posterior dim (PyMC's
``pm.Data("firm_idx", ..., dims="obs")`` with ``a`` of dims ``"firm"``), or a coordinate of
the observations named like a posterior dim — or from the user (``groups=`` labels, or the
name of such a dim, coordinate or variable), and says how it found them.

References
----------
Giordano, R. & Broderick, T. (2023). The Bayesian infinitesimal jackknife for variance.
arXiv:2305.06466.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from bayesij.array.checks import as_float_array, fail
from bayesij.array.locality import (
    MAX_ELEMENTS,
    MIN_LEVELS,
    N_COLUMNS,
    indexed_levels,
    level_chunks,
    one_level_each,
    several_levels_each,
)
from bayesij.data.inference_data import (
    SAMPLE_DIMS,
    FitGroups,
    _group,
    aligned_draws,
    in_observation_order,
    sample_values,
)
from bayesij.data.posterior import Posterior, base_name, element_index

__all__ = [
    "Units",
    "find_units",
    "local_names",
    "ModelStructure",
    "model_structure",
    "dim_levels",
    "marginal_columns",
]


@dataclass(frozen=True)
class Units:
    """The exchangeable unit of a fit, and the posterior dims that run over units.

    Attributes
    ----------
    name : str
        ``"observation"``, or the grouping's name (``"firm"``).
    labels : ndarray of shape (n_obs,) or None
        The group of each observation; None when the observations are the units.
    reason : str
        How the unit was found, as a clause (``"constant_data 'firm_idx' indexes the
        posterior dim 'firm'"``).
    local_dims : frozenset of str
        Posterior dims over units (the group dim, the observations' dims): a variable with
        one of them is local (per unit), the others are global.
    others : tuple of str
        Other groupings found in the fit (a crossed design), for the report.
    given : bool
        Whether the unit was named (``groups=``, a container's own groups) rather than
        read from the fit's structure.
    suspected : tuple of str
        Posterior dims that look like a grouping of the observations the fit does not
        record (shared by several variables, at least :data:`MIN_SUSPECTED_LEVELS` long,
        absent from the observations; or of a variable each observation's log-likelihood
        moves with one level of, :func:`bayesij.array.locality.one_level_each`): their
        variables are local, and the report says how to pass the grouping (``groups=``).
        For a Posterior (no dims): the variables themselves (``local_variables``).
    dim : str or None
        The posterior dim over the units (``"firm"``), when one runs over them: variables
        with it are the units' own effects.
    local_variables : frozenset of str
        Variables of a Posterior (no dims: named ``alpha[1]``...) found local by the
        log-likelihood (one element per group, :func:`bayesij.array.locality.
        one_level_each`).
    """

    name: str
    labels: np.ndarray | None
    reason: str
    local_dims: frozenset = frozenset()
    others: tuple = ()
    given: bool = False
    suspected: tuple = ()
    dim: str | None = None
    local_variables: frozenset = frozenset()

    @property
    def grouped(self) -> bool:
        return self.labels is not None

    def describe(self) -> str:
        """The unit and how it was found, in words (``"firm (constant_data 'firm_idx'
        indexes the posterior dim 'firm')"``)."""
        return f"{self.name} ({self.reason})"

    @property
    def n_units(self) -> int | None:
        """Number of groups (None for observations: the caller knows how many)."""
        return None if self.labels is None else len(dict.fromkeys(self.labels.tolist()))


@dataclass(frozen=True)
class _Grouping:
    name: str  # the posterior dim, coordinate or variable that names the grouping
    labels: np.ndarray
    reason: str
    dim: str | None  # the posterior dim over the groups, when there is one


def find_units(data, groups=None, var_name=None, *, kind: str | None = None) -> Units:
    """The exchangeable unit of ``data`` and the posterior dims over units.

    Parameters
    ----------
    data : FitGroups or Posterior
        The input as :func:`bayesij.read` converts it (``Fit.content``).
    groups : None, False, str or array_like, optional
        None: read the grouping from the fit (an integer index variable of
        ``constant_data`` into a posterior dim, or a coordinate of the observations named
        like a posterior dim; the coarsest when there are several); a Posterior's own groups.
        False: the observations are the units. A string: the name of such a posterior dim,
        coordinate or ``constant_data`` variable. Labels: one per observation.
    var_name : str, optional
        The log-likelihood variable (its dims are the observations').
    kind : str, optional
        What the input was, for messages (by default the type of ``data``).

    Returns
    -------
    Units
    """
    if not isinstance(data, FitGroups):
        return _units_of_container(data, groups, kind or type(data).__name__)
    obs_dims = _obs_dims(data, var_name)
    found = _groupings(data, obs_dims, var_name)
    # Per-group parameters are local whichever unit is audited.
    local = obs_dims | {g.dim for g in found if g.dim}
    if groups is False:
        return Units("observation", None, "groups=False", frozenset(local), given=True)
    if groups is None:
        if not found:
            return _observations_or_suspected(data, obs_dims, var_name)
        chosen = min(found, key=lambda g: len(set(g.labels.tolist())))
    elif isinstance(groups, str):
        chosen = _named(data, groups, found, obs_dims)
    elif isinstance(groups, Mapping):  # from observation ids: labelled when read
        return Units("group", None, "groups given", frozenset(local), given=True)
    else:
        labels = np.asarray(groups, dtype=object)
        chosen = _Grouping("group", labels, "groups given", _dim_of_labels(data, labels))
    others = tuple(g.name for g in found if g.name != chosen.name and g.dim != chosen.dim)
    local |= {chosen.dim} if chosen.dim else set()
    given = groups is not None
    return Units(
        chosen.name, chosen.labels, chosen.reason, frozenset(local), others, given, dim=chosen.dim
    )


#: A posterior dim shorter than this is not suspected of being a grouping (a regression's
#: few coefficients may share a dim between a non-centred vector and its scaled copy).
MIN_SUSPECTED_LEVELS = 3


def _observations_or_suspected(data, obs_dims: frozenset, var_name=None) -> Units:
    """The observations as units, with the posterior dims that look like an unrecorded
    grouping named and made local: a dim over several variables (a group effect and its
    non-centred offset), or a variable each observation's log-likelihood moves with one
    level of (a vector of group effects: :func:`_moved_dims`)."""
    why = "no grouping of the observations found in the fit"
    if "posterior" not in data:
        return Units("observation", None, why, obs_dims)
    posterior = data["posterior"]
    suspects = {}
    sizes = _posterior_dims(data)
    for dim, size in sizes.items():
        on = [str(v) for v in posterior.data_vars if dim in posterior[v].dims]
        if dim not in obs_dims and size >= MIN_SUSPECTED_LEVELS and len(on) >= 2:
            suspects[dim] = (size, on)
    for dim in _coefficient_dims(data, posterior, suspects, var_name):
        del suspects[dim]
    moved = _moved_dims(data, posterior, obs_dims | set(suspects), var_name)
    suspects.update({dim: (sizes[dim], on) for dim, on in moved.items()})
    if not suspects:
        return Units("observation", None, why, obs_dims)
    moves = " (each observation's log-likelihood moves with one of its levels)"
    described = "; ".join(
        f"the posterior dim {dim!r} ({size} levels, on {', '.join(on)}) looks like one"
        + (moves if dim in moved else "")
        for dim, (size, on) in suspects.items()
    )
    why += (
        f", but {described}: its variables are treated as local; to use it as the unit, "
        "pass its labels, one per observation (groups= / --groups)"
    )
    return Units("observation", None, why, obs_dims | set(suspects), suspected=tuple(suspects))


def _coefficient_dims(data, posterior, shared: dict, var_name) -> list[str]:
    """The dims among ``shared`` (``{dim: (size, variables)}``, each over several
    variables) shorter than :data:`~bayesij.array.locality.MIN_LEVELS` that the
    log-likelihood shows to be no grouping: each observation moves with several of a
    variable's levels at once and with no one level alone, as with a regression's
    coefficients and their odds ratios over one ``coef`` dim
    (:func:`~bayesij.array.locality.several_levels_each`)."""
    short = {d: on for d, (size, on) in shared.items() if size < MIN_LEVELS}
    columns = _first_columns(data, posterior, var_name) if short else None
    if columns is None:
        return []

    def tells(test, dim, on):
        return [
            test(_level_chunks(posterior[v], dim), columns) for v in on if _elements(posterior[v])
        ]

    return [
        dim
        for dim, on in short.items()
        if any(tells(several_levels_each, dim, on)) and not any(tells(one_level_each, dim, on))
    ]


def _moved_dims(data, posterior, excluded: set, var_name) -> dict:
    """Posterior dims of at least :data:`~bayesij.array.locality.MIN_LEVELS` levels, not
    in ``excluded`` (the observations' dims, dims suspected already), with a variable that
    each of the first observations' log-likelihood moves with one level of
    (:func:`~bayesij.array.locality.one_level_each`): ``{dim: the variables over it}``."""
    candidates = {
        dim: [
            str(v)
            for v in posterior.data_vars
            if dim in posterior[v].dims and 0 < _elements(posterior[v]) <= MAX_ELEMENTS
        ]
        for dim, size in _posterior_dims(data).items()
        if dim not in excluded and size >= MIN_LEVELS
    }
    candidates = {dim: on for dim, on in candidates.items() if on}
    if not candidates or "log_likelihood" not in data:
        return {}
    columns = _first_columns(data, posterior, var_name)
    if columns is None:
        return {}
    return {
        dim: on
        for dim, on in candidates.items()
        if any(one_level_each(_level_chunks(posterior[v], dim), columns) for v in on)
    }


def _elements(variable: xr.DataArray) -> int:
    """Elements of a real-valued posterior variable at each draw (0 for another type, or
    one without its draws' dims: it is not read here)."""
    if variable.dtype.kind not in "iuf" or not set(SAMPLE_DIMS) <= set(variable.dims):
        return 0
    return int(np.prod([n for d, n in variable.sizes.items() if d not in SAMPLE_DIMS]))


def _first_columns(data, posterior, var_name) -> np.ndarray | None:
    """The log-likelihood of the first :data:`~bayesij.array.locality.N_COLUMNS`
    observations (S, m), its draws paired with the posterior's; None where the variable is
    not one to tell or its values are not real."""
    log_lik = _group(data, "log_likelihood", "")
    names = [var_name] if isinstance(var_name, str) else list(var_name or log_lik.data_vars)
    if len(names) != 1 or names[0] not in log_lik.data_vars:
        return None
    variable = aligned_draws(log_lik[[names[0]]], posterior, "log_likelihood")[names[0]]
    obs = [d for d in variable.dims if d not in SAMPLE_DIMS]
    if (
        not obs
        or any(d not in variable.dims for d in SAMPLE_DIMS)
        or variable.dtype.kind not in "iuf"
    ):
        return None
    values = sample_values(variable.isel({obs[0]: slice(0, N_COLUMNS)}), names[0])
    return values.reshape(values.shape[0] * values.shape[1], -1)[:, :N_COLUMNS]


def _level_chunks(variable: xr.DataArray, dim: str):
    """The draws of ``variable`` (S, levels, other elements), ``dim``'s levels a chunk at a
    time (:func:`~bayesij.array.locality.level_chunks`; a lazy variable computed a chunk
    at a time)."""
    n_draws = variable.sizes["chain"] * variable.sizes["draw"]
    n_levels = variable.sizes[dim]
    for part in level_chunks(n_levels, _elements(variable) // n_levels, n_draws):
        chunk = variable.isel({dim: part}).transpose(*SAMPLE_DIMS, dim, ...)
        yield sample_values(chunk, str(variable.name)).reshape(n_draws, part.stop - part.start, -1)


def _moved_variables(post: Posterior) -> list[str]:
    """Variables of a Posterior (elements named ``alpha[1]``, ``b[2,3]``: grouped by the
    first index) with at least :data:`~bayesij.array.locality.MIN_LEVELS` levels that each
    of the first observations' log-likelihood moves with one level of."""
    levels: dict = {}
    for k, name in enumerate(post.quantity_names):
        index = element_index(name)
        if index:
            levels.setdefault(base_name(name), {}).setdefault(index[0], []).append(k)
    candidates = {
        v: np.array(list(by.values()))
        for v, by in levels.items()
        if MIN_LEVELS <= len(by) < post.n_obs  # per observation: local by their number
        and len({len(i) for i in by.values()}) == 1
        and sum(map(len, by.values())) <= MAX_ELEMENTS
    }
    if not candidates:
        return []
    draws = post.quantities.values.reshape(post.n_draws, -1)
    columns = post.log_lik.values[..., :N_COLUMNS].reshape(post.n_draws, -1)

    def chunks(index: np.ndarray):  # (levels, elements) columns of draws, a chunk at a time
        for part in level_chunks(*index.shape, post.n_draws):
            yield draws[:, index[part]]

    return [v for v, index in candidates.items() if one_level_each(chunks(index), columns)]


def local_names(names: list[str], data, units: Units) -> list[str]:
    """The quantities among ``names`` that are local: elements of posterior variables with a
    dim over units (a fit's groups, ``FitGroups``), or, for a Posterior without dims, variables
    with one element per group or per observation."""
    if isinstance(data, FitGroups) and "posterior" in data:
        posterior = data["posterior"]
        local = {v for v in posterior.data_vars if set(posterior[v].dims) & units.local_dims}
        return [n for n in names if base_name(n) in local]
    sizes = {}
    for name in names:
        sizes[base_name(name)] = sizes.get(base_name(name), 0) + 1
    per_unit = {units.n_units, getattr(data, "n_obs", None)} - {None, 1}
    return [
        n
        for n in names
        if ("[" in n and sizes[base_name(n)] in per_unit) or base_name(n) in units.local_variables
    ]


def _units_of_container(data, groups, kind: str) -> Units:
    if groups is False:
        return Units("observation", None, "groups=False", given=True)
    if isinstance(groups, str):
        raise fail(
            "groups",
            f"the name {groups!r} with data a {kind}",
            "labels, one per observation (a name needs an InferenceData or DataTree, whose "
            "dims, coordinates and constant_data it names)",
        )
    if isinstance(groups, Mapping) and isinstance(data, Posterior):
        labels = data.with_groups(groups).groups.values  # checked: one per observation
        return Units("group", labels, "groups given", given=True)
    if groups is not None and not isinstance(groups, Mapping):
        return Units("group", np.asarray(groups, dtype=object), "groups given", given=True)
    if groups is not None:  # a mapping from observation ids: labelled when read
        return Units("group", None, "groups given", given=True)
    own = getattr(data, "groups", None) if isinstance(data, Posterior) else None
    if own is not None:
        labels = np.asarray(own.values, dtype=object)
        return Units("group", labels, "the container's groups", given=True)
    moved = _moved_variables(data) if isinstance(data, Posterior) else []
    if moved:
        why = (
            "no groups given, but "
            + "; ".join(f"the variable {v!r}" for v in moved)
            + " looks like one effect per group (each observation's log-likelihood moves "
            "with one of its levels): its elements are treated as local; to use the groups "
            "as the unit, pass their labels, one per observation (groups= / --groups)"
        )
        found = tuple(moved)
        return Units("observation", None, why, suspected=found, local_variables=frozenset(found))
    return Units("observation", None, "no groups given")


def _obs_dims(data, var_name) -> frozenset:
    if not (isinstance(data, FitGroups) and "log_likelihood" in data):
        return frozenset()
    log_lik = data["log_likelihood"]
    if var_name is None:
        names = list(log_lik.data_vars)
    else:  # one name or a list of them (concatenated)
        names = [var_name] if isinstance(var_name, str) else list(var_name)
    names = [n for n in names if isinstance(n, str) and n in log_lik.data_vars]
    return frozenset(d for n in names for d in log_lik[n].dims if d not in SAMPLE_DIMS)


def _observation_order(data, obs_dims: frozenset, var_name=None):
    """The log-likelihood variable whose dims are the observations' (``var_name``'s, or the
    first over all of ``obs_dims``): the order and labels a variable over the observations
    is read in (:func:`~bayesij.data.inference_data.in_observation_order`); None without."""
    if not obs_dims or "log_likelihood" not in data:
        return None
    log_lik = data["log_likelihood"]
    names = [var_name] if isinstance(var_name, str) else list(log_lik.data_vars)
    for name in names:
        if (
            name in log_lik.data_vars
            and {d for d in log_lik[name].dims} - set(SAMPLE_DIMS) == obs_dims
        ):
            return log_lik[name]
    return None


def _by_observation(variable: xr.DataArray, reference, argument: str = "data") -> np.ndarray:
    """``variable``'s values over the observations, flattened in the log-likelihood's
    order (``reference``: :func:`_observation_order`'s; None: as stored)."""
    if reference is not None:
        variable = in_observation_order(variable, reference, argument)
    return np.asarray(variable.values).reshape(-1)


def _posterior_dims(data) -> dict:
    posterior = _group(data, "posterior", "")
    return {d: s for d, s in posterior.sizes.items() if d not in SAMPLE_DIMS}


def _groupings(data, obs_dims: frozenset, var_name=None) -> list[_Grouping]:
    """Index variables of constant_data into posterior dims, and coordinates of the
    observations named like a posterior dim."""
    if "posterior" not in data:
        return []
    dims = {d: s for d, s in _posterior_dims(data).items() if d not in obs_dims}
    found = []
    if "constant_data" in data:
        constant = data["constant_data"]
        columns = _FirstColumns(data, var_name)  # read once, when an index asks for them
        order = _observation_order(data, obs_dims, var_name)
        for name in constant.data_vars:
            variable = constant[name]
            if order is not None and set(variable.dims) == obs_dims:
                variable = in_observation_order(variable, order, "data")
            grouping = _index_grouping(data, variable, str(name), dims, obs_dims, columns)
            if grouping is not None:
                found.append(grouping)
    for name, coord in _coordinates_named_like_dims(data, dims, obs_dims):
        reference = _observation_order(data, obs_dims, var_name)
        labels = _by_observation(coord, reference).astype(object)
        found.append(_Grouping(name, labels, _coordinate_reason(name), name))
    return found


def _coordinates_named_like_dims(data, dims: dict, obs_dims: frozenset) -> list:
    """(name, coordinate) of the log-likelihood's coordinates over the observations named
    like a posterior dim of ``dims`` (not one of the observations' own dims)."""
    if "log_likelihood" not in data:
        return []
    log_lik = data["log_likelihood"]
    return [
        (str(name), coord)
        for name, coord in log_lik.coords.items()
        if name in dims and name not in log_lik.dims and set(coord.dims) <= obs_dims
    ]


def _coordinate_reason(name: str) -> str:
    return f"the observations' coordinate {name!r} names the posterior dim {name!r}"


def _index_grouping(
    data, variable: xr.DataArray, name, dims, obs_dims, columns
) -> _Grouping | None:
    """A grouping when ``variable`` is an integer index over the observations into the
    levels of a posterior dim: 0-based (Python) or 1-based (Stan), unused levels allowed,
    at least :data:`MIN_INDEX_LEVELS` levels used, and, where the fit has the
    log-likelihood, borne out by it: each observation's log-likelihood moves with the level
    of a variable over the dim that the index gives it
    (:func:`~bayesij.array.locality.indexed_levels`; where the draws cannot tell, every
    level used). A 0/1 covariate, or an index the log-likelihood does not follow, is not a
    grouping."""
    codes = _index_codes(variable, obs_dims)
    if codes is None:
        return None
    for dim, offset in _indexed_dims(codes, name, dims):
        evidence = _index_evidence(data, dim, codes - offset, columns)
        if evidence is False:
            continue
        labels = _dim_coords(data, dim)[codes - offset]
        return _Grouping(dim, labels, _index_reason(name, dim, offset), dim)
    return None


def _index_codes(variable: xr.DataArray, obs_dims: frozenset) -> np.ndarray | None:
    """The integer codes of a variable over the observations that may index a posterior
    dim (at least :data:`MIN_INDEX_LEVELS` distinct), or None."""
    if set(variable.dims) != set(obs_dims) or variable.dtype.kind not in "iuf":
        return None
    codes = np.asarray(variable.values).reshape(-1)
    if codes.size == 0 or not np.all(np.isfinite(codes)) or np.any(codes != np.round(codes)):
        return None
    codes = codes.astype(np.int64)
    if np.unique(codes).size < MIN_INDEX_LEVELS:
        return None  # a 0/1 (or two-valued) covariate is never a grouping
    return codes


def _indexed_dims(codes: np.ndarray, name: str, dims: dict) -> list[tuple[str, int]]:
    """The (posterior dim, offset 0 or 1) that ``codes`` fit in, those the index is named
    after first (``firm_idx`` -> ``firm``), 0-based before 1-based."""
    candidates = [
        (d, offset)
        for d, size in dims.items()
        for offset in (0, 1)
        if codes.min() >= offset and codes.max() - offset < size
    ]
    return sorted(candidates, key=lambda c: (c[0] not in name, c[1]))


def _index_reason(name: str, dim: str, offset: int) -> str:
    base = "" if offset == 0 else " (1-based, as Stan writes it)"
    return f"constant_data {name!r} indexes the posterior dim {dim!r}{base}"


def declared_grouping(data, var_name=None) -> tuple[str, str] | None:
    """The grouping of the observations a fit records by its names alone, no draws read:
    an integer index of ``constant_data`` over the observations named after the posterior
    dim it fits (``firm_idx`` into ``firm``), or a coordinate of the observations named like
    a posterior dim; the coarsest of them. What a per-observation estimate (LOO, WAIC, as
    ArviZ's) mentions; the unit itself is :func:`find_units`, which also asks the draws.

    Returns
    -------
    (name, reason) or None
    """
    if not isinstance(data, FitGroups) or "posterior" not in data:
        return None
    obs_dims = _obs_dims(data, var_name)
    dims = {d: s for d, s in _posterior_dims(data).items() if d not in obs_dims}
    found = []  # (number of levels, name, reason)
    if "constant_data" in data:
        constant = data["constant_data"]
        for name, variable in constant.data_vars.items():
            codes = _index_codes(variable, obs_dims)
            named = [] if codes is None else _indexed_dims(codes, str(name), dims)
            if named and named[0][0] in str(name):
                dim, offset = named[0]
                found.append((np.unique(codes).size, dim, _index_reason(str(name), dim, offset)))
    for name, coord in _coordinates_named_like_dims(data, dims, obs_dims):
        found.append((np.unique(coord.values).size, name, _coordinate_reason(name)))
    return min(found)[1:] if found else None


#: An index variable with fewer distinct values than this is not read as a grouping (a 0/1
#: covariate in constant_data indexes a two-level coefficient dim by coincidence).
MIN_INDEX_LEVELS = 3


class _FirstColumns:
    """The log-likelihood of the first observations (:func:`_first_columns`), read on first
    use and kept: every index variable and candidate dim asks for the same columns (a lazy
    log-likelihood computes its first chunk once)."""

    def __init__(self, data, var_name):
        self.data, self.var_name, self._read, self._columns = data, var_name, False, None

    def __call__(self, posterior) -> np.ndarray | None:
        if not self._read:
            self._read = True
            if "log_likelihood" in self.data:
                self._columns = _first_columns(self.data, posterior, self.var_name)
        return self._columns


def _index_evidence(data, dim: str, codes: np.ndarray, columns: _FirstColumns) -> bool | None:
    """Whether the log-likelihood of the first observations moves with the levels of a
    variable over ``dim`` that ``codes`` give them: True when some variable says so, False
    when one says otherwise or, with none telling, a level is unused; None when none tells
    and every level is used (the index is taken as it is)."""
    posterior = _group(data, "posterior", "")
    on = [
        str(v)
        for v in posterior.data_vars
        if dim in posterior[v].dims and 0 < _elements(posterior[v]) <= MAX_ELEMENTS
    ]
    read = columns(posterior) if on else None
    contradicted = False
    for v in on if read is not None else ():
        told = indexed_levels(_level_chunks(posterior[v], dim), read, codes[: read.shape[1]])
        if told:
            return True
        contradicted |= told is False
    if contradicted:
        return False
    # Nothing tells: the index stands when it uses every level (as it always did).
    return None if np.unique(codes).size == posterior.sizes[dim] else False


def dim_levels(data, dim: str) -> np.ndarray:
    """The levels of a posterior dim of ``data`` in its order: its coordinate, or its
    positions 0, 1, ... (what an index into it names)."""
    return _dim_coords(data, dim)


def marginal_columns(marginal_log_lik, labels: list, levels=None) -> np.ndarray:
    """Integrated group terms (n_chains, n_draws, len(labels)) with their columns in the
    order of the units ``labels``, paired by label: a DataArray by its last dim's
    coordinate; an array by ``levels`` (the grouping dim's levels, one column each, in
    order) when its last axis has one column per level, else taken in the order of
    ``labels``. A label missing from the terms is refused."""
    if isinstance(marginal_log_lik, xr.DataArray):
        dim = marginal_log_lik.dims[-1]
        have = (
            [str(v) for v in marginal_log_lik[dim].values] if dim in marginal_log_lik.coords else []
        )
        values, names = np.asarray(marginal_log_lik.values), have
    else:
        values = as_float_array(marginal_log_lik, "marginal_log_lik")
        if levels is None or values.ndim != 3 or values.shape[-1] != len(levels):
            return values
        names = [str(v) for v in levels]
    where = {name: k for k, name in enumerate(names)}
    missing = [str(u) for u in labels if str(u) not in where]
    if missing:
        raise fail(
            "marginal_log_lik",
            f"no term for the units {missing[:5]}",
            "one term per unit, labelled by the units' labels or laid out by the grouping's levels",
        )
    return values[..., [where[str(u)] for u in labels]]


def _dim_coords(data, dim: str) -> np.ndarray:
    posterior = _group(data, "posterior", "")
    if dim in posterior.coords:
        return np.asarray(posterior[dim].values, dtype=object)
    return np.arange(posterior.sizes[dim], dtype=object)


def _named(data, name: str, found: list[_Grouping], obs_dims: frozenset) -> _Grouping:
    """The grouping ``groups=name`` names: a posterior dim, a coordinate or a variable."""
    for grouping in found:
        if name == grouping.name or f"'{name}'" in grouping.reason:
            return _replace_reason(grouping, f"groups={name!r}: {grouping.reason}")
    for group in ("constant_data", "log_likelihood", "observed_data"):
        if group not in data:
            continue
        dataset = data[group]
        if name in dataset.variables and set(dataset[name].dims) == set(obs_dims) and obs_dims:
            reference = _observation_order(data, obs_dims)
            labels = _by_observation(dataset[name], reference, "groups").astype(object)
            why = f"groups={name!r}: the {group} variable {name!r}"
            return _Grouping(name, labels, why, _dim_of_labels(data, labels))
    candidates = sorted({g.name for g in found} | _observation_variables(data, obs_dims))
    raise fail(
        "groups",
        f"the name {name!r}, which is no grouping of the observations",
        "a posterior dim indexed by constant_data, a coordinate of the observations or a "
        f"constant_data variable over them ({', '.join(candidates) or 'none in this fit'}), "
        "or labels, one per observation",
    )


def _replace_reason(grouping: _Grouping, reason: str) -> _Grouping:
    return _Grouping(grouping.name, grouping.labels, reason, grouping.dim)


def _observation_variables(data, obs_dims: frozenset) -> set:
    names = set()
    for group in ("constant_data", "log_likelihood"):
        if group in data:
            dataset = data[group]
            names |= {
                str(n)
                for n, v in dataset.variables.items()
                if n not in dataset.dims and obs_dims and set(v.dims) == set(obs_dims)
            }
    return names - set(_group(data, "log_likelihood", "").data_vars)


def _dim_of_labels(data, labels: np.ndarray) -> str | None:
    """The posterior dim whose coordinate labels are exactly the groups' labels, unless the
    log-likelihood says its variables are not the groups' (labels 0..4 that are also a
    coefficient dim's coordinates: :func:`_index_evidence`)."""
    if not isinstance(data, FitGroups) or "posterior" not in data:
        return None
    unique = {str(v) for v in labels.tolist()}
    columns = _FirstColumns(data, None)
    for dim in _posterior_dims(data):
        coords = [str(v) for v in _dim_coords(data, dim).tolist()]
        if set(coords) != unique:
            continue
        position = {label: k for k, label in enumerate(coords)}
        codes = np.array([position[str(v)] for v in labels.tolist()])
        if _index_evidence(data, dim, codes, columns) is not False:
            return dim
    return None


#: A local variable's log-prior term equal to the standard normal log density of its draws
#: to this relative tolerance is a non-centred offset (``z ~ N(0, 1)``).
STANDARD_NORMAL_RTOL = 1e-6


@dataclass(frozen=True)
class ModelStructure:
    """What a fit says about its model's variables, beyond the unit.

    Attributes
    ----------
    global_vars, local_vars : tuple of str
        Posterior variables without / with a dim over units (:attr:`Units.local_dims`).
    auxiliaries : tuple of str
        Local variables whose log-prior term is the standard normal density of their
        draws: non-centred offsets (``z_a ~ N(0, 1)`` with ``a = mu + sigma * z_a``).
        Without a ``log_prior`` group: local variables whose draws, pooled, have mean
        within :data:`OFFSET_TOLERANCE` of 0 and sd within it of 1, beside another variable
        over the same dims (what they are scaled into).
    deterministics : tuple of str or None
        Posterior variables with no term in the ``log_prior`` group (PyMC's
        ``pm.Deterministic``, Stan's transformed parameters); None without a ``log_prior``
        group to tell.
    top_level_priors, group_level_priors : tuple of str
        The ``log_prior`` group's variables: the priors of global variables (the ones a
        user chose, which power-scaling asks about) and the terms of local variables (the
        distribution of the group effects, part of the model's likelihood for them).
    unit_effects : tuple of str
        Local variables over the units' own dim (:attr:`Units.dim`): each unit's effect
        (and its non-centred offset). With them the log-likelihood of a unit is conditional
        on its effect, so the IJ over units approximates reweighting units with their
        effects held (the weight bootstrap), not drawing new units.
    """

    global_vars: tuple = ()
    local_vars: tuple = ()
    auxiliaries: tuple = ()
    deterministics: tuple | None = None
    top_level_priors: tuple = ()
    group_level_priors: tuple = ()
    unit_effects: tuple = ()

    @property
    def hierarchical(self) -> bool:
        """Whether the log prior holds group-level terms (a hierarchy's effect density)."""
        return bool(self.group_level_priors)

    def describe(self) -> str:
        """The structure in one sentence, for reports and ``repr``."""
        parts = [f"global {', '.join(self.global_vars) or 'none'}"]
        if self.local_vars:
            parts.append(f"local {', '.join(self.local_vars)}")
        if self.auxiliaries:
            parts.append(f"non-centred offsets {', '.join(self.auxiliaries)}")
        if self.deterministics:
            parts.append(f"deterministic {', '.join(self.deterministics)}")
        if self.group_level_priors:
            parts.append(
                f"log prior: top-level {', '.join(self.top_level_priors) or 'none'}, "
                f"group-level {', '.join(self.group_level_priors)}"
            )
        return "; ".join(parts)


def model_structure(data, units: Units) -> ModelStructure:
    """The :class:`ModelStructure` of ``data`` (a fit's groups, ``FitGroups``: its posterior
    dims and ``log_prior`` group) with the unit ``units``; for other inputs, the local
    variables only (:func:`local_names`).

    References
    ----------
    Papaspiliopoulos, O., Roberts, G. O. and Sköld, M. (2007). A general framework for the
    parametrization of hierarchical models. Statistical Science 22(1), 59-73 (non-centred
    offsets).
    """
    if not (isinstance(data, FitGroups) and "posterior" in data):
        names = list(getattr(data, "quantity_names", []) or [])
        local = local_names(names, data, units) if names else []
        local_vars = tuple(dict.fromkeys(base_name(n) for n in local))
        global_vars = tuple(v for v in dict.fromkeys(map(base_name, names)) if v not in local_vars)
        sizes = Counter(base_name(n) for n in local)
        effects = tuple(v for v in local_vars if units.grouped and sizes[v] == units.n_units)
        return ModelStructure(global_vars, local_vars, unit_effects=effects)
    posterior = data["posterior"]
    effects = tuple(str(v) for v in posterior.data_vars if units.dim in posterior[v].dims)
    is_local = {
        str(v): bool(set(posterior[v].dims) & units.local_dims) for v in posterior.data_vars
    }
    local_vars = tuple(v for v, here in is_local.items() if here)
    global_vars = tuple(v for v, here in is_local.items() if not here)
    if "log_prior" not in data:
        offsets = _offsets_by_draws(posterior, local_vars)
        return ModelStructure(global_vars, local_vars, offsets, unit_effects=effects)
    log_prior = data["log_prior"]
    terms = [str(v) for v in log_prior.data_vars]
    term_local = {
        t: is_local[t] if t in is_local else bool(set(log_prior[t].dims) & units.local_dims)
        for t in terms
    }
    auxiliaries = tuple(
        v for v in local_vars if v in terms and _standard_normal(posterior[v], log_prior[v])
    )
    return ModelStructure(
        global_vars,
        local_vars,
        auxiliaries,
        tuple(v for v in is_local if v not in terms),
        tuple(t for t in terms if not term_local[t]),
        tuple(t for t in terms if term_local[t]),
        effects,
    )


#: Without a log-prior term, a local variable whose draws pooled over its elements have
#: mean within this of 0 and sd within this of 1, beside another variable over the same
#: dims (the effect it is scaled into), looks like a non-centred offset.
OFFSET_TOLERANCE = 0.25


def _offsets_by_draws(posterior: xr.Dataset, local_vars: tuple) -> tuple:
    """Local variables that look like non-centred offsets from their draws alone."""
    found = []
    for v in local_vars:
        dims = set(posterior[v].dims) - set(SAMPLE_DIMS)
        partners = [
            w for w in local_vars if w != v and set(posterior[w].dims) - set(SAMPLE_DIMS) == dims
        ]
        values = np.asarray(posterior[v].values, dtype=float)
        if not partners or values.size < 2 or not np.all(np.isfinite(values)):
            continue
        if abs(values.mean()) <= OFFSET_TOLERANCE and abs(values.std() - 1) <= OFFSET_TOLERANCE:
            found.append(v)
    return tuple(found)


def _standard_normal(draws: xr.DataArray, term: xr.DataArray) -> bool:
    """Whether ``term`` is ``log N(draws | 0, 1)``, element by element or summed over the
    variable's elements (up to a constant per draw the same for every draw)."""
    z = np.asarray(draws.values, dtype=float)
    values = np.asarray(term.values, dtype=float)
    density = -0.5 * z**2
    if values.shape != z.shape:
        if values.shape != z.shape[:2]:
            return False
        density = density.reshape(*z.shape[:2], -1).sum(axis=2)
    if not np.all(np.isfinite(values)):
        return False
    offset = values - density  # a constant: -log(2 pi) / 2 per element, or 0 if dropped
    spread = np.ptp(offset) if offset.size else np.inf
    return bool(spread <= STANDARD_NORMAL_RTOL * max(1.0, float(np.abs(density).max())))
