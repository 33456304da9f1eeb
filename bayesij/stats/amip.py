"""Influential subsets (AMIP) from the draws: the fewest observations (or groups) whose
removal changes a conclusion, predicted and answered with their Monte Carlo error and
linearisation band (:func:`amip_search`). :func:`bayesij.amip` (:mod:`bayesij.refit.amip`)
adds the refits that settle what the draws leave open."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.amip import (
    MC_MARGIN,
    METHODS,
    SLACK,
    TARGETS,
    draw_block_layout,
    far_short,
    goal_for,
    goal_influence,
    goal_rows,
    influence_centres,
    linear_paths,
    linear_search,
    linear_sets,
    metric_mcse,
    reweighted_searches,
    second_curve,
    set_sums,
    short_of,
    split_goal_sums,
    unit_khats,
)
from bayesij.array.amip_candidates import (
    CandidateSums,
    DenseRows,
    PassKeeps,
    RankingRows,
    offer_block,
)
from bayesij.array.amip_columns import KeptColumns, kept_capacity
from bayesij.array.amip_curvature import (
    MAX_COLUMNS,
    MAX_MODEL_PARAMETERS,
    MAX_PARAMETERS,
    CentredColumns,
    SetCurvature,
    centre_into,
    curvatures_of,
    on_model_scale,
)
from bayesij.array.amip_hierarchy import (
    MAX_QUANTITIES,
    effects_explain,
    recover_hierarchy,
)
from bayesij.array.amip_hierarchy_laplace import laplace_hierarchy
from bayesij.array.amip_logistic import (
    Affine,
    LogisticModel,
    affine_in,
    checked_removal,
    laplace_far_short,
    model_greedy,
    model_low,
    recover_glm,
    row_pieces,
    smallest_settled,
    whitened_draws,
)
from bayesij.array.amip_noise import bootstrap_counts, size_settled
from bayesij.array.amip_normal import NormalModel, RegressionFeed, recover_normal
from bayesij.array.checks import check_real, constant_columns, fail
from bayesij.array.influence import InfluenceScores
from bayesij.array.numeric import CHUNK_BYTES, release_freed_memory, top_positive
from bayesij.array.psis import pareto_k_threshold
from bayesij.data.fit import read
from bayesij.data.posterior import base_name
from bayesij.data.source import join_blocks, map_blocks
from bayesij.stats.amip_matched import matched_answers, matching_density, open_answer
from bayesij.stats.elpd import Summary

__all__ = ["amip_search", "gradient_arrays", "AmipResult", "DrawsAnswer", "TARGETS", "METHODS"]


@dataclass(frozen=True)
class AmipResult(Summary):
    """An approximate most influential set and what removing it is predicted to do.

    Attributes
    ----------
    quantity : str
    target : str or float
        ``'sign'``, ``'significance'``, ``'sign_and_significance'`` or the change Δ.
    metric : str
        What the target moves: ``'mean'``, ``'lower end'`` or ``'upper end'`` of
        ``mean ± z sd``.
    original_value : float
        The metric on the full data.
    drop_ids : list
        The set, as observation ids or group labels, in the order it was built.
    n_drop, n_units : int
    prop_drop : float
        ``n_drop / n_units`` (APIP); NaN when not reachable.
    reachable : bool
        Whether a set of at most ``alpha_max`` of the units reaches the target (if not,
        ``drop_ids`` is the largest set tried and the prediction is for it).
    predicted_change, predicted_value : float
        Of the metric, after dropping ``drop_ids``: to second order
        (:mod:`bayesij.array.amip_curvature`; the reweighted estimate for a set reweighted
        throughout); after refits in the loop, the refit's.
    predicted_mean, predicted_interval : float, tuple
        Posterior mean and ``mean ± z sd`` after the drop, predicted (their end is
        ``predicted_value``) or refitted.
    curve : pandas.DataFrame
        ``n_drop``, the predicted change of the metric along the linear ranking to first
        order (``linear``) and to second (``second_order``); for the reweighted method also
        ``reweighted``, its ``pareto_k`` and ``estimate``: how each point was estimated,
        ``'reweighted'`` while k-hat is below its threshold, then ``'linear continuation'``
        from the last reliably reweighted posterior.
    method : str
    stopped : str
        Why the set stopped growing: ``'reached'``, ``'alpha_max'``, ``'no unit moves the
        metric that way'``, a refit budget spent, or why the target cannot be reached at
        all (a sign target for a quantity whose draws all have one sign).
    n_reweighted : int
        How many units of the set were estimated by reweighting (the rest by the linear
        continuation).
    refits : pandas.DataFrame or None
        With ``backend=``: one row per refit in the loop (set size, predicted and refit
        value of the metric, whether the refit reached the target).
    answer : str
        ``'reached'``, ``'not reachable'`` or ``'undetermined'`` (by Monte Carlo error):
        from replicates of the influences within their Monte Carlo error
        (:mod:`bayesij.array.amip_noise`), or from the refits in the loop. "Not reachable"
        only when even the optimistic replicates do not reach the target within
        ``alpha_max``.
    share_reached : float
        Share of the replicates that reach the target within ``alpha_max``.
    size_interval, change_interval : tuple of float
        95 % intervals, Monte Carlo error and linearisation together, of the smallest set's
        size (``inf``: beyond ``alpha_max``) and of the chosen set's change (which holds
        ``predicted_change``); after refits in the loop, the refits' (from the cheap
        search's optimistic low end to the set: a prefix a refit did not confirm says
        nothing of other sets of its size; the refit change's Monte Carlo interval). A
        "reached" answer's size interval ends at ``n_drop``: its set reaches, so the
        smallest set has at most that many units. Its low end is the smallest set
        that reaches at the optimistic end along the ranking, or in another order: each
        replicate's own (Monte Carlo error reorders the units), and the ranking's first
        units each dropped alone by the second-order model (a high-leverage unit moves the
        metric several times its first order); sets whose units mask each other are not
        seen.
    draws_needed : float
        When undetermined: about how many draws in all would decide the answer; undetermined
        by the draws (the metric within :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo
        errors of 0), how many would put it beyond that margin if it stayed where it is
        (``S (MC_MARGIN mcse / metric)^2``): more draws decide which side of 0 it starts
        on; a refit can only bound the set from above.
    smaller_undetermined : int
        The reweighted method: the size of the smaller set its search reached by linear
        continuation past k-hat's threshold, which Monte Carlo error leaves undetermined;
        the set reported is then the linear ranking's sure one (0: no such set).
    upper_bound : int
        When the target is surely reached but how few units suffice is undetermined: the
        size of the reported set, which reaches the target in 97.5 % of the influences'
        Monte Carlo replicates but is more than twice the low end of ``size_interval``
        plus 2, so the smallest set may be less than half of it. ``answer`` is then
        ``'undetermined'`` (``draws_needed``: about how many draws would settle the size
        within that factor), and ``reachable`` is true (0: not such a case).
    control_variates : bool
        Whether the influences were estimated with zero-variance control variates
        (``grad_log_posterior``).
    undetermined_by : str
        What leaves an undetermined answer (or its size) open: ``'Monte Carlo error'``
        (more draws would decide: ``draws_needed``), ``'linearisation'`` (the first-order
        answer is decided but the band to the second order leaves it open: a refit
        decides), ``'the change interval'`` (most replicates fall short, but the set's
        change interval reaches the target), ``'the refit's Monte Carlo error'``,
        ``'refits'``, ``'refit budget'`` or ``'a refit failed'`` (after refits in the
        loop); ``''`` when decided.
    decided_by : str
        How the set's removal was worked out where the influences left the answer open
        and that removal decided it, or bounded the set's change (the answer then stays
        undetermined, ``change_interval`` and ``predicted_change`` are the removal's):
        Newton's method in the logistic regression recovered from the draws
        (:mod:`bayesij.array.amip_logistic`), importance sampling in the normal linear
        regression recovered from them (:mod:`bayesij.array.amip_normal`), or moment
        matching of the draws towards the
        posterior without the set, from the model density passed as
        ``grad_log_posterior`` (:mod:`bayesij.stats.amip_matched`, with its k-hat and
        Monte Carlo error); ``''`` otherwise.
    low_end_by : str
        Where an undetermined answer's ``size_interval`` starts at a recovered model's low
        end (higher than the influences'), that model (its ``decided_by`` words); ``''``
        otherwise.
    prior_estimated : bool
        Whether an undetermined answer was left open by the prior of a logistic, Poisson or
        normal regression recovered from the draws, estimated from them (Stein's identity): its
        Monte Carlo error widens the removal's band, whose centre reaches the target
        within the limit. The log posterior's gradient (``grad_log_posterior=``) makes
        that prior known (on a travel-mode logistic regression, N = 840, 8 of 15 questions
        decided from the draws alone, 14 with the gradient).
    past_limit_ids : list
        After refits in the loop that confirmed no set within ``alpha_max``: the larger
        set a refit confirmed reaches the target (its size ends ``size_interval``), as
        ``drop_ids``; empty otherwise.
    refits_needed : int
        When undetermined: about how many refits a bisection over ``size_interval`` would
        take to decide (``amip(..., backend=)``); 0 when decided.
    one_signed : str or None
        ``'positive'`` or ``'negative'`` when every draw of the quantity has that sign.
        Reweighting cannot then change the sign (only the linear continuation and refits
        can), and for a quantity constrained to that sign (a scale) a sign target is
        meaningless: the text says so, and :func:`bayesij.audit` skips sign targets for
        one-signed quantities named like scales.
    monte_carlo : dict
        The split-draw check: the set chosen on one half of the draws, its predicted change
        on that half (``naive``, optimistic) and on the other half (``split``) with an
        approximate 95 % interval.
    kept : ndarray of shape (n_obs,)
        Observation weights of the refit that checks the set: 0 for every observation
        of a dropped unit, 1 otherwise (:func:`bayesij.refit.verify` refits with them).
    verification : dict or None
        After :func:`bayesij.refit.verify`: the refit mean and sd, the metric's refit value
        and change, and whether the target was reached.

    The result holds what it reports, not the posterior draws.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> result = bayesij.amip(post, "mu", "sign")
    >>> result.n_units, result.reachable
    (40, False)
    """

    quantity: str
    target: object
    metric: str
    original_value: float
    z: float
    drop_ids: list
    n_units: int
    predicted_change: float
    predicted_mean: float
    predicted_interval: tuple
    curve: pd.DataFrame
    method: str
    stopped: str
    monte_carlo: dict
    unit: str = "obs"
    kept: np.ndarray | None = field(default=None, repr=False, compare=False)
    verification: dict | None = field(default=None)
    n_reweighted: int = 0
    refits: pd.DataFrame | None = field(default=None, compare=False)
    one_signed: str | None = None
    answer: str = ""
    share_reached: float = float("nan")
    size_interval: tuple = ()
    change_interval: tuple = ()
    draws_needed: float = float("nan")
    n_draws: int = 0
    alpha_max: float = 0.0
    smaller_undetermined: int = 0
    upper_bound: int = 0
    control_variates: bool = False
    undetermined_by: str = ""
    refits_needed: int = 0
    past_limit_ids: list = field(default_factory=list)
    decided_by: str = ""
    low_end_by: str = ""
    prior_estimated: bool = False

    @property
    def reachable(self) -> bool:
        """Whether dropping ``drop_ids`` reaches the target, Monte Carlo error included:
        the answer is "reached", or the set is a sure ``upper_bound`` of the smallest."""
        if self.upper_bound:
            return True
        return self.answer == "reached" if self.answer else self.stopped == "reached"

    @property
    def reached_by_reweighting(self) -> bool:
        """Whether the reweighted search reached the target reweighting every unit of the
        set (k-hat below its threshold throughout): its predicted change is that estimate,
        and where the influences' band does not lie past the target its change interval
        is the estimate give or take 1.96 of its Monte Carlo errors."""
        reweighted = self.method == "reweighted" and self.n_reweighted == self.n_drop
        return reweighted and self.answer == "reached" and self.n_drop > 0

    @property
    def undetermined(self) -> bool:
        """Whether Monte Carlo error leaves the answer open (see ``draws_needed``)."""
        return self.answer == "undetermined"

    @property
    def n_drop(self) -> int:
        return len(self.drop_ids)

    @property
    def continued(self) -> bool:
        """Whether the reweighted search's set ends in its first-order continuation past
        k-hat's threshold, not refitted in the loop, and is not sure under the band (a
        refit, ``verify``, decides it)."""
        return (
            self.refits is None
            and not self.decided_by
            and self.method == "reweighted"
            and 0 < self.n_reweighted < self.n_drop
            and self.answer != "reached"
        )

    @property
    def prop_drop(self) -> float:
        return self.n_drop / self.n_units if self.reachable else float("nan")

    @property
    def predicted_value(self) -> float:
        return self.original_value + self.predicted_change

    def table(self) -> pd.DataFrame:
        """One row in the spirit of zaminfluence: target, metric, set size and predictions."""
        row = {
            "quantity": self.quantity,
            "target": str(self.target),
            "metric": self.metric,
            "original": self.original_value,
            "n_drop": self.n_drop,
            "prop_drop": self.prop_drop,
            "reachable": self.reachable,
            "answer": self.answer or ("reached" if self.reachable else "not reachable"),
            "predicted": self.predicted_value,
            "predicted_change": self.predicted_change,
        }
        if self.verification is not None:
            row.update(
                refit=self.verification["value"],
                refit_change=self.verification["change"],
                refit_reached=self.verification["reached"],
            )
        return pd.DataFrame([row])

    def with_refit(self, mean: float, sd: float, **extra) -> AmipResult:
        """A copy whose ``verification`` records a refit without the set: its posterior
        ``mean`` and ``sd`` of the quantity, the metric's value and change, and whether the
        target is really reached (used by :func:`bayesij.refit.verify`)."""
        value = mean + {"mean": 0, "lower end": -1, "upper end": 1}[self.metric] * self.z * sd
        change = value - self.original_value
        verification = {
            "mean": mean,
            "sd": sd,
            "value": value,
            "change": change,
            "reached": self._reached(change),
            **extra,
        }
        return replace(self, verification=verification)

    def _reached(self, change: float) -> bool:
        if isinstance(self.target, str):
            return bool(np.sign(self.original_value + change) != np.sign(self.original_value))
        return bool(np.sign(change) == np.sign(self.target) and abs(change) >= abs(self.target))

    def __str__(self) -> str:
        unit = "observation" if self.unit == "obs" else "group"
        head = (
            f"AMIP for {self.quantity}, target {self.target!r} ({self.metric} = "
            f"{self.original_value:.4g}), method {self.method}:"
        )
        ids = ", ".join(map(str, self.drop_ids[:15])) + (" ..." if self.n_drop > 15 else "")
        lines = [head, self._answer_words(unit), f"  set: [{ids}]"]
        if self.refits is not None:
            lines += self._refit_words()
        else:
            lines += self._prediction_words(unit)
        if (
            self.one_signed
            and self.target in ("sign", "sign_and_significance")
            and looks_like_scale(self.quantity)
        ):
            lines.append(
                f"  every draw of {self.quantity} is {self.one_signed} and its name is a "
                "scale's: if it is constrained to that sign, this target is moot"
            )
        mc = self.monte_carlo
        if mc and self.refits is None:
            lines.append(
                f"  split-draw check of the first-order change ({mc['how']}): "
                f"{mc['naive']:.4g} where chosen, "
                f"{mc['split']:.4g} on the other draws (95 % interval {mc['interval'][0]:.4g} "
                f"to {mc['interval'][1]:.4g}; chosen and predicted on the same draws, a "
                "change is optimistic, the other draws' estimate is free of that selection)"
            )
        if self.verification is not None and self.refits is None:
            v = self.verification
            lines.append(
                f"  refit without the set: {self.metric} {v['value']:.4g} (change "
                f"{v['change']:.4g}); target reached: {v['reached']}"
            )
        return "\n".join(lines)

    __repr__ = __str__

    def _answer_words(self, unit: str) -> str:
        """The answer's line."""
        share = f"{self.n_drop} of {_count(self.n_units, unit)}"
        if self.refits is not None and self.verification is not None:
            v = self.verification
            verb = "moved" if v["reached"] else "moved only"
            used = f"{len(self.refits)} refit{'s' if len(self.refits) != 1 else ''}"
            return (
                f"  {self.answer} ({used}): refit without {share} "
                f"({100 * self.n_drop / self.n_units:.2f} %): {verb} the {self.metric} to "
                f"{v['value']:.4g} (change {v['change']:.4g}); interval after: "
                f"[{v['mean'] - self.z * v['sd']:.4g}, {v['mean'] + self.z * v['sd']:.4g}]"
            )
        if self.reachable and not self.upper_bound:
            return (
                f"  dropping {share} ({100 * self.prop_drop:.2f} %) is predicted to move the "
                f"{self.metric} to {self.predicted_value:.4g}; interval after: "
                f"[{self.predicted_interval[0]:.4g}, {self.predicted_interval[1]:.4g}]"
            )
        if self.upper_bound:
            return self._upper_bound_words(unit)
        if self.undetermined:
            return self._undetermined_words(unit)
        short = (
            "its worked-out removal falls short even grown by half and past its Monte Carlo error"
            if self.decided_by
            else "even the optimistic ends of the Monte Carlo error and of the linearisation "
            "fall short"
        )
        return (
            f"  not reachable by dropping up to {_count(self.n_drop, unit)} (stopped: "
            f"{self.stopped}): {short}; the predicted change of this set is "
            f"{self.predicted_change:.4g}"
        )

    def _undetermined_words(self, unit: str) -> str:
        """An undetermined answer: what leaves it open and what would decide it."""
        low, high = self.size_interval or (float("nan"), float("nan"))
        span = f"the smallest set's size is between {_size(low)} and {_size(high)}"
        if self.low_end_by:
            span += f" (the low end by {self.low_end_by})"
        if self.undetermined_by == "linearisation":
            why = (
                "undetermined by the linearisation: the first-order prediction and the "
                "second-order one disagree on whether or where the target is reached"
            )
        elif self.undetermined_by == "second-order breakdown":
            low_change, high_change = self.change_interval or (np.nan, np.nan)
            why = (
                "undetermined: the second-order model breaks down along the set (it holds "
                "most of the posterior precision in some direction, or the quadratic explains "
                "too little of its log-likelihood); "
            )
            if np.isinf(low_change) and np.isinf(high_change):
                why += (
                    "no bound on the set's change holds as far as the draws can tell (as "
                    "for a hierarchy's observation, whose log-likelihood moves with its own "
                    "group's effect); its prediction, "
                    f"{self.predicted_change:.4g}, is not a bound"
                )
            else:
                why += (
                    "what still holds: the set's predicted change lies between "
                    f"{low_change:.4g} and {high_change:.4g} (first order, second order where "
                    "finite, reweighted, or the set's removal worked out below; an infinite "
                    "end: the change runs away on that side as far as the draws can tell)"
                )
        elif self.undetermined_by == "the change interval":
            why = (
                "undetermined by the change interval: most replicates of the influences fall "
                "short of the target within the limit, but the end of this set's change "
                "interval (Monte Carlo error and linearisation) reaches it"
            )
        elif self.undetermined_by.startswith(("the draws", "the importance", "the recovered")):
            why = f"undetermined by {self.undetermined_by}"
        else:
            why = (
                f"undetermined by Monte Carlo error: {100 * self.share_reached:.0f} % of "
                f"replicates of the influences reach the target within "
                f"{_count(self._limit(), unit)} (the point estimate: {self._point_words()})"
            )
        return f"  {why}; {span}: {self._decider_words()}"

    def _decider_words(self) -> str:
        """What would decide: refits (always), and more draws where the 1 / sqrt(S) law
        says they would."""
        if self.undetermined_by.startswith("the draws"):  # no side of zero to start from
            more = f", about {self.draws_needed:.3g} in all (now {self.n_draws}) if it stays"
            return (
                f"more draws decide which side of 0 the {self.metric} starts on"
                f"{more if np.isfinite(self.draws_needed) else ''}; a refit can only bound "
                "the set from above"
            )
        refits = max(self.refits_needed, 1)
        words = (
            f"a refit decides, about {refits} refit{'s' if refits > 1 else ''} by bisection "
            "with amip(..., backend=) or bayesij.refit.verify"
        )
        if self.undetermined_by == "Monte Carlo error" and np.isfinite(self.draws_needed):
            words += f", or about {self.draws_needed:.3g} draws in all (now {self.n_draws})"
        if self.prior_estimated:
            words += (
                "; or the log posterior's gradient (grad_log_posterior=), which makes the "
                "recovered regression's prior known (estimated from the draws, its Monte Carlo "
                "error widens the removal's band)"
            )
        return words

    def _prediction_words(self, unit: str) -> list:
        """How the cheap searches predicted: the intervals, the second order, the
        continuation."""
        lines = []
        if self.smaller_undetermined:
            lines.append(
                f"  a sure set (it reaches the target at the pessimistic end of the Monte "
                f"Carlo error and the linearisation); the reweighted search's smaller set of "
                f"{self.smaller_undetermined} is undetermined"
            )
        if self.decided_by:
            low, high = self.size_interval
            lines.append(
                f"  the set's removal worked out by {self.decided_by}: this set's change "
                f"{self.change_interval[0]:.4g} to {self.change_interval[1]:.4g} (predicted "
                f"{self.predicted_change:.4g}); the smallest set's size {_size(low)} to "
                f"{_size(high)}"
            )
        elif self.size_interval:
            low, high = self.size_interval
            how = "predicted {:.4g}, to second order where the model allows"
            if self.reached_by_reweighting:
                how = "estimated {:.4g} by reweighting the draws"
            lines.append(
                f"  95 % intervals (Monte Carlo error and linearisation): the smallest set's "
                f"size {_size(low)} to {_size(high)}; this set's change "
                f"{self.change_interval[0]:.4g} to {self.change_interval[1]:.4g} "
                f"({how.format(self.predicted_change)})"
            )
        if self.continued:
            first = (
                f"the first {_count(self.n_reweighted, unit)} of the set "
                + ("is" if self.n_reweighted == 1 else "are")
                + " estimated by reweighting the draws; past them k-hat exceeds its "
                "threshold and the rest is a continuation from that reweighted posterior"
                if self.n_reweighted
                else "no unit of the set is estimated by reweighting the draws"
            )
            lines.append(
                f"  {first}: confirm by a refit (bayesij.refit.verify, or amip(..., backend=))"
            )
        return lines

    def _refit_words(self) -> list:
        """The refits in the loop, as a table, and what they say of the smallest set."""
        lines = [
            f"  refits in the loop ({len(self.refits)}):\n"
            + self.refits.to_string(index=False, float_format=lambda v: f"{v:.4g}")
        ]
        low, high = self.size_interval if self.size_interval else (np.nan, np.nan)
        if self.answer == "reached" and low < high:
            lines.append(
                f"  along this order the smallest set a refit confirms has {_size(low)} to "
                f"{_size(high)} units (more refits would narrow it: max_refits=)"
            )
        elif self.answer == "undetermined":
            lines.append(f"  {_REFIT_UNDECIDED.get(self.undetermined_by, self._decider_words())}")
            if np.isfinite(high):
                unit = "observation" if self.unit == "obs" else "group"
                past = self.past_limit_ids
                ids = ", ".join(map(str, past[:15])) + (" ..." if len(past) > 15 else "")
                lines.append(
                    f"  past the limit of {_count(self._limit(), unit)}, a refit confirms "
                    f"that {_size(high)} reach the target ([{ids}]): the smallest set has "
                    f"{_size(low)} to {_size(high)} {unit}s"
                )
        return lines

    def _upper_bound_words(self, unit: str) -> str:
        """The line that says a sure set is only an upper bound, and what would settle it."""
        low = self.size_interval[0] if self.size_interval else float("nan")
        remedy = ""
        if self.undetermined_by == "Monte Carlo error" and not self.control_variates:
            remedy = "; control variates from the model's gradient (grad_log_posterior=) narrow it"
        sure = (
            "past the Monte Carlo error of its worked-out removal"
            if self.decided_by
            else "at the pessimistic end of the Monte Carlo error and the linearisation"
        )
        return (
            f"  undetermined in its size: dropping these {_count(self.n_drop, unit)} reaches "
            f"the target {sure} (an upper bound), but the smallest {unit} set may have as "
            f"few as {_size(low)} "
            f"({self.undetermined_by or 'Monte Carlo error'}): {self._decider_words()}{remedy}"
        )

    def _limit(self) -> int:
        return int(np.floor(self.alpha_max * self.n_units)) if self.alpha_max else self.n_drop

    def _point_words(self) -> str:
        if self.stopped == "reached":
            return f"dropping {self.n_drop} reaches it"
        return f"not reached by dropping {self.n_drop}"


#: What leaves a refit campaign undetermined, and what would decide it.
_REFIT_UNDECIDED = {
    "refit budget": "more refits decide (max_refits=)",
    "refits": (
        "no set found reaches the target on refit (the largest set searched, and the "
        "better sets the refits' own first order proposed, fall short), yet not so far short "
        "that no other set could: refit.verify a set you suspect"
    ),
    "a refit failed": (
        "a refit failed (its row says why): make the sampler reliable there (more tuning, a "
        "higher target_accept) and ask again"
    ),
    "the refit's Monte Carlo error": (
        "the closest refit lies within two Monte Carlo SEs of the target: a refit with more "
        "draws decides"
    ),
}


def _count(n: int, unit: str) -> str:
    """``'1 group'``, ``'3 groups'``."""
    return f"{n} {unit}" + ("" if n == 1 else "s")


def _size(value: float) -> str:
    return "beyond the limit" if not np.isfinite(value) else f"{value:.0f}"


#: Base names that conventionally denote scales (constrained positive): the audit skips sign
#: targets for such a quantity when every draw is positive.
SCALE_NAMES = ("sigma", "tau", "sd", "scale", "nu", "kappa")


def one_signed(f: np.ndarray) -> str | None:
    """``'positive'`` or ``'negative'`` when every draw has that sign, else None."""
    if np.all(f > 0):
        return "positive"
    if np.all(f < 0):
        return "negative"
    return None


def looks_like_scale(name: str) -> bool:
    """Whether a quantity's name is a conventional scale name (``sigma``, ``tau[2]``,
    ``sigma_y``, ``sd_group``, ...)."""
    base = base_name(name).lower()
    if base.startswith(("log_", "log", "logit_")) and base not in SCALE_NAMES:
        return False  # log_sigma, logsd: a scale's logarithm has a sign to ask about
    return any(base == s or base.startswith(s + "_") or base.endswith("_" + s) for s in SCALE_NAMES)


def check_target(target, argument: str = "target") -> None:
    """A target name of ``TARGETS`` or a finite, non-zero change Δ."""
    if isinstance(target, str):
        if target not in TARGETS:
            raise fail(argument, repr(target), f"one of {TARGETS} or a change Δ (float)")
    elif isinstance(target, (bool, np.bool_)) or not (
        isinstance(target, (int, float, np.integer, np.floating))
        and math.isfinite(target)
        and target != 0
    ):
        raise fail(argument, repr(target), f"a finite, non-zero change Δ, or one of {TARGETS}")


def check_search_options(alpha_max, method) -> None:
    """``alpha_max`` in (0, 1) and a known ``method`` (shared with the audit)."""
    check_real(alpha_max, "alpha_max", 0.0, 1.0, low_open=True, high_open=True)
    if not isinstance(method, str) or method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")


def _check_quantity(source, quantity) -> None:
    names = list(source.quantity_names)
    if not isinstance(quantity, str) or quantity not in names:
        raise fail("quantity", repr(quantity), f"one of {names[:10]}")


#: The ``z`` of an interval target asked by name: ``mean ± 1.96 sd``, a 95 % interval.
Z_DEFAULT = 1.96


def split_target(target, argument: str = "target") -> tuple:
    """``(target, z)`` of a checked :func:`bayesij.amip` target: a name of ``TARGETS`` or a
    change Δ with ``Z_DEFAULT``, or a pair ``(name, z)`` of an interval target
    (``("significance", 2.576)``: the end of ``mean ± 2.576 sd``) with its own z > 0."""
    if not isinstance(target, tuple):
        check_target(target, argument)
        return target, Z_DEFAULT
    if len(target) != 2 or not isinstance(target[0], str) or target[0] not in TARGETS[1:]:
        raise fail(argument, repr(target), f"a pair (name, z) with a name of {TARGETS[1:]}")
    z = target[1]
    if isinstance(z, (bool, np.bool_)) or not (
        isinstance(z, (int, float, np.integer, np.floating)) and math.isfinite(z) and z > 0
    ):
        raise fail(argument, repr(target), "a pair (name, z) with z a finite number > 0")
    return target[0], float(z)


def asked_target(target, z: float):
    """The target as :func:`bayesij.amip` is asked it (:func:`split_target`'s inverse)."""
    return (target, z) if isinstance(target, str) and target in TARGETS[1:] else target


class DrawsAnswer(NamedTuple):
    """A question answered from the draws (:func:`amip_search`): the result, what refits in
    the loop start from (the result and its search, :class:`~bayesij.array.amip.AmipSearch`),
    the fit's source and the fit."""

    result: AmipResult
    start: AmipResult
    found: object
    source: object
    fit: object


def amip_search(
    data,
    quantity: str,
    target="sign",
    *,
    groups=None,
    var_name=None,
    alpha_max: float = 0.1,
    method: str = "reweighted",
    gradient=None,
    refits: bool = False,
) -> DrawsAnswer:
    """:func:`bayesij.amip` from the draws alone: its answer and, with ``refits``, the
    start of refits in the loop (a reweighted search whose set was partly a first-order
    continuation starts them from the linear ranking's second-order claim).

    Parameters
    ----------
    data, quantity, target, groups, var_name, alpha_max, method
        As :func:`bayesij.amip`.
    gradient : density or (array_like, array_like), optional
        :func:`bayesij.amip`'s ``grad_log_posterior`` (:func:`gradient_arrays`; None:
        plain influences).
    refits : bool, default False
        Whether refits follow (a lazy fit is then refused by name, ``backend``).

    Returns
    -------
    DrawsAnswer
    """
    target, z = split_target(target)
    check_search_options(alpha_max, method)
    fit = read(data, groups=groups, var_name=var_name)
    source = fit.source(
        need_quantities=True,
        whole_matrix={
            "backend": True if refits else None,
            "method": None if method == "linear" else method,
        },
    )
    _check_quantity(source, quantity)
    parameters = fit_draws(fit)  # the second-order and recovered models', read once
    density = matching_density(gradient)
    gradient = gradient_arrays(gradient, fit)
    question = [(quantity, target)]
    [(result, found)] = _searches(source, question, z, method, alpha_max, *gradient, parameters)
    if density is not None:  # an answer the draws leave open, its set moment-matched
        key = (quantity, target)
        result = matched_answers({key: result}, source, density, gradient[1])[key]
    start = result, found
    if refits and method == "reweighted" and result.n_reweighted < result.n_drop:
        # Refits start from the linear ranking's second-order claim: past k-hat's
        # threshold the reweighted set grew by first-order steps.
        [start] = _searches(source, question, z, "linear", alpha_max, *gradient, parameters)
    return DrawsAnswer(result, start[0], start[1], source, fit)


def _searches(
    source, questions, z, method, alpha_max, score=None, unconstrained=None, parameters=None
) -> list:
    """``(AmipResult, AmipSearch)`` of each ``(quantity, target)`` of a checked source: one
    pass for all the influences, then the searches (reweighted ones in lockstep)."""
    fs, goals = amip_goals(source, questions, z)
    with_half = method == "linear"
    kernel = partial(
        goal_influence,
        fs=fs,
        goals=goals,
        with_half=with_half,
        score=score,
        unconstrained=unconstrained,
        centres=influence_centres(fs, goals, with_half, score, unconstrained),
    )
    gradient = None if score is None else (score, unconstrained)
    kept = set_columns(source, goals, method, gradient)
    keeps = pass_keeps(source, fs, goals, method, alpha_max)
    parts = map_blocks(source, kernel, keep=partial(offer_block, kept, keeps), join=False)
    scores = joined_influence(parts, goals) if keeps is None else keeps.into(source.n_units)
    del parts
    return searches_from(
        source,
        questions,
        (fs, goals),
        scores,
        method,
        alpha_max,
        gradient,
        kept,
        parameters,
    )


def joined_influence(parts: list, goals: list) -> dict:
    """The blocks' :func:`~bayesij.array.amip.goal_influence` joined, ``parts`` consumed:
    with several blocks each block's block sums are first split by goal (one block at a
    time, :func:`~bayesij.array.amip.split_goal_sums`), so that the join holds the joined
    sums and the blocks' not yet copied, and about one goal's sums twice, not all of them
    (the lazy audit of N = 10^6 and 21 questions: 8.9 GB of block sums)."""
    if len(parts) > 1:
        for index in range(len(parts)):
            parts[index] = split_goal_sums(parts[index], goals)
    return join_blocks(parts)


def set_columns(source, goals: list, method: str, gradient=None) -> KeptColumns | None:
    """What a pass over a lazy source keeps of its blocks for the linear sets' sums
    (:class:`~bayesij.array.amip_columns.KeptColumns`), with the fits of the regressions
    recovered from the draws made as the blocks go by (its ``feed``,
    :class:`~bayesij.array.amip_normal.RegressionFeed`; ``gradient`` as
    :func:`searches_from` takes it); None for a matrix in memory (read again at no cost)
    or the reweighted method."""
    if method != "linear" or not source.lazy or not goals:
        return None
    kept = KeptColumns(goals, kept_capacity(len(goals), source.n_draws))
    theta, _, quantities, scales = _regression_draws(source, gradient)
    kept.feed = RegressionFeed(theta, quantities, scales)
    return kept


def pass_keeps(source, fs: list, goals: list, method: str, alpha_max: float):
    """:class:`PassKeeps` for a pass over a lazy source of several blocks with the linear
    method; None otherwise (a matrix in memory is one block, whose results are kept
    whole; the reweighted method revisits the matrix)."""
    if method != "linear" or not source.lazy or not goals or len(source.bounds()) < 2:
        return None
    sizes, chains = draw_block_layout(*fs[0].shape)
    k_max = max(1, int(np.floor(alpha_max * source.n_units)))
    counts = bootstrap_counts(sizes, chains)
    sums = CandidateSums(goals, k_max, counts, sizes)
    return PassKeeps(sums, RankingRows(goals, k_max), RankingRows(goals, k_max))


def amip_goals(source, questions, z) -> tuple[list, list]:
    """The draws (n_chains, n_draws) of each question's quantity and its Goal; a quantity
    constant over the draws is refused."""
    fs = [source.quantity_draws[..., source.quantity_names.index(q)] for q, _ in questions]
    for f, (quantity, _) in zip(fs, questions, strict=True):
        _check_varies(f, quantity)
    goals = [goal_for(f, target, float(z)) for f, (_, target) in zip(fs, questions, strict=True)]
    return fs, goals


def searches_from(
    source,
    questions,
    targets: tuple,
    scores,
    method,
    alpha_max,
    gradient=None,
    kept=None,
    parameters=None,
    client=None,
) -> list:
    """The searches of :func:`_searches` from ``targets`` (the questions' quantity draws
    and their goals, :func:`amip_goals`) and the goals' influence scores
    (:func:`bayesij.array.amip.goal_influence` over every block: ``"all"``, and ``"half"``
    for the linear method, which empties the dict once read; ``gradient``: the log
    posterior's score and the unconstrained draws it is of, where the influences used
    them (control variates; arrays (n_chains, n_draws, P)); ``kept``: the :func:`set_columns` of
    the pass, if any; ``parameters``: :func:`fit_draws`, the fit's quantity draws and
    names for the second-order model and the recovered ones, default the source's; ``client``: a
    dask.distributed Client that sums the linear sets of a lazy source on its workers)."""
    fs, goals = targets
    k_max = max(1, int(np.floor(alpha_max * source.n_units)))
    every = scores["all"]  # DenseRows: each goal's rows made when read (a lazy pass)
    rows = every if isinstance(every, DenseRows) else goal_rows(every, goals)
    del every
    model = parameters.model if parameters is not None else None
    nonlinearities = _nonlinearities(
        source, questions, goals, rows, k_max, model, kept, client, gradient is None
    )
    if method == "linear":
        halves, half_units = _half_rows(scores["half"], goals)
        scores.clear()  # consumed: the rows below hold what is left of it
        paths = []
        for k, (f, goal) in enumerate(zip(fs, goals, strict=True)):
            paths.append(
                linear_paths(f, goal, rows[k], halves[k], k_max, nonlinearities[k], half_units[k])
            )
            release_freed_memory()  # its bootstrap's copies of the block sums
        seconds = [second_curve(p.linear, n) for p, n in zip(paths, nonlinearities, strict=True)]
        # In memory, the k-hat check reads its units from the second-order model's rows.
        # A lazy source's: the block sums and those rows let go before the sets are read
        # (its blocks, each computed again), the units of the sets answered "reached" so
        # far read with them, each alone: the blocks read once more, not twice (no later
        # step makes an answer "reached" from the draws).
        read = None if source.lazy else _rows_of(_store_of(nonlinearities))
        del rows, halves, nonlinearities
        release_freed_memory()
        sets = [s for p in paths for s in linear_sets(p)]
        held = gradient or read is not None
        alone = np.zeros(0, dtype=int) if held else _reached_units(paths)
        sums = _summed_sets(source, sets + [np.array([u]) for u in alone], kept, client)
        found = [
            linear_search(f, goal, p, sums[:, :, 2 * k : 2 * k + 2], seconds[k])
            for k, (f, goal, p) in enumerate(zip(fs, goals, paths, strict=True))
        ]
        if read is None:
            read = (alone, _as_rows(sums[:, :, len(sets) :]), None)
    else:
        threshold = pareto_k_threshold(source.n_draws)
        matrix = source.matrix(keep_float32=True)  # read a chunk or a set at a time
        every = _screened(*_parameter_draws(source))  # the screen's design
        found = reweighted_searches(
            fs, matrix, goals, rows, k_max, threshold, nonlinearities, every
        )
        read = _rows_of(_store_of(nonlinearities))  # the k-hat check reads its units there
    results = [
        _result(f, q, t, g.z, source, one, method, alpha_max, control_variates=bool(gradient))
        for f, (q, t), g, one in zip(fs, questions, goals, found, strict=True)
    ]
    orders = [one.path.order for one in found]
    results = _seen_by_the_draws(results, orders, source, (kept, client), read)
    posterior = parameters.posterior if parameters is not None else None  # read if tried
    results = _recovered_decided(results, fs, found, source, (gradient, kept, posterior))
    return list(zip(results, found, strict=True))


#: The k-hat of a unit's own removal above which the draws do not see it at all: the
#: importance ratios ``exp(-l_u)`` have no mean (k >= 1), the posterior without the unit is
#: no reweighting of the draws. (PSIS's 0.7 is about the reweighted estimate's error; a
#: unit just past it, k-hat 0.72 on a heavy-tailed regression, had its influence measured
#: well, its sets confirmed by exact refits.)
UNSEEN_KHAT = 1.0


def _store_of(nonlinearities: list) -> CentredColumns | None:
    """The second-order model's rows the questions share (None without a model)."""
    return next((n.store for n in nonlinearities if n is not None), None)


def _rows_of(store: CentredColumns | None) -> tuple | None:
    """The units a :class:`~bayesij.array.amip_curvature.CentredColumns` holds, their
    centred rows and which are finite at every draw, as :func:`_unit_rows` reads them."""
    return None if store is None else (store.held, store.rows, store.finite)


def _reached_units(paths: list) -> np.ndarray:
    """The units (sorted) of the linear paths' sets whose answer is "reached"."""
    sets = [p.path.order for p in paths if p.answer is not None and p.answer.answer == "reached"]
    return np.unique(np.concatenate([np.zeros(0, dtype=int), *sets]).astype(int))


def _seen_by_the_draws(results: list, orders: list, source, columns=(None, None), read=None):
    """The results, where a "reached" one holds a unit whose own removal the draws cannot
    evaluate made "undetermined", by the importance-sampling check (``orders``: each
    result's set as unit codes, its search's path; ``columns``: the pass's kept columns
    and a dask.distributed client, as :func:`_summed_sets` takes them; ``read``: units and
    their log-likelihood (n_chains, n_draws, k) read already, :func:`_reached_units`, or
    the second-order model's :class:`~bayesij.array.amip_curvature.CentredColumns`).

    A unit's influence is a covariance over the draws; where the posterior without the unit
    lies beyond them (the Pareto k-hat of ``exp(-l_u)`` above :data:`UNSEEN_KHAT`: an
    outlier that moves the residual sd by several of its posterior sds) that covariance's
    Monte Carlo error is not measured by the draws either, and neither its block bootstrap
    nor its split-draw check can say how far the set's change may be from its prediction
    (on a heavy-tailed regression, one such unit's influence read 0.011 on every chain
    where its exact derivative is 0.0029). With control variates from the gradient the
    covariance is mostly worked out from the score, and only its small remainder is left
    to the draws: those results stand. The units are read once for all the results, with
    the linear sets' (:func:`_summed_sets`)."""
    reached = [
        k
        for k, r in enumerate(results)
        if r.answer == "reached" and r.n_drop and not r.control_variates
    ]
    if not reached:
        return results
    units = np.unique(np.concatenate([orders[k] for k in reached]))
    rows, which = _unit_rows(source, units, columns, read)
    khats = unit_khats(rows, source.n_chains, which)
    out = list(results)
    for k in reached:
        mine = khats[np.searchsorted(units, orders[k])]
        if np.all(mine <= UNSEEN_KHAT):
            continue
        worst = int(np.argmax(mine))
        # the sizes rest on that influence too: only the low end stands
        unseen = (float(results[k].size_interval[0]), float("inf"))
        out[k] = replace(
            results[k],
            answer="undetermined",
            undetermined_by=(
                f"the importance-sampling check: the draws cannot evaluate the removal of "
                f"{results[k].drop_ids[worst]} (k-hat {mine[worst]:.2f} above "
                f"{UNSEEN_KHAT:.2f}), so its influence's Monte Carlo error is unknown"
            ),
            upper_bound=0,
            size_interval=unseen,
            refits_needed=refits_to_decide(
                "undetermined", unseen, results[k].alpha_max, source.n_units
            ),
        )
    return out


def _unit_rows(source, units: np.ndarray, columns: tuple, read=None) -> tuple:
    """The log-likelihood of each of the sorted ``units`` at the draws up to a constant per
    unit, what a unit's k-hat reads: rows (K', S) and which of them are the units' (K,).

    ``read``: units (sorted) read already, their rows (k, S) and which of them may be read
    (None: all), e.g. the second-order model's centred rows of the units finite at every
    draw (:func:`_rows_of`), read in place where they hold every unit (gathering a column
    of a matrix in memory touches a cache line per draw: 0.9 s for 4117 units at N =
    10^5), or a lazy source's units read with the linear sets. The others are read
    (:func:`_summed_sets`; ``columns``: the kept columns and the client it takes)."""
    found = np.zeros(units.size, dtype=bool)
    if read is not None and read[0].size:
        held, rows, usable = read
        slots = np.minimum(np.searchsorted(held, units), held.size - 1)
        found = held[slots] == units
        if usable is not None:
            found &= usable[slots]
        if found.all():
            return rows, slots
    out = np.empty((units.size, source.n_draws))
    if found.any():
        out[found] = rows[slots[found]]
    if not found.all():
        missing = [np.array([u]) for u in units[~found]]  # the source's columns: the units
        out[~found] = _as_rows(_summed_sets(source, missing, *columns))
    return out, np.arange(units.size)


def _as_rows(columns: np.ndarray) -> np.ndarray:
    """Columns (n_chains, n_draws, k) as rows (k, S), each chain's draws contiguous."""
    n_chains, n_draws, k = columns.shape
    return np.moveaxis(columns, -1, 0).reshape(k, n_chains * n_draws)


def _recovered_decided(results: list, fs: list, found: list, source, given: tuple) -> list:
    """The results, where an undetermined one of a logistic or normal linear regression
    is decided by working out its set's removal in the model recovered from the draws
    (:mod:`bayesij.array.amip_logistic`, :mod:`bayesij.array.amip_normal`; in the
    unconstrained parameters of ``gradient``, whose score gives the prior, or else in the
    posterior's quantities; a lazy log-likelihood's fitted from a few hundred draws' rows
    of each block as its pass read it, :class:`~bayesij.array.amip_normal.RegressionFeed`):
    "reached" where the pessimistic end of that removal reaches the
    target, with the smallest prefix of the set that does (bisection) when it answers "how
    few" (:func:`~bayesij.array.amip_noise.size_settled`), else "undetermined" with that
    prefix as a sure upper bound. A set the influences found
    "reached" is checked there too: where its removal falls short of the target even at
    the optimistic end of its band, the model decides the question, or it is left
    undetermined (:func:`_contradicted`); where it stands, its size interval starts no
    higher than the model's low end (:func:`_lowered`). Everything else is returned as
    it was. ``given``: the gradient (:func:`searches_from`) and the pass's kept columns
    (:func:`set_columns`)."""
    asked = [k for k, r in enumerate(results) if open_answer(r) or _claimed(r) or _denied(r)]
    gradient, kept, posterior = given
    if not asked:
        return results
    out = list(results)
    for model, theta in _recovered_models(source, gradient, kept, posterior):
        out = _decided_in(model, theta, out, asked, (fs, found, source))
        # for the next model, if any
        asked = [k for k in asked if open_answer(out[k]) or _denied(out[k])]
        if not asked:
            break
    return out


def _decided_in(model, theta: np.ndarray, results: list, asked: list, given: tuple) -> list:
    """The ``results``, each of those ``asked`` decided in the recovered ``model`` where its
    quantity is affine in the model's parameters (``theta``: the draws the model reads
    them in; ``given``: every question's draws, search and the source), as
    :func:`_recovered_decided` says."""
    fs, found, source = given
    out = list(results)
    u = whitened_draws(model, theta)
    for k in asked:
        f = np.asarray(fs[k], dtype=float).reshape(-1)
        quantity = affine_in(model, f, theta, u)
        if quantity is None:
            continue
        if _claimed(results[k]):
            if _contradicted(model, found[k].path.order, quantity, found[k].goal, fs[k]):
                decided = _by_removal(results[k], found[k], fs[k], model, quantity, source)
                out[k] = decided if decided.decided_by else _refuted_by(results[k], model, source)
                continue
            if not open_answer(results[k]):
                out[k] = _lowered(results[k], found[k].goal, fs[k], model, quantity)
                continue
        out[k] = _by_removal(results[k], found[k], fs[k], model, quantity, source)
    return out


def _claimed(result) -> bool:
    """Whether the influences said their set reaches (not a recovered model): "reached",
    or a sure upper bound of an undetermined answer. On the RAND experiment's normal
    regression (N = 20,190, seed 1) the influences' sure set of 33 for good health's sign
    and significance moved its lower end to -0.049 on exact refit, where 0 was needed."""
    return result.reachable and result.n_drop > 0 and not result.decided_by


def _denied(result) -> bool:
    """Whether the influences said no set within the limit reaches (not a recovered model):
    their band may be too narrow where a few units move a small regression far beyond
    its second order. On stack loss (N = 21, seed 11, with the gradient) the influences'
    band for the removal of two observations ended at -0.448 where -0.523 was needed; the
    recovered regression's band, -0.579 to -0.511, holds the exact refit's -0.5236."""
    return result.answer == "not reachable" and not result.decided_by


def _contradicted(model, order, quantity: Affine, goal, f) -> bool:
    """Whether the removal of the set ``order`` in the recovered ``model`` falls short of
    the goal's need at the optimistic end of its band through the prior, by more than
    :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo errors of the full data's metric.
    On the RAND experiment's normal regression (N = 20,190) the influences' sure set of 7
    for good health's sign moved the coefficient by 0.037 on exact refit, where 0.049
    was needed and the influences predicted 0.051 to 0.080 (chosen on the same draws whose
    covariances it sums); the recovered regression's removal is within 0.001 of the refit."""
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
    after = model.removal(np.asarray(order, dtype=int), quantity, goal.sign, goal.z)
    if start is None or after is None:
        return False
    low, _, high = after.change_from(start)
    best = max(goal.direction * low, goal.direction * high)
    return bool(best + MC_MARGIN * metric_mcse(f, goal) < goal.need)


def _refuted_by(result, model, source):
    """A "reached" ``result`` (or a sure upper bound) whose set the recovered ``model``
    shows falling short, where the model finds no set it can settle: undetermined, from
    the influences' low end, with no bound."""
    sizes = (float(result.size_interval[0]) if result.size_interval else 1.0, float("inf"))
    return replace(
        result,
        answer="undetermined",
        undetermined_by=(
            "the recovered model: the removal of this set, worked out by "
            f"{model.decided_by}, falls short of the target"
        ),
        upper_bound=0,
        size_interval=sizes,
        refits_needed=refits_to_decide("undetermined", sizes, result.alpha_max, source.n_units),
    )


def _recovered_models(source, gradient, kept, posterior=None) -> Iterator[tuple]:
    """The logistic (:func:`recover_glm`; in the unconstrained parameters where the
    gradient gives them) or else normal (:func:`recover_normal`; in the quantities)
    regression recovered from the draws, or else a normal varying-intercept model
    (:func:`recover_hierarchy`, in every quantity of the fit: ``posterior``, a function
    reading them, :class:`FitDraws`) and then the same at its Laplace approximation, for
    sets its reweighted draws cannot reach (:func:`laplace_hierarchy`): each model and the
    draws in its parameters, in turn, the next worked out only when asked; none where
    none is one. A lazy source's regressions are those its pass fitted as it read the
    blocks (the kept columns' ``feed``: none on a cluster, where the pass keeps nothing);
    its varying-intercept model reads the blocks again, where the columns its pass kept
    are such a model's."""
    theta, score, quantities, scales = _regression_draws(source, gradient)
    rows = _rows_reader(source)
    feed = kept.feed if kept is not None else None
    if feed is not None or not source.lazy:  # a lazy source's: fitted as its pass read it
        model = recover_glm(theta, rows, score, feed.glm() if feed else None)
        if model is not None:
            yield model, theta
            return
        given = None if score is None else (score, theta)  # the prior known from it
        model = recover_normal(quantities, rows, scales, feed.normal() if feed else None, given)
        if model is not None:
            yield model, model.parameters(quantities)
            return
    whole = posterior() if posterior is not None else None  # the effects (not searched)
    if whole is not None:
        quantities = np.asarray(whole[0], dtype=float).reshape(source.n_draws, -1)
        scales = _scale_mask(whole[1])
    screened = kept is not None and bool(kept.columns)  # a lazy source: its kept columns first
    if not source.lazy or (screened and effects_explain(quantities, kept.draw_rows, scales)):
        hierarchy = recover_hierarchy(quantities, rows, scales, source.n_chains)
        if hierarchy is not None:
            yield hierarchy, quantities
            laplace = laplace_hierarchy(hierarchy, quantities)
            if laplace is not None:
                yield laplace, laplace.parameters(quantities)


def _regression_draws(source, gradient) -> tuple:
    """The draws (S, P) the regressions are recovered in and the score there (or None):
    the unconstrained parameters where ``gradient`` gives them (:func:`searches_from`),
    else the posterior's quantities; those quantities (S, Q) and which are scales."""
    draws, names = _parameter_draws(source)
    quantities = np.asarray(draws, dtype=float).reshape(source.n_draws, -1)
    score, theta = None, quantities
    if gradient is not None and gradient[1] is not None:  # the score and its draws
        score, theta = (np.asarray(a, dtype=float).reshape(source.n_draws, -1) for a in gradient)
    return theta, score, quantities, _scale_mask(names)


def _rows_reader(source):
    """What the recoveries read the log-likelihood's draws with
    (:func:`~bayesij.array.amip_logistic._pieces` takes either): a matrix in memory (one
    block) as it is, so that no call climbs back up from the array layer; a lazy source's
    rows by :func:`_draws_rows`, block by block."""
    bounds = source.bounds()
    if source.lazy or len(bounds) != 1:
        return partial(_draws_rows, source)
    return source.block(*bounds[0]).reshape(source.n_draws, -1)


def _draws_rows(source, rows: np.ndarray):
    """The log-likelihood's draws ``rows`` (K, n) of each block of ``source``, in order
    (the observations of a lazy one: its units)."""
    for start, stop in source.bounds():
        yield from row_pieces(source.block(start, stop).reshape(source.n_draws, -1), rows)


def _lowered(result, goal, f, model, quantity: Affine):
    """A "reached" ``result`` of the influences whose size interval starts no higher than
    the recovered ``model``'s low end (:func:`~bayesij.array.amip_logistic.model_low`)
    along its greedy order (:func:`~bayesij.array.amip_logistic.model_greedy`: the
    iterated AMIP's sets, re-ranked after each quarter taken) up to one unit short of the
    influences' low end, the sets that could lower it. The influences' low end is a bound
    along the draws' ranking, which their Monte Carlo error shuffles: on a Poisson
    regression of the RAND experiment's doctor visits (N = 20,190, nine covariates) it
    put four of 24 low ends above sets whose MLE refits reach, two of them confirmed by
    the exact posterior (127 where 121 reach; 14 where 13); the model's low ends were 100
    and 11. There the model's ranking at the full data was never below its greedy order,
    nor its units' single removals below their prefixes: both are left out, and
    re-ranking after each quarter instead of each sixteenth left those low ends within a
    unit, which keeps this to a short greedy order and a few removals (on the t(4) audit
    0.2 s at N = 1000, 0.4 s at 10^4; at 10^5, with a sixteenth, 4.6 s)."""
    if not result.size_interval or result.size_interval[0] <= 1:
        return result
    below = int(np.ceil(result.size_interval[0])) - 1
    order = model_greedy(model, quantity, goal, below, pace=4)
    low = model_low(model, order, quantity, goal, f, singles=0)
    if not low < result.size_interval[0]:
        return result
    return replace(result, size_interval=(float(low), result.size_interval[1]))


def _by_removal(result, found, f, model, quantity: Affine, source):
    """``result`` decided by the removal of its set's prefixes in the recovered ``model``
    (see :func:`_recovered_decided`, :func:`~bayesij.array.amip_logistic.smallest_removal`;
    a sure set that does not settle how few: "undetermined", bounded by it, unless
    another model's bound is as small), or where no prefix reaches, answered "not
    reachable" by the largest sets'
    (:func:`_unreachable_in`), or else ``result`` with the model's low end of the smallest
    set's size (:func:`_raised_low`; where no prefix reaches at the optimistic end of its
    band, the smallest not :func:`~bayesij.array.amip.far_short`: a smaller set would be
    answered "not reachable" by that rule)."""
    goal = found.goal
    ranked = [
        model.ranking(quantity, goal, result._limit()),
        model_greedy(model, quantity, goal, result._limit()),
    ]
    low = min(model_low(model, order, quantity, goal, f) for order in ranked)
    reaching = np.isfinite(low)
    if not reaching:  # the influences' band left out where the model reaches
        low = result.size_interval[0] if result.size_interval else 0.0
    orders = [found.path.order, *ranked]
    hinted = partial(_prior_hint, model=model, given=(orders, quantity, goal))
    best = smallest_settled(model, orders, quantity, goal, f, low)
    if best is None:
        if not (result.upper_bound and result.decided_by):  # another model's sure set
            decided = _unreachable_in(result, goal, orders, f, model, (quantity, source))
            if decided is not result:
                return decided
        if _denied(result):  # the influences' "not reachable", where the model reaches
            limit = result._limit()
            reopen = reaching and _predicted_to_reach(model, orders, quantity, goal, limit)
            return hinted(_reopened(result, low, model, source.n_units)) if reopen else result
        if not reaching:  # no prefix reaches: the sizes "not reachable"'s own rule leaves
            near = replace(goal, need=short_of(goal, metric_mcse(f, goal)))
            low = min(model_low(model, order, quantity, near, f) for order in ranked)
        return hinted(_raised_low(result, low, model, source.n_units))
    order, settled = best
    if result.upper_bound and result.decided_by and result.upper_bound <= settled.size:
        return result  # another model's sure set, as small: kept
    if result.low_end_by and result.size_interval:  # another model's low end, if higher
        low = max(low, result.size_interval[0])
    sizes = (float(min(low, settled.size)), float(settled.size))
    answer = "reached" if size_settled(settled.size, low) else "undetermined"
    found = (model, source, goal)
    return hinted(_model_answer(result, found, order[: settled.size], settled, sizes, answer))


def _prior_hint(result, model, given: tuple):
    """``result`` marked ``prior_estimated`` where it is undetermined in a regression
    ``model`` (logistic, Poisson or normal: those whose prior the gradient makes known)
    whose prior was estimated from the draws (its batches' error widens every removal's
    band) and the centre of the band of some order's first ``alpha_max`` units reaches
    the target (``given``: the orders, the quantity and the goal;
    :func:`_predicted_to_reach`): the log posterior's gradient, which makes the prior
    known, may decide it. On the travel-mode regression (N = 840, seed 11) 8 of 15
    questions were decided from the draws alone, 14 with the gradient."""
    if result.answer != "undetermined" or not isinstance(model, (LogisticModel, NormalModel)):
        return result
    orders, quantity, goal = given
    if not len(model.batches) or not _predicted_to_reach(
        model, orders, quantity, goal, result._limit()
    ):
        return result
    return replace(result, prior_estimated=True)


def _raised_low(result, low: float, model, n_units: int):
    """``result``, still open, with its size interval starting at the recovered ``model``'s
    low end ``low`` (:func:`~bayesij.array.amip_logistic.model_low`) where that is finite,
    higher and not past its high end: where the influences' second order broke down, their
    low end was 1. (Infinite where every prefix is far short but a set could not be worked
    out for "not reachable": the answer is left as it was.)"""
    start, end = result.size_interval if result.size_interval else (0.0, float("inf"))
    if not (np.isfinite(low) and start < low <= end):  # inf: no prefix but is far short
        return result
    sizes = (float(low), end)
    refits = refits_to_decide("undetermined", sizes, result.alpha_max, n_units)
    return replace(result, size_interval=sizes, low_end_by=model.decided_by, refits_needed=refits)


def _predicted_to_reach(model, orders: list, quantity: Affine, goal, limit: int) -> bool:
    """Whether the recovered ``model``'s estimate of the removal of the first ``limit``
    units of some order (the centre of its band, not an end) reaches the goal: evidence
    against the influences' "not reachable" that their band's bias, not the model's Monte
    Carlo error, explains. Where only the optimistic end reaches, the influences' answer
    stands (a Poisson regression of overdispersed counts, N = 500: the model's greedy set
    of 50 read -0.44 to -0.26 around -0.351 where -0.361 was needed; its exact refit falls
    short)."""
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
    if start is None:
        return False
    for order in orders:
        after = model.removal(np.asarray(order[:limit], dtype=int), quantity, goal.sign, goal.z)
        if after is not None and goal.direction * after.change_from(start)[1] >= goal.need:
            return True
    return False


def _reopened(result, low: float, model, n_units: int):
    """The influences' "not reachable" made "undetermined" where the recovered ``model``'s
    removal of a set of ``low`` units reaches the target at the optimistic end of its band
    (:func:`~bayesij.array.amip_logistic.model_low`) but no set is sure to: the smallest
    set's size is ``low`` or more."""
    sizes = (float(low), float("inf"))
    return replace(
        result,
        answer="undetermined",
        undetermined_by=(
            f"the recovered model: the removal of {_count(int(low), 'unit')}, worked out "
            f"by {model.decided_by}, may reach the target where the influences fall short"
        ),
        size_interval=sizes,
        low_end_by=model.decided_by,
        refits_needed=refits_to_decide("undetermined", sizes, result.alpha_max, n_units),
    )


def _model_answer(result, found: tuple, dropped, removal, sizes: tuple, answer: str):
    """``result`` answered by a recovered model (``found``: the model, the source and the
    goal) from the removal of the units ``dropped`` (:class:`~bayesij.array.
    amip_logistic.SmallestRemoval`: its checked band and the quantity's mean and sd
    without them): ``answer`` ("reached" or "not reachable") with the size interval
    ``sizes``; "undetermined" where the set reaches but does not settle how few
    (:func:`~bayesij.array.amip_noise.size_settled`): it is then a sure upper bound of
    the smallest set's size, as a matched removal's is
    (:func:`bayesij.stats.amip_matched.amip_matched`)."""
    model, source, goal = found
    change = float(np.mean(removal.band))
    mean, sd = _coherent_after(goal, *removal.after, change, goal.z)
    reached = answer == "reached"
    bound = len(dropped) if answer == "undetermined" else 0
    refits = refits_to_decide(answer, sizes, result.alpha_max, source.n_units)
    return replace(
        result,
        answer=answer,
        drop_ids=source.units.values[dropped].tolist(),
        kept=(~np.isin(source.codes, dropped)).astype(float),
        predicted_change=change,
        predicted_mean=mean,
        predicted_interval=(mean - goal.z * sd, mean + goal.z * sd),
        change_interval=removal.band,
        size_interval=sizes,
        share_reached=result.share_reached if reached or bound else 0.0,
        stopped="reached" if reached or bound else "alpha_max",
        upper_bound=bound,
        smaller_undetermined=0,
        undetermined_by="the smallest set's size" if bound else "",
        refits_needed=refits,
        draws_needed=float("nan"),
        n_reweighted=min(result.n_reweighted, len(dropped)),
        decided_by=model.decided_by,
    )


def _unreachable_in(result, goal, orders: list, f, model, given: tuple):
    """``result`` answered "not reachable" where the recovered ``model``'s most influential
    set of the largest size allowed (the best of the prefixes of ``orders``: the search's
    set, the model's ranking and greedy order) falls short of the target at the optimistic
    end of its checked band, grown by :data:`~bayesij.array.amip.SLACK` and past
    :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo errors (:func:`far_short`, the
    rule that refits and matched removals follow); else ``result`` itself, as where some
    set cannot be worked out (no mode, k-hat past its threshold). ``given``: the quantity
    as a function of the model's parameters (:func:`affine_in`) and the source. The check
    only widens the Laplace band, so a set whose Laplace band is not far short is not
    checked (nor any: the answer stays ``result``; on the logistic audit at N = 10^4, 4 of
    its 16 importance samples)."""
    (quantity, source), limit = given, result._limit()
    sets, seen = [], set()
    for order in orders:
        dropped = np.asarray(order[:limit], dtype=int)
        if dropped.size and (key := frozenset(dropped.tolist())) not in seen:
            seen.add(key)  # the same set by another order: its removal is the same
            sets.append(dropped)
    mcse = metric_mcse(f, goal)
    if not all(laplace_far_short(model, dropped, quantity, goal, mcse) for dropped in sets):
        return result
    best = None
    for dropped in sets:
        found = checked_removal(model, dropped, quantity, goal, f)
        if found is None:
            return result
        optimistic = max(found.band, key=lambda end: goal.direction * end)
        if best is None or goal.direction * optimistic > goal.direction * best[0]:
            best = optimistic, found, dropped
    if best is None or not far_short(goal, best[0], mcse):
        return result
    _, removal, dropped = best
    never = (float("inf"), float("inf"))
    return _model_answer(result, (model, source, goal), dropped, removal, never, "not reachable")


def _half_rows(half, goals: list) -> tuple[list, list]:
    """Each goal's first-half influence rows and the units they are of (None: every
    unit), from :func:`~bayesij.array.amip.goal_influence`'s ``"half"`` or from
    :meth:`~bayesij.array.amip_candidates.RankingRows.result` (units, psi, mcse)."""
    if isinstance(half, list):
        return [InfluenceScores(psi, mcse) for _, psi, mcse in half], [u for u, _, _ in half]
    return goal_rows(half, goals), [None] * len(goals)


def _nonlinearities(
    source, questions, goals, rows, k_max, parameters=None, kept=None, client=None, plain=True
) -> list:
    """Each question's second-order ratios along a set of units
    (:class:`~bayesij.array.amip_curvature.SetCurvature`), from a quadratic model of the
    units' log-likelihood in the fit's quantities (:func:`curvature_of`; ``parameters``:
    :func:`fit_parameters`, default the source's). A matrix in memory is read as asked; for
    a lazy one, the columns of each linear ranking's first units (at most
    :data:`~bayesij.array.amip_curvature.MAX_COLUMNS`), from the pass's ``kept`` columns
    or read once for all questions (``client``: a dask.distributed client). ``plain``:
    whether the influences are the draws' plain covariances (no control variates:
    ``Curvature.plain_influences``). None where the draws are too few for the model."""
    draws, names = parameters if parameters is not None else _parameter_draws(source)
    # One model per quantity and kind of metric (a mean, an interval end), shared by its
    # questions; quantities modelled in the same parameters share its design
    # (curvatures_of). Every model takes all the quantities the draws hold (up to
    # MAX_MODEL_PARAMETERS); past that a mean's model holds the scales whatever their
    # correlation with it: a residual sd is in every observation's likelihood, and without
    # it no quadratic explains an outlier's, so the model broke down (change -inf to inf)
    # though a coefficient's mean does not move with the sd (docs/guide/amip.md, "Many
    # parameters").
    keys = [(q, goal.sign == 0) for (q, _), goal in zip(questions, goals, strict=True)]
    pairs = list(dict.fromkeys(keys))
    searched = list(source.quantity_names)
    models = {}
    for inside in (True, False):
        among = [pair for pair in pairs if (pair[0] in names) == inside]
        if among:
            of = names if inside else searched
            found = curvatures_of(
                draws if inside else source.quantity_draws,
                [of.index(q) for q, _ in among],
                _scale_mask(of),
                with_scales=[mean for _, mean in among],
            )
            models.update(zip(among, found, strict=True))
    curvatures = [models[key] for key in keys]
    if all(c is None for c in curvatures):
        return [None] * len(questions)
    wanted = _ranked_units(goals, rows, k_max)
    if not source.lazy:
        matrix = source.matrix(keep_float32=True).reshape(source.n_draws, -1)
        store = CentredColumns(source.n_draws, matrix=matrix, units=wanted)
    else:
        release_freed_memory()  # the pass's: at N = 4 10^5, 60 MiB off the audit's peak
        rows, finite = _ranked_rows(source, wanted, kept, client)
        store = CentredColumns(source.n_draws, units=wanted, rows=rows, finite=finite)
        release_freed_memory()  # the blocks read for them
    return [
        None
        if c is None
        else SetCurvature(c._replace(plain_influences=plain), g.sign, g.z, store=store)
        for c, g in zip(curvatures, goals, strict=True)
    ]


def _screened(draws: np.ndarray, names: list) -> np.ndarray:
    """The screen's parameters (n_chains, n_draws, Q): every quantity as the second-order
    models take it (:func:`~bayesij.array.amip_curvature.on_model_scale`: positive scales
    by their logarithm): those models' designs then lie in the screen's span, and a unit's
    terms come from its coefficients on the screen's basis instead of a product with its
    row (11 of the 15 models of a 10-coefficient regression's audit did the product)."""
    return on_model_scale(np.asarray(draws, dtype=float), _scale_mask(names))


def _scale_mask(names: list) -> np.ndarray:
    """Which of the quantities ``names`` are conventional scales (:func:`looks_like_scale`):
    the second-order model holds them in the others' Newton step."""
    return np.array([looks_like_scale(name) for name in names], dtype=bool)


def _ranked_units(goals, rows, k_max) -> np.ndarray:
    """The first units of each goal's linear ranking (at most ``MAX_COLUMNS``), together:
    the units the searches' second-order model will ask for."""
    wanted = set()
    for goal, scores in zip(goals, rows, strict=True):
        gain = -goal.direction * np.nan_to_num(scores.psi[0], nan=0.0)
        wanted.update(top_positive(gain, min(k_max, MAX_COLUMNS)).tolist())
    return np.array(sorted(wanted), dtype=int)


def _ranked_rows(source, wanted: np.ndarray, kept, client=None) -> tuple:
    """The centred log-likelihood of the sorted units ``wanted`` (:func:`_ranked_units`)
    of a lazy source, one row each (K, S), and whether each was finite at every draw (K,)
    (:func:`~bayesij.array.amip_curvature.centre_into`), written into the rows as they are
    read: kept by the pass where it kept them, the rest read from the blocks holding them
    as the pass reads them (:func:`~bayesij.data.source.map_blocks`: each dask chunk
    computed once, never more; with a dask.distributed ``client``, each block's columns
    taken on the workers: only the columns come back). Rows past
    :data:`SINGLE_PRECISION_BYTES` in float64 are held in float32 (:func:`_ranked_rows_dtype`)."""
    rows = np.empty((wanted.size, source.n_draws), dtype=_ranked_rows_dtype(wanted.size, source))
    finite = np.ones(wanted.size, dtype=bool)
    held = kept.columns if kept is not None else {}
    in_pass = np.array([int(unit) in held for unit in wanted.tolist()], dtype=bool)
    if in_pass.any():
        columns = np.column_stack([np.reshape(held[int(u)], -1) for u in wanted[in_pass]])
        finite[in_pass] = centre_into(rows, np.flatnonzero(in_pass), columns)
        del columns  # not held beside the blocks read below (30 MiB at N = 4 10^5)
    slots = np.flatnonzero(~in_pass)
    units = wanted[slots]
    if not units.size:
        return rows, finite
    if client is not None:
        columns = _columns_on(client, source, units).reshape(source.n_draws, -1)
        finite[slots] = centre_into(rows, slots, columns)
        return rows, finite

    def write(block: np.ndarray, positions: np.ndarray) -> None:
        start, stop = int(positions[0]), int(positions[-1]) + 1
        inside = (units >= start) & (units < stop)
        finite[slots[inside]] = centre_into(rows, slots[inside], block, units[inside] - start)

    _on_blocks_holding(None, source, units, write)
    return rows, finite


#: Above this, in float64, the ranked rows of a lazy source (:func:`_ranked_rows`) are
#: held in float32: centred in float64, then rounded (a relative 6e-8 of each value, as a
#: float32 log-likelihood in memory is read), summed in float64. At N = 4 10^5 (3
#: coefficients, 7 questions) they are 11,789 rows of 4000 draws, 360 MiB in float64, half
#: of the lazy audit's peak beyond the libraries, a block and what the pass keeps; with 21
#: questions at N = 2 10^5, 24,448 rows (746 MiB).
SINGLE_PRECISION_BYTES = 2 * CHUNK_BYTES


def _ranked_rows_dtype(n_rows: int, source) -> type:
    """float32 where ``n_rows`` rows of the source's draws pass
    :data:`SINGLE_PRECISION_BYTES` in float64, else float64."""
    return np.float32 if 8 * n_rows * source.n_draws > SINGLE_PRECISION_BYTES else np.float64


def _columns_on(client, source, units: np.ndarray) -> np.ndarray:
    """The columns of the sorted ``units`` (n_chains, n_draws, k) of a lazy source, each
    block's taken on the cluster's workers."""
    parts = _on_blocks_holding(client, source, units, partial(_block_columns, units=units))
    return np.concatenate(parts, axis=2)


def _on_blocks_holding(client, source, units: np.ndarray, kernel) -> list:
    """``kernel(block, positions)`` for each block of a lazy source that holds some of
    ``units``, in order (``positions``: the block's units), on the cluster's workers with
    a dask.distributed ``client``, else here a block at a time."""
    blocks = [
        i
        for i, (start, stop) in enumerate(source.bounds())
        if np.any((units >= start) & (units < stop))
    ]
    positions = {"positions": np.arange(source.n_units)}
    return map_blocks(  # a copy of columns: reading ahead saves a fifth for a second block
        source,
        kernel,
        per_unit=positions,
        client=client,
        join=False,
        blocks=blocks,
        read_ahead=False,
    )


def _block_columns(block: np.ndarray, positions: np.ndarray, units: np.ndarray) -> np.ndarray:
    """The columns of a block (a task on a worker) among the sorted ``units``;
    ``positions``: the block's units."""
    start, stop = int(positions[0]), int(positions[-1]) + 1
    inside = units[(units >= start) & (units < stop)] - start
    return np.ascontiguousarray(block[:, :, inside])


class FitDraws(NamedTuple):
    """What the AMIP models read of a fit's posterior beside its searched quantities
    (:func:`fit_draws`): the second-order model's parameters (:func:`fit_parameters`;
    ``(draws (n_chains, n_draws, K), names)`` or None, the source's quantities serve),
    and a function reading every quantity the same way, for the models recovered from the
    draws (a varying-intercept model's effects are not searched:
    :mod:`~bayesij.array.amip_hierarchy`), called only where one is tried."""

    model: tuple | None
    posterior: Callable[[], tuple | None]


def fit_draws(fit) -> FitDraws:
    """:class:`FitDraws` of a :class:`~bayesij.data.fit.Fit`."""
    return FitDraws(fit_parameters(fit), partial(_whole_posterior, fit))


def _whole_posterior(fit) -> tuple | None:
    """Draws (n_chains, n_draws, K) and names of every quantity of a fit, where they are at
    most :data:`~bayesij.array.amip_hierarchy.MAX_QUANTITIES` elements; else None."""
    sizes = fit.variable_sizes()
    if not sizes or sum(sizes.values()) > MAX_QUANTITIES:
        return None
    try:
        draws, names = fit.posterior_draws()
    except ValueError:
        return None
    return np.asarray(draws, dtype=float), list(names)


def fit_parameters(fit) -> tuple[np.ndarray, list] | None:
    """Draws (n_chains, n_draws, Q) and names of the posterior's small variables (at most
    64 elements in all) of a :class:`~bayesij.data.fit.Fit`: the second-order model's
    parameters, the same whichever quantities an audit searches; read without the
    log-likelihood. None when there are none such (the searched quantities serve).

    A variable is small up to :data:`~bayesij.array.amip_curvature.MAX_PARAMETERS`
    elements, and a global one (not local to the fit's units) up to
    :data:`~bayesij.array.amip_curvature.MAX_MODEL_PARAMETERS`. At eight a regression's
    ten coefficients were left out, and a question on its residual sd was modelled in the
    sd alone (its prediction broke down on a tenth of the data, where in every quantity
    the exact refits confirm "not reachable"). A group effect per level is not taken past
    eight: on a varying-intercept model of 15 groups saved without its group index, its
    15 effects in the parameters put a set's change of the mean at -0.239 to -0.177 where
    the exact Gibbs refit moves it by -0.260."""
    sizes = fit.variable_sizes()
    local = {base_name(n) for n in fit.local_quantities(fit.element_names() or list(sizes))}
    small = [
        name
        for name, size in sizes.items()
        if 0 < size <= MAX_PARAMETERS or (size <= MAX_MODEL_PARAMETERS and name not in local)
    ]
    if not small or sum(sizes[name] for name in small) > 64:
        return None
    try:
        draws, names = fit.posterior_draws(small)
    except ValueError:
        return None
    return np.asarray(draws, dtype=float), list(names)


def _parameter_draws(source) -> tuple[np.ndarray, list]:
    """Draws of every posterior quantity of the fit and their names (the quadratic model's
    parameters do not depend on which quantities are searched), or the source's searched
    quantities where it holds no posterior (a lazy log-likelihood)."""
    draws = source.all_posterior_draws()
    if draws is None or draws.shape[-1] != len(source.posterior.quantity_names):
        return source.quantity_draws, list(source.quantity_names)
    return draws, list(source.posterior.quantity_names)


def _summed_sets(source, sets: list, kept: KeptColumns | None = None, client=None) -> np.ndarray:
    """The summed log-likelihood of each set of units at each draw (:func:`set_sums`),
    reading only the blocks that hold some set's units and whose columns the pass did not
    keep (``kept``), each once for all the sets (a lazy source: those chunks once), never
    more than a block at a time. Kept columns are summed as the block's would be. With a
    dask.distributed ``client`` (a lazy source), each block's share of the sums is computed
    on the workers and only those (n_chains, n_draws, len(sets)) arrays come back."""
    out = np.zeros((*source.shape, len(sets)))
    touched = np.unique(np.concatenate([np.zeros(0, dtype=int), *sets]))
    if client is not None and source.lazy:
        for part in _on_blocks_holding(
            client, source, touched, partial(_block_set_sums, sets=sets)
        ):
            out += part
        return out
    for start, stop in source.bounds():
        here = touched[(touched >= start) & (touched < stop)]
        if not here.size:
            continue
        if kept is not None and kept.holds(here):
            set_sums(kept.block(start, stop), sets, start, out)
        else:
            set_sums(source.block(start, stop), sets, start, out)
    return out


def _block_set_sums(block: np.ndarray, positions: np.ndarray, sets: list) -> np.ndarray:
    """A block's share of :func:`_summed_sets` (a task on a worker); ``positions``: the
    block's units."""
    return set_sums(block, sets, int(positions[0]))


def _check_varies(f: np.ndarray, quantity: str) -> None:
    if constant_columns(f[..., None])[0]:
        raise fail(
            "quantity",
            f"{quantity!r}, constant over the draws (posterior sd 0)",
            "a quantity that varies: dropping data cannot move a constant, and its "
            "significance (mean / sd) is undefined",
        )


def _curve(found, method: str) -> pd.DataFrame:
    """The predicted change after each number of units dropped: ``linear`` (and
    ``second_order``) at every size, the reweighted path's ``reweighted``, ``pareto_k`` and
    ``estimate`` at its sizes (NaN between), sorted by ``n_drop`` — an outer merge on
    ``n_drop``, built by placing the path's points when its sizes are distinct sizes of the
    linear curve (the usual case; 2 ms a merge, 21 per audit)."""
    linear = found.linear_change
    curve = {"n_drop": np.arange(linear.size), "linear": linear}
    if found.second_change is not None:
        curve["second_order"] = found.second_change
    if method != "reweighted":
        return pd.DataFrame(curve)
    path = found.path
    steps = {"reweighted": path.change, "pareto_k": path.pareto_k, "estimate": path.how}
    sizes = np.asarray(path.sizes)
    placed = (
        sizes.size > 0
        and sizes.dtype.kind in "iu"
        and sizes.min() >= 0
        and sizes.max() < linear.size
        and np.unique(sizes).size == sizes.size
    )
    if not placed:
        return pd.DataFrame(curve).merge(
            pd.DataFrame({"n_drop": path.sizes, **steps}), on="n_drop", how="outer"
        )
    for name, values in steps.items():
        values = np.asarray(values)
        kind = float if values.dtype.kind == "f" else object
        column = np.full(linear.size, np.nan, dtype=kind)
        column[sizes] = values
        curve[name] = column
    return pd.DataFrame(curve)


def _result(
    f, quantity, target, z, source, found, method, alpha_max, *, control_variates=False
) -> AmipResult:
    goal, path, units, codes = found.goal, found.path, source.units, source.codes
    curve = _curve(found, method)
    answer = found.answer
    change = _reported_change(path, answer, method)
    mean, sd = _coherent_after(goal, found.mean_after, found.sd_after, change, z)
    noise = {}
    if answer is not None:
        noise = {
            "answer": answer.answer,
            "share_reached": answer.share_reached,
            "size_interval": answer.size_interval,
            "change_interval": _holding(answer.change_interval, change),
            "draws_needed": answer.draws_needed,
            "smaller_undetermined": int(answer.smaller),
            "upper_bound": int(answer.bound),
            "undetermined_by": answer.undetermined_by,
        }
        start, draws_for_sign = _undecided_start(f, goal)
        noise = _coherent(noise, path.order.size, start, goal, curve)
        if start:  # more draws decide the side of zero, not the size
            noise["draws_needed"] = draws_for_sign
        if noise["answer"] == "reached" and not _interval_past(goal, noise["change_interval"]):
            noise["change_interval"] = _reweighted_interval(path, method, noise["change_interval"])
        noise["refits_needed"] = refits_to_decide(
            noise["answer"], noise["size_interval"], alpha_max, units.size
        )
    return AmipResult(
        quantity=quantity,
        target=target,
        metric=goal.metric,
        original_value=goal.value,
        z=float(z),
        drop_ids=units.values[path.order].tolist(),
        n_units=int(units.size),
        predicted_change=change,
        predicted_mean=mean,
        predicted_interval=(mean - z * sd, mean + z * sd),
        curve=curve,
        method=method,
        stopped=path.stopped,
        monte_carlo=found.monte_carlo,
        unit=units.dims[0],
        kept=(~np.isin(codes, path.order)).astype(float),
        n_reweighted=int(path.reliable) if method == "reweighted" else 0,
        one_signed=one_signed(f),
        n_draws=int(f.size),
        alpha_max=float(alpha_max),
        control_variates=bool(control_variates),
        **noise,
    )


def _reweighted_interval(path, method: str, band: tuple) -> tuple:
    """A reached set's change interval where the influences' ``band`` is open (the
    second-order model broke down along the way) or an end of it falls short of the goal
    (on a hierarchy's groups, "reached" read beside a band ending at -0.019 where the
    target needed -0.035; the exact refit crosses): the reweighted estimate of the whole
    set's removal give or take 1.96 of its importance-sampling Monte Carlo errors
    (:func:`~bayesij.array.amip.weighted_value`, as the search left them: ``path.mcse``),
    where every unit of the set was reweighted (the evidence the answer rests on, past the
    goal by :data:`~bayesij.array.amip.MC_MARGIN` of those errors); else ``band`` as it
    was."""
    whole = method == "reweighted" and 0 < path.reliable == path.order.size
    if not whole or not np.isfinite(path.mcse):
        return band
    z = float(NormalDist().inv_cdf(0.975))
    change = float(path.change[-1])
    return (change - z * path.mcse, change + z * path.mcse)


def _undecided_start(f: np.ndarray, goal) -> tuple[str, float]:
    """Why the draws do not say on which side of zero the metric starts ("" when they
    do): its value within :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo standard
    errors of zero (the split-chain ESS error of ``g*``, the interval end's
    linearisation), so that no change of sign can be claimed from them; and the draws in
    all that would put it beyond that margin if it stayed where it is (the error falls as
    ``1 / sqrt(S)``; NaN when they do). A numeric target's change needs no start."""
    if goal.fixed:
        return "", float("nan")
    mcse = metric_mcse(f, goal)
    if abs(goal.value) > MC_MARGIN * mcse:
        return "", float("nan")
    needed = f.size * (MC_MARGIN * mcse / goal.value) ** 2 if goal.value else float("inf")
    why = (
        f"the draws: the {goal.metric} {goal.value:.3g} is within {MC_MARGIN:g} Monte Carlo "
        f"standard errors ({mcse:.2g}) of 0, so its sign is not determined by them"
    )
    return why, float(np.ceil(needed))


def _coherent(noise: dict, n_drop: int, start: str, goal, curve: pd.DataFrame) -> dict:
    """The answer's fields made to agree with each other.

    - A metric whose side of zero the draws do not determine (``start``) has no change of
      sign to find: the answer is "undetermined", by the draws.
    - "Reached" holds its set: the smallest set's size interval is finite and ends at the
      set's size (the set reaches, so the smallest set has at most ``n_drop`` units; where
      the influences' band put the smallest below it, the interval is widened to it).
    - "Not reachable" has no smallest set within the limit: where the size interval has a
      finite low end (the band of the influences says a set within the limit may reach,
      where a reweighted continuation fell short), the answer is "undetermined", by the
      linearisation.
    - "Not reachable" has a change interval that falls short of the goal at both ends: one
      that reaches it leaves the answer "undetermined", by the change interval.
    - An undetermined answer's smallest set may hold other units than the ranking's (the
      ranking is the best set to first order only): its size interval starts no higher than
      the first size where the ``curve``'s prediction, grown by
      :data:`~bayesij.array.amip.SLACK` (the share by which a refit's change may fall short
      of another set's, :func:`~bayesij.array.amip.far_short`), reaches the goal.
    - A sure upper bound lies inside the size interval.
    - Where the second-order model breaks down (an infinite end of the change interval: the
      band open beyond the second order, its first-order end kept), the answer says so.
    """
    out = dict(noise)
    low, high = out["size_interval"] or (np.nan, np.nan)
    if start:  # the metric may already be past zero: the smallest set may be empty
        out.update(answer="undetermined", undetermined_by=start, upper_bound=0)
        out["size_interval"] = (0.0, float(high) if np.isfinite(high) else float("inf"))
    elif out["answer"] == "reached" and n_drop:
        low = min(low, n_drop) if np.isfinite(low) else 1.0
        out["size_interval"] = (float(max(low, 1.0)), float(n_drop))
    elif out["answer"] == "not reachable" and np.isfinite(low):
        out.update(answer="undetermined", undetermined_by="linearisation", upper_bound=0)
    elif out["answer"] == "not reachable" and _interval_reaches(goal, out["change_interval"]):
        out.update(answer="undetermined", undetermined_by="the change interval", upper_bound=0)
        out["size_interval"] = (float("inf"), float("inf"))  # its low end: below
    if out["answer"] == "undetermined" and out["size_interval"] and not start:
        # the band's low end is along the ranking; a set of other units may need fewer
        low, high = out["size_interval"]
        out["size_interval"] = (float(min(low, _grown_reach(goal, curve, n_drop))), high)
    bound = out.get("upper_bound", 0)
    if bound and out["size_interval"]:
        low, high = out["size_interval"]
        out["size_interval"] = (float(min(low, bound)), float(min(high, bound)))
    ends = out.get("change_interval") or ()
    if ends and not np.all(np.isfinite(ends)):
        # Past the second-order model's breakdown the band keeps its first-order end and is
        # open on the other side (nonlinear_band): what the draws still say.
        if out["answer"] == "undetermined" and out["undetermined_by"] == "linearisation":
            out["undetermined_by"] = "second-order breakdown"
    return out


def _interval_past(goal, change_interval: tuple) -> bool:
    """Whether both ends of a set's change interval are finite and reach the goal."""
    ends = [goal.direction * end for end in change_interval or ()]
    return len(ends) == 2 and bool(np.all(np.isfinite(ends))) and min(ends) >= goal.need


def _interval_reaches(goal, change_interval: tuple) -> bool:
    """Whether either end of a set's change interval reaches the goal."""
    ends = [goal.direction * end for end in change_interval or () if np.isfinite(end)]
    return bool(ends) and max(ends) >= goal.need


def _grown_reach(goal, curve: pd.DataFrame, n_drop: int) -> float:
    """The first set size at which the ``curve``'s predicted change (first or second order,
    the one nearer the goal) grown by :data:`~bayesij.array.amip.SLACK` reaches the goal
    (``n_drop`` where none does): a low end for the smallest set of any units."""
    columns = [c for c in ("linear", "second_order") if c in curve]
    gained = goal.direction * curve[columns].to_numpy(float)
    reach = np.flatnonzero(
        np.nanmax(np.where(np.isfinite(gained), gained, -np.inf), axis=1) * (1 + SLACK) >= goal.need
    )
    sizes = curve["n_drop"].to_numpy()
    return float(sizes[reach[0]]) if reach.size else float(max(n_drop, 1))


def _reported_change(path, answer, method: str) -> float:
    """The set's one predicted change: the reweighted estimate where every unit of the set
    was reweighted (k-hat below its threshold throughout), else the answer's (to second
    order where the quadratic model holds), else the path's."""
    reweighted = method == "reweighted" and path.reliable == path.order.size
    if answer is None or reweighted or not np.isfinite(answer.change):
        return float(path.change[-1])
    return float(answer.change)


def _holding(interval: tuple, change: float) -> tuple:
    """``interval`` widened to hold ``change`` (a reweighted estimate beside the
    influences' band)."""
    if not interval:
        return interval
    return (min(interval[0], change), max(interval[1], change))


def _coherent_after(goal, mean: float, sd: float, change: float, z: float) -> tuple:
    """The predicted mean and sd after the drop, the mean moved so that the metric is the
    reported change's (``mean + sign z sd = value + change``): the text's value and its
    interval agree."""
    if goal.sign == 0:
        return goal.value + change, sd
    return goal.value + change - goal.sign * z * sd, sd


def refits_to_decide(answer: str, size_interval: tuple, alpha_max: float, n_units: int) -> int:
    """About how many refits would settle an undetermined answer: a bisection over the
    size interval (its open end at the largest set allowed, plus one refit there); 0 when
    decided."""
    if answer != "undetermined":
        return 0
    limit = max(1, int(np.floor(alpha_max * n_units)))
    low, high = size_interval
    low = 1 if not np.isfinite(low) else max(1, int(low))
    high = limit + 1 if not np.isfinite(high) else int(high)
    return int(np.ceil(np.log2(max(high - low, 1) + 1))) + 1


def gradient_arrays(gradient, fit) -> tuple:
    """``(gradient, unconstrained)``, each (n_chains, n_draws, P), from ``gradient``: a
    model density (its ``grad_log_posterior(fit)`` at the fit's draws, ``fit`` the
    :class:`~bayesij.data.fit.Fit` read once, which reads every
    parameter's draws, not only the audited quantities: :class:`bayesij.refit.PyStanDensity`,
    :class:`bayesij.refit.PyMCDensity`) or that pair of arrays; (None, None) without one.
    What :func:`bayesij.amip` and :func:`bayesij.audit` take as ``grad_log_posterior``."""
    if gradient is None:
        return None, None
    if callable(getattr(gradient, "grad_log_posterior", None)):
        return gradient.grad_log_posterior(fit)
    if isinstance(gradient, (tuple, list)) and len(gradient) == 2:
        return gradient[0], gradient[1]
    raise fail(
        "grad_log_posterior",
        f"a {type(gradient).__name__}",
        "a model density with grad_log_posterior(fit) (refit.PyStanDensity, "
        "refit.PyMCDensity) or a (gradient, unconstrained) pair of arrays of shape "
        "(n_chains, n_draws, P)",
    )
