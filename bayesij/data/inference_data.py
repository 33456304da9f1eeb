"""Read ArviZ ``InferenceData`` (0.23) and ``xarray.DataTree`` (ArviZ 1.x, PyMC 6,
``xarray.open_datatree``) alike, as xarray, without importing ArviZ."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping

import numpy as np
import xarray as xr

from bayesij.array.checks import as_float_array, check_finite, check_labels, fail
from bayesij.data.arrays import _posterior_of_arrays
from bayesij.data.posterior import Posterior, base_name, select_names

__all__ = [
    "from_inference_data",
    "flatten_variables",
    "labelled_names",
    "posterior_draws",
    "selected_draws",
    "log_lik_variables",
    "sample_values",
    "FitGroups",
    "has_groups",
    "observed_of_fit",
    "predictions_of_fit",
    "log_lik_group",
    "SAMPLE_DIMS",
]

SAMPLE_DIMS = ("chain", "draw")


class FitGroups(Mapping):
    """The groups of an InferenceData or a DataTree, each as an xarray Dataset: the one form
    :func:`bayesij.read` keeps of either (the container itself is not kept).

    A mapping from group name (``"posterior"``, ``"log_likelihood"``, ...; a DataTree's
    paths without their leading ``/``) to the group's Dataset; its values are xarray's,
    not copied (a file opened lazily stays lazy).
    """

    __slots__ = ("_datasets",)

    def __init__(self, datasets: Mapping[str, xr.Dataset]) -> None:
        # A dict of its own, never handed out (a Mapping has no way to change it); not a
        # mappingproxy, which cannot be pickled (a Fit goes to worker processes).
        self._datasets = dict(datasets)

    @classmethod
    def of(cls, data) -> FitGroups:
        """The groups of an InferenceData (``groups()``) or a DataTree (``groups``: paths,
        each node as its Dataset); a FitGroups as it is."""
        if isinstance(data, FitGroups):
            return data
        listed = data.groups() if callable(data.groups) else data.groups
        names = [str(name).strip("/") for name in listed if str(name).strip("/")]
        return cls({name: _as_dataset(data[name]) for name in names})

    def __getitem__(self, name: str) -> xr.Dataset:
        return self._datasets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._datasets)

    def __len__(self) -> int:
        return len(self._datasets)

    def __repr__(self) -> str:
        return f"FitGroups({', '.join(self._datasets)})"


def has_groups(data) -> bool:
    """Whether ``data`` is an InferenceData or a DataTree (an object with named groups; a
    :class:`Posterior`'s ``groups`` are observation groups, not containers), or the
    :class:`FitGroups` read of one."""
    if isinstance(data, FitGroups):
        return True
    return hasattr(data, "groups") and not isinstance(data, (xr.Dataset, xr.DataArray, Posterior))


def _as_dataset(group) -> xr.Dataset:
    """A group (a Dataset, or a DataTree node) as a Dataset."""
    return group.to_dataset() if hasattr(group, "to_dataset") else group


def _group(groups: FitGroups, name: str, fix: str, argument: str = "idata") -> xr.Dataset:
    """The group ``name`` of a fit's groups, refused (naming the groups there are, and
    ``fix``) when missing."""
    if name not in groups:
        raise fail(
            argument,
            f"no {name!r} group (groups: {list(groups)})",
            f"an InferenceData or DataTree with a {name!r} group",
            fix,
        )
    return groups[name]


def sample_values(array: xr.DataArray, name: str, *, keep_float32: bool = False) -> np.ndarray:
    """Draws of one variable as (chain, draw, elements), elements row-major (float32 kept
    as it is with ``keep_float32``, for the log-likelihood)."""
    missing = [d for d in SAMPLE_DIMS if d not in array.dims]
    if missing:
        raise fail(name, f"dims {array.dims}", "dims starting with ('chain', 'draw')")
    array = array.transpose(*SAMPLE_DIMS, ...)
    # No copy for float64 values already laid out as (chain, draw, ...).
    values = as_float_array(array.values, name, keep_float32=keep_float32)
    return values.reshape(array.shape[0], array.shape[1], -1)


def _obs_labels(array: xr.DataArray, variable: str, prefix: bool) -> list:
    """Observation ids of a log-likelihood variable from its coordinates."""
    obs_dims = [d for d in array.dims if d not in SAMPLE_DIMS]
    grids = [array[d].values if d in array.coords else np.arange(array.sizes[d]) for d in obs_dims]
    if len(grids) == 1:
        labels = grids[0].tolist()
        described = _described_labels(array, obs_dims[0])
        if described is not None:
            labels = described
    else:
        labels = [
            ",".join(str(g[i]) for g, i in zip(grids, index, strict=True))
            for index in np.ndindex(*[len(g) for g in grids])
        ]
    if prefix:
        labels = [f"{variable}[{label}]" for label in labels]
    return labels


def _described_labels(array: xr.DataArray, dim: str) -> list | None:
    """Labels from the other coordinates along the observations (``'General Motors 1935'``
    from ``firm`` and ``year``) when the dim's own labels are ArviZ's default 0..n-1."""
    own = np.asarray(array[dim].values) if dim in array.coords else None
    if own is not None and not (
        own.dtype.kind in "iu" and np.array_equal(own, np.arange(own.size))
    ):
        return None
    others = [c for name, c in array.coords.items() if name != dim and c.dims == (dim,)]
    if not others:
        return None
    labels = [" ".join(str(c.values[i]) for c in others) for i in range(array.sizes[dim])]
    return labels if len(set(labels)) == len(labels) else None


def log_lik_variables(dataset: xr.Dataset, var_name=None) -> tuple[np.ndarray, list]:
    """Pointwise log-likelihood of a ``log_likelihood`` Dataset as (chain, draw, obs) + ids.

    Parameters
    ----------
    dataset : xarray.Dataset
        Variables with dims (chain, draw, ...).
    var_name : str or list of str, optional
        Which variable; needed when there are several. A list concatenates them, with ids
        ``'var[id]'``. Several observation dims are flattened row-major, ids ``'i,j'``.
    """
    available = list(dataset.data_vars)
    if var_name is None:
        if len(available) != 1:
            raise fail(
                "var_name",
                f"{len(available)} log-likelihood variables {available}",
                "the name of one of them, or a list of names to concatenate",
            )
        var_name = available
    names = check_labels(var_name, "var_name")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise fail("var_name", f"unknown variable(s) {unknown}", f"names among {available}")
    labels = [lab for n in names for lab in _obs_labels(dataset[n], n, len(names) > 1)]
    values = [sample_values(dataset[n], n, keep_float32=True) for n in names]
    # One variable's values as they are (no copy of the matrix when already float, laid
    # out as (chain, draw, obs)); several concatenated.
    return (values[0] if len(values) == 1 else np.concatenate(values, axis=2)), labels


def flatten_variables(dataset, variables) -> tuple[np.ndarray, list[str]]:
    """Stack variables of a posterior Dataset into (chain, draw, quantity) with Stan names.

    Parameters
    ----------
    dataset : xarray.Dataset
        With dims (chain, draw, ...) for each variable.
    variables : list of str
        Variable names to flatten (each element gets a name such as ``'Omega[1,2]'``).

    Returns
    -------
    values : ndarray of shape (n_chains, n_draws, n_quantities)
    names : list of str
    """
    blocks, names = [], []
    for variable in variables:
        blocks.append(sample_values(dataset[variable], variable))
        names.extend(labelled_names(variable, dataset[variable]))
    return np.concatenate(blocks, axis=2), names


def labelled_names(variable: str, array: xr.DataArray) -> list[str]:
    """Element names of a variable from its coordinate labels, row-major.

    A dim with coordinate labels names its elements by them (``'a[General Motors]'``,
    ``'b[value]'``, ``'c[1935]'``); a dim without, or with the default labels 0..n-1 that
    ArviZ and PyMC give unlabelled dims, by Stan-style 1-based positions (``'theta[1]'``).
    """
    dims = [d for d in array.dims if d not in SAMPLE_DIMS]
    if not dims:
        return [variable]
    grids = [_dim_labels(array, dim) for dim in dims]
    return [f"{variable}[{','.join(parts)}]" for parts in itertools.product(*grids)]


def _dim_labels(array: xr.DataArray, dim: str) -> list[str]:
    size = array.sizes[dim]
    if dim in array.coords:
        values = np.asarray(array[dim].values)
        default = values.dtype.kind in "iu" and np.array_equal(values, np.arange(size))
        if not default:
            return [str(v) for v in values.tolist()]
    return [str(i + 1) for i in range(size)]


def log_lik_group(
    groups: FitGroups, var_name=None, argument: str = "idata"
) -> tuple[np.ndarray, list]:
    """The ``log_likelihood`` group's values (chain, draw, obs) and observation ids."""
    return log_lik_variables(_log_lik_dataset(groups, argument), var_name)


