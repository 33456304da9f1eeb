"""Continuous ranked probability scores of weighted predictive draws (CRPS and the
scale-invariant SCRPS), exact for the weighted empirical distribution of the draws."""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import as_float_array, fail

__all__ = ["weighted_crps", "weighted_mean_difference", "checked_censoring", "censored_draws"]


def weighted_crps(
    draws: np.ndarray, y: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CRPS and SCRPS of the predictive distributions ``sum_s w_s delta(x_s)``, per column.

    With ``X, X'`` independent from the weighted draws,
    ``CRPS = E|X - y| - E|X - X'| / 2`` and ``SCRPS = -E|X - y| / E|X - X'| - log(E|X -
    X'|) / 2``. ``E|X - X'| = 2 sum_i w_(i) x_(i) (2 F_(i-1) + w_(i) - 1)`` over the sorted
    draws (``F`` the cumulative weights): exact, in ``O(S log S)`` per column.

    Parameters
    ----------
    draws : ndarray of shape (S, n)
        Predictive draws of each observation.
    y : ndarray of shape (n,)
    weights : ndarray of shape (S, n)
        Normalised weights (each column sums to one), e.g. PSIS leave-one-out weights.

    Returns
    -------
    crps, scrps : ndarray of shape (n,)
        Both as scores to maximise: the CRPS negated (as arviz-stats and R loo report it)
        and the SCRPS as Bolin and Wallin define it.

    References
    ----------
    .. [1] Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
       prediction, and estimation. JASA 102(477), 359-378.
    .. [2] Bolin, D. and Wallin, J. (2023). Local scale invariance and robustness of proper
       scoring rules. Statistical Science 38(1), 140-159.
    """
    rows = np.ascontiguousarray(draws.T)  # each column's draws contiguous: a faster sort
    row_weights = np.ascontiguousarray(weights.T)
    absolute_error = np.einsum("ij,ij->i", row_weights, np.abs(rows - y[:, None]))
    # Tied draws may sort in any order: over a run of equal x the terms sum to
    # x (2 F W + W^2 - W) whatever the order (F the weight below the run, W the run's).
    order = np.argsort(rows, axis=1)
    x = np.take_along_axis(rows, order, axis=1)
    x -= x[:, :1]  # E|X - X'| is unchanged by a shift; from the minimum a point mass gives 0
    w = np.take_along_axis(row_weights, order, axis=1)
    below = np.cumsum(w, axis=1) - w  # F_(i-1)
    mean_difference = 2.0 * np.einsum("ij,ij->i", w * x, 2.0 * below + w - 1.0)
    crps = absolute_error - 0.5 * mean_difference
    with np.errstate(divide="ignore", invalid="ignore"):
        scrps = -absolute_error / mean_difference - 0.5 * np.log(mean_difference)
    return -crps, scrps


def weighted_mean_difference(
    x: np.ndarray, x_weights: np.ndarray, y: np.ndarray, y_weights: np.ndarray
) -> np.ndarray:
    """``E|X - Y|`` for independent ``X`` and ``Y`` from two weighted samples, per column:
    ``int F(t) (1 - G(t)) + G(t) (1 - F(t)) dt`` over the merged sorted draws (``F``, ``G``
    their weighted CDFs), exact in ``O((S_x + S_y) log)`` per column. With ``y = x`` it is
    the ``E|X - X'|`` of :func:`weighted_crps`.

    Parameters
    ----------
    x, x_weights : ndarray of shape (S_x, n)
        Draws and normalised weights (each column sums to one).
    y, y_weights : ndarray of shape (S_y, n)

    Returns
    -------
    ndarray of shape (n,)

    References
    ----------
    .. [1] Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules,
       prediction, and estimation. JASA 102(477), 359-378.
    """
    values = np.concatenate([x, y], axis=0)
    order = np.argsort(values, axis=0, kind="stable")
    merged = np.take_along_axis(values, order, axis=0)
    zeros_x, zeros_y = np.zeros_like(y_weights), np.zeros_like(x_weights)
    f = np.cumsum(np.take_along_axis(np.concatenate([x_weights, zeros_x]), order, axis=0), axis=0)
    g = np.cumsum(np.take_along_axis(np.concatenate([zeros_y, y_weights]), order, axis=0), axis=0)
    gaps = np.diff(merged, axis=0)
    f, g = np.minimum(f[:-1], 1.0), np.minimum(g[:-1], 1.0)
    return np.sum(gaps * (f * (1.0 - g) + g * (1.0 - f)), axis=0)


def checked_censoring(censored, n_obs: int) -> np.ndarray | None:
    """``censored`` as int codes (n_obs,), brms' convention: 0 observed, 1 right-censored
    (the true value is at least ``y``), -1 left-censored (at most ``y``); None stays None.
    Anything else is refused, naming ``censored``."""
    if censored is None:
        return None
    codes = as_float_array(censored, "censored")
    if codes.shape != (n_obs,) or not np.all(np.isin(codes, (-1.0, 0.0, 1.0))):
        raise fail(
            "censored",
            f"shape {codes.shape}" if codes.shape != (n_obs,) else "codes other than -1, 0, 1",
            f"one code per observation, shape ({n_obs},): 0 observed, 1 right-censored "
            "(the value is at least y), -1 left-censored (at most y)",
        )
    return codes.astype(int)


def censored_draws(draws: np.ndarray, y: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Predictive draws (S, n) censored where the observation is: ``min(x, y)`` for a
    right-censored one, ``max(x, y)`` for a left-censored one (the predictive distribution
    of what would have been recorded). The CRPS of these at ``y`` is the threshold-weighted
    CRPS ``int_{-inf}^{y} F(z)^2 dz`` (right) or ``int_{y}^{inf} (1 - F(z))^2 dz`` (left).

    References
    ----------
    .. [1] Gneiting, T. and Ranjan, R. (2011). Comparing density forecasts using threshold-
       and quantile-weighted scoring rules. JBES 29(3), 411-422.
    """
    out = np.where(codes == 1, np.minimum(draws, y), draws)
    return np.where(codes == -1, np.maximum(out, y), out)
