"""Pareto diagnostics and smoothing of any Monte Carlo estimate (the posterior package's
``pareto_khat`` / ``pareto_diags`` / ``pareto_smooth``, arviz-stats' ``pareto_khat`` and
``pareto_min_ss``), for the quantities of a fit or for draws given as an array.

References
----------
.. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
   importance sampling. JMLR 25(72).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, check_finite, fail
from bayesij.array.ess import split_relative_ess
from bayesij.array.pareto import pareto_diagnostics, pareto_smooth_columns
from bayesij.data.fit import read_draws

__all__ = ["pareto_khat", "pareto_smooth", "ParetoSmoothed", "TAILS"]

TAILS = ("both", "right", "left")


class ParetoSmoothed(NamedTuple):
    """Draws with Pareto-smoothed tails and their diagnostics.

    Attributes
    ----------
    values : ndarray
        The draws in the input's shape, tails replaced by generalized Pareto quantiles.
    diagnostics : pandas.DataFrame
        As :func:`pareto_khat` returns.
    """

    values: np.ndarray
    diagnostics: pd.DataFrame


def pareto_khat(data, *, quantities=None, tail: str = "both", r_eff=None) -> pd.DataFrame:
    """Pareto k-hat and the diagnostics that go with it, for the draws of each quantity.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or array_like
        A fit (its posterior quantities) or draws: shape (n_draws,), (n_chains, n_draws)
        (as arviz-stats' array functions) or (n_chains, n_draws, n_quantities).
    quantities : str or list of str, optional
        Of a fit: variables or elements (default: all).
    tail : {"both", "right", "left"}, default "both"
        Which tails to fit; "both" reports the larger k-hat.
    r_eff : float or array_like of shape (n_quantities,), optional
        Relative efficiency for the tail length. Default: the relative tail ESS (ArviZ's
        ``ess(method="tail", relative=True)``), as arviz-stats and posterior do.

    Returns
    -------
    pandas.DataFrame
        One row per quantity: ``khat``, ``min_ss`` (draws needed for a reliable estimate),
        ``khat_threshold`` (``1 - 1/log10(S)``), ``convergence_rate`` (relative to a finite
        variance's) and ``diagnosis``.

    Examples
    --------
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).standard_t(2, size=(4, 1000))
    >>> table = pareto_khat(draws)
    >>> float(table["khat"].iloc[0]) > 0.3  # t(2): k = 1/2, a finite mean, no variance
    True

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    draws, names, _ = _draws(data, quantities)
    found = pareto_diagnostics(_stacked(draws), _r_eff(draws, r_eff), _tail(tail))
    return _table(found, names)


def pareto_smooth(data, *, quantities=None, tail: str = "both", r_eff=None) -> ParetoSmoothed:
    """The draws with their tails Pareto-smoothed: the largest (and, ``tail="both"``, the
    smallest) ``M`` draws of each quantity replaced by the fitted generalized Pareto
    quantiles at ``(z - 1/2) / M``, ``M`` as :func:`pareto_khat` chooses it, the order of
    the draws kept (posterior's ``pareto_smooth``).

    Parameters
    ----------
    data, quantities, tail, r_eff
        As :func:`pareto_khat`.

    Returns
    -------
    ParetoSmoothed
        ``values`` in the input's shape (n_draws,), (n_chains, n_draws) or
        (n_chains, n_draws, n_quantities); ``diagnostics`` as :func:`pareto_khat`.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> draws = np.random.default_rng(0).standard_t(2, size=(4, 1000))
    >>> smoothed = bayesij.pareto_smooth(draws)
    >>> smoothed.values.shape, bool(np.abs(smoothed.values).max() <= np.abs(draws).max())
    ((4, 1000), True)
    """
    draws, names, shape = _draws(data, quantities)
    stacked = _stacked(draws)
    r_eff = _r_eff(draws, r_eff)
    smoothed, _ = pareto_smooth_columns(stacked, r_eff, _tail(tail))
    found = pareto_diagnostics(stacked, r_eff, _tail(tail))
    values = smoothed.reshape(draws.shape[0], draws.shape[1], -1).reshape(shape)
    return ParetoSmoothed(values, _table(found, names))


def _tail(tail: str) -> str:
    if tail not in TAILS:
        raise fail("tail", repr(tail), "'both', 'right' or 'left'")
    return tail


def _draws(data, quantities) -> tuple[np.ndarray, list, tuple]:
    """(n_chains, n_draws, n_quantities) draws, their names and the input's shape."""
    array, names, shape = read_draws(data, quantities)
    if names is not None:  # a fit's draws, checked when read
        return array, names, shape
    if array.shape[2] == 0:
        raise fail("data", f"an array of shape {shape}", "draws of at least one quantity")
    if array.shape[0] * array.shape[1] < 10:
        raise fail("data", f"{array.shape[0] * array.shape[1]} draws", "at least 10 draws")
    check_finite(array, "data")
    names = [f"f[{j + 1}]" for j in range(array.shape[2])] if array.shape[2] > 1 else ["f"]
    return array, names, shape


def _stacked(draws: np.ndarray) -> np.ndarray:
    return draws.reshape(-1, draws.shape[2])


def _r_eff(draws: np.ndarray, r_eff) -> np.ndarray:
    n_cols = draws.shape[2]
    if r_eff is None:
        return split_relative_ess(draws, "tail")
    given = as_float_array(r_eff, "r_eff")
    if given.ndim > 1 or given.size not in (1, n_cols):
        raise fail("r_eff", f"shape {given.shape}", f"one value, or one per quantity ({n_cols})")
    values = np.broadcast_to(given.reshape(-1), (n_cols,))
    if not np.all(np.isfinite(values) & (values > 0)):
        raise fail("r_eff", repr(r_eff), "None or positive finite values, one per quantity")
    return values


def _table(found, names) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "khat": found.khat,
            "min_ss": found.min_ss,
            "khat_threshold": found.khat_threshold,
            "convergence_rate": found.convergence_rate,
        },
        index=pd.Index(names, name="quantity"),
    )
    table["diagnosis"] = [_diagnosis(k, found.khat_threshold) for k in found.khat]
    return table


def _diagnosis(khat: float, threshold: float) -> str:
    if not np.isfinite(khat):
        return "no tail to fit (constant tail draws)"
    if khat > 1:
        return "the mean may not exist: no number of draws estimates it"
    if khat > threshold:
        return "more draws needed for a reliable estimate (see min_ss)"
    if khat > 0.5:
        return "reliable, but the variance may be infinite: slow convergence"
    return "reliable"
