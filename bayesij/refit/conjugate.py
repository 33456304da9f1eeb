"""Closed-form ground truth: a normal linear model with known noise sd and a Gaussian prior.

Under observation weights ``w`` the posterior of ``beta`` is Gaussian with precision
``P_w = V0^-1 + X^T W X / sigma^2`` and mean ``m_w = P_w^-1 (V0^-1 m0 + X^T W y / sigma^2)``,
so everything the estimators approximate (influence, bootstrap, leave-one-out, deleting a
set) is exact.
"""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import as_float_array, check_finite, check_real, fail

__all__ = ["ConjugateNormal", "FlatPriorRegression"]


class ConjugateNormal:
    """Weighted Bayesian linear regression ``y ~ N(X beta, sigma^2)``, ``beta ~ N(m0, V0)``.

    Parameters
    ----------
    X : array_like of shape (n_obs, n_coef)
    y : array_like of shape (n_obs,)
    sigma : float, default 1
        Known noise standard deviation.
    prior_mean : array_like of shape (n_coef,), optional
        Default zeros.
    prior_cov : array_like of shape (n_coef, n_coef), optional
        Default ``100 I``.
    """

    def __init__(self, X, y, sigma=1.0, prior_mean=None, prior_cov=None):
        self.X = np.atleast_2d(as_float_array(X, "X"))
        self.y = as_float_array(y, "y")
        if self.y.ndim != 1:
            raise fail("y", f"shape {self.y.shape}", "a vector of observations")
        if self.X.shape[0] != self.y.shape[0]:
            raise fail(
                "y",
                f"{self.y.shape[0]} observations while X has {self.X.shape[0]} rows",
                "one row of X per observation",
            )
        check_finite(self.X, "X")
        check_finite(self.y, "y")
        self.sigma = check_real(sigma, "sigma", 0.0, low_open=True)
        p = self.X.shape[1]
        self.prior_mean = np.zeros(p) if prior_mean is None else np.asarray(prior_mean, float)
        self.prior_cov = 100.0 * np.eye(p) if prior_cov is None else np.asarray(prior_cov, float)
        self.prior_precision = np.linalg.inv(self.prior_cov)

    @property
    def n_obs(self) -> int:
        return self.y.size

    def posterior(self, weights=None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean (n_coef,) and covariance (n_coef, n_coef) under ``weights``."""
        w = np.ones(self.n_obs) if weights is None else np.asarray(weights, float)
        precision = self.prior_precision + (self.X.T * w) @ self.X / self.sigma**2
        cov = np.linalg.inv(precision)
        shift = self.prior_precision @ self.prior_mean + (self.X.T * w) @ self.y / self.sigma**2
        return cov @ shift, cov

    def draws(self, n_draws: int, rng, weights=None) -> np.ndarray:
        """Exact independent posterior draws, shape (n_draws, n_coef)."""
        mean, cov = self.posterior(weights)
        return rng.multivariate_normal(mean, cov, size=n_draws)

    def log_lik(self, beta: np.ndarray) -> np.ndarray:
        """Pointwise log-likelihood of draws ``beta`` (n_draws, n_coef): (n_draws, n_obs)."""
        resid = self.y - beta @ self.X.T
        return -0.5 * (resid / self.sigma) ** 2 - np.log(self.sigma) - 0.5 * np.log(2 * np.pi)

    def log_predictive(self, weights, points) -> np.ndarray:
        """Exact ``log p(y_n | data weighted by weights)`` for observations ``points``."""
        mean, cov = self.posterior(weights)
        x = self.X[points]
        var = self.sigma**2 + np.einsum("ni,ij,nj->n", x, cov, x)
        resid = self.y[points] - x @ mean
        return -0.5 * np.log(2 * np.pi * var) - 0.5 * resid**2 / var


class FlatPriorRegression:
    """Weighted normal linear regression with unknown noise sd and the flat prior
    ``p(beta, log sigma) ∝ 1``: the Bayesian model of an OLS analysis, whose posterior and
    every weighted refit are closed-form.

    Under weights ``w`` (``nu = sum w - p > 2``): ``beta_w = (X^T W X)^-1 X^T W y``,
    ``RSS_w = sum_n w_n (y_n - x_n beta_w)^2``, ``sigma^2 ~ RSS_w / chi^2_nu`` and
    ``beta | sigma ~ N(beta_w, sigma^2 (X^T W X)^-1)``, so the posterior mean of ``beta`` is
    ``beta_w`` and its posterior sd ``sqrt(RSS_w / (nu - 2) [(X^T W X)^-1]_kk)`` exactly: a
    set's effect on ``mean ± z sd`` needs no Monte Carlo at all.

    Parameters
    ----------
    X : array_like of shape (n_obs, n_coef)
    y : array_like of shape (n_obs,)

    References
    ----------
    .. [1] Gelman, A. et al. (2013). Bayesian Data Analysis, 3rd ed., section 14.2.
    """

    def __init__(self, X, y):
        self.X = np.atleast_2d(as_float_array(X, "X"))
        self.y = as_float_array(y, "y")
        if self.y.ndim != 1 or self.X.shape[0] != self.y.shape[0]:
            raise fail("y", f"shape {self.y.shape} for X {self.X.shape}", "one y per row of X")
        check_finite(self.X, "X")
        check_finite(self.y, "y")

    @property
    def n_obs(self) -> int:
        return self.y.size

    def fit(self, weights=None) -> tuple[np.ndarray, np.ndarray, float, float]:
        """``(beta_w, (X^T W X)^-1, RSS_w, nu)`` under ``weights`` (default all 1)."""
        w = np.ones(self.n_obs) if weights is None else np.asarray(weights, float)
        gram = (self.X.T * w) @ self.X
        unscaled = np.linalg.inv(gram)
        beta = unscaled @ ((self.X.T * w) @ self.y)
        rss = float(w @ (self.y - self.X @ beta) ** 2)
        nu = float(w.sum()) - self.X.shape[1]
        if nu <= 2:
            raise fail("weights", f"{w.sum():g} in all", f"more than {self.X.shape[1] + 2}")
        return beta, unscaled, rss, nu

    def posterior_moments(self, weights=None) -> tuple[np.ndarray, np.ndarray]:
        """Exact posterior mean and sd of every coefficient, (n_coef,) each."""
        beta, unscaled, rss, nu = self.fit(weights)
        return beta, np.sqrt(rss / (nu - 2) * np.diag(unscaled))

    def draws(self, n_draws: int, rng, weights=None) -> tuple[np.ndarray, np.ndarray]:
        """Exact independent draws: ``beta`` (n_draws, n_coef) and ``sigma`` (n_draws,)."""
        beta_w, unscaled, rss, nu = self.fit(weights)
        sigma = np.sqrt(rss / rng.chisquare(nu, size=n_draws))
        root = np.linalg.cholesky(unscaled)
        beta = beta_w + sigma[:, None] * (rng.standard_normal((n_draws, beta_w.size)) @ root.T)
        return beta, sigma

    def log_lik(self, beta: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """Pointwise log-likelihood of draws, (n_draws, n_obs)."""
        resid = (self.y - beta @ self.X.T) / sigma[:, None]
        return -0.5 * resid**2 - np.log(sigma)[:, None] - 0.5 * np.log(2 * np.pi)

    def grad_log_posterior(self, beta: np.ndarray, sigma: np.ndarray, weights=None) -> np.ndarray:
        """Gradient of the log posterior in ``(beta, log sigma)`` at each draw,
        (n_draws, n_coef + 1): ``X^T W r / sigma^2`` and ``-sum w + RSS_w(beta) / sigma^2``
        (the flat prior on ``log sigma`` contributes nothing)."""
        w = np.ones(self.n_obs) if weights is None else np.asarray(weights, float)
        resid = self.y - beta @ self.X.T  # (S, N)
        d_beta = (resid * w) @ self.X / sigma[:, None] ** 2
        d_log_sigma = -w.sum() + (resid**2 @ w) / sigma**2
        return np.column_stack([d_beta, d_log_sigma])