def _log_lik_dataset(groups: FitGroups, argument: str) -> xr.Dataset:
    return _group(
        groups,
        "log_likelihood",
        "Store the pointwise log-likelihood when converting the fit (e.g. "
        "az.from_cmdstanpy(fit, log_likelihood='log_lik'), or "
        "pm.compute_log_likelihood(idata)).",
        argument,
    )


def aligned_draws(dataset: xr.Dataset, reference: xr.Dataset, group: str) -> xr.Dataset:
    """``dataset``'s draws in the (chain, draw) order of ``reference``'s, paired by their
    labels, not their positions; groups whose chains or draws differ are refused."""
    for dim in SAMPLE_DIMS:
        if dim not in dataset.coords or dim not in reference.coords:
            continue
        own, wanted = dataset[dim].values, reference[dim].values
        pairing = _label_pairing(own, wanted)
        if pairing == "same":
            continue
        if pairing.startswith("repeated"):
            labels, where = (own, group) if pairing == "repeated own" else (wanted, "posterior")
            raise fail(
                "idata",
                f"repeated {dim} labels in the {where} group ({_labels(labels)}) while "
                "the two groups' labels differ",
                f"unique {dim} labels (draws are paired by label), or the same labels in "
                "the same order in both groups",
            )
        if pairing == "differ":
            raise fail(
                "idata",
                f"{group} {dim}s {_labels(own)} while the posterior's are {_labels(wanted)}",
                f"the same {dim} labels in both groups (draws are paired by label)",
            )
        dataset = dataset.sel({dim: wanted})
    return dataset


