"""Approximate leave-one-out cross-validation from posterior draws.

Five estimates of ``elpd_n = log p(x_n | x_-n)`` from the same draws:

* ``"psis"`` — Pareto-smoothed importance sampling with ratios ``1 / p(x_n | theta)``;
* ``"is"`` — plain importance sampling: ``-log E[1 / p(x_n | theta)]`` (harmonic mean);
* ``"tis"`` — truncated importance sampling (Ionides 2008; R loo's ``is_method = "tis"``):
  the ratios cut at their mean times ``sqrt(S)``;
* ``"ij"`` — infinitesimal jackknife: ``log(E[p_n] - Cov(p_n, l_n))`` with
  ``p_n = p(x_n | theta)``, the first-order change of ``E[p_n]`` when ``x_n`` is removed;
* ``"cumulant"`` — ``k1 - k2/2 + k3/6 - k4/24`` with ``k_j`` the posterior cumulants of
  ``l_n``, the expansion of ``-log E[exp(-l_n)]``.

Every method reports PSIS's ``pareto_k`` as the diagnostic of the importance ratios.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri  # scipy.stats' norm.ppf: scipy.stats costs 45 MiB more

from bayesij.array.checks import (
    chain_grouping,
    checked_r_eff,
    fail,
    log_lik_draws,
)
from bayesij.array.ess import log_lik_relative_eff_rows, split_log_lik_relative_eff_rows
from bayesij.array.numeric import (
    exp_and_logsumexp,
    logsumexp_columns,
    map_chunks,
    obs_chunks,
    read_columns,
    transpose_columns,
)
from bayesij.array.psis import TIE_RULES, check_tail_rule, psis_rows, tail_length
from bayesij.array.waic import log_lik_moments

__all__ = [
    "LooArrays",
    "loo_pointwise",
    "loo_methods",
    "METHODS",
    "mcse_elpd",
    "weighted_elpd",
    "weighted_elpds",
]

METHODS = ("psis", "is", "tis", "ij", "cumulant")

#: Blom's approximate normal order statistics used by R loo's MCSE of elpd.
_BLOM = ndtri((np.arange(1, 1001) - 3 / 8) / (1000 - 2 * 3 / 8 + 1))
#: Terms of the power series of ``log1p(c q)`` used for small ``c``, and the covariance
#: (divisor n - 1) of the powers ``q^1..q^K`` of the Blom quantiles.
_SERIES_TERMS = 24
_POWER_COV = np.cov(_BLOM[:, None] ** np.arange(1, _SERIES_TERMS + 1), rowvar=False)
#: ``(-1)^(k+1) / k``, k = 1..K: the coefficients of the series.
_SERIES_SIGNS = (-1.0) ** np.arange(2, _SERIES_TERMS + 2) / np.arange(1, _SERIES_TERMS + 1)
#: Largest ``c`` for the series: ``c max|q| <= 0.3`` keeps the truncation below 1e-14.
_SERIES_MAX = 0.3 / -_BLOM[0]


class LooArrays(NamedTuple):
    """Pointwise leave-one-out results, each of shape (n_obs,).

    Attributes
    ----------
    elpd : estimated ``log p(x_n | x_-n)``.
    p_loo : ``lppd - elpd``.
    lppd : ``log E[p(x_n | theta)]``.
    pareto_k : PSIS k-hat of the importance ratios.
    mcse : Monte Carlo standard error of ``elpd`` (R loo's method; PSIS and IS only).
    ess : PSIS effective sample size ``r_eff / sum_s w_s^2`` (PSIS and IS only).
    r_eff : relative efficiency used for the tail length and the MCSE.
    tail_len : Pareto tail length.
    constant : whether the log-likelihood is constant over all draws (no Pareto fit).
    log_weights : ndarray of shape (n_draws, n_obs) or None
        The normalised (smoothed, for PSIS) importance log-weights of each observation, kept
        on request (``save_log_weights=True``, as R loo's ``save_psis``) so that LOO
        expectations and the linearity check reuse them instead of smoothing again.
    expectations : ndarray of shape (K, n_obs) or None
        With ``expectation_draws``: the leave-one-out posterior mean of each of K
        quantities, ``sum_s w_sn f_sk`` under the normalised weights of the base method,
        from the same pass (the weights are never stored); NaN for an impossible
        observation.
    """

    elpd: np.ndarray
    p_loo: np.ndarray
    lppd: np.ndarray
    pareto_k: np.ndarray
    mcse: np.ndarray
    ess: np.ndarray
    r_eff: np.ndarray
    tail_len: np.ndarray
    constant: np.ndarray
    log_weights: np.ndarray | None = None
    expectations: np.ndarray | None = None


def mcse_elpd(relative_error: np.ndarray, r_eff: np.ndarray) -> np.ndarray:
    """R loo's MCSE of ``elpd_n`` from ``c = sd(E-hat[p_n]) / E[p_n]`` (scale-free form).

    R loo draws 1000 normal quantiles ``z = E + sd q`` (Blom), takes the variance of
    ``log z`` over ``z > 0`` and divides by ``r_eff``. Here ``log z = log E + log1p(c q)``,
    so only ``c`` is needed and no density is exponentiated.
    """
    variance = np.empty(relative_error.shape)
    # Small c: var(log1p(c q)) = a^T Cov(q^j, q^k) a with a_k = (-1)^(k+1) c^k / k, the
    # power series of log1p, without 1000 logarithms per observation.
    series = relative_error <= _SERIES_MAX
    c = relative_error[series, None]
    a = np.cumprod(np.broadcast_to(c, (c.shape[0], _SERIES_TERMS)), axis=1) * _SERIES_SIGNS
    variance[series] = ((a @ _POWER_COV) * a).sum(axis=1)  # a matrix product: BLAS
    # Otherwise the variance of log(1 + c q) over the z > 0 (all of them while
    # c * min(q) > -1), by vectorised logarithms.
    if not series.all():
        from bayesij.array.kernels.mcse import log_variances  # compiled kernels: numba

        variance[~series] = log_variances(relative_error[~series], _BLOM)
    return np.sqrt(variance / r_eff)


def _psis_elpd(
    log_lik: np.ndarray,
    body: np.ndarray,
    tail_len: np.ndarray,
    r_eff: np.ndarray,
    smooth: bool,
    ties: str,
    scratch: tuple[np.ndarray, ...],
    log_weights_out: np.ndarray | None = None,
):
    """lppd, elpd, pareto_k, mcse and ess of rows (n_cols, n_draws); ``smooth=False``: IS.

    ``body`` is each row's minimum. The raw ratios ``exp(body - l_s)`` lie in (0, 1]: one
    pass of exp gives both the weights (the smoothed tail is then overwritten) and, through
    their reciprocals, lppd. Outside the smoothed tail ``l_s + lw_s = body`` for every draw,
    so the sums over draws that elpd and its MCSE need split into that constant times the
    number of body draws plus sums over the smoothed tail. ``scratch``: three arrays of at
    least the shape of ``log_lik`` to work in. ``log_weights_out`` (n_cols, n_draws), when
    given, receives the normalised log-weights.
    """
    n_cols, n_draws = log_lik.shape
    lw_buffer, exp_buffer, spare = (array[:n_cols] for array in scratch)
    np.subtract(body[:, None], log_lik, out=lw_buffer)  # log ratios shifted to maximum 0
    weights = np.exp(lw_buffer, out=exp_buffer)
    lppd = _lppd_from_ratios(weights, body, log_lik, spare)
    psis = psis_rows(lw_buffer, tail_len, ties, shifted=True, write_back=False)
    if smooth:
        tail, tail_lw, tail_raw = psis.smoothed, psis.tail_smoothed, psis.tail_raw
    else:  # plain IS: the raw log ratios, no smoothed tail (PSIS gives only k-hat)
        tail = np.full((n_cols, 0), -1)
        tail_lw = tail_raw = np.full((n_cols, 0), -np.inf)
    in_tail = np.asarray(tail >= 0)
    tail_rows, tail_slots = np.nonzero(in_tail)
    # Smoothed log weights are <= 0 (truncated at the largest raw ratio): no overflow.
    slots = tail_rows * n_draws + tail[tail_rows, tail_slots]
    weights.reshape(-1)[slots] = np.exp(tail_lw[tail_rows, tail_slots])
    total = weights.sum(axis=1)
    normaliser = np.log(total)
    if log_weights_out is not None:
        lw_buffer.reshape(-1)[slots] = tail_lw[tail_rows, tail_slots]
        np.subtract(lw_buffer, normaliser[:, None], out=log_weights_out)
    with np.errstate(invalid="ignore", divide="ignore"):  # total 0: redone in logs below
        sum_w2 = np.einsum("ij,ij->i", weights, weights) / total**2
    # Sums over the smoothed tail (l_s = body - raw log ratio), and the body's constant.
    tail_terms = np.where(in_tail, body[:, None] - tail_raw, 0.0) + tail_lw
    n_body = n_draws - in_tail.sum(axis=1)
    with np.errstate(divide="ignore"):
        lse_terms = np.logaddexp(np.log(n_body) + body, exp_and_logsumexp(tail_terms)[1])
    elpd = lse_terms - normaliser
    # MCSE: sum_s (c_s - w_s)^2 with c_s = exp(l_s + lw_s - lse_terms), w_s normalised.
    c_body = np.exp(body - lse_terms)
    w_tail = np.exp(tail_lw - normaliser[:, None])
    c_tail = np.exp(tail_terms - lse_terms[:, None])
    w_body_sum = 1 - w_tail.sum(axis=1)
    w_body_sq = sum_w2 - (w_tail**2).sum(axis=1)
    square = (
        n_body * c_body**2
        - 2 * c_body * w_body_sum
        + w_body_sq
        + ((c_tail - w_tail) ** 2).sum(axis=1)
    )
    relative_error = np.sqrt(np.maximum(square, 0.0))
    # At k-hat >> 1 the fitted tail can lie hundreds of log units below the largest raw
    # ratio, and the weights above (scaled to that ratio) underflow: redo those rows in
    # log space, normalised first (as R loo does).
    underflow = np.flatnonzero(~(total > _TINY_TOTAL))
    for i in underflow:
        row_lw = lw_buffer[i].copy()
        row_lw[tail[i, in_tail[i]]] = tail_lw[i, in_tail[i]]
        elpd[i], relative_error[i], sum_w2[i], normalised = _elpd_in_log_space(log_lik[i], row_lw)
        if log_weights_out is not None:
            log_weights_out[i] = normalised
    return lppd, elpd, psis.pareto_k, mcse_elpd(relative_error, r_eff), r_eff / sum_w2


def _tis_elpd(log_lik: np.ndarray, r_eff: np.ndarray) -> list[np.ndarray]:
    """elpd, MCSE and ESS of rows (n_cols, n_draws) by truncated importance sampling: the
    ratios ``1 / p(x_n | theta_s)`` cut at their mean times ``sqrt(S)`` (Ionides 2008, as
    R loo's ``tis``), self-normalised; the MCSE and ESS as for PSIS. Rows with ``-inf``
    (impossible observations) come out NaN and are set by the caller."""
    n_draws = log_lik.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        log_ratios = -log_lik
        log_mean = exp_and_logsumexp(log_ratios)[1] - np.log(n_draws)
        log_weights = np.minimum(log_ratios, (log_mean + 0.5 * np.log(n_draws))[:, None])
        normalised = log_weights - exp_and_logsumexp(log_weights)[1][:, None]
        terms = normalised + log_lik
        elpd = exp_and_logsumexp(terms)[1]
        w, c = np.exp(normalised), np.exp(terms - elpd[:, None])
        relative_error = np.sqrt(np.sum((c - w) ** 2, axis=1))
        ess = r_eff / np.sum(w**2, axis=1)
    return [elpd, mcse_elpd(relative_error, r_eff), ess]


def _minimum_with_stand_in(rows: np.ndarray, which=slice(None)):
    """Each row's minimum and whether it is -inf (an impossible observation), such rows
    of ``rows[which]`` changed in place to a stand-in (-inf -> 0) whose results are
    replaced afterwards; the minima are those of the stand-ins."""
    body = rows[which].min(axis=1)
    impossible = body == -np.inf
    if impossible.any():
        indices = np.arange(len(rows))[which][impossible]
        stand_in = rows[indices]
        stand_in[np.isneginf(stand_in)] = 0.0
        rows[indices] = stand_in
        body[impossible] = stand_in.min(axis=1)
    return body, impossible


def _psis_elpd_fused(log_lik, tail_len, r_eff, ties, scratch, expect=None):
    """:func:`_psis_elpd` (PSIS) by the compiled per-row kernel, the rows it leaves (ties,
    wide ranges, k-hat far above 1, impossible observations...) by :func:`_psis_elpd`.

    Also returns the mask of the rows left, (minima, impossible) as
    :func:`_minimum_with_stand_in` (the kernel finds the minima of the rows it does) and,
    with ``expect`` (K, n_draws), (rows whose expectations the kernel computed, those
    expectations (n_rows, K)), else None.
    """
    from bayesij.array.kernels.psis import fused_psis_loo  # compiles (or loads) on first use

    fused = fused_psis_loo(log_lik, tail_len, expect, ties)
    lppd, elpd, k, body = fused.lppd, fused.elpd, fused.pareto_k, fused.minimum
    with np.errstate(divide="ignore"):
        ess = r_eff / fused.sum_w2
    mcse = np.full(len(log_lik), np.nan)
    mcse[fused.done] = mcse_elpd(fused.relative_error[fused.done], r_eff[fused.done])
    impossible = np.zeros(len(log_lik), dtype=bool)
    left = np.flatnonzero(~fused.done)
    if left.size:
        body[left], impossible[left] = _minimum_with_stand_in(log_lik, left)
        results = _psis_elpd(
            log_lik[left], body[left], tail_len[left], r_eff[left], True, ties, scratch
        )
        for values, part in zip((lppd, elpd, k, mcse, ess), results, strict=True):
            values[left] = part
    means = None if expect is None else (fused.expected & fused.done, fused.expectations)
    return lppd, elpd, k, mcse, ess, ~fused.done, (body, impossible), means


def _general_means(rows, body, tails, r_eff, base, ties, scratch, saved, expect, which, out):
    """Leave-one-out means of ``expect`` (K, n_draws) for the rows ``which`` (mask) into
    ``out`` (K, n_rows): from the saved log-weights when there are any, else from the
    general path's weights of just those rows."""
    rows_left = np.flatnonzero(which)
    if not rows_left.size:
        return
    if saved is not None:
        log_weights = saved[rows_left]
    else:
        log_weights = np.empty((rows_left.size, rows.shape[1]))
        _psis_elpd(
            rows[rows_left],
            body[rows_left],
            tails[rows_left],
            r_eff[rows_left],
            base == "psis",
            ties,
            scratch,
            log_weights,
        )
    out[:, rows_left] = expect @ np.exp(log_weights).T


#: Below this sum of weights (scaled to the largest raw ratio) a row is redone in log space.
_TINY_TOTAL = 1e-100


def weighted_elpd(log_lik: np.ndarray, log_weights: np.ndarray) -> tuple[float, float, float]:
    """``log sum_s w_s exp(l_s)`` for one column of draws with (smoothed) log-weights, its
    Monte Carlo SE (R loo's method, as :func:`mcse_elpd`, r_eff 1) and the ESS
    ``1 / sum_s w_s^2``; computed in log space."""
    elpd, mcse, ess = weighted_elpds(log_lik[None], log_weights[None])
    return float(elpd[0]), float(mcse[0]), float(ess[0])


def weighted_elpds(log_lik: np.ndarray, log_weights: np.ndarray):
    """:func:`weighted_elpd` of each row of (N, S) arrays: ``elpd``, ``mcse`` and ``ess``,
    each (N,)."""
    normalised = log_weights - exp_and_logsumexp(log_weights)[1][:, None]
    terms = normalised + log_lik
    elpd = exp_and_logsumexp(terms)[1]
    w, c = np.exp(normalised), np.exp(terms - elpd[:, None])
    relative_error = np.sqrt(np.sum((c - w) ** 2, axis=1))
    mcse = mcse_elpd(relative_error, np.ones(elpd.size))
    return elpd, mcse, 1.0 / np.sum(w**2, axis=1)


def _elpd_in_log_space(log_lik: np.ndarray, log_weights: np.ndarray):
    """elpd, relative error ``sqrt(sum_s (c_s - w_s)^2)``, ``sum_s w_s^2`` and the
    normalised log-weights of one row (n_draws,), every weight normalised in log space
    before it is exponentiated (no underflow whatever the spread of the log-weights)."""
    normalised = log_weights - exp_and_logsumexp(log_weights)[1]
    terms = normalised + log_lik
    elpd = float(exp_and_logsumexp(terms)[1])
    w, c = np.exp(normalised), np.exp(terms - elpd)
    return elpd, float(np.sqrt(np.sum((c - w) ** 2))), float(np.sum(w**2)), normalised


def _lppd_from_ratios(
    ratios: np.ndarray, body: np.ndarray, log_lik: np.ndarray, spare: np.ndarray
) -> np.ndarray:
    """``log mean_s exp(l_s)`` from ``ratios = exp(body - l_s)``: ``body + log mean 1/r_s``.

    A division is much cheaper than an exp. Rows whose ratios leave the normal float range
    (a log-likelihood range above about 700) are done directly with a log-sum-exp.
    """
    with np.errstate(over="ignore", divide="ignore"):  # underflowed ratios: handled below
        np.divide(1.0, ratios, out=spare)
        total = spare.sum(axis=1)
        lppd = body + np.log(total) - np.log(ratios.shape[1])
    wide = ~(total < 1e300)
    if wide.any():
        lppd[wide] = exp_and_logsumexp(log_lik[wide])[1] - np.log(ratios.shape[1])
    return lppd


def _ij_elpd(log_lik: np.ndarray) -> np.ndarray:
    """``log(E[p] - Cov(p, l))`` of rows, with ``p`` scaled by ``exp(-max l)``."""
    scaled, _ = exp_and_logsumexp(log_lik)
    top = log_lik.max(axis=1)
    mean = scaled.mean(axis=1)
    centred = log_lik - log_lik.mean(axis=1, keepdims=True)
    covariance = np.einsum("ij,ij->i", scaled - mean[:, None], centred) / (log_lik.shape[1] - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(mean - covariance) + top


def _cumulant_elpd(log_lik: np.ndarray) -> np.ndarray:
    moments = log_lik_moments(log_lik.T, check=False)  # rows checked by loo_pointwise
    k2, k3 = moments.central2, moments.central3
    k4 = moments.central4 - 3 * k2**2
    return moments.mean - k2 / 2 + k3 / 6 - k4 / 24


def loo_pointwise(
    log_lik,
    *,
    method: str = "psis",
    r_eff=None,
    chain_ids=None,
    tail_rule: str = "ceil",
    ties: str = "above",
    check: bool = True,
    save_log_weights: bool = False,
) -> LooArrays:
    """Pointwise approximate leave-one-out elpd from posterior draws, chunked over observations.

    Parameters
    ----------
    log_lik : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs)
        Finite or ``-inf``. An observation impossible under some draw has an infinite
        importance ratio there, so its importance-sampling estimate of ``p(x_n | x_-n)`` is
        0: every method reports ``elpd = -inf``, ``p_loo = inf``, ``pareto_k = inf``.
    method : {"psis", "is", "tis", "ij", "cumulant"}, default "psis"
    r_eff : float or array_like of shape (n_obs,), optional
        Relative efficiency of ``exp(l_n)``; default: computed from the chains as R loo's
        ``relative_eff`` does (1 for a single chain gives no autocorrelation correction only
        if the draws are independent).
    chain_ids : array_like of shape (n_draws,), optional
        Chains of the rows of 2-D input.
    tail_rule : {"ceil", "floor"}, default "ceil"
        Rounding of the tail length: "ceil" as R loo (<= 2.10) and ArviZ 0.23, "floor" as the
        PSIS paper, the posterior package and arviz-stats.
    ties : {"above", "position", "quicksort"}, default "above"
        Draws tied with the tail cutoff: left out of the tail as ArviZ 0.23, kept by stable
        position as R loo, or by NumPy's sort as arviz-stats (see
        :func:`bayesij.array.psis.psis_chunk`).
    check : bool, default True
        Check the values (NaN, +inf, non-finite quantities); ``False`` for input a
        :class:`~bayesij.data.posterior.Posterior` or a caller has already checked.
    save_log_weights : bool, default False
        Keep the normalised importance log-weights (an array as large as ``log_lik``).

    Returns
    -------
    LooArrays

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    .. [2] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [3] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [4] Watanabe, S. (2010). JMLR 11, 3571-3594.
    """
    if method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")
    return loo_methods(
        log_lik,
        (method,),
        r_eff=r_eff,
        chain_ids=chain_ids,
        tail_rule=tail_rule,
        ties=ties,
        check=check,
        save_log_weights=save_log_weights,
    )[method]


def loo_methods(
    log_lik,
    methods: tuple[str, ...] = METHODS,
    *,
    r_eff=None,
    chain_ids=None,
    tail_rule: str = "ceil",
    ties: str = "above",
    check: bool = True,
    save_log_weights: bool = False,
    expectation_draws: np.ndarray | None = None,
    each_chunk=None,
    r_eff_rule: str = "chains",
) -> dict[str, LooArrays]:
    """Several LOO methods from one pass over the draws: :func:`loo_pointwise` for each of
    ``methods``, sharing the Pareto smoothing (k-hat, lppd, r_eff) of every chunk.

    ``save_log_weights`` keeps the log-weights of PSIS (or of IS when it is the only
    importance-sampling method asked for). ``expectation_draws`` (n_draws_total, K), draws
    of K quantities in the order of the log-likelihood's draws: their leave-one-out means
    under those weights come from the same pass (:attr:`LooArrays.expectations`), which is
    how the linearity check of the audit gets its importance-sampling changes without a
    second smoothing or a stored copy of the weights. ``each_chunk(matrix, chunk, rows)``,
    when given, is called on the threads with each chunk of observations (a slice) of the
    (n_draws_total, n_obs) matrix and its values transposed to rows (only to be read):
    another per-observation pass over the same rows (the audit's WAIC terms,
    :func:`bayesij.array.waic.terms_of_rows`) without a second transposition.
    ``r_eff_rule``: how each chunk's r_eff is computed where ``r_eff`` is None:
    ``"chains"``, R loo's ``relative_eff`` up to 2.8 (whole chains); ``"split"``, R loo's
    from 2.9 on (split chains, :func:`bayesij.array.ess.split_log_lik_relative_eff_rows`).
    """
    if r_eff_rule not in R_EFF_RULES:
        raise fail("r_eff_rule", repr(r_eff_rule), f"one of {tuple(R_EFF_RULES)}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise fail("methods", repr(methods), f"a non-empty tuple of {METHODS}")
    if ties not in TIE_RULES:
        raise fail(
            "ties",
            repr(ties),
            "'above' (ArviZ 0.23), 'position' (R loo) or 'quicksort' (arviz-stats)",
        )
    check_tail_rule(tail_rule)
    matrix, chains = log_lik_draws(log_lik, chain_ids, check, keep_float32=True)
    n_obs = matrix.shape[1]
    loo_pass = _LooPass(
        matrix,
        tuple(methods),
        None if r_eff is None else checked_r_eff(r_eff, n_obs),
        (*chain_grouping(chains), R_EFF_RULES[r_eff_rule]),  # no reordering copy
        tail_rule,
        ties,
        save_log_weights,
        expectation_draws,
        each_chunk,
    )
    map_chunks(loo_pass.chunk, loo_pass.chunks)
    return loo_pass.results()


def _is_rows(rows, body, tails, r_eff, ties, scratch):
    """Plain importance sampling beside PSIS: the same ratios, not smoothed."""
    _, elpd, _, mcse, ess = _psis_elpd(rows, body, tails, r_eff, False, ties, scratch)
    return elpd, mcse, ess


def _tis_rows(rows, body, tails, r_eff, ties, scratch):
    return _tis_elpd(rows, r_eff)


def _ij_rows(rows, *_):
    missing = np.full(len(rows), np.nan)  # no MCSE or ESS of their own
    return _ij_elpd(rows), missing, missing


def _cumulant_rows(rows, *_):
    missing = np.full(len(rows), np.nan)  # no MCSE or ESS of their own
    return _cumulant_elpd(rows), missing, missing


#: The methods computed beside the pass's smoothing, one function each:
#: ``(rows, minima, tails, r_eff, ties, scratch) -> (elpd, mcse, ess)`` of a chunk's rows.
ELPD_ROWS = {"is": _is_rows, "tis": _tis_rows, "ij": _ij_rows, "cumulant": _cumulant_rows}


class _LooPass:
    """One pass of :func:`loo_methods` over chunks of observations (on threads): each
    chunk's rows transposed once, smoothed once by the base method (PSIS, or IS alone),
    the other methods from :data:`ELPD_ROWS`, the expectations and impossible rows."""

    def __init__(
        self, matrix, methods, given, by_chain, tail_rule, ties, save, expectation_draws, each
    ):
        n_draws, n_obs = matrix.shape
        self.matrix, self.methods, self.given, self.by_chain = matrix, methods, given, by_chain
        self.tail_rule, self.ties, self.each_chunk = tail_rule, ties, each
        self.base = "is" if "is" in methods and "psis" not in methods else "psis"
        self.out = np.full((4, n_obs), np.nan)  # lppd, k-hat, r_eff, constant
        self.per_method = {m: np.full((3, n_obs), np.nan) for m in methods}  # elpd, mcse, ess
        self.log_weights = np.empty((n_obs, n_draws)) if save else None
        self.expect = self.means = None
        if expectation_draws is not None:
            self.expect = np.ascontiguousarray(np.asarray(expectation_draws, dtype=float).T)
            self.means = np.full((self.expect.shape[0], n_obs), np.nan)  # (K, n_obs)
        self.chunks = obs_chunks(n_obs, 10 * n_draws + 60 * 250)
        self.buffers = threading.local()

    def _rows(self, chunk: slice) -> tuple[np.ndarray, tuple]:
        """The chunk's rows (n_cols, S) in this thread's buffer, and its scratch."""
        buffers = self.buffers
        if not hasattr(buffers, "rows"):  # reusable buffers, one set per thread
            shape = (self.chunks[0].stop, self.matrix.shape[0])
            buffers.rows = np.empty(shape)
            buffers.scratch = (np.empty(shape), np.empty(shape), np.empty(shape))
        return transpose_columns(self.matrix, chunk, buffers.rows), buffers.scratch

    def chunk(self, chunk: slice) -> None:
        """Every result of the observations ``chunk``, written into the pass's arrays."""
        rows, scratch = self._rows(chunk)
        if self.each_chunk is not None:  # before anything below may write to the rows
            self.each_chunk(self.matrix, chunk, rows)
        saved = None if self.log_weights is None else self.log_weights[chunk]
        efficiency = self.given[chunk] if self.given is not None else None
        smoothed = self._smoothed(rows, chunk, efficiency, saved, scratch)
        lppd, k, efficiency, tails, body, impossible, checked = smoothed
        for m in self.methods:
            if m != self.base:
                function = ELPD_ROWS[m]
                self.per_method[m][:, chunk] = function(
                    rows, body, tails, efficiency, self.ties, scratch
                )
        constant = np.zeros(len(rows), dtype=bool)  # a constant row is never done fused
        constant[checked] = (rows[checked] == rows[checked, :1]).all(axis=1)
        self.out[:, chunk] = [lppd, k, efficiency, constant]
        if impossible.any():
            self._impossible(np.arange(chunk.start, chunk.stop)[impossible], saved, impossible)

    def _smoothed(self, rows, chunk, efficiency, saved, scratch):
        """The base method's estimates of the chunk (into ``per_method``) and expectations
        (into ``means``); returns lppd, k-hat, r_eff, tail lengths, the rows' minima, which
        are impossible and which the compiled kernel left (checked for constants)."""
        fused = self.base == "psis" and saved is None
        stand_in = efficiency is None or not fused  # the fused kernel finds the minima
        if efficiency is None:  # of the rows as they are: exp(-inf) = 0, as R loo's
            efficiency = _r_eff_rows(rows, self.by_chain)
        if stand_in:
            body, impossible = _minimum_with_stand_in(rows)
        tails = tail_length(self.matrix.shape[0], efficiency, self.tail_rule)
        expected = np.zeros(len(rows), dtype=bool)
        if fused:
            lppd, elpd, k, mcse, ess, checked, found, fused_means = _psis_elpd_fused(
                rows, tails, efficiency, self.ties, scratch, self.expect
            )
            if self.given is not None:
                body, impossible = found
            if fused_means is not None and self.means is not None:
                expected, values = fused_means
                self.means[:, np.arange(chunk.start, chunk.stop)[expected]] = values[expected].T
        else:
            lppd, elpd, k, mcse, ess = _psis_elpd(
                rows, body, tails, efficiency, self.base == "psis", self.ties, scratch, saved
            )
            checked = np.ones(len(rows), dtype=bool)
        if self.base in self.per_method:  # else smoothed for k-hat and lppd alone
            self.per_method[self.base][:, chunk] = [elpd, mcse, ess]
        if self.expect is not None and self.means is not None:
            which = ~expected & ~impossible
            _general_means(
                rows, body, tails, efficiency, self.base, self.ties, scratch, saved,
                self.expect, which, self.means[:, chunk],
            )  # fmt: skip
        return lppd, k, efficiency, tails, body, impossible, checked

    def _impossible(self, columns: np.ndarray, saved, impossible: np.ndarray) -> None:
        """Observations impossible at some draw: lppd from the raw columns, k-hat inf,
        every method's elpd -inf, and (saved) all the weight on the draws where they are
        impossible."""
        n_draws = self.matrix.shape[0]
        self.out[0, columns] = logsumexp_columns(read_columns(self.matrix, columns))
        self.out[0, columns] -= np.log(n_draws)
        self.out[1, columns] = np.inf
        for values in self.per_method.values():
            values[:, columns] = np.array([[-np.inf], [np.nan], [np.nan]])
        if saved is not None:
            rows_lw = saved[impossible]
            rows_lw[:] = np.where(np.isneginf(self.matrix[:, columns].T), 0.0, -np.inf)
            rows_lw -= np.log((rows_lw == 0).sum(axis=1, keepdims=True))
            saved[impossible] = rows_lw

    def results(self) -> dict[str, LooArrays]:
        lppd, pareto_k, efficiency, constant = self.out
        tail_len = tail_length(self.matrix.shape[0], efficiency, self.tail_rule)
        log_weights = None if self.log_weights is None else self.log_weights.T
        return {
            m: LooArrays(
                values[0],
                lppd - values[0],
                lppd,
                pareto_k,
                values[1],
                values[2],
                efficiency,
                tail_len,
                constant == 1,
                log_weights if m == self.base else None,
                self.means if m == self.base else None,
            )
            for m, values in self.per_method.items()
        }


def _r_eff_rows(rows: np.ndarray, by_chain: tuple) -> np.ndarray:
    """R loo's relative efficiency of ``exp(l_n)`` for rows (n_cols, n_draws), by the rule
    of ``by_chain`` (the draws' order by chain, the number of chains, the rule's function
    of :data:`R_EFF_RULES`)."""
    order, n_chains, rule = by_chain
    grouped = rows if order is None else rows[:, order]  # each chain's draws contiguous
    return rule(grouped, n_chains)


#: How a chunk's r_eff is computed from its rows when none is given: R loo's rule up to 2.8
#: (whole chains) and from 2.9 on (split chains).
R_EFF_RULES = {"chains": log_lik_relative_eff_rows, "split": split_log_lik_relative_eff_rows}
