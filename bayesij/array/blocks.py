"""Contiguous blocks of draws within chains, and the block cross-products built on them.

Influence scores, their Monte Carlo standard errors and the block bootstrap of the IJ
covariance all come from one pass over the draws: with ``F`` the centred quantities and
``L`` the centred log-likelihood, the cross-product of block ``b``,
``P_b = F[b].T @ L[b]``, gives

* the influence scores ``psi = sum_b P_b / S`` (the covariance over all draws);
* the batch means ``P_b / n_b``, whose spread is the Monte Carlo error of ``psi``;
* the scores of any resampling of whole blocks, ``sum_b c_b P_b / sum_b c_b n_b`` corrected
  for the resampled means, which is the non-overlapping block bootstrap.

Blocks never span two chains, so the spread of block means reflects autocorrelation within
chains and differences between chains.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["draw_blocks", "BlockMoments", "block_moments"]


def draw_blocks(chain_ids: np.ndarray, n_blocks: int) -> list[np.ndarray]:
    """Split the draws of each chain into contiguous blocks.

    Parameters
    ----------
    chain_ids : ndarray of shape (n_draws,)
        Integer chain code of each draw; the draws of a chain keep their order.
    n_blocks : int
        Wanted total number of blocks; each chain gets ``ceil(n_blocks / n_chains)`` blocks
        (fewer if it has fewer draws), of sizes that differ by at most one.

    Returns
    -------
    list of ndarray
        Draw indices of each block.
    """
    chains = np.unique(chain_ids)
    per_chain = max(1, -(-n_blocks // chains.size))
    blocks = []
    for chain in chains:
        rows = np.flatnonzero(chain_ids == chain)
        blocks.extend(np.array_split(rows, min(per_chain, rows.size)))
    return blocks


def _as_index(rows: np.ndarray) -> slice | np.ndarray:
    """A slice when the rows are contiguous (a view instead of a copy)."""
    if rows.size and rows[-1] - rows[0] == rows.size - 1:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


class BlockMoments(NamedTuple):
    """Cross-products of centred quantities and log-likelihood, per block of draws.

    Attributes
    ----------
    cross : ndarray of shape (n_blocks, n_quantities, n_obs)
        ``sum_{s in b} (f_s - f_bar)(l_s - l_bar)``.
    sum_f : ndarray of shape (n_blocks, n_quantities)
        ``sum_{s in b} (f_s - f_bar)``.
    sum_l : ndarray of shape (n_blocks, n_obs)
        ``sum_{s in b} (l_s - l_bar)``.
    sizes : ndarray of shape (n_blocks,)
        Number of draws in each block.
    """

    cross: np.ndarray
    sum_f: np.ndarray
    sum_l: np.ndarray
    sizes: np.ndarray

    @property
    def psi(self) -> np.ndarray:
        """Sample covariance over all draws (divisor ``S - 1``), shape (n_quantities, n_obs)."""
        return self.cross.sum(axis=0) / (self.sizes.sum() - 1)

    def block_errors(self) -> np.ndarray:
        """Deviations of the block estimates from ``psi``, shape (n_blocks, K, n_obs).

        Block ``b`` estimates the covariance by ``c P_b / n_b`` with ``c = S / (S - 1)``, so
        that ``psi = sum_b a_b c P_b / n_b`` with block weights ``a_b = n_b / S``.
        """
        total = self.sizes.sum()
        return self.cross * (total / (total - 1) / self.sizes)[:, None, None] - self.psi

    def error_weights(self) -> np.ndarray:
        """Batch-means weights ``B/(B-1) a_b^2``: ``Var(psi) ~ sum_b weight_b error_b^2``."""
        n = self.sizes.size
        return n / (n - 1) * (self.sizes / self.sizes.sum()) ** 2

    def psi_variance(self) -> np.ndarray:
        """Batch-means estimate of the Monte Carlo variance of ``psi``, shape (K, n_obs)."""
        return np.einsum("b,bkn->kn", self.error_weights(), self.block_errors() ** 2)


def block_moments(
    centred_f: np.ndarray, centred_l: np.ndarray, blocks: list[np.ndarray]
) -> BlockMoments:
    """Per-block cross-products of already centred quantities and log-likelihood.

    Parameters
    ----------
    centred_f : ndarray of shape (n_draws, n_quantities)
    centred_l : ndarray of shape (n_draws, n_obs)
        Both centred by their means over all draws.
    blocks : list of ndarray
        Draw indices of each block, from :func:`draw_blocks`.

    Returns
    -------
    BlockMoments
    """
    indices = [_as_index(rows) for rows in blocks]
    n_quantities, n_obs = centred_f.shape[1], centred_l.shape[1]
    cross = np.empty((len(blocks), n_quantities, n_obs))
    sum_l = np.empty((len(blocks), n_obs))
    for b, index in enumerate(indices):
        np.matmul(centred_f[index].T, centred_l[index], out=cross[b])
        sum_l[b] = centred_l[index].sum(axis=0)
    sum_f = np.stack([centred_f[index].sum(axis=0) for index in indices])
    sizes = np.array([rows.size for rows in blocks], dtype=float)
    return BlockMoments(cross, sum_f, sum_l, sizes)
