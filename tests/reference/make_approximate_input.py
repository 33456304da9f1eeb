"""Write tests/reference/approximate_posterior_input.csv: draws of a Laplace approximation
of a logistic regression posterior, for R loo's ``loo_approximate_posterior``.

N = 40 observations, intercept and one slope, prior N(0, 2.5^2) on each; the Laplace
approximation is the normal at the posterior mode with the inverse Hessian as covariance,
its covariance doubled so that the correction weights matter. 1000 independent draws. Columns:
``log_p`` (log prior + log-likelihood: the unnormalised log posterior), ``log_g`` (the
approximation's log density), then ``obs1..obs40`` (pointwise log-likelihood). Run from the
repository root: ``python tests/reference/make_approximate_input.py``, then
``Rscript tests/reference/r_loo_approximate.R``.
"""

from pathlib import Path

import numpy as np
from scipy.special import expit, log_expit
from scipy.stats import multivariate_normal, norm

HERE = Path(__file__).parent


def main() -> None:
    rng = np.random.default_rng(20261124)
    n_obs = 40
    X = np.column_stack([np.ones(n_obs), rng.normal(size=n_obs)])
    y = (rng.uniform(size=n_obs) < expit(X @ [-0.5, 1.5])).astype(float)
    beta = np.zeros(2)
    for _ in range(50):  # Newton's method for the mode
        p = expit(X @ beta)
        gradient = X.T @ (y - p) - beta / 2.5**2
        hessian = -(X.T * (p * (1 - p))) @ X - np.eye(2) / 2.5**2
        beta = beta - np.linalg.solve(hessian, gradient)
    covariance = 2.0 * np.linalg.inv(-hessian)
    draws = rng.multivariate_normal(beta, covariance, size=1000)
    eta = draws @ X.T
    log_lik = y * log_expit(eta) + (1 - y) * log_expit(-eta)
    log_p = log_lik.sum(axis=1) + norm.logpdf(draws, 0, 2.5).sum(axis=1)
    log_g = multivariate_normal(beta, covariance).logpdf(draws)
    header = "log_p,log_g," + ",".join(f"obs{i + 1}" for i in range(n_obs))
    np.savetxt(
        HERE / "approximate_posterior_input.csv",
        np.column_stack([log_p, log_g, log_lik]),
        delimiter=",",
        header=header,
        comments="",
        fmt="%.17g",
    )


if __name__ == "__main__":
    main()
