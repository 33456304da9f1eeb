"""Bayesian influence scores psi = Cov_post(f, log p(x_n | theta)) and their Monte Carlo error."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from bayesij.array.blocks import block_moments, draw_blocks
from bayesij.array.checks import (
    as_draws_matrix,
    check_finite,
    check_log_lik_values,
    check_positive_int,
    check_same_draws,
    fail,
    impossible_columns,
)
from bayesij.array.numeric import map_chunks, obs_chunks, read_columns

__all__ = ["InfluenceScores", "influence_scores", "prepare_draws", "impossible_columns"]


class InfluenceScores(NamedTuple):
    """Influence scores and their Monte Carlo standard errors.

    Attributes
    ----------
    psi : ndarray of shape (n_quantities, n_obs)
        ``Cov_post(f_k, l_n)``: the derivative of ``E_w[f_k]`` in the weight of unit ``n``.
    mcse : ndarray of shape (n_quantities, n_obs)
        Chain-aware Monte Carlo standard error of ``psi`` (batch means over blocks of draws).
    block_sums : ndarray of shape (n_blocks, n_quantities, n_obs) or None
        With ``keep_blocks``: each block's sum of the per-draw terms whose mean over all
        draws is ``psi`` (blocks of :func:`bayesij.array.blocks.draw_blocks`), from which a
        bootstrap over blocks of draws recomputes ``psi`` without another pass.
    block_units : ndarray of shape (C,) or None
        The units (sorted) whose block sums ``block_sums`` holds (its last axis of length
        C), when only some are kept (:class:`~bayesij.array.amip_candidates.
        CandidateSums`); None: every unit.
    """

    psi: np.ndarray
    mcse: np.ndarray
    block_sums: np.ndarray | None = None
    block_units: np.ndarray | None = None


def prepare_draws(quantities, log_lik, chain_ids=None, check: bool = True):
    """Check and reshape the two draw arrays to 2-D; return (f, l, chain codes).

    Parameters
    ----------
    quantities : array_like of shape (n_draws, n_quantities) or (n_chains, n_draws, n_quantities)
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
    chain_ids : array_like of shape (n_draws,), optional
        Chains of the rows of 2-D input; ``None`` means one chain.
    check : bool, default True
        Check the values (NaN, +inf, non-finite quantities); ``False`` for input a
        :class:`~bayesij.data.posterior.Posterior` or a caller has already checked.
    """
    f, f_chains = as_draws_matrix(quantities, "quantities", chain_ids)
    l, l_chains = as_draws_matrix(log_lik, "log_lik", chain_ids, keep_float32=True)
    check_same_draws(f, l, ("quantities", "log_lik"))
    if not np.array_equal(f_chains, l_chains):
        raise fail(
            "log_lik",
            "a chain layout that differs from the one of quantities",
            "the same chains and draws in both arrays",
        )
    if check:
        check_finite(f, "quantities")
        check_log_lik_values(l)
    return f, l, f_chains


def _combined_rows(moments, first, second, coef) -> tuple[np.ndarray, np.ndarray]:
    """``psi`` and its batch-means variance (R, n) of the combinations ``f[:, first] + coef
    * f[:, second]`` from the columns' block moments: ``psi`` and the block errors are
    linear in the quantities, so a row that is a column is the column's, and only the
    mixed rows' errors are formed (their variance from them, not from the expansion, which
    could cancel)."""
    base = moments.psi
    errors = moments.block_errors(base)
    weights = moments.error_weights()
    psi = base[first]
    variance = np.einsum("b,bkn->kn", weights, errors**2)[first]
    mixed = np.flatnonzero(coef != 0)
    if mixed.size:
        scale = coef[mixed, None]
        psi[mixed] += scale * base[second[mixed]]
        joint = errors[:, first[mixed]] + scale * errors[:, second[mixed]]
        variance[mixed] = np.einsum("b,bkn->kn", weights, joint**2)
    return psi, variance


def _cross_of_rows(moments, rows: np.ndarray, combine) -> np.ndarray:
    """The block cross-products (B, len(rows), n) of the quantities' ``rows``, or with
    ``combine`` of those combinations of them."""
    if combine is None:
        return moments.cross[:, rows]
    first, second, coef = (part[rows] for part in combine)
    cross = moments.cross[:, first]
    mixed = np.flatnonzero(coef != 0)
    if mixed.size:
        cross[:, mixed] += coef[mixed, None] * moments.cross[:, second[mixed]]
    return cross


def influence_scores(
    quantities,
    log_lik,
    chain_ids=None,
    *,
    n_blocks: int = 50,
    check: bool = True,
    keep_blocks: bool = False,
    blocks_dtype=np.float64,
    blocks_of=None,
    rows: tuple | None = None,
) -> InfluenceScores:
    """Bayesian influence scores with chain-aware Monte Carlo standard errors.

    ``psi[k, n] = Cov_post(f_k, l_n)`` is the derivative of the posterior mean of ``f_k``
    with respect to the weight ``w_n`` of observation ``n`` in ``sum_n w_n l_n``, at ``w = 1``:
    ``E_w[f] ~ E[f] + sum_n psi_n (w_n - 1)``. Removing observation ``n`` changes the
    posterior mean by about ``-psi_n``. ``psi`` is the unbiased sample covariance over all
    draws (divisor ``n_draws - 1``).

    Parameters
    ----------
    quantities : array_like of shape (n_draws, n_quantities) or (n_chains, n_draws, n_quantities)
        Draws of the quantities of interest.
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Pointwise log-likelihood at the same draws. ``-inf`` is allowed: an observation
        impossible under some draw has no finite influence, and its ``psi`` and ``mcse`` are
        NaN (with a warning naming it).
    chain_ids : array_like of shape (n_draws,), optional
        Chain of each row for 2-D input; ``None`` treats the rows as one chain.
    n_blocks : int, default 50
        Total number of contiguous blocks of draws (split evenly over chains) for the batch
        means estimate of the Monte Carlo error.
    check : bool, default True
        Check the values (NaN, +inf, non-finite quantities); ``False`` for input a
        :class:`~bayesij.data.posterior.Posterior` or a caller has already checked.
    keep_blocks : bool, default False
        Also return the per-block sums (:attr:`InfluenceScores.block_sums`).
    blocks_dtype : numpy dtype, default float64
        Of the kept block sums: float32 halves their memory (50 blocks x quantities x
        observations), for uses that only resample them (the AMIP's block bootstrap).
    blocks_of : array_like of int, optional
        With ``keep_blocks``: the quantities whose block sums are kept (their rows, in this
        order); default all. The sums of a quantity linear in others need not be kept.
    rows : tuple of three ndarray of shape (R,), optional
        ``(first, second, coef)``: the influence of the R combinations
        ``f[:, first] + coef * f[:, second]`` of the quantities' columns (their rows in
        ``psi``; ``blocks_of`` indexes them) instead of the columns: one product with the
        log-likelihood per column however many combinations use it (the AMIP's metrics
        ``mean + s z sd`` share their quantity's draws and squares).

    Returns
    -------
    InfluenceScores
        ``psi`` and ``mcse``, each of shape (n_quantities, n_obs) (with ``rows``, (R,
        n_obs)).

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [2] Flegal, J. M. and Jones, G. L. (2010). Batch means and spectral variance estimators
       in Markov chain Monte Carlo. Annals of Statistics 38(2).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(1000, 1))
    >>> log_lik = -0.5 * (np.array([0.0, 2.0]) - theta) ** 2
    >>> scores = influence_scores(theta, log_lik)
    >>> scores.psi.shape
    (1, 2)
    """
    n_blocks = check_positive_int(n_blocks, "n_blocks", minimum=2)
    f, l, chains = prepare_draws(quantities, log_lik, chain_ids, check)
    blocks = draw_blocks(chains, n_blocks)
    centred_f = f - f.mean(axis=0)
    combine = None if rows is None else tuple(np.asarray(part) for part in rows)
    n_rows = f.shape[1] if combine is None else combine[0].size
    psi = np.empty((n_rows, l.shape[1]))
    variance = np.empty_like(psi)
    kept_rows = np.arange(n_rows) if blocks_of is None else np.asarray(blocks_of, dtype=int)
    kept = None
    if keep_blocks:
        kept = np.empty((len(blocks), kept_rows.size, l.shape[1]), blocks_dtype)
    floats_per_obs = 2 * f.shape[0] + 3 * len(blocks) * max(f.shape[1], n_rows)
    impossible = np.zeros(l.shape[1], dtype=bool)

    def work(chunk: slice) -> None:
        columns = read_columns(l, chunk)
        moments, impossible[chunk] = block_moments(centred_f, columns, blocks)
        with np.errstate(invalid="ignore"):  # -inf columns are NaN, reported below
            if combine is None:
                psi[:, chunk] = moments.psi
                variance[:, chunk] = moments.psi_variance()
            else:
                psi[:, chunk], variance[:, chunk] = _combined_rows(moments, *combine)
            if kept is not None:
                total = moments.sizes.sum()
                kept[:, :, chunk] = _cross_of_rows(moments, kept_rows, combine) * (
                    total / (total - 1)
                )

    map_chunks(work, obs_chunks(l.shape[1], floats_per_obs))
    if impossible.any():
        psi[:, impossible] = np.nan
        variance[:, impossible] = np.nan
        warnings.warn(
            f"log_lik is -inf at some draws for {int(impossible.sum())} observation(s) "
            f"(columns {np.flatnonzero(impossible)[:10].tolist()}); their influence is "
            "undefined and reported as NaN.",
            RuntimeWarning,
            stacklevel=2,
        )
    return InfluenceScores(psi, np.sqrt(variance), kept)
