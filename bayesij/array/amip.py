"""Influential subsets (AMIP) from posterior draws: the fewest units whose removal moves a
quantity's posterior mean, or an end of its interval ``mean ± z sd``, by a required amount.

A *metric* is ``g = mean + s z sd`` (``s = 0``: the mean; ``s = ±1``: an interval end). Its
influence per unit is ``phi_u = Cov(g*, l_u)`` with ``g* = f + s z (f - mean)^2 / (2 sd)``
(the sd's influence is ``Cov((f - mean)^2, l_u) / (2 sd)``), so dropping a set ``S`` changes
``g`` by about ``-sum_{u in S} phi_u``. To move ``g`` by ``need`` in ``direction`` (±1), the
linear method takes units in decreasing ``-direction * phi_u``; the reweighted method grows
the set greedily, re-estimating ``g`` and ``phi`` under importance weights
``exp(-sum_{u in S} l_u)`` (Pareto-smoothed) after each addition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from bayesij.array.ess import relative_eff_rows
from bayesij.array.influence import influence_scores
from bayesij.array.psis import psis_chunk, tail_length

__all__ = [
    "amip_search",
    "AmipSearch",
    "Goal",
    "goal_for",
    "metric_draws",
    "AmipPath",
    "linear_path",
    "reweighted_path",
    "weighted_metric",
    "weighted_value",
    "split_halves",
    "set_weights",
    "linear_set_change",
    "TARGETS",
    "METHODS",
]

TARGETS = ("sign", "significance", "sign_and_significance")
METHODS = ("linear", "reweighted")


def metric_draws(f: np.ndarray, sign: int, z: float) -> np.ndarray:
    """``g* = f + s z (f - mean)^2 / (2 sd)``: draws whose covariance with ``l_u`` is the
    influence of ``mean + s z sd``. ``f`` of shape (n_chains, n_draws)."""
    if sign == 0:
        return f
    centred = f - f.mean()
    return f + sign * z * centred**2 / (2 * f.std(ddof=1))


class AmipPath(NamedTuple):
    """A growing set of units and the predicted change of the metric at each size.

    Attributes
    ----------
    order : ndarray of shape (k,)
        Units in the order they join the set.
    change : ndarray of shape (k + 1,)
        Predicted change of the metric after dropping the first ``j`` units, ``j = 0..k``
        (signed; 0 at ``j = 0``).
    pareto_k : ndarray of shape (k + 1,)
        k-hat of the importance weights at each size (NaN for the linear method).
    sizes : ndarray of shape (k + 1,)
        Set size at each point of ``change`` (the reweighted path adds units in steps).
    stopped : str
        Why the path ends: ``'reached'``, ``'alpha_max'``, ``'k-hat'`` or ``'no unit
        moves the metric that way'``.
    """

    order: np.ndarray
    change: np.ndarray
    pareto_k: np.ndarray
    stopped: str
    sizes: np.ndarray


#: A target counts as reached only when the predicted change passes it by this many Monte
#: Carlo standard errors of the prediction.
MC_MARGIN = 2.0


def linear_path(
    phi: np.ndarray, direction: int, need: float, k_max: int, mcse: np.ndarray | None = None
) -> AmipPath:
    """The first-order path: units by decreasing ``-direction phi``, up to ``k_max``.

    ``mcse`` (per unit) makes the target count as reached only beyond ``MC_MARGIN``
    standard errors ``sqrt(sum mcse_u^2)`` of the predicted change.
    """
    gain = -direction * phi
    order = np.argsort(-gain, kind="stable")
    order = order[gain[order] > 0][:k_max]
    change = np.concatenate([[0.0], np.cumsum(-phi[order])])
    noise = (
        np.zeros(change.size)
        if mcse is None
        else np.sqrt(np.concatenate([[0.0], np.cumsum(mcse[order] ** 2)]))
    )
    reached = np.flatnonzero(direction * change >= need + MC_MARGIN * noise)
    if reached.size:
        k = int(reached[0])
        return AmipPath(
            order[:k], change[: k + 1], np.full(k + 1, np.nan), "reached", np.arange(k + 1)
        )
    stopped = "alpha_max" if order.size == k_max else "no unit moves the metric that way"
    return AmipPath(
        order, change, np.full(order.size + 1, np.nan), stopped, np.arange(order.size + 1)
    )


def set_weights(set_lik: np.ndarray, chain_shape: tuple[int, int]) -> tuple[np.ndarray, float]:
    """Normalised PSIS weights ``∝ exp(-set_lik)`` over draws (S,) and their k-hat."""
    n_draws = set_lik.size
    ratios = np.exp(-(set_lik - set_lik.min())).reshape(1, *chain_shape)
    r_eff = relative_eff_rows(ratios / ratios.max()) if ratios.std() > 0 else np.ones(1)
    smoothed = psis_chunk(-set_lik[:, None], tail_length(n_draws, np.clip(r_eff, 1e-3, None)))
    log_w = smoothed.log_weights[:, 0]
    weights = np.exp(log_w - log_w.max())
    return weights / weights.sum(), float(smoothed.pareto_k[0])


def weighted_value(
    f: np.ndarray, weights: np.ndarray, sign: int, z: float
) -> tuple[float, np.ndarray, float]:
    """The metric under normalised draw weights, ``w (g* - g*_w)`` and the metric's MCSE.

    ``f`` and ``weights`` (S,). The MCSE is that of a self-normalised importance-sampling
    estimate, ``sqrt(sum_s w_s^2 (g*_s - g*_w)^2)`` (independent draws; autocorrelated
    chains make it larger).
    """
    mean = weights @ f
    centred = f - mean
    value, g_star = mean, f
    if sign != 0:
        sd = np.sqrt(weights @ centred**2)
        value = mean + sign * z * sd
        g_star = f + sign * z * centred**2 / (2 * sd)
    weighted = weights * (g_star - weights @ g_star)
    return float(value), weighted, float(np.sqrt(np.sum(weighted**2)))


def weighted_metric(
    f: np.ndarray, log_lik: np.ndarray, weights: np.ndarray, sign: int, z: float
) -> tuple[float, np.ndarray, float]:
    """:func:`weighted_value` and the metric's influence per unit ``phi`` (U,) under the
    weights: ``(g, phi, mcse)`` for ``log_lik`` of shape (S, U)."""
    value, weighted, mcse = weighted_value(f, weights, sign, z)
    return value, weighted @ log_lik, mcse


def reweighted_path(
    f: np.ndarray,
    log_lik: np.ndarray,
    sign: int,
    z: float,
    direction: int,
    need: float,
    k_max: int,
    k_threshold: float,
) -> AmipPath:
    """Greedy set growth with importance-reweighted re-estimation after each addition.

    The target counts as reached once the estimate passes it by ``MC_MARGIN`` of its Monte
    Carlo standard errors.

    ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U). One unit joins per step
    up to 20, then 5 % of the set at a time (a cost of a few dozen passes over the draws
    for any set size). The path stops when the target is reached, at ``k_max`` units, or
    when the weights' k-hat exceeds ``k_threshold`` (the reweighted estimate is then no
    longer reliable).
    """
    chain_shape = f.shape
    flat_f, flat_l = f.reshape(-1), log_lik.reshape(f.size, -1)
    uniform = np.full(flat_f.size, 1 / flat_f.size)
    base = weighted_value(flat_f, uniform, sign, z)[0]
    chosen: list[int] = []
    changes, khats, sizes = [], [], []
    set_lik = np.zeros(flat_f.size)
    while True:
        weights, khat = (uniform, np.nan) if not chosen else set_weights(set_lik, chain_shape)
        value, phi, mcse = weighted_metric(flat_f, flat_l, weights, sign, z)
        changes.append(value - base)
        khats.append(khat)
        sizes.append(len(chosen))
        if direction * changes[-1] >= need + MC_MARGIN * mcse:
            stopped = "reached"
        elif chosen and khat > k_threshold:
            stopped = "k-hat"
        elif len(chosen) >= k_max:
            stopped = "alpha_max"
        else:
            gain = -direction * phi
            gain[chosen] = -np.inf
            step = min(max(1, len(chosen) // 20), k_max - len(chosen))
            best = np.argsort(-gain, kind="stable")[:step]
            best = best[gain[best] > 0]
            if best.size:
                chosen.extend(best.tolist())
                set_lik += flat_l[:, best].sum(axis=1)
                continue
            stopped = "no unit moves the metric that way"
        return AmipPath(
            np.array(chosen, dtype=int),
            np.array(changes),
            np.array(khats),
            stopped,
            np.array(sizes),
        )


def split_halves(n_chains: int, n_draws: int) -> tuple[str, tuple[slice, slice], int]:
    """Two halves of the draws: by chains when there are at least 2, else within chains.

    Returns a description, the two slices along the split axis and that axis (0: chains,
    1: draws).
    """
    if n_chains >= 2:
        half = n_chains // 2
        return (
            f"selected on chains 1-{half}, estimated on chains {half + 1}-{n_chains}",
            (slice(0, half), slice(half, n_chains)),
            0,
        )
    half = n_draws // 2
    return (
        "selected on the first half of the draws, estimated on the second",
        (slice(0, half), slice(half, n_draws)),
        1,
    )


def linear_set_change(
    f: np.ndarray, log_lik: np.ndarray, units: np.ndarray, sign: int, z: float
) -> tuple[float, float]:
    """First-order change of the metric from dropping ``units``, and its MCSE (batch means).

    ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U).
    """
    g_star = metric_draws(f, sign, z)[..., None]
    set_lik = log_lik[:, :, units].sum(axis=2, keepdims=True)
    scores = influence_scores(g_star, set_lik, n_blocks=max(2, min(50, f.size // 20)), check=False)
    return float(-scores.psi[0, 0]), float(scores.mcse[0, 0])


@dataclass(frozen=True)
class Goal:
    """What to move and how far: the metric ``mean + sign z sd`` (``metric`` names it),
    its value on the full data, the ``direction`` (+1 or -1) and the amount ``need``."""

    metric: str
    sign: int
    direction: int
    need: float
    value: float
    z: float


def goal_for(f: np.ndarray, target, z: float) -> Goal:
    """The goal of ``target`` ("sign", "significance", "sign_and_significance" or a change
    Delta of the mean) for draws ``f`` of one quantity."""
    mean, sd = float(f.mean()), float(f.std(ddof=1))
    if not isinstance(target, str):
        return Goal("mean", 0, 1 if target > 0 else -1, abs(float(target)), mean, z)
    if target == "sign":
        return Goal("mean", 0, -1 if mean > 0 else 1, abs(mean), mean, z)
    # The end on the mean's side is the far one (larger in magnitude), the other the near.
    same_side = 1 if mean >= 0 else -1
    sign = -same_side if target == "significance" else same_side
    value = mean + sign * z * sd
    name = "lower end" if sign < 0 else "upper end"
    return Goal(name, sign, -1 if value > 0 else 1, abs(value), value, z)


def metric_influence(f, log_lik, goal):
    """Influence of the goal's metric on every unit: one pass over the draws."""
    return influence_scores(metric_draws(f, goal.sign, goal.z)[..., None], log_lik, check=False)


