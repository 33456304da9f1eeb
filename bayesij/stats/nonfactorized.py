"""PSIS-LOO of non-factorized multivariate normal and Student-t models."""

from __future__ import annotations

from bayesij.array.nonfactorized import loo_log_densities
from bayesij.stats.loo import LooResult, loo

__all__ = ["loo_nonfactorized"]


def loo_nonfactorized(
    y,
    mean,
    covariance=None,
    *,
    precision=None,
    df=None,
    convention=None,
    save_psis: bool = False,
) -> LooResult:
    """PSIS-LOO of a model whose observations are jointly normal or Student-t given the
    parameters (Gaussian processes, SAR / CAR spatial models, correlated errors).

    Such a model has no pointwise log-likelihood; each draw's LOO predictive density
    ``p(y_n | y_-n, theta)`` comes from the joint covariance in closed form (one inverse per
    draw gives all N), and PSIS-LOO weights the draws by its inverse (Bürkner, Gabry &
    Vehtari 2021). The result is a :class:`~bayesij.LooResult` like :func:`bayesij.loo`'s:
    k-hat per observation, elpd and its SE, ``compare`` with any other LOO result on the
    same observations.

    Parameters
    ----------
    y : array_like, shape (N,)
        The observations.
    mean : array_like, shape (n_chains, n_draws, N), (n_draws, N) or (N,)
        The location vector of each draw, e.g. ``X @ beta`` (or one for all draws).
    covariance : array_like, shape (n_chains, n_draws, N, N), (n_draws, N, N) or (N, N), optional
        The covariance matrix (normal) or scale matrix (Student-t) of each draw.
    precision : array_like, same shapes, optional
        Its inverse instead, which saves one inversion per draw: for a lag-SAR model
        ``y = rho W y + X beta + eps``, ``eps ~ N(0, sigma^2 I)``, the mean is
        ``(I - rho W)^-1 X beta`` and the precision ``(I - rho W)' (I - rho W) / sigma^2``.
        Exactly one of ``covariance`` and ``precision``.
    df : float or array_like of shape (n_chains, n_draws), optional
        Degrees of freedom of a multivariate Student-t model; None for the normal.
    convention, save_psis
        As :func:`bayesij.loo` (``r_eff`` by default per observation from the chains).

    Notes
    -----
    Cost: one Cholesky factor and triangular inverse per draw, O(S N^3), for matrices that
    vary by draw; a matrix shared by all draws is factored once. The direct computation, a
    conditional normal from each sub-covariance, is O(S N^4). ``benchmarks/nonfactorized.py``
    measures both.

    Returns
    -------
    LooResult
        ``pointwise`` has ``elpd_loo``, ``p_loo``, ``pareto_k`` per observation. ``p_loo``
        is ``lpd - elpd_loo`` with ``lpd`` the mean of the LOO predictive densities over
        the posterior (the quantity PSIS uses here), as in the paper.

    References
    ----------
    .. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2021). Efficient leave-one-out
       cross-validation for Bayesian non-factorized normal and Student-t models.
       Computational Statistics 36, 1243-1261.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> t = np.linspace(0, 1, 30)
    >>> cov = np.exp(-((t[:, None] - t) ** 2) / 0.1) + 0.1 * np.eye(30)   # GP + noise
    >>> y = rng.multivariate_normal(np.zeros(30), cov)
    >>> mu = rng.normal(y.mean(), 0.2, size=(4, 250, 1)) * np.ones(30)   # draws of a mean
    >>> result = bayesij.loo_nonfactorized(y, mu, cov)
    >>> result.pointwise.shape[0], bool(result.pointwise["pareto_k"].max() < 0.7)
    (30, True)
    """
    log_densities = loo_log_densities(y, mean, covariance, precision=precision, df=df)
    return loo(log_densities, convention=convention, save_psis=save_psis)
