"""Calibration of probability forecasts of binary outcomes: the PAV-calibrated reliability
diagram with consistency bands and the CORP decomposition of the Brier score, of given
forecasts or of a fit's leave-one-out predictive probabilities."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression

from bayesij.array.checks import (
    as_float_array,
    check_flag,
    check_real,
    check_replicates,
    check_seed,
    fail,
)
from bayesij.data.fit import observed_or_fit, predictions_or_fit, read
from bayesij.stats.loo import loo_expectation

__all__ = ["Calibration", "calibration", "loo_calibration"]


class Calibration(NamedTuple):
    """CORP reliability of probability forecasts.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per distinct forecast, ascending: ``forecast``, ``count``, ``calibrated``
        (the PAV-recalibrated probability: the observed frequency among forecasts like it,
        made monotone), and ``lower`` / ``upper``, the consistency band: where
        ``calibrated`` would fall with this probability if the forecasts were calibrated.
    score : float
        Mean Brier score of the forecasts.
    miscalibration, discrimination, uncertainty : float
        ``MCB = S - S_C``, ``DSC = S_R - S_C``, ``UNC = S_R`` with ``S_C`` the score of the
        calibrated forecasts and ``S_R`` that of the overall frequency; ``S = MCB - DSC +
        UNC`` exactly.
    """

    table: pd.DataFrame
    score: float
    miscalibration: float
    discrimination: float
    uncertainty: float


def calibration(
    y, prob, *, band_prob: float = 0.9, n_bootstrap: int = 1000, seed: int = 0
) -> Calibration:
    """CORP reliability diagram data and Brier-score decomposition (Dimitriadis, Gneiting &
    Jordan 2021) of probability forecasts of 0/1 outcomes, e.g. LOO predictive
    probabilities from :func:`bayesij.loo_expectation`.

    Parameters
    ----------
    y : array_like, shape (N,)
        Outcomes, 0 or 1.
    prob : array_like, shape (N,)
        Forecast probabilities of 1.
    band_prob : float, default 0.9
        Probability of the consistency band.
    n_bootstrap : int, default 1000
        Outcomes resampled from the forecasts (calibrated by construction) for the band.
    seed : int, default 0

    Returns
    -------
    Calibration

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> prob = rng.uniform(size=500)  # forecast probabilities
    >>> y = (rng.uniform(size=500) < prob).astype(int)  # outcomes drawn from them: calibrated
    >>> result = bayesij.calibration(y, prob, n_bootstrap=200)
    >>> bool(result.miscalibration < 0.02)
    True

    References
    ----------
    .. [1] Dimitriadis, T., Gneiting, T. and Jordan, A. I. (2021). Stable reliability
       diagrams for probabilistic classifiers. PNAS 118(8), e2016191118.
    """
    outcome = as_float_array(y, "y").reshape(-1)
    if outcome.size < 2 or not np.all((outcome == 0) | (outcome == 1)):
        raise fail(
            "y", f"{outcome.size} value(s) not all 0 or 1", "at least 2 outcomes, each 0 or 1"
        )
    forecast = as_float_array(prob, "prob").reshape(-1)
    if forecast.shape != outcome.shape:
        raise fail("prob", f"{forecast.size} forecasts", f"one per outcome ({outcome.size})")
    if np.any(~np.isfinite(forecast) | (forecast < 0) | (forecast > 1)):
        raise fail("prob", "values outside [0, 1]", "probabilities")
    band_prob = check_real(band_prob, "band_prob", 0.0, 1.0, low_open=True, high_open=True)
    n_bootstrap = check_replicates(n_bootstrap, "n_bootstrap")
    levels, position, count = np.unique(forecast, return_inverse=True, return_counts=True)
    calibrated = _pav(outcome, position, count)
    rng = np.random.default_rng(check_seed(seed))
    resampled = (rng.uniform(size=(n_bootstrap, outcome.size)) < forecast).astype(float)
    replicates = np.array([_pav(row, position, count) for row in resampled])
    lower, upper = np.quantile(replicates, [(1 - band_prob) / 2, (1 + band_prob) / 2], axis=0)
    table = pd.DataFrame(
        {
            "forecast": levels,
            "count": count,
            "calibrated": calibrated,
            "lower": lower,
            "upper": upper,
        }
    )
    score = float(np.mean((forecast - outcome) ** 2))
    score_calibrated = float(np.mean((calibrated[position] - outcome) ** 2))
    score_reference = float(np.mean((outcome.mean() - outcome) ** 2))
    return Calibration(
        table,
        score,
        score - score_calibrated,
        score_reference - score_calibrated,
        score_reference,
    )


def _pav(outcome: np.ndarray, position: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Isotonic (pool-adjacent-violators) fit of the outcomes' mean per distinct forecast."""
    means = np.bincount(position, weights=outcome, minlength=count.size) / count
    return isotonic_regression(means, weights=count, increasing=True).x