def _path(method, f, log_lik, goal, k_max, k_threshold, scores=None):
    if method == "linear":
        scores = metric_influence(f, log_lik, goal) if scores is None else scores
        return linear_path(scores.psi[0], goal.direction, goal.need, k_max, scores.mcse[0])
    return reweighted_path(
        f, log_lik, goal.sign, goal.z, goal.direction, goal.need, k_max, k_threshold
    )


def _after(f, log_lik, order, method) -> tuple[float, float]:
    """Predicted posterior mean and sd after dropping ``order``."""
    flat = f.reshape(-1)
    if order.size == 0:
        return float(flat.mean()), float(flat.std(ddof=1))
    if method == "reweighted":
        set_lik = log_lik[:, :, order].sum(axis=2).reshape(-1)
        weights, _ = set_weights(set_lik, f.shape)
        mean = float(weights @ flat)
        return mean, float(np.sqrt(weights @ (flat - mean) ** 2))
    change_mean, _ = linear_set_change(f, log_lik, order, 0, 1.0)
    change_sd, _ = linear_set_change(f, log_lik, order, 1, 1.0)
    mean = float(flat.mean()) + change_mean
    return mean, float(flat.std(ddof=1)) + change_sd - change_mean


def _split_check(method, f, log_lik, goal, k_max, k_threshold, path) -> dict:
    """Choose the set on one half of the draws, estimate its effect on the other."""
    how, (first, second), axis = split_halves(*f.shape)
    take = (lambda a, part: a[part]) if axis == 0 else (lambda a, part: a[:, part])
    f_a, f_b = take(f, first), take(f, second)
    if f_a.shape[1] < 4 or f_b.shape[1] < 4:
        return {}
    l_a, l_b = take(log_lik, first), take(log_lik, second)
    goal_a = replace(goal, need=goal.need if path.stopped == "reached" else np.inf)
    chosen = _path(method, f_a, l_a, goal_a, max(1, path.order.size), k_threshold).order
    if chosen.size == 0:
        return {}
    split, mcse = linear_set_change(f_b, l_b, chosen, goal.sign, goal.z)
    if method == "reweighted":
        naive = _reweighted_change(f_a, l_a, chosen, goal.sign, goal.z)
        split = _reweighted_change(f_b, l_b, chosen, goal.sign, goal.z)
    else:
        naive, _ = linear_set_change(f_a, l_a, chosen, goal.sign, goal.z)
    return {
        "how": how,
        "n_drop": int(chosen.size),
        "naive": naive,
        "split": split,
        "mcse": mcse,
        "interval": (split - 1.96 * mcse, split + 1.96 * mcse),
    }


