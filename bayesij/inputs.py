"""Log-likelihood input accepted by the labelled functions, in every form users hold it.

A :class:`~bayesij.posterior.Posterior`, an ArviZ ``InferenceData`` (read as xarray: its
``log_likelihood`` group, without importing ArviZ), an xarray ``DataArray`` with dims
(chain, draw, obs...), or a NumPy array of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesij._checks import as_draws_matrix, check_log_lik_values, fail
from bayesij.posterior import Posterior

__all__ = ["SAMPLE_DIMS", "sample_values", "log_lik_variables", "log_lik_units", "unit_index"]

SAMPLE_DIMS = ("chain", "draw")


def sample_values(array: xr.DataArray, name: str) -> np.ndarray:
    """Draws of one variable as (chain, draw, elements), elements row-major."""
    missing = [d for d in SAMPLE_DIMS if d not in array.dims]
    if missing:
        raise fail(name, f"dims {array.dims}", "dims starting with ('chain', 'draw')")
    array = array.transpose(*SAMPLE_DIMS, ...)
    return array.values.reshape(array.shape[0], array.shape[1], -1).astype(float)


def _obs_labels(array: xr.DataArray, variable: str, prefix: bool) -> list:
    """Observation ids of a log-likelihood variable from its coordinates."""
    obs_dims = [d for d in array.dims if d not in SAMPLE_DIMS]
    grids = [array[d].values if d in array.coords else np.arange(array.sizes[d])
             for d in obs_dims]
    if len(grids) == 1:
        labels = grids[0].tolist()
    else:
        labels = [",".join(str(g[i]) for g, i in zip(grids, index, strict=True))
                  for index in np.ndindex(*[len(g) for g in grids])]
    if prefix:
        labels = [f"{variable}[{label}]" for label in labels]
    return labels


def log_lik_variables(dataset: xr.Dataset, log_lik=None) -> tuple[np.ndarray, list]:
    """Pointwise log-likelihood of a ``log_likelihood`` Dataset as (chain, draw, obs) + ids.

    Parameters
    ----------
    dataset : xarray.Dataset
        Variables with dims (chain, draw, ...).
    log_lik : str or list of str, optional
        Which variable; needed when there are several. A list concatenates them, with ids
        ``'var[id]'``. Several observation dims are flattened row-major, ids ``'i,j'``.
    """
    available = list(dataset.data_vars)
    if log_lik is None:
        if len(available) != 1:
            raise fail(
                "log_lik",
                f"{len(available)} log-likelihood variables {available}",
                "the name of one of them, or a list of names to concatenate",
            )
        log_lik = available
    names = [log_lik] if isinstance(log_lik, str) else list(log_lik)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise fail("log_lik", f"unknown variable(s) {unknown}", f"names among {available}")
    values = [sample_values(dataset[n], n) for n in names]
    labels = [lab for n in names for lab in _obs_labels(dataset[n], n, len(names) > 1)]
    return np.concatenate(values, axis=2), labels


def _is_inference_data(data) -> bool:
    return callable(getattr(data, "groups", None)) and hasattr(data, "posterior")


def log_lik_units(data, groups=None, log_lik=None) -> tuple[np.ndarray, xr.DataArray]:
    """The log-likelihood of the exchangeable units of ``data`` and their labels.

    Parameters
    ----------
    data : Posterior, InferenceData, DataArray or array_like
        See the module docstring.
    groups : array_like or mapping, optional
        Group of each observation: units become groups (log-likelihoods summed).
    log_lik : str or list of str, optional
        Log-likelihood variable of an InferenceData.

    Returns
    -------
    log_lik : ndarray of shape (n_chains, n_draws, n_units)
    labels : DataArray of dim ``obs`` or ``group``
    """
    if not isinstance(data, Posterior):
        values, obs = _log_lik_values(data, log_lik)
        n_chains, n_draws, n_obs = values.shape
        if n_chains * n_draws < 2:
            raise fail("data", f"{n_chains * n_draws} draw", "at least 2 posterior draws")
        data = Posterior(
            xr.DataArray(np.zeros((n_chains, n_draws, 0)), dims=("chain", "draw", "quantity"),
                         coords={"quantity": np.array([], dtype=str)}),
            xr.DataArray(values, dims=("chain", "draw", "obs"), coords={"obs": obs}),
        )
    return data.units(groups)


def _log_lik_values(data, log_lik) -> tuple[np.ndarray, list]:
    if _is_inference_data(data):
        if "log_likelihood" not in data.groups():
            raise fail("data", f"an InferenceData without a 'log_likelihood' group "
                       f"(groups: {list(data.groups())})", "a log_likelihood group")
        return log_lik_variables(data["log_likelihood"], log_lik)
    if isinstance(data, xr.DataArray):
        values = sample_values(data, "data")
        return values, _obs_labels(data, "", False)
    if isinstance(data, xr.Dataset):
        return log_lik_variables(data, log_lik)
    array = np.asarray(data, dtype=float)
    if array.ndim == 2:
        matrix, _ = as_draws_matrix(array, "data")
        check_log_lik_values(matrix, "data")
        array = matrix[None]
    elif array.ndim != 3:
        raise fail("data", f"an array of shape {array.shape}",
                   "a log-likelihood of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)")
    return array, list(range(array.shape[2]))


def unit_index(units: xr.DataArray) -> pd.Index:
    """The unit labels from :func:`log_lik_units` as a pandas index named ``obs`` or ``group``."""
    return pd.Index(units.values, name=units.dims[0])
