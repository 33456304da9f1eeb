"""Split flat Stan output columns (``'beta[1]'``, ``'log_lik[3]'``) into quantities and log-lik."""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.posterior import base_name, select_names

__all__ = ["split_columns"]


def _index_label(name: str):
    """The observation id of a log-lik element: ``'log_lik[3]' -> 3``, ``'ll[2,1]' -> '2,1'``."""
    inside = name[len(base_name(name)) + 1 : -1]
    return int(inside) if inside.isdigit() else inside


def split_columns(
    draws: np.ndarray, columns: list[str], log_lik: str, quantities
) -> tuple[np.ndarray, list[str], np.ndarray, list]:
    """Pick the quantity columns and the log-likelihood columns of flat Stan draws.

    Parameters
    ----------
    draws : ndarray of shape (n_chains, n_draws, n_columns)
    columns : list of str
        Stan-style column names, ``'name'`` or ``'name[i,j]'``.
    log_lik : str
        Variable holding the pointwise log-likelihood.
    quantities : str, list of str or None
        Requested quantities; ``None`` means every column that is neither a sampler
        diagnostic (``'..__'``) nor the log-likelihood.

    Returns
    -------
    quantity_values, quantity_names, log_lik_values, obs_ids
    """
    ll_columns = [i for i, c in enumerate(columns) if base_name(c) == log_lik]
    if not ll_columns:
        variables = sorted({base_name(c) for c in columns if not c.endswith("__")})
        raise fail(
            "log_lik",
            f"no variable named {log_lik!r} among {variables}",
            "the name of the generated quantity holding the pointwise log-likelihood",
            "Add 'vector[N] log_lik;' to generated quantities, or pass log_lik=NAME.",
        )
    candidates = [c for c in columns if not c.endswith("__") and base_name(c) != log_lik]
    names = candidates if quantities is None else select_names(candidates, quantities)
    if not names:
        raise fail("quantities", "no quantity columns", "at least one quantity")
    position = {c: i for i, c in enumerate(columns)}
    obs = [_index_label(columns[i]) for i in ll_columns]
    return (
        draws[:, :, [position[n] for n in names]],
        names,
        draws[:, :, ll_columns],
        obs,
    )
