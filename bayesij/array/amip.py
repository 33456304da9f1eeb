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

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from bayesij.array.amip_lockstep import run_in_lockstep
from bayesij.array.amip_noise import (
    MC_Z,
    Moments,
    NoiseAnswer,
    Replicates,
    Start,
    draws_to_decide,
    finite_copy,
    linear_answer,
)
from bayesij.array.amip_screen import InfluenceScreen, screen_design
from bayesij.array.checks import impossible_columns
from bayesij.array.ess import (
    MIN_CHAIN_DRAWS,
    SHORT_LAGS,
    fft_next_good_size,
    log_lik_relative_eff_rows,
    relative_eff_rows,
    split_relative_ess,
)
from bayesij.array.influence import influence_scores
from bayesij.array.numeric import (
    map_as_ready,
    map_chunks,
    map_ordered,
    obs_chunks,
    read_columns,
    release_freed_memory,
    threads,
    top_positive,
)
from bayesij.array.psis import psis_chunk, tail_length

__all__ = [
    "metric_mcse",
    "mean_mcse",
    "linear_search",
    "linear_sets",
    "set_sums",
    "linear_paths",
    "LinearPaths",
    "take_draws",
    "metric_influence",
    "goal_influence",
    "goal_centres",
    "influence_centres",
    "metrics_influence",
    "goal_rows",
    "split_goal_sums",
    "reweighted_search",
    "reweighted_searches",
    "reweighted_steps",
    "search_path",
    "weighted_influence_mcse",
    "AmipSearch",
    "Goal",
    "passes",
    "goal_for",
    "metric_draws",
    "AmipPath",
    "linear_path",
    "reweighted_path",
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
    square, scale = _square_and_scale(f, sign, z, f.mean())
    return f + scale * square


def metric_mcse(f: np.ndarray, goal: Goal) -> float:
    """The Monte Carlo standard error of the goal's metric on the full data (the
    split-chain ESS error of ``g*``, the interval end's linearisation; 0 for a numeric
    target's change, which needs no start)."""
    if goal.fixed:
        return 0.0
    return mean_mcse(np.asarray(metric_draws(f, goal.sign, goal.z), dtype=float))


def mean_mcse(draws: np.ndarray) -> float:
    """The Monte Carlo standard error of the mean of ``draws`` (n_chains, n_draws), by the
    split-chain effective sample size; inf where that is 0."""
    ess = float(split_relative_ess(draws[..., None], "mean")[0]) * draws.size
    return float(draws.std(ddof=1) / np.sqrt(ess)) if ess > 0 else float("inf")


def _square_and_scale(f: np.ndarray, sign: int, z: float, centre: float) -> tuple:
    """An interval end's ``(f - centre)^2`` and its weight ``s z / (2 sd)`` in
    ``g* = f + s z (f - centre)^2 / (2 sd)`` (``sd`` the draws' own, divisor ``S - 1``)."""
    return (f - centre) ** 2, sign * z / (2 * f.std(ddof=1))


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
        Why the path ends: ``'reached'``, ``'alpha_max'`` or ``'no unit moves the metric
        that way'``.
    how : ndarray of str, shape (k + 1,)
        How each point of ``change`` is estimated: ``'start'``, ``'linear'``,
        ``'reweighted'`` (importance reweighting of the draws, k-hat below the threshold)
        or ``'linear continuation'`` (first order from the last reliably reweighted
        posterior, after k-hat passed the threshold).
    reliable : int
        The first ``reliable`` units of ``order`` are estimated by reweighting; the rest by
        the linear prediction (the whole set for the linear method, ``reliable = 0``).
    mcse : float
        The Monte Carlo standard error of the last point of ``change`` where the whole set
        was reweighted (NaN otherwise): what its "reached" was judged against.
    """

    order: np.ndarray
    change: np.ndarray
    pareto_k: np.ndarray
    stopped: str
    sizes: np.ndarray
    how: np.ndarray
    reliable: int = 0
    mcse: float = float("nan")


#: A target counts as reached only when the predicted change passes it by this many Monte
#: Carlo standard errors of the prediction. Not 2: a search looks at every prefix of a set
#: chosen on the same draws, and its errors are estimated from them; at 2 an
#: importance-sampling estimate 2.06 errors past the target on a heavy-tailed regression
#: (N = 2000) was refuted by the exact refit (its error 1.5 of the errors seen over fresh
#: draws, which its own estimate put 18 % lower).
MC_MARGIN = 2.5


def passes(direction: int, change, need: float, mcse):
    """The one rule for "reached": ``direction * change`` passes ``need`` by
    :data:`MC_MARGIN` of its Monte Carlo standard errors ``mcse`` (arrays broadcast)."""
    return direction * np.asarray(change) >= need + MC_MARGIN * np.asarray(mcse)


def linear_path(
    phi: np.ndarray,
    direction: int,
    need: float,
    k_max: int,
    mcse: np.ndarray | None = None,
    along=None,
) -> AmipPath:
    """The first-order path: units by decreasing ``-direction phi``, up to ``k_max``.

    ``mcse`` (per unit) makes the target count as reached only beyond ``MC_MARGIN``
    standard errors ``sqrt(sum mcse_u^2)`` of the predicted change. ``along``: a function
    of the order returning the predicted change after each prefix (k + 1,) in place of the
    sums of ``-phi`` (an interval end's, from its moments: :func:`change_along`).
    """
    gain = -direction * phi
    order = top_positive(gain, k_max)
    if along is None:
        change = np.concatenate([[0.0], np.cumsum(-phi[order])])
    else:
        change = along(order)
    noise = (
        np.zeros(change.size)
        if mcse is None
        else np.sqrt(np.concatenate([[0.0], np.cumsum(mcse[order] ** 2)]))
    )
    reached = np.flatnonzero(passes(direction, change, need, noise))
    if reached.size:
        order, change, stopped = order[: reached[0]], change[: reached[0] + 1], "reached"
    else:
        stopped = "alpha_max" if order.size == k_max else "no unit moves the metric that way"
    how = np.array(["start"] + ["linear"] * order.size)
    return AmipPath(
        order, change, np.full(order.size + 1, np.nan), stopped, np.arange(order.size + 1), how
    )


def set_weights(set_lik: np.ndarray, chain_shape: tuple[int, int]) -> tuple[np.ndarray, float]:
    """Normalised PSIS weights ``∝ exp(-set_lik)`` over draws (S,) and their k-hat.

    A draw under which a dropped unit is impossible (``set_lik = -inf``) gets weight zero:
    the posterior without that unit is taken as the full posterior divided by the unit's
    likelihood on the draws where the unit is possible. (With no such draw left the weights
    are NaN and k-hat is infinite.)
    """
    n_draws = set_lik.size
    per_chain = n_draws // chain_shape[0]
    if per_chain >= MIN_CHAIN_DRAWS and per_chain > SHORT_LAGS:  # the common case, compiled
        from bayesij.array.kernels.set_weights import psis_set_weights

        fft_size = fft_next_good_size(per_chain)
        found = psis_set_weights(set_lik, chain_shape[0], fft_size, SHORT_LAGS)
        if found is not None:
            return found
    impossible = np.isneginf(set_lik)
    if impossible.all():
        return np.full(n_draws, np.nan), np.inf
    lik = np.where(impossible, np.inf, set_lik)
    r_eff = np.ones(1)
    if not impossible.any():
        if np.ptp(lik) > 0:  # the compiled kernels (modules kernels.psis, ess)
            from bayesij.array.kernels.psis import psis_weight_rows

            r_eff = log_lik_relative_eff_rows(-lik[None], chain_shape[0])
            tails = tail_length(n_draws, np.clip(r_eff, 1e-3, None))
            weights, k, done = psis_weight_rows(lik[None], tails)
            if done[0]:
                return weights[0], float(k[0])
    else:
        ratios = np.exp(-(lik - lik[~impossible].min())).reshape(1, *chain_shape)
        if ratios.std() > 0:
            r_eff = relative_eff_rows(ratios / ratios.max())
    smoothed = psis_chunk(-lik[:, None], tail_length(n_draws, np.clip(r_eff, 1e-3, None)))
    log_w = smoothed.log_weights[:, 0]
    weights = np.exp(log_w - log_w.max())
    return weights / weights.sum(), float(smoothed.pareto_k[0])


def unit_khats(rows: np.ndarray, n_chains: int, which: np.ndarray | None = None) -> np.ndarray:
    """The Pareto k-hat of each unit's removal, ``exp(-l_u)`` over the draws
    (:func:`set_weights`): ``rows`` (U, S) of each unit's log-likelihood at the draws (each
    chain's draws contiguous; a constant per unit changes nothing) gives (U,), or the rows
    ``which`` (K,) of them (K,), read in place; the units shared among threads (the
    compiled smoothing releases the GIL). Above
    :func:`~bayesij.array.psis.pareto_k_threshold` a reweighted estimate of the removal is
    unreliable; above 1 the ratios have no mean, and the posterior without the unit lies
    beyond the draws.

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    chain_shape = (int(n_chains), rows.shape[1] // int(n_chains))
    which = np.arange(rows.shape[0]) if which is None else np.asarray(which, dtype=int)
    out = np.empty(which.size)

    def work(part: slice) -> None:
        for u in range(part.start, part.stop):
            out[u] = set_weights(rows[which[u]], chain_shape)[1]

    edges = np.linspace(0, which.size, 4 * threads() + 1).astype(int)
    map_chunks(work, [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a])
    return out


def weighted_value(
    f: np.ndarray, weights: np.ndarray, sign: int, z: float
) -> tuple[float, np.ndarray, float]:
    """The metric under normalised draw weights, ``w (g* - g*_w)`` and the metric's MCSE.

    ``f`` and ``weights`` (S,). The MCSE is that of a self-normalised importance-sampling
    estimate, ``sqrt(sum_s w_s^2 (g*_s - g*_w)^2)`` (independent draws; autocorrelated
    chains make it larger: :func:`chain_inflation`).
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


def chain_inflation(f: np.ndarray, sign: int, z: float) -> float:
    """How much larger a weighted estimate's Monte Carlo error over these chains is than
    :func:`weighted_value`'s formula for independent draws: the full data's metric's
    error by the split-chain effective sample size (:func:`mean_mcse`) over the formula's,
    at least 1 (``f`` (n_chains, n_draws)). Independence Metropolis-Hastings draws of a
    travel-mode logistic regression (N = 840) held 0.59 of their number in effective
    draws, and a reweighted estimate 2.9 of its independent errors past the target was
    refuted by the exact refit."""
    flat = np.asarray(f, dtype=float).reshape(-1)
    independent = weighted_value(flat, np.full(flat.size, 1.0 / flat.size), sign, z)[2]
    if not independent > 0:
        return 1.0
    return max(1.0, mean_mcse(np.asarray(metric_draws(f, sign, z), dtype=float)) / independent)


def weighted_influence_mcse(
    f: np.ndarray,
    log_lik: np.ndarray,
    weights: np.ndarray,
    sign: int,
    z: float,
    units: np.ndarray | None = None,
    store=None,
) -> np.ndarray:
    """Monte Carlo standard error of each unit's weighted influence ``phi``: (U,), or
    (len(units),) for the columns ``units`` of ``log_lik`` (S, U) (read a chunk at a time;
    ``store``: centred rows read before, :class:`~bayesij.array.amip_curvature.
    CentredColumns`, whose first ``S`` draws stand for the columns it holds).

    ``phi_u = sum_s w_s a_s (l_su - lbar_u)`` with ``a = g* - g*_w``; as a self-normalised
    importance-sampling estimate its variance is ``sum_s w_s^2 (a_s (l_su - lbar_u) -
    phi_u)^2`` (independent draws).
    """
    units = np.arange(log_lik.shape[1]) if units is None else np.asarray(units)
    _, weighted, _ = weighted_value(f, weights, sign, z)
    if store is not None and store.matrix is not None:
        found = store.influence_mcse(units, weights, weighted)  # held rows read in place
        if found is not None:
            out, held = found
            if not held.all():  # the others from their columns
                out[~held] = _influence_mcse_of_columns(log_lik, units[~held], weights, weighted)
            return out
    return _influence_mcse_of_columns(log_lik, units, weights, weighted, store)


def _influence_mcse_of_columns(log_lik, units, weights, weighted, store=None) -> np.ndarray:
    """:func:`weighted_influence_mcse` of the columns ``units`` of ``log_lik`` (read a
    chunk at a time) given ``w (g* - g*_w)`` (``weighted``)."""
    a = np.divide(weighted, weights, out=np.zeros_like(weights), where=weights > 0)
    out = np.empty(units.size)
    w2 = weights**2
    for chunk in obs_chunks(units.size, 8 * log_lik.shape[0]):  # ~8 MiB a temporary
        columns = _finite_columns(log_lik, units[chunk], store)
        centred = columns - weights @ columns
        phi = weighted @ centred
        out[chunk] = np.sqrt(w2 @ (a[:, None] * centred - phi) ** 2)
    return out


def _finite_columns(log_lik: np.ndarray, units: np.ndarray, store=None) -> np.ndarray:
    """Columns ``units`` of ``log_lik`` (n, U) as float64 (n, k), non-finite values as 0,
    up to a constant per column: with a ``store`` of the same matrix, the first ``n`` draws
    of its centred rows (:meth:`~bayesij.array.amip_curvature.CentredColumns.rows_of`: held
    rows copied, contiguous, the others read)."""
    if store is not None and store.matrix is not None:
        return store.rows_of(units)[:, : log_lik.shape[0]].T
    columns = np.asarray(log_lik[:, units], dtype=float)
    return np.where(np.isfinite(columns), columns, 0.0)


def _float_columns(flat_l: np.ndarray, units) -> np.ndarray:
    """Columns ``units`` of a (S, U) matrix as float64 (float32 input is converted only
    here, a set at a time)."""
    return np.asarray(flat_l[:, units], dtype=float)


#: Floats per unit that size the gathers of a set's columns: 8 MiB at a time, so that
#: summing a set of thousands (an unreachable target's ``alpha_max`` prefix) adds little
#: to an audit's peak memory (a whole set of 5,000 columns of 2,000 draws: 80 MB).
_SET_GATHER = 8


def set_column_sum(flat_l: np.ndarray, units: np.ndarray) -> np.ndarray:
    """``sum_{u in units} l_su`` at each draw (S,) of a (S, U) matrix, non-finite values as
    they are, in the order of ``units``; gathered 8 MiB of columns at a time."""
    total = np.zeros(flat_l.shape[0])
    for chunk in obs_chunks(units.size, _SET_GATHER * flat_l.shape[0]):
        total += _float_columns(flat_l, units[chunk]).sum(axis=1)
    return total


def _exact_gains(flat_f, flat_l, set_lik, units, base_value, chain_shape, sign, z):
    """``-phi`` stand-ins for units that are impossible under some draws: the reweighted
    change of the metric when each is dropped next, one at a time."""
    phi = np.empty(units.size)
    for i, u in enumerate(units):
        weights, _ = set_weights(set_lik + flat_l[:, u], chain_shape)
        value = weighted_value(flat_f, weights, sign, z)[0] if np.isfinite(weights).all() else 0
        phi[i] = -(value - base_value)
    return phi


def reweighted_path(
    f: np.ndarray, log_lik: np.ndarray, goal: Goal, k_max: int, k_threshold: float
) -> AmipPath:
    """Greedy set growth with importance-reweighted re-estimation after each addition, then
    a linear continuation once reweighting is no longer reliable (:func:`reweighted_steps`
    run on its own).

    ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U).
    """
    steps = reweighted_steps(f, log_lik, goal, k_max, k_threshold)
    return run_in_lockstep(log_lik.reshape(f.size, -1), [steps])[0]


def reweighted_steps(
    f: np.ndarray,
    log_lik: np.ndarray,
    goal: Goal,
    k_max: int,
    k_threshold: float,
    impossible: np.ndarray | None = None,
    store=None,
) -> Generator[np.ndarray, np.ndarray, AmipPath]:
    """The reweighted search as a generator: it yields ``w (g* - g*_w)`` over the draws
    (S,) whenever it needs every unit's influence under the current weights, receives that
    influence ``phi`` (U,) (NaN where not finite; :func:`bayesij.array.amip_lockstep.
    run_in_lockstep` computes it, for many searches in one pass) and returns the
    :class:`AmipPath`.

    ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U); ``impossible``: the
    units with ``-inf`` at some draw (found here when None). One unit joins per step up to
    20, then 5 % of the set at a time (a few dozen products for any set size). While the
    weights' k-hat stays at most ``k_threshold`` the metric is re-estimated by
    PSIS-reweighting the draws with ``exp(-sum_{u in set} l_u)``. When a step would pass
    the threshold, the search goes back to the last reliable set and continues from that
    reweighted posterior with the first-order prediction: units in decreasing order of
    their influence under those weights (a reweighted covariance). The target counts as
    reached once the estimate passes it by ``MC_MARGIN`` of its Monte Carlo standard
    errors (over the chains: :func:`chain_inflation`); the path ends at ``k_max`` units
    otherwise. So "not reachable" means that neither reweighting nor the linear
    continuation reaches the target.

    Units impossible under some draws (``-inf``) are ranked by the exact reweighted change
    of dropping them next; dropping one gives zero weight to those draws. ``store``: the
    centred rows of units read before (:class:`~bayesij.array.amip_curvature.
    CentredColumns`), from which the continuation's Monte Carlo errors read the units it
    holds.
    """
    sign, z, direction, need = goal.sign, goal.z, goal.direction, goal.need
    chain_shape = f.shape
    flat_f, flat_l = f.reshape(-1), log_lik.reshape(f.size, -1)
    if impossible is None:
        impossible = np.flatnonzero(impossible_columns(flat_l))
    uniform = np.full(flat_f.size, 1 / flat_f.size)
    base = weighted_value(flat_f, uniform, sign, z)[0]
    inflation = chain_inflation(f, sign, z)  # the chains' autocorrelation
    chosen: list[int] = []
    changes, khats, sizes = [], [], []
    set_lik = np.zeros(flat_f.size)
    weights, khat = uniform, np.nan
    while True:
        value, weighted, mcse = weighted_value(flat_f, weights, sign, z)
        mcse *= inflation
        received = yield weighted
        changes.append(value - base)
        khats.append(khat)
        sizes.append(len(chosen))
        if passes(direction, changes[-1], need, mcse):
            stopped = "reached"
            break
        if len(chosen) >= k_max:
            stopped = "alpha_max"
            break
        step = min(max(1, len(chosen) // 20), k_max - len(chosen))
        if impossible.size or isinstance(received, np.ndarray):
            phi = _influence(received, direction, step, chosen)
            if impossible.size:
                exact = _exact_gains(
                    flat_f, flat_l, set_lik, impossible, value, chain_shape, sign, z
                )
                phi[impossible] = exact
            gain = -direction * phi
            gain[chosen] = -np.inf
            best = top_positive(gain, step)
        else:  # screened: the same units from the candidates alone
            best = received.best(direction, step, chosen)
        if not best.size:
            stopped = "no unit moves the metric that way"
            break
        next_lik = set_lik + _joining_sum(flat_l, best, store)
        next_weights, next_khat = set_weights(next_lik, chain_shape)
        if not next_khat <= k_threshold:
            phi = _influence(received, direction, k_max - len(chosen), chosen)
            if impossible.size:
                phi[impossible] = exact
            so_far = (chosen, changes, khats, sizes)
            return _continue_linearly(
                flat_f, flat_l, weights, so_far, phi, (mcse, inflation), goal, k_max, store
            )
        chosen.extend(best.tolist())
        set_lik, weights, khat = next_lik, next_weights, next_khat
    how = np.array(["start"] + ["reweighted"] * (len(changes) - 1))
    order = np.array(chosen, dtype=int)
    changes_, khats_, sizes_ = np.array(changes), np.array(khats), np.array(sizes)
    return AmipPath(order, changes_, khats_, stopped, sizes_, how, order.size, float(mcse))


def _joining_sum(flat_l: np.ndarray, units: np.ndarray, store=None) -> np.ndarray:
    """The log-likelihood of the units joining a set, summed at each of the first ``n``
    draws of ``flat_l`` (n, U): from the rows ``store`` holds where they are all held and
    finite (up to a constant, which the set's importance weights do not see; the rows lie
    contiguous, a column is a cache line per draw), else from the columns."""
    if store is not None and store.n_draws >= flat_l.shape[0]:
        held = store.set_sum(units, finite=True)
        if held is not None:
            return held[: flat_l.shape[0]]
    return _float_columns(flat_l, units).sum(axis=1)


def _influence(received, direction: int, m: int, chosen: list) -> np.ndarray:
    """Every unit's influence ``phi`` (U,) as a search reads it: the product it received
    (:func:`bayesij.array.amip_lockstep.run_in_lockstep`), or from a screened product the
    exact values wherever a unit could be among the ``m`` largest positive gains
    ``-direction * phi`` outside ``chosen`` (a gain of ``-inf`` elsewhere;
    :meth:`bayesij.array.amip_screen.ScreenedInfluence.top`)."""
    if isinstance(received, np.ndarray):
        return np.array(received, dtype=float)
    return received.top(direction, m, chosen)


#: The linear continuation reads the Monte Carlo errors of its candidates in prefixes of
#: this many units, doubling, until the target is reached (or the candidates run out).
FIRST_PREFIX = 64


def _continue_linearly(
    flat_f, flat_l, weights, so_far: tuple, phi, errors: tuple, goal: Goal, k_max: int, store=None
) -> AmipPath:
    """Extend a reweighted path from its last reliable posterior (``weights``) with the
    first-order prediction under those weights. ``so_far``: the path's units, changes,
    k-hats and sizes up to there; ``errors``: the reweighted metric's Monte Carlo error
    there and the chains' :func:`chain_inflation` of the influences' errors.

    The Monte Carlo errors of the candidates' influences are computed for a growing prefix
    of the ranking (:data:`FIRST_PREFIX` units, then doubling) until the target is reached:
    the columns of the set, not the whole matrix."""
    chosen, changes, khats, sizes = so_far
    mcse, inflation = errors
    sign, z, direction, need = goal.sign, goal.z, goal.direction, goal.need
    gain = -direction * np.nan_to_num(phi, nan=-np.inf * direction)
    gain[chosen] = -np.inf
    extra = top_positive(gain, k_max - len(chosen))
    start = changes[-1]
    linear = start + np.cumsum(-phi[extra])
    noise_sq = np.empty(extra.size)
    reached, done = np.zeros(0, dtype=int), 0
    while done < extra.size and not reached.size:
        upto = min(extra.size, max(FIRST_PREFIX, 2 * done))
        noise = weighted_influence_mcse(flat_f, flat_l, weights, sign, z, extra[done:upto], store)
        noise_sq[done:upto] = np.nan_to_num(noise * inflation) ** 2
        noise = np.sqrt(mcse**2 + np.cumsum(noise_sq[:upto]))
        reached = np.flatnonzero(passes(direction, linear[:upto], need, noise))
        done = upto
    if reached.size:
        extra, linear, stopped = extra[: reached[0] + 1], linear[: reached[0] + 1], "reached"
    elif len(chosen) + extra.size >= k_max:
        stopped = "alpha_max"
    else:
        stopped = "no unit moves the metric that way"
    n_reliable = len(chosen)
    order = np.concatenate([np.array(chosen, dtype=int), extra])
    how = np.array(
        ["start"] + ["reweighted"] * (len(changes) - 1) + ["linear continuation"] * extra.size
    )
    return AmipPath(
        order,
        np.concatenate([changes, linear]),
        np.concatenate([khats, np.full(extra.size, np.nan)]),
        stopped,
        np.concatenate([sizes, n_reliable + np.arange(1, extra.size + 1)]),
        how,
        n_reliable,
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
    f: np.ndarray, log_lik: np.ndarray, units: np.ndarray, sign: int, z: float, set_lik=None
) -> tuple[float, float]:
    """First-order change of the metric from dropping ``units``, and its MCSE (batch means).

    ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U); ``set_lik``: the set's
    log-likelihood at the draws (S,) up to a constant, finite (read from ``log_lik`` when
    None).
    """
    g_star = metric_draws(f, sign, z)[..., None]
    if set_lik is None:
        set_lik = set_column_sum(log_lik.reshape(f.size, -1), np.asarray(units))
    set_lik = set_lik.reshape(*f.shape, 1)
    scores = influence_scores(g_star, set_lik, n_blocks=max(2, min(50, f.size // 20)), check=False)
    return float(-scores.psi[0, 0]), float(scores.mcse[0, 0])


@dataclass(frozen=True)
class Goal:
    """What to move and how far: the metric ``mean + sign z sd`` (``metric`` names it),
    its value on the full data, the ``direction`` (+1 or -1) and the amount ``need``;
    ``sd`` is the quantity's posterior sd on the full data. ``start_mcse``: a numeric
    target's (``fixed``) Monte Carlo error of the mean it starts from, which a refit's
    change is measured from (0 otherwise: a sign or significance target is a value)."""

    metric: str
    sign: int
    direction: int
    need: float
    value: float
    z: float
    sd: float = float("nan")
    fixed: bool = False
    start_mcse: float = 0.0

    def reached_by(self, change, mcse) -> bool:
        """Whether a change (of a refit, or estimated) with Monte Carlo SE ``mcse`` reaches
        the goal (:func:`passes`)."""
        return bool(passes(self.direction, change, self.need, mcse))

    def need_at(self, mean, sd):
        """The need had the quantity's mean and sd been ``mean`` and ``sd`` (arrays
        alike): the metric's distance from zero in the goal's direction, or the fixed
        change of a numeric target (``fixed``)."""
        if self.fixed:
            return np.full(np.shape(mean), self.need)
        return -self.direction * (np.asarray(mean) + self.sign * self.z * np.asarray(sd))

    @property
    def parts(self) -> int:
        """Influence rows the goal's searches use: 1 (the mean), or 3 for an interval end
        (the linearised metric ``g*``, the mean and the centred square, whose moments
        predict the sd after a drop: :meth:`change_from`)."""
        return 1 if self.sign == 0 else 3

    @property
    def block_parts(self) -> int:
        """Rows of block sums the goal keeps for the block bootstrap: the mean's, and for
        an interval end the centred square's (``g*`` is linear in the two:
        :func:`metric_block_sums`)."""
        return 1 if self.sign == 0 else 2

    def change_from(self, d_mean, d_var):
        """The metric's change after a drop whose first-order changes of the mean and of
        the variance (``E[(f - mean)^2]``) are ``d_mean`` and ``d_var`` (arrays alike):
        ``d_mean + s z (sqrt(sd^2 + d_var) - sd)``. Linear in the posterior moments, exact
        in the square root: linearising the sd as well (``g*``) overshoots when a few
        units hold much of the variance (an interval end predicted to cross zero one
        observation early on a heavy-tailed regression)."""
        if self.sign == 0:
            return d_mean
        var = np.maximum(self.sd**2 + np.asarray(d_var), 0.0)
        return d_mean + self.sign * self.z * (np.sqrt(var) - self.sd)


def goal_for(f: np.ndarray, target, z: float) -> Goal:
    """The goal of ``target`` ("sign", "significance", "sign_and_significance" or a change
    Delta of the mean) for draws ``f`` of one quantity."""
    mean, sd = float(f.mean()), float(f.std(ddof=1))
    if not isinstance(target, str):
        direction = 1 if target > 0 else -1
        start = mean_mcse(np.asarray(f, dtype=float).reshape(-1, np.shape(f)[-1]))
        return Goal("mean", 0, direction, abs(float(target)), mean, z, sd, True, start)
    if target == "sign":
        return Goal("mean", 0, -1 if mean > 0 else 1, abs(mean), mean, z, sd)
    # The end on the mean's side is the far one (larger in magnitude), the other the near.
    same_side = 1 if mean >= 0 else -1
    sign = -same_side if target == "significance" else same_side
    value = mean + sign * z * sd
    name = "lower end" if sign < 0 else "upper end"
    return Goal(name, sign, -1 if value > 0 else 1, abs(value), value, z, sd)


def metric_influence(f, log_lik, goal, score=None, unconstrained=None, keep_blocks=False):
    """Influence of the goal's metric on every unit (:func:`metrics_influence` of one)."""
    return metrics_influence([f], log_lik, [goal], score, unconstrained, keep_blocks)


