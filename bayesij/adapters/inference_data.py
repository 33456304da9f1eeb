"""Build a posterior container from an ArviZ ``InferenceData``."""

from __future__ import annotations

import numpy as np

from bayesij._checks import fail
from bayesij.adapters.arrays import element_names, from_arrays
from bayesij.inputs import SAMPLE_DIMS, log_lik_variables, sample_values
from bayesij.posterior import Posterior, base_name, select_names

__all__ = ["from_inference_data", "flatten_variables"]


def _group(idata, name: str, fix: str):
    if name not in getattr(idata, "groups", lambda: [])():
        raise fail("idata", f"no {name!r} group (groups: {list(idata.groups())})",
                   f"an InferenceData with a {name!r} group", fix)
    return idata[name]


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
        array = dataset[variable]
        shape = tuple(size for dim, size in array.sizes.items() if dim not in SAMPLE_DIMS)
        blocks.append(sample_values(dataset[variable], variable))
        names.extend(element_names(variable, shape))
    return np.concatenate(blocks, axis=2), names


def _log_lik(idata, log_lik) -> tuple[np.ndarray, list]:
    group = _group(
        idata, "log_likelihood",
        "Store the pointwise log-likelihood when converting the fit (e.g. "
        "az.from_cmdstanpy(fit, log_likelihood='log_lik')).",
    )
    return log_lik_variables(group, log_lik)


def from_inference_data(idata, log_lik=None, quantities=None, groups=None) -> Posterior:
    """A posterior container from an ArviZ ``InferenceData``.

    Parameters
    ----------
    idata : arviz.InferenceData
        With a ``posterior`` and a ``log_likelihood`` group over the same chains and draws.
    log_lik : str or list of str, optional
        Variable of the ``log_likelihood`` group. Needed when it holds several; a list
        concatenates them, with observation ids ``'var[id]'``. A variable with several
        observation dims is flattened row-major, with ids ``'i,j'`` from the coordinates.
    quantities : str or list of str, optional
        Posterior variables (``'beta'``: all its elements) or elements (``'beta[1]'``).
        Default: every posterior variable. Array elements get Stan-style 1-based names
        (``'Omega[1,2]'``), row-major.
    groups : array_like of shape (n_obs,) or mapping, optional
        Exchangeable unit of each observation.

    Returns
    -------
    Posterior
        Observation ids are the coordinate values of the observation dim.

    Examples
    --------
    >>> import arviz as az  # doctest: +SKIP
    >>> post = from_inference_data(az.load_arviz_data("centered_eight"))  # doctest: +SKIP
    >>> post.quantity_names[:3]  # doctest: +SKIP
    ['mu', 'theta[1]', 'theta[2]']
    """
    posterior = _group(idata, "posterior", "")
    variables = list(posterior.data_vars)
    if quantities is None:
        wanted = variables
    else:
        requested = [quantities] if isinstance(quantities, str) else list(quantities)
        wanted = [v for v in variables if v in {base_name(r) for r in requested}]
        if not wanted:
            select_names(variables, requested)  # raises with the list of variables
    values, names = flatten_variables(posterior, wanted)
    if quantities is not None:
        keep = select_names(names, quantities)
        values = values[:, :, [names.index(n) for n in keep]]
        names = keep
    log_lik_values, obs = _log_lik(idata, log_lik)
    if log_lik_values.shape[:2] != values.shape[:2]:
        raise fail(
            "idata",
            f"log_likelihood draws of shape {log_lik_values.shape[:2]} and posterior draws "
            f"of shape {values.shape[:2]}",
            "the same (chain, draw) in both groups",
        )
    return from_arrays(values, log_lik_values, quantity_names=names, obs_names=obs,
                       groups=groups)
