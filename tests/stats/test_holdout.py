"""Held-out elpd against R loo's elpd() and the closed form; prediction errors against
exact moments."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import bayesij
from bayesij.refit.conjugate import ConjugateNormal
from peers import ARVIZ_1

DATA = Path(__file__).parents[1] / "reference"


def _reference_log_lik():
    table = np.loadtxt(DATA / "log_lik_reference.csv", delimiter=",", skiprows=1)
    return table[:, 1:].reshape(4, -1, table.shape[1] - 1)


def test_holdout_equals_r_loo_elpd():
    """Values saved by tests/reference/r_loo_reference.R (R loo 2.5.1 ``elpd()``)."""
    result = bayesij.holdout(_reference_log_lik())
    expected = pd.read_csv(DATA / "r_loo_elpd_pointwise.csv")
    np.testing.assert_allclose(result.pointwise["elpd"], expected["elpd"], rtol=1e-12)
    estimates = pd.read_csv(DATA / "r_loo_elpd_estimates.csv")
    np.testing.assert_allclose(
        result.estimates().to_numpy(), estimates[["estimate", "se"]].to_numpy(), rtol=1e-12
    )
    assert "Held-out elpd of 25 points" in str(result)


def test_holdout_matches_the_exact_predictive_density_of_test_points():
    rng = np.random.default_rng(4)
    n, test = 60, np.arange(45, 60)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    model = ConjugateNormal(X, X @ [0.5, -1.0] + rng.normal(size=n), sigma=1.0)
    train = np.ones(n)
    train[test] = 0.0
    beta = model.draws(8000, rng, train)
    log_lik_test = model.log_lik(beta)[:, test].reshape(4, 2000, -1)
    result = bayesij.holdout(log_lik_test)
    exact = model.log_predictive(train, test)
    z = (result.pointwise["elpd"].to_numpy() - exact) / result.pointwise["mcse"].to_numpy()
    assert np.all(np.abs(z) < 4), z
    assert abs(result.elpd - exact.sum()) < 4 * result.mcse
    assert np.all(result.pointwise["r_eff"].between(0.9, 1.1))  # independent draws


def test_prediction_errors_distinguish_the_error_of_the_mean_from_the_expected_error():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(200_000, 1))
    z = (z - z.mean()) / z.std()  # mean 0, variance 1 exactly
    mu, tau, y = np.array([0.0, 1.0, 3.0]), 0.8, np.array([0.5, 1.0, 1.0])
    draws = mu + tau * z
    errors = bayesij.prediction_errors(draws, y)
    d2 = (mu - y) ** 2
    np.testing.assert_allclose(errors.pointwise["squared_error_of_mean"], d2, atol=1e-12)
    np.testing.assert_allclose(errors.pointwise["expected_squared_error"], d2 + tau**2)
    summary = errors.summary
    assert summary["mse_of_mean"] == pytest.approx(d2.mean())
    assert summary["expected_mse"] == pytest.approx(d2.mean() + tau**2)
    assert summary["sqrt_expected_mse"] == pytest.approx(np.sqrt(d2.mean() + tau**2))
    # One point: E|mu + tau z - y| is the folded-normal mean (closed form).
    d = mu[:1] - y[:1]
    single = bayesij.prediction_errors(draws[:, :1], y[:1]).summary["expected_rmse"]
    folded = tau * np.sqrt(2 / np.pi) * np.exp(-(d**2) / (2 * tau**2)) + d * (
        1 - 2 * norm.cdf(-d / tau)
    )
    assert single == pytest.approx(float(folded[0]), rel=5e-3)
    assert summary["expected_rmse"] < summary["sqrt_expected_mse"]  # Jensen


def test_prediction_errors_add_the_elpd_and_check_their_inputs():
    rng = np.random.default_rng(6)
    draws = rng.normal(size=(4, 100, 5))
    y = rng.normal(size=5)
    log_lik = -0.5 * (y - draws) ** 2 - 0.5 * np.log(2 * np.pi)
    errors = bayesij.prediction_errors(draws, y, log_lik=log_lik)
    assert errors.summary["elpd"] == pytest.approx(bayesij.holdout(log_lik).elpd)
    with pytest.raises(ValueError, match=r"y_test: found shape \(4,\); expected one value"):
        bayesij.prediction_errors(draws, y[:4])
    with pytest.raises(ValueError, match=r"log_lik: found 3 points; expected the 5 test"):
        bayesij.prediction_errors(draws, y, log_lik=log_lik[..., :3])


def test_a_test_group_of_either_arviz_generation_and_float32_draws():
    """``idata["log_likelihood_test"]`` is a Dataset on ArviZ 0.23 and a DataTree node on
    1.x; both work, and float32 draws read through it give the float64 answer."""
    import arviz as az
    import xarray as xr

    rng = np.random.default_rng(9)
    values = rng.normal(-1, 0.2, size=(4, 100, 3)).astype(np.float32)
    test = xr.Dataset({"y": (("chain", "draw", "point"), values)})
    posterior = xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(4, 100)))})
    groups = {"posterior": posterior, "log_likelihood": test, "log_likelihood_test": test}
    if ARVIZ_1:
        idata = xr.DataTree.from_dict(groups)
    else:
        idata = az.InferenceData(**groups)
    result = bayesij.holdout(idata["log_likelihood_test"])
    expected = bayesij.holdout(values.astype(np.float64))
    np.testing.assert_allclose(result.pointwise["elpd"], expected.pointwise["elpd"], rtol=1e-12)
    assert bayesij.from_inference_data(idata).log_lik.dtype == np.float32
