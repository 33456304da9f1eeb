"""Small simulated data sets for the shipped models: for tests, examples and notebooks."""

from __future__ import annotations

import numpy as np

__all__ = ["example_data"]

#: The classic eight schools estimates and standard errors (Rubin, 1981).
EIGHT_SCHOOLS_Y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]
EIGHT_SCHOOLS_SIGMA = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]


def _design(rng, n: int, k: int) -> np.ndarray:
    return rng.normal(size=(n, k))


def _linear(rng, n):
    x = _design(rng, n, 2)
    return {"N": n, "K": 2, "X": x, "y": 1.0 + x @ [0.5, -0.3] + rng.normal(size=n)}


def _logistic(rng, n):
    x = _design(rng, n, 2)
    p = 1 / (1 + np.exp(-(-0.3 + x @ [1.0, -0.5])))
    return {"N": n, "K": 2, "X": x, "y": (rng.random(n) < p).astype(int)}


def _counts(rng, n, overdispersed: bool):
    x = _design(rng, n, 1)
    exposure = rng.uniform(0.5, 2.0, size=n)
    mean = exposure * np.exp(0.5 + 0.4 * x[:, 0])
    if overdispersed:
        mean = rng.gamma(4.0, mean / 4.0)
    return {"N": n, "K": 1, "X": x, "y": rng.poisson(mean), "exposure": exposure}


def _poisson_gamma(rng, n):
    return {"N": n, "y": rng.poisson(rng.gamma(2.0, 1 / 0.5, size=n)), "a": 2.0}


def _eight_schools(rng, n):
    return {"J": 8, "y": np.array(EIGHT_SCHOOLS_Y), "sigma": np.array(EIGHT_SCHOOLS_SIGMA)}


def _varying_intercept(rng, n):
    n_groups = max(2, n // 5)
    g = np.arange(n) % n_groups + 1
    x = _design(rng, n, 1)
    alpha = 1.0 + 0.7 * rng.normal(size=n_groups)
    y = alpha[g - 1] + 0.5 * x[:, 0] + rng.normal(size=n)
    return {"N": n, "K": 1, "J": n_groups, "X": x, "g": g, "y": y}


def _linear_holdout(rng, n):
    train, test = _linear(rng, n), _linear(rng, max(1, n // 2))
    return {**train, "N_test": test["N"], "X_test": test["X"], "y_test": test["y"]}


def _ar(rng, n, p=2):
    y = np.zeros(n + p)
    for t in range(p, n + p):
        y[t] = 0.3 + 0.5 * y[t - 1] - 0.2 * y[t - 2] + rng.normal()
    return {"P": p, "N": n, "y": y}


def _poisson_hmm(rng, n):
    """Two-state Poisson counts: a quiet state (rate 3) and a busy one (rate 10)."""
    stay, rates = np.array([0.9, 0.85]), np.array([3.0, 10.0])
    z = np.zeros(n, dtype=int)
    for t in range(1, n):
        z[t] = z[t - 1] if rng.random() < stay[z[t - 1]] else 1 - z[t - 1]
    return {"N": n, "y": rng.poisson(rates[z])}


_MAKERS = {
    "ar": _ar,
    "poisson_hmm": _poisson_hmm,
    "linear_regression": _linear,
    "linear_regression_holdout": _linear_holdout,
    "linear_regression_kfold": lambda rng, n: {**_linear(rng, n), "n_folds": 5, "k": 2},
    "logistic_regression": _logistic,
    "poisson_regression": lambda rng, n: _counts(rng, n, overdispersed=False),
    "negbin_regression": lambda rng, n: _counts(rng, n, overdispersed=True),
    "poisson_gamma": _poisson_gamma,
    "eight_schools": _eight_schools,
    "varying_intercept": _varying_intercept,
}


def example_data(name: str, n: int = 40, seed: int = 0) -> dict:
    """Simulated data for the shipped model ``name`` with unit weights.

    ``n`` observations (eight schools always has its 8 schools). The returned dictionary
    is the model's data block, ``weights`` included (all ones: the ordinary fit).
    """
    if name not in _MAKERS:
        raise ValueError(f"name: found {name!r}; expected one of {sorted(_MAKERS)}.")
    data = _MAKERS[name](np.random.default_rng(seed), n)
    size = data.get("N", data.get("J"))
    return {**data, "weights": np.ones(size)}
