"""Group log-likelihoods with the group's own effect integrated out.

In a hierarchy ``y_n ~ N(m_n + a_g(n), sigma^2)``, ``a_g ~ N(0, tau^2)``, the log-likelihood
of group ``g`` given its effect ``a_g`` is what the posterior's draws carry; with ``a_g``
integrated out it is ``log N(y_g | m_g, sigma^2 I + tau^2 1 1^T)``. Weighting the second by
``w_g`` is drawing group ``g`` ``w_g`` times as *new* groups (each copy its own effect),
so the infinitesimal jackknife over these marginal terms approximates the bootstrap that
resamples groups; over the conditional terms it approximates reweighting groups that keep
their one effect (the same group with ``w_g`` times its observations).

For other likelihoods with a normal random intercept (logistic, Poisson, ...) the integral
over the intercept is computed by Gauss-Hermite quadrature (:func:`intercept_group_log_lik`).

References
----------
.. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
   variance. arXiv:2305.06466 (local and global parameters).
.. [2] Davison, A. C. and Hinkley, D. V. (1997). Bootstrap Methods and their Application,
   section 3.8 (resampling clustered data).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import as_float_array, check_finite, check_positive_int, fail
from bayesij.array.numeric import sum_by_group

__all__ = [
    "normal_group_log_lik",
    "intercept_group_log_lik",
    "integrate_effects",
    "integrate_effect_vectors",
]


def normal_group_log_lik(residuals, codes, tau, sigma) -> np.ndarray:
    """``log N(r_g | 0, sigma^2 I + tau^2 1 1^T)`` of each group at each draw.

    Parameters
    ----------
    residuals : array_like of shape (n_chains, n_draws, n_obs)
        ``y_n - m_n`` at each draw: the observation less its mean *without* the group
        effect (the fixed part of the linear predictor, the population mean ``mu``).
    codes : array_like of int, shape (n_obs,)
        The group of each observation, 0 to ``G - 1``.
    tau, sigma : array_like of shape (n_chains, n_draws) or scalars
        The group effects' sd and the residual sd at each draw.

    Returns
    -------
    ndarray of shape (n_chains, n_draws, G)
        By Sherman-Morrison: ``-(n log 2 pi + (n - 1) log sigma^2 + log(sigma^2 + n tau^2)
        + (S2 - tau^2 S1^2 / (sigma^2 + n tau^2)) / sigma^2) / 2`` with ``S1``, ``S2`` the
        group's sum of residuals and of their squares.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import multivariate_normal
    >>> r = np.array([0.3, -1.2, 0.8])[None, None, :]
    >>> ours = normal_group_log_lik(r, [0, 0, 0], tau=0.7, sigma=1.1)[0, 0, 0]
    >>> cov = 1.1**2 * np.eye(3) + 0.7**2
    >>> bool(np.isclose(ours, multivariate_normal(np.zeros(3), cov).logpdf(r.ravel())))
    True
    """
    r = as_float_array(residuals, "residuals")
    if r.ndim != 3:
        raise fail("residuals", f"shape {r.shape}", "(n_chains, n_draws, n_obs)")
    check_finite(r, "residuals")
    groups, n_groups = _checked_codes(codes, r.shape[2])
    tau2, sigma2 = (
        _per_draw_sd(v, name, r.shape[:2]) ** 2 for v, name in ((tau, "tau"), (sigma, "sigma"))
    )
    n = np.bincount(groups, minlength=n_groups)
    s1, s2 = _group_sums(r, groups, n_groups), _group_sums(r**2, groups, n_groups)
    total = sigma2 + n * tau2
    quadratic = (s2 - tau2 * s1**2 / total) / sigma2
    log_det = (n - 1) * np.log(sigma2) + np.log(total)
    return -0.5 * (n * np.log(2 * np.pi) + log_det + quadratic)


def _checked_codes(codes, n_obs: int) -> tuple[np.ndarray, int]:
    """Group codes 0..G-1, one per observation, every group present; and G."""
    groups = np.asarray(codes)
    if groups.shape != (n_obs,) or groups.dtype.kind not in "iu" or n_obs == 0:
        raise fail("codes", f"{groups.shape} {groups.dtype}", f"{n_obs} integer codes")
    n_groups = int(groups.max()) + 1
    if groups.min() < 0 or np.unique(groups).size != n_groups:
        raise fail("codes", "codes missing from 0..G-1", "every group 0..G-1 present")
    return groups, n_groups


def _per_draw_sd(value, name: str, draws: tuple) -> np.ndarray:
    """An sd per draw, (n_chains, n_draws, 1), or one for all, (1, 1, 1): finite, positive;
    ``draws`` is the log-likelihood's (n_chains, n_draws)."""
    sd = as_float_array(value, name)
    if sd.ndim != 0 and sd.shape != tuple(draws):
        raise fail(name, f"shape {sd.shape}", f"a number, or one per draw {tuple(draws)}")
    if not np.all(np.isfinite(sd) & (sd > 0)):
        raise fail(name, "values that are not finite and positive", "positive sds")
    return sd[..., None] if sd.ndim == 2 else sd.reshape(1, 1, 1)