def metrics_influence(
    fs, log_lik, goals, score=None, unconstrained=None, keep_blocks=False, centres=None
):
    """Influence of each goal's metric on every unit, one row per goal: one pass over the
    draws for all of them; with the log posterior's ``score`` (and ``unconstrained``
    draws), by zero-variance control variates
    (:func:`bayesij.array.control_variates.zero_variance_influence`); ``keep_blocks``: with
    the block sums the Monte Carlo replicates of :mod:`bayesij.array.amip_noise` need.

    ``fs``: draws (n_chains, n_draws) of each goal's quantity; ``log_lik`` (n_chains,
    n_draws, U). Returns InfluenceScores with ``psi`` and ``mcse`` (sum of the goals'
    :attr:`Goal.parts`, U): each goal's rows in turn (:func:`goal_rows`). ``centres``:
    :func:`goal_centres` of these draws, when already computed."""
    if centres is None:
        centres = goal_centres(fs, goals, score, unconstrained)
    blocks_of = _block_rows(goals) if keep_blocks else None
    if score is None:  # block sums only feed the bootstrap: float32 is plenty, half the memory
        draws, rows = _shared_parts(fs, goals, centres)
        return influence_scores(
            draws,
            log_lik,
            check=False,
            keep_blocks=keep_blocks,
            blocks_dtype=np.float32,
            blocks_of=blocks_of,
            rows=rows,
        )
    g_star = np.stack(
        [
            part
            for f, g, c in zip(fs, goals, centres, strict=True)
            for part in _metric_parts(f, g, c)
        ],
        -1,
    )
    from bayesij.array.control_variates import zero_variance_influence

    return zero_variance_influence(
        g_star, log_lik, score, unconstrained, keep_blocks=keep_blocks, blocks_of=blocks_of
    )


