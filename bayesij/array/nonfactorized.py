"""Leave-one-out predictive densities of non-factorized normal and Student-t models, per draw.

A model whose observations are jointly multivariate normal (or multivariate Student-t) given
the parameters — Gaussian processes, spatial (SAR/CAR) and time-series models written with a
joint covariance — has no pointwise log-likelihood ``log p(y_n | theta)``. What PSIS-LOO needs
instead is ``log p(y_n | y_-n, theta)`` per draw: the importance ratio of leaving ``y_n`` out
is ``1 / p(y_n | y_-n, theta)``, and the LOO predictive density is the weighted mean of
``p(y_n | y_-n, theta)`` (Bürkner, Gabry & Vehtari 2021). For the multivariate normal
``N(mu, C)`` with precision ``Q = C^-1`` and ``g = Q (y - mu)``, all N of them come from one
inverse per draw:

    y_n | y_-n, theta ~ N(y_n - g_n / Q_nn, 1 / Q_nn),

and for the multivariate Student-t with ``nu`` degrees of freedom and scale matrix ``C``,

    y_n | y_-n, theta ~ t_{nu + N - 1}(y_n - g_n / Q_nn,
                                       (nu + beta_-n) / (nu + N - 1) / Q_nn),

with ``beta_-n = (y - mu)' Q (y - mu) - g_n^2 / Q_nn`` the Mahalanobis distance of the other
observations.

References
----------
.. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2021). Efficient leave-one-out
   cross-validation for Bayesian non-factorized normal and Student-t models. Computational
   Statistics 36, 1243-1261.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from bayesij.array.checks import as_float_array, check_finite, fail

__all__ = ["loo_log_densities"]

#: Bytes of matrices (draws x N x N) held at once while inverting.
_CHUNK_BYTES = 64 * 2**20


def loo_log_densities(
    y,
    mean,
    covariance=None,
    *,
    precision=None,
    df=None,
) -> np.ndarray:
    """``log p(y_n | y_-n, theta_s)`` of a multivariate normal or Student-t model, per draw.

    Parameters
    ----------
    y : array_like, shape (N,)
        The observations.
    mean : array_like, shape (n_chains, n_draws, N) or (N,)
        The location vector of each draw (or one for all draws).
    covariance : array_like, shape (n_chains, n_draws, N, N) or (N, N), optional
        The covariance (normal) or scale matrix (Student-t) of each draw, or one for all.
    precision : array_like, same shapes, optional
        Its inverse instead (e.g. ``(I - rho W)' (I - rho W) / sigma^2`` of a SAR model),
        which saves the inversion. Exactly one of ``covariance`` and ``precision``.
    df : float or array_like of shape (n_chains, n_draws), optional
        Degrees of freedom of a multivariate Student-t; None for the normal.

    Returns
    -------
    numpy.ndarray, shape (n_chains, n_draws, N)
        The log densities, float64: the "log-likelihood" to give PSIS-LOO.

    References
    ----------
    .. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2021). Efficient leave-one-out
       cross-validation for Bayesian non-factorized normal and Student-t models.
       Computational Statistics 36, 1243-1261.
    """
    y = _observations(y)
    n_obs = y.size
    mean = _draws_of(mean, "mean", (n_obs,))
    if (covariance is None) == (precision is None):
        raise fail(
            "covariance",
            "both covariance and precision" if covariance is not None else "neither",
            "exactly one of covariance= and precision=",
        )
    matrix_name = "covariance" if precision is None else "precision"
    matrices = _draws_of(covariance if precision is None else precision, matrix_name, (n_obs,) * 2)
    draws_shape = _common_draws(mean, matrices)
    freedom = None if df is None else _degrees_of_freedom(df, draws_shape)
    out = np.full((*draws_shape, n_obs), np.nan)  # a draw left unwritten shows
    flat_out = out.reshape(-1, n_obs)
    n_draws = flat_out.shape[0]
    invert = precision is None
    shared = None if matrices.ndim == 4 else _factor(matrices[None], matrix_name, invert)
    step = max(1, _CHUNK_BYTES // (8 * n_obs * n_obs)) if shared is None else 4096
    for start in range(0, n_draws, step):
        rows = np.arange(start, min(start + step, n_draws))
        factor = (
            shared if shared is not None else _factor(_rows(matrices, rows, 2), matrix_name, invert)
        )
        residual = np.broadcast_to(y - _rows(mean, rows, 1), (rows.size, n_obs))
        nu = None if freedom is None else freedom.reshape(-1)[rows]
        g = factor.times(residual)
        flat_out[rows] = _conditional_log_densities(residual, g, factor.diagonal, nu)
    return out


class _Factor(NamedTuple):
    """A chunk's precisions (c, N, N), c = 1 for one shared by all draws: given directly
    (``precision``) or as ``L^-1`` of the covariance's Cholesky factor, ``Q = L^-T L^-1``."""

    matrix: np.ndarray
    inverse_cholesky: bool
    diagonal: np.ndarray  # (c, N): Q_nn

    def times(self, residual: np.ndarray) -> np.ndarray:
        """``Q r`` per draw, (S, N); one shared matrix applies to every row of ``residual``."""
        m = self.matrix
        if m.shape[0] == 1:
            m = m[0]
            return (residual @ m.T) @ m if self.inverse_cholesky else residual @ m
        if self.inverse_cholesky:
            return np.einsum("skn,sk->sn", m, np.einsum("skm,sm->sk", m, residual))
        return np.einsum("snm,sm->sn", m, residual)


