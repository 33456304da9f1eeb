"""A Poisson regression's observations recovered from the draws: each observation's
count and linear predictor, so that its log-likelihood is known at any parameter value.

A Poisson observation with a log link has ``l_n = y_n eta_n - exp(eta_n) - log(y_n!)``
with ``eta_n`` affine in the coefficients. Over the draws (whitened, ``u``), ``l_n`` is
then a smooth concave function of ``u`` whose Hessian is the rank-one ``-exp(eta_n) b_n
b_n'`` (``b_n`` the slopes of ``eta_n``): a quadratic fit on the draws gives ``b_n``'s
direction, the curvature ``exp(eta_n) |b_n|^2`` and the slope ``(y_n - exp(eta_n))
|b_n|``, and the value at the draws' mean, with the normalising constant ``log(y_n!)``,
fixes the scale: the count is the integer that makes the three agree. Gauss-Newton at that
count then fits the offset and the slopes exactly, and the observation counts as a Poisson
one only where that fit leaves less than the logistic recovery's ``RECOVERED`` share of
its variance: a negative binomial or a normal observation leaves far more. The count is
what the log-likelihood says it is: a log-likelihood saved without its ``log(y_n!)`` is
not recovered (the draws cannot then tell a count from the scale of ``eta_n``).

References
----------
.. [1] McCullagh, P. and Nelder, J. A. (1989). Generalized Linear Models, 2nd ed.
   Chapman & Hall (the Poisson log-linear model).
.. [2] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric: when can dropping a little data make a big difference?
   arXiv:2011.14999.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

__all__ = ["poisson_coefficients"]

#: The expected counts ``exp(eta)`` at the draws' mean over which the count's equation is
#: scanned for its roots (log-spaced).
MEANS = np.geomspace(1e-6, 1e6, 241)

#: A Poisson observation's log-likelihood is a function of one direction of the
#: parameters: its quadratic fit's other eigenvalues, over the curvature along it, and its
#: gradient across it, over the gradient along it plus the root of the curvature, are what
#: the quadratic leaves of the higher terms (at most 0.016 and 0.019 on counts-like
#: regressions of N = 60 to 3000); above this share, not a Poisson one. A normal
#: regression's residual sd moves its observations in a second direction (0.12 to 0.21
#: across at N = 10^4: rejected here before any count is fitted).
RANK_ONE = 0.25

#: The share of observations whose best start fits nothing, past which they are not
#: Poisson ones (and no other start is tried): of a Poisson regression's, 2 % (63 of
#: 3000 on a counts-like regression), of a normal regression's every one.
ASTRAY = 0.25

#: Observations at least that :data:`ASTRAY` judges (a tile's, or the first 64 that a
#: recovery probes): fewer may all be of the rare counts whose best start is astray.
JUDGED = 32

#: Gauss-Newton iterations at most (the fit converges in a handful from the quadratic's
#: start), and the step below which an observation's fit has converged.
ITERATIONS, CONVERGED = 12, 1e-13


def poisson_coefficients(values: np.ndarray, u: np.ndarray, recovered: float) -> np.ndarray | None:
    """The offsets, slopes and counts (R + 2, n) of Poisson observations whose
    log-likelihood at the whitened draws ``u`` (K, R) is ``values`` (K, n): ``eta_n(u) =
    offsets[n] + slopes[:, n] . u`` and ``l_n = y_n eta_n - exp(eta_n) - log(y_n!)``;
    None where some observation is not one to the share ``recovered`` of its variance
    (or a value is not finite or above 0, or the draws are too few for the quadratic
    fit)."""
    n_draws, r = u.shape
    if 1 + r + r * (r + 1) // 2 > n_draws // 2:
        return None
    if not np.all(np.isfinite(values)) or np.any(values > 0):
        return None
    q0, slope, curvature, direction, others, across = _quadratic(values, u)
    if np.any(curvature <= 0) or np.any(others > RANK_ONE * curvature):
        return None  # not curved along one direction alone: no Poisson observation
    if np.any(across > RANK_ONE * (np.abs(slope) + np.sqrt(curvature))):
        return None  # not sloped along that direction alone
    need = recovered * np.sum((values - values.mean(axis=0)) ** 2, axis=0)
    starts = [  # (counts, offsets, slopes) of each root, the slopes along or against
        (counts, np.log(mean), (sign * np.sqrt(curvature / mean))[:, None] * direction)
        for sign in (1.0, -1.0)
        for counts, mean in _roots(q0, sign * slope, curvature)
    ]
    closest = np.argsort([_left(values, u, np.rint(c), o, b) for c, o, b in starts], axis=0)
    columns = np.arange(q0.size)
    ranked = [  # each observation's starts, the one that fits the draws best first
        tuple(np.stack([s[k] for s in starts])[chosen, columns] for k in range(3))
        for chosen in closest
    ]
    fit = [np.zeros(q0.size), np.zeros(q0.size), np.zeros((q0.size, r)), np.full(q0.size, np.inf)]
    _better_fit(fit, need, values, u, ranked[0], False)
    if q0.size >= JUDGED and np.mean(fit[3] > need) > ASTRAY:
        return None  # the best starts of most of them fit nothing: not Poisson ones
    for refined in (False, True):  # the counts refined first where none of them fits
        for start in ranked[int(not refined) :]:
            _better_fit(fit, need, values, u, start, refined)
    counts, offsets, slopes, left = fit
    if np.any(left > need):
        return None
    return np.vstack([offsets, slopes.T, counts])


def _better_fit(fit: list, need, values, u, start: tuple, refined: bool) -> None:
    """Gauss-Newton from ``start`` (counts (n,), offsets (n,), slopes (n, R)), at the
    counts rounded and at their neighbours, for the observations whose ``fit`` (counts,
    offsets, slopes, what they leave) leaves more than ``need`` and that have such a start;
    ``refined``: the counts (continuous) fitted with the rest first, then rounded. ``fit``
    updated where it leaves less."""
    todo = np.flatnonzero((fit[3] > need) & np.isfinite(start[1]))
    if not todo.size:
        return
    counts, offsets, slopes = (x[todo] for x in start)
    if refined:
        offsets, slopes, _, counts = _fitted(values[:, todo], u, counts, offsets, slopes, True)
    for shift in (0.0, 1.0, -1.0):  # the count rounded to a neighbour: both sides
        rounded = np.rint(np.maximum(counts, 0.0)) + shift
        some = np.flatnonzero((fit[3][todo] > need[todo]) & (rounded >= 0))
        found = _fitted(values[:, todo[some]], u, rounded[some], offsets[some], slopes[some])
        better = found[2] < fit[3][todo[some]]
        chosen = todo[some[better]]
        fit[0][chosen] = rounded[some[better]]
        for target, value in zip(fit[1:], found[:3], strict=True):
            target[chosen] = value[better]


def _quadratic(values: np.ndarray, u: np.ndarray) -> tuple:
    """The least-squares quadratic in ``u`` of each observation: its value at ``u = 0``
    (n,), the gradient along the Hessian's most negative direction (n,), minus that
    eigenvalue (n,), the direction (n, R), the largest size of the other eigenvalues (n,)
    and the length of the gradient across the direction (n,)."""
    n_draws, r = u.shape
    upper = np.triu_indices(r)
    design = np.column_stack([np.ones(n_draws), u, u[:, upper[0]] * u[:, upper[1]]])
    coef = np.linalg.lstsq(design, values, rcond=None)[0]
    hessian = np.zeros((values.shape[1], r, r))
    hessian[:, upper[0], upper[1]] = coef[1 + r :].T
    hessian = hessian + np.swapaxes(hessian, 1, 2)  # the diagonal doubled: d2/du2
    eigenvalues, vectors = np.linalg.eigh(hessian)
    direction = vectors[:, :, 0]
    gradient = coef[1 : 1 + r].T  # (n, R)
    slope = np.einsum("nr,nr->n", gradient, direction)
    others = np.max(np.abs(eigenvalues[:, 1:]), axis=1, initial=0.0)
    across = np.linalg.norm(gradient - slope[:, None] * direction, axis=1)
    return coef[0], slope, -eigenvalues[:, 0], direction, others, across


def _roots(q0, slope, curvature) -> list:
    """Where on :data:`MEANS` ``m`` solves ``y(m) log m - m - log(y(m)!) = q0``, ``y(m) = m
    + slope sqrt(m / curvature)``: its first two roots (linearly interpolated in ``log m``)
    and the point nearest a root (a zero count's equation is nearly tangent there near
    ``m = 4``, where the quadratic's error may leave it no root), each with its count
    ``y(m)``: three pairs of (n,) arrays, ``nan`` where there is no such point."""
    m = MEANS[:, None]
    count = m + slope * np.sqrt(m / curvature)
    valid = count > -0.5
    with np.errstate(invalid="ignore"):
        gap = count * np.log(m) - m - gammaln(np.where(valid, count, 0.0) + 1) - q0
    gap = np.where(valid, gap, np.nan)
    crossing = (np.sign(gap[1:]) != np.sign(gap[:-1])) & np.isfinite(gap[1:] + gap[:-1])
    seen, columns = np.cumsum(crossing, axis=0), np.arange(q0.size)
    means = []
    for which in range(2):
        at = np.argmax(crossing & (seen == which + 1), axis=0)
        low, high = gap[at, columns], gap[at + 1, columns]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # no crossing
            log_m = np.log(MEANS[at]) + np.log(MEANS[1] / MEANS[0]) * low / (low - high)
            means.append(np.where(seen[-1] >= which + 1, np.exp(log_m), np.nan))
    nearest = np.argmin(np.where(valid, np.abs(gap), np.inf), axis=0)
    means.append(np.where(valid.any(axis=0), MEANS[nearest], np.nan))
    return [(mean + slope * np.sqrt(mean / curvature), mean) for mean in means]


def _left(values, u, counts, offsets, slopes) -> np.ndarray:
    """What the Poisson log-likelihood of ``counts`` at ``eta = offsets + slopes . u``
    leaves of ``values`` (K, n): the residuals' sum of squares (n,; inf far off)."""
    design = np.column_stack([np.ones(u.shape[0]), u])
    resid = _residuals(values.T, design, counts, offsets, slopes)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sum(resid**2, axis=1)


def _residuals(values, design, counts, offsets, slopes) -> tuple:
    """``values`` (n, K) less the Poisson log-likelihood at ``eta = [offsets, slopes] .
    design`` (design ``[1, u]``, (K, R + 1)), and ``eta`` (n, K)."""
    eta = np.column_stack([offsets, slopes]) @ design.T
    with np.errstate(over="ignore", invalid="ignore"):
        fitted = counts[:, None] * eta - np.exp(eta) - gammaln(counts + 1)[:, None]
    return values - fitted, eta


def _fitted(values, u, counts, offsets, slopes, free: bool = False) -> tuple:
    """Gauss-Newton (steps halved until the fit improves) for the offsets (n,) and slopes
    (n, R) of observations of known ``counts`` (with ``free``, the counts too, as
    continuous), from a start: those, what they leave (n,) and the counts.

    The normal equations of an observation are sums over the draws of its score squared
    times the design's outer products: one product (n, K) x (K, (R + 1)^2) for all of them
    (a batched QR of the (n, K, R + 1) Jacobians took three times as long)."""
    values = np.ascontiguousarray(values.T)  # (n, K): an observation's draws contiguous
    design = np.column_stack([np.ones(u.shape[0]), u])
    width = design.shape[1]
    outer = (design[:, :, None] * design[:, None, :]).reshape(design.shape[0], -1)
    offsets, slopes, counts = offsets.copy(), slopes.copy(), counts.astype(float)
    resid, eta = _residuals(values, design, counts, offsets, slopes)
    with np.errstate(over="ignore", invalid="ignore"):
        left = np.sum(resid**2, axis=1)
    active = np.flatnonzero(np.isfinite(left))  # a start far off: no step from there
    for _ in range(ITERATIONS):
        if not active.size:
            break
        score = counts[active, None] - np.exp(eta[active])  # (n, K)
        normal = ((score**2) @ outer).reshape(-1, width, width)
        rhs = (score * resid[active]) @ design
        if free:  # the count's own column: d/dy (y eta - log(y!))
            own = eta[active] - digamma(counts[active] + 1)[:, None]
            across = (score * own) @ design
            normal = np.block(
                [
                    [normal, across[:, :, None]],
                    [across[:, None, :], np.sum(own**2, axis=1)[:, None, None]],
                ]
            )
            rhs = np.column_stack([rhs, np.sum(own * resid[active], axis=1)])
        step = _solved(normal, rhs)
        if free:  # a count stays above -1, where log(y!) is defined
            step[:, -1] = np.maximum(step[:, -1], -0.5 * (counts[active] + 1))
        for _ in range(10):
            moved = _moved(counts[active], offsets[active], slopes[active], step, free)
            trial_resid, trial_eta = _residuals(values[active], design, *moved)
            with np.errstate(over="ignore", invalid="ignore"):
                trial = np.sum(trial_resid**2, axis=1)
            worse = ~(trial <= left[active])
            if not worse.any():
                break
            step[worse] *= 0.5
        step[worse] = 0.0  # no better point along the step: converged to round-off
        kept = active[~worse]
        counts[active], offsets[active], slopes[active] = _moved(
            counts[active], offsets[active], slopes[active], step, free
        )
        left[kept], resid[kept], eta[kept] = trial[~worse], trial_resid[~worse], trial_eta[~worse]
        active = active[np.max(np.abs(step), axis=1) >= CONVERGED]
    return offsets, slopes, left, counts


def _solved(normal: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Each observation's Gauss-Newton step (n, p) from its normal equations (n, p, p)
    and right-hand side (n, p); by the pseudo-inverse where some system is singular."""
    try:
        return np.linalg.solve(normal, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return np.einsum("npq,nq->np", np.linalg.pinv(normal), rhs)


def _moved(counts, offsets, slopes, step, free: bool) -> tuple:
    """The counts, offsets and slopes moved by a Gauss-Newton ``step`` (n, R + 1, or
    R + 2 with the counts ``free``)."""
    r = slopes.shape[1]
    moved_counts = counts + step[:, r + 1] if free else counts
    return moved_counts, offsets + step[:, 0], slopes + step[:, 1 : r + 1]