def _group_sums(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_chains, n_draws, n_obs) summed within groups: (n_chains, n_draws, G)."""
    n_chains, n_draws, n_obs = values.shape
    summed = sum_by_group(values.reshape(-1, n_obs), groups, n_groups)
    return summed.reshape(n_chains, n_draws, n_groups)


def intercept_group_log_lik(log_lik_at, codes, tau, n_nodes: int = 16) -> np.ndarray:
    """``log E_{a ~ N(0, tau^2)} prod_{n in g} p(y_n | theta, a)`` of each group at each draw,
    by adaptive Gauss-Hermite quadrature over a normal random intercept, for any likelihood.

    Parameters
    ----------
    log_lik_at : callable
        ``log_lik_at(a)`` with ``a`` of shape (n_chains, n_draws, n_obs), each observation's
        group intercept at each draw: the pointwise log-likelihood (n_chains, n_draws,
        n_obs) with the group intercepts replaced by ``a`` (the linear predictor less the
        group's own deviation, plus ``a``; elementwise, as a likelihood of a linear
        predictor is).
    codes : array_like of int, shape (n_obs,)
        The group of each observation, 0 to ``G - 1``.
    tau : array_like of shape (n_chains, n_draws) or scalar
        The intercepts' sd at each draw.
    n_nodes : int, default 16
        Quadrature nodes around each group's mode (found by Newton steps), scaled by the
        curvature there, as lme4's ``nAGQ``: exact for a normal likelihood.

    Returns
    -------
    ndarray of shape (n_chains, n_draws, G)
        With :func:`bayesij.ij_covariance` of the global quantities, the IJ over these
        approximates the bootstrap that draws new groups
        (:func:`bayesij.refit.cluster_bootstrap`).

    References
    ----------
    .. [1] Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature.
       Biometrika 81(3), 624-629 (adaptive quadrature).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import norm
    >>> y, codes = np.array([0.4, -0.3, 1.1, 0.9]), np.array([0, 0, 1, 1])
    >>> mu = np.full((1, 2, 1), 0.2)
    >>> quadrature = intercept_group_log_lik(
    ...     lambda a: norm.logpdf(y, mu + a, 1.0), codes, tau=0.8
    ... )
    >>> closed = normal_group_log_lik(y - mu, codes, tau=0.8, sigma=1.0)
    >>> bool(np.allclose(quadrature, closed, rtol=1e-10))
    True
    """
    if not callable(log_lik_at):
        raise fail("log_lik_at", f"a {type(log_lik_at).__name__}", "a callable log_lik_at(a)")
    groups, n_groups = _checked_codes(codes, np.size(codes))
    draws = as_float_array(log_lik_at(np.zeros((1, 1, groups.size))), "log_lik_at(a)").shape[:2]
    sd = _per_draw_sd(tau, "tau", draws)

    def h(a):  # log-likelihood of each group plus the intercept's log density (no constant)
        values = as_float_array(log_lik_at(a[..., groups]), "log_lik_at(a)")
        if values.ndim != 3 or values.shape[2] != groups.size:
            raise fail(
                "log_lik_at(a)", f"shape {values.shape}", f"(n_chains, n_draws, {groups.size})"
            )
        return _group_sums(values, groups, n_groups) - 0.5 * (a / sd) ** 2

    prior = -np.log(np.sqrt(2 * np.pi) * sd)  # the intercept's normalised log density at 0
    return integrate_effects(
        lambda a: h(a) + prior, (*draws, n_groups), sd, n_nodes, argument="log_lik_at"
    )


def integrate_effects(
    joint, shape: tuple, sd, n_nodes: int = 16, *, argument: str = "log_lik"
) -> np.ndarray:
    """``log ∫ exp(joint(a)) da`` of each group's scalar effect at each draw, by adaptive
    Gauss-Hermite quadrature: Newton steps to each group's mode, nodes scaled by the
    curvature there (lme4's ``nAGQ``; exact for a log density quadratic in ``a``).

    Parameters
    ----------
    joint : callable
        ``joint(a)`` with ``a`` of shape ``shape`` (n_chains, n_draws, G), each group's
        effect at each draw: the group's log-likelihood plus the effect's normalised prior
        log density, (n_chains, n_draws, G) (concave in ``a``).
    shape : tuple
        ``(n_chains, n_draws, G)``.
    sd : float or ndarray broadcasting to ``shape``
        The effects' scale: the finite-difference step (1e-4 of it), the longest Newton
        step (2 of it) and the scale of the curvature floor (1e-6 / sd^2).
    n_nodes : int, default 16
        Gauss-Hermite nodes (a positive integer).
    argument : str, default "log_lik"
        The argument a log-likelihood that is not finite is blamed on.

    Returns
    -------
    ndarray of shape ``shape``
        Each group's log-likelihood with its effect integrated out; a log-likelihood that is
        not finite at the effects' zero is refused (naming ``argument``), not integrated
        to NaN.

    References
    ----------
    .. [1] Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature.
       Biometrika 81(3), 624-629.
    """
    sd = np.asarray(sd, dtype=float)[..., None]
    return integrate_effect_vectors(
        lambda a: joint(a[..., 0]), (*shape, 1), sd, n_nodes, argument=argument
    )


def integrate_effect_vectors(
    joint, shape: tuple, sd, n_nodes: int = 16, *, argument: str = "log_lik"
) -> np.ndarray:
    """``log ∫ exp(joint(a)) da`` over each group's vector of ``d`` effects at each draw
    (an intercept and a slope), by adaptive Gauss-Hermite quadrature on the product grid of
    ``n_nodes ** d`` nodes: Newton steps to each group's mode, the grid rotated and scaled
    by the Cholesky factor of the inverse Hessian there (exact for a log density quadratic
    in ``a``; :func:`integrate_effects` is ``d = 1``).

    Parameters
    ----------
    joint : callable
        ``joint(a)`` with ``a`` of shape ``shape`` (n_chains, n_draws, G, d): the group's
        log-likelihood plus its effects' normalised joint prior log density,
        (n_chains, n_draws, G), concave in ``a``.
    shape : tuple
        ``(n_chains, n_draws, G, d)``.
    sd : float or ndarray broadcasting to ``shape``
        Each effect's scale: its finite-difference step (1e-4 of it), the longest Newton
        step (2 of it) and the scale of the curvature floor (1e-6 / sd^2).
    n_nodes : int, default 16
        Gauss-Hermite nodes per effect.
    argument : str, default "log_lik"
        The argument a log-likelihood that is not finite is blamed on.

    Returns
    -------
    ndarray of shape ``shape[:-1]``

    References
    ----------
    .. [1] Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature.
       Biometrika 81(3), 624-629.
    .. [2] Pinheiro, J. C. and Bates, D. M. (1995). Approximations to the log-likelihood
       function in the nonlinear mixed-effects model. Journal of Computational and
       Graphical Statistics 4(1), 12-35 (the rotated grid).
    """
    n_nodes = check_positive_int(n_nodes, "n_nodes")
    sd = np.broadcast_to(np.asarray(sd, dtype=float), shape)
    at_zero = joint(np.zeros(shape))
    if not np.all(np.isfinite(at_zero)):
        bad = np.argwhere(~np.isfinite(at_zero))[0]
        raise fail(
            argument,
            f"a log-likelihood that is not finite (chain {bad[0]}, draw {bad[1]}, group {bad[2]})",
            "finite log-likelihood values at every draw, to integrate each group's effect",
        )
    mode, precision = _mode(joint, np.zeros(shape), sd)
    factor = np.linalg.cholesky(np.linalg.inv(precision))  # (..., d, d): a = mode + L x
    nodes, weights = np.polynomial.hermite.hermgauss(n_nodes)
    total = None
    for index in np.ndindex(*(n_nodes,) * shape[-1]):
        x = nodes[list(index)]
        a = mode + np.sqrt(2.0) * factor @ x
        term = joint(a) + np.sum(x**2) + np.sum(np.log(weights[list(index)]))
        total = term if total is None else np.logaddexp(total, term)
    log_det = np.sum(np.log(np.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return total + log_det + 0.5 * shape[-1] * np.log(2.0)


def _mode(h, start: np.ndarray, sd: np.ndarray, steps: int = 50) -> tuple:
    """Each group's mode of ``h`` from ``start`` (..., d) and ``-h''`` there (..., d, d),
    by Newton steps on central differences (``h`` concave: a log-concave likelihood times a
    normal density), each step at most 2 ``sd`` long; the Hessian's eigenvalues on the
    scale ``sd`` kept above 1e-6 (a flat direction)."""
    a, delta = start, 1e-4 * sd
    for _ in range(steps + 1):
        gradient, precision = _differences(h, a, delta)
        scaled = precision * sd[..., :, None] * sd[..., None, :]
        values, vectors = np.linalg.eigh(scaled)
        scaled = (vectors * np.maximum(values, 1e-6)[..., None, :]) @ np.swapaxes(vectors, -1, -2)
        precision = scaled / (sd[..., :, None] * sd[..., None, :])
        step = np.linalg.solve(precision, gradient[..., None])[..., 0]
        if np.all(np.abs(step) <= 1e-10 * sd):
            break  # the curvature is the mode's
        length = np.sqrt(np.sum((step / sd) ** 2, axis=-1, keepdims=True))
        a = a + step * np.minimum(1.0, 2.0 / np.maximum(length, 1e-300))
    return a, precision


def _differences(h, a: np.ndarray, delta: np.ndarray) -> tuple:
    """``h``'s gradient (..., d) and negative Hessian (..., d, d) at ``a`` (..., d) by
    central differences with steps ``delta``: ``1 + 2d + 2d(d - 1)`` evaluations."""
    d = a.shape[-1]
    mid = h(a)
    step = [np.where(np.arange(d) == k, delta, 0.0) for k in range(d)]
    up = [h(a + e) for e in step]
    down = [h(a - e) for e in step]
    gradient = np.stack(
        [(u - w) / (2 * delta[..., k]) for k, (u, w) in enumerate(zip(up, down, strict=True))], -1
    )
    precision = np.empty((*mid.shape, d, d))
    for k in range(d):
        precision[..., k, k] = -(up[k] - 2 * mid + down[k]) / delta[..., k] ** 2
        for j in range(k):
            cross = (
                h(a + step[k] + step[j])
                - h(a + step[k] - step[j])
                - h(a - step[k] + step[j])
                + h(a - step[k] - step[j])
            )
            precision[..., k, j] = precision[..., j, k] = -cross / (
                4 * delta[..., k] * delta[..., j]
            )
    return gradient, precision
