"""Infinitesimal-jackknife (IJ) bootstrap covariance of posterior means, from one set of draws."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.blocks import (
    BlockMoments,
    block_moments,
    draw_blocks,
    error_weights,
)
from bayesij.array.checks import check_positive_int, check_replicates, check_seed, fail
from bayesij.array.influence import InfluenceScores, prepare_draws
from bayesij.array.numeric import map_ordered, obs_chunks, read_columns

__all__ = ["IJArrays", "IJSetup", "IJPart", "ij_covariance", "ij_setup", "ij_part", "ij_join"]


class IJArrays(NamedTuple):
    """IJ covariance of the posterior means of ``n_quantities`` quantities.

    Attributes
    ----------
    covariance : ndarray of shape (n_quantities, n_quantities)
        Raw IJ covariance ``sum_n (psi_n - psi_bar)(psi_n - psi_bar)^T``.
    noise : ndarray of shape (n_quantities, n_quantities)
        Estimated contribution of Monte Carlo noise in ``psi`` to ``covariance``:
        ``sum_n Cov_MC(psi_n - psi_bar)``, by batch means over blocks of draws.
    covariance_corrected : ndarray of shape (n_quantities, n_quantities)
        ``covariance - noise``.
    mcse : ndarray of shape (n_quantities, n_quantities)
        Monte Carlo standard error of each entry of ``covariance`` (block bootstrap).
    posterior_covariance : ndarray of shape (n_quantities, n_quantities)
        Posterior covariance of the quantities (divisor ``n_draws - 1``).
    n_obs : int
        Number of exchangeable units summed over.
    scores : InfluenceScores
        The influence scores ``psi`` and their batch-means MCSE, shape
        (n_quantities, n_obs): the same pass computes them, so callers that need both
        (the audit, the linearity check) do not compute them again.
    """

    covariance: np.ndarray
    noise: np.ndarray
    covariance_corrected: np.ndarray
    mcse: np.ndarray
    posterior_covariance: np.ndarray
    n_obs: int
    scores: InfluenceScores


class _Sums:
    """Running sums over chunks of observations, from which every output is formed."""

    def __init__(self, n_quantities: int, n_blocks: int, n_boot: int):
        k = n_quantities
        self.psi1, self.psi2 = np.zeros(k), np.zeros((k, k))
        self.err1, self.err2 = np.zeros((n_blocks, k)), np.zeros((n_blocks, k, k))
        self.boot1, self.boot2 = np.zeros((n_boot, k)), np.zeros((n_boot, k, k))

    def merge(self, other: _Sums) -> None:
        """Add another chunk's sums."""
        for name, value in vars(other).items():
            getattr(self, name).__iadd__(value)

    def add(self, moments: BlockMoments, errors: np.ndarray, counts: np.ndarray) -> _Sums:
        """Add one chunk's moments and their block errors (``counts``: block-bootstrap
        replicates); returns self."""
        psi = moments.psi
        self.psi1 += psi.sum(axis=1)
        self.psi2 += psi @ psi.T
        self.err1 += errors.sum(axis=2)
        self.err2 += np.matmul(errors, errors.transpose(0, 2, 1))
        boot1, boot2 = _bootstrap_sums(moments, counts)
        self.boot1 += boot1
        self.boot2 += boot2
        return self