def loo_calibration(
    data,
    y=None,
    y_pred=None,
    *,
    var_name=None,
    from_log_lik: bool = False,
    band_prob: float = 0.9,
    n_bootstrap: int = 1000,
    seed: int = 0,
    convention=None,
) -> Calibration:
    """The LOO calibration of a model of 0/1 outcomes: :func:`calibration` of each
    observation's leave-one-out predictive probability ``P(y_n = 1 | y_-n)`` (PSIS), what
    arviz-plots' ``plot_loo_pava`` draws; plot it with :func:`bayesij.plots.plot_calibration`.

    arviz-plots resamples the posterior predictive draws with the PSIS weights (one random
    resample) and takes their mean; here the weighted mean is taken directly
    (:func:`bayesij.loo_expectation` of the predictive draws), without resampling noise.
    ``from_log_lik=True`` takes ``E_loo[P(y_n = 1 | theta)]`` instead, from the
    log-likelihood of a Bernoulli model (``exp(l_n)`` where ``y_n = 1``, ``1 - exp(l_n)``
    where it is 0): no predictive draws needed, and no predictive noise either.

    Parameters
    ----------
    data : InferenceData, DataTree or any fit :func:`bayesij.loo` reads
        With ``observed_data`` and ``posterior_predictive`` groups unless ``y`` and
        ``y_pred`` are given.
    y : array_like of shape (N,), optional
        The 0/1 outcomes; default the fit's ``observed_data`` variable (``var_name``).
    y_pred : array_like of shape (n_chains, n_draws, N), optional
        Posterior predictive draws (0/1); default the fit's ``posterior_predictive``.
    var_name : str, optional
        The observed variable, when the log-likelihood has several.
    from_log_lik : bool, default False
        The predictive probabilities from a Bernoulli log-likelihood, not predictive draws.
    band_prob, n_bootstrap, seed
        As :func:`calibration`.
    convention : str or PsisOptions, optional
        As :func:`bayesij.loo` (``"arviz-stats"``: its weights).

    Returns
    -------
    Calibration

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(1)
    >>> y = (rng.uniform(size=300) < 0.3).astype(float)   # a constant rate, modelled as one
    >>> p = rng.beta(1 + y.sum(), 1 + y.size - y.sum(), size=(4, 250, 1))
    >>> log_lik = np.where(y == 1, np.log(p), np.log1p(-p))
    >>> post = bayesij.from_arrays(p, log_lik, quantity_names=["p"])
    >>> result = bayesij.loo_calibration(post, y, from_log_lik=True, n_bootstrap=200)
    >>> bool(result.miscalibration < 0.01)
    True

    References
    ----------
    .. [1] Dimitriadis, T., Gneiting, T. and Jordan, A. I. (2021). Stable reliability
       diagrams for probabilistic classifiers. PNAS 118(8), e2016191118.
    .. [2] Säilynoja, T., Johnson, A. R., Martin, O. A. and Vehtari, A. (2026).
       Recommendations for visual predictive checks in Bayesian workflow. JOVI.
    """
    check_flag(from_log_lik, "from_log_lik")
    outcome = as_float_array(observed_or_fit(data, y, var_name), "y").reshape(-1)
    if not np.all((outcome == 0) | (outcome == 1)):
        raise fail("y", "values other than 0 and 1", "binary outcomes (0/1)")
    if from_log_lik and y_pred is not None:
        raise fail("y_pred", "predictive draws with from_log_lik=True", "one or the other")
    if from_log_lik:  # the log-likelihood's own P(y_n = 1 | theta)
        values = _bernoulli_probability(data, outcome, var_name)
    else:
        values = predictions_or_fit(data, y_pred, var_name)
    means = loo_expectation(data, values, var_name=var_name, convention=convention)
    forecast = np.clip(means["value"].to_numpy(), 0.0, 1.0)  # weighted means of 0/1 draws
    if forecast.size != outcome.size:
        raise fail("y", f"{outcome.size} outcomes", f"one per observation ({forecast.size})")
    return calibration(outcome, forecast, band_prob=band_prob, n_bootstrap=n_bootstrap, seed=seed)


def _bernoulli_probability(data, outcome: np.ndarray, var_name) -> np.ndarray:
    """``P(y_n = 1 | theta)`` at each draw (n_chains, n_draws, N) from a Bernoulli
    log-likelihood of the outcomes ``y_n``: ``exp(l_n)`` or ``1 - exp(l_n)``."""
    source = read(data, var_name=var_name).log_lik_source(groups=False)
    log_lik = source.rows(np.arange(source.n_units))
    if log_lik.shape[-1] != outcome.size or np.any(log_lik > 1e-12):
        raise fail(
            "data",
            f"a log-likelihood of shape {log_lik.shape} with values up to {np.max(log_lik):.3g}",
            f"a Bernoulli log-likelihood of the {outcome.size} outcomes (log-probabilities <= 0)",
        )
    probability = np.exp(np.minimum(log_lik, 0.0))
    return np.where(outcome == 1, probability, 1.0 - probability)
