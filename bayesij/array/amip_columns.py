"""The log-likelihood columns a linear AMIP search will sum, kept while a lazy
log-likelihood is read, so that its sets need no second read of the blocks holding them.

The linear method ranks the units of each goal by their metric's influence on all draws
(its set is a prefix of that ranking) and on the first half of the draws (the split-draw
check's set): both rankings are known unit by unit during the influence pass, so the
columns of the first ``capacity`` units of each ranking so far can be kept as the blocks go
by. When every unit of a set is kept, its summed log-likelihood comes from them; otherwise
the blocks holding the missing units are read again (:class:`KeptColumns` is a cache, never
the only way to an answer).

References
----------
.. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric. arXiv:2011.14999.
"""

from __future__ import annotations

import numpy as np

from bayesij.array.numeric import CHUNK_BYTES

__all__ = ["KeptColumns", "kept_capacity"]


#: What the kept columns of all goals' rankings hold together, at most: at N = 10^6 the
#: sets outgrew any such budget and were read again anyway, while a block's worth (305 MiB
#: there) was a tenth of the lazy audit's peak.
KEPT_BYTES = 2 * CHUNK_BYTES


def kept_capacity(n_goals: int, n_draws: int) -> int:
    """Units kept per ranking: the kept columns of all goals' two rankings together hold
    at most :data:`KEPT_BYTES`, ``KEPT_BYTES / (2 x goals x draws x 8 bytes)``, at least
    16."""
    return max(16, KEPT_BYTES // (2 * 8 * n_draws * max(1, n_goals)))


class KeptColumns:
    """Columns of the units each linear ranking puts first so far, from the blocks of a pass.

    Parameters
    ----------
    goals : list of Goal
        The AMIP goals, in the order of the influence rows (:func:`goal_rows`).
    capacity : int
        Units kept per ranking (:func:`kept_capacity`).

    Notes
    -----
    A ranking's key is the unit's gain ``-direction * psi`` of the goal's metric (row 0 of
    its influence rows) on all draws and on the first half (``"half"``), as
    :func:`bayesij.array.amip.linear_path` orders them; units of non-positive gain are never
    in a set. Memory: at most ``2 * capacity`` columns per goal, each (n_chains, n_draws).
    """

    def __init__(self, goals: list, capacity: int):
        self.directions = [int(g.direction) for g in goals]
        self.rows = np.concatenate([[0], np.cumsum([g.parts for g in goals])[:-1]]).astype(int)
        self.capacity = int(capacity)
        self.best: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        self.columns: dict[int, np.ndarray] = {}
        #: Fits made from each block as it goes by (a
        #: :class:`~bayesij.array.amip_normal.RegressionFeed`, or None): the regressions
        #: recovered from the draws, which then read no block again.
        self.feed = None

    def offer(self, log_lik: np.ndarray, start: int, influence: dict) -> None:
        """Keep the columns of ``log_lik`` (n_chains, n_draws, b), units ``start ..
        start + b``, that enter some ranking's first ``capacity``; ``influence``:
        :func:`bayesij.array.amip.goal_influence` of the same block."""
        for name, scores in influence.items():
            for k, (row, direction) in enumerate(zip(self.rows, self.directions, strict=True)):
                self._merge((name, k), -direction * scores.psi[row], start)
        wanted = set()
        for _, units in self.best.values():
            wanted.update(units.tolist())
        for unit in [u for u in self.columns if u not in wanted]:
            del self.columns[unit]
        stop = start + log_lik.shape[2]
        for unit in wanted:
            if start <= unit < stop and unit not in self.columns:
                self.columns[unit] = np.array(log_lik[:, :, unit - start])
        if self.feed is not None:
            self.feed.offer(log_lik)

    def _merge(self, ranking: tuple[str, int], gain: np.ndarray, start: int) -> None:
        keys, units = self.best.get(ranking, (np.zeros(0), np.zeros(0, dtype=int)))
        positive = np.flatnonzero(gain > 0)  # NaN is not positive
        keys = np.concatenate([keys, gain[positive]])
        units = np.concatenate([units, start + positive])
        if keys.size > self.capacity:
            first = np.argpartition(-keys, self.capacity - 1)[: self.capacity]
            keys, units = keys[first], units[first]
        self.best[ranking] = (keys, units)

    def holds(self, units: np.ndarray) -> bool:
        """Whether every unit of ``units`` is kept."""
        return all(int(u) in self.columns for u in units)

    def draw_rows(self, rows: np.ndarray):
        """The draws ``rows`` (K,) of the kept columns, as one piece (K, C), for a reader of
        pieces (:func:`bayesij.array.amip_hierarchy.effects_explain`): a few hundred draws,
        not a copy of every kept column (up to :data:`KEPT_BYTES`)."""
        yield np.column_stack([np.reshape(c, -1)[rows] for c in self.columns.values()])

    def block(self, start: int, stop: int) -> _KeptBlock:
        """Units ``start .. stop`` as a block :func:`bayesij.array.amip.set_sums` can read
        (only the kept columns can be taken from it)."""
        return _KeptBlock(self.columns, start, stop)


class _KeptBlock:
    """Kept columns seen as a (n_chains, n_draws, stop - start) block: ``block[:, :, idx]``
    stacks the columns of units ``start + idx`` laid out as the block's own fancy indexing
    lays them out (each column contiguous), so that their sums are the same to the bit."""

    def __init__(self, columns: dict, start: int, stop: int):
        self.columns, self.start = columns, start
        first = next(iter(columns.values()))
        self.shape = (*first.shape, stop - start)

    def __getitem__(self, key) -> np.ndarray:
        positions = np.asarray(key[2])
        if positions.size == 0:
            return np.empty((*self.shape[:2], 0))
        stacked = np.stack([self.columns[self.start + int(p)] for p in positions])
        return np.moveaxis(stacked, 0, 2)
