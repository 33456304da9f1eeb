"""How far leaving each observation out moves a posterior or predictive summary: the PSIS
shift of the mean, median, sd, variance or quantiles (arviz-stats 1.3's ``loo_influence``).

The shift of observation ``n`` is ``|E[g | y_-n] - E[g | y]|`` for a summary ``E`` of the
draws ``g``, the left-out value estimated by Pareto-smoothed importance sampling of the
removal. Its first-order version for the mean is the influence score: ``E[g | y_-n] - E[g |
y] ~ -Cov(g, log p(y_n | theta)) = -psi_n`` (:func:`bayesij.influence`); the shift is the
whole change the reweighting finds, so where the two disagree the removal is not linear
(:func:`bayesij.linearity`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.checks import fail
from bayesij.data.fit import as_log_lik_source, predictions_or_fit, read
from bayesij.stats.loo import loo, loo_expectation

__all__ = ["LooShift", "loo_influence", "SHIFT_KINDS"]

SHIFT_KINDS = ("mean", "median", "sd", "var", "quantile", "octiles")
OCTILES = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)
GROUPS = ("posterior_predictive", "posterior")


class LooShift(NamedTuple):
    """:func:`loo_influence`'s answer, unpacked as arviz-stats' ``(shift, khat)``.

    Attributes
    ----------
    shift : pandas.DataFrame
        One row per observation, one column per summarised variable (its elements by
        name, e.g. ``theta[1]``).
    pareto_k : pandas.DataFrame
        The k-hat of each shift's LOO expectation, laid out as ``shift``.

    Examples
    --------
    >>> import numpy as np, xarray as xr, bayesij
    >>> rng = np.random.default_rng(1)
    >>> y, mu = rng.normal(size=10), rng.normal(0, 0.3, size=(2, 300))
    >>> tree = xr.DataTree.from_dict({
    ...     "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
    ...     "log_likelihood": xr.Dataset(
    ...         {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[..., None]) ** 2)}),
    ... })
    >>> shift, pareto_k = bayesij.loo_influence(tree, quantities="mu", group="posterior")
    >>> shift.shape, list(pareto_k.columns)
    ((10, 1), ['mu'])
    """

    shift: pd.DataFrame
    pareto_k: pd.DataFrame


def loo_influence(
    data,
    *,
    quantities=None,
    var_name=None,
    group: str = "posterior_predictive",
    kind: str = "mean",
    standardize: bool = True,
    prob=None,
    convention=None,
) -> LooShift:
    """How far leaving out each observation moves a summary of the draws, by PSIS.

    Parameters
    ----------
    data : InferenceData or DataTree
        The fit: its ``log_likelihood`` and the ``group`` summarised.
    quantities : str or list of str, optional
        With ``group="posterior"``: the variables or elements (every one by default;
        arviz-stats' ``var_names``). With ``"posterior_predictive"``: not used, the
        variable of the log-likelihood's name is each observation's own predictive.
    group : {"posterior_predictive", "posterior"}
        Each observation's predictive draws (its own column) or posterior variables (the
        same draws for every observation).
    kind : {"mean", "median", "sd", "var", "quantile", "octiles"}
        The summary; ``"octiles"`` are the quantiles at 1/8, ..., 7/8.
    standardize : bool, default True
        Divide the shift by the posterior's sd (``mean``; divisor ``S - 1``, as
        arviz-stats), MAD (``median``) or the summary itself (``sd``, ``var``: a relative
        change); quantiles' shifts are the
        mean absolute shift over ``prob``, never standardised.
    prob : float or list of float, optional
        With ``kind="quantile"``: the probabilities.
    var_name : str, optional
        The log-likelihood variable (as :func:`bayesij.loo`; arviz-stats'
        ``log_likelihood_var_name``).
    convention : str or PsisOptions, optional
        As :func:`bayesij.loo`; ``"arviz-stats"`` gives arviz-stats' numbers.

    Returns
    -------
    LooShift
        ``(shift, pareto_k)``, each (n_obs, n_columns).

    Notes
    -----
    Equal to ``arviz_stats.loo_influence`` (1.3) with ``convention="arviz-stats"`` on the
    same fit (``tests/stats/test_loo_influence.py``). For the mean the first-order shift is
    ``|psi_n| / sd`` with ``psi_n = Cov(g, log p(y_n | theta))`` (:func:`bayesij.influence`):
    the two agree where leaving ``n`` out is linear in its weight, and
    :func:`bayesij.linearity` measures how far they part.

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    .. [2] Giordano, R., Broderick, T. and Jordan, M. I. (2019). Covariances, robustness,
       and variational Bayes (influence as a posterior covariance). JMLR 19(51).

    Examples
    --------
    >>> import numpy as np, xarray as xr, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[rng.normal(size=19), 6.0]  # an outlier last
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(20), size=(4, 500))
    >>> tree = xr.DataTree.from_dict({
    ...     "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
    ...     "log_likelihood": xr.Dataset(
    ...         {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[..., None]) ** 2)}),
    ... })
    >>> shift, k = bayesij.loo_influence(tree, quantities="mu", group="posterior")
    >>> int(shift["mu"].to_numpy().argmax())  # the outlier moves mu furthest
    19
    """
    if kind not in SHIFT_KINDS:
        raise fail("kind", repr(kind), f"one of {SHIFT_KINDS}")
    if group not in GROUPS:
        raise fail("group", repr(group), f"one of {GROUPS}")
    if not isinstance(standardize, (bool, np.bool_)):
        raise fail("standardize", repr(standardize), "True or False")
    levels = _levels(kind, prob)
    fit = read(data, var_name=var_name)  # read once: every call below is handed the Fit
    as_log_lik_source(  # the smoothed weights are kept: a lazy log-likelihood is refused here
        fit, whole_matrix={"data": "loo_influence"}
    )
    with warnings.catch_warnings():  # each shift reports its own k-hat
        warnings.simplefilter("ignore")
        smoothed = loo(fit, convention=convention, save_psis=True)
    shifts, khats = {}, {}
    for name, values in _summarised(fit, quantities, group, var_name, smoothed.n_units):
        expected = loo_expectation(
            fit,
            values,
            var_name=var_name,
            kind="quantile" if levels else kind,
            prob=levels or None,
            convention=convention,
            psis=smoothed,
        )
        shifts[name], khats[name] = _shift(values, expected, kind, levels, bool(standardize))
    index = smoothed.pointwise.index
    return LooShift(pd.DataFrame(shifts, index=index), pd.DataFrame(khats, index=index))


def _levels(kind: str, prob) -> list:
    """The probabilities of a quantile kind ([] for the others; checked by
    :func:`bayesij.loo_expectation`)."""
    if kind == "octiles":
        return list(OCTILES)
    if kind != "quantile":
        return []
    if prob is None:
        raise fail("prob", "None with kind='quantile'", "a probability or a list of them")
    return list(np.atleast_1d(prob))


def _summarised(fit, quantities, group: str, var_name, n_obs: int):
    """``(name, values (n_chains, n_draws, n_obs))`` of each column summarised: the
    predictive variable, or each posterior element repeated for every observation."""
    if group == "posterior_predictive":
        values = np.asarray(predictions_or_fit(fit, None, var_name, "data"), dtype=float)
        name = var_name or next(iter(fit.group("log_likelihood").data_vars))
        yield name, values.reshape(*values.shape[:2], -1)
        return
    names = [quantities] if isinstance(quantities, str) else quantities
    draws, labels = fit.posterior_draws(names)
    for k, label in enumerate(labels):
        yield label, np.broadcast_to(draws[..., k : k + 1], (*draws.shape[:2], n_obs))


def _shift(values, expected: pd.DataFrame, kind: str, levels: list, standardize: bool):
    """Each observation's shift (n_obs,) and its k-hat (n_obs,)."""
    flat = values.reshape(-1, values.shape[-1])
    if levels:
        full = np.quantile(flat, levels, axis=0)  # (P, n_obs)
        left_out = expected["value"].to_numpy().reshape(flat.shape[1], -1).T
        shift = np.abs(left_out - full).mean(axis=0)
        k = expected["pareto_k"].to_numpy().reshape(flat.shape[1], -1)[:, 0]
        return shift, k
    full, scale = _summary(flat, kind)
    shift = np.abs(expected["value"].to_numpy() - full)
    if standardize:
        with np.errstate(divide="ignore", invalid="ignore"):
            shift = shift / scale
    return shift, expected["pareto_k"].to_numpy()


def _summary(flat: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The summary of each column of draws (S, n) and the scale that standardises it."""
    if kind == "mean":
        return flat.mean(axis=0), flat.std(axis=0, ddof=1)
    if kind == "median":
        median = np.median(flat, axis=0)
        return median, np.median(np.abs(flat - median), axis=0)
    spread = flat.var(axis=0, ddof=1) if kind == "var" else flat.std(axis=0, ddof=1)
    return spread, spread