def in_observation_order(variable: xr.DataArray, reference: xr.DataArray, argument: str):
    """``variable`` with its observation dims (its dims other than chain and draw) in the
    order of ``reference``'s, the log-likelihood variable's, and their labels paired with
    its where both have them: flattened row-major, the two then pair element by element,
    whichever order the fit stored them in. A variable over other dims than the
    reference's is returned as it is (read by position); labels that differ from the
    reference's are refused, naming ``argument``."""
    obs = [d for d in reference.dims if d not in SAMPLE_DIMS]
    own = [d for d in variable.dims if d not in SAMPLE_DIMS]
    if set(own) != set(obs):
        return variable
    if own != obs:
        variable = variable.transpose(*[d for d in variable.dims if d in SAMPLE_DIMS], *obs)
    for dim in obs:
        if dim not in variable.coords or dim not in reference.coords:
            continue
        mine, wanted = variable[dim].values, reference[dim].values
        pairing = _label_pairing(mine, wanted)
        if pairing == "same":
            continue
        if pairing != "reorder":
            raise fail(
                argument,
                f"{dim} labels {_labels(mine)} while the log-likelihood's are {_labels(wanted)}",
                f"the log-likelihood's {dim} labels (observations are paired by label)",
            )
        variable = variable.sel({dim: wanted})
    return variable


def _label_pairing(own: np.ndarray, wanted: np.ndarray) -> str:
    """How labels ``own`` pair with ``wanted``: ``"same"`` (equal, in order),
    ``"reorder"`` (unique, the same set: select ``wanted`` from ``own``), ``"repeated
    own"`` / ``"repeated wanted"`` (a label twice: no pairing) or ``"differ"``."""
    if np.array_equal(own, wanted):
        return "same"
    for labels, which in ((own, "own"), (wanted, "wanted")):
        if len(set(labels.tolist())) != len(labels):
            return f"repeated {which}"
    if len(own) != len(wanted) or set(own.tolist()) != set(wanted.tolist()):
        return "differ"
    return "reorder"


def _labels(values: np.ndarray) -> str:
    shown = values.tolist()
    return str(shown) if len(shown) <= 6 else f"[{shown[0]}, {shown[1]}, ..., {shown[-1]}]"


