"""Calibration of probability forecasts of binary outcomes: the PAV-calibrated reliability
diagram with consistency bands and the CORP decomposition of the Brier score."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression

from bayesij.array.checks import (
    as_float_array,
    check_real,
    check_replicates,
    check_seed,
    fail,
)

__all__ = ["Calibration", "calibration"]


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
