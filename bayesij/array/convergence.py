"""Convergence of MCMC draws, many columns at once: the rank-normalised split R-hat and the
bulk and tail effective sample sizes of Vehtari et al. (2021), as ArviZ 0.23's
``rhat(method="rank")`` / ``ess(method="bulk" | "tail")`` and arviz-stats 1.x compute them.

The split chains' draws are ranked over all chains together (ties averaged), mapped to
normal scores ``Phi^-1((r - 3/8) / (S + 1/4))``, and the classic between/within-chain
R-hat is computed on them (the bulk), and on the ranks of the draws' distance from their
median (the tails, folded); R-hat is the larger of the two. The bulk ESS is the split-chain
ESS of the normal scores; the tail ESS the smaller of the ESS of the indicators at the 5 %
and 95 % quantiles (:func:`bayesij.array.ess.split_relative_ess`).

References
----------
.. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
   Rank-normalization, folding, and localization: an improved R-hat for assessing
   convergence of MCMC. Bayesian Analysis 16(2), 667-718.
.. [2] Margossian, C. C., Hoffman, M. D., Sountsov, P., Riou-Durand, L., Vehtari, A. and
   Gelman, A. (2024). Nested R-hat: assessing the convergence of Markov chain Monte Carlo
   when running many short chains. Bayesian Analysis (the nested R-hat).
.. [3] Betancourt, M. (2016). Diagnosing suboptimal cotangent disintegrations in
   Hamiltonian Monte Carlo. arXiv:1604.00695 (the E-BFMI).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from bayesij.array.checks import fail
from bayesij.array.ess import split_relative_ess

__all__ = [
    "rank_normal_scores",
    "split_rhat",
    "rank_rhat",
    "nested_rhat",
    "bulk_ess",
    "tail_ess",
    "bfmi",
]


def _split(draws: np.ndarray) -> np.ndarray:
    """(n_chains, n_draws, K) as (2 n_chains, n_draws // 2, K): each chain's halves (the
    middle draw of an odd chain left out, as ArviZ does)."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _even(draws: np.ndarray) -> np.ndarray:
    """The chains without the middle draw of an odd chain: split in halves, the halves
    :func:`_split` gives."""
    n = draws.shape[1]
    return draws if n % 2 == 0 else np.delete(draws, n // 2, axis=1)


def _checked(draws) -> np.ndarray:
    values = np.asarray(draws, dtype=float)
    if values.ndim != 3:
        raise fail("draws", f"shape {values.shape}", "(n_chains, n_draws, n_columns)")
    if values.shape[1] < 4:
        raise fail("draws", f"{values.shape[1]} draws per chain", "at least 4")
    return values


def average_ranks(values: np.ndarray) -> np.ndarray:
    """The ranks (1 to S) of each column of ``values`` (S, K), ties given their average, as
    ``scipy.stats.rankdata(values, method="average", axis=0)``; a column holding NaN is
    all NaN. Written here: scipy.stats, which an audit needs for nothing else, costs
    36 MiB of memory to import."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, axis=0, kind="mergesort")
    ordered = np.take_along_axis(values, order, axis=0)
    n = values.shape[0]
    position = np.arange(n)[:, None]
    first = np.ones(values.shape, dtype=bool)  # where a run of equal values starts
    first[1:] = ordered[1:] != ordered[:-1]
    last = np.ones(values.shape, dtype=bool)  # where one ends
    last[:-1] = first[1:]
    start = np.maximum.accumulate(np.where(first, position, 0), axis=0)
    stop = np.minimum.accumulate(np.where(last, position + 1, n)[::-1], axis=0)[::-1]
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, 0.5 * (start + stop + 1), axis=0)
    ranks[:, np.isnan(values).any(axis=0)] = np.nan
    return ranks


def rank_normal_scores(draws) -> np.ndarray:
    """Normal scores of the draws' ranks over all chains, column by column (ties
    averaged): ``Phi^-1((r - 3/8) / (S + 1/4))``, shape as ``draws`` (n_chains, n_draws,
    K)."""
    values = _checked(draws)
    flat = values.reshape(-1, values.shape[2])
    ranks = average_ranks(flat)
    return ndtri((ranks - 0.375) / (flat.shape[0] + 0.25)).reshape(values.shape)


def split_rhat(draws) -> np.ndarray:
    """The split-chain potential scale reduction of each column, (K,): ``sqrt((B / W + n -
    1) / n)`` of the split chains (``B`` n times the variance of their means, ``W`` the mean
    of their variances, both with divisor one less)."""
    return _rhat_of_chains(_split(_checked(draws)))


def _rhat_of_chains(chains: np.ndarray) -> np.ndarray:
    """:func:`split_rhat`'s formula on chains (m, n, K) taken as they are."""
    n = chains.shape[1]
    between = n * chains.mean(axis=1).var(axis=0, ddof=1)
    within = chains.var(axis=1, ddof=1).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def rank_rhat(draws) -> np.ndarray:
    """The rank-normalised split R-hat of each column, (K,): the larger of the R-hat of the
    split chains' normal scores (bulk) and of their folded distances from the median
    (tails). NaN for a column constant over the draws."""
    values = _checked(draws)
    halves = _split(values)
    bulk = _rhat_of_chains(rank_normal_scores(halves))
    folded = np.abs(halves - np.median(halves.reshape(-1, halves.shape[2]), axis=0))
    tails = _rhat_of_chains(rank_normal_scores(folded))
    out = np.maximum(bulk, tails)
    out[np.ptp(values.reshape(-1, values.shape[2]), axis=0) == 0] = np.nan
    return out


