"""The estimating-equation AMIP of an OLS regression (Broderick, Giordano & Meager 2020),
written out here as the independent reference for bayesij.amip: rank observations by the
first-order influence of dropping them on ``beta_k + s z se_k``, then refit exactly (closed
form) without the top 1, 2, ... until the target is reached. The metric is that of the
flat-prior Bayesian twin (posterior mean ``beta_w``, posterior sd ``sqrt(RSS_w / (nu - 2)
[(X^T W X)^-1]_kk)``), which every refit gives without Monte Carlo error."""

from __future__ import annotations

import numpy as np


def heavy_tailed_experiment(
    n: int, seed: int, effect: float = 0.16, outliers: float = 0.01, spread: float = 30.0
):
    """A field experiment's profits: an intercept, a randomised treatment, and noise from a
    mixture where ``outliers`` of the households have ``spread`` times the sd (they carry
    most of the residual sum of squares). Returns X (n, 2) and y (n,)."""
    rng = np.random.default_rng(seed)
    treated = rng.integers(0, 2, size=n).astype(float)
    scale = np.where(rng.random(n) < outliers, spread, 1.0)
    y = 1.0 + effect * treated + scale * rng.standard_normal(n)
    return np.column_stack([np.ones(n), treated]), y


def t4_regression(n_obs: int = 2000, seed: int = 1):
    """``benchmarks/audit.py``'s design: an intercept and nine normal covariates, small
    coefficients, t(4) noise (fitted by the normal model: outliers). Returns X (n, 10),
    y."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_obs), rng.normal(size=(n_obs, 9))])
    return X, X @ (rng.normal(size=10) * 0.05) + rng.standard_t(4, size=n_obs)


def kidiq_shaped(seed: int = 1):
    """A regression shaped like rstanarm's kidiq example (N = 434: a test score against a
    0/1 high-school indicator and an IQ score, residual sd 18). Returns X (434, 3), y."""
    rng = np.random.default_rng(seed)
    n = 434
    hs = (rng.random(n) < 0.79).astype(float)
    iq = rng.normal(100, 15, n)
    y = 26 + 6 * hs + 0.56 * iq + 18 * rng.standard_normal(n)
    return np.column_stack([np.ones(n), hs, iq]), y


def mesquite_shaped(seed: int = 2):
    """A small regression shaped like Gelman & Hill's mesquite example (N = 46, an
    intercept and six covariates, t(4) noise). Returns X (46, 7), y."""
    rng = np.random.default_rng(seed)
    n = 46
    Z = rng.normal(size=(n, 6)) * [1, 0.8, 0.5, 1.2, 0.7, 1.0]
    y = 5 + Z @ [0.3, 1.0, 0.4, 0.1, 0.6, -0.2] + 0.4 * rng.standard_t(4, n)
    return np.column_stack([np.ones(n), Z]), y


def metric(X, y, weights, k: int, sign: int, z: float) -> float:
    """``mean + sign z sd`` of coefficient ``k`` of the flat-prior posterior, exactly."""
    gram = (X.T * weights) @ X
    unscaled = np.linalg.inv(gram)
    beta = unscaled @ ((X.T * weights) @ y)
    rss = weights @ (y - X @ beta) ** 2
    nu = weights.sum() - X.shape[1]
    return float(beta[k] + sign * z * np.sqrt(rss / (nu - 2) * unscaled[k, k]))


def metric_sign(result) -> int:
    """The ``sign`` of :func:`metric` an AMIP result's metric is: 0 for its mean, -1 and 1
    for its interval's lower and upper end."""
    return {"mean": 0, "lower end": -1, "upper end": 1}[result.metric]


def mean_sd(X, y, weights) -> float:
    """The residual sd's posterior mean of the flat-prior posterior under ``weights``,
    exactly: ``sqrt(RSS / 2) Gamma((nu - 1) / 2) / Gamma(nu / 2)``, ``nu = sum(w) - p``
    (``sigma^2 ~ InvGamma(nu / 2, RSS / 2)``)."""
    from scipy.special import gammaln

    gram = (X.T * weights) @ X
    beta = np.linalg.solve(gram, (X.T * weights) @ y)
    rss, nu = weights @ (y - X @ beta) ** 2, weights.sum() - X.shape[1]
    return float(np.sqrt(rss / 2) * np.exp(gammaln((nu - 1) / 2) - gammaln(nu / 2)))


