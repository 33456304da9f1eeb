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
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

from bayesij.array.checks import fail
from bayesij.array.ess import split_relative_ess

__all__ = ["rank_normal_scores", "split_rhat", "rank_rhat", "bulk_ess", "tail_ess"]


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


def rank_normal_scores(draws) -> np.ndarray:
    """Normal scores of the draws' ranks over all chains, column by column (ties
    averaged): ``Phi^-1((r - 3/8) / (S + 1/4))``, shape as ``draws`` (n_chains, n_draws,
    K)."""
    values = _checked(draws)
    flat = values.reshape(-1, values.shape[2])
    ranks = rankdata(flat, method="average", axis=0)
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
