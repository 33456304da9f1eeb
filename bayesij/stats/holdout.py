"""Held-out evaluation: the expected log predictive density of test data (as R loo's
``elpd()``) and the prediction errors of the Stan User's Guide's held-out evaluation
(squared error of the posterior-mean prediction and posterior expected squared error, per
point, as MSE and as RMSE)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np
import pandas as pd

from bayesij.array.checks import as_draws_matrix, as_float_array, check_ddof, check_finite, fail
from bayesij.array.holdout import log_predictive_density
from bayesij.array.numeric import elpd_standard_error
from bayesij.data.fit import as_log_lik_source
from bayesij.data.source import map_blocks
from bayesij.stats.elpd import ElpdResult

__all__ = ["holdout", "HoldoutResult", "prediction_errors", "PredictionErrors"]


@dataclass(frozen=True)
class HoldoutResult(ElpdResult):
    """The expected log predictive density of held-out data.

    Attributes
    ----------
    elpd, se : float
        ``sum_j log mean_s p(y~_j | theta_s)`` and its standard error over points,
        ``sqrt(N) sd_j(elpd_j)`` (``ddof=1``, R loo's ``elpd()``) or ``sqrt(N var_j)``
        (``ddof=0``).
    mcse : float
        Monte Carlo SE of ``elpd``, ``sqrt(sum_j mcse_j^2)``.
    pointwise : pandas.DataFrame
        Per held-out point: ``elpd``, ``mcse`` (delta method, chain-aware), ``r_eff``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(1.0, 0.1, size=(4, 500, 1))  # draws fitted on other data
    >>> y_test = rng.normal(1.0, 1.0, size=10)
    >>> result = bayesij.holdout(-0.5 * (y_test - mu) ** 2 - 0.919)
    >>> result.n_units, list(result.estimates().index)
    (10, ['elpd', 'ic'])
    """

    elpd: float
    se: float
    mcse: float
    pointwise: pd.DataFrame
    n_draws: int
    ddof: int

    criterion: ClassVar[str] = ""
    number_format: ClassVar[str] = ".4g"

    @property
    def n_points(self) -> int:
        return len(self.pointwise)

    def _title(self) -> str:
        return (
            f"Held-out elpd of {self.n_points} points from {self.n_draws} draws "
            f"(SE with ddof={self.ddof}; Monte Carlo SE {self.mcse:.2g})"
        )


def holdout(data, *, var_name=None, ddof: int = 1) -> HoldoutResult:
    """Expected log predictive density of held-out data from the training posterior's draws.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray Dataset or DataArray, or array_like
        ``log p(y~_j | theta_s)`` of each held-out point ``j`` at each posterior draw ``s``
        (a generated quantity of the fit to the training data): an array of shape
        (n_draws, n_points) or (n_chains, n_draws, n_points), a ``log_likelihood``-like
        Dataset (e.g. ``idata["log_likelihood_test"]``) or a container.
    var_name : str or list of str, optional
        Which variable, when ``data`` holds several.
    ddof : {0, 1}, default 1
        SE divisor: 1 is R loo's ``elpd()`` (``sqrt(N) sd``), 0 ArviZ's convention.

    Returns
    -------
    HoldoutResult

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [2] Stan Development Team. Stan User's Guide: held-out evaluation and
           cross-validation (log-sum-exp of the draws).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik_test = np.log(np.full((4, 100, 3), 0.5))  # p(y~_j | theta) = 0.5
    >>> round(bayesij.holdout(log_lik_test).elpd, 4)  # 3 log 0.5
    -2.0794
    """
    return _holdout(data, var_name, check_ddof(ddof), "data")


def _holdout(data, var_name, ddof: int, argument: str) -> HoldoutResult:
    source = as_log_lik_source(data, var_name=var_name, argument=argument)
    arrays = map_blocks(source, partial(log_predictive_density, check=False))
    pointwise = pd.DataFrame(
        {"elpd": arrays.elpd, "mcse": arrays.mcse, "r_eff": arrays.r_eff},
        index=source.index,
    )
    return HoldoutResult(
        elpd=float(arrays.elpd.sum()),
        se=elpd_standard_error(arrays.elpd, ddof),
        mcse=float(np.sqrt(np.sum(arrays.mcse**2))),
        pointwise=pointwise,
        n_draws=source.n_draws,
        ddof=ddof,
    )


@dataclass(frozen=True)
class PredictionErrors:
    """Both prediction errors of held-out evaluation (Stan User's Guide), per point and
    summarised.

    Attributes
    ----------
    pointwise : pandas.DataFrame
        Per test point: ``prediction`` (posterior mean of the predictive draws),
        ``squared_error_of_mean`` ``(E[y~] - y)^2`` and ``expected_squared_error``
        ``E[(y~ - y)^2]`` (the posterior expectation of the error; it adds the predictive
        variance to the first).
    summary : pandas.Series
        ``mse_of_mean`` and ``rmse_of_mean`` (the error of the expectation, the
        traditional point-prediction score); ``expected_mse``, ``sqrt_expected_mse`` (the
        square root of the expected MSE) and ``expected_rmse`` (the expectation of the
        RMSE over draws: ``E[sqrt(MSE)] <= sqrt(E[MSE])``, the square root does not
        commute with the expectation); and ``elpd`` with ``elpd_se`` when log-likelihood
        draws were given.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y_pred = rng.normal(1.0, 1.0, size=(4, 500, 10))  # predictive draws of 10 test points
    >>> errors = bayesij.prediction_errors(y_pred, rng.normal(1.0, 1.0, size=10))
    >>> len(errors.pointwise)
    10
    """

    pointwise: pd.DataFrame
    summary: pd.Series

    def __str__(self) -> str:
        return "\n".join(
            [
                f"Prediction errors over {len(self.pointwise)} test points "
                "(of the mean: error of E[y~]; expected: E over draws of the error)",
                self.summary.to_string(float_format=lambda v: f"{v:.4g}"),
            ]
        )


def prediction_errors(y_pred, y_test, *, log_lik=None) -> PredictionErrors:
    """Squared-error scores of posterior predictive draws for test data, both kinds.

    Parameters
    ----------
    y_pred : array_like of shape (n_draws, n_points) or (n_chains, n_draws, n_points)
        Posterior predictive draws ``y~_s ~ p(y~ | x~, x, y)`` for the test points.
    y_test : array_like of shape (n_points,)
        The observed test values.
    log_lik : optional
        ``log p(y~_j | theta_s)`` draws for the same points (anything :func:`holdout`
        takes), to add the expected log predictive density.

    Returns
    -------
    PredictionErrors

    References
    ----------
    .. [1] Stan Development Team. Stan User's Guide: held-out evaluation — the error of an
       expectation versus the
       expectation of an error, and why ``sqrt(E[MSE]) != E[sqrt(MSE)]``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> draws = np.array([[0.0, 1.0], [2.0, 3.0]])  # 2 draws x 2 points
    >>> bayesij.prediction_errors(draws, [1.0, 2.0]).summary["mse_of_mean"]
    np.float64(0.0)
    """
    draws, _ = as_draws_matrix(y_pred, "y_pred")
    check_finite(draws, "y_pred")
    observed = as_float_array(y_test, "y_test")
    if observed.shape != (draws.shape[1],):
        raise fail(
            "y_test",
            f"shape {observed.shape}",
            f"one value per column of y_pred, shape ({draws.shape[1]},)",
        )
    check_finite(observed, "y_test")
    squared = (draws - observed) ** 2
    prediction = draws.mean(axis=0)
    pointwise = pd.DataFrame(
        {
            "y_test": observed,
            "prediction": prediction,
            "squared_error_of_mean": (prediction - observed) ** 2,
            "expected_squared_error": squared.mean(axis=0),
        },
        index=pd.RangeIndex(observed.size, name="point"),
    )
    mse_per_draw = squared.mean(axis=1)
    summary = {
        "mse_of_mean": pointwise["squared_error_of_mean"].mean(),
        "rmse_of_mean": np.sqrt(pointwise["squared_error_of_mean"].mean()),
        "expected_mse": mse_per_draw.mean(),
        "sqrt_expected_mse": np.sqrt(mse_per_draw.mean()),
        "expected_rmse": np.sqrt(mse_per_draw).mean(),
    }
    if log_lik is not None:
        result = _holdout(log_lik, None, 1, "log_lik")
        if result.n_points != observed.size:
            raise fail(
                "log_lik",
                f"{result.n_points} points",
                f"the {observed.size} test points of y_test",
            )
        summary.update(elpd=result.elpd, elpd_se=result.se)
    return PredictionErrors(pointwise, pd.Series(summary, name="value"))
