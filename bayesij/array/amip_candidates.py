"""The units a linear AMIP answer's block bootstrap can need, found while a lazy
log-likelihood is read, so that only their block sums are kept.

The block bootstrap of :func:`bayesij.array.amip_noise.linear_answer` follows each
replicate along the point estimate's ranking (the first ``k_max`` units of positive gain
``-direction psi``), and where a replicate falls short of the target it re-selects that
replicate's ``k_max`` largest positive gains. A unit can be among those only if its largest
gain over the replicates is at least the ``k_max``-th largest of the units' smallest gains
over the replicates: ``k_max`` units beat it in every replicate otherwise. The replicates'
block counts are fixed before any unit is read (:func:`bayesij.array.amip_noise.
bootstrap_counts`), so each unit's smallest and largest replicate gain is known when its
block is read, and both thresholds (the ranking's ``k_max``-th gain and that of the
smallest replicate gains) only rise as more units are seen: a unit below both thresholds
of the units seen so far is below them at the end. :class:`CandidateSums` keeps the block
sums of the units above either, and lets go of those that fall below as the thresholds
rise. The answers are those of the whole bootstrap, up to the order of floating-point
sums.

The split-draw check chooses its set along the ranking of the first half of the draws
(:func:`bayesij.array.amip.linear_paths`), at most ``k_max`` units, and the search's own
sets are prefixes of the ranking on all draws: :class:`RankingRows` keeps the influence rows
of each goal's first ``k_max`` units of each ranking so far.

References
----------
.. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric. arXiv:2011.14999.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.amip import metric_block_sums
from bayesij.array.influence import InfluenceScores

__all__ = ["CandidateSums", "RankingRows", "DenseRows", "PassKeeps", "offer_block"]

#: Relative slack of the replicate-gain threshold: the bootstrap computes the same gains
#: in other products, whose rounding may differ in the last digits.
SLACK = 1e-9


class _Kept:
    """Per goal, units and arrays along them (last axis), kept while ``wanted(k, keys)``
    says so of their keys; pruned as the owner's thresholds rise, whenever a quarter of
    ``k_max`` more units than at the last pruning are kept (so a goal holds at most that
    many more than it needs, and is pruned a few times per ``k_max`` units read)."""

    def __init__(self, n_goals: int, k_max: int, wanted, n_keys: int):
        self.k_max, self.wanted, self.n_keys = int(k_max), wanted, int(n_keys)
        self._parts: list[list] = [[] for _ in range(n_goals)]
        self._slack = max(1, self.k_max // 4)
        self._count = [0] * n_goals
        self._limit = [self.k_max + self._slack] * n_goals

    def add(self, k: int, units: np.ndarray, keys: tuple, arrays) -> None:
        """Keep those of ``units`` whose ``keys`` are wanted, with their ``arrays`` (a
        function of the kept positions returning them: only those are copied)."""
        keep = np.flatnonzero(self.wanted(k, *keys))
        if keep.size:
            self._parts[k].append((units[keep], *(key[keep] for key in keys), *arrays(keep)))
            self._count[k] += keep.size
        if self._count[k] > self._limit[k]:  # pruned again once k_max / 4 more are kept
            self.prune(k)
            self._limit[k] = max(self.k_max, self._count[k]) + self._slack

    def prune(self, k: int) -> None:
        """Let go of goal ``k``'s units that the risen thresholds leave out."""
        parts, self._parts[k] = self._parts[k], []
        if not parts:
            return
        joined = [np.concatenate([p[j] for p in parts], axis=-1) for j in range(len(parts[0]))]
        del parts  # let go before the kept copy: never the parts, joined and kept at once
        keep = np.flatnonzero(self.wanted(k, *joined[1 : 1 + self.n_keys]))
        self._parts[k] = [tuple(joined.pop(0)[..., keep] for _ in range(len(joined)))]
        self._count[k] = keep.size

    def take(self, k: int, keys: bool = False) -> tuple | None:
        """Goal ``k``'s kept units (sorted), their keys (with ``keys``) and arrays, let go
        of here; None if none."""
        self.prune(k)
        parts, self._parts[k] = self._parts[k], []
        if not parts:
            return None
        units, arrays = parts[0][0], parts[0][1 + self.n_keys :]
        found = parts[0][1 : 1 + self.n_keys] if keys else ()
        return (units, *found, *(np.ascontiguousarray(a) for a in arrays))


