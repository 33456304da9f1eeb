"""Leave-one-out predictive scores: CRPS and SCRPS of the LOO predictive distributions and
point-prediction metrics (MAE, MSE, RMSE, R²) of the LOO predictive means."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesij.array.checks import (
    as_float_array,
    check_finite,
    check_replicates,
    check_seed,
    fail,
)
from bayesij.array.numeric import map_chunks, obs_chunks
from bayesij.array.scores import censored_draws, checked_censoring, weighted_crps
from bayesij.data.convert import unit_index
from bayesij.data.fit import observed_or_fit, predictions_or_fit
from bayesij.stats.loo import chunk_loo_weights, draws_beside_log_lik, loo_expectation
from bayesij.stats.peers import own_ddof

__all__ = ["LooScore", "loo_score", "loo_metrics", "SCORES", "METRICS"]

SCORES = ("crps", "scrps")
METRICS = ("mae", "mse", "rmse", "r2", "acc", "acc_balanced")


@dataclass(frozen=True)
class LooScore:
    """A leave-one-out predictive score or metric.

    Attributes
    ----------
    kind : str
        ``'crps'``, ``'scrps'`` (scores to maximise: mean over observations), ``'mae'``,
        ``'mse'``, ``'rmse'`` or ``'r2'``.
    estimate, se : float
        The value and its standard error over observations.
    pointwise : pandas.DataFrame
        Per observation: ``score`` and ``pareto_k`` (scores), or ``prediction`` (the LOO
        predictive mean) and ``error`` (``y - prediction``) and ``pareto_k`` (metrics).
        Per group with ``groups=``: the group's ``score`` (the sum over its observations,
        each scored leaving the whole group out) and ``pareto_k``.
    members : pandas.Series or None
        With ``groups=``: the group of each observation, indexed by its id (results over
        other groups are not compared).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> y_pred = rng.normal(mu, 1.0, size=(4, 500, 40))
    >>> score = bayesij.loo_score(-0.5 * (y - mu) ** 2, y, y_pred)
    >>> str(score).startswith("LOO CRPS")
    True
    """

    kind: str
    estimate: float
    se: float
    pointwise: pd.DataFrame
    members: pd.Series | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return f"LOO {self.kind.upper()}: {self.estimate:.4g} (SE {self.se:.2g})"


def loo_score(
    data,
    y=None,
    y_pred=None,
    *,
    groups=None,
    var_name=None,
    kind: str = "crps",
    convention=None,
    psis=None,
    censored=None,
) -> LooScore:
    """LOO-CRPS or LOO-SCRPS from posterior predictive draws, PSIS-weighted.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        Source of the pointwise log-likelihood (as :func:`bayesij.loo`).
    y : array_like of shape (n_obs,), optional
        Observed values; by default the fit's ``observed_data`` variable of the
        log-likelihood's name (``var_name``), as arviz-stats reads it.
    y_pred : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs), optional
        Posterior predictive draws at the same draws as the log-likelihood (the order of
        :func:`bayesij.loo_pit`: observed, then predicted); by default the fit's
        ``posterior_predictive`` variable of the log-likelihood's name, its draws paired
        by label.
    kind : {"crps", "scrps"}, default "crps"
    convention, var_name, psis
        As :func:`bayesij.loo_expectation` (``psis``: reuse a ``save_psis=True`` result).
        ``se = sd(pointwise, ddof) / sqrt(n)`` with ``ddof`` 0 as arviz-stats
        ``loo_score``, unless :class:`bayesij.PsisOptions` gives it.
    groups : array_like or mapping, optional
        Leave one group out (a label per observation, as :func:`bayesij.loo`): each
        observation is scored by the predictive distribution without its whole group (the
        group's PSIS weights), and a group's score is the sum over its observations, the
        score of its joint predictive's marginals. ``estimate`` is then the mean over
        groups and ``se`` is over groups; :func:`bayesij.compare` pairs models group by
        group (and refuses results over other groups). With ``psis``, a
        ``loo(..., groups=, save_psis=True)`` result.
    censored : array_like of shape (n_obs,), optional
        Censored observations, brms' codes: 0 observed, 1 right-censored (the true value is
        at least ``y``: a survival time still running, a count above a limit), -1
        left-censored (at most ``y``: below a detection limit). A censored observation is
        scored by the predictive distribution censored where it is (the draws clipped at
        ``y``): the threshold-weighted CRPS ``int_{-inf}^{y} F(z)^2 dz`` for a right-censored
        one, which uses only what is known of it (Gneiting & Ranjan 2011).

    Returns
    -------
    LooScore
        ``estimate`` is the mean pointwise score, larger is better (the CRPS is negated, as
        arviz-stats ``loo_score`` and R loo ``crps`` report it); ``pareto_k`` per point is
        that of the leave-one-out importance ratios.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> y_pred = rng.normal(mu, 1.0, size=(4, 500, 40))  # posterior predictive draws
    >>> score = bayesij.loo_score(post, y, y_pred)  # the LOO CRPS (negatively oriented)
    >>> score.kind, bool(score.estimate < 0), len(score.pointwise)
    ('crps', True, 40)

    References
    ----------
    .. [1] Bolin, D. and Wallin, J. (2023). Local scale invariance and robustness of proper
       scoring rules. Statistical Science 38(1), 140-159.
    .. [2] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    if kind not in SCORES:
        raise fail("kind", repr(kind), f"one of {SCORES}")
    ddof = own_ddof(convention, 0)
    draws = draws_beside_log_lik(
        data,
        predictions_or_fit(data, y_pred, var_name),
        "y_pred",
        var_name=var_name,
        psis=psis,
        convention=convention,
        groups=groups,
    )
    observed = _observed(observed_or_fit(data, y, var_name), draws.matrix.shape[1])
    codes = checked_censoring(censored, observed.size)
    score = np.empty(draws.matrix.shape[1])
    k = draws.pareto_k if draws.pareto_k is not None else np.empty(score.size)
    if psis is not None and draws.codes is None:
        k = psis.pointwise["pareto_k"].to_numpy()

    def work(chunk):  # chunks on threads: each writes its own columns
        weights, chunk_k = chunk_loo_weights(draws, chunk)
        values = draws.values[:, chunk]
        if codes is not None:
            values = censored_draws(values, observed[chunk], codes[chunk])
        crps, scrps = weighted_crps(values, observed[chunk], weights)
        score[chunk] = crps if kind == "crps" else scrps
        if chunk_k is not None:
            k[chunk] = chunk_k

    map_chunks(work, obs_chunks(score.size, 16 * draws.matrix.shape[0]))
    _warn_point_masses(score, kind)
    if draws.codes is not None:  # each group's score: the sum over its observations
        n_groups = len(draws.groups)
        score = np.bincount(draws.codes, weights=score, minlength=n_groups)
        k = pd.Series(k).groupby(draws.codes).max().to_numpy()
        frame = pd.DataFrame({"score": score, "pareto_k": k}, index=draws.groups)
        return LooScore(kind, float(score.mean()), _se(score, ddof), frame, draws.members)
    frame = pd.DataFrame({"score": score, "pareto_k": k}, index=unit_index(draws.units))
    return LooScore(kind, float(score.mean()), _se(score, ddof), frame)


