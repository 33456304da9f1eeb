"""PSIS-LOO of non-factorized normal models (Bürkner, Gabry & Vehtari 2021): the elpd of a
Gaussian-process regression equals its exact LOO — the posterior without each observation,
in closed form — within its Monte Carlo error; bad input is refused by name. (The per-draw
densities, normal and Student-t: tests/array/test_nonfactorized.py.)"""

import numpy as np
import pytest
from scipy.stats import norm

import bayesij


def _gp_covariance(n_obs: int, length: float = 0.15, noise: float = 0.3) -> np.ndarray:
    t = np.linspace(0, 1, n_obs)
    return np.exp(-0.5 * ((t[:, None] - t) / length) ** 2) + noise**2 * np.eye(n_obs)


def _exact_loo_gp_regression(y, X, cov):
    """log p(y_n | y_-n) of y ~ N(X beta, cov) with a flat prior on beta: refit without
    observation n (beta | y_-n normal), then the normal predictive of y_n."""
    out = []
    for n in range(y.size):
        keep = np.arange(y.size) != n
        inv_rest = np.linalg.inv(cov[np.ix_(keep, keep)])
        cross = cov[n, keep] @ inv_rest  # Sigma_{n,-n} Sigma_{-n}^{-1}
        V = np.linalg.inv(X[keep].T @ inv_rest @ X[keep])
        m = V @ X[keep].T @ inv_rest @ y[keep]
        b = X[n] - cross @ X[keep]
        centre = cross @ y[keep] + b @ m
        variance = cov[n, n] - cross @ cov[keep, n] + b @ V @ b
        out.append(norm.logpdf(y[n], centre, np.sqrt(variance)))
    return np.array(out)


def test_gp_regression_elpd_equals_exact_loo_within_mc_error():
    rng = np.random.default_rng(3)
    n_obs = 40
    t = np.linspace(0, 1, n_obs)
    X = np.column_stack([np.ones(n_obs), t])
    cov = _gp_covariance(n_obs)
    y = X @ [1.0, -2.0] + rng.multivariate_normal(np.zeros(n_obs), cov)
    y[7] += 3.0  # an outlier: its LOO density is far from the full-data one
    inv = np.linalg.inv(cov)
    V = np.linalg.inv(X.T @ inv @ X)
    beta = rng.multivariate_normal(V @ X.T @ inv @ y, V, size=(4, 1000))  # exact posterior
    result = bayesij.loo_nonfactorized(y, beta @ X.T, cov, convention=bayesij.PsisOptions(ddof=1))
    exact = _exact_loo_gp_regression(y, X, cov)
    pointwise = result.pointwise
    assert (pointwise["pareto_k"] < 0.7).all()
    error = np.abs(pointwise["elpd_loo"].to_numpy() - exact)
    assert (error < 4 * pointwise["mcse_elpd_loo"].to_numpy() + 1e-3).all()
    total_mcse = np.sqrt((pointwise["mcse_elpd_loo"] ** 2).sum())
    assert abs(result.elpd - exact.sum()) < 4 * total_mcse
    # The factorized (wrong) LOO of the same draws misses it by far more than that.
    marginal = norm.logpdf(y, beta @ X.T, np.sqrt(np.diag(cov)))
    with pytest.warns(UserWarning, match="k-hat above"):
        wrong = bayesij.loo(marginal, convention=bayesij.PsisOptions(ddof=1))
    assert abs(wrong.elpd - exact.sum()) > 10 * max(total_mcse, 0.1)
    assert abs(result.elpd - exact.sum()) < 0.1 * abs(wrong.elpd - exact.sum())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"covariance: found neither; expected exactly one"),
        ({"covariance": "C", "precision": "C"}, r"covariance: found both covariance and precision"),
        ({"covariance": "C", "df": -1.0}, r"df: found 1 non-positive"),
        ({"covariance": "C", "df": np.ones(3)}, r"df: found shape \(3,\)"),
        ({"covariance": "asym"}, r"covariance: found a matrix that is not symmetric"),
        ({"precision": "neg"}, r"precision: found a matrix that is not positive definite"),
        ({"covariance": "short"}, r"covariance: found shape \(4, 4\); expected \(n_chains"),
    ],
)
def test_bad_input_names_the_argument(kwargs, message):
    n_obs = 5
    matrices = {
        "C": np.eye(n_obs),
        "asym": np.eye(n_obs) + np.triu(np.ones((n_obs, n_obs)), 1) * 0.1,
        "neg": -np.eye(n_obs),
        "short": np.eye(4),
    }
    kwargs = {k: matrices.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ValueError, match=message):
        bayesij.loo_nonfactorized(np.zeros(n_obs), np.zeros((2, 3, n_obs)), **kwargs)