def _block_rows(goals: list) -> np.ndarray:
    """The influence rows whose block sums are kept (:attr:`Goal.block_parts` per goal:
    each goal's first row for the mean, the mean's and the square's for an interval end,
    not ``g*``'s)."""
    rows, start = [], 0
    for goal in goals:
        rows += [start] if goal.parts == 1 else [start + 1, start + 2]
        start += goal.parts
    return np.array(rows, dtype=int)


def metric_block_sums(block_sums, goal: Goal) -> np.ndarray:
    """The block sums of a goal's metric (B, U) as float64, 0 where not finite, from its
    block rows (B, :attr:`Goal.block_parts`, U): the mean's, or for an interval end
    ``g* = f + s z (f - c)^2 / (2 sd)`` from the mean's and the centred square's (block
    sums are linear in the draws they sum: ``sd`` is the goal's, the draws' own)."""
    sums = finite_copy(block_sums[:, 0, :])
    if goal.block_parts > 1:
        sums += goal.sign * goal.z / (2 * goal.sd) * finite_copy(block_sums[:, 1, :])
    return sums


def _metric_parts(f: np.ndarray, goal: Goal, centre: float) -> list:
    """The draws whose influences a goal's searches use (:attr:`Goal.parts`): ``g*``
    (:func:`metric_draws`), and for an interval end ``f`` and ``(f - centre)^2``, squares
    centred at the estimate of the posterior mean ``centre``."""
    if goal.parts == 1:
        return [f]
    square, scale = _square_and_scale(f, goal.sign, goal.z, centre)
    return [f + scale * square, f, square]