def _warn_point_masses(score: np.ndarray, kind: str) -> None:
    """Name the observations whose SCRPS is undefined: their LOO predictive draws are all
    equal (a point mass, ``E|X - X'| = 0``), so ``-E|X - y| / E|X - X'|`` is 0/0 or
    infinite; the CRPS is defined there."""
    bad = np.flatnonzero(~np.isfinite(score))
    if kind == "scrps" and bad.size:
        warnings.warn(
            f"SCRPS is undefined for {bad.size} observation(s) whose predictive draws are all "
            f"equal (a point mass; positions {bad[:10].tolist()}): NaN there; kind='crps' is "
            "defined for them.",
            UserWarning,
            stacklevel=3,
        )


def loo_metrics(
    data,
    y=None,
    y_pred=None,
    *,
    var_name=None,
    kind: str = "rmse",
    convention=None,
    psis=None,
    n_bootstrap: int = 4000,
    seed: int = 0,
) -> LooScore:
    """Error metrics of the LOO predictive means ``E[y_rep_n | y_-n]`` (PSIS).

    Parameters
    ----------
    data, y, y_pred, convention, var_name, psis
        As :func:`loo_score`.
    kind : {"mae", "mse", "rmse", "r2", "acc", "acc_balanced"}, default "rmse"
        ``mae``, ``mse``: mean absolute / squared error, SE ``sd(ddof=1) / sqrt(n)``;
        ``rmse``: ``sqrt(mse)`` with the first-order SE ``se(mse) / (2 sqrt(mse))`` (R loo's
        ``loo_predictive_metric`` and arviz-stats ``loo_metrics``); ``r2``: the LOO R²
        ``1 - var(y - prediction) / var(y)`` with a Bayesian-bootstrap SE. For 0/1 outcomes
        and predicted probabilities: ``acc``, the share classified right at 0.5, SE
        ``sqrt(a (1 - a) / n)``; ``acc_balanced``, the mean of the true-positive and
        true-negative rates, SE ``sqrt((tp (1 - tp) + tn (1 - tn)) / (4 n))`` (as
        arviz-stats).
    n_bootstrap, seed : int
        The Bayesian bootstrap of the R² SE.

    Returns
    -------
    LooScore
        ``pointwise`` has the LOO ``prediction``, the ``error`` and the ``pareto_k`` of each
        prediction.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> y_pred = rng.normal(mu, 1.0, size=(4, 500, 40))
    >>> rmse = bayesij.loo_metrics(post, y, y_pred)  # the noise sd is 1
    >>> bool(0.6 < rmse.estimate < 1.4)
    True

    References
    ----------
    .. [1] Gelman, A., Goodrich, B., Gabry, J. and Vehtari, A. (2019). R-squared for
       Bayesian regression models. The American Statistician 73(3), 307-309.
    """
    if kind not in METRICS:
        raise fail("kind", repr(kind), f"one of {METRICS}")
    seed = check_seed(seed)
    n_bootstrap = check_replicates(n_bootstrap, "n_bootstrap", minimum=2)
    means = loo_expectation(
        data,
        predictions_or_fit(data, y_pred, var_name),
        var_name=var_name,
        convention=convention,
        psis=psis,
    )
    prediction = means["value"].to_numpy()
    observed = _observed(observed_or_fit(data, y, var_name), prediction.size)
    error = observed - prediction
    estimate, se = _metric(kind, observed, error, n_bootstrap, seed)
    frame = pd.DataFrame(
        {"prediction": prediction, "error": error, "pareto_k": means["pareto_k"].to_numpy()},
        index=means.index,
    )
    return LooScore(kind, estimate, se, frame)