def selected_draws(posterior: xr.Dataset, quantities=None) -> tuple[np.ndarray, list[str]]:
    """(n_chains, n_draws, K) draws of the posterior Dataset's ``quantities`` (variables or
    elements, in the order asked; default every variable) and their element names. Only
    the variables asked for are read."""
    variables = list(posterior.data_vars)
    if quantities is None:
        return flatten_variables(posterior, variables)
    requested = [quantities] if isinstance(quantities, str) else list(quantities)
    wanted = [v for v in variables if v in {base_name(r) for r in requested}]
    if not wanted:
        select_names(variables, requested)  # raises with the list of variables
    values, names = flatten_variables(posterior, wanted)
    keep = select_names(names, quantities)
    return values[:, :, [names.index(n) for n in keep]], keep


def posterior_draws(data, quantities=None, argument: str = "data") -> tuple[np.ndarray, list]:
    """Draws of the quantities of a Posterior, or of the posterior group of an
    InferenceData / DataTree (no log-likelihood needed), checked finite: (n_chains,
    n_draws, K) and their names."""
    if isinstance(data, Posterior):
        post = data if quantities is None else data.select(quantities)
        return post.quantities.values, post.quantity_names
    posterior = _group(data, "posterior", "Pass a fit with a posterior group.", argument)
    values, names = selected_draws(posterior, quantities)
    check_finite(values, argument)
    return values, names


def log_lik_of_fit(groups: FitGroups, var_name=None, argument: str = "data") -> Posterior:
    """The ``log_likelihood`` group of a fit as a container without quantities, its draws
    paired by label with the posterior's (whose variables are not read)."""
    posterior = _group(groups, "posterior", "", argument)
    shape = tuple(posterior.sizes.get(dim, 0) for dim in SAMPLE_DIMS)
    values, obs = _paired_log_lik(groups, posterior, var_name, shape, argument)
    empty = np.zeros((*values.shape[:2], 0))
    return _container_of_fit(empty, values, None, obs, None, argument)


def _paired_log_lik(groups, posterior, var_name, shape: tuple, argument: str):
    """The ``log_likelihood`` group's values (chain, draw, obs), draws paired by label with
    ``posterior``'s, and their ids; refused unless the draws are ``shape``."""
    log_lik = aligned_draws(_log_lik_dataset(groups, argument), posterior, "log_likelihood")
    values, obs = log_lik_variables(log_lik, var_name)
    if values.shape[:2] != tuple(shape):
        raise fail(
            argument,
            f"log_likelihood draws of shape {values.shape[:2]} and posterior draws of shape "
            f"{tuple(shape)}",
            "the same (chain, draw) in both groups",
        )
    return values, obs


def from_inference_data(idata, var_name=None, quantities=None, groups=None) -> Posterior:
    """A posterior container from an ArviZ ``InferenceData`` or an ``xarray.DataTree``.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        With a ``posterior`` and a ``log_likelihood`` group over the same chains and draws
        (ArviZ 0.23 ``InferenceData``; ArviZ 1.x and PyMC 6 return a ``DataTree``).
    var_name : str or list of str, optional
        Variable of the ``log_likelihood`` group. Needed when it holds several; a list
        concatenates them, with observation ids ``'var[id]'``. A variable with several
        observation dims is flattened row-major, with ids ``'i,j'`` from the coordinates.
    quantities : str or list of str, optional
        Posterior variables (``'beta'``: all its elements) or elements (``'beta[1]'``).
        Default: every posterior variable. Array elements are named by their coordinate
        labels (``'a[General Motors]'``), or by Stan-style 1-based positions
        (``'Omega[1,2]'``) where a dim has no labels (or ArviZ's default 0..n-1), row-major;
        an element of a labelled variable can also be selected by its 1-based position.
    groups : array_like of shape (n_obs,) or mapping, optional
        Exchangeable unit of each observation.

    Returns
    -------
    Posterior
        Observation ids are the coordinate values of the observation dim.

    Examples
    --------
    >>> import arviz as az
    >>> post = from_inference_data(az.load_arviz_data("centered_eight"))  # ships with ArviZ
    >>> post.quantity_names[:3]  # ArviZ's labels
    ['mu', 'theta[Choate]', 'theta[Deerfield]']
    """
    if isinstance(idata, (str, bytes, os.PathLike)):
        raise fail(
            "idata",
            f"the path {str(idata)!r}",
            "an InferenceData or DataTree",
            "Open the file first: xarray.open_datatree(path) or arviz.from_netcdf(path).",
        )
    if not has_groups(idata):
        raise fail("idata", f"a {type(idata).__name__}", "an InferenceData or DataTree")
    idata = FitGroups.of(idata)
    posterior = _group(idata, "posterior", "")
    values, names = selected_draws(posterior, quantities)
    log_lik_values, obs = _paired_log_lik(idata, posterior, var_name, values.shape[:2], "idata")
    return _container_of_fit(values, log_lik_values, names, obs, groups, "idata")