def _shared_parts(fs: list, goals: list, centres: list) -> tuple[np.ndarray, tuple]:
    """The distinct draws behind the goals' rows (:func:`_metric_parts`), (n_chains,
    n_draws, D), and each row as a combination of them, ``(first, second, coef)``
    (:func:`bayesij.array.influence.influence_scores`' ``rows``): a quantity's draws once
    for all its goals, its squares once per centre, and ``g* = f + s z (f - c)^2 / (2 sd)``
    from the two (the influence is linear in the draws)."""
    columns: list = []
    where: dict = {}

    def column(key, values) -> int:
        if key not in where:
            where[key] = len(columns)
            columns.append(values)
        return where[key]

    first: list = []
    second: list = []
    coef: list = []
    for f, goal, centre in zip(fs, goals, centres, strict=True):
        key = (f.shape, f.tobytes())
        mean = column(("f", key), f)
        if goal.parts == 1:
            first, second, coef = first + [mean], second + [mean], coef + [0.0]
            continue
        values, scale = _square_and_scale(f, goal.sign, goal.z, centre)
        square = column(("square", key, centre), values)
        first += [mean, mean, square]
        second += [square, mean, square]
        coef += [scale, 0.0, 0.0]
    rows = (np.array(first), np.array(second), np.array(coef, dtype=float))
    return np.stack(columns, -1), rows


def goal_centres(fs: list, goals: list, score=None, unconstrained=None) -> list:
    """Where each interval end's squares are centred (:func:`_metric_parts`): the posterior
    mean, by zero-variance control variates when the log posterior's ``score`` is given
    (of the draws' shape and finite; otherwise :func:`metrics_influence` refuses it), else
    the draws' mean; one fit for all the goals. Centred at the plain mean,
    ``Cov((f - fbar)^2, l)`` is off by ``2 (fbar - mu) Cov(f, l)``: negligible beside the
    plain covariance's own error, but 20-30 % of the sd's influence once control variates
    have removed that error (a heavy-tailed regression's outliers). Compute them once per
    set of draws (:func:`influence_centres`), not per block of units."""
    centres = [float(f.mean()) for f in fs]
    ends = [k for k, g in enumerate(goals) if g.parts > 1]
    if not ends or not _usable(score, unconstrained, fs[0].shape):
        return centres
    from bayesij.array.control_variates import zero_variance_means

    columns = np.stack([fs[k].reshape(-1) for k in ends], axis=1)
    means, _ = zero_variance_means(columns, score, unconstrained)
    for k, mean in zip(ends, means, strict=True):
        centres[k] = float(mean)
    return centres


def _usable(score, unconstrained, shape) -> bool:
    """Whether ``score`` (and ``unconstrained``) fit draws of ``shape`` and are finite."""
    if score is None or np.shape(score)[:2] != shape:
        return False
    if unconstrained is not None and np.shape(unconstrained) != np.shape(score):
        return False
    arrays = [score] if unconstrained is None else [score, unconstrained]
    return all(np.all(np.isfinite(np.asarray(a, dtype=float))) for a in arrays)


def influence_centres(fs: list, goals: list, with_half: bool, score=None, unconstrained=None):
    """:func:`goal_centres` for the draws :func:`goal_influence` uses, once for every block:
    ``{"all": [...], "half": [...]}`` (the half of :func:`split_halves`), or None without
    a ``score`` (the draws' means, cheap per block)."""
    if score is None or not fs:
        return None
    out = {"all": goal_centres(fs, goals, score, unconstrained)}
    if with_half:
        _, (first, _), axis = split_halves(*fs[0].shape)

        def half(values):
            return None if values is None else take_draws(np.asarray(values), first, axis)

        out["half"] = goal_centres([half(f) for f in fs], goals, half(score), half(unconstrained))
    return out


def change_along(scores, goal: Goal):
    """For an interval end whose scores hold its moments' rows (:attr:`Goal.parts`): a
    function of an order of units returning the metric's predicted change after each
    prefix (k + 1,), by :meth:`Goal.change_from` on the summed influences of the mean and
    the centred square. None for the mean (the sums of ``psi`` are its change)."""
    if goal.parts == 1 or scores.psi.shape[0] < 3:
        return None
    psi_mean, psi_var = np.nan_to_num(scores.psi[1]), np.nan_to_num(scores.psi[2])

    def along(order: np.ndarray) -> np.ndarray:
        d_mean = np.concatenate([[0.0], np.cumsum(-psi_mean[order])])
        d_var = np.concatenate([[0.0], np.cumsum(-psi_var[order])])
        return np.asarray(goal.change_from(d_mean, d_var), dtype=float)

    return along


def _moments(scores, goal: Goal) -> Moments | None:
    """The block bootstrap's moments of an interval end (:class:`Moments`), or None."""
    if goal.parts == 1 or scores.psi.shape[0] < 3 or scores.block_sums is None:
        return None
    return Moments(scores.psi[1:3], scores.block_sums[:, :2, :], goal.change_from)


