"""Closed-form ground truth for the tests, built on bayesij.refit.conjugate.ConjugateNormal.

Under observation weights w the posterior of beta is Gaussian with
precision  P_w = V0^-1 + X^T W X / sigma^2  and mean  m_w = P_w^-1 (V0^-1 m0 + X^T W y / sigma^2),
so every quantity the estimators approximate (influence, bootstrap, leave-one-out) is exact.
"""

from __future__ import annotations

import numpy as np

from bayesij.refit.conjugate import ConjugateNormal

__all__ = ["ConjugateNormal"]


def heteroskedastic_regression(n, rng, p=2, noise=lambda x: 0.5 + np.abs(x[:, 1])):
    """Design with intercept and p - 1 normal covariates; noise sd depends on x (misspecified)."""
    X = np.column_stack([np.ones(n), rng.normal(size=(n, p - 1))])
    y = X @ np.linspace(1.0, 2.0, p) + noise(X) * rng.normal(size=n)
    return X, y


def exact_log_lik_cumulants(model: ConjugateNormal, weights=None):
    """Exact posterior cumulants kappa_1..kappa_4 of each l_n, shape (4, n_obs).

    With r_n = y_n - x_n beta ~ N(m_n, v_n) under the (weighted) posterior,
    l_n = c - r_n^2 / (2 sigma^2) and r_n^2 / v_n is noncentral chi-square(1, m_n^2 / v_n),
    whose j-th cumulant is 2^(j-1) (j-1)! (1 + j lambda).
    """
    mean, cov = model.posterior(weights)
    m = model.y - model.X @ mean
    v = np.einsum("ni,ij,nj->n", model.X, cov, model.X)
    c = -np.log(model.sigma) - 0.5 * np.log(2 * np.pi)
    scale = -1 / (2 * model.sigma**2)
    kappas = [c + scale * (m**2 + v)]
    for j, factorial in [(2, 1), (3, 2), (4, 6)]:
        kappas.append(scale**j * v**j * 2 ** (j - 1) * factorial * (1 + j * m**2 / v))
    return np.array(kappas)


def exact_log_mean_exp(model: ConjugateNormal, alpha, weights=None):
    """Exact log E[p(y_n | beta)^alpha] under the (weighted) posterior, shape (n_obs,)."""
    mean, cov = model.posterior(weights)
    m = model.y - model.X @ mean
    v = np.einsum("ni,ij,nj->n", model.X, cov, model.X)
    c = -np.log(model.sigma) - 0.5 * np.log(2 * np.pi)
    t = alpha / (2 * model.sigma**2)
    return alpha * c - 0.5 * np.log1p(2 * t * v) - t * m**2 / (1 + 2 * t * v)


def exact_loo_log_predictive(model: ConjugateNormal):
    """log p(y_n | y_-n) from the closed-form posterior without observation n, shape (n_obs,)."""
    out = np.empty(model.n_obs)
    for n in range(model.n_obs):
        weights = np.ones(model.n_obs)
        weights[n] = 0
        out[n] = model.log_predictive(weights, [n])[0]
    return out


def hierarchical_normal(n_groups, n_per_group, rng, sigma=1.0, tau=0.5, mu_sd=10.0):
    """Varying intercepts y_gi ~ N(alpha_g, sigma^2), alpha_g ~ N(mu, tau^2), mu ~ N(0, mu_sd^2).

    With sigma and tau known this is a normal linear model in (mu, alpha_1..alpha_G) with a
    correlated Gaussian prior, so the posterior under any weights is closed form.
    Returns the model and the group label of each observation.
    """
    groups = np.repeat(np.arange(n_groups), n_per_group)
    alpha = rng.normal(0.0, 2 * tau, size=n_groups)
    y = alpha[groups] + sigma * rng.normal(size=groups.size)
    X = np.zeros((groups.size, 1 + n_groups))
    X[np.arange(groups.size), 1 + groups] = 1.0
    precision = np.zeros((1 + n_groups, 1 + n_groups))
    precision[0, 0] = 1 / mu_sd**2 + n_groups / tau**2
    precision[0, 1:] = precision[1:, 0] = -1 / tau**2
    precision[1:, 1:] = np.eye(n_groups) / tau**2
    model = ConjugateNormal(X, y, sigma=sigma, prior_cov=np.linalg.inv(precision))
    return model, groups


def exact_influence(model: ConjugateNormal) -> np.ndarray:
    """Exact ``d E_w[beta] / d w_n`` at ``w = 1``, shape (n_coef, n_obs)."""
    mean, cov = model.posterior()
    resid = model.y - model.X @ mean
    return cov @ (model.X * resid[:, None]).T / model.sigma**2


def exact_bootstrap_means(model: ConjugateNormal, n_boot: int, rng) -> np.ndarray:
    """Posterior means under multinomial bootstrap weights, shape (n_boot, n_coef)."""
    n = model.n_obs
    weights = rng.multinomial(n, np.full(n, 1 / n), size=n_boot)
    xtwx = np.einsum("bn,ni,nj->bij", weights, model.X, model.X) / model.sigma**2
    xtwy = weights @ (model.X * model.y[:, None]) / model.sigma**2
    rhs = model.prior_precision @ model.prior_mean + xtwy
    return np.linalg.solve(model.prior_precision + xtwx, rhs[..., None])[..., 0]


def small_regression(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An intercept and one normal covariate, y = 1 + 0.5 x + N(0, 1) noise."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    return X, X @ [1.0, 0.5] + rng.normal(size=n)


def ar2_fit(n_times: int, seed: int = 1):
    """An AR(2) series as a conjugate regression on its two lags (rows: y_t | y_t-1, y_t-2),
    so every conditional term and every LFO predictive has a closed form: the backend and
    its full-data fit."""
    from bayesij.refit import ConjugateNormalBackend

    rng = np.random.default_rng(seed)
    y = np.zeros(n_times + 2)
    for t in range(2, n_times + 2):
        y[t] = 0.5 * y[t - 1] - 0.3 * y[t - 2] + rng.normal()
    backend = ConjugateNormalBackend(np.column_stack([y[1:-1], y[:-2]]), y[2:], draws=4000)
    return backend, backend.fit(np.ones(n_times))


def lfo_closed_form(backend, min_train: int, horizon: int) -> np.ndarray:
    """log p(y_i..y_i+M-1 | y_<i) at every origin: N(X_f m_i, sigma^2 I + X_f S_i X_f^T)."""
    from scipy.stats import multivariate_normal

    model, out = backend.model, []
    n_times = model.y.size
    for i in range(min_train, n_times - horizon + 1):
        weights = np.r_[np.ones(i), np.zeros(n_times - i)]
        mean, cov = model.posterior(weights)
        block = model.X[i : i + horizon]
        noise = model.sigma**2 * np.eye(horizon)
        predictive = multivariate_normal(block @ mean, noise + block @ cov @ block.T)
        out.append(predictive.logpdf(model.y[i : i + horizon]))
    return np.array(out)


def noise_dominated_slope():
    """A slope from 2000 heavy-tailed observations and only 2 x 20 draws: its IJ variance is
    buried in Monte Carlo noise (corrected variance below 2 MCSE). Quantity ``b``."""
    from bayesij import from_arrays

    rng = np.random.default_rng(1)
    n = 2000
    x = rng.normal(size=n)
    y = x + rng.standard_t(2, size=n)
    beta = 1.0 + rng.normal(size=(2, 20, 1)) / np.sqrt(n)
    return from_arrays(beta, -0.5 * (y - beta * x) ** 2, quantity_names=["b"])
