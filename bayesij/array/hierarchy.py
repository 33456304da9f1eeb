"""Group log-likelihoods with the group's own effect integrated out.

In a hierarchy ``y_n ~ N(m_n + a_g(n), sigma^2)``, ``a_g ~ N(0, tau^2)``, the log-likelihood
of group ``g`` given its effect ``a_g`` is what the posterior's draws carry; with ``a_g``
integrated out it is ``log N(y_g | m_g, sigma^2 I + tau^2 1 1^T)``. Weighting the second by
``w_g`` is drawing group ``g`` ``w_g`` times as *new* groups (each copy its own effect),
so the infinitesimal jackknife over these marginal terms approximates the bootstrap that
resamples groups; over the conditional terms it approximates reweighting groups that keep
their one effect (the same group with ``w_g`` times its observations).

References
----------
.. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
   variance. arXiv:2305.06466 (local and global parameters).
.. [2] Davison, A. C. and Hinkley, D. V. (1997). Bootstrap Methods and their Application,
   section 3.8 (resampling clustered data).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import as_float_array, check_finite, fail

__all__ = ["normal_group_log_lik"]


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
    groups = np.asarray(codes)
    if groups.shape != (r.shape[2],) or groups.dtype.kind not in "iu" or groups.min() < 0:
        raise fail("codes", f"{groups.shape} {groups.dtype}", f"{r.shape[2]} codes >= 0")
    tau2, sigma2 = (
        _per_draw(v, name, r.shape[:2]) ** 2 for v, name in ((tau, "tau"), (sigma, "sigma"))
    )
    n_groups = int(groups.max()) + 1
    one_hot = np.zeros((r.shape[2], n_groups))
    one_hot[np.arange(r.shape[2]), groups] = 1.0
    n = one_hot.sum(axis=0)
    s1, s2 = r @ one_hot, (r**2) @ one_hot
    total = sigma2[..., None] + n * tau2[..., None]
    quadratic = (s2 - tau2[..., None] * s1**2 / total) / sigma2[..., None]
    log_det = (n - 1) * np.log(sigma2[..., None]) + np.log(total)
    return -0.5 * (n * np.log(2 * np.pi) + log_det + quadratic)


def _per_draw(value, name: str, shape: tuple) -> np.ndarray:
    values = np.broadcast_to(as_float_array(value, name), shape) if np.ndim(value) == 0 else None
    if values is None:
        values = as_float_array(value, name)
        if values.shape != shape:
            raise fail(name, f"shape {values.shape}", f"a number or one per draw, {shape}")
    if not np.all(np.isfinite(values) & (values > 0)):
        raise fail(name, "values that are not finite and positive", "positive sds")
    return values