def goal_rows(scores, goals: list) -> list:
    """:func:`metrics_influence`'s scores split by goal: each goal's rows (its
    :attr:`Goal.parts`; block sums: its :attr:`Goal.block_parts`), as the scores of that
    goal alone (row 0: ``g*``). Block sums already split by goal
    (:func:`split_goal_sums`) are taken goal by goal."""
    rows, start, block_start = [], 0, 0
    for index, goal in enumerate(goals):
        rows_of_goal = slice(start, start + goal.parts)
        blocks, units = scores.block_sums, scores.block_units
        if isinstance(blocks, tuple):  # already split by goal
            blocks = blocks[index]
        elif isinstance(blocks, np.ndarray):
            blocks = blocks[:, block_start : block_start + goal.block_parts]
        if isinstance(units, tuple):  # each goal's own units (CandidateSums)
            units = units[index]
        rows.append(
            scores._replace(
                psi=scores.psi[rows_of_goal],
                mcse=scores.mcse[rows_of_goal],
                block_sums=blocks,
                block_units=units,
            )
        )
        start, block_start = start + goal.parts, block_start + goal.block_parts
    return rows


def split_goal_sums(influence: dict, goals: list) -> dict:
    """One block's :func:`goal_influence` with the block sums on all draws as one array per
    goal, (B, :attr:`Goal.block_parts`, b) each, instead of one (B, rows, b) array:
    joined over many blocks, each goal's sums are then let go block by block as they are
    copied, where one array of all of them would be held twice over at the join (they are
    most of an audit's per-unit results)."""
    scores = influence["all"]
    if not isinstance(scores.block_sums, np.ndarray):
        return influence
    stops = np.cumsum([g.block_parts for g in goals])
    sums = tuple(
        np.ascontiguousarray(scores.block_sums[:, stop - g.block_parts : stop])
        for g, stop in zip(goals, stops, strict=True)
    )
    return {**influence, "all": scores._replace(block_sums=sums)}


def draw_block_layout(n_chains: int, n_draws: int, n_blocks: int = 50):
    """Sizes (B,) and chains (B,) of the blocks of draws the influence pass keeps sums of
    (:func:`bayesij.array.blocks.draw_blocks`)."""
    codes, blocks = _influence_blocks(n_chains, n_draws, n_blocks)
    return np.array([b.size for b in blocks], float), np.array([codes[b[0]] for b in blocks])


def _influence_blocks(n_chains: int, n_draws: int, n_blocks: int = 50) -> tuple:
    """The chain of each draw (flattened) and the blocks of draws (lists of positions) the
    influence pass keeps sums of."""
    from bayesij.array.blocks import draw_blocks

    codes = np.repeat(np.arange(n_chains), n_draws)
    return codes, draw_blocks(codes, n_blocks)


def _bootstrap_blocks(scores, f: np.ndarray, goal: Goal):
    """The block bootstrap's inputs of :func:`bayesij.array.amip_noise.linear_answer`, or
    None without block sums."""
    if getattr(scores, "block_sums", None) is None:
        return None
    sizes, chains = draw_block_layout(*f.shape)
    return metric_block_sums(scores.block_sums, goal), sizes, chains


def _start(f: np.ndarray, goal: Goal) -> Start:
    """The metric's value's Monte Carlo error for the block bootstrap (:class:`Start`):
    the quantity's block sums in the layout of the influences' (:func:`draw_block_layout`)."""
    centre = float(f.mean())
    flat = f.reshape(-1) - centre
    _, blocks = _influence_blocks(*f.shape)
    sums = np.array([[flat[b].sum(), (flat[b] ** 2).sum()] for b in blocks])
    return Start(sums, centre, f.size, goal.need_at)


def goal_influence(
    log_lik: np.ndarray,
    fs: list,
    goals: list,
    with_half: bool,
    score=None,
    unconstrained=None,
    centres: dict | None = None,
) -> dict:
    """The influence of each goal's metric on every unit of ``log_lik`` (n_chains,
    n_draws, U) (checked), on all draws (``"all"``, with block sums) and, with
    ``with_half``, on the first half of :func:`split_halves` (``"half"``, where the linear
    split-draw check chooses its set); rows in the order of ``goals`` (:func:`goal_rows`
    takes one). ``fs``: each goal's quantity draws (n_chains, n_draws); ``score`` and
    ``unconstrained`` (n_chains, n_draws, P): as :func:`metrics_influence`; ``centres``:
    :func:`influence_centres` of the same draws, computed once for every block."""
    centres = centres or {}
    out = {
        "all": metrics_influence(fs, log_lik, goals, score, unconstrained, True, centres.get("all"))
    }
    if with_half:
        _, (first, _), axis = split_halves(*fs[0].shape)

        def half(values):
            return None if values is None else take_draws(np.asarray(values), first, axis)

        out["half"] = metrics_influence(
            [half(f) for f in fs],
            half(log_lik),
            goals,
            half(score),
            half(unconstrained),
            centres=centres.get("half"),
        )
    return out


def search_path(method, f, log_lik, goal, k_max, k_threshold, scores=None) -> AmipPath:
    """The path of ``method`` ("linear" or "reweighted") towards ``goal`` from draws ``f``
    (n_chains, n_draws) and ``log_lik`` (n_chains, n_draws, U)."""
    if method == "linear":
        scores = metric_influence(f, log_lik, goal) if scores is None else scores
        return linear_path(
            scores.psi[0],
            goal.direction,
            goal.need,
            k_max,
            scores.mcse[0],
            change_along(scores, goal),
        )
    return reweighted_path(f, log_lik, goal, k_max, k_threshold)


def hybrid_changes(f, log_lik, reliable, extra, metrics: list, sums=(None, None)) -> list[float]:
    """Change of each metric ``(sign, z)`` from dropping ``reliable`` (estimated by
    reweighting the draws) and then ``extra`` (first order under those weights), the set's
    columns read once. ``f`` (n_chains, n_draws), ``log_lik`` (n_chains, n_draws, U);
    ``sums``: the two sets' log-likelihood at the draws (S,) up to a constant, where known
    (:func:`held_sums`; ``reliable``'s finite, ``extra``'s non-finite values as 0)."""
    flat_f, flat_l = f.reshape(-1), log_lik.reshape(f.size, -1)
    uniform = np.full(flat_f.size, 1 / flat_f.size)
    weights = uniform
    reliable_sum, extra_sum = sums
    if reliable.size:
        if reliable_sum is None:
            reliable_sum = set_column_sum(flat_l, reliable)
        weights, _ = set_weights(reliable_sum, f.shape)
    if not extra.size:
        extra_sum = None
    elif extra_sum is None:
        extra_sum = finite_column_sum(flat_l, extra)
    changes = []
    for sign, z in metrics:
        before = weighted_value(flat_f, uniform, sign, z)[0]
        value, weighted, _ = weighted_value(flat_f, weights, sign, z)
        if extra_sum is not None:
            value -= float(weighted @ extra_sum)
        changes.append(value - before)
    return changes


def finite_column_sum(flat_l: np.ndarray, units: np.ndarray) -> np.ndarray:
    """``sum_{u in units} l_su`` at each draw (S,), non-finite values counted as 0 (a unit
    impossible at a draw adds nothing to its first-order change); read in chunks of
    columns, or for a large set of a float64 matrix as one product with the set's
    indicator."""
    if flat_l.dtype == np.float64 and units.size * 16 > flat_l.shape[1]:
        indicator = np.zeros(flat_l.shape[1])
        indicator[units] = 1.0
        with np.errstate(invalid="ignore"):
            total = flat_l @ indicator  # one streaming pass rather than a large gather
        if np.isfinite(total).all():  # else some unit is impossible somewhere: gather
            return total
    total = np.zeros(flat_l.shape[0])
    for chunk in obs_chunks(units.size, _SET_GATHER * flat_l.shape[0]):
        columns = np.asarray(flat_l[:, units[chunk]], dtype=float)
        total += np.where(np.isfinite(columns), columns, 0.0).sum(axis=1)
    return total


def _reweighted_after(f, log_lik, path: AmipPath, store=None) -> tuple[float, float]:
    """Predicted posterior mean and sd after dropping the reweighted path's set (its sums
    from the rows ``store`` holds, :func:`held_sums`)."""
    flat = f.reshape(-1)
    mean, sd = float(flat.mean()), float(flat.std(ddof=1))
    if path.order.size == 0:
        return mean, sd
    reliable, extra = path.order[: path.reliable], path.order[path.reliable :]
    _, *sums = held_sums(store, path.order, path.reliable, f.size)
    metrics = [(0, 1.0), (1, 1.0)]
    change_mean, change_upper = hybrid_changes(f, log_lik, reliable, extra, metrics, sums)
    sd = float(flat.std())  # divisor S, as weighted_value's sd under uniform weights
    return mean + change_mean, sd + change_upper - change_mean


def _question_steps(f, log_lik, goal, k_max, k_threshold, impossible, halves, store=None):
    """One question's searches as one generator (:func:`reweighted_steps`, reading the
    rows ``store`` holds): its path on all draws, then the split-draw check's path on the
    first half (``halves``: the first half's slice, its axis and its impossible units;
    None: no check). Returns both paths (the second None without a check)."""
    path = yield from reweighted_steps(f, log_lik, goal, k_max, k_threshold, impossible, store)
    if halves is None:
        return path, None
    first, axis, impossible_a = halves
    chosen = yield from reweighted_steps(
        take_draws(f, first, axis),
        take_draws(log_lik, first, axis),
        goal if path.stopped == "reached" else replace(goal, need=np.inf),
        max(1, path.order.size),
        k_threshold,
        impossible_a,
        store,
    )
    return path, chosen