def moment_effects(X, y, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The derivatives of coefficient ``k``'s posterior mean and variance in each
    observation's weight at 1 (n,) each, and the variance."""
    unscaled = np.linalg.inv(X.T @ X)
    beta = unscaled @ (X.T @ y)
    e = y - X @ beta
    n, p = X.shape
    rss, nu = e @ e, n - p
    h = X @ unscaled[:, k]  # (A x_n)_k
    d_beta = h * e  # d beta_k / d w_n
    var = rss / (nu - 2) * unscaled[k, k]
    d_var = (e**2 * unscaled[k, k] - rss * unscaled[k, k] / (nu - 2) - rss * h**2) / (nu - 2)
    return d_beta, d_var, float(var)


def linear_effects(X, y, k: int, sign: int, z: float) -> np.ndarray:
    """First-order change of the metric from dropping each observation (weight 1 -> 0)."""
    d_beta, d_var, var = moment_effects(X, y, k)
    return -(d_beta + sign * z * d_var / (2 * np.sqrt(var)))


def ols_amip(X, y, k: int, target: str, z: float = 1.96, max_drop: int | None = None):
    """The refit-confirmed OLS-AMIP set for ``target`` ('sign', 'significance',
    'sign_and_significance'): the smallest prefix of the first-order ranking whose exact
    refit reaches the target. Returns (set of positions, metric after) or (None, nan)."""
    n = y.size
    ones = np.ones(n)
    mean0 = metric(X, y, ones, k, 0, z)
    same = 1 if mean0 >= 0 else -1
    sign = {"sign": 0, "significance": -same, "sign_and_significance": same}[target]
    start = metric(X, y, ones, k, sign, z)
    direction = -1 if start > 0 else 1
    gain = direction * linear_effects(X, y, k, sign, z)
    order = np.argsort(-gain, kind="stable")
    order = order[gain[order] > 0][: max_drop or n // 10]
    weights = ones.copy()
    for size, unit in enumerate(order, start=1):
        weights[unit] = 0.0
        after = metric(X, y, weights, k, sign, z)
        if np.sign(after) != np.sign(start):
            return order[:size], after
    return None, float("nan")


def exact_greedy(X, y, k: int, sign: int, z: float, size: int) -> np.ndarray:
    """The metric ``beta_k + sign z sd_k`` (:func:`metric`) after each of ``size`` greedy
    steps, each dropping the one observation whose exact refit moves the metric most
    towards 0 (the other side of 0 first): (size,). No ranking by influence, every
    candidate refitted exactly: the strongest search these tests can afford."""
    weights, path = np.ones(y.size), []
    start = metric(X, y, weights, k, sign, z)
    for _ in range(size):
        best, best_value = -1, np.inf
        for i in np.flatnonzero(weights > 0):
            weights[i] = 0.0
            value = metric(X, y, weights, k, sign, z) * np.sign(start)  # > 0: not crossed
            weights[i] = 1.0
            if value < best_value:
                best, best_value = i, value
        weights[best] = 0.0
        path.append(best_value * np.sign(start))
    return np.array(path)


def smallest_prefix(reaches, limit: int) -> int | None:
    """The smallest prefix size up to ``limit`` for which ``reaches(size)`` holds, by
    bisection (the prefixes' change grows along them), or None when ``limit`` does not."""
    if not reaches(limit):
        return None
    low, high = 0, limit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


class RegressionDensity:
    """The flat-prior normal regression's log density (``refit.FlatPriorRegressionBackend``)
    on its unconstrained scale ``(beta, log sigma)``, ``p(beta, log sigma) ∝ 1``: what a
    model density passed as ``grad_log_posterior`` gives moment matching (``log_prob``,
    ``log_lik_i``), with the gradient and unconstrained draws ``fit_with_gradient``
    returned (each (n_chains, n_draws, p + 1))."""

    def __init__(self, X, y, gradient, unconstrained):
        self.X, self.y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        self.gradient, self.unconstrained = gradient, unconstrained

    def grad_log_posterior(self, fit):
        return self.gradient, self.unconstrained

    def log_prob(self, u):
        residual = self.y - u[:, :-1] @ self.X.T
        return -0.5 * np.sum(residual**2, axis=1) / np.exp(2 * u[:, -1]) - self.y.size * u[:, -1]

    def log_lik_i(self, u, i):
        residual = self.y[i] - u[:, :-1] @ self.X[i]
        return -0.5 * residual**2 / np.exp(2 * u[:, -1]) - u[:, -1]
