"""Refits in the loop of an AMIP search: :func:`bayesij.amip`, the draws' answer
(:func:`bayesij.stats.amip.amip_search`) settled by refitting the model without the sets it
proposes, each set once.

The loop alternates refits with searches from each refit's draws until a refit confirms
the target, then bisects towards the smallest prefix a refit confirms; a largest set that
misses is exchanged for the better set its refit's first order finds, and, with budget
left, grown past the limit until a refit reaches the target (the size interval's end).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.amip import (
    MC_MARGIN,
    SLACK,
    far_short,
    linear_path,
    metric_influence,
    passes,
    search_path,
)
from bayesij.array.amip_curvature import SetCurvature, curvature_of
from bayesij.array.checks import fail
from bayesij.array.control_variates import zero_variance_mean
from bayesij.array.numeric import top_positive
from bayesij.array.psis import pareto_k_threshold
from bayesij.data.fit import read
from bayesij.refit.backends import check_backend
from bayesij.stats.amip import AmipResult, _scale_mask, amip_search

__all__ = ["amip"]


def amip(
    data,
    quantity: str,
    target="sign",
    *,
    groups=None,
    var_name=None,
    alpha_max: float = 0.1,
    method: str = "reweighted",
    backend=None,
    max_refits: int = 6,
    grad_log_posterior=None,
) -> AmipResult:
    """Approximate most influential set: the fewest units whose removal reaches a target.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        Draws of the quantity and the pointwise log-likelihood.
    quantity : str
        A quantity name (``'beta[1]'``).
    target : str, float or (str, float), default "sign"
        ``"sign"``: the posterior mean crosses 0. ``"significance"``: the end of
        ``mean ± z sd`` nearer 0 crosses it (significant becomes not, or the reverse), with
        z = 1.96. ``"sign_and_significance"``: the far end crosses 0 (significant with the
        opposite sign). A pair ``("significance", z)`` or ``("sign_and_significance", z)``
        asks the same of ``mean ± z sd`` (``z = 2.576``: 99 %). A float Δ: the posterior
        mean moves by Δ (its sign gives the direction).
    groups : array_like or mapping, optional
        Drop whole groups (default: the container's groups); otherwise observations.
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.
    alpha_max : float, default 0.1
        Largest proportion of units to consider; beyond it the target is "not reachable".
    method : {"reweighted", "linear"}, default "reweighted"
        "linear": units by sorted influence, the first-order prediction. "reweighted": grow
        the set greedily, re-estimating by PSIS-reweighting the draws with
        ``exp(-sum_{n in set} l_n)`` after each addition; once the weights' k-hat passes
        ``min(1 - 1/log10 S, 0.7)`` it continues from the last reliable reweighted
        posterior with the first-order prediction under those weights, marking those
        steps (``curve['estimate']``). "Not reachable" means neither reaches the target
        within ``alpha_max``.
    backend : refit backend, optional
        Refits in the loop (:mod:`bayesij.refit.backends`, or any object with
        ``fit(weights) -> Posterior``). The first refit drops the cheap search's claim (its
        sure set, or where the second-order prediction reaches the target; half of it
        first when it is large, the rest ranked again from that refit's draws); while no
        refit reaches the target, the search goes on from the last refit's draws; once one
        does, bisection finds the smallest prefix a refit confirms, above the size
        interval's low end, within ``max_refits``. The answer, the set, ``size_interval``
        (from the cheap search's optimistic low end to the set: a prefix a refit did
        not confirm says nothing of other sets of its size),
        ``predicted_change`` and ``change_interval`` (the refit's change and its Monte
        Carlo interval) then come from the refits (``verification``; ``refits`` holds the
        history). A reweighted search whose set was partly a first-order continuation
        starts its refits from the linear ranking's claim.
    max_refits : int, default 6
        Budget of refits in the loop (on a logistic regression with sets of 120-300 of
        3020, 6 found sets within 4 % of the estimating equation's iterated AMIP).
    grad_log_posterior : density or (array_like, array_like), optional
        The log posterior's gradient in the unconstrained parameters at each draw, and
        those draws: a model density with ``grad_log_posterior(fit) -> (gradient,
        unconstrained)`` (:class:`bayesij.refit.PyStanDensity`,
        :class:`bayesij.refit.PyMCDensity`) or those two arrays, each (n_chains, n_draws,
        P), as :func:`bayesij.audit` takes them. The influences that rank and predict are
        then estimated with zero-variance control variates (:func:`bayesij.influence`),
        whose Monte Carlo error is far smaller for observations whose log-likelihood is
        heavy-tailed across draws. With them the linear method finds the
        estimating-equation AMIP set (+ 1) on a heavy-tailed field experiment where the
        plain estimates give only a sure upper bound 2-8 times larger (docs/guide/amip.md).
        The reweighted method's steps reweight the plain draws. A density that also has
        ``log_prob(upars)`` and ``log_lik_i(upars, i)`` at unconstrained draws (both
        classes above) works out the removal of an answer's set the draws leave open by
        moment matching (:mod:`bayesij.stats.amip_matched`): a hierarchy's observations,
        whose log-likelihoods no model of the draws explains, get "reached", "not
        reachable" or a finite change interval (``decided_by`` says so); not for a
        lazy log-likelihood or units that are groups (their answers stay the draws').

    Returns
    -------
    AmipResult

    Notes
    -----
    Every first-order prediction is carried to second order by a quadratic model of the
    units' log-likelihood in the fit's quantities, fitted across the draws
    (:mod:`bayesij.array.amip_curvature`: the Newton step of the reweighted problem), and
    the answers use the band from the first-order prediction to the second-order one,
    widened beyond the second by the set's departure from its quadratic
    (:func:`bayesij.array.amip_noise.nonlinear_band`): "reached" and the set need the
    band's pessimistic end (with Monte Carlo error), "not reachable" the optimistic end's
    failure; in between the answer is "undetermined", by Monte Carlo error or by the
    linearisation (``undetermined_by``), with about how many refits would decide it
    (``refits_needed``). ``predicted_change`` is the second-order prediction
    (``curve["second_order"]``; ``curve["linear"]`` the first order). On a logistic
    regression (N = 3020, sets of 60-300) the first-order change is 25-45 % short; the
    band held every exact refit over independent sets of draws.
    A target counts as reached only when the predicted change passes it by two Monte Carlo
    standard errors of the prediction. The linear method's set is the smallest prefix of
    its ranking that reaches the target in 97.5 % of block-bootstrap replicates of the
    influences and of the metric's value; when it is more than twice the low end of the
    smallest set's 95 % size interval plus 2, the answer is "undetermined" and the set a
    sure ``upper_bound``. An interval end ``mean ± z sd`` is predicted from the
    first-order changes of the posterior mean and variance, the sd their square root.
    Noise in the estimated influences also makes the top of a sorted list look more
    influential than it is. ``monte_carlo`` reports the
    split-draw check: the set is chosen again on one half of the draws (half the chains,
    or the first half of each draw sequence for one chain) and its effect estimated on the
    other half, with a 95 % interval from the batch-means Monte Carlo error.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))  # exact posterior draws
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> result = bayesij.amip(post, "mu", "sign")  # drop up to 10 % to change mu's sign?
    >>> result.answer
    'not reachable'

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999.
    .. [2] Giordano, R. and Broderick, T. (2024). Approximate data deletion and replication
       with the Bayesian influence function (talk).
    """
    searched = amip_search(
        data,
        quantity,
        target,
        groups=groups,
        var_name=var_name,
        alpha_max=alpha_max,
        method=method,
        gradient=grad_log_posterior,
        refits=backend is not None,
    )
    if backend is None:
        return searched.result
    source, fit, found = searched.source, searched.fit, searched.found
    looped = _refit_in_the_loop(
        searched.start,
        found.goal,
        found.path,
        source.codes,
        source.units,
        backend,
        max_refits,
        max(1, int(np.floor(alpha_max * source.n_units))),
        fit.unit_labels() if fit.units.grouped else None,
    )
    return replace(looped, method=method)


class RefitMetric(NamedTuple):
    """One refit in the loop: the quantity's posterior mean and sd, the metric's value,
    whether it reaches the goal past its Monte Carlo error, the refit, that error, and the
    log posterior's gradient at its draws and those draws (or None)."""

    mean: float
    sd: float
    value: float
    reached: bool
    refit: object
    mcse: float
    gradient: tuple | None = None


def _refit_metric(backend, weights, quantity, goal) -> RefitMetric:
    """Refit under ``weights``: the quantity's posterior mean and sd, the metric's value and
    whether it reaches the goal past its Monte Carlo error (two SEs: a refit too close to
    the target to tell counts as not reaching, so the answer does not hang on the refit's
    seed). With a backend that gives the log posterior's score (``fit_with_gradient``), the
    moments are zero-variance control-variate estimates (nearly exact for a coefficient),
    and the search goes on from the refit with control-variate influences."""
    gradient = None
    if hasattr(backend, "fit_with_gradient"):
        refit, score, unconstrained = backend.fit_with_gradient(weights)
        refit = read(refit, argument="backend").posterior()
        gradient = (score, unconstrained)
        _check_refit_quantity(refit, quantity, len(weights))
        draws = refit.quantities.sel(quantity=quantity).values
        mean, mcse = zero_variance_mean(draws, score, unconstrained)
        second, _ = zero_variance_mean(draws**2, score, unconstrained)
        sd = float(np.sqrt(max(second - mean**2, 0.0) * draws.size / (draws.size - 1)))
        if goal.sign:  # the interval end's error: that of g* (the sd's linearisation)
            g_star = draws + goal.sign * goal.z * (draws - mean) ** 2 / (2 * sd)
            mcse = zero_variance_mean(g_star, score, unconstrained)[1]
    else:
        refit = read(backend.fit(weights), argument="backend").posterior()
        _check_refit_quantity(refit, quantity, len(weights))
        draws = refit.quantities.sel(quantity=quantity).values
        mean, sd = float(draws.mean()), float(draws.std(ddof=1))
        g_star = draws + goal.sign * goal.z * (draws - mean) ** 2 / (2 * sd)
        mcse = float(g_star.std() / np.sqrt(draws.size))
    value = mean + goal.sign * goal.z * sd
    # A numeric target's change is measured from the full data's mean, estimated too: on
    # the RAND experiment's residual sd a refit "reached" a change of -2.174166 at
    # -2.174182 from the draws' mean, whose own error (0.0004) the exact refit's
    # -2.173809 lies within.
    mcse = float(np.hypot(mcse, goal.start_mcse))
    reached = goal.reached_by(value - goal.value, mcse)
    return RefitMetric(mean, sd, value, reached, refit, float(mcse), gradient)


def _check_refit_quantity(refit, quantity, n_obs: int) -> None:
    """A refit reports the searched quantity and every observation's log-likelihood term
    (the dropped ones too, as the weights zero them): else ``backend`` is refused."""
    if quantity not in refit.quantity_names:
        raise fail(
            "backend",
            f"refits without the quantity {quantity!r}",
            "refits reporting the quantity of the search",
        )
    if refit.n_obs != n_obs:
        raise fail(
            "backend",
            f"refits whose log-likelihood has {refit.n_obs} terms",
            f"the {n_obs} observations of the fit searched (every observation's term, "
            "the dropped ones included, as the weights zero them)",
        )


def _bisect(rows, dropped, last, codes, backend, quantity, goal, max_refits, floor, track):
    """The smallest prefix of ``dropped`` (in the order units joined) that a refit confirms,
    between ``floor`` (the largest prefix a refit did not confirm, or below which the cheap
    search's optimistic end says no prefix reaches) and the smallest it did, within the
    refit budget. A refit goes one below the prefix where the searches' predicted metric,
    corrected by what the refits of prefixes measured (``track``, :class:`_Track`), first
    reaches the goal (:func:`_guided_size`), or at it when that is the bracket's next; by
    bisection where the prediction does not cover the bracket or its last guess fell on
    the other side. Appends to ``rows``; returns the prefix, its refit and the largest
    prefix known not to reach."""
    low, high = min(floor, dropped.size - 1), int(dropped.size)
    guided = True  # whether the last guided refit fell on the side it was expected to
    while high - low > 1 and len(rows) < max_refits:
        middle, expect = (low + high) // 2, None
        guess = _guided_size(track, low, high, goal, last[4]) if guided else None
        if guess is not None:
            middle, expect = (guess - 1, False) if guess - 1 > low else (guess, True)
        weights = (~np.isin(codes, dropped[:middle])).astype(float)
        try:
            mean, sd, value, reached, _, mcse, _ = _refit_metric(backend, weights, quantity, goal)
        except RuntimeError as error:  # a refit that failed (divergences): what is confirmed stays
            rows.append(_failed_row(len(rows) + 1, middle, "bisection: a smaller set?", error))
            break
        rows.append(
            {
                "refit": len(rows) + 1,
                "n_drop": middle,
                "why": "bisection: a smaller set?" if guess is None else "at the prediction",
                "predicted": np.nan if guess is None else track.predicted[middle],
                "refit_value": value,
                "reached": reached,
            }
        )
        track.measured[middle] = value
        if reached:
            high, last = middle, (mean, sd, weights, True, mcse, value)
        else:
            low = middle
        guided = expect is None or expect == bool(reached)
    return dropped[:high], last, low


class _Track(NamedTuple):
    """The metric along the prefixes of the set a refit campaign grows: ``predicted``
    (prefix size -> the value the search that chose those units predicted, from the refit
    it grew from) and ``measured`` (prefix size -> a refit's value)."""

    predicted: dict
    measured: dict

    def grown(self, start: int, value: float, changes) -> None:
        """The prefixes past ``start`` units (a refit's set, or none; its metric ``value``,
        in ``measured``) as the search from there predicts them: ``changes[i]`` after
        ``i + 1`` more units."""
        for size in [m for m in self.predicted if m > start]:
            del self.predicted[size]
        self.predicted[start] = value  # where the search starts, its error is none
        for i, change in enumerate(np.asarray(changes, dtype=float)):
            self.predicted[start + i + 1] = value + change


def _guided_size(track: _Track, low: int, high: int, goal, mcse: float):
    """The smallest prefix past ``low`` up to ``high`` whose predicted metric, corrected by
    the refits' errors of prediction interpolated over the prefixes refitted (constant past
    the last), reaches the goal by the one rule (:func:`~bayesij.array.amip.passes`,
    Monte Carlo SE ``mcse``); None where a prefix of the bracket was not predicted."""
    sizes = np.arange(low + 1, high + 1)
    predicted = np.array([track.predicted.get(int(m), np.nan) for m in sizes])
    known = sorted(m for m in track.measured if np.isfinite(track.predicted.get(m, np.nan)))
    if not known or not np.all(np.isfinite(predicted)):
        return None
    errors = [track.measured[m] - track.predicted[m] for m in known]
    estimated = predicted + np.interp(sizes, known, errors)
    reach = np.flatnonzero(passes(goal.direction, estimated - goal.value, goal.need, mcse))
    return int(sizes[reach[0]]) if reach.size else None


def _refit_in_the_loop(
    first, goal, path, codes, units, backend, max_refits, k_max, unit_groups
) -> AmipResult:
    """Alternate cheap searches with refits until a refit confirms the target.

    The first refit drops the cheap search's claimed set: its sure set when the answer is
    reached; otherwise the prefix where the second-order prediction reaches the target
    (the linear method), or the search's whole set. Each later round refits without the
    current set when the search claims the target (the claimed set) or when reweighting
    became unreliable (its reliable part), then searches again from the refit's draws for
    the rest of the way. Once a refit confirms a set, bisection finds the smallest prefix
    a refit confirms, above the size interval's low end. ``unit_groups`` (the search's
    groups, or None) gives the refit's log-likelihood the same units
    (:meth:`Posterior.units`). The result's fields come from the refits.
    """
    check_backend(backend, codes.size, "the fit searched")
    if isinstance(max_refits, bool) or not (
        isinstance(max_refits, (int, np.integer)) and max_refits >= 1
    ):
        raise fail("max_refits", repr(max_refits), "an integer >= 1")
    method, n_units = first.method, units.size
    path_order, value = _first_claim(first, path, goal), goal.value
    dropped = np.zeros(0, dtype=int)
    track = _Track({}, {0: value})  # the metric along the prefixes: predicted, refitted
    track.grown(0, value, _first_changes(first))
    rows, last, best, exchange, seen, missed = [], None, None, None, set(), []
    errors, slack = [], SLACK  # each refit's relative error of prediction; the slack used
    for refit_number in range(1, max_refits + 1):
        start = dropped  # the units already dropped, to which this refit adds
        if exchange is not None:  # the set at the limit fell short: the better one there
            (new, predicted), start = exchange, np.zeros(0, dtype=int)
            why, exchange = "exchange at the last refit", None
            track = _Track({new.size: predicted}, {})  # other units: no prefix predicted
        elif refit_number == 1:
            new, why = path_order, "cheap search's claim"
            if path_order.size >= 2 * STAGE and max_refits > 2:
                # Half the claim first: the rest is ranked again from that refit's draws
                # (the influences change as the set grows: the estimating equation's
                # iterated AMIP, in stages).
                new, why = path_order[: path_order.size // 2], "first half of the claim"
            predicted = value + _predicted_at(first, new.size)
        elif path.stopped == "reached":
            new, why = path_order, "target claimed"
            predicted = value + float(path.change[-1])
        elif method == "reweighted" and path.reliable < path_order.size:
            new, why = path_order[: max(path.reliable, 1)], "k-hat passed its threshold"
            predicted = value + float(path.change[path.how != "linear continuation"][-1])
        elif path_order.size:  # not claimed: refit the largest set, an exact lower bound
            new, why = path_order, "largest set searched"
            predicted = value + float(path.change[-1])
        else:
            break
        trying = np.concatenate([start, new])
        if frozenset(trying.tolist()) in seen:  # refitted already: it would settle nothing
            break
        weights = (~np.isin(codes, trying)).astype(float)
        before = value
        try:
            mean, sd, value, reached, refit, mcse, gradient = _refit_metric(
                backend, weights, first.quantity, goal
            )
        except RuntimeError as error:  # a refit that failed ends the campaign, said so
            rows.append(_failed_row(refit_number, trying.size, why, error))
            break
        errors.append(_relative_error(predicted, value, before))
        dropped = trying
        track.measured[dropped.size] = value
        draws = refit.quantities.sel(quantity=first.quantity).values
        rows.append(
            {
                "refit": refit_number,
                "n_drop": int(dropped.size),
                "why": why,
                "predicted": predicted,
                "refit_value": value,
                "reached": bool(reached),
            }
        )
        last = (mean, sd, weights, reached, mcse, value)
        seen.add(frozenset(dropped.tolist()))
        if not reached:
            missed.append(frozenset(dropped.tolist()))
        if dropped.size >= k_max and (best is None or goal.direction * (value - best[1][5]) > 0):
            best = (dropped, last, refit)  # the closest of the largest sets
        if reached:
            break
        if dropped.size >= k_max:
            if far_short(goal, value - goal.value, mcse):
                break  # no set of this size comes close: not reachable
            everything = _refit_units(refit, unit_groups, n_units)
            exchange = _exchanged(draws, everything, goal, value, dropped, k_max)
            if exchange is None:  # no set of this size measurably better at first order
                slack = measured_slack(errors)
                break
            if frozenset(exchange[0].tolist()) in seen:
                break
            continue
        remaining = np.setdiff1d(np.arange(n_units), dropped)
        log_lik_now = _refit_units(refit, unit_groups, n_units)[:, :, remaining]
        # the rest of the way past this refit's Monte Carlo margin, which the next refit
        # must clear: a refit just past the target but within its error claimed it at
        # once, and the same set was refitted again (four times on a t(4) regression)
        goal_now = _goal_at(goal, value, mcse)
        scores = None
        if method == "linear" and gradient is not None:  # control variates from the refit
            scores = metric_influence(draws, log_lik_now, goal_now, *gradient)
        path = search_path(
            method,
            draws,
            log_lik_now,
            goal_now,
            k_max - dropped.size,
            pareto_k_threshold(refit.n_draws),
            scores,
        )
        if method == "linear":  # claim where the second order reaches, from these draws
            path = _second_order_claim(refit, first.quantity, log_lik_now, goal_now, path, scores)
        path_order = remaining[path.order]
        track.grown(dropped.size, value, path.change)
    if last is None:  # the first refit failed: the cheap answer, with the failure
        return replace(first, refits=pd.DataFrame(rows))
    past = None
    if not last[3] and best is not None:  # none reached: the closest largest set
        dropped, last, _ = best
        change, mcse = last[5] - goal.value, last[4]
        if _within_error(goal, change, mcse) and not _ruled_out(first, goal, change, mcse, slack):
            past = _beyond_limit(
                rows, best, codes, backend, first.quantity, goal, unit_groups, max_refits
            )
    floor = 0
    if last[3]:
        # Only a missed set that is a prefix of this one bounds its smallest prefix: a set
        # of other units (an exchange) that missed says nothing of these.
        prefixes = [len(m) for m in missed if m == frozenset(dropped[: len(m)].tolist())]
        floor = max([_bisection_floor(first, rows)] + prefixes)
        dropped, last, floor = _bisect(
            rows, dropped, last, codes, backend, first.quantity, goal, max_refits, floor, track
        )
    result = _from_refits(first, goal, units, rows, dropped, last, max_refits, k_max, slack)
    if past is None or result.answer != "undetermined":
        return result
    return replace(result, past_limit_ids=units.values[past].tolist())


def _goal_at(goal, value: float, mcse: float = 0.0):
    """The goal seen from a refit whose metric is ``value``: the rest of the way, and
    :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo SEs ``mcse`` of the refit beyond
    (what a refit must clear to count as reaching the goal)."""
    rest = goal.need - goal.direction * (value - goal.value)
    return replace(goal, value=value, need=rest + MC_MARGIN * mcse)


def _gains(draws, log_lik, goal, value: float) -> tuple[np.ndarray, np.ndarray]:
    """How far dropping each unit moves the metric towards the goal at a refit (its draws
    of the quantity and every unit's log-likelihood), to first order: ``-direction psi_n``
    (0 where ``psi_n`` is NaN), and each one's Monte Carlo SE (0 where NaN)."""
    scores = metric_influence(draws, log_lik, _goal_at(goal, value))
    gain = -goal.direction * np.nan_to_num(scores.psi[0], nan=0.0)
    return gain, np.nan_to_num(scores.mcse[0], nan=0.0)


#: The least share by which another set of the largest size may move the metric further
#: than the refitted one once refits have measured their predictions' errors
#: (:func:`measured_slack`).
SLACK_FLOOR = 0.1


def measured_slack(errors: list) -> float:
    """The share by which another set of the largest size may move the metric further
    than the one refitted, when the first order at that refit finds no set measurably
    better (:func:`_exchanged` gives None): twice the largest relative error of the refits'
    predictions (``errors``, :func:`_relative_error`; a swap of sets drops some units and
    puts others back, moves whose first-order sum is at most the set's own change, each
    with the first order's error), between :data:`SLACK_FLOOR` and
    :data:`~bayesij.array.amip.SLACK` (also where no refit measured an error)."""
    finite = [e for e in errors if np.isfinite(e)]
    if not finite:
        return SLACK
    return float(min(SLACK, max(SLACK_FLOOR, 2.0 * max(finite))))


def _relative_error(predicted: float, value: float, before: float) -> float:
    """How far a refit's metric ``value`` lies from the ``predicted`` one, over the move
    predicted from ``before`` (the metric of the refit the set grew from, or of the fit);
    NaN where nothing was predicted (a bisection step) or no move was."""
    move = abs(predicted - before)
    return abs(value - predicted) / move if np.isfinite(move) and move > 0 else np.nan


def _within_error(goal, change: float, mcse: float) -> bool:
    """Whether a refit's ``change`` leaves less of the way to the goal than its Monte Carlo
    margin (:data:`~bayesij.array.amip.MC_MARGIN` SEs): too close to tell."""
    return goal.reached_by(change, -mcse)  # short of it by less than the margin, or past


def _ruled_out(first, goal, change: float, mcse: float, slack: float = SLACK) -> bool:
    """Whether the closest refit of the largest size allowed (its ``change`` and Monte Carlo
    SE) says no set reaches the goal: it falls far short (:func:`far_short` with ``slack``,
    :func:`measured_slack`), or the cheap
    search said "not reachable" and the refit falls short past its Monte Carlo error (the
    cheap search's ranking does not always hold the best set: a refit within that error of
    the goal leaves it open)."""
    close = _within_error(goal, change, mcse)
    return far_short(goal, change, mcse, slack) or (first.answer == "not reachable" and not close)


def _beyond_limit(rows, closest, codes, backend, quantity, goal, unit_groups, max_refits):
    """How many units would reach the goal, when the closest set of the largest size
    allowed falls short within its Monte Carlo error (its refit cannot tell whether it
    reaches; more draws would be dear, a refit past the limit bounds the answer, and a set
    short past that error leaves the budget alone): with the budget left, refit that set
    with the units that the first order at its refit says close the rest of the gap (the
    top of the ranking whose summed gain covers it, at least one), again from each refit,
    until a refit reaches the goal. Appends to ``rows``; returns the set that reached
    (None: none did). The answer stays undetermined (the question's limit is not passed)
    but its size interval ends at the size confirmed. ``closest``: that set, its refit's
    summary (:class:`RefitMetric`'s fields as the loop keeps them) and its refit."""
    dropped, (*_, value), refit = closest
    while len(rows) < max_refits:
        draws = refit.quantities.sel(quantity=quantity).values
        log_lik = refit.units(unit_groups)[0]
        gap = _goal_at(goal, value).need
        gain, _ = _gains(draws, log_lik, goal, value)
        gain[dropped] = -np.inf
        ranked = top_positive(gain, log_lik.shape[-1] - dropped.size)
        if not ranked.size:
            return None
        covered = np.flatnonzero(np.cumsum(gain[ranked]) >= gap)
        adding = ranked[: int(covered[0]) + 1 if covered.size else 1]
        trying = np.concatenate([dropped, adding])
        weights = (~np.isin(codes, trying)).astype(float)
        why = "beyond the limit: how many would?"
        try:
            metric = _refit_metric(backend, weights, quantity, goal)
        except RuntimeError as error:
            rows.append(_failed_row(len(rows) + 1, trying.size, why, error))
            return None
        rows.append(
            {
                "refit": len(rows) + 1,
                "n_drop": int(trying.size),
                "why": why,
                "predicted": value + goal.direction * float(gain[adding].sum()),
                "refit_value": metric.value,
                "reached": metric.reached,
            }
        )
        if metric.reached:
            return trying
        dropped, value, refit = trying, metric.value, metric.refit
    return None


def _failed_row(number: int, n_drop: int, why: str, error: Exception) -> dict:
    """The refits table's row of a refit that failed (its reason in ``why``)."""
    return {
        "refit": number,
        "n_drop": int(n_drop),
        "why": f"{why} (failed: {error})",
        "predicted": np.nan,
        "refit_value": np.nan,
        "reached": False,
    }


def _refit_units(refit, unit_groups, n_units: int) -> np.ndarray:
    """A refit's log-likelihood by the search's units (n_chains, n_draws, n_units): a
    backend whose refits report another number of units (kept rows only, other groups)
    is refused, so that the search from its draws never ranks other units' columns."""
    log_lik = refit.units(unit_groups)[0]
    if log_lik.shape[-1] != n_units:
        raise fail(
            "backend",
            f"refits whose log-likelihood has {log_lik.shape[-1]} units",
            f"the {n_units} units of the fit searched (every observation's term, the "
            "dropped ones included, as the weights zero them)",
        )
    return log_lik


def _exchanged(draws, log_lik, goal, value: float, dropped: np.ndarray, k_max: int):
    """The set of ``k_max`` units that the first order at a refit without ``dropped``
    (its draws of the searched quantity and every unit's log-likelihood) says moves the
    metric furthest towards the goal, and the metric it predicts there; None where that is
    ``dropped`` itself (a local optimum at first order), or where the move it predicts is
    within :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo SEs of that prediction (the
    exchanged units' influences' errors together): the draws cannot tell it from no move,
    and its refit would buy nothing (on a kidiq-shaped regression, four such refits in a
    row each moved the metric by less than 0.002 of the 0.42 it had to go, one of them
    the wrong way).

    At the refit, dropping a unit ``n`` moves the metric by ``-psi_n`` and putting a
    dropped unit back by ``+psi_n`` (its influence at the refit's draws, which carry its
    log-likelihood unweighted): the set ``S'`` moves it by ``sum_S psi - sum_S' psi``, best
    for the ``k_max`` units of the largest ``-direction psi_n``.
    """
    gain, mcse = _gains(draws, log_lik, goal, value)
    chosen = top_positive(gain, k_max)
    if np.array_equal(np.sort(chosen), np.sort(dropped)):
        return None
    moved = float(gain[chosen].sum() - gain[dropped].sum())
    swapped = np.setxor1d(chosen, dropped)  # the units dropped anew and those put back
    if moved <= MC_MARGIN * float(np.sqrt(np.sum(mcse[swapped] ** 2))):
        return None
    return chosen, value + goal.direction * moved


#: A first claim of at least twice this many units is refitted in two halves, the second
#: ranked again from the first half's refit.
STAGE = 20


def _second_order_claim(refit, quantity, log_lik, goal, path, scores=None):
    """The linear path from a refit's draws cut where its second-order prediction reaches
    the goal (:mod:`bayesij.array.amip_curvature`), or left whole where it never does or
    the draws are too few for the model."""
    names = list(refit.quantity_names)
    index = names.index(quantity)
    curvature = curvature_of(
        refit.quantities.values, index, _scale_mask(names), with_scales=goal.sign == 0
    )
    if curvature is None or path.order.size == 0:
        return path
    curvature = curvature._replace(plain_influences=scores is None)
    if scores is None:
        scores = metric_influence(refit.quantities.values[..., index], log_lik, goal)
    whole = linear_path(scores.psi[0], goal.direction, np.inf, path.order.size, None)
    flat = log_lik.reshape(-1, log_lik.shape[-1])
    ratios = SetCurvature(curvature, goal.sign, goal.z, matrix=flat)(whole.order)[0]
    with np.errstate(invalid="ignore"):
        second = whole.change[1:] * np.where(np.isfinite(ratios), ratios, 1.0)
    crossing = np.flatnonzero(goal.direction * second >= goal.need)
    if not crossing.size:
        return path
    size = int(crossing[0]) + 1
    return whole._replace(
        order=whole.order[:size],
        change=np.concatenate([[0.0], second[:size]]),
        pareto_k=whole.pareto_k[: size + 1],
        sizes=whole.sizes[: size + 1],
        how=whole.how[: size + 1],
        stopped="reached",
    )


def _first_claim(first: AmipResult, path, goal) -> np.ndarray:
    """The set the first refit drops: the cheap search's set when it reached the target;
    for an undetermined linear answer, the prefix of its ranking where the second-order
    prediction reaches the target (the whole set when it never does)."""
    order = np.asarray(path.order)
    if first.answer == "reached" or first.method != "linear" or "second_order" not in first.curve:
        return order
    curve = first.curve.set_index("n_drop")["second_order"].to_numpy()[: order.size + 1]
    crossing = np.flatnonzero(goal.direction * curve >= goal.need)
    return order[: int(crossing[0])] if crossing.size and crossing[0] > 0 else order


def _predicted_at(first: AmipResult, size: int) -> float:
    """The cheap search's predicted change after ``size`` units (second order where the
    curve has it)."""
    curve = first.curve.set_index("n_drop")
    column = "second_order" if "second_order" in curve else "linear"
    if size in curve.index and np.isfinite(curve.loc[size, column]):
        return float(curve.loc[size, column])
    return float(first.predicted_change)


def _first_changes(first: AmipResult) -> np.ndarray:
    """The cheap search's predicted change after 1, 2, ... units of its order (second
    order where its curve has it; NaN where the curve has no value)."""
    curve = first.curve.set_index("n_drop")
    values = curve["second_order" if "second_order" in curve else "linear"]
    sizes = np.arange(1, int(values.index.max()) + 1 if len(values) else 1)
    return values.reindex(sizes).to_numpy(dtype=float)


def _bisection_floor(first: AmipResult, rows: list) -> int:
    """Below which prefix bisection need not look: the cheap search's optimistic size
    interval's low end, minus one (its own ranking: the linear method's, and only before
    any re-search from a refit's draws changed the order)."""
    low = first.size_interval[0] if first.size_interval else np.nan
    if first.method != "linear" or not np.isfinite(low) or len(rows) > 1:
        return 0
    return max(int(low) - 1, 0)


def _from_refits(first, goal, units, rows, dropped, last, max_refits, k_max, slack):
    """The result of a refit campaign, every field from the refits: the set, its refit
    change and that change's Monte Carlo interval, the smallest set's size between the
    cheap search's optimistic low end and the set, the answer (``slack``: the share by
    which another set of the largest size may move the metric further,
    :func:`measured_slack`)."""
    mean, sd, weights, reached, mcse, value = last
    history = pd.DataFrame(rows)
    change = float(value - goal.value)
    z = _z95()
    if reached:
        # The prefixes the refits did not confirm are of one order: a smaller set of other
        # units may reach (on a state-crime regression DC alone did where the refits'
        # prefixes needed four), so the low end is the cheap search's optimistic one.
        answer, by = "reached", ""
        sizes = (min(_optimistic_low(first), float(dropped.size)), float(dropped.size))
        stopped = "reached"
    elif dropped.size >= k_max:
        # The largest set searched does not reach on refit; another set might, unless the
        # cheap search's optimistic end already said none could.
        sizes = (float("inf"), float("inf"))
        if _ruled_out(first, goal, change, mcse, slack):
            answer, by = "not reachable", ""
        else:
            close = _within_error(goal, change, mcse)
            answer, by = "undetermined", "the refit's Monte Carlo error" if close else "refits"
            beyond = history.loc[history["reached"], "n_drop"]  # only past the limit here
            sizes = (_optimistic_low(first), float(beyond.min()) if beyond.size else np.inf)
        stopped = "no refit reached the target"
    else:
        # A set that a refit did not confirm says nothing of smaller sets of other units:
        # the smallest set's size keeps the cheap search's optimistic low end.
        answer, by = "undetermined", "refit budget"
        sizes = (_optimistic_low(first), float("inf"))
        stopped = f"refit budget spent ({max_refits} refits)"
        if "(failed: " in str(history["why"].iloc[-1]):
            by, stopped = "a refit failed", "a refit failed"
    mean_interval = (mean - goal.z * sd, mean + goal.z * sd)
    verified = replace(
        first,
        drop_ids=units.values[dropped].tolist(),
        kept=weights,
        stopped=stopped,
        predicted_change=change,
        predicted_mean=mean,
        predicted_interval=mean_interval,
        refits=history,
        answer=answer,
        share_reached=1.0 if reached else 0.0,
        size_interval=sizes,
        change_interval=(change - z * mcse, change + z * mcse),
        draws_needed=float("nan"),
        upper_bound=0,
        smaller_undetermined=0,
        undetermined_by=by,
        refits_needed=0 if answer != "undetermined" else first.refits_needed,
        n_reweighted=0,
    )
    return verified.with_refit(mean, sd, refits=len(rows))


def _optimistic_low(first: AmipResult) -> float:
    """The cheap search's optimistic low end of the smallest set's size (1 where it has
    none): what is known of the smallest set when no refit confirmed one."""
    low = first.size_interval[0] if first.size_interval else np.nan
    return float(max(low, 1.0)) if np.isfinite(low) else 1.0


def _z95() -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.975))