def _screen(flat_l, f, halves, parameters, store=None) -> InfluenceScreen | None:
    """The screen of the steps' products over all draws and the split-draw check's first
    half (reading the rows ``store`` holds), or None without parameters or where their
    design is too wide."""
    design = None if parameters is None else screen_design(parameters)
    if design is None:
        return None
    prefixes = [flat_l.shape[0]]
    if halves is not None:
        prefixes.append(take_draws(f, halves[0], halves[1]).size)
    return InfluenceScreen(flat_l, design, prefixes, store)


def _split_check(f, log_lik, goal, chosen, store=None) -> dict:
    """The split-draw check of a set chosen by reweighting on the first half of the draws:
    its effect estimated on the other half (the set's sums from the rows ``store`` holds,
    :func:`held_sums`)."""
    how, (first, second), axis = split_halves(*f.shape)
    if chosen is None or chosen.order.size == 0:
        return {}
    f_a, f_b = take_draws(f, first, axis), take_draws(f, second, axis)
    l_a, l_b = take_draws(log_lik, first, axis), take_draws(log_lik, second, axis)
    whole, *parts_sums = held_sums(store, chosen.order, chosen.reliable, f.size, whole=True)

    def half(total, part):
        if total is None:
            return None
        return take_draws(total.reshape(f.shape), part, axis).reshape(-1)

    _, mcse = linear_set_change(f_b, l_b, chosen.order, goal.sign, goal.z, half(whole, second))
    parts = chosen.order[: chosen.reliable], chosen.order[chosen.reliable :]
    metric = [(goal.sign, goal.z)]
    [naive] = hybrid_changes(f_a, l_a, *parts, metric, [half(t, first) for t in parts_sums])
    [split] = hybrid_changes(f_b, l_b, *parts, metric, [half(t, second) for t in parts_sums])
    return _split_summary(how, chosen, naive, split, mcse)


def held_sums(store, order: np.ndarray, reliable: int, n_draws: int, whole=False) -> tuple:
    """A set's log-likelihood summed at each draw (S,), up to a constant, from the centred
    rows a :class:`~bayesij.array.amip_curvature.CentredColumns` ``store`` holds (None
    where it does not hold them all): with ``whole`` the set ``order`` (else None), its
    first ``reliable`` units, each where finite at every draw (a unit impossible at some
    draw must keep its ``-inf``), and the rest with non-finite values as 0. A constant
    changes neither importance weights nor covariances with the draws, and the rows lie
    contiguous where the columns of a (draws, units) matrix are gathered one cache line
    per draw."""
    if store is None or store.n_draws != n_draws:
        return None, None, None
    whole = store.set_sum(order, finite=True) if whole else None
    reliable_sum = store.set_sum(order[:reliable], finite=True) if reliable else None
    extra_sum = store.set_sum(order[reliable:]) if reliable < order.size else None
    return whole, reliable_sum, extra_sum


def _halves(shape, flat_l, impossible):
    """The split-draw check's first half (slice, axis, impossible units there), or None
    when a half has fewer than 4 draws per chain. ``shape``: (n_chains, n_draws); the
    first half's draws are the first rows of ``flat_l``."""
    _, (first, second), axis = split_halves(*shape)
    positions = np.arange(shape[0] * shape[1]).reshape(shape)
    part_a, part_b = take_draws(positions, first, axis), take_draws(positions, second, axis)
    if part_a.shape[1] < 4 or part_b.shape[1] < 4:
        return None
    impossible_a = impossible[impossible_columns(flat_l[: part_a.size, impossible])]
    return first, axis, impossible_a


class AmipSearch(NamedTuple):
    """Everything one AMIP search found, as arrays.

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
    answer : NoiseAnswer or None
    second_change : ndarray or None
        The linear curve carried to second order (:mod:`bayesij.array.amip_curvature`;
        ``+-inf`` past its breakdown), beside ``linear_change``; None without the model.
    """

    goal: Goal
    path: AmipPath
    linear_change: np.ndarray
    mean_after: float
    sd_after: float
    monte_carlo: dict
    answer: NoiseAnswer | None = None
    second_change: np.ndarray | None = None


def reweighted_search(
    f: np.ndarray, log_lik: np.ndarray, goal: Goal, scores, k_max: int, k_threshold: float
) -> AmipSearch:
    """The greedy reweighted AMIP from the metric's influence scores on all draws;
    ``log_lik`` (n_chains, n_draws, n_units) is revisited after every addition, so it must
    be in memory (:func:`reweighted_searches` of one search)."""
    return reweighted_searches([f], log_lik, [goal], [scores], k_max, k_threshold)[0]


#: From this many log-likelihood values on, :func:`reweighted_searches` finishes a question
#: while the others still step (its core given to the steps' products): at N = 10^4 and
#: 10^5 (4000 draws) the audit took about 8 % less; at N = 1000, where steps and
#: finishing are mostly the interpreter's and share its lock, 5 % more.
OVERLAP_VALUES = 2**24


def reweighted_searches(
    fs: list,
    log_lik: np.ndarray,
    goals: list,
    scores: list,
    k_max: int,
    k_threshold: float,
    nonlinearities: list | None = None,
    parameters: np.ndarray | None = None,
) -> list[AmipSearch]:
    """Greedy reweighted AMIPs of several metrics at once, sharing passes over the draws.

    Parameters
    ----------
    fs : list of ndarray of shape (n_chains, n_draws)
        Draws of the quantity of each search.
    log_lik : ndarray of shape (n_chains, n_draws, n_units)
        In memory, float64 or float32 (read as float64 a chunk or a set of columns at a
        time, never converted whole): every greedy step reads it whole, once for all
        searches (:func:`bayesij.array.amip_lockstep.run_in_lockstep`).
    goals : list of Goal
    scores : list of InfluenceScores
        Each goal's metric influence on all draws, with block sums (:func:`goal_influence`).
    k_max : int
    k_threshold : float
    nonlinearities : list of callable or None, optional
        Each goal's second-order ratios along a set (:func:`linear_paths`).
    parameters : ndarray of shape (n_chains, n_draws, P), optional
        The fit's parameter draws: the steps' products are then screened by a quadratic
        model of the columns in them (:class:`~bayesij.array.amip_screen.InfluenceScreen`:
        the same choices, most columns never read per step).

    Returns
    -------
    list of AmipSearch
        In the order of ``goals``; each the same as a search run alone.
    """
    nonlinearities = nonlinearities or [None] * len(goals)
    flat_l = log_lik.reshape(-1, log_lik.shape[-1])
    impossible = np.flatnonzero(impossible_columns(flat_l))
    halves = _halves(fs[0].shape, flat_l, impossible)
    stores = [n.store for n in nonlinearities if n is not None and hasattr(n, "store")]
    store = stores[0] if stores else None  # the second-order model's rows, shared
    searches = [
        _question_steps(f, log_lik, g, k_max, k_threshold, impossible, halves, store)
        for f, g in zip(fs, goals, strict=True)
    ]
    screen = _screen(flat_l, fs[0], halves, parameters, store)
    if screen is not None and store is not None:
        store.screened_by(screen)  # the second-order model's unit terms from its basis

    def finish(k: int, both: tuple) -> AmipSearch:
        path, chosen = both
        return _finished_search(
            fs[k], log_lik, goals[k], scores[k], path, chosen, nonlinearities[k], k_max
        )

    if flat_l.size >= OVERLAP_VALUES:  # finished as soon as its steps are done
        found = map_as_ready(
            finish, lambda done: run_in_lockstep(flat_l, searches, screen, done), len(goals)
        )
    else:
        both = run_in_lockstep(flat_l, searches, screen)
        found = list(map_ordered(lambda k: finish(k, both[k]), range(len(goals))))
    release_freed_memory()  # the bootstraps' copies of the block sums
    return found


def _finished_search(
    f, log_lik, goal: Goal, score, path: AmipPath, chosen, nonlinearity, k_max: int
) -> AmipSearch:
    """One question's :class:`AmipSearch` from its reweighted ``path`` and split-draw path
    ``chosen`` (:func:`_question_steps`): the answer under Monte Carlo error and
    linearisation, the set reported and its split-draw check. Questions are independent:
    :func:`reweighted_searches` finishes them on threads."""
    store = getattr(nonlinearity, "store", None)
    check = _split_check(f, log_lik, goal, chosen, store)
    linear = linear_path(
        score.psi[0], goal.direction, np.inf, k_max, score.mcse[0], change_along(score, goal)
    )
    blocks = _bootstrap_blocks(score, f, goal)
    answer, sure = _reweighted_answer(path, score, goal, k_max, f, blocks, nonlinearity)
    continued = path.stopped == "reached" and path.reliable < path.order.size
    if answer.answer == "undetermined" and path.stopped == "reached" and answer.sure_size:
        smaller = path.order.size  # a smaller set, left open by Monte Carlo error
        path, answer = _sure_instead(linear, sure, smaller)
    elif continued and 0 < answer.sure_size <= path.order.size:
        # The continuation's first-order predictions from the reweighted posterior
        # needed as many units as the linear ranking's sure set or more: report the
        # sure set (the one the band proves).
        path, answer = _sure_instead(linear, sure, 0)
    elif path.stopped != "reached" and sure.answer == "reached" and sure.sure_size:
        # The continuation fell short where the ranking's second-order prediction is
        # sure to reach (the continuation is first order): report the sure set.
        path, answer = _sure_instead(linear, sure, 0)
    mean_after, sd_after = _reweighted_after(f, log_lik, path, store)
    second = second_curve(linear, nonlinearity)
    return AmipSearch(goal, path, linear.change, mean_after, sd_after, check, answer, second)


