"""The groups' log-likelihoods with their own effects integrated out, from the model's density.

A hierarchy's log-likelihood summed over a group's observations is conditional on that
group's own effect: leave-one-group-out PSIS over it reweights draws in which the effect was
fitted to the group, and k-hat is high for most groups. With the model at hand
(:class:`bayesij.refit.PyMCDensity`), the effect is integrated out of each group's term
(adaptive Gauss-Hermite quadrature at every draw): PSIS over those terms estimates the same
``log p(y_g | y_-g)`` with the group's effect drawn from its population, the IJ over them
approximates the cluster bootstrap (Merkle, Furr & Rabe-Hesketh 2019).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesij.array.checks import as_float_array, fail
from bayesij.data.fit import read
from bayesij.data.structure import dim_levels

__all__ = ["group_terms", "integrated_terms", "marginal_columns"]


def integrated_terms(fit, density):
    """Each unit's log-likelihood with its own effect integrated out, by ``density``'s
    ``group_log_lik(data, variable)``, over the first of the fit's unit effects
    (``fit.structure.unit_effects``) it can integrate (one unbounded element per unit).

    Returns
    -------
    (xarray.DataArray of shape (chain, draw, unit), str), or (None, None) when ``density``
    has no ``group_log_lik`` or integrates none of the effects.
    """
    integrate = getattr(density, "group_log_lik", None)
    if not callable(integrate):
        return None, None
    for variable in fit.structure.unit_effects:
        try:
            return integrate(fit.data, variable), variable
        except ValueError:
            continue
    return None, None


def group_terms(data, density, index: pd.Index, *, groups=None, var_name=None):
    """The integrated terms of the fit's groups ``index`` (a LOO result's units), labelled
    by them, and the variable integrated out (:func:`integrated_terms`); refused, naming
    ``density``, for a fit whose units are its observations or an effect none integrates.

    Returns
    -------
    (xarray.DataArray of shape (chain, draw, len(index)), str)
    """
    fit = read(data, groups=groups, var_name=var_name)
    if not fit.units.grouped:
        raise fail(
            "density",
            "a fit whose units are its observations (no group effect to integrate)",
            "a grouped fit: groups= or a group index saved in the fit",
        )
    terms, variable = integrated_terms(fit, density)
    if terms is None:
        raise fail(
            "density",
            f"{type(density).__name__} integrating none of the unit effects "
            f"{list(fit.structure.unit_effects)}",
            "a density with group_log_lik (refit.PyMCDensity) and a free vector variable of "
            "one unbounded element per group",
        )
    levels = dim_levels(fit.data, fit.units.dim) if fit.units.dim else None
    values = marginal_columns(terms, list(index), levels)
    name = index.name or "unit"
    return xr.DataArray(values, dims=("chain", "draw", name), coords={name: index}), variable


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