def nested_rhat(draws, superchains) -> np.ndarray:
    """The rank-normalised nested R-hat of each column, (K,), for many short chains run in
    ``superchains`` (one id per chain, each superchain the same number of chains): the
    split chains' normal scores (bulk) and folded scores (tails), the larger of the two, of
    ``sqrt(1 + B_nu / W_nu)`` with ``B_nu`` the variance of the superchains' means and
    ``W_nu`` the mean over superchains of their chains' mean variance plus the variance of
    their chains' means (Margossian et al. 2024, eqs. 4-8; arviz-stats' ``rhat_nested``).
    NaN for a column constant over the draws."""
    values = _checked(draws)
    ids = np.asarray(superchains)
    if ids.shape != (values.shape[0],) or ids.dtype.kind not in "iu" or ids.min() < 0:
        raise fail(
            "superchains",
            f"{ids!r}"[:60],
            f"one non-negative integer id per chain ({values.shape[0]})",
        )
    counts = np.bincount(ids)[np.unique(ids)]
    if counts.min() != counts.max() or counts.size < 2:
        raise fail(
            "superchains",
            f"superchains of {sorted(set(counts.tolist()))} chains ({counts.size} of them)",
            "at least two superchains, each of the same number of chains",
        )
    halves, split_ids = _split(values), np.concatenate([ids, ids])
    bulk = _nested(rank_normal_scores(halves), split_ids)
    folded = np.abs(halves - np.median(halves.reshape(-1, halves.shape[2]), axis=0))
    out = np.maximum(bulk, _nested(rank_normal_scores(folded), split_ids))
    out[np.ptp(values.reshape(-1, values.shape[2]), axis=0) == 0] = np.nan
    return out


def _nested(chains: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The nested R-hat formula on chains (m, n, K) grouped by superchain ``ids`` (m,)."""
    levels = np.unique(ids)
    means, variances = chains.mean(axis=1), chains.var(axis=1, ddof=1)  # (m, K)
    per_chain = int(np.sum(ids == levels[0]))
    super_means = np.stack([means[ids == k].mean(axis=0) for k in levels])
    between_chains = np.stack(
        [
            means[ids == k].var(axis=0, ddof=1) if per_chain > 1 else np.zeros(means.shape[1])
            for k in levels
        ]
    )
    within_chains = np.stack([variances[ids == k].mean(axis=0) for k in levels])
    between = super_means.var(axis=0, ddof=1)
    within = (within_chains + between_chains).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(1 + between / within)


def bfmi(energy) -> np.ndarray:
    """The energy Bayesian fraction of missing information of each chain, (n_chains,):
    ``mean((E_t - E_t-1)^2) / var(E)`` (divisor ``n - 1``) of the Hamiltonian's energy
    ``E`` (n_chains, n_draws), as arviz-stats' ``bfmi``; below 0.3 the momentum resampling
    explores the energy poorly (Betancourt 2016)."""
    values = np.asarray(energy, dtype=float)
    if values.ndim != 2 or values.shape[1] < 3 or not np.isfinite(values).all():
        raise fail(
            "energy",
            f"shape {values.shape}" if values.ndim != 2 else "values that are not finite",
            "finite energies (n_chains, n_draws), at least 3 draws per chain",
        )
    return np.square(np.diff(values, axis=1)).mean(axis=1) / values.var(axis=1, ddof=1)


def bulk_ess(draws) -> np.ndarray:
    """The bulk effective sample size of each column, (K,): the split-chain ESS of the
    split chains' rank-normal scores."""
    scores = rank_normal_scores(_even(_checked(draws)))
    return split_relative_ess(scores, "mean") * scores.shape[0] * scores.shape[1]


def tail_ess(draws, prob: float = 0.05) -> np.ndarray:
    """The tail effective sample size of each column, (K,): the smaller split-chain ESS of
    the indicators of the draws at or below their ``prob`` and ``1 - prob`` quantiles."""
    values = _checked(draws)  # the quantiles of every draw, the middle of an odd chain too
    kept = values.shape[0] * 2 * (values.shape[1] // 2)
    return split_relative_ess(values, "tail", prob) * kept