#: A refit of the most influential set of the largest size allowed that falls short of the
#: target even with its change grown by this share (and two Monte Carlo SEs) decides "not
#: reachable": no set of that size moves the metric much further than the most influential
#: one, whose nonlinearity the refit has measured.
SLACK = 0.5


def far_short(goal: Goal, change: float, mcse: float, slack: float = SLACK) -> bool:
    """Whether a refitted ``change`` of the most influential set of the largest size
    falls short of the goal past ``slack`` (:data:`SLACK`, or a share that refits
    measured: :func:`bayesij.refit.amip.measured_slack`) and :data:`MC_MARGIN` Monte Carlo
    SEs."""
    gained = goal.direction * change
    return bool((1 + slack) * max(gained, 0.0) + MC_MARGIN * mcse < goal.need)


def short_of(goal: Goal, mcse: float, slack: float = SLACK) -> float:
    """The change toward the goal below which a set is :func:`far_short` of it:
    ``(need - MC_MARGIN mcse) / (1 + slack)`` (up to round-off at the edge itself)."""
    return (goal.need - MC_MARGIN * mcse) / (1 + slack)


def _sure_instead(linear: AmipPath, sure: NoiseAnswer, smaller: int):
    """The linear search's sure set in place of a reweighted set that the linear
    continuation reached: a smaller one that Monte Carlo error leaves undetermined (its
    size ``smaller``, kept for the text), or a larger one (``smaller`` 0). ``sure``: the
    linear answer of the ranking's own set (:func:`_reweighted_answer`'s second). The
    target *is* reached by the sure set (it reaches it in 97.5 % of the replicates). When
    the sure set is more than twice the size interval's low end plus 2, it is an upper
    bound and the answer stays undetermined (``bound``,
    :func:`bayesij.array.amip_noise.size_settled`)."""
    prefix = _prefix(linear, sure.sure_size, "reached")
    if sure.bound:  # the sure set is an upper bound: how few is undetermined
        return prefix, sure._replace(smaller=smaller)
    return prefix, sure._replace(answer="reached", draws_needed=np.nan, smaller=smaller)


def _prefix(linear: AmipPath, size: int, stopped: str) -> AmipPath:
    """The first ``size`` units of a linear path (nothing reweighted)."""
    return linear._replace(
        order=linear.order[:size],
        change=linear.change[: size + 1],
        pareto_k=linear.pareto_k[: size + 1],
        sizes=linear.sizes[: size + 1],
        how=linear.how[: size + 1],
        stopped=stopped,
        reliable=0,
    )


def _reweighted_answer(path: AmipPath, scores, goal: Goal, k_max: int, f, blocks, nonlinearity):
    """The reweighted search's answer, and the linear answer of the ranking's own set from
    the same replicates (what :func:`_sure_instead` reports when it takes over). Reached
    when the search reached the target (past its Monte Carlo margin); otherwise not
    reachable only if the linear search's replicates agree that even the optimistic end of
    the Monte Carlo error does not reach it, else undetermined (with the draws that would
    decide it)."""
    optimistic, sure = linear_answer(
        scores.psi[0],
        scores.mcse[0],
        goal.direction,
        goal.need,
        k_max,
        path.order,
        f.size,
        ranking_too=True,
        errors=Replicates(blocks, _moments(scores, goal), _start(f, goal)),
        nonlinearity=nonlinearity,
    )
    return _reweighted_verdict(path, optimistic._replace(bound=0), f), sure


def _reweighted_verdict(path: AmipPath, optimistic: NoiseAnswer, f) -> NoiseAnswer:
    """:func:`_reweighted_answer`'s first, from the linear answer of the path's set (its
    ``bound`` cleared: that set is not the one reported). A set reached by reweighting
    alone (k-hat below its threshold throughout) is reached; one that the first-order
    continuation reached is reached only when the linear ranking's sure set (sure under
    the Monte Carlo error and the linearisation band) is no larger, else undetermined."""
    if path.stopped == "reached":
        continued = path.reliable < path.order.size
        if continued and not (optimistic.sure_size and path.order.size >= optimistic.sure_size):
            # Past k-hat's threshold the set grew by first-order predictions: no surer than
            # the linear search's, and smaller than the smallest set sure under both the
            # Monte Carlo error and the linearisation band (or no set is sure).
            by = optimistic.undetermined_by or (
                "Monte Carlo error" if optimistic.sure_size else "linearisation"
            )
            needed = (
                _draws_for_size(optimistic, path.order.size, f.size)
                if by == "Monte Carlo error"
                else np.nan
            )
            return optimistic._replace(
                answer="undetermined", draws_needed=needed, undetermined_by=by
            )
        return optimistic._replace(answer="reached", draws_needed=np.nan, undetermined_by="")
    if optimistic.answer == "not reachable" or path.stopped == "no unit moves the metric that way":
        return optimistic._replace(answer="not reachable", draws_needed=np.nan, undetermined_by="")
    by = optimistic.undetermined_by or "Monte Carlo error"
    needed = optimistic.draws_needed if by == "Monte Carlo error" else np.nan
    return optimistic._replace(answer="undetermined", draws_needed=needed, undetermined_by=by)


class LinearPaths(NamedTuple):
    """The linear method's paths, from the metric's influence scores alone.

    Attributes
    ----------
    path : AmipPath
        Towards the goal.
    linear : AmipPath
        The whole linear curve (no stop at the goal).
    chosen : AmipPath or None
        The split-draw check's set, chosen on the first half of the draws (None: no check).
    answer : NoiseAnswer or None
        The three answers under Monte Carlo error (:func:`bayesij.array.amip_noise.linear_answer`).
    """

    path: AmipPath
    linear: AmipPath
    chosen: AmipPath | None
    answer: NoiseAnswer | None = None


def linear_paths(
    f, goal: Goal, scores, half_scores, k_max: int, nonlinearity=None, half_units=None
) -> LinearPaths:
    """The linear method's paths from the metric's influence scores on all draws and on the
    first half of :func:`split_halves` (:func:`goal_influence`), which may come from a pass
    over a lazy log-likelihood: after them only the sets' summed log-likelihood is read
    (:func:`linear_sets`, :func:`set_sums`).

    The set is the smallest prefix of the ranking that reaches the target in 97.5 % of the
    block-bootstrap replicates (:attr:`~bayesij.array.amip_noise.NoiseAnswer.sure_size`: a
    set that reaches it whatever the Monte Carlo error, errors shared by all units
    included); whether some set within ``k_max`` reaches it, and the interval of the
    smallest one's size, are the answer of
    :func:`bayesij.array.amip_noise.linear_answer`. When that answer is "reached" but no
    prefix is sure, the answer is "undetermined"; when the sure prefix is more than twice
    the size interval's low end plus 2, it is "undetermined" in its size, with the sure
    prefix as the upper bound (``bound``). ``nonlinearity``: the second-order ratios
    along a set (:meth:`bayesij.array.amip_curvature.Curvature.ratios`), which put the
    linearisation error in the answer. ``half_units``: the units (sorted) the first half's
    scores are of, when only the first ``k_max`` of its ranking were kept
    (:class:`~bayesij.array.amip_candidates.RankingRows`); None: every unit."""
    psi, mcse = scores.psi[0], scores.mcse[0]
    linear = linear_path(psi, goal.direction, np.inf, k_max, mcse, change_along(scores, goal))
    answer = linear_answer(
        psi,
        mcse,
        goal.direction,
        goal.need,
        k_max,
        None,
        f.size,
        errors=Replicates(
            _bootstrap_blocks(scores, f, goal),
            _moments(scores, goal),
            _start(f, goal),
            getattr(scores, "block_units", None),
        ),
        nonlinearity=nonlinearity,
    )
    size = answer.chosen_size  # the sure prefix, or the whole ranking within k_max
    if answer.sure_size:
        stopped = "reached"
    else:
        stopped = "alpha_max" if size == k_max else "no unit moves the metric that way"
    path = _prefix(linear, size, stopped)
    if answer.answer == "reached" and path.stopped != "reached":
        answer = _undecided_set(answer, path, mcse, goal, f.size)
    chosen = _split_choice(f, goal, path, half_scores, half_units)
    return LinearPaths(path, linear, chosen, answer)


def _draws_for_size(answer: NoiseAnswer, size: int, n_draws: int) -> float:
    """Draws at which a set of ``size`` would be as sure as the replicates' sure set, by the
    1 / sqrt(S) law applied to the set size interval's width (a rough figure)."""
    low, high = answer.size_interval
    if not np.isfinite(high) or high <= size:
        return float("inf")
    return float(np.ceil(n_draws * max(1.0, ((high - low) / max(size - low, 1.0)) ** 2)))


