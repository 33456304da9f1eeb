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

import functools
from typing import NamedTuple

import numpy as np

__all__ = ["draw_blocks", "BlockMoments", "block_moments", "error_weights"]


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
    ids = np.ascontiguousarray(chain_ids)
    return list(_blocks_of(ids.tobytes(), ids.dtype.str, ids.shape, int(n_blocks)))


@functools.lru_cache(maxsize=16)
def _blocks_of(key: bytes, dtype: str, shape: tuple, n_blocks: int) -> tuple:
    """:func:`draw_blocks` of the chain codes held in ``key``, read-only, kept: an audit
    asks for the same layout a hundred times."""
    chain_ids = np.frombuffer(key, dtype=dtype).reshape(shape)
    chains = np.unique(chain_ids)
    per_chain = max(1, -(-n_blocks // chains.size))
    blocks = []
    for chain in chains:
        rows = np.flatnonzero(chain_ids == chain)
        blocks.extend(np.array_split(rows, min(per_chain, rows.size)))
    for rows in blocks:
        rows.flags.writeable = False
    return tuple(blocks)


def _as_index(rows: np.ndarray) -> slice | np.ndarray:
    """A slice when the rows are contiguous (a view instead of a copy)."""
    if rows.size and rows[-1] - rows[0] == rows.size - 1:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def error_weights(sizes: np.ndarray) -> np.ndarray:
    """Batch-means weights ``B/(B-1) a_b^2`` of blocks of ``sizes`` draws, ``a_b = n_b / S``:
    ``Var(psi) ~ sum_b weight_b error_b^2``."""
    n = sizes.size
    return n / (n - 1) * (sizes / sizes.sum()) ** 2


class BlockMoments(NamedTuple):
    """Cross-products of centred quantities and log-likelihood, per block of draws.

    Attributes
    ----------
    products : ndarray of shape (n_blocks, n_quantities + 1, n_obs)
        ``sum_{s in b} (f_s - f_bar)(l_s - l_bar)`` (``cross``) with
        ``sum_{s in b} (l_s - l_bar)`` (``sum_l``) as the last row.
    sum_f : ndarray of shape (n_blocks, n_quantities)
        ``sum_{s in b} (f_s - f_bar)``.
    sizes : ndarray of shape (n_blocks,)
        Number of draws in each block.
    """

    products: np.ndarray
    sum_f: np.ndarray
    sizes: np.ndarray

    @property
    def cross(self) -> np.ndarray:
        """Cross-products, shape (n_blocks, n_quantities, n_obs)."""
        return self.products[:, :-1]

    @property
    def sum_l(self) -> np.ndarray:
        """Block sums of the centred log-likelihood, shape (n_blocks, n_obs)."""
        return self.products[:, -1]

    @property
    def psi(self) -> np.ndarray:
        """Sample covariance over all draws (divisor ``S - 1``), shape (n_quantities, n_obs)."""
        return self.cross.sum(axis=0) / (self.sizes.sum() - 1)

    def block_errors(self, psi: np.ndarray | None = None) -> np.ndarray:
        """Deviations of the block estimates from ``psi``, shape (n_blocks, K, n_obs)
        (``psi``: :attr:`psi` when already at hand).

        Block ``b`` estimates the covariance by ``c P_b / n_b`` with ``c = S / (S - 1)``, so
        that ``psi = sum_b a_b c P_b / n_b`` with block weights ``a_b = n_b / S``.
        """
        total = self.sizes.sum()
        psi = self.psi if psi is None else psi
        return self.cross * (total / (total - 1) / self.sizes)[:, None, None] - psi

    def error_weights(self) -> np.ndarray:
        """Batch-means weights of the blocks (:func:`error_weights`)."""
        return error_weights(self.sizes)

    def psi_variance(self, errors: np.ndarray | None = None) -> np.ndarray:
        """Batch-means estimate of the Monte Carlo variance of ``psi``, shape (K, n_obs);
        ``errors``: :meth:`block_errors` when already at hand."""
        errors = self.block_errors() if errors is None else errors
        return np.einsum("b,bkn->kn", self.error_weights(), errors**2)


def block_moments(
    centred_f: np.ndarray, log_lik: np.ndarray, blocks: list[np.ndarray]
) -> tuple[BlockMoments, np.ndarray]:
    """Per-block cross-products of centred quantities and centred log-likelihood, in one
    pass over the log-likelihood and without writing a centred copy of it.

    Each block is shifted by the first draw's values in a small buffer that stays in cache
    and multiplied by ``[f_c, 1]``, which gives its cross-products and sums; the shift by the
    mean is then applied to those (``sum_f`` and the sizes): the shifted values are of the
    size of their spread, so nothing is lost to cancellation.

    Parameters
    ----------
    centred_f : ndarray of shape (n_draws, n_quantities)
        Centred by its mean over all draws.
    log_lik : ndarray of shape (n_draws, n_obs)
        As it is (finite or -inf).
    blocks : list of ndarray
        Draw indices of each block, from :func:`draw_blocks`.

    Returns
    -------
    BlockMoments
        NaN in the columns that are -inf at some draw.
    ndarray of shape (n_obs,)
        Those columns (impossible observations).
    """
    indices = [_as_index(rows) for rows in blocks]
    k, n_obs = centred_f.shape[1], log_lik.shape[1]
    with_ones = np.column_stack([centred_f, np.ones(len(centred_f))])
    raw = np.empty((len(blocks), k + 1, n_obs))
    buffer = np.empty(max(rows.size for rows in blocks) * n_obs)
    reference = np.asarray(log_lik[0], dtype=float)
    with np.errstate(invalid="ignore"):  # -inf columns: NaN
        for b, index in enumerate(indices):
            block = log_lik[index]
            shifted = np.subtract(block, reference, out=buffer[: block.size].reshape(block.shape))
            np.matmul(with_ones[index].T, shifted, out=raw[b])
        sizes = np.array([rows.size for rows in blocks], dtype=float)
        offset = raw[:, k].sum(axis=0) / sizes.sum()  # mean - reference
        sum_f = np.stack([centred_f[index].sum(axis=0) for index in indices])
        raw[:, :k] -= sum_f[:, :, None] * offset
        raw[:, k] -= sizes[:, None] * offset
    return BlockMoments(raw, sum_f, sizes), ~np.isfinite(offset)