def _conditional_log_densities(residual: np.ndarray, g: np.ndarray, q: np.ndarray, nu):
    """(S, N) log densities from residuals ``y - mu`` (S, N), ``g = Q (y - mu)`` (S, N)
    and the precisions' diagonals ``q`` (S or 1, N)."""
    loo_residual_sq = g**2 / q**2  # (y_n - conditional mean)^2
    if nu is None:
        return -0.5 * np.log(2 * np.pi) + 0.5 * np.log(q) - 0.5 * loo_residual_sq * q
    n_obs = residual.shape[1]
    others = np.einsum("sn,sn->s", residual, g)[:, None] - g**2 / q  # beta_-n
    nu_c = (nu + n_obs - 1)[:, None]
    scale_sq = (nu[:, None] + others) / nu_c / q
    return (
        gammaln((nu_c + 1) / 2)
        - gammaln(nu_c / 2)
        - 0.5 * np.log(nu_c * np.pi * scale_sq)
        - (nu_c + 1) / 2 * np.log1p(loo_residual_sq / (nu_c * scale_sq))
    )


def _observations(y) -> np.ndarray:
    y = as_float_array(y, "y")
    if y.ndim != 1 or y.size < 2:
        raise fail("y", f"shape {y.shape}", "a vector of N >= 2 observations")
    check_finite(y, "y")
    return y


def _draws_of(values, argument: str, tail: tuple) -> np.ndarray:
    """``values`` as (chains, draws, *tail), from that, (draws, *tail) (one chain) or
    (*tail,) for one value shared by all draws (returned as it is)."""
    values = as_float_array(values, argument)
    if values.ndim == len(tail) + 1 and values.shape[1:] == tail:
        values = values[None]  # (draws, *tail): one chain
    fixed = values.shape == tail
    if not fixed and (values.ndim != len(tail) + 2 or values.shape[2:] != tail):
        raise fail(
            argument,
            f"shape {values.shape}",
            f"(n_chains, n_draws, {', '.join(map(str, tail))}), (n_draws, "
            f"{', '.join(map(str, tail))}) or {tail} for all draws",
        )
    check_finite(values, argument)
    return values


def _common_draws(mean: np.ndarray, matrices: np.ndarray) -> tuple:
    """The (chains, draws) of the inputs that vary by draw; they must agree."""
    shapes = {a.shape[:2] for a, k in ((mean, 1), (matrices, 2)) if a.ndim == k + 2}
    if len(shapes) > 1:
        raise fail(
            "mean",
            f"draws {mean.shape[:2]} beside a matrix of draws {matrices.shape[:2]}",
            "the same (n_chains, n_draws) for mean and covariance/precision",
        )
    if not shapes:
        raise fail(
            "mean",
            "one mean and one matrix for all draws",
            "draws of mean or of covariance/precision (n_chains, n_draws, ...)",
            "With nothing varying by draw there is no posterior to cross-validate.",
        )
    return shapes.pop()


def _degrees_of_freedom(df, draws_shape: tuple) -> np.ndarray:
    """``df`` as (chains, draws): one number for all draws or one per draw, each > 0."""
    values = as_float_array(df, "df")
    if values.shape == (int(np.prod(draws_shape)),):  # one value per draw, chains stacked
        values = values.reshape(draws_shape)
    if values.shape not in ((), draws_shape):
        raise fail("df", f"shape {values.shape}", f"a number or an array of shape {draws_shape}")
    bad = int(np.sum(~(np.isfinite(values) & (values > 0))))
    if bad:
        raise fail("df", f"{bad} non-positive or non-finite value(s)", "degrees of freedom > 0")
    return np.broadcast_to(values, draws_shape)


def _rows(values: np.ndarray, rows: np.ndarray, tail_ndim: int) -> np.ndarray:
    """The given flat draws of a per-draw array, or the shared value with a leading axis."""
    if values.ndim == tail_ndim + 2:
        return values.reshape(-1, *values.shape[2:])[rows]
    return values[None]


def _factor(matrices: np.ndarray, argument: str, invert: bool) -> _Factor:
    """Checked symmetric positive-definite matrices of a chunk of draws (c, N, N), as the
    precisions' factor: the Cholesky factor's inverse of covariances (``Q = L^-T L^-1``,
    whose diagonal is the column sums of ``L^-1`` squared), or the precisions themselves."""
    if not np.allclose(matrices, np.swapaxes(matrices, 1, 2), rtol=1e-10, atol=0):
        raise fail(argument, "a matrix that is not symmetric", "symmetric matrices")
    try:
        lower = np.linalg.cholesky(matrices)
    except np.linalg.LinAlgError:
        raise fail(
            argument, "a matrix that is not positive definite", "positive-definite matrices"
        ) from None
    if not invert:
        return _Factor(matrices, False, np.diagonal(matrices, axis1=1, axis2=2))
    inverse_lower = np.linalg.inv(lower)
    return _Factor(inverse_lower, True, (inverse_lower**2).sum(axis=1))