class CandidateSums:
    """Block sums of the units each goal's block bootstrap can need, from the blocks of
    a pass.

    Parameters
    ----------
    goals : list of Goal
        The AMIP goals, in the order of the influence rows (:attr:`~bayesij.array.amip.
        Goal.parts` rows each; row 0 the metric's).
    k_max : int
        The largest set.
    counts : ndarray of shape (R, B)
        The block bootstrap's counts of each block of draws in each replicate.
    sizes : ndarray of shape (B,)
        The blocks' sizes.

    Notes
    -----
    Memory: the block sums of the units above the thresholds (for each goal, at least
    the ``k_max`` first of its ranking), plus two ``k_max`` arrays per goal; the units of
    the first blocks are all kept until ``k_max`` units have been seen.
    """

    def __init__(self, goals: list, k_max: int, counts: np.ndarray, sizes: np.ndarray):
        self.goals = list(goals)
        self.directions = [int(g.direction) for g in goals]
        self.rows = _goal_rows(goals)
        self.block_rows = _goal_rows(goals, "block_parts")
        self.k_max = int(k_max)
        counts = np.asarray(counts, dtype=float)
        self.weights = counts / (counts @ np.asarray(sizes, dtype=float))[:, None]  # (R, B)
        self._best_gain = [np.zeros(0) for _ in goals]  # k_max largest so far
        self._best_low = [np.zeros(0) for _ in goals]
        self._kept = _Kept(len(goals), k_max, self._wanted, n_keys=2)
        self._next = 0  # the first unit of the next block

    def offer(self, start: int, scores) -> None:
        """Keep the block sums of the units ``start .. start + b`` of a block's influence
        ``scores`` (:class:`~bayesij.array.influence.InfluenceScores` of all the goals'
        rows, with block sums) that are above some goal's thresholds so far; blocks come in
        the order of their units."""
        block_sums = scores.block_sums
        if start < self._next:
            raise ValueError(
                f"start: found {start}, expected at least {self._next} (blocks in order)"
            )
        self._next = start + block_sums.shape[2]
        units = start + np.arange(block_sums.shape[2])
        for k, (goal, rows) in enumerate(zip(self.goals, self.block_rows, strict=True)):
            direction = self.directions[k]
            gain = -direction * np.nan_to_num(scores.psi[self.rows[k].start], nan=0.0)
            metric = metric_block_sums(block_sums[:, rows], goal)
            replicates = -direction * (self.weights @ metric)  # (R, b)
            low, high = replicates.min(axis=0), replicates.max(axis=0)
            self._best_gain[k] = _largest(self._best_gain[k], gain[gain > 0], self.k_max)
            self._best_low[k] = _largest(self._best_low[k], low, self.k_max)
            self._kept.add(
                k, units, (gain, high), lambda keep, rows=rows: (block_sums[:, rows][:, :, keep],)
            )

    def _wanted(self, k: int, gain: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Whether units of ``gain`` (ranking) and largest replicate gain ``high`` are above
        goal ``k``'s thresholds so far."""
        ranked = (gain > 0) & (gain >= _kth(self._best_gain[k], self.k_max))
        threshold = _kth(self._best_low[k], self.k_max)
        slack = SLACK * (np.abs(high) + (abs(threshold) if np.isfinite(threshold) else 0.0))
        reaching = (high > 0) & (high >= threshold - slack)
        return ranked | reaching

    def result(self) -> tuple[tuple, tuple]:
        """Each goal's kept units (sorted, (C,)) and their block sums (B, parts, C): two
        tuples in the order of the goals (the kept units let go of here)."""
        units_out, sums_out = [], []
        for k, rows in enumerate(self.block_rows):
            kept = self._kept.take(k, keys=True)
            if kept is None:
                n_rows = rows.stop - rows.start
                units, sums = np.zeros(0, dtype=int), np.zeros((self.weights.shape[1], n_rows, 0))
            else:
                units, gain, _, sums = kept
                needed = self._needed(k, gain, sums)
                units, sums = units[needed], np.ascontiguousarray(sums[:, :, needed])
            units_out.append(units)
            sums_out.append(sums)
        return tuple(units_out), tuple(sums_out)

    def _needed(self, k: int, gain: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """Of goal ``k``'s kept units (point ``gain``, block ``sums``), those of its
        ranking's first ``k_max`` and those among some replicate's ``k_max`` largest
        positive gains: once every unit that can be there is kept, each replicate's
        ``k_max``-th largest gain is that of the kept units, and the rest are let go."""
        ranked = (gain > 0) & (gain >= _kth(self._best_gain[k], self.k_max))
        metric = metric_block_sums(sums, self.goals[k])
        needed = ranked.copy()
        step = max(1, (1 << 25) // (8 * max(1, gain.size)))  # replicates a chunk: 32 MiB
        for start in range(0, self.weights.shape[0], step):
            replicates = -self.directions[k] * (self.weights[start : start + step] @ metric)
            if gain.size > self.k_max:
                cut = gain.size - self.k_max
                kth = np.partition(replicates, cut, axis=1)[:, cut : cut + 1]
                slack = SLACK * (np.abs(replicates) + np.abs(kth))
                needed |= np.any((replicates > 0) & (replicates >= kth - slack), axis=0)
            else:
                needed |= np.any(replicates > 0, axis=0)
        return np.flatnonzero(needed)


class RankingRows:
    """The influence rows of each goal's first ``k_max`` units of its ranking, from the
    blocks of a pass: on all draws, what the linear search ranks and predicts along (its
    sets are prefixes of the ranking); on the first half of the draws, what the split-draw
    check chooses from.

    Parameters
    ----------
    goals : list of Goal
    k_max : int
    """

    def __init__(self, goals: list, k_max: int):
        self.directions = [int(g.direction) for g in goals]
        self.rows = _goal_rows(goals)
        self.k_max = int(k_max)
        self._best = [np.zeros(0) for _ in goals]
        self._kept = _Kept(len(goals), k_max, self._wanted, n_keys=1)

    def offer(self, start: int, scores) -> None:
        """Keep the rows (``psi`` and ``mcse``) of the units ``start .. start + b`` of a
        block's influence ``scores`` that are among some goal's first ``k_max`` so far."""
        units = start + np.arange(scores.psi.shape[1])
        for k, (rows, direction) in enumerate(zip(self.rows, self.directions, strict=True)):
            gain = -direction * scores.psi[rows.start]  # NaN: never chosen
            self._best[k] = _largest(self._best[k], gain[gain > 0], self.k_max)
            self._kept.add(
                k,
                units,
                (gain,),
                lambda keep, rows=rows: (scores.psi[rows][:, keep], scores.mcse[rows][:, keep]),
            )

    def _wanted(self, k: int, gain: np.ndarray) -> np.ndarray:
        return (gain > 0) & (gain >= _kth(self._best[k], self.k_max))

    def result(self) -> list:
        """Each goal's kept units (sorted, (C,)) and their ``psi`` and ``mcse`` rows (parts,
        C), in the order of the goals."""
        out = []
        for k, rows in enumerate(self.rows):
            kept = self._kept.take(k)
            if kept is None:
                empty = np.zeros((rows.stop - rows.start, 0))
                kept = (np.zeros(0, dtype=int), empty, empty)
            out.append(kept)
        return out


class DenseRows:
    """Each goal's influence rows on all draws (:class:`~bayesij.array.influence.
    InfluenceScores`, ``psi`` and ``mcse`` (parts, N), 0 outside the units kept) made when
    asked for, one goal at a time, with the goal's kept block sums: what
    :func:`~bayesij.array.amip.goal_rows` gives of every unit's rows, for the searches
    (which read only the ranking's first ``k_max``; a unit of gain 0 is never ranked).

    Parameters
    ----------
    ranked : list of (units, psi, mcse)
        :meth:`RankingRows.result`.
    block_units, block_sums : tuple
        :meth:`CandidateSums.result`.
    n_units : int
    """

    def __init__(self, ranked: list, block_units: tuple, block_sums: tuple, n_units: int):
        self.ranked, self.block_units, self.block_sums = ranked, block_units, block_sums
        self.n_units = int(n_units)

    def __len__(self) -> int:
        return len(self.ranked)

    def __getitem__(self, k: int) -> InfluenceScores:
        units, psi, mcse = self.ranked[k]
        dense = np.zeros((2, psi.shape[0], self.n_units))
        dense[0][:, units], dense[1][:, units] = psi, mcse
        return InfluenceScores(dense[0], dense[1], self.block_sums[k], self.block_units[k])


class PassKeeps(NamedTuple):
    """What a pass over a lazy source keeps of the goals' per-unit influences for the
    linear searches, in place of every unit's: each ranking's first ``k_max`` units' rows
    on all draws and on the first half (:class:`RankingRows`), and the block sums of the
    units some replicate of the block bootstrap can need (:class:`CandidateSums`)."""

    sums: CandidateSums
    ranked: RankingRows
    halves: RankingRows

    def offer(self, start: int, influence: dict) -> None:
        """Offer a block's :func:`~bayesij.array.amip.goal_influence` (units from
        ``start``), and drop it: what is kept is kept only here."""
        self.sums.offer(start, influence["all"])
        self.ranked.offer(start, influence["all"])
        self.halves.offer(start, influence["half"])
        influence["all"], influence["half"] = None, None

    def into(self, n_units: int) -> dict:
        """The goals' influences as the searches read them (the kept let go of here):
        ``"all"``, :class:`DenseRows`; ``"half"``, :meth:`RankingRows.result`."""
        units, sums = self.sums.result()
        ranked = DenseRows(self.ranked.result(), units, sums, n_units)
        return {"all": ranked, "half": self.halves.result()}


def offer_block(kept, keeps: PassKeeps | None, block, start, influence) -> None:
    """What a pass keeps of a block of a lazy source (``map_blocks``' ``keep``): its sets'
    columns (``kept``, :class:`~bayesij.array.amip_columns.KeptColumns`) and the linear
    answers' influences (``keeps``), from its :func:`~bayesij.array.amip.goal_influence`
    (from which ``keeps`` takes what it keeps)."""
    if kept is not None:
        kept.offer(block, start, influence)
    if keeps is not None:
        keeps.offer(start, influence)


def _goal_rows(goals: list, parts: str = "parts") -> list[slice]:
    """Each goal's influence rows (:attr:`~bayesij.array.amip.Goal.parts` of them), or its
    rows of block sums (``parts="block_parts"``)."""
    counts = [getattr(g, parts) for g in goals]
    stops = np.cumsum(counts).tolist()
    return [slice(stop - n, stop) for n, stop in zip(counts, stops, strict=True)]


def _largest(best: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest of ``best`` and ``values`` (unordered)."""
    both = np.concatenate([best, values])
    if both.size <= k:
        return both
    return np.partition(both, both.size - k)[both.size - k :]


def _kth(best: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``best`` (its smallest when it holds ``k``); ``-inf`` while
    fewer than ``k`` values were seen."""
    return float(best.min()) if best.size >= k else -np.inf