def _metric(kind, observed, error, n_bootstrap, seed) -> tuple[float, float]:
    n = error.size
    if kind in ("acc", "acc_balanced"):
        return _accuracy(kind, observed, observed - error)
    if kind == "mae":
        return float(np.abs(error).mean()), _se(np.abs(error), 1)
    squared = error**2
    mse, se_mse = float(squared.mean()), _se(squared, 1)
    if kind == "mse":
        return mse, se_mse
    if kind == "rmse":
        return float(np.sqrt(mse)), se_mse / (2 * np.sqrt(mse))
    alpha = np.random.default_rng(seed).dirichlet(np.ones(n), size=n_bootstrap)
    replicates = 1 - _weighted_var(error, alpha) / _weighted_var(observed, alpha)
    return float(1 - np.var(error) / np.var(observed)), float(replicates.std(ddof=1))


def _accuracy(kind: str, observed: np.ndarray, probability: np.ndarray) -> tuple[float, float]:
    """Accuracy or balanced accuracy of classifying at probability 0.5, with its SE."""
    if not np.isin(observed, (0.0, 1.0)).all():
        raise fail("y", "values other than 0 and 1", f"binary outcomes (0/1) for kind={kind!r}")
    right = (probability > 0.5) == (observed == 1)
    n = observed.size
    if kind == "acc":
        mean = float(right.mean())
        return mean, float(np.sqrt(mean * (1 - mean) / n))
    negative = observed == 0
    if negative.all() or not negative.any():
        raise fail("y", "outcomes of one class only", "both classes for kind='acc_balanced'")
    true_negative, true_positive = right[negative].mean(), right[~negative].mean()
    variance = (true_positive * (1 - true_positive) + true_negative * (1 - true_negative)) / 4
    return float((true_positive + true_negative) / 2), float(np.sqrt(variance / n))


def _weighted_var(values: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    mean = alpha @ values
    return alpha @ values**2 - mean**2


def _observed(y, n_obs: int) -> np.ndarray:
    observed = as_float_array(y, "y")
    if observed.shape != (n_obs,):
        raise fail("y", f"shape {observed.shape}", f"one value per observation, shape ({n_obs},)")
    check_finite(observed, "y")
    return observed


def _se(values: np.ndarray, ddof: int) -> float:
    return float(np.std(values, ddof=ddof) / np.sqrt(values.size))
