"""The one door: every public estimator turns its input into a :class:`Posterior` here.

Accepted inputs, in every form users hold them:

* a :class:`~bayesij.data.posterior.Posterior` (already checked when it was built: used as
  it is);
* an ArviZ ``InferenceData`` or an ``xarray.DataTree`` with a ``log_likelihood`` group (and
  a ``posterior`` group for the quantities), read as xarray without importing ArviZ;
* an ``xarray.Dataset`` of log-likelihood variables or an ``xarray.DataArray`` with dims
  (chain, draw, obs...);
* a NumPy array of shape (n_draws, n_obs) (one chain) or (n_chains, n_draws, n_obs).

The draws x observations matrix is checked once, when the container is built, and is not
copied when it is already float64 with the chains laid out as (chain, draw, obs).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import xarray as xr

from bayesij.array.checks import as_float_array, fail
from bayesij.data.arrays import _posterior_of_arrays
from bayesij.data.inference_data import (
    FitGroups,
    from_inference_data,
    has_groups,
    log_lik_group,
    log_lik_variables,
)
from bayesij.data.lazy import lazy_reader
from bayesij.data.posterior import Posterior

__all__ = [
    "as_posterior",
    "converted",
    "posterior_of_groups",
    "posterior_in_memory",
    "unit_index",
    "node_as_dataset",
    "ACCEPTED",
]

#: The inputs :func:`as_posterior` accepts, in words (for error messages and docstrings).
ACCEPTED = (
    "a bayesij.Posterior, an ArviZ InferenceData or xarray DataTree with a log_likelihood "
    "group, an xarray Dataset or DataArray with dims (chain, draw, obs), or an array of "
    "shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)"
)


def as_posterior(
    data, *, quantities=None, var_name=None, argument: str = "data", need_quantities: bool = False
) -> Posterior:
    """Turn any accepted input into a :class:`Posterior` (see the module docstring).

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, Dataset, DataArray or array_like
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData, DataTree or Dataset (needed when it
        holds several; a list concatenates them).
    quantities : str or list of str, optional
        Keep only these quantities (variable or element names). Inputs that carry no
        posterior draws of quantities (arrays, log-likelihood groups alone) give a container
        without quantities.
    argument : str, default "data"
        Name of the argument, for error messages.
    need_quantities : bool, default False
        Refuse an input without posterior draws of quantities (estimators of quantities:
        influence, IJ, linearity, DIC, AMIP, the audit).

    Returns
    -------
    Posterior

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.random.default_rng(0).normal(-1, 0.1, size=(4, 100, 8))
    >>> post = bayesij.as_posterior(log_lik)  # the checked container of read(log_lik)
    >>> post.n_chains, post.n_obs, post.quantity_names
    (4, 8, [])
    """
    post = _convert(data, var_name, quantities, argument)
    if need_quantities:
        check_has_quantities(post, argument)
    return post


def check_has_quantities(post: Posterior, argument: str = "data") -> None:
    """Refuse a container without quantities (a log-likelihood alone) for an estimator of
    quantities."""
    if not post.quantity_names:
        raise fail(
            argument,
            "no posterior draws of quantities (a log-likelihood alone)",
            "draws of the quantities beside the log-likelihood: a bayesij.Posterior "
            "(bayesij.from_arrays, from_cmdstanpy, from_pystan) or an InferenceData or "
            "DataTree with a posterior group",
        )


def _convert(data, var_name, quantities, argument: str) -> Posterior:
    data = node_as_dataset(data)
    if has_groups(data):
        return posterior_of_groups(FitGroups.of(data), var_name, quantities, argument)
    return posterior_in_memory(data, var_name, quantities, argument)


def converted(data, var_name=None, argument: str = "data") -> tuple[object, str]:
    """What :func:`bayesij.read` keeps of an input, converted once, and what the input was.

    Returns
    -------
    content : FitGroups, LazyArray, LogLikFunction or Posterior
        An InferenceData's or DataTree's groups as Datasets
        (:class:`~bayesij.data.inference_data.FitGroups`); a lazy log-likelihood (dask
        chunks, a function) as its block reader; else the draws in memory as the checked
        :class:`Posterior`.
    kind : str
        The input's type name (a DataTree node holding data alone: ``"Dataset"``, as it
        is read).
    """
    data = node_as_dataset(data)
    kind = type(data).__name__
    if has_groups(data):
        return FitGroups.of(data), kind
    reader = lazy_reader(data, var_name)
    if reader is not None:
        return reader, kind
    return posterior_in_memory(data, var_name, None, argument), kind


def posterior_of_groups(groups: FitGroups, var_name, quantities, argument: str) -> Posterior:
    """The checked container of a fit's groups: the log-likelihood with the posterior's
    draws of ``quantities`` (all by default), or the log-likelihood alone where there is
    no posterior group."""
    if "posterior" in groups:
        return from_inference_data(groups, var_name=var_name, quantities=quantities)
    return _log_lik_only(*log_lik_group(groups, var_name, argument), quantities, argument)


def posterior_in_memory(data, var_name, quantities, argument: str) -> Posterior:
    """The checked container of draws in memory: a Posterior (selected), a Dataset or
    DataArray of log-likelihood variables, or an array of shape (n_draws, n_obs) or
    (n_chains, n_draws, n_obs)."""
    if var_name is not None and not isinstance(data, xr.Dataset):
        raise fail(
            "var_name",
            f"{var_name!r} with {argument} a {type(data).__name__}",
            "var_name=None: a variable name only selects from an InferenceData, DataTree or "
            "Dataset (a bayesij.Posterior or an array holds one log-likelihood)",
        )
    if isinstance(data, Posterior):
        if quantities is not None and not data.quantity_names:
            _refuse_quantities(quantities, argument)
        return data if quantities is None else data.select(quantities)
    if isinstance(data, xr.DataArray):  # one variable: read as a Dataset of it
        data = data.to_dataset(name="log_lik")
    if isinstance(data, xr.Dataset):
        return _log_lik_only(*log_lik_variables(data, var_name), quantities, argument)
    if isinstance(data, (str, bytes, os.PathLike)):
        raise fail(
            argument,
            f"the path {str(data)!r}",
            ACCEPTED,
            "Open the file first (arviz.from_netcdf or xarray.open_datatree).",
        )
    if not _array_like(data):
        raise fail(argument, f"a {type(data).__name__}", ACCEPTED)
    array = as_float_array(data, argument, keep_float32=True)
    if array.ndim not in (2, 3):
        raise fail(
            argument,
            f"an array of shape {array.shape}",
            "a log-likelihood of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)",
        )
    return _log_lik_only(array if array.ndim == 3 else array[None], None, quantities, argument)


def node_as_dataset(data):
    """A DataTree node holding data and no children (``tree["log_likelihood"]``) as the
    Dataset it holds; anything else as it is."""
    return data.to_dataset() if has_groups(data) and _holds_data_alone(data) else data


def _holds_data_alone(node) -> bool:
    return bool(getattr(node, "has_data", False)) and not getattr(node, "children", True)


def _array_like(data) -> bool:
    return isinstance(data, (np.ndarray, list, tuple)) or hasattr(data, "__array__")


def _log_lik_only(values: np.ndarray, labels, quantities, argument: str) -> Posterior:
    """A container of the log-likelihood alone (no quantities)."""
    if quantities is not None:
        _refuse_quantities(quantities, argument)
    n_chains, n_draws = values.shape[:2]
    empty = np.zeros((n_chains, n_draws, 0))
    # An estimator's own passing container: the caller's array is not made read-only.
    return _posterior_of_arrays(empty, values, None, None, labels, None, argument)


def _refuse_quantities(quantities, argument: str):
    raise fail(
        "quantities",
        repr(quantities),
        "no quantities for an input without posterior draws of parameters",
        f"Pass {argument} with a posterior group, or a bayesij.Posterior.",
    )


def unit_index(units: xr.DataArray) -> pd.Index:
    """Unit labels (from :meth:`Posterior.units`) as a pandas index named ``obs`` or
    ``group``."""
    return pd.Index(units.values, name=units.dims[0])