def _undecided_set(answer: NoiseAnswer, path: AmipPath, mcse, goal: Goal, n_draws: int):
    """A target that some set reaches, but no set within ``k_max`` reaches past its Monte
    Carlo margin: undetermined, with the draws at which the largest set's would."""
    noise = float(np.sqrt(np.nansum(mcse[path.order] ** 2)))
    margin = goal.direction * float(path.change[-1]) - goal.need
    needed = draws_to_decide(n_draws, max(margin, 0.0), noise, MC_MARGIN)
    return answer._replace(answer="undetermined", draws_needed=needed)


def second_curve(linear: AmipPath, nonlinearity) -> np.ndarray | None:
    """The linear curve carried to second order by ``nonlinearity`` (None without it)."""
    if nonlinearity is None:
        return None
    ratios = np.concatenate([[1.0], np.asarray(nonlinearity(linear.order), dtype=float)[0]])
    with np.errstate(invalid="ignore"):
        second = linear.change * ratios
    runaway = np.copysign(np.inf, np.where(linear.change == 0, 1.0, linear.change))
    return np.where(np.isfinite(ratios), second, runaway)


def linear_search(
    f, goal: Goal, paths: LinearPaths, sums: np.ndarray, second: np.ndarray | None = None
) -> AmipSearch:
    """The linear AMIP from its paths and ``sums``, the summed log-likelihood of the set
    (``paths.path.order``) and of the split-draw check's set (``paths.chosen.order``) at
    each draw: every prediction of the linear method is the influence of a set's summed
    log-likelihood, so nothing else is read.

    Parameters
    ----------
    f : ndarray of shape (n_chains, n_draws)
    goal : Goal
    paths : LinearPaths
    sums : ndarray of shape (n_chains, n_draws, 2)
        :func:`set_sums` of ``[paths.path.order, paths.chosen.order]``.
    second : ndarray of shape (k + 1,), optional
        The linear curve carried to second order (:func:`second_curve`).
    """
    path = paths.path
    mean, sd = float(f.mean()), float(f.std(ddof=1))
    whole = np.zeros(1, dtype=int)
    if path.order.size:
        change_mean, _ = linear_set_change(f, sums[:, :, :1], whole, 0, 1.0)
        change_upper, _ = linear_set_change(f, sums[:, :, :1], whole, 1, 1.0)
        d_var = 2 * sd * (change_upper - change_mean)  # first order, as the search's
        mean, sd = mean + change_mean, float(np.sqrt(max(sd**2 + d_var, 0.0)))
    check = {}
    if paths.chosen is not None:
        check = _linear_split_check(f, goal, paths.chosen, sums[:, :, 1:])
    return AmipSearch(goal, path, paths.linear.change, mean, sd, check, paths.answer, second)


def set_sums(log_lik: np.ndarray, sets: list, start: int = 0, out=None) -> np.ndarray:
    """``sum_{u in set} l_u`` at each draw for each set of units, (n_chains, n_draws,
    len(sets)), from a block of units ``start .. start + b`` of the log-likelihood
    (n_chains, n_draws, b): the sets' units inside the block are added to ``out`` (made
    zero when None), a bounded chunk of columns at a time; non-finite values as they are.

    Sets with more than :data:`_GATHERED_AT_MOST` units in a block of an array are summed
    together in one product of the block with their indicators (one streaming read for all
    of them, where each set's gather would read most of the block: 42 sets of up to 10,000
    units in blocks of 10,000 took 0.9 s a block); a set whose product is not finite (some
    ``-inf`` in the block) is gathered as the others. Equal to the gathered sums to
    rounding (1e-15 relative); kept columns (:class:`~bayesij.array.amip_columns.
    KeptColumns`' blocks) are always gathered."""
    n_chains, n_draws, width = log_lik.shape
    if out is None:
        out = np.zeros((n_chains, n_draws, len(sets)))
    insides = [units[(units >= start) & (units < start + width)] - start for units in sets]
    large = [
        k for k, inside in enumerate(insides) if inside.size > max(_GATHERED_AT_MOST, width // 16)
    ]
    if large and isinstance(log_lik, np.ndarray):
        summed = _indicator_sums(log_lik, [insides[k] for k in large])
        for j, k in enumerate(large):
            if np.isfinite(summed[:, j]).all():
                out[:, :, k] += summed[:, j].reshape(n_chains, n_draws)
                insides[k] = insides[k][:0]  # done
    for k, inside in enumerate(insides):
        for chunk in obs_chunks(inside.size, n_chains * n_draws):
            out[:, :, k] += np.asarray(log_lik[:, :, inside[chunk]], dtype=float).sum(axis=2)
    return out


#: :func:`set_sums` gathers a set's columns from a block when it has at most this many
#: units there (or a sixteenth of the block), else sums it by a product with its indicator.
_GATHERED_AT_MOST = 256


def _indicator_sums(log_lik: np.ndarray, insides: list) -> np.ndarray:
    """``L @ I`` for the block (n_chains, n_draws, b) and the sets' indicators (b, K):
    each set's sum at each draw (n_chains * n_draws, K), a chain and a chunk of columns at
    a time (no copy of a block that is a view; float32 converted a chunk at a time), NaN
    where ``-inf`` meets a zero."""
    n_chains, n_draws, width = log_lik.shape
    indicators = np.zeros((width, len(insides)))
    for j, inside in enumerate(insides):
        indicators[inside, j] = 1.0
    total = np.zeros((n_chains, n_draws, len(insides)))
    floats = n_draws if log_lik.dtype != np.float64 else 1
    with np.errstate(invalid="ignore"):
        for chain in range(n_chains):
            for chunk in obs_chunks(width, floats):
                total[chain] += read_columns(log_lik[chain], chunk) @ indicators[chunk]
    return total.reshape(n_chains * n_draws, -1)


def linear_sets(paths: LinearPaths) -> list:
    """The two sets a linear search sums (:func:`linear_search`): its set and the
    split-draw check's (empty without a check)."""
    chosen = paths.chosen.order if paths.chosen is not None else np.zeros(0, dtype=int)
    return [paths.path.order.astype(int), chosen.astype(int)]


def take_draws(values: np.ndarray, part: slice, axis: int) -> np.ndarray:
    """``values[part]`` along ``axis`` (0: chains, 1: draws) as :func:`split_halves` says."""
    return values[part] if axis == 0 else values[:, part]


def _split_choice(f, goal: Goal, path: AmipPath, half_scores, units=None) -> AmipPath | None:
    """The split-draw check's set, chosen on the first half's scores (None: halves too
    short, or nothing chosen); ``units``: those the scores are of (None: every unit)."""
    _, (first, second), axis = split_halves(*f.shape)
    if take_draws(f, first, axis).shape[1] < 4 or take_draws(f, second, axis).shape[1] < 4:
        return None
    need = goal.need if path.stopped == "reached" else np.inf
    psi, mcse = half_scores.psi[0], half_scores.mcse[0]
    along = change_along(half_scores, goal)
    chosen = linear_path(psi, goal.direction, need, max(1, path.order.size), mcse, along)
    if units is not None:
        chosen = chosen._replace(order=np.asarray(units)[chosen.order])
    return chosen if chosen.order.size else None


def _linear_split_check(f, goal: Goal, chosen: AmipPath, summed: np.ndarray) -> dict:
    """:func:`_split_check` of the linear method: the set chosen on the first half, its
    effect estimated on the second; ``summed`` (n_chains, n_draws, 1) is the chosen units'
    summed log-likelihood."""
    how, (first, second), axis = split_halves(*f.shape)
    f_a, f_b = take_draws(f, first, axis), take_draws(f, second, axis)
    l_a, l_b = take_draws(summed, first, axis), take_draws(summed, second, axis)
    split, mcse_split = moment_set_change(f_b, l_b, goal)
    naive, _ = moment_set_change(f_a, l_a, goal)
    return _split_summary(how, chosen, naive, split, mcse_split)


def moment_set_change(f: np.ndarray, summed: np.ndarray, goal: Goal) -> tuple[float, float]:
    """The goal's metric's predicted change from dropping a set whose summed
    log-likelihood at each draw is ``summed`` (n_chains, n_draws, 1), on draws ``f``
    (n_chains, n_draws): first order in the mean and the variance, the sd their square
    root (:meth:`Goal.change_from`, with the sd of ``f``); and the MCSE of the linearised
    change (:func:`linear_set_change`)."""
    every = np.zeros(1, dtype=int)
    change, mcse = linear_set_change(f, summed, every, goal.sign, goal.z)
    if goal.sign == 0:
        return change, mcse
    d_mean, _ = linear_set_change(f, summed, every, 0, 1.0)
    d_upper, _ = linear_set_change(f, summed, every, 1, 1.0)
    sd = float(f.std(ddof=1))
    at = replace(goal, sd=sd)
    return float(at.change_from(d_mean, 2 * sd * (d_upper - d_mean))), mcse


def _split_summary(how: str, chosen: AmipPath, naive: float, split: float, mcse: float) -> dict:
    return {
        "how": how,
        "n_drop": int(chosen.order.size),
        "naive": naive,
        "split": split,
        "mcse": mcse,
        "interval": (split - MC_Z * mcse, split + MC_Z * mcse),
    }
