"""Every public estimator with a compiled kernel on one small input, its numbers flattened:
run once with the kernels compiled and once with ``NUMBA_DISABLE_JIT=1`` (pure Python, the
setting for debugging and coverage) by ``tests/array/kernels/test_pure_python.py``.

``python every_estimator.py OUT`` writes the numbers to OUT (a pickle).
"""

from __future__ import annotations

import dataclasses
import pickle
import sys
import warnings

import numpy as np
import pandas as pd
import xarray as xr


def _flat(value) -> np.ndarray:
    """Every number a result reports, as one float vector."""
    if hasattr(value, "_fields"):  # a NamedTuple result: its numeric fields
        return _flat([f for f in value if _numeric(f)])
    if isinstance(value, (list, tuple)):
        parts = [_flat(v) for v in value]
        return np.concatenate(parts) if parts else np.zeros(0)
    if isinstance(value, (pd.DataFrame, pd.Series)):
        numbers = value.select_dtypes("number") if isinstance(value, pd.DataFrame) else value
        return np.asarray(numbers, dtype=float).ravel()
    if isinstance(value, xr.Dataset):
        return _flat([value[name].values for name in sorted(value.data_vars)])
    if isinstance(value, xr.DataArray):
        return np.asarray(value.values, dtype=float).ravel()
    if hasattr(value, "pointwise") and hasattr(value, "elpd"):  # an ELPD result
        return _flat([value.pointwise, np.array([value.elpd, value.se])])
    if dataclasses.is_dataclass(value):  # every numeric field of a result
        fields = [getattr(value, f.name) for f in dataclasses.fields(value)]
        return _flat([f for f in fields if _numeric(f)])
    return np.asarray(value, dtype=float).ravel()


def _numeric(value) -> bool:
    if isinstance(value, (bool, str)) or value is None:
        return False
    if isinstance(value, (int, float, np.number, pd.DataFrame, pd.Series, xr.DataArray)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "iuf"


def results() -> dict[str, np.ndarray]:
    import bayesij

    rng = np.random.default_rng(8)
    n, chains, draws = 24, 2, 100
    x = rng.normal(size=n)
    y = 0.3 + 0.5 * x + rng.standard_t(4, size=n)
    theta = np.array([0.3, 0.5]) + rng.normal(size=(chains * draws, 2)) * 0.25
    mean = theta[:, :1] + theta[:, 1:] * x[None, :]
    log_lik = (-0.5 * (y - mean) ** 2 - 0.5 * np.log(2 * np.pi)).reshape(chains, draws, n)
    post = bayesij.from_arrays(theta.reshape(chains, draws, 2), log_lik, quantity_names=["a", "b"])
    y_pred = (mean + rng.normal(size=mean.shape)).reshape(chains, draws, n)
    prior = -0.5 * (theta**2).sum(axis=1).reshape(chains, draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = bayesij.loo(log_lik * 1.1)
    calls = {
        "loo": lambda: [bayesij.loo(post, method=m) for m in ("psis", "is", "ij", "cumulant")],
        "waic": lambda: bayesij.waic(post, beta=0.8),
        "generating_function": lambda: bayesij.generating_function(post, 0.5),
        "holdout": lambda: bayesij.holdout(post),
        "dic": lambda: bayesij.dic(post),
        "influence": lambda: bayesij.influence(post),
        "ij_covariance": lambda: [
            bayesij.ij_covariance(post, n_boot=20).covariance,
            bayesij.ij_covariance(post, n_boot=20).mcse_covariance,
        ],
        "linearity": lambda: [bayesij.linearity(post).delta_is, bayesij.linearity(post).index],
        "amip": lambda: [
            bayesij.amip(post, "b", "sign", method=m).curve[["n_drop", "linear"]]
            for m in ("linear", "reweighted")
        ],
        "audit": lambda: [
            bayesij.audit(post).ij.covariance,
            bayesij.audit(post).loo,
            bayesij.audit(post).waic,
        ],
        "loo_subsample": lambda: bayesij.loo_subsample(post, 12, seed=3).pointwise,
        "loo_expectation": lambda: bayesij.loo_expectation(post, y_pred),
        "loo_pit": lambda: bayesij.loo_pit(post, y, y_pred),
        "loo_score": lambda: bayesij.loo_score(post, y, y_pred),
        "loo_metrics": lambda: bayesij.loo_metrics(post, y, y_pred, n_bootstrap=50),
        "loo_r2": lambda: bayesij.loo_r2(post, y, y_pred, n_simulations=50),
        "loo_weighted": lambda: bayesij.loo_weighted(post, np.arange(n) % 3 + 1.0),
        "loo_mixture": lambda: bayesij.loo_mixture(post),
        "psense": lambda: bayesij.psense(post, log_prior=prior),
        "pareto_khat": lambda: bayesij.pareto_khat(post),
        "pareto_smooth": lambda: bayesij.pareto_smooth(post),
        "compare": lambda: bayesij.compare({"a": bayesij.loo(post), "b": other}),
        "model_weights": lambda: bayesij.model_weights({"a": bayesij.loo(post), "b": other}),
        "pit_ecdf": lambda: bayesij.pit_ecdf(np.linspace(0.01, 0.97, 50), n_simulations=50),
        "psense_sequence": lambda: bayesij.psense_sequence(post, log_prior=prior),
        "power_scaled_draws": lambda: bayesij.power_scaled_draws(post, log_prior=prior),
        "lfo": lambda: bayesij.lfo(post, min_train=16, method="psis-backward"),
        "loo_approximate_posterior": lambda: bayesij.loo_approximate_posterior(
            post, prior.ravel(), prior.ravel() * 0.9
        ),
        "loo_nonfactorized": lambda: bayesij.loo_nonfactorized(
            y, mean[:, :], np.eye(n) * 1.5 + 0.2
        ),
        "bayesian_r2": lambda: bayesij.bayesian_r2(None, mean, np.ones(mean.shape[0])),
        "calibration": lambda: bayesij.calibration(
            (y > 0.3).astype(float), 1 / (1 + np.exp(-x)), n_bootstrap=50
        ),
        "prediction_errors": lambda: bayesij.prediction_errors(y_pred, y),
        "weight_predictions": lambda: bayesij.weight_predictions(
            {"a": y_pred, "b": y_pred + 1.0}, {"a": 0.3, "b": 0.7}, seed=1
        ),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, call in calls.items():
            try:
                out[name] = _flat(call())
            except Exception as error:
                raise RuntimeError(f"{name}: {error}") from error
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "wb") as handle:
        pickle.dump(results(), handle)
