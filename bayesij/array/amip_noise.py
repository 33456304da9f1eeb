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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array._numeric import CHUNK_BYTES, top_positive

__all__ = [
    "NoiseAnswer",
    "linear_answer",
    "answer_from_z",
    "draws_to_decide",
    "block_bootstrap",
    "block_bootstrap_counts",
    "replicates_from_counts",
    "ANSWERS",
]

ANSWERS = ("reached", "not reachable", "undetermined")


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
    """

    answer: str
    share_reached: float
    size_interval: tuple
    change_interval: tuple
    draws_needed: float
    sure_size: int = 0
    chosen_size: int = 0
    smaller: int = 0


def linear_answer(
    psi: np.ndarray,
    mcse: np.ndarray,
    direction: int,
    need: float,
    k_max: int,
    chosen: np.ndarray | None,
    n_draws: int,
    *,
    replicates: int = 200,
    level: float = 0.95,
    seed: int = 0,
    blocks: tuple | None = None,
) -> NoiseAnswer:
    """The answer of the linear search from ``psi`` (U,) and its ``mcse`` (U,).

    ``chosen`` are the units of the set whose predicted change's interval is reported;
    None: the prefix of the ranking the answer reports (``chosen_size``), from the same
    replicates. ``n_draws`` scales the draws needed. ``blocks``: ``(block_sums (B, U),
    sizes (B,), chains (B,))`` for the block bootstrap (:func:`block_bootstrap`).
    """
    rng = np.random.default_rng(seed)
    noise = np.nan_to_num(mcse, nan=0.0)
    gain = -direction * np.nan_to_num(psi, nan=0.0)
    top = min(k_max, gain.size)
    ranking = top_positive(gain, top)  # the point estimate's order
    sizes = np.empty(replicates)  # the smallest reaching prefix of that order
    best = np.empty(replicates)  # the most any set within k_max could do (re-selected)
    # (or, where the ranking already reaches the target, that lower bound of it)
    final = np.empty(replicates)  # what the whole ranking within k_max does
    chosen_changes = np.empty(replicates)  # the chosen set's change
    paths = np.empty((replicates, ranking.size))  # each replicate's gain along the ranking
    draw = _replicate_gains(gain, noise, direction, replicates, rng, blocks)
    for rows in _replicate_chunks(replicates, gain.size):
        sample = draw(rows)  # (len(rows), U)
        cumulative = np.cumsum(sample[:, ranking], axis=1)
        paths[rows] = cumulative
        final[rows] = cumulative[:, -1] if ranking.size else 0.0
        if chosen is not None:
            chosen_changes[rows] = sample[:, chosen].sum(axis=1)
        reach = cumulative >= need
        first = np.argmax(reach, axis=1) + 1.0 if ranking.size else np.zeros(len(sample))
        sizes[rows] = np.where(reach.any(axis=1), first, np.inf)
        # Only whether the best set reaches the target matters: the ranking's own sum is a
        # lower bound of it that often settles that without a partition.
        short = final[rows] < need
        best[rows] = final[rows]
        if short.any():
            best[np.arange(rows.start, rows.stop)[short]] = _sum_of_largest(sample[short], top)
    optimistic = float(np.mean(best >= need))
    share = float(np.mean(np.isfinite(sizes)))
    tail = (1 - level) / 2
    bounds = np.quantile(sizes, [tail, 1 - tail], method="inverted_cdf")  # inf stays inf
    size_interval = tuple(float(q) for q in bounds)
    z = _z(level)
    sure_size = 0
    if ranking.size:
        sure = np.flatnonzero(np.quantile(paths, tail, axis=0) >= need)
        sure_size = int(sure[0] + 1) if sure.size else 0
    chosen_size = 0
    if chosen is None:
        chosen_size = sure_size or int(ranking.size)
        chosen = ranking[:chosen_size]
        chosen_changes = paths[:, chosen_size - 1] if chosen_size else np.zeros(replicates)
    change = float(-np.sum(psi[chosen])) if chosen.size else 0.0
    if blocks is not None:
        spread = float(np.std(chosen_changes)) if chosen.size else 0.0
    else:
        spread = float(np.sqrt(np.sum(noise[chosen] ** 2))) if chosen.size else 0.0
    change_interval = (change - z * spread, change + z * spread)
    answer = _answer(share, tail)
    if answer != "reached" and optimistic > tail:
        answer = "undetermined"  # some plausible truth lets a set within k_max reach it
    needed = np.nan
    if answer == "undetermined":
        margin = abs(float(np.mean(final)) - need)
        needed = draws_to_decide(n_draws, margin, float(np.std(final)), z)
    return NoiseAnswer(
        answer, share, size_interval, change_interval, needed, sure_size, chosen_size
    )


def _replicate_chunks(replicates: int, n_units: int) -> list[slice]:
    """Slices of replicates whose (replicates, units) gains stay near 16 MiB (each chunk
    makes a few temporaries of that size)."""
    size = max(1, CHUNK_BYTES // (32 * max(1, n_units)))
    return [slice(start, min(start + size, replicates)) for start in range(0, replicates, size)]


def _replicate_gains(gain, noise, direction, replicates, rng, blocks):
    """A function of a slice of replicates returning their gains (rows, U): block-bootstrap
    replicates of ``psi`` when ``blocks`` are given, else independent normal errors of sd
    ``noise``. The random numbers come in the order one replicate at a time would draw
    them: the block counts all at once, the normal errors chunk by chunk (called in
    order)."""
    if blocks is None:
        return lambda rows: gain + noise * rng.standard_normal((rows.stop - rows.start, gain.size))
    block_sums, block_sizes, block_chains = blocks
    counts = block_bootstrap_counts(block_sizes, block_chains, replicates, rng)
    sums = np.nan_to_num(np.asarray(block_sums, dtype=float))
    return lambda rows: -direction * replicates_from_counts(counts[rows], sums, block_sizes)


def _sum_of_largest(sample: np.ndarray, top: int) -> np.ndarray:
    """Per row, the sum of the positive values among its ``top`` largest."""
    positive = np.maximum(sample, 0.0)
    if top >= sample.shape[1]:
        return positive.sum(axis=1)
    cut = sample.shape[1] - top
    return np.partition(positive, cut, axis=1)[:, cut:].sum(axis=1)


def block_bootstrap_counts(sizes, chains, replicates: int, rng) -> np.ndarray:
    """How often each block of draws is drawn in each replicate (replicates, B): each
    chain's blocks drawn with replacement, as many as it has."""
    sizes, chains = np.asarray(sizes), np.asarray(chains)
    members = [np.flatnonzero(chains == c) for c in np.unique(chains)]
    counts = np.zeros((replicates, sizes.size))
    for r in range(replicates):
        for rows in members:
            np.add.at(counts[r], rng.choice(rows, size=rows.size, replace=True), 1.0)
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


def answer_from_z(
    change: float, mcse: float, direction: int, need: float, at_limit: bool, n_draws: int
) -> tuple[str, float]:
    """Answer of a search whose final predicted change has a normal Monte Carlo error:
    reached when the change passes the target by 1.96 ``mcse``, not reachable when the
    search ran to ``k_max`` (``at_limit``) and falls short by 1.96 ``mcse``, else
    undetermined; and the draws that would decide it."""
    margin = direction * change - need
    z = _z(0.95)
    if margin >= z * mcse:
        return "reached", np.nan
    if at_limit and margin <= -z * mcse:
        return "not reachable", np.nan
    if not at_limit and margin < 0:
        return "not reachable", np.nan  # no unit moves the metric further that way
    return "undetermined", draws_to_decide(n_draws, abs(margin), mcse, z)


def draws_to_decide(n_draws: int, margin: float, mcse: float, z: float = 1.96) -> float:
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
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))
