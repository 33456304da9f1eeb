"""Hierarchical stacking: model weights that vary with the observations' covariates or
groups (Yao, Pirš, Vehtari & Gelman 2022), from the models' pointwise LOO log predictive
densities."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, check_finite, check_real, fail
from bayesij.array.model_weights import crps_score, hierarchical_stacking_weights, log_score
from bayesij.stats.compare import pointwise_table
from bayesij.stats.score_stacking import mixture_terms

__all__ = ["HierarchicalStacking", "hierarchical_stacking"]


class HierarchicalStacking(NamedTuple):
    """Observation-specific stacking weights.

    Attributes
    ----------
    weights : pandas.DataFrame
        One row per observation (the results' units), one column per model; rows sum to 1.
    intercepts : pandas.Series
        The weights' common logits ``mu_k`` against the last model (0).
    effects : pandas.DataFrame
        Each input's effect on each model's logit (rows: models but the last; columns:
        the standardised covariates and the groups).
    score : float
        The stacked mixture's summed LOO score: ``sum_n log sum_k w_nk exp(lpd_nk)``, or
        the CRPS negated (``kind="crps"``).
    """

    weights: pd.DataFrame
    intercepts: pd.Series
    effects: pd.DataFrame
    score: float


def hierarchical_stacking(
    results,
    covariates=None,
    groups=None,
    *,
    prior_scale: float = 1.0,
    intercept_scale: float = 10.0,
    kind: str = "log",
    y=None,
    y_pred=None,
    var_name=None,
    convention=None,
) -> HierarchicalStacking:
    """Stacking weights that depend on where an observation is (Yao et al. 2022): the
    models' mixture weights ``w_n = softmax(mu + beta x_n)`` vary with the observation's
    covariates ``x_n`` and group, fitted to the models' pointwise LOO log predictive
    densities, each input's effect pooled towards none by a normal prior (each group's
    weights towards the common ones). Where one model predicts better in one region and
    another elsewhere, one set of weights (:func:`bayesij.model_weights`) averages them
    badly everywhere.

    The weights are the posterior mode with the priors' scales fixed (``prior_scale`` for
    the effects, ``intercept_scale`` for the common logits); Yao et al. also give the
    scales priors and sample them. As ``prior_scale`` goes to 0 the weights become the
    ordinary stacking weights.

    Parameters
    ----------
    results : dict of str to LooResult, or pandas.DataFrame; or dict of str to fits
        ``kind="log"``: as :func:`bayesij.model_weights`, the models' results on the same
        observations, or a table of pointwise elpd with one column per model.
        ``kind="crps"``: as :func:`bayesij.score_weights`, each model's fit (with ``y`` and
        ``y_pred`` or their ``observed_data`` and ``posterior_predictive``).
    covariates : array_like of shape (n_obs,) or (n_obs, J), or pandas.DataFrame, optional
        Continuous inputs, each standardised (mean 0, sd 1) here; a DataFrame's column
        names name them.
    groups : array_like of shape (n_obs,), optional
        A label per observation: each group gets its own weights, pooled towards the
        common ones.
    prior_scale : float, default 1.0
        The sd of the effects' normal prior on the logit scale.
    intercept_scale : float, default 10.0
        The sd of the common logits' prior (weak: about the ordinary stacking weights).
    kind : {"log", "crps"}, default "log"
        The score stacked: the log predictive density, or the mixture's LOO CRPS (of the
        PSIS-weighted predictive draws; ``w_n' a_n - w_n' B_n w_n / 2``, as
        :func:`bayesij.score_weights`).
    y, y_pred, var_name, convention
        For ``kind="crps"``: as :func:`bayesij.score_weights`.

    Returns
    -------
    HierarchicalStacking

    Examples
    --------
    >>> import numpy as np, pandas as pd, bayesij
    >>> rng = np.random.default_rng(0)
    >>> region = np.repeat(["north", "south"], 50)
    >>> lpd = pd.DataFrame({  # model a predicts the north better, model b the south
    ...     "a": np.where(region == "north", -1.0, -2.0) + 0.1 * rng.normal(size=100),
    ...     "b": np.where(region == "north", -2.0, -1.0) + 0.1 * rng.normal(size=100),
    ... })
    >>> stacked = bayesij.hierarchical_stacking(lpd, groups=region)
    >>> north, south = stacked.weights.iloc[0], stacked.weights.iloc[-1]
    >>> bool(north["a"] > 0.9 and south["b"] > 0.9)
    True

    References
    ----------
    .. [1] Yao, Y., Pirš, G., Vehtari, A. and Gelman, A. (2022). Bayesian hierarchical
       stacking: some models are (somewhere) useful. Bayesian Analysis 17(4), 1043-1071.
    """
    prior_scale = check_real(prior_scale, "prior_scale", 0.0, low_open=True)
    intercept_scale = check_real(intercept_scale, "intercept_scale", 0.0, low_open=True)
    if kind == "log":
        frame = pointwise_table(results)
        names, index = list(frame.columns), frame.index
        score = log_score(frame.to_numpy(dtype=float))
    elif kind == "crps":
        names, absolute, spread = mixture_terms(results, y, y_pred, var_name, convention)
        index, score = pd.RangeIndex(absolute.shape[0]), crps_score(absolute, spread)
    else:
        raise fail("kind", repr(kind), "'log' or 'crps'")
    design, inputs = _design(covariates, groups, len(index))
    weights, mu, beta = hierarchical_stacking_weights(
        score, len(names), design, prior_scale, intercept_scale
    )
    return HierarchicalStacking(
        pd.DataFrame(weights, index=index, columns=names),
        pd.Series(mu, index=names[:-1], name="intercept"),
        pd.DataFrame(beta, index=names[:-1], columns=inputs),
        float(np.sum(score(weights)[0])),
    )


def _design(covariates, groups, n_obs: int) -> tuple[np.ndarray, list]:
    """The standardised covariates and the groups' indicators, (n_obs, J + G), named."""
    columns, names = [], []
    if covariates is not None:
        labels = list(covariates.columns) if isinstance(covariates, pd.DataFrame) else None
        values = as_float_array(covariates, "covariates")
        values = values[:, None] if values.ndim == 1 else values
        if values.ndim != 2 or values.shape[0] != n_obs:
            raise fail(
                "covariates", f"shape {values.shape}", f"(n_obs,) or (n_obs, J), n_obs = {n_obs}"
            )
        check_finite(values, "covariates")
        sd = values.std(axis=0)
        if np.any(sd == 0):
            raise fail("covariates", "a constant column", "covariates that vary")
        columns.append((values - values.mean(axis=0)) / sd)
        names += labels or [f"x{j}" for j in range(values.shape[1])]
    if groups is not None:
        labels = np.asarray(groups)
        if labels.shape != (n_obs,):
            raise fail("groups", f"shape {labels.shape}", f"one label per observation ({n_obs},)")
        levels, codes = np.unique(labels, return_inverse=True)
        columns.append(np.eye(levels.size)[codes])
        names += [f"group {level}" for level in levels]
    if not columns:
        raise fail(
            "covariates", "None with groups None", "covariates or groups (else: model_weights)"
        )
    return np.column_stack(columns), names
