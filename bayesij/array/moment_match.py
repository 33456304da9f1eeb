"""Importance-weighted moment matching for leave-one-out observations with high k-hat.

The full-data draws, on the unconstrained scale, are moved by affine transformations (a
shift, a shift and per-dimension scaling, a shift and covariance mapping) that match their
importance-weighted moments, as long as each step lowers k-hat; the importance ratios of the
moved draws use the model's log density, so the estimate stays consistent. The split
version draws half from the transformed and half from the original posterior and weights by
their deterministic mixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from bayesij.array.loo import weighted_elpd
from bayesij.array.psis import psis_chunk

__all__ = ["MomentMatch", "MatchedDraws", "moment_match_observation", "moment_matched_draws"]


class MomentMatch(NamedTuple):
    """The moment-matched LOO estimate of one observation.

    ``elpd`` and ``mcse`` are ``log p(y_i | y_-i)`` and its Monte Carlo SE, ``pareto_k``
    the k-hat of the final importance ratios, ``transformations`` the accepted steps
    (``'shift'``, ``'scale'``, ``'covariance'``) in order, ``evaluations`` how many draws'
    log densities were computed, ``ess`` the importance sampling ESS ``1 / sum w^2``.
    """

    elpd: float
    mcse: float
    pareto_k: float
    transformations: tuple[str, ...]
    evaluations: int
    ess: float


class _Affine(NamedTuple):
    """``T(u) = u @ matrix.T + offset``."""

    matrix: np.ndarray
    offset: np.ndarray

    def apply(self, draws: np.ndarray) -> np.ndarray:
        return draws @ self.matrix.T + self.offset

    def inverse(self, draws: np.ndarray) -> np.ndarray:
        return np.linalg.solve(self.matrix, (draws - self.offset).T).T

    def then(self, other: _Affine) -> _Affine:
        return _Affine(other.matrix @ self.matrix, self.offset @ other.matrix.T + other.offset)


def _smoothed(log_ratios: np.ndarray, tail: int) -> tuple[np.ndarray, float]:
    result = psis_chunk(log_ratios[:, None] - np.max(log_ratios), np.array([tail]))
    log_weights = result.log_weights[:, 0]
    return log_weights - logsumexp(log_weights), float(result.pareto_k[0])


def _step(kind: str, draws: np.ndarray, weights: np.ndarray) -> _Affine:
    """The affine map moving ``draws`` to their weighted mean (and scale or covariance)."""
    n_dims = draws.shape[1]
    mean, weighted_mean = draws.mean(axis=0), weights @ draws
    if kind == "shift":
        return _Affine(np.eye(n_dims), weighted_mean - mean)
    centred, weighted_centred = draws - mean, draws - weighted_mean
    if kind == "scale":
        ratio = np.sqrt((weights @ weighted_centred**2) / centred.var(axis=0))
        matrix = np.diag(ratio)
    else:
        covariance = np.cov(centred, rowvar=False).reshape(n_dims, n_dims)
        weighted = (weighted_centred * weights[:, None]).T @ weighted_centred
        matrix = np.linalg.cholesky(weighted) @ np.linalg.inv(np.linalg.cholesky(covariance))
    return _Affine(matrix, weighted_mean - mean @ matrix.T)


class MatchedDraws(NamedTuple):
    """Draws moved by importance-weighted moment matching and their weights.

    ``draws`` (S, D): the moved draws (with ``split``, the first half moved by the
    accumulated map and the second half the original draws); ``log_weights`` (S,)
    normalised; ``pareto_k`` of the final ratios; ``removed`` (S,) the removed term at the
    final draws; ``transformations`` the accepted steps; ``evaluations`` the density calls.
    """

    draws: np.ndarray
    log_weights: np.ndarray
    pareto_k: float
    removed: np.ndarray
    transformations: tuple[str, ...]
    evaluations: int


def moment_match_observation(
    draws: np.ndarray,
    log_prob: Callable[[np.ndarray], np.ndarray],
    log_lik_i: Callable[[np.ndarray], np.ndarray],
    log_prob_draws: np.ndarray,
    log_lik_draws: np.ndarray,
    tail: int,
    *,
    k_threshold: float = 0.7,
    max_iters: int = 30,
    split: bool = True,
    cov: bool = True,
) -> MomentMatch:
    """Moment-matched PSIS-LOO of one observation.

    Parameters
    ----------
    draws : ndarray of shape (S, D)
        Full-data posterior draws on the unconstrained scale.
    log_prob : callable
        ``(n, D) -> (n,)``: the unnormalised log posterior density on the unconstrained
        scale (Jacobian included), given all the data.
    log_lik_i : callable
        ``(n, D) -> (n,)``: ``log p(y_i | theta)`` at unconstrained draws.
    log_prob_draws, log_lik_draws : ndarray of shape (S,)
        Both at ``draws`` (already known from the fit).
    tail : int
        PSIS tail length (from the draws' relative efficiency).
    k_threshold, max_iters, split, cov
        Stop once k-hat is below ``k_threshold``; at most ``max_iters`` accepted steps;
        the split (mixture) estimate; try the covariance step (only with more draws than
        ``10 D``).

    Returns
    -------
    MomentMatch

    References
    ----------
    .. [1] Paananen, T., Piironen, J., Bürkner, P.-C. and Vehtari, A. (2021). Implicitly
       adaptive importance sampling. Statistics and Computing 31, 16.
    """
    matched = moment_matched_draws(
        draws,
        log_prob,
        log_lik_i,
        log_prob_draws,
        log_lik_draws,
        tail,
        k_threshold=k_threshold,
        max_iters=max_iters,
        split=split,
        cov=cov,
    )
    elpd, mcse, _ = weighted_elpd(matched.removed, matched.log_weights)
    ess = 1.0 / float(np.sum(np.exp(2 * matched.log_weights)))
    return MomentMatch(
        float(elpd),
        float(mcse),
        matched.pareto_k,
        matched.transformations,
        matched.evaluations,
        ess,
    )


def moment_matched_draws(
    draws: np.ndarray,
    log_prob: Callable[[np.ndarray], np.ndarray],
    removed: Callable[[np.ndarray], np.ndarray],
    log_prob_draws: np.ndarray,
    removed_draws: np.ndarray,
    tail: int,
    *,
    k_threshold: float = 0.7,
    max_iters: int = 30,
    split: bool = True,
    cov: bool = True,
    proposal: np.ndarray | None = None,
) -> MatchedDraws:
    """Importance-weighted moment matching towards the target ``log_prob - removed``
    (leave-one-out: ``removed`` is ``log p(y_i | theta)``; power-scaling by ``alpha``:
    ``-(alpha - 1) c(theta)``), from posterior draws on the unconstrained scale.

    Parameters
    ----------
    draws : ndarray of shape (S, D)
    log_prob, removed : callable
        ``(n, D) -> (n,)``: the posterior's unnormalised log density (Jacobian included)
        and the term the target removes from it.
    log_prob_draws, removed_draws : ndarray of shape (S,)
        Both at ``draws``.
    tail, k_threshold, max_iters, split, cov
        As :func:`moment_match_observation`.
    proposal : ndarray of shape (S,), optional
        The log density (up to a constant) ``draws`` were drawn from, where that is not
        ``log_prob`` itself: draws moved by an earlier match (an affine map keeps each
        moved draw's density, the posterior's at the draw it was moved from, up to the
        map's constant Jacobian), so that a removal is reached in steps (a share of the
        term at a time). No split estimate then.

    Returns
    -------
    MatchedDraws

    References
    ----------
    .. [1] Paananen, T., Piironen, J., Bürkner, P.-C. and Vehtari, A. (2021). Implicitly
       adaptive importance sampling. Statistics and Computing 31, 16.
    """
    n_draws, n_dims = draws.shape
    kinds = ["shift", "scale"] + (["covariance"] if cov and n_draws > 10 * n_dims else [])
    total = _Affine(np.eye(n_dims), np.zeros(n_dims))
    current, current_lp, current_ll = draws, log_prob_draws, removed_draws
    base = log_prob_draws if proposal is None else proposal
    log_weights, k = _smoothed(log_prob_draws - removed_draws - base, tail)
    accepted: list[str] = []
    evaluations = 0
    while k > k_threshold and len(accepted) < max_iters:
        weights = np.exp(log_weights)
        for kind in kinds:
            step = _step(kind, current, weights)
            moved = step.apply(current)
            lp, ll = log_prob(moved), removed(moved)
            evaluations += n_draws
            # Proposal density at a moved draw: p(original draw | y) / |det T| (constant).
            candidate, candidate_k = _smoothed(lp - ll - base, tail)
            if candidate_k < k:
                total, current, current_lp, current_ll = total.then(step), moved, lp, ll
                log_weights, k = candidate, candidate_k
                accepted.append(kind)
                break
        else:
            break
    if split and accepted and proposal is None:
        log_weights, k, current_ll, extra = _split(
            draws, total, current_lp, current_ll, log_prob_draws, removed_draws, log_prob, tail
        )
        evaluations += extra
        half = n_draws // 2
        current = np.concatenate([current[:half], draws[half:]])
    return MatchedDraws(current, log_weights, k, current_ll, tuple(accepted), evaluations)


def _split(draws, total, moved_lp, moved_ll, log_prob_draws, log_lik_draws, log_prob, tail):
    """Half the draws moved by the accumulated map ``T``, half original; each weighted by the
    deterministic mixture ``(p(u) + p(T^-1 u) / |det T|) / 2`` of the two proposals."""
    half = draws.shape[0] // 2
    first, second = slice(0, half), slice(half, None)
    log_det = np.linalg.slogdet(total.matrix)[1]
    lp = np.concatenate([moved_lp[first], log_prob_draws[second]])
    ll = np.concatenate([moved_ll[first], log_lik_draws[second]])
    back = np.concatenate(
        [log_prob_draws[first], log_prob(total.inverse(draws[second]))]
    )  # log p(T^-1 u) at each mixture draw u
    mixture = np.logaddexp(lp, back - log_det)
    log_weights, k = _smoothed(lp - ll - mixture, tail)
    return log_weights, k, ll, draws.shape[0] - half
