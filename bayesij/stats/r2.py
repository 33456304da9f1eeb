"""Bayesian R² (Gelman, Goodrich, Gabry & Vehtari 2019): the variance of the predicted means
over the observations against it plus the modelled residual variance, per posterior draw.

References
----------
.. [1] Gelman, A., Goodrich, B., Gabry, J. and Vehtari, A. (2019). R-squared for Bayesian
   regression models. The American Statistician 73(3), 307-309.
.. [2] Tjur, T. (2009). Coefficient of determination in logistic regression models. The
   American Statistician 63(4) (the Bernoulli pseudo-variance).
.. [3] Rubin, D. B. (1981). The Bayesian bootstrap. The Annals of Statistics 9(1), 130-134
   (the uncertainty of the LOO R²).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.stats import dirichlet

from bayesij.array.checks import (
    as_float_array,
    check_finite,
    check_replicates,
    check_seed,
    fail,
)
from bayesij.data.fit import named_draws, observed_or_fit, predictions_or_fit
from bayesij.stats.loo import loo_means

__all__ = ["bayesian_r2", "BayesianR2", "loo_r2", "residual_r2"]


class BayesianR2(NamedTuple):
    """Draws of the Bayesian R² and their summary.

    Attributes
    ----------
    draws : ndarray of shape (n_draws,)
        One R² per posterior draw (chains stacked).
    """

    draws: np.ndarray

    def summary(self, prob: float = 0.94) -> dict:
        """Mean, median, sd and the equal-tailed interval of probability ``prob``."""
        low, high = np.quantile(self.draws, [(1 - prob) / 2, (1 + prob) / 2])
        return {
            "mean": float(self.draws.mean()),
            "median": float(np.median(self.draws)),
            "sd": float(self.draws.std(ddof=1)),
            f"eti_{prob:g}": (float(low), float(high)),
        }


def bayesian_r2(data, pred_mean, scale=None, *, scale_kind: str = "sd") -> BayesianR2:
    """Bayesian R² of a regression: ``Var_n(mu_sn) / (Var_n(mu_sn) + sigma_s^2)`` per draw.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or None
        The fit whose posterior holds ``pred_mean`` and ``scale`` (None when they are given
        as arrays).
    pred_mean : str or array_like
        The predicted means: a posterior variable over the observations, or draws of shape
        (n_draws, n_obs) or (n_chains, n_draws, n_obs).
    scale : str, array_like or None, default None
        The modelled residual sd (``scale_kind="sd"``) or variance (``"var"``) per draw. None:
        a Bernoulli model, whose pseudo-variance ``mean_n mu (1 - mu)`` is used (Tjur).
    scale_kind : {"sd", "var"}, default "sd"

    Returns
    -------
    BayesianR2
        ``draws`` and ``summary()``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> x = np.linspace(-1, 1, 40)
    >>> slope = rng.normal(2.0, 0.1, size=(4, 500, 1))
    >>> pred_mean = slope * x  # each draw's predicted means
    >>> r2 = bayesij.bayesian_r2(pred_mean, pred_mean, np.ones((4, 500)))  # residual sd 1
    >>> bool(0.5 < r2.summary()["mean"] < 0.65)  # var(2x) / (var(2x) + 1)
    True

    References
    ----------
    .. [1] Gelman, A., Goodrich, B., Gabry, J. and Vehtari, A. (2019). R-squared for
       Bayesian regression models. The American Statistician 73(3), 307-309.
    """
    if scale_kind not in ("sd", "var"):
        raise fail("scale_kind", repr(scale_kind), "'sd' or 'var'")
    mu = _predicted_means(data, pred_mean)
    if scale is None:
        if np.any((mu < 0) | (mu > 1)):
            raise fail(
                "scale",
                "None with predicted means outside [0, 1]",
                "the residual sd or variance (None is for a Bernoulli model's probabilities)",
            )
        variance = np.mean(mu * (1 - mu), axis=1)
    else:
        given = named_draws(data, scale, "scale").reshape(-1)
        if given.size != mu.shape[0]:
            raise fail("scale", f"{given.size} draws", f"one per draw of pred_mean ({mu.shape[0]})")
        if np.any(given < 0):
            raise fail("scale", "negative values", "an sd or a variance, >= 0")
        variance = given**2 if scale_kind == "sd" else given
    explained = np.var(mu, axis=1, ddof=1)
    return BayesianR2(explained / (explained + variance))


def _predicted_means(data, pred_mean) -> np.ndarray:
    """``pred_mean``'s draws (a posterior variable of ``data`` or an array) as (S, n_obs),
    at least two observations."""
    mu = named_draws(data, pred_mean, "pred_mean")
    mu = mu.reshape(-1, mu.shape[-1]) if mu.ndim == 3 else mu
    if mu.ndim != 2 or mu.shape[1] < 2:
        raise fail("pred_mean", f"draws of shape {mu.shape}", "draws of at least 2 observations")
    return mu


def residual_r2(data, pred_mean, y=None, *, var_name=None) -> BayesianR2:
    """Residual R² of a regression: ``Var_n(mu_sn) / (Var_n(mu_sn) + Var_n(y_n - mu_sn))``
    per draw, the residual variance taken from the data (arviz-stats' ``residual_r2``)
    where :func:`bayesian_r2` takes the model's.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or None
        The fit whose posterior holds ``pred_mean`` (and whose ``observed_data`` holds ``y``
        when it is omitted).
    pred_mean : str or array_like
        The predicted means: a posterior variable over the observations, or draws of shape
        (n_draws, n_obs) or (n_chains, n_draws, n_obs).
    y : array_like of shape (n_obs,), optional
        The observations; by default the fit's ``observed_data`` variable of the
        log-likelihood's name (``var_name``).
    var_name : str, optional
        As :func:`bayesij.loo_r2`.

    Returns
    -------
    BayesianR2
        ``draws`` and ``summary()``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> x = np.linspace(-1, 1, 40)
    >>> y = 2.0 * x + rng.normal(size=40)  # residual sd 1
    >>> pred_mean = rng.normal(2.0, 0.1, size=(4, 500, 1)) * x  # each draw's predicted means
    >>> r2 = bayesij.residual_r2(None, pred_mean, y)
    >>> bool(0.45 < r2.summary()["mean"] < 0.7)  # about var(2x) / (var(2x) + 1)
    True

    References
    ----------
    .. [1] Gelman, A., Goodrich, B., Gabry, J. and Vehtari, A. (2019). R-squared for
       Bayesian regression models. The American Statistician 73(3), 307-309.
    """
    mu = _predicted_means(data, pred_mean)
    observed = as_float_array(observed_or_fit(data, y, var_name), "y").reshape(-1)
    if observed.shape != (mu.shape[1],):
        raise fail("y", f"shape {observed.shape}", f"one value per observation, ({mu.shape[1]},)")
    check_finite(observed, "y")
    explained = np.var(mu, axis=1, ddof=1)
    residual = np.var(observed - mu, axis=1, ddof=1)
    return BayesianR2(explained / (explained + residual))


def loo_r2(
    data,
    y=None,
    y_pred=None,
    *,
    var_name=None,
    convention: str | None = None,
    n_simulations: int = 4000,
    seed: int = 42,
    psis=None,
) -> BayesianR2:
    """LOO R²: ``1 - Var(y - E_loo[y_pred]) / Var(y)`` with its Bayesian-bootstrap
    distribution, as brms' ``loo_R2`` and arviz-stats' ``loo_r2``.

    Unlike the Bayesian R² (which uses the model's own residual variance), this one
    measures out-of-sample prediction: the residuals are of the leave-one-out predictive
    means. Its uncertainty is over the observations: ``n_simulations`` Dirichlet(1, ..., 1)
    weightings of them (the Bayesian bootstrap), each giving weighted variances with the
    ``N / (N - 1)`` correction; values are clipped to [-1, 1] as both peers do.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        Source of the pointwise log-likelihood (as :func:`bayesij.loo`).
    y : array_like, shape (N,), optional
        The observations; by default the fit's ``observed_data`` variable of the
        log-likelihood's name (``var_name``), as arviz-stats reads it.
    y_pred : array_like, shape (n_chains, n_draws, N), optional
        Posterior predictive draws (or predicted means) whose LOO mean is the prediction;
        by default the fit's ``posterior_predictive`` variable of that name.
    var_name, convention
        As :func:`bayesij.loo_expectation` (``convention="arviz-stats"`` for its PSIS).
    n_simulations : int, default 4000
        Bayesian bootstrap replicates.
    seed : int, default 42
        Seed of SciPy's Dirichlet draws (42: the same replicates as arviz-stats).
    psis : LooResult, optional
        A PSIS-LOO result with ``save_psis=True`` to reuse.

    Returns
    -------
    BayesianR2
        ``draws`` (n_simulations,) and ``summary()``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> y_pred = rng.normal(mu, 1.0, size=(4, 500, 40))
    >>> r2 = bayesij.loo_r2(post, y, y_pred)  # a constant mean explains nothing out of sample
    >>> bool(r2.summary()["mean"] < 0.05)
    True

    References
    ----------
    .. [1] Gelman, A., Goodrich, B., Gabry, J. and Vehtari, A. (2019). R-squared for
       Bayesian regression models. The American Statistician 73(3), 307-309.
    .. [2] Rubin, D. B. (1981). The Bayesian bootstrap. The Annals of Statistics 9(1).
    """
    y = as_float_array(observed_or_fit(data, y, var_name), "y")
    if y.ndim != 1 or y.size < 2:
        raise fail("y", f"shape {y.shape}", "a vector of at least 2 observations")
    check_finite(y, "y")
    n_simulations = check_replicates(n_simulations, "n_simulations")
    y_pred = as_float_array(predictions_or_fit(data, y_pred, var_name), "y_pred")
    if y_pred.ndim not in (2, 3):
        raise fail(
            "y_pred", f"shape {y_pred.shape}", "draws (n_draws, N) or (n_chains, n_draws, N)"
        )
    check_finite(y_pred, "y_pred")
    means = loo_means(data, y_pred, var_name=var_name, convention=convention, psis=psis)
    if means.size != y.size:
        raise fail("y", f"{y.size} observations", f"one per unit of data ({means.size})")
    residual = means - y
    # The Dirichlet weights a block of simulations at a time (at most about 64 MiB): the
    # same stream of draws as all at once, without the n_simulations x N matrix (3 GiB at
    # N = 10^5).
    state = np.random.RandomState(check_seed(seed))
    block = max(1, 2**23 // y.size)
    r2 = np.empty(n_simulations)
    correction = y.size / (y.size - 1)
    for start in range(0, n_simulations, block):
        size = min(block, n_simulations - start)
        weights = dirichlet.rvs(np.ones(y.size), size=size, random_state=state)

        def weighted_variance(values, weights=weights):
            return (weights @ values**2 - (weights @ values) ** 2) * correction

        r2[start : start + size] = 1 - weighted_variance(residual) / weighted_variance(y)
    return BayesianR2(np.clip(r2, -1, 1))