def _container_of_fit(quantities, log_lik, names, obs, groups, argument: str) -> Posterior:
    """The container of draws read from a fit's groups. A variable laid out as (chain,
    draw, ...) in float is read without a copy (a copy of the log-likelihood doubled the
    peak memory of every estimator given a saved fit), so the container's own views are
    made read-only, not the caller's arrays they show: the fit stays as writeable as it
    was, and what the checks passed cannot be changed through the container."""
    post = _posterior_of_arrays(quantities, log_lik, None, names, obs, groups, argument)
    for array in (post.quantities, post.log_lik):
        array.values.flags.writeable = False
    return post


def observed_of_fit(groups: FitGroups, var_name=None, argument: str = "y") -> np.ndarray:
    """A fit's ``observed_data`` variable of the log-likelihood's name (``var_name``, or
    the one log-likelihood variable), flattened row-major as the log-likelihood's
    observations are: what arviz-stats reads."""
    dataset, name = _fit_variable(groups, "observed_data", var_name, argument)
    ordered = in_observation_order(dataset[name], _log_lik_dataset(groups, "data")[name], argument)
    return as_float_array(ordered.values, argument).reshape(-1)


def predictions_of_fit(groups: FitGroups, var_name=None, argument: str = "y_pred") -> np.ndarray:
    """A fit's ``posterior_predictive`` variable of the log-likelihood's name, (chain,
    draw, obs), its draws paired by label with the log-likelihood's."""
    dataset, name = _fit_variable(groups, "posterior_predictive", var_name, argument)
    log_lik = _log_lik_dataset(groups, "data")
    paired = aligned_draws(dataset, log_lik, "posterior_predictive")
    return sample_values(in_observation_order(paired[name], log_lik[name], argument), argument)


def _fit_variable(groups: FitGroups, group: str, var_name, argument: str) -> tuple:
    """The ``group`` of a fit and the name of its variable that goes with the
    log-likelihood; a clear error where there is no group or no such variable."""
    if var_name is None:
        log_lik_names = list(_log_lik_dataset(groups, "data").data_vars)
        if len(log_lik_names) != 1:
            raise fail(
                "var_name",
                f"{len(log_lik_names)} log-likelihood variables {log_lik_names}",
                f"the one whose {group} values to read (or {argument}= given)",
            )
        var_name = log_lik_names[0]
    if not isinstance(var_name, str):
        raise fail(
            "var_name",
            f"{var_name!r}",
            f"one variable name to read {argument} from the {group!r} group (or {argument}= given)",
        )
    dataset = _group(groups, group, f"Pass {argument}= explicitly.", "data")
    if var_name not in dataset.data_vars:
        raise fail(
            "data",
            f"no variable {var_name!r} in the {group!r} group "
            f"(variables: {list(dataset.data_vars)})",
            f"the log-likelihood's variable {var_name!r} there, or {argument}= given",
        )
    return dataset, var_name


def fit_groups(values: dict, group: str, argument: str = "predictions") -> dict | None:
    """Each value's ``group`` as a Dataset when the values are fits (InferenceData or
    DataTree), None when none is; an error naming the model where some are and some are
    not, or where a fit lacks the group."""
    if not any(has_groups(value) for value in values.values()):
        return None
    datasets = {}
    for name, value in values.items():
        groups = FitGroups.of(value) if has_groups(value) else None
        if groups is None or group not in groups:
            raise fail(
                f"{argument}[{name!r}]",
                f"a {type(value).__name__} without a {group!r} group"
                if groups is not None
                else f"a {type(value).__name__} beside fits",
                f"every model an InferenceData or DataTree with a {group!r} group",
            )
        datasets[name] = groups[group]
    return datasets


def optional_group(fit, group: str) -> xr.Dataset | None:
    """A fit's ``group`` as a Dataset, or None where it has none (or is no fit)."""
    if not has_groups(fit):
        return None
    return FitGroups.of(fit).get(group)
