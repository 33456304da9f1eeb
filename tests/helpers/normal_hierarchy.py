"""A normal hierarchy with known variances: exact posteriors under any weights, exact
leave-one-group-out predictive densities, and a factory for resampled clusters.

    y_n = a_g(n) + e_n,   a_g ~ N(mu, tau^2),   e_n ~ N(0, sigma^2),   mu ~ N(0, 100^2)

The joint posterior of (mu, a_1, ..., a_G) under observation weights ``w`` (multiplying each
log-likelihood term) is Gaussian: precision ``Q`` and linear term ``b`` of the quadratic
log density, drawn exactly.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.stats import multivariate_normal, norm

import bayesij

PRIOR_SD = 100.0


class NormalHierarchy:
    def __init__(self, y, codes, tau: float = 1.0, sigma: float = 1.0):
        self.y, self.codes = np.asarray(y, float), np.asarray(codes, int)
        self.tau, self.sigma = float(tau), float(sigma)
        self.n_groups = int(self.codes.max()) + 1

    def posterior(self, weights=None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of (mu, a_1..a_G) under ``weights``."""
        w = np.ones(self.y.size) if weights is None else np.asarray(weights, float)
        g = self.n_groups
        q = np.zeros((g + 1, g + 1))
        b = np.zeros(g + 1)
        q[0, 0] = 1 / PRIOR_SD**2 + g / self.tau**2
        q[0, 1:] = q[1:, 0] = -1 / self.tau**2
        per_group = np.bincount(self.codes, w, minlength=g) / self.sigma**2
        q[1:, 1:] = np.diag(1 / self.tau**2 + per_group)
        b[1:] = np.bincount(self.codes, w * self.y, minlength=g) / self.sigma**2
        cov = np.linalg.inv(q)
        return cov @ b, cov

    def draws(self, weights=None, chains: int = 4, draws: int = 1000, seed: int = 0):
        # Through the Cholesky factor, which is unique: NumPy's multivariate_normal goes
        # through an SVD whose singular vectors' signs depend on the LAPACK build (NumPy
        # 2.4 and 2.5 give other draws from one seed).
        mean, cov = self.posterior(weights)
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((chains * draws, mean.size))
        theta = mean + z @ np.linalg.cholesky(cov).T
        return theta.reshape(chains, draws, -1)

    def log_lik(self, theta: np.ndarray) -> np.ndarray:
        return norm.logpdf(self.y, theta[..., 1:][..., self.codes], self.sigma)

    def fit(self, weights=None, chains: int = 4, draws: int = 1000, seed: int = 0):
        """A Posterior of mu and the a's (names ``a[g]``), unweighted log-likelihood."""
        theta = self.draws(weights, chains, draws, seed)
        names = ["mu"] + [f"a[{g}]" for g in range(self.n_groups)]
        return bayesij.from_arrays(theta, self.log_lik(theta), quantity_names=names)

    def tree(self, chains: int = 4, draws: int = 1000, seed: int = 0) -> xr.DataTree:
        """The fit as a DataTree: ``a`` over a ``school`` dim, the index in constant_data."""
        theta = self.draws(None, chains, draws, seed)
        schools = [f"s{g}" for g in range(self.n_groups)]
        coords = {"chain": np.arange(chains), "draw": np.arange(draws), "school": schools}
        posterior = xr.Dataset(
            {
                "mu": (("chain", "draw"), theta[..., 0]),
                "a": (("chain", "draw", "school"), theta[..., 1:]),
            },
            coords=coords,
        )
        log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), self.log_lik(theta))})
        constant = xr.Dataset({"school_idx": ("obs", self.codes)})
        return xr.DataTree.from_dict(
            {"posterior": posterior, "log_likelihood": log_lik, "constant_data": constant}
        )

    def logo_exact(self, group: int) -> float:
        """``log p(y_g | y_-g)``: the group's joint predictive density given the others."""
        held = self.codes == group
        mean, cov = self.posterior(np.where(held, 0.0, 1.0))
        n = int(held.sum())
        spread = self.sigma**2 * np.eye(n) + (self.tau**2 + cov[0, 0]) * np.ones((n, n))
        return float(multivariate_normal(np.full(n, mean[0]), spread).logpdf(self.y[held]))

    def kfold_exact(self, fold_groups) -> float:
        """``sum_g log p(y_g | y_-F)`` over the groups of a fold ``F``: each held-out group's
        joint predictive density given the data outside the fold (the groups of a fold
        share the uncertainty about mu, but each is scored on its own)."""
        held = np.isin(self.codes, fold_groups)
        mean, cov = self.posterior(np.where(held, 0.0, 1.0))
        total = 0.0
        for g in fold_groups:
            rows = self.codes == g
            n = int(rows.sum())
            spread = self.sigma**2 * np.eye(n) + (self.tau**2 + cov[0, 0]) * np.ones((n, n))
            total += multivariate_normal(np.full(n, mean[0]), spread).logpdf(self.y[rows])
        return float(total)

    def resampled_fit(self, rows, groups):
        """The factory of a cluster bootstrap: the model refitted to ``y[rows]`` with the
        clusters ``groups`` (mu only: the clusters' own effects have no counterpart); its
        draws seeded by the resample."""
        model = NormalHierarchy(self.y[rows], groups, self.tau, self.sigma)
        theta = model.draws(None, 4, 500, seed=int(np.sum(rows * np.arange(rows.size))))
        return bayesij.from_arrays(theta[..., :1], model.log_lik(theta), quantity_names=["mu"])


def simulate(n_groups: int = 10, per_group: int = 5, tau: float = 1.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(n_groups), per_group)
    y = 0.5 + rng.normal(0, tau, n_groups)[codes] + rng.normal(size=codes.size)
    return NormalHierarchy(y, codes, tau=tau, sigma=1.0)
