"""Build a posterior container from NumPy arrays."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesij.array.checks import (
    as_chains,
    as_draws_matrix,
    as_float_array,
    checked_names,
)
from bayesij.data.posterior import Posterior, read_only

__all__ = ["from_arrays", "element_names"]


def element_names(variable: str, shape: tuple[int, ...]) -> list[str]:
    """Stan-style names of the elements of an array variable, row-major, 1-based.

    >>> element_names("Omega", (2, 2))
    ['Omega[1,1]', 'Omega[1,2]', 'Omega[2,1]', 'Omega[2,2]']
    """
    if not shape:
        return [variable]
    return [f"{variable}[{','.join(str(i + 1) for i in index)}]" for index in np.ndindex(*shape)]


def _by_chain(values, argument: str, chain_ids, keep_float32: bool = False) -> np.ndarray:
    """Reshape draws to (n_chains, n_draws, n_columns)."""
    array = as_float_array(values, argument, keep_float32=keep_float32)
    if array.ndim == 3 and chain_ids is None:
        return array
    return as_chains(*as_draws_matrix(array, argument, chain_ids, keep_float32=keep_float32))


def from_arrays(
    quantities,
    log_lik,
    chain_ids=None,
    quantity_names=None,
    obs_names=None,
    groups=None,
    *,
    argument: str = "log_lik",
) -> Posterior:
    """A posterior container from arrays of draws.

    Parameters
    ----------
    quantities : array_like of shape (n_draws, n_quantities) or (n_chains, n_draws, n_quantities)
        Draws of the quantities of interest.
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Pointwise log-likelihood at the same draws.
    chain_ids : array_like of shape (n_draws,), optional
        Chain of each row of 2-D input (every chain the same length; rows of a chain keep
        their order). ``None`` means one chain.
    quantity_names : sequence of str, optional
        Defaults to ``f[1]``, ..., ``f[K]``.
    obs_names : sequence, optional
        Observation ids; defaults to positions 0..N-1.
    groups : array_like of shape (n_obs,) or mapping, optional
        Exchangeable unit of each observation.
    argument : str, default "log_lik"
        Name of the log-likelihood in error messages.

    Returns
    -------
    Posterior
        Holds ``log_lik`` itself, not a copy, when it is float64 laid out as
        (chain, draw, obs) (3-D input, or 2-D input of one chain); the arrays it holds are
        made read-only — the caller's own included, when shared — so that values checked
        once cannot change afterwards (copy an array first if you still need to write to it).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> post = from_arrays(rng.normal(size=(4, 100, 2)), rng.normal(size=(4, 100, 5)))
    >>> post.n_draws, post.n_obs, post.quantity_names
    (400, 5, ['f[1]', 'f[2]'])
    """
    post = _posterior_of_arrays(
        quantities, log_lik, chain_ids, quantity_names, obs_names, groups, argument
    )
    for values in (post.quantities.values, post.log_lik.values):
        read_only(values)  # a container the caller keeps: its checked values stay as checked
    return post


def _posterior_of_arrays(
    quantities, log_lik, chain_ids, quantity_names, obs_names, groups, argument
) -> Posterior:
    """:func:`from_arrays` without making the arrays read-only (for an estimator's own
    passing container, which the caller never sees)."""
    f = _by_chain(quantities, "quantities", chain_ids)
    l = _by_chain(log_lik, argument, chain_ids, keep_float32=True)
    names = checked_names(
        quantity_names, f.shape[2], element_names("f", (f.shape[2],)), "quantity_names"
    )
    obs = checked_names(obs_names, l.shape[2], list(range(l.shape[2])), "obs_names")
    coords = {"chain": np.arange(f.shape[0]), "draw": np.arange(f.shape[1])}
    quantities_da = xr.DataArray(
        f, dims=("chain", "draw", "quantity"), coords={**coords, "quantity": names}
    )
    log_lik_da = xr.DataArray(
        l,
        dims=("chain", "draw", "obs"),
        coords={"chain": np.arange(l.shape[0]), "draw": np.arange(l.shape[1]), "obs": obs},
    )
    return Posterior(quantities_da, log_lik_da, groups, argument)