def _bootstrap_sums(moments: BlockMoments, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums over the chunk's observations of the replicates' influence scores and of their
    outer products, shapes (n_boot, K) and (n_boot, K, K).

    A replicate ``r`` takes block ``b`` ``counts[r, b]`` times: its scores are
    ``(C_rn - m_r l_rn) / (t_r - 1)`` with ``C_rn`` and ``l_rn`` the resampled cross-products
    and log-likelihood sums, ``m_r`` the resampled mean of f and ``t_r`` the resampled draw
    count. Their sums and outer products follow from ``sum_n [C_rn, l_rn]`` and
    ``sum_n [C_rn, l_rn][C_rn, l_rn]^T``, one matrix product each: no array of the
    replicates' scores is formed.
    """
    n_blocks, k1, n = moments.products.shape
    total = counts @ moments.sizes
    resampled = (counts @ moments.products.reshape(n_blocks, k1 * n)).reshape(-1, k1, n)
    first = resampled.sum(axis=2)  # (n_boot, K + 1)
    second = np.matmul(resampled, resampled.transpose(0, 2, 1))  # (n_boot, K + 1, K + 1)
    mean_f = counts @ moments.sum_f / total[:, None]
    scale = 1 / (total - 1)
    boot1 = (first[:, :-1] - mean_f * first[:, -1:]) * scale[:, None]
    cross = second[:, :-1, -1:] * mean_f[:, None, :]  # sum_n C_rn l_rn m_r^T
    boot2 = (
        second[:, :-1, :-1]
        - cross
        - cross.transpose(0, 2, 1)
        + second[:, -1:, -1:] * mean_f[:, :, None] * mean_f[:, None, :]
    ) * (scale**2)[:, None, None]
    return boot1, boot2


def _centred_outer(second: np.ndarray, first: np.ndarray, n: int) -> np.ndarray:
    """``sum_n (x_n - x_bar)(x_n - x_bar)^T`` from ``sum x x^T`` and ``sum x`` (last two axes)."""
    return second - first[..., :, None] * first[..., None, :] / n


def ij_covariance(
    quantities,
    log_lik,
    chain_ids=None,
    *,
    n_blocks: int = 50,
    n_boot: int = 200,
    seed: int = 0,
    check: bool = True,
) -> IJArrays:
    """Infinitesimal-jackknife estimate of the bootstrap covariance of posterior means.

    Under multinomial bootstrap weights ``w`` (``Cov(w) = I - 1 1^T / N``) the linear
    approximation ``E_w[f] ~ E[f] + sum_n psi_n (w_n - 1)`` has covariance
    ``sum_n (psi_n - psi_bar)(psi_n - psi_bar)^T``, with ``psi_n = Cov_post(f, l_n)``.
    (Giordano and Broderick's code reports ``N/(N-1)`` times this.)

    Noise in the estimated ``psi`` inflates that sum by ``sum_n Cov_MC(psi_n - psi_bar)``;
    ``noise`` estimates this from the spread of block means, and ``covariance_corrected``
    subtracts it. ``mcse`` is the standard deviation of the raw covariance over a
    non-overlapping block bootstrap of the draws (blocks within chains).

    Parameters
    ----------
    quantities : array_like of shape (n_draws, n_quantities) or (n_chains, n_draws, n_quantities)
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Pointwise log-likelihood of the exchangeable units. Must be finite: an observation
        with a ``-inf`` log-likelihood has no finite influence.
    chain_ids : array_like of shape (n_draws,), optional
        Chains of the rows of 2-D input; ``None`` treats the rows as one chain.
    n_blocks : int, default 50
        Number of contiguous blocks of draws (split evenly over chains) for the batch means
        noise estimate and the block bootstrap.
    n_boot : int, default 200
        Block-bootstrap replicates for ``mcse``.
    seed : int, default 0
        Seed of the block bootstrap.
    check : bool, default True
        Check the values (NaN, +inf, non-finite quantities); ``False`` for input a
        :class:`~bayesij.data.posterior.Posterior` or a caller has already checked.

    Returns
    -------
    IJArrays

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [2] Kuensch, H. R. (1989). The jackknife and the bootstrap for general stationary
       observations. Annals of Statistics 17(3).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=200)
    >>> mu = y.mean() + rng.normal(size=(2000, 1)) / np.sqrt(200)
    >>> result = ij_covariance(mu, -0.5 * (y - mu) ** 2)
    >>> bool(abs(result.covariance_corrected[0, 0] * 200 / y.var() - 1) < 0.2)
    True
    """
    f, l, chains = prepare_draws(quantities, log_lik, chain_ids, check)
    setup = ij_setup(f, chains, n_blocks=n_blocks, n_boot=n_boot, seed=seed)
    return ij_join([ij_part(l, setup)], setup)


class IJSetup(NamedTuple):
    """What every block of units shares: the centred quantity draws (S, K), the blocks of
    draws of the batch means and the block-bootstrap counts (n_boot, n_blocks)."""

    centred_f: np.ndarray
    blocks: list
    counts: np.ndarray


class IJPart(NamedTuple):
    """One block of units: ``psi`` and its batch-means variance (K, b), and the block's
    running sums."""

    psi: np.ndarray
    psi_variance: np.ndarray
    sums: _Sums


def ij_setup(
    f: np.ndarray, chains: np.ndarray, *, n_blocks: int = 50, n_boot: int = 200, seed: int = 0
) -> IJSetup:
    """The shared part of the IJ for quantity draws ``f`` (S, K) with their ``chains`` (S,)."""
    n_blocks = check_positive_int(n_blocks, "n_blocks", minimum=2)
    n_boot = check_replicates(n_boot, "n_boot", minimum=2)
    seed = check_seed(seed)
    blocks = draw_blocks(chains, n_blocks)
    counts = (
        np.random.default_rng(seed)
        .multinomial(len(blocks), np.full(len(blocks), 1 / len(blocks)), size=n_boot)
        .astype(float)
    )
    return IJSetup(f - f.mean(axis=0), blocks, counts)


def ij_part(log_lik: np.ndarray, setup: IJSetup, positions=None) -> IJPart:
    """The IJ sums of one block of checked units, (S, b) or (n_chains, n_draws, b), its
    columns read in chunks (temporaries near 64 MiB) on the threads; ``positions`` (b,)
    name the units in error messages (default 0..b-1)."""
    centred_f, blocks, counts = setup
    s, k = centred_f.shape
    matrix = log_lik.reshape(s, -1)
    n_units = matrix.shape[1]
    positions = np.arange(n_units) if positions is None else np.asarray(positions)
    psi = np.empty((k, n_units))
    psi_variance = np.empty_like(psi)
    floats_per_obs = 2 * s + (4 * len(blocks) + 2 * counts.shape[0]) * k

    def work(chunk: slice) -> _Sums:
        moments, impossible = block_moments(centred_f, read_columns(matrix, chunk), blocks)
        if impossible.any():
            first = positions[chunk][impossible][:5].tolist()
            raise fail(
                "log_lik",
                f"-inf at some draws in {int(impossible.sum())} column(s) (first: {first})",
                "finite values for the IJ covariance",
                "Such observations have no finite influence; remove them or use groups.",
            )
        errors = moments.block_errors()
        psi[:, chunk], psi_variance[:, chunk] = moments.psi, moments.psi_variance(errors)
        return _Sums(k, len(blocks), counts.shape[0]).add(moments, errors, counts)

    sums = _Sums(k, len(blocks), counts.shape[0])
    for part in map_ordered(work, obs_chunks(n_units, floats_per_obs)):  # sums in order
        sums.merge(part)
    return IJPart(psi, psi_variance, sums)


def ij_join(parts: list[IJPart], setup: IJSetup) -> IJArrays:
    """The IJ covariance from the parts of every block of units, in order."""
    centred_f, blocks, counts = setup
    psi = np.concatenate([part.psi for part in parts], axis=1)
    n_obs = psi.shape[1]
    if n_obs < 2:
        raise fail(
            "log_lik",
            f"{n_obs} unit (column)",
            "at least 2 units: the IJ variance is that of a bootstrap over units",
        )
    sums = parts[0].sums
    for part in parts[1:]:
        sums.merge(part.sums)
    variance = np.concatenate([part.psi_variance for part in parts], axis=1)
    scores = InfluenceScores(psi, np.sqrt(variance))
    weights = error_weights(np.array([rows.size for rows in blocks], dtype=float))
    return _assemble(sums, n_obs, centred_f, weights, scores)


def _assemble(
    sums: _Sums,
    n_obs: int,
    centred_f: np.ndarray,
    error_weights: np.ndarray,
    scores: InfluenceScores,
) -> IJArrays:
    covariance = _centred_outer(sums.psi2, sums.psi1, n_obs)
    per_block = _centred_outer(sums.err2, sums.err1, n_obs)
    noise = np.einsum("b,bkj->kj", error_weights, per_block)
    boot = _centred_outer(sums.boot2, sums.boot1, n_obs)
    posterior = centred_f.T @ centred_f / (centred_f.shape[0] - 1)
    return IJArrays(
        covariance=covariance,
        noise=noise,
        covariance_corrected=covariance - noise,
        mcse=boot.std(axis=0, ddof=1),
        posterior_covariance=posterior,
        n_obs=n_obs,
        scores=scores,
    )