def _reweighted_change(f, log_lik, order, sign, z) -> float:
    flat = f.reshape(-1)
    before = weighted_value(flat, np.full(flat.size, 1 / flat.size), sign, z)[0]
    weights, _ = set_weights(log_lik[:, :, order].sum(axis=2).reshape(-1), f.shape)
    return weighted_value(flat, weights, sign, z)[0] - before


class AmipSearch(NamedTuple):
    """Everything :func:`amip_search` found, as arrays.

    Attributes
    ----------
    goal : Goal
    path : AmipPath
        The chosen method's path (the set is ``path.order``).
    linear_change : ndarray
        The linear prediction's change of the metric after dropping 0, 1, ... units in
        sorted-influence order (the curve beside the chosen path).
    mean_after, sd_after : float
        Predicted posterior mean and sd of the quantity after dropping the set.
    monte_carlo : dict
        The split-draw check (empty when there are too few draws).
    """

    goal: Goal
    path: AmipPath
    linear_change: np.ndarray
    mean_after: float
    sd_after: float
    monte_carlo: dict


def amip_search(
    f: np.ndarray,
    log_lik: np.ndarray,
    target,
    *,
    z: float,
    method: str,
    k_max: int,
    k_threshold: float,
) -> AmipSearch:
    """The whole AMIP procedure for one quantity: goal, set growth and split-draw check.

    Parameters
    ----------
    f : ndarray of shape (n_chains, n_draws)
        Draws of the quantity.
    log_lik : ndarray of shape (n_chains, n_draws, n_units)
        Log-likelihood of the exchangeable units.
    target : {"sign", "significance", "sign_and_significance"} or float
    z : float
        Multiple of the sd in the interval ``mean +- z sd``.
    method : {"linear", "reweighted"}
    k_max : int
        Largest set size considered.
    k_threshold : float
        k-hat above which reweighting is no longer trusted.

    Notes
    -----
    The arrays are taken as checked (finite quantity, log-likelihood finite or ``-inf``):
    the labelled :func:`bayesij.amip` passes a validated container's values.

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999.
    """
    goal = goal_for(f, target, float(z))
    scores = metric_influence(f, log_lik, goal)
    path = _path(method, f, log_lik, goal, k_max, k_threshold, scores)
    linear = _path("linear", f, log_lik, replace(goal, need=np.inf), k_max, k_threshold, scores)
    mean_after, sd_after = _after(f, log_lik, path.order, method)
    monte_carlo = _split_check(method, f, log_lik, goal, k_max, k_threshold, path)
    return AmipSearch(goal, path, linear.change, mean_after, sd_after, monte_carlo)
