"""How sure an influential-set answer is, given the Monte Carlo error of the influences it
was built from: three answers (reached, not reachable, undetermined), intervals for the set
size and the predicted change, and the number of draws that would decide an undetermined
answer.

The influences ``psi_u`` carry Monte Carlo error. Replicates ``psi*`` stand for the truths
the draws cannot tell apart: a bootstrap over blocks of draws within chains (the blocks'
sums of the per-draw terms whose mean is ``psi``, kept by the influence pass), which keeps
the errors that all units share (an outlier-heavy fit's influences err together, through
the same draws of the noise scale); without block sums, ``psi + mcse eps`` with independent
standard normal ``eps``. On each replicate, the point estimate's ranking is followed: the
answer is reached when at least ``1 - alpha / 2`` of the replicates reach the target along
it within ``k_max`` units, and the interval of the smallest reaching prefix is the size
interval (a replicate that does not reach counts as beyond ``k_max``). Not reachable needs
the optimistic view to fail too: choosing the best ``k_max`` units of each replicate afresh
(which overstates what is possible, as choosing the largest of noisy values does) reaches
the target in at most ``alpha / 2`` of them. Anything between is undetermined.

A sure set is not yet an answer to "how few": when Monte Carlo error makes the sure set
more than twice the low end of the size interval (plus 2), the smallest set may be less
than half of it. The answer is then undetermined in its size, with the sure set as an
upper bound (``bound``) and the draws at which the sure set would be within that factor
of the interval's low end (:func:`draws_to_settle_size`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bayesij.array.numeric import CHUNK_BYTES, top_positive

__all__ = [
    "NoiseAnswer",
    "Moments",
    "Start",
    "Replicates",
    "linear_answer",
    "draws_to_decide",
    "finite_copy",
    "draws_to_settle_size",
    "size_settled",
    "block_bootstrap",
    "block_bootstrap_counts",
    "bootstrap_counts",
    "REPLICATES",
    "replicates_from_counts",
    "ANSWERS",
]

ANSWERS = ("reached", "not reachable", "undetermined")

#: Replicates of the block bootstrap (:func:`linear_answer`).
REPLICATES = 200


class NoiseAnswer(NamedTuple):
    """The answer and its Monte Carlo uncertainty.

    Attributes
    ----------
    answer : str
        One of :data:`ANSWERS`.
    share_reached : float
        Share of replicates that reach the target along the point estimate's ranking
        within ``k_max``.
    size_interval : tuple of float
        Interval of the set size over replicates (``inf`` beyond ``k_max``).
    change_interval : tuple of float
        Interval of the predicted change of the chosen set.
    draws_needed : float
        Draws (in all) that would make an undetermined answer decisive at the same
        Monte Carlo error per draw; NaN when decided.
    sure_size : int
        The smallest prefix of the ranking that reaches the target in at least
        ``1 - alpha / 2`` of the replicates (0: none within ``k_max``): a set that reaches
        it whatever the Monte Carlo error, shared errors included.
    chosen_size : int
        With ``chosen=None``: the prefix of the ranking the answer reports (``sure_size``,
        or the whole ranking within ``k_max`` when no prefix is sure).
    smaller : int
        The size of a smaller set that a search found but Monte Carlo error leaves
        undetermined, when the answer reports the sure one instead (0: none).
    bound : int
        When the answer is undetermined only in how small the set is (the sure set is more
        than twice the size interval's low end plus 2: :func:`size_settled`), the sure
        set's size, an upper bound of the smallest set's (0 otherwise).
    change : float
        The chosen set's predicted change, carried to second order where a quadratic model
        is given (``nonlinearity``), else to first; inside ``change_interval``.
    undetermined_by : str
        What leaves the answer (or the set's size) open: ``'Monte Carlo error'`` (more
        draws would decide), ``'linearisation'`` (the first-order answer is decided; the
        second-order term's size leaves it open: a refit decides), ``'both'``, or ``''``.
    """

    answer: str
    share_reached: float
    size_interval: tuple
    change_interval: tuple
    draws_needed: float
    sure_size: int = 0
    chosen_size: int = 0
    smaller: int = 0
    bound: int = 0
    change: float = float("nan")
    undetermined_by: str = ""


class Moments(NamedTuple):
    """An interval end's prediction from the posterior moments it is a function of.

    Attributes
    ----------
    psi : ndarray of shape (2, U)
        Influences of the quantity and of its centred square on each unit.
    block_sums : ndarray of shape (B, 2, U)
        Their block sums, for the block bootstrap, as the influences hold them (float32
        or float64; a non-finite sum counts as 0): only the columns a path takes are
        copied as float64.
    change_from : callable
        ``(d_mean, d_var) -> change`` of the metric from the first-order changes of the
        mean and the variance (arrays alike): :meth:`bayesij.array.amip.Goal.change_from`.
    """

    psi: np.ndarray
    block_sums: np.ndarray
    change_from: Callable


class Start(NamedTuple):
    """The metric's value on each replicate's draws, for targets whose ``need`` is the
    distance of that value from zero.

    Attributes
    ----------
    block_sums : ndarray of shape (B, 2)
        Each block's sums of ``f - centre`` and ``(f - centre)^2`` (the blocks of the
        influences' block sums).
    centre : float
        The draws' mean of the quantity (subtracted for precision).
    n_draws : int
    need_at : callable
        ``(mean, sd) -> need`` (arrays alike): :meth:`bayesij.array.amip.Goal.need_at`.
    """

    block_sums: np.ndarray
    centre: float
    n_draws: int
    need_at: Callable

    def needs(self, counts: np.ndarray, sizes) -> np.ndarray:
        """Each replicate's need (R,) for block ``counts`` (R, B) of blocks of ``sizes``."""
        drawn = counts @ np.asarray(sizes, dtype=float)
        first = counts @ self.block_sums[:, 0] / drawn
        second = counts @ self.block_sums[:, 1] / drawn
        n = self.n_draws
        sd = np.sqrt(np.maximum(second - first**2, 0.0) * n / (n - 1))
        return np.asarray(self.need_at(self.centre + first, sd), dtype=float)


def nonlinear_band(first, factors):
    """Where a change (or gain) lies given its first-order prediction ``first`` (..., K)
    and the quadratic model's ``factors`` (2 or 3, K), the ratio of the second-order
    prediction to the first, the widening for the departure from the quadratic and where
    the other end sits (:meth:`bayesij.array.amip_curvature.Curvature.ratios`): between
    the first-order prediction (or ``near`` of the way from it to the second, for a
    conditionally normal likelihood) and the second-order one ``s = ratio * first``,
    widened beyond ``s`` (away from the first) by ``share |first|``
    (:attr:`bayesij.array.amip_curvature.Changes.beyond` over the first-order change).
    Returns ``(low, high)``. Past the model's breakdown where the quadratic explains the
    set (the second-order prediction infinite in the first order's direction: the set
    holds most of the posterior precision in some direction), the band keeps its
    first-order end and is open in the first order's direction: the change is at least
    that, and unbounded beyond as far as the draws can tell. Where the quadratic explains
    too little of the set's log-likelihood (a hierarchy's group, whose log-likelihood moves
    with its own effect: its first order may err either way) the band is ``(-inf, inf)``.

    Neither prediction bounds the change alone: on a logistic regression's sets of 25-302
    of 3020 the exact change lay 60-107 % of the way from the first-order prediction to the
    second (the set held a share of the precision); on a heavy-tailed normal regression
    with unknown scale, at the first-order one, the second overshooting by 60 % (the
    posterior is not normal in the scale over the 17 sds the scale moves); for a normal
    model with known scale, at the second. 4000 draws cannot tell these apart (the
    posterior's third cumulants that decide are below their Monte Carlo error), so the
    band spans both."""
    first = np.asarray(first, dtype=float)
    factors = np.asarray(factors, dtype=float)
    ratio, share = factors[0], factors[1]
    near = factors[2] if len(factors) > 2 else np.zeros_like(ratio)
    finite = np.isfinite(ratio) & np.isfinite(share)
    # Past a breakdown the quadratic explains (ratio and share +-inf): the change runs
    # away in the first order's direction and is at least the first order; anything
    # else not finite (the quadratic explains too little, a set beyond the model's
    # reach): no side is known.
    runaway = np.isinf(ratio) & np.isposinf(share)
    ratio, share = np.where(finite, ratio, 1.0), np.where(finite, share, 0.0)
    with np.errstate(invalid="ignore"):
        second = first * ratio
        beyond = share * np.abs(first)
        toward = first + np.where(finite, near, 0.0) * (second - first)
    low = np.where(second < first, second - beyond, toward)
    high = np.where(second > first, second + beyond, toward)
    up = first >= 0
    low = np.where(finite, low, np.where(runaway & up, first, -np.inf))
    high = np.where(finite, high, np.where(runaway & ~up, first, np.inf))
    return low, high


class Replicates(NamedTuple):
    """How :func:`linear_answer` draws the Monte Carlo error of the influences.

    Attributes
    ----------
    blocks : tuple or None
        ``(block_sums (B, U), sizes (B,), chains (B,))`` for the block bootstrap
        (:func:`block_bootstrap`); None: independent normal errors of ``mcse``.
    moments : Moments or None
        With ``blocks``: an interval end's changes along the ranking, and the chosen set's,
        are predicted from its moments (:class:`Moments`) on each replicate instead of by
        the sum of the linearised ``psi``, which still ranks the units.
    start : Start or None
        With ``blocks``: the metric's value now carries Monte Carlo error too; each
        replicate's ``need`` comes from its own draws of the quantity (:class:`Start`).
    units : ndarray or None
        The units the block sums' columns are of (None: every unit).
    n_replicates : int
        Replicates drawn.
    level : float
        The intervals' level.
    seed : int
    """

    blocks: tuple | None = None
    moments: Moments | None = None
    start: Start | None = None
    units: np.ndarray | None = None
    n_replicates: int = REPLICATES
    level: float = 0.95
    seed: int = 0


#: Independent normal errors of ``mcse``, 200 replicates, 95 % intervals.
INDEPENDENT = Replicates()


def linear_answer(
    psi: np.ndarray,
    mcse: np.ndarray,
    direction: int,
    need: float,
    k_max: int,
    chosen: np.ndarray | None,
    n_draws: int,
    *,
    ranking_too: bool = False,
    errors: Replicates = INDEPENDENT,
    nonlinearity: Callable | None = None,
):
    """The answer of the linear search from ``psi`` (U,) and its ``mcse`` (U,).

    ``chosen`` are the units of the set whose predicted change's interval is reported;
    None: the prefix of the ranking the answer reports (``chosen_size``), from the same
    replicates. ``n_draws`` scales the draws needed. ``ranking_too``: also the answer of
    the ranking's own set (``chosen`` None) from the same replicates, returned as
    ``(answer, ranking_answer)`` — one bootstrap for the two answers the reweighted search
    may report. ``errors``: how the influences' Monte Carlo error is drawn
    (:class:`Replicates`). ``nonlinearity``: the second-order ratios along a set, which
    put the linearisation error in the band (:func:`nonlinear_band`).

    Returns
    -------
    NoiseAnswer, or (NoiseAnswer, NoiseAnswer) with ``ranking_too``
    """
    blocks, moments, start, units = errors.blocks, errors.moments, errors.start, errors.units
    replicates, level, seed = errors.n_replicates, errors.level, errors.seed
    rng = np.random.default_rng(seed)  # with blocks, only their counts are drawn from it
    noise = np.nan_to_num(mcse, nan=0.0)
    gain = -direction * np.nan_to_num(psi, nan=0.0)
    top = min(k_max, gain.size)
    ranking = top_positive(gain, top)  # the point estimate's order
    counts = None if blocks is None else bootstrap_counts(blocks[1], blocks[2], replicates, seed)
    if blocks is None:
        moments, units = None, None  # replicates of the moments need the block sums
    at = _column_positions(units)
    along = _moment_paths(moments, direction, blocks, counts, at)
    needs = np.full(replicates, float(need))
    if start is not None and counts is not None and blocks is not None:
        needs = start.needs(counts, blocks[1])
    # Each replicate's gain along the ranking: first order, and the band that the
    # second-order term puts around it (nonlinear_band): its pessimistic and optimistic ends.
    ratios = _ratios(nonlinearity, ranking)
    chosen_ratio = (
        _ratios(nonlinearity, chosen)[:, -1]
        if chosen is not None and chosen.size
        else np.array([1.0, 0.0, 0.0])  # no model: the first order, no band
    )
    # Each replicate's first-order path is kept (R, k); the band's ends are functions of
    # it column by column (nonlinear_band), so only what the answer reads of them is kept:
    # where each replicate first reaches, and how many fall short at each prefix.
    first_path = np.empty((replicates, ranking.size))
    sizes = {key: np.empty(replicates) for key in ("first", "low", "high")}
    short = {key: _Short(ranking.size) for key in ("first", "low")}
    chosen_gains = {key: np.zeros(replicates) for key in ("first", "low", "high")}
    best = {key: np.empty(replicates) for key in ("first", "high")}  # re-selected sets
    draw = _replicate_gains(gain, noise, direction, rng, blocks, counts)
    columns = gain.size if blocks is None else np.shape(blocks[0])[1]
    for rows in _replicate_chunks(replicates, columns):
        sample = draw(rows)  # (len(rows), U), computed where read
        if along is None:
            first = np.cumsum(sample.columns(at(ranking)), axis=1)
        else:
            first = along(rows, ranking)
        first_path[rows] = first
        chunk = dict(zip(("low", "high"), nonlinear_band(first, ratios), strict=True))
        chunk["first"] = first
        for key in sizes:
            sizes[key][rows] = _first_reaching(chunk[key], needs[rows])
        for key in short:
            short[key].add(chunk[key], needs[rows])
        if chosen is not None and chosen.size:
            if along is None:
                set_first = sample.columns(at(chosen)).sum(axis=1)
            else:
                set_first = along(rows, chosen)[:, -1]
            set_low, set_high = nonlinear_band(set_first, chosen_ratio)
            chosen_gains["first"][rows] = set_first
            chosen_gains["low"][rows], chosen_gains["high"][rows] = set_low, set_high
        # Whether the best set within k_max reaches the target (re-selected: optimistic);
        # the ranking's own sum is a lower bound of it that often settles that.
        finals = {
            key: chunk[key][:, -1] if ranking.size else np.zeros(rows.stop - rows.start)
            for key in ("first", "high")
        }
        short_rows = (finals["first"] < needs[rows]) | (finals["high"] < needs[rows])
        largest_of = np.zeros(short_rows.size)  # each replicate's best set, read once
        if short_rows.any():
            largest_of[short_rows] = _sum_of_largest(sample.whole()[short_rows], top)
        for key, final in finals.items():
            best[key][rows] = final
            below = final < needs[rows]
            if below.any():
                largest = largest_of[below]
                if key == "high" and ranking.size:  # the band's widening, re-selected
                    base = first[below, -1]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        ratio = np.where(base > 0, final[below] / base, 1.0)
                    largest = largest * np.maximum(np.nan_to_num(ratio, nan=1.0), 1.0)
                best[key][np.arange(rows.start, rows.stop)[below]] = largest
        del chunk, first
    tail = (1 - level) / 2
    low_end = float(np.quantile(sizes["high"], tail, method="inverted_cdf"))
    if ranking.size and low_end > 1:
        # a smaller set in another order than the ranking's: the size interval's low end
        alone = _alone(nonlinearity, ranking[:ALONE])
        within = int(min(low_end, RESELECTED, ranking.size))  # only smaller sets matter
        reselected = _reselected_reach(first_path, alone, needs, within)
        sizes["high"] = np.minimum(sizes["high"], reselected)
    share = float(np.mean(np.isfinite(sizes["low"])))  # reached even pessimistically
    share_first = float(np.mean(np.isfinite(sizes["first"])))
    optimistic = float(np.mean(best["high"] >= needs))
    optimistic_first = float(np.mean(best["first"] >= needs))
    size_interval = (
        float(np.quantile(sizes["high"], tail, method="inverted_cdf")),  # inf stays inf
        float(np.quantile(sizes["low"], 1 - tail, method="inverted_cdf")),
    )
    first_low = float(np.quantile(sizes["first"], tail, method="inverted_cdf"))
    sure_size = short["low"].sure_prefix(tail)
    sure_first = short["first"].sure_prefix(tail)
    z = _z(level)

    def answer_for(chosen, gains) -> NoiseAnswer:
        chosen_size = 0
        if chosen is None:
            chosen_size = sure_size or int(ranking.size)
            chosen = ranking[:chosen_size]
            gains = (
                _band_at(first_path[:, chosen_size - 1], ratios[:, chosen_size - 1])
                if chosen_size
                else {key: np.zeros(replicates) for key in ("first", "low", "high")}
            )
        change = float(-np.sum(psi[chosen])) if chosen.size else 0.0
        if moments is not None and chosen.size:
            change = float(direction * _point_path(moments, direction, chosen)[-1])
        if chosen.size:  # to second order where the model holds
            ratio = _ratios(nonlinearity, chosen)[0, -1]
            change = change * ratio if np.isfinite(ratio) else change
        change_interval = _change_interval(gains, chosen, noise, direction, change, z, tail, blocks)
        answer = _answer(share, tail)
        if answer != "reached" and optimistic > tail:
            answer = "undetermined"  # some plausible truth lets a set within k_max reach it
        first_answer = _answer(share_first, tail)
        if first_answer != "reached" and optimistic_first > tail:
            first_answer = "undetermined"
        needed, bound, by = np.nan, 0, ""
        if answer == "undetermined":
            by = "Monte Carlo error" if first_answer == "undetermined" else "linearisation"
            if by == "Monte Carlo error":
                final = first_path[:, -1] if ranking.size else np.zeros(replicates)
                margin = abs(float(np.mean(final - needs)))
                needed = draws_to_decide(n_draws, margin, float(np.std(final - needs)), z)
        elif answer == "reached" and sure_size and not size_settled(sure_size, size_interval[0]):
            answer, bound = "undetermined", sure_size
            by = "linearisation"
            if not (sure_first and size_settled(sure_first, first_low)):
                by = "Monte Carlo error"
                point = (
                    np.cumsum(gain[ranking[:sure_size]])
                    if moments is None
                    else _point_path(moments, direction, ranking[:sure_size])
                )
                excess = first_path[:, :sure_size] - needs[:, None]
                needed = draws_to_settle_size(point - need, excess, 0.0, n_draws, level)
        return NoiseAnswer(
            answer,
            share,
            size_interval,
            change_interval,
            needed,
            sure_size,
            chosen_size,
            0,
            bound,
            change,
            by,
        )

    given = answer_for(chosen, chosen_gains)
    return (given, answer_for(None, None)) if ranking_too else given


def _column_positions(units: np.ndarray | None):
    """A function of unit ids returning their columns among the block sums of ``units``
    (sorted; None: every unit, its column its id); an id not there is refused."""
    if units is None:
        return lambda ids: ids
    units = np.asarray(units)

    def at(ids: np.ndarray) -> np.ndarray:
        where = np.searchsorted(units, ids)
        inside = where < units.size
        if not (inside.all() and np.array_equal(units[where], ids)):
            raise ValueError("units: the block sums lack some unit of the ranking or the set")
        return where

    return at


def first_order_factors(k: int) -> np.ndarray:
    """The band's factors (3, k) of the first order alone: the second-order prediction its
    equal, no widening, no near end (:func:`nonlinear_band`)."""
    return np.stack([np.ones(k), np.zeros(k), np.zeros(k)])


def _ratios(nonlinearity, units: np.ndarray) -> np.ndarray:
    """The band's factors after each prefix of ``units`` (3, k;
    :meth:`~bayesij.array.amip_curvature.Changes.factors`): ``(1, 0, 0)`` without a
    model."""
    if nonlinearity is None or not units.size:
        return first_order_factors(units.size)
    return np.asarray(nonlinearity(units), dtype=float)


#: How many of the ranking's first units are also evaluated dropped alone, and how many a
#: replicate re-ranks by its own gains (:func:`_reselected_reach`).
ALONE, RESELECTED = 16, 1024


def _alone(nonlinearity, units: np.ndarray) -> np.ndarray:
    """The band's factors (3, J) of each of ``units`` dropped alone
    (:meth:`~bayesij.array.amip_curvature.SetCurvature.each_alone`); the first order's
    ``(1, 0, 0)`` without a model."""
    each = getattr(nonlinearity, "each_alone", None)
    if each is None or not units.size:
        return first_order_factors(units.size)
    return np.asarray(each(units), dtype=float)


def _reselected_reach(
    first: np.ndarray, alone: np.ndarray, needs: np.ndarray, within: int
) -> np.ndarray:
    """Each replicate's smallest set (R,) of at most ``within`` units (inf: none) that
    reaches its need at the band's optimistic end when the ranking's first
    :data:`RESELECTED` units are taken in the order of that replicate's own gains, each of
    the first ``J`` counted by its own second-order change alone (``alone``, (3, J)
    factors, :func:`_alone`), the others by their first order.

    The ranking's prefixes miss two smaller sets: one the Monte Carlo error ranks
    otherwise (a replicate may put first a unit the estimate puts tenth), and a
    high-leverage unit whose removal moves the metric several times its first order (on
    a state-crime regression, N = 51, DC alone made a coefficient insignificant, the
    exact refit confirms, where the ranking's first unit, scaled by little, needed the
    four next to it). Units are added one by one, each as if alone: two whose effects
    mask each other are still not seen. ``first``: the first-order paths along the
    ranking (R, K)."""
    gains = np.diff(first[:, :RESELECTED], axis=1, prepend=0.0)
    j = min(alone.shape[1], gains.shape[1])
    if j:
        gains[:, :j] = nonlinear_band(gains[:, :j], alone[:, :j])[1]
    gains = -np.nan_to_num(gains, nan=0.0)  # negated: the largest gains first
    if within < gains.shape[1]:
        gains = np.partition(gains, within - 1, axis=1)[:, :within]
    ordered = -np.sort(gains, axis=1)
    with np.errstate(invalid="ignore", over="ignore"):  # +inf and -inf: the +inf counts
        paths = np.cumsum(ordered, axis=1)
    return _first_reaching(np.where(np.isnan(paths), np.inf, paths), needs)


def _first_reaching(paths: np.ndarray, needs: np.ndarray) -> np.ndarray:
    """Each replicate's smallest prefix (R,) whose gain reaches its need (inf: none)."""
    if not paths.shape[1]:
        return np.full(paths.shape[0], np.inf)
    reach = paths >= needs[:, None]
    return np.where(reach.any(axis=1), np.argmax(reach, axis=1) + 1.0, np.inf)


class _Short:
    """How many replicates fall short of their need after each of ``k`` prefixes, counted
    a chunk of replicates at a time; a prefix with a NaN gain is never sure (as
    ``np.quantile`` has it)."""

    def __init__(self, k: int):
        self.counts = np.zeros(k, dtype=np.int64)
        self.nan = np.zeros(k, dtype=bool)
        self.replicates = 0

    def add(self, paths: np.ndarray, needs: np.ndarray) -> None:
        """A chunk's gains after each prefix (rows, k) and its replicates' needs (rows,)."""
        excess = paths - needs[:, None]
        self.counts += np.count_nonzero(excess < 0, axis=0)
        self.nan |= np.isnan(excess).any(axis=0)
        self.replicates += paths.shape[0]

    def sure_prefix(self, tail: float) -> int:
        """The smallest prefix whose gain reaches the need in ``1 - tail`` of the
        replicates (0: none): the ``tail`` quantile (``inverted_cdf``, the ``m``-th
        smallest) of the excess over the need is at least 0, that is fewer than ``m``
        replicates fall short."""
        if not self.counts.size:
            return 0
        m = 1 + int(np.quantile(np.arange(self.replicates), tail, method="inverted_cdf"))
        sure = np.flatnonzero((self.counts < m) & ~self.nan)
        return int(sure[0] + 1) if sure.size else 0


def _band_at(first: np.ndarray, factors: np.ndarray) -> dict:
    """The replicates' gains after one prefix (R,), and the ends of the band around them
    (:func:`nonlinear_band` with that prefix's ``factors`` (2,))."""
    low, high = nonlinear_band(first, factors)
    return {"first": first, "low": low, "high": high}


def _change_interval(gains, chosen, noise, direction, change, z, tail, blocks) -> tuple:
    """The chosen set's change interval: the replicates' pessimistic and optimistic ends of
    the band (block bootstrap), or the first order ``+- z`` its independent errors' sd;
    it holds the point prediction ``change``."""
    if not chosen.size:
        return (0.0, 0.0)
    if blocks is not None:
        low = float(np.quantile(gains["low"], tail, method="inverted_cdf"))
        high = float(np.quantile(gains["high"], 1 - tail, method="inverted_cdf"))
    else:
        spread = float(np.sqrt(np.sum(noise[chosen] ** 2)))
        low = high = direction * change
        low, high = low - z * spread, high + z * spread
    ends = sorted([direction * low, direction * high])
    return (min(ends[0], change), max(ends[1], change))


def size_settled(sure_size: int, low: float) -> bool:
    """Whether a sure set of ``sure_size`` answers "how few": at most twice the size
    interval's low end ``low`` plus 2 (so at most twice the smallest set's size plus 2,
    unless that size is below the interval)."""
    return bool(sure_size <= 2 * low + 2)


def draws_to_settle_size(
    point: np.ndarray, paths: np.ndarray, need: float, n_draws: int, level: float = 0.95
) -> float:
    """Draws (in all) at which the sure set would settle the set's size
    (:func:`size_settled`), by the ``1 / sqrt(S)`` law: each replicate's deviation from the
    point estimate's cumulative gain shrinks by ``sqrt(S / S')`` and the sure size and the
    size interval's low end are found again on the shrunk replicates, along the same
    ranking (a rough figure: more draws also sharpen the ranking).

    Parameters
    ----------
    point : ndarray of shape (K,)
        The point estimate's cumulative gain along the ranking, up to the sure set.
    paths : ndarray of shape (R, K)
        Each replicate's cumulative gain along the same ranking.
    need : float
        The gain that reaches the target.
    n_draws : int
        Draws now.
    level : float, default 0.95

    Returns
    -------
    float
        ``S'``, at most ``10^6`` times ``n_draws`` (``inf`` beyond).
    """
    tail = (1 - level) / 2
    deviation = paths - point

    def settled(factor: float) -> bool:
        shrunk = point + deviation / np.sqrt(factor)
        reach = shrunk >= need
        sizes = np.where(reach.any(axis=1), np.argmax(reach, axis=1) + 1.0, np.inf)
        low = float(np.quantile(sizes, tail, method="inverted_cdf"))
        sure = np.flatnonzero(np.quantile(shrunk, tail, axis=0) >= need)
        return bool(sure.size) and size_settled(int(sure[0] + 1), low)

    factors = 1.25 ** np.arange(1, 63)  # up to 10^6
    if not settled(factors[-1]):
        return float("inf")
    lo, hi = -1, factors.size - 1  # settled(factors[hi]) holds; factors[lo] (1) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if settled(factors[mid]) else (mid, hi)
    return float(np.ceil(n_draws * factors[hi]))


def _replicate_chunks(replicates: int, n_units: int) -> list[slice]:
    """Slices of replicates whose (replicates, units) gains stay near 4 MiB (each chunk
    makes a few temporaries of that size, beside an audit's matrix: 16 MiB made the
    audit's peak 1.61 times a 50,000-unit matrix)."""
    size = max(1, CHUNK_BYTES // (128 * max(1, n_units)))
    return [slice(start, min(start + size, replicates)) for start in range(0, replicates, size)]


def _replicate_gains(gain, noise, direction, rng, blocks, counts):
    """A function of a slice of replicates returning their gains (rows, U) as a
    :class:`_Gains`: block-bootstrap replicates of ``psi`` when ``blocks`` are given (with
    the block ``counts`` of :func:`block_bootstrap_counts`), computed only where read, else
    independent normal errors of sd ``noise``, drawn chunk by chunk (called in order)."""
    if blocks is None:
        return lambda rows: _Gains(
            whole=gain + noise * rng.standard_normal((rows.stop - rows.start, gain.size))
        )
    block_sums, block_sizes, _ = blocks
    sums, taken = _finite_float(block_sums), {}
    return lambda rows: _Gains(counts[rows], sums, block_sizes, -direction, taken)


#: The most the block sums of a ranking or a set kept for all chunks of replicates may hold
#: (two are kept a question): 4 MB at N = 10^5, where taking them once per chunk cost 1.7 s;
#: at N = 10^6 (a ranking of 10^5 units) they are taken per chunk, as each chunk's
#: temporary, rather than 80 MB held beside a lazy audit's columns.
TAKEN_BYTES = CHUNK_BYTES // 4


class _Gains:
    """A chunk of replicates' gains (rows, U): given ``whole``, or the block bootstrap's
    ``sign * psi*`` (:func:`replicates_from_counts` of ``counts`` (rows, B), ``sums`` (B, U)
    and ``sizes``) computed where read — the columns of a ranking or a set (a product with
    their block sums alone), every unit's only when a replicate falls short and its best
    set is re-selected (in a search that reaches its target, none)."""

    def __init__(self, counts=None, sums=None, sizes=None, sign: int = 1, taken=None, whole=None):
        self._whole = whole
        self.counts, self.sums, self.sizes, self.sign = counts, sums, sizes, sign
        self._taken = {} if taken is None else taken

    def columns(self, units: np.ndarray) -> np.ndarray:
        """The gains of the columns ``units`` (rows, k); their block sums taken once for
        every chunk of replicates sharing ``taken`` (the ranking's and the set's: at N =
        10^5, 40 chunks a question each took them again, 1.7 s of an audit), where they
        hold at most :data:`TAKEN_BYTES` (else taken for each chunk, as a chunk's own
        temporary)."""
        if self._whole is not None:
            return self._whole[:, units]
        if 8 * self.sums.shape[0] * units.size > TAKEN_BYTES:
            return self.sign * replicates_from_counts(self.counts, self.sums[:, units], self.sizes)
        key = units.tobytes()
        if key not in self._taken:
            if len(self._taken) >= 2:
                del self._taken[next(iter(self._taken))]
            self._taken[key] = self.sums[:, units]
        return self.sign * replicates_from_counts(self.counts, self._taken[key], self.sizes)

    def whole(self) -> np.ndarray:
        """Every unit's gains (rows, U), computed once."""
        if self._whole is None:
            self._whole = self.sign * replicates_from_counts(self.counts, self.sums, self.sizes)
        return self._whole


def finite_copy(sums) -> np.ndarray:
    """A float64 copy of block sums (float32 or float64) with 0 where they are not finite
    (impossible units: no finite influence), made in place in the copy (one copy, not
    two); C-ordered whatever the layout of ``sums`` (a gather of columns is not), so that
    a reshape of it is a view, not a second copy (at N = 4 10^5 a ranking's moment block
    sums are 32 MiB as float64)."""
    out = np.array(sums, dtype=float, order="C")
    out[~np.isfinite(out)] = 0.0
    return out


def _finite_float(values) -> np.ndarray:
    """``values`` as float64 with NaN and infinities made finite (``np.nan_to_num``),
    copied only where it must be: block sums already float64 and finite (the usual case)
    are used as they are, not copied once more (50 x U values a copy)."""
    array = np.asarray(values, dtype=float)
    return array if np.isfinite(array).all() else np.nan_to_num(array)


def _point_path(moments: Moments, direction: int, units: np.ndarray) -> np.ndarray:
    """The gain after each prefix of ``units`` (k,), predicted from the moments."""
    d_mean = np.cumsum(-np.nan_to_num(moments.psi[0, units]))
    d_var = np.cumsum(-np.nan_to_num(moments.psi[1, units]))
    return direction * np.asarray(moments.change_from(d_mean, d_var), dtype=float)


def _moment_paths(moments: Moments | None, direction: int, blocks, counts, at=None):
    """None, or a function of a slice of replicates and units returning each replicate's
    gain after each prefix of the units (rows, k), predicted from block-bootstrap
    replicates of the moments' influences (the same block counts as the gains'; ``at``:
    the units' columns among the moments' block sums, :func:`_column_positions`)."""
    at = at or (lambda ids: ids)
    if moments is None:
        return None
    sizes = np.asarray(blocks[1], dtype=float)
    sums = moments.block_sums  # as the influences hold them: only what is taken is copied
    taken: dict = {}  # the ranking's and the set's block sums, once for every chunk

    def along(rows: slice, units: np.ndarray) -> np.ndarray:
        if not units.size:
            return np.zeros((rows.stop - rows.start, 0))
        key = units.tobytes()
        if key not in taken:
            if len(taken) >= 2:
                del taken[next(iter(taken))]
            taken[key] = finite_copy(sums[:, :, at(units)]).reshape(sums.shape[0], -1)
        rep = replicates_from_counts(counts[rows], taken[key], sizes).reshape(-1, 2, units.size)
        d_mean, d_var = np.cumsum(-rep[:, 0], axis=1), np.cumsum(-rep[:, 1], axis=1)
        return direction * np.asarray(moments.change_from(d_mean, d_var), dtype=float)

    return along


def _sum_of_largest(sample: np.ndarray, top: int) -> np.ndarray:
    """Per row, the sum of the positive values among its ``top`` largest.

    Only the columns that can add to one of them are partitioned: a row's ``top``-th
    largest is at least its smallest value over any ``top`` columns (those of the largest
    means), so a column below that bound or not positive in every row adds to none (at
    N = 10^4 a seventh of the whole partition's time)."""
    positive = np.maximum(sample, 0.0)
    if top < 1:
        return np.zeros(sample.shape[0])
    if top < sample.shape[1]:
        likely = np.argpartition(positive.mean(axis=0), positive.shape[1] - top)[-top:]
        bound = positive[:, likely].min(axis=1, keepdims=True)  # at most each row's top-th
        may = ((positive >= bound) & (positive > 0)).any(axis=0)
        if may.sum() < may.size // 2:
            positive = positive[:, may]
    if top >= positive.shape[1]:
        return positive.sum(axis=1)
    cut = positive.shape[1] - top
    return np.partition(positive, cut, axis=1)[:, cut:].sum(axis=1)


def block_bootstrap_counts(sizes, chains, replicates: int, rng) -> np.ndarray:
    """How often each block of draws is drawn in each replicate (replicates, B): each
    chain's blocks drawn with replacement, as many as it has."""
    sizes, chains = np.asarray(sizes), np.asarray(chains)
    members = [np.flatnonzero(chains == c) for c in np.unique(chains)]
    counts = np.zeros((replicates, sizes.size))
    for r in range(replicates):
        for rows in members:
            drawn = rng.choice(rows, size=rows.size, replace=True)
            counts[r] += np.bincount(drawn, minlength=sizes.size)
    return counts


def bootstrap_counts(sizes, chains, replicates: int = REPLICATES, seed: int = 0) -> np.ndarray:
    """:func:`block_bootstrap_counts` from a generator seeded with ``seed`` (read-only):
    the same for every question of an audit (its blocks are the draws'), drawn once; the
    counts :func:`linear_answer` uses (known before any unit is read)."""
    sizes, chains = np.asarray(sizes), np.asarray(chains)
    key = (sizes.tobytes(), str(sizes.dtype), chains.tobytes(), str(chains.dtype))
    return _counts_for(key, replicates, seed)


@functools.lru_cache(maxsize=8)
def _counts_for(key: tuple, replicates: int, seed: int) -> np.ndarray:
    sizes = np.frombuffer(key[0], dtype=key[1])
    chains = np.frombuffer(key[2], dtype=key[3])
    counts = block_bootstrap_counts(sizes, chains, replicates, np.random.default_rng(seed))
    counts.flags.writeable = False
    return counts


def block_bootstrap(block_sums, sizes, chains, replicates: int, rng) -> np.ndarray:
    """Replicates of ``psi`` (replicates, U) from a bootstrap over blocks of draws within
    chains: ``psi* = sum_b c_b T_b / sum_b c_b n_b`` for the block sums ``T`` (B, U), the
    blocks' sizes ``n`` (B,), their chains (B,) and the counts ``c`` of
    :func:`block_bootstrap_counts`."""
    counts = block_bootstrap_counts(sizes, chains, replicates, rng)
    return replicates_from_counts(counts, np.asarray(block_sums), sizes)


def replicates_from_counts(counts, block_sums, sizes) -> np.ndarray:
    """``psi* = sum_b c_b T_b / sum_b c_b n_b`` for each row of block counts ``c``
    (R, B), the block sums ``T`` (B, U) and the blocks' sizes ``n`` (B,): (R, U)."""
    return counts @ block_sums / (counts @ np.asarray(sizes, dtype=float))[:, None]


#: The ``z`` of a Monte Carlo error's 95 % interval: the draws needed for an estimate to be
#: that many errors from its target, and the band reported around one (the split-draw
#: check's, a matched removal's); "reached" itself passes ``MC_MARGIN`` errors
#: (:func:`bayesij.array.amip.passes`).
MC_Z = 1.96


def draws_to_decide(n_draws: int, margin: float, mcse: float, z: float = MC_Z) -> float:
    """Draws at which a Monte Carlo error that falls as ``1 / sqrt(S)`` is ``margin / z``:
    ``S (z mcse / margin)^2`` (inf for a zero margin)."""
    if margin <= 0:
        return float("inf")
    return float(np.ceil(n_draws * max(1.0, (z * mcse / margin) ** 2)))


def _answer(share: float, tail: float) -> str:
    if share >= 1 - tail:
        return "reached"
    if share <= tail:
        return "not reachable"
    return "undetermined"


def _z(level: float) -> float:
    from scipy.special import ndtri  # scipy.stats' norm.ppf

    return float(ndtri(0.5 + level / 2))
