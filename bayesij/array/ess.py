"""Relative efficiency of many columns of MCMC draws at once: as R loo's ``relative_eff``,
and as ArviZ's split-chain ``ess(relative=True)`` (:func:`split_relative_ess`), so that no
estimator depends on which ArviZ generation is installed.

R loo computes, for each observation, the effective sample size of ``exp(log_lik[, n])`` by
Geyer's initial monotone sequence over chains (not split, not rank-normalised) and divides it
by the number of draws. This module does the same for all observations together: the
autocovariances by FFT of a chunk of columns, Geyer's truncation and monotone pairing as
array operations.
"""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import as_chains, check_chain_ids, fail
from bayesij.array.numeric import obs_chunks

__all__ = [
    "relative_eff",
    "relative_eff_rows",
    "log_lik_relative_eff",
    "exp_of_rows",
    "log_lik_relative_eff_rows",
    "split_log_lik_relative_eff_rows",
    "fft_next_good_size",
    "split_relative_ess",
    "tail_relative_ess_rows",
    "mean_relative_ess",
]


def fft_next_good_size(n: int) -> int:
    """Smallest integer >= n whose only prime factors are 2, 3 and 5 (at least 2)."""
    if n <= 2:
        return 2
    while True:
        m = n
        for factor in (2, 3, 5):
            while m % factor == 0:
                m //= factor
        if m <= 1:
            return n
        n += 1


def _autocovariance(draws: np.ndarray) -> np.ndarray:
    """Autocovariances along the last axis (draws of one chain), same shape as ``draws``.

    Normalised as R loo's ``autocovariance``: ``M / n^2`` times the lagged sums of products,
    with ``M`` the FFT size before doubling (the biased estimate when ``M = n``).
    """
    n = draws.shape[-1]
    size = fft_next_good_size(n)
    centred = draws - draws.mean(axis=-1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=2 * size, axis=-1)
    sums = np.fft.irfft(spectrum.real**2 + spectrum.imag**2, n=2 * size, axis=-1)[..., :n]
    return sums * size / n**2


def _geyer_stops(rho: np.ndarray, n_draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair sums ``rho_2j + rho_2j+1`` (n_pairs, n_columns) of autocorrelations (n_lags,
    n_columns) and where Geyer's loop stops: after the first pair that is not positive, or
    once ``t = 2j >= n_draws - 5`` (all False where it runs past the lags given)."""
    n_pairs = rho.shape[0] // 2
    pairs = rho[0 : 2 * n_pairs : 2] + rho[1 : 2 * n_pairs : 2]  # lags (2j, 2j + 1)
    t_values = 2 * np.arange(n_pairs)
    stop = ~(pairs > 0) | (t_values[:, None] >= n_draws - 5)
    # R loo checks t < n - 5 before the first pair too: chains of 5 draws or fewer stop at
    # once (max_t = 0, tau = 2: r_eff 0.5), whatever the pair.
    stop[0] = ~(pairs[0] > 0) | (n_draws <= 5)
    return pairs, stop


def _geyer_tau(rho: np.ndarray, n_total: int, n_draws: int | None = None) -> np.ndarray:
    """Integrated autocorrelation time from autocorrelations (n_lags, n_columns), as R loo.

    ``n_draws`` (per chain) defaults to ``n_lags``; fewer lags may be given for columns
    whose sequence stops within them (:func:`_geyer_stops`)."""
    n, n_columns = rho.shape
    columns = np.arange(n_columns)
    n_pairs = n // 2
    pairs, stop = _geyer_stops(rho, n if n_draws is None else n_draws)
    first = np.argmax(stop, axis=0)
    first[~stop.any(axis=0)] = n_pairs - 1
    max_t = 2 * first
    # Monotone: each pair before the stopping one is at most the previous (adjusted) pair.
    adjusted = np.minimum.accumulate(np.where(np.isnan(pairs), np.inf, pairs), axis=0)
    before_stop = np.arange(n_pairs)[:, None] < first[None, :]
    body = np.where(before_stop, adjusted, 0.0).sum(axis=0)
    last_even = rho[max_t, columns]
    last_pair = pairs[first, columns]
    last = np.where((last_even > 0) | (last_pair >= 0), last_even, 0.0)
    tau = -1 + 2 * body + last
    tau = np.where(max_t == 0, 2.0, tau)  # R's sum(rho[1:0]) when the first pair fails
    return np.maximum(tau, 1 / np.log10(n_total))


def relative_eff(values, chain_ids=None) -> np.ndarray:
    """Relative effective sample size ``ESS / S`` of each column, as R loo's ``relative_eff``.

    Parameters
    ----------
    values : array_like of shape (n_chains, n_draws, n_columns) or (n_draws, n_columns)
        Draws; for PSIS-LOO, ``exp(log_lik)`` (any positive scaling per column gives the
        same result). 2-D input is one chain unless ``chain_ids`` is given.
    chain_ids : array_like of shape (n_draws,), optional
        Chain of each row of 2-D input; every chain needs the same number of draws.

    Returns
    -------
    ndarray of shape (n_columns,)
        A column constant over all draws gets R loo's value 0.5.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [2] Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical Science 7(4).
    """
    array = np.asarray(values, dtype=float)
    if array.ndim == 2:
        array = as_chains(array, check_chain_ids(chain_ids, array.shape[0]))
    if array.ndim != 3:
        raise fail(
            "values",
            f"shape {array.shape}",
            "(n_chains, n_draws, n_columns) or (n_draws, n_columns)",
        )
    n_chains, n_draws, n_columns = array.shape
    if n_draws < MIN_CHAIN_DRAWS:
        raise fail(
            "values", f"{n_draws} draws per chain", f"at least {MIN_CHAIN_DRAWS} draws per chain"
        )
    out = np.empty(n_columns)
    for chunk in obs_chunks(n_columns, 6 * n_chains * n_draws):
        rows = np.ascontiguousarray(np.moveaxis(array[:, :, chunk], 2, 0), dtype=np.float64)
        out[chunk] = relative_eff_rows(rows)
    return out


def log_lik_relative_eff(log_lik: np.ndarray, split: bool = False) -> np.ndarray:
    """R loo's relative efficiency of ``exp(log_lik)``, chunked, shape (n_obs,): up to 2.8's
    (whole chains, :func:`log_lik_relative_eff_rows`) or, with ``split``, 2.9's on (split
    chains, :func:`split_log_lik_relative_eff_rows`).

    Parameters
    ----------
    log_lik : ndarray of shape (n_chains, n_draws, n_obs)
        Each column is rescaled by its maximum before ``exp`` (ESS is scale-free), so large
        log densities cannot overflow.
    split : bool, default False
    """
    n_chains, n_draws, n_obs = log_lik.shape
    of_rows = split_log_lik_relative_eff_rows if split else log_lik_relative_eff_rows
    out = np.empty(n_obs)
    for chunk in obs_chunks(n_obs, 6 * n_chains * n_draws):
        rows = np.ascontiguousarray(np.moveaxis(log_lik[:, :, chunk], 2, 0), dtype=np.float64)
        out[chunk] = of_rows(rows.reshape(len(rows), -1), n_chains)
    return out


#: Lags summed directly by :func:`log_lik_relative_eff_rows` and :func:`split_relative_ess`
#: before they turn to the FFT.
SHORT_LAGS = 16


def log_lik_relative_eff_rows(log_lik: np.ndarray, n_chains: int) -> np.ndarray:
    """R loo's relative efficiency of ``exp(log_lik)`` for rows of draws, shape (n_rows,).

    ``log_lik`` (n_rows, n_chains * n_draws) holds each chain's draws contiguously. Geyer's
    sequence usually stops within a few lags: those are summed directly by a compiled kernel
    (:func:`bayesij.array.kernels.autocorrelation.short_lag_autocorrelations`) and the
    sequence is taken from them compiled too
    (:func:`~bayesij.array.kernels.autocorrelation.geyer_relative_eff`, equal to the bit to
    :func:`_geyer_tau`); only rows whose sequence runs past ``SHORT_LAGS`` lags get every lag
    by FFT (:func:`relative_eff_rows`). Equal to the FFT for every row up to rounding.
    """
    n_rows, n_total = log_lik.shape
    n_draws = n_total // n_chains
    if n_draws < MIN_CHAIN_DRAWS or n_draws <= SHORT_LAGS:
        return relative_eff_rows(exp_of_rows(log_lik.reshape(n_rows, n_chains, n_draws)))
    from bayesij.array.kernels.autocorrelation import (  # compiled: numba
        geyer_relative_eff,
        short_lag_autocorrelations,
    )

    rho = short_lag_autocorrelations(log_lik, n_chains, fft_next_good_size(n_draws), SHORT_LAGS)
    r_eff, stops = geyer_relative_eff(rho, n_total, n_draws)
    if not stops.all():
        long = log_lik[~stops].reshape(-1, n_chains, n_draws)
        r_eff[~stops] = relative_eff_rows(exp_of_rows(long))
    return r_eff


def split_log_lik_relative_eff_rows(log_lik: np.ndarray, n_chains: int) -> np.ndarray:
    """R loo's relative efficiency of ``exp(log_lik)`` from 2.9 on (``posterior::ess_basic``:
    the ESS of the mean over split chains, over the draws) for rows of draws, shape
    (n_rows,): :func:`split_relative_ess` of ``exp(l - max l)``, the same numbers.

    ``log_lik`` (n_rows, n_chains * n_draws) holds each chain's draws contiguously. Each
    chain's halves (the middle draw of an odd chain left out, as ArviZ leaves it) are
    ``2 n_chains`` chains; their first :data:`SHORT_LAGS` autocorrelations are summed
    directly by the compiled kernel of :func:`log_lik_relative_eff_rows`, with ArviZ's
    normalisation (biased autocovariances), and Geyer's sequence is ArviZ's
    (:func:`_geyer_of_rho`). Rows the kernel does not decide — a sequence running past
    those lags, a non-finite value, a row constant to 1e-8 (ArviZ's near-constant columns)
    — are :func:`split_relative_ess`'s own way.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
       Rank-normalization, folding, and localization: an improved R-hat for assessing
       convergence of MCMC. Bayesian Analysis 16(2), 667-718.
    """
    from bayesij.array.kernels.autocorrelation import short_lag_autocorrelations  # numba

    n_rows, n_total = log_lik.shape
    n_draws = n_total // n_chains
    half = n_draws // 2
    out = np.full(n_rows, np.nan)
    if half <= SHORT_LAGS:  # short chains: every lag, ArviZ's way
        slow = np.arange(n_rows)
    else:
        chains = log_lik.reshape(n_rows, n_chains, n_draws)
        if n_draws % 2:  # the middle draw of each chain left out
            chains = np.concatenate([chains[:, :, :half], chains[:, :, n_draws - half :]], axis=2)
        split = chains.reshape(n_rows, 2 * n_chains * half)
        rho = short_lag_autocorrelations(split, 2 * n_chains, half, SHORT_LAGS)
        out, decided = _geyer_of_rho(np.ascontiguousarray(rho.T), half, 2 * n_chains)
        with np.errstate(invalid="ignore"):  # a row impossible at every draw: NaN
            span = np.ptp(split, axis=1)
        slow = np.flatnonzero(~decided | ~np.isfinite(span) | (span < 1e-8))
    if slow.size:
        chains = log_lik[slow].reshape(slow.size, n_chains, n_draws)
        out[slow] = split_relative_ess(np.moveaxis(exp_of_rows(chains), 0, 2), "mean")
    return out


def exp_of_rows(log_values: np.ndarray) -> np.ndarray:
    """``exp`` of each row (over its trailing axes) after subtracting the row's maximum."""
    flat = log_values.reshape(log_values.shape[0], -1)
    top = flat.max(axis=1)
    top[~np.isfinite(top)] = 0.0
    return np.exp(log_values - top.reshape((-1,) + (1,) * (log_values.ndim - 1)))


#: Fewest draws per chain from which autocorrelations are estimated (R loo's ``ess_rfun``
#: returns NA below 3).
MIN_CHAIN_DRAWS = 3


def relative_eff_rows(draws: np.ndarray) -> np.ndarray:
    """:func:`relative_eff` of rows: ``draws`` of shape (n_columns, n_chains, n_draws).

    Chains of fewer than ``MIN_CHAIN_DRAWS`` draws carry no information on autocorrelation:
    the draws are then taken as independent (relative efficiency 1).
    """
    n_columns, n_chains, n_draws = draws.shape
    if n_draws < MIN_CHAIN_DRAWS:
        return np.ones(n_columns)
    acov = _autocovariance(draws)
    mean_var = acov[:, :, 0].mean(axis=1) * n_draws / (n_draws - 1)
    var_plus = mean_var * (n_draws - 1) / n_draws
    if n_chains > 1:
        var_plus = var_plus + draws.mean(axis=2).var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]
    rho[:, 0] = 1.0
    n_total = n_chains * n_draws
    return n_total / _geyer_tau(np.ascontiguousarray(rho.T), n_total) / n_total


def split_relative_ess(draws, method: str = "mean", prob: float = 0.05) -> np.ndarray:
    """ArviZ's relative effective sample size of each column: the split-chain ESS of the mean
    (``method="mean"``) or of the tails (``"tail"``: the smaller ESS of the indicators of the
    draws at or below the ``prob`` and the ``1 - prob`` quantiles), divided by the number of
    draws, as ``ess(..., relative=True)`` computes it in ArviZ 0.23 and arviz-stats 1.x.

    Parameters
    ----------
    draws : ndarray of shape (n_chains, n_draws, n_columns)
    method : {"mean", "tail"}
    prob : float, default 0.05

    Returns
    -------
    ndarray of shape (n_columns,)
        NaN for a column with a NaN or fewer than 4 draws per chain; a column constant (to
        float resolution) gets the number of split draws, as ArviZ reports it.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
       Rank-normalization, folding, and localization: an improved R-hat for assessing
       convergence of MCMC. Bayesian Analysis 16(2), 667-718.
    .. [2] Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical Science 7(4).
    """
    if method not in ("mean", "tail"):
        raise fail("method", repr(method), "'mean' or 'tail'")
    columns = np.moveaxis(np.asarray(draws, dtype=float), 2, 0)  # (K, n_chains, n_draws)
    if columns.shape[2] < 4:
        return np.full(columns.shape[0], np.nan)
    if method == "mean":
        return _split_ess_columns(columns)
    flat = columns.reshape(columns.shape[0], -1)
    quantiles = np.quantile(flat, [prob, 1.0 - prob], axis=1)  # one partial sort for both
    ess = [_split_ess_columns(columns <= q[:, None, None]) for q in quantiles]
    return np.minimum(*ess)


def tail_relative_ess_rows(
    rows: np.ndarray, extremes: tuple[np.ndarray, np.ndarray], prob: float = 0.05
) -> np.ndarray:
    """:func:`split_relative_ess` ``(rows.T[None], "tail", prob)`` of finite rows, each row
    one chain, without sorting them: the quantiles from the rows' extremes, the first
    :data:`SHORT_LAGS` autocovariances of the indicators compiled
    (:mod:`bayesij.array.kernels.tails`), and only rows whose Geyer sequence runs past them
    by FFT.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n), finite, ``n >= 4``
    extremes : tuple of two ndarrays of shape (n_rows, count)
        :func:`bayesij.array.kernels.tails.row_extremes` of ``rows``, ``count`` large
        enough to hold the order statistics of both quantiles.
    prob : float, default 0.05

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    from bayesij.array.kernels.tails import indicator_autocovariances, row_quantiles

    n = rows.shape[1]
    half = n // 2
    quantiles = row_quantiles(*extremes, n, [prob, 1.0 - prob])
    means, acov = indicator_autocovariances(rows, quantiles, min(SHORT_LAGS, half))
    ess = np.empty((2, rows.shape[0]))
    for j in range(2):
        out, decided, quiet = _geyer_relative_ess(means[:, j], acov[:, j], half)
        constant = quiet[means[quiet, j, 0] == means[quiet, j, 1]]  # one value in both halves
        out[constant] = float(2 * half)
        decided[constant] = True
        rest = np.flatnonzero(~decided)
        if rest.size:
            below = rows[rest] <= quantiles[rest, j, None]
            out[rest] = _split_ess_columns(below[:, None, :])
        ess[j] = out
    return np.minimum(ess[0], ess[1])


def _split_ess_columns(columns: np.ndarray) -> np.ndarray:
    """Relative split-chain ESS of each of (K, n_chains, n_draws) columns, a chunk of
    columns at a time. Geyer's sequence usually stops within a few lags: the first
    :data:`SHORT_LAGS` autocovariances are summed directly, and only the columns whose
    sequence runs past them get every lag by FFT (:func:`_autocovariance`)."""
    half = columns.shape[2] // 2
    split = np.concatenate(
        [columns[:, :, :half], columns[:, :, columns.shape[2] - half :]], axis=1
    ).astype(float)
    out = np.empty(split.shape[0])
    for chunk in obs_chunks(split.shape[0], 4 * split.shape[1] * split.shape[2]):
        block = split[chunk]
        ess, decided = _geyer_relative_ess_columns(block, _short_autocovariance(block))
        if not decided.all():
            rest = block[~decided]
            # R loo's normalisation (M / n^2, M the padded size) made ArviZ's biased (1 / n)
            acov = _autocovariance(rest) * half / fft_next_good_size(half)
            ess[~decided] = _geyer_relative_ess_columns(rest, acov)[0]
        out[chunk] = ess
    return out


def _short_autocovariance(chains: np.ndarray) -> np.ndarray:
    """The biased autocovariances ``sum_t c_t c_t+k / n`` of (K, m, n) chains at the first
    :data:`SHORT_LAGS` lags (all of them for short chains), shape (K, m, L)."""
    n = chains.shape[2]
    centred = chains - chains.mean(axis=2, keepdims=True)
    lags = min(SHORT_LAGS, n)
    out = np.empty((*chains.shape[:2], lags))
    for k in range(lags):
        out[:, :, k] = np.einsum("kmt,kmt->km", centred[:, :, : n - k], centred[:, :, k:]) / n
    return out


def _geyer_relative_ess_columns(chains: np.ndarray, acov: np.ndarray):
    """Relative ESS of many columns' (K, m, n) split chains from their autocovariances at
    the first L lags (K, m, L), as :func:`_geyer_relative_ess` with a constant column (to
    float resolution) given ``m n``. Returns the ESS (K,) and whether the L lags decided
    it (K,)."""
    k_cols, m, n = chains.shape
    out, decided, quiet = _geyer_relative_ess(chains.mean(axis=2), acov, n)
    span = np.ptp(chains[quiet].reshape(quiet.size, m * n), axis=1)
    constant = quiet[span < np.finfo(float).resolution]
    out[constant] = float(m * n)
    decided[constant] = True
    return out, decided


def _geyer_relative_ess(means: np.ndarray, acov: np.ndarray, n: int):
    """Relative ESS of many columns' split chains of ``n`` draws from their chain means
    (K, m) and autocovariances at the first L lags (K, m, L), as ArviZ's ``_ess``:
    autocorrelations combined over chains (the between-chain variance in the denominator),
    summed over Geyer's initial positive sequence made monotone, the integrated time at
    least ``1 / log10(m n)``. ArviZ's loop reads the pairs ``rho_2j + rho_2j+1``,
    ``j = 1, 2, ...``, until one is not positive (read, kept if 0) or ``2j - 1`` reaches
    ``n - 3``; the pairs before the last read are made monotone (a running minimum of the
    pair sums, pair 0 included), and the last read pair's even lag is added where it was
    kept or is positive; a NaN NaN. Returns the ESS (K,), whether the L lags decided it
    (K,) and the columns whose within-chain variance is below 1e-24 or NaN (possibly
    constant: the caller decides)."""
    k_cols, m = means.shape
    within = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    between = np.var(means, axis=1, ddof=1) if m > 1 else np.zeros(k_cols)
    pooled = within * (n - 1.0) / n + between
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (within[:, None] - acov.mean(axis=1)) / pooled[:, None]  # (K, L)
    out, decided = _geyer_of_rho(rho, n, m)
    out[np.isnan(within)] = np.nan
    return out, decided, np.flatnonzero(~(within > 1e-24))


def _geyer_of_rho(rho: np.ndarray, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's relative ESS (K,) from the autocorrelations combined over ``m`` split chains
    of ``n`` draws at the first L lags (K, L) (:func:`_geyer_relative_ess`; lags after the
    pair where the sequence stops may be NaN), and whether the L lags decided it (K,)."""
    k_cols = rho.shape[0]
    n_pairs = rho.shape[1] // 2  # the pairs whose two lags are given
    pairs = rho[:, 0 : 2 * n_pairs : 2] + rho[:, 1 : 2 * n_pairs : 2]
    pairs[:, 0] = 1.0 + rho[:, 1]
    reads = np.arange(n_pairs)
    readable = (2 * reads - 1 < n - 3) & (reads >= 1)  # the loop's bound on t = 2j - 1
    stops = ~(pairs > 0) & readable[None, :]
    bounded = not readable[-1] or 2 * n_pairs - 1 >= n - 3  # the bound falls within L
    last_readable = int(np.flatnonzero(readable)[-1]) if readable.any() else 0
    stopped = stops.any(axis=1)
    last = np.where(stopped, np.argmax(stops, axis=1), last_readable)  # J, the last pair read
    never = ~(pairs[:, 0] > 0)  # the loop never ran
    last = np.where(never, 0, last)
    decided = stopped | never | bounded
    running = np.minimum.accumulate(np.where(np.isnan(pairs), np.inf, pairs), axis=1)
    summed = np.where(reads[None, :] < last[:, None], running, 0.0).sum(axis=1)
    rows = np.arange(k_cols)
    even, pair = rho[rows, 2 * last], pairs[rows, last]
    extra = np.where((pair >= 0) | (even > 0) | (last == 0), even, 0.0)
    tau = np.maximum(-1.0 + 2.0 * summed + extra, 1.0 / np.log10(m * n))
    with np.errstate(divide="ignore"):
        out = 1.0 / tau
    visited = reads[None, :] <= last[:, None]
    nan_read = (np.isnan(pairs) & visited).any(axis=1) | np.isnan(rho[:, 1])
    out[nan_read] = np.nan
    return out, decided


def mean_relative_ess(draws) -> float:
    """ArviZ's default ``r_eff`` for PSIS-LOO: the mean over every posterior element of its
    split-chain relative ESS of the mean; 1 for a single chain (``arviz_stats.loo`` and
    ArviZ 0.23's ``az.loo`` alike).

    Parameters
    ----------
    draws : ndarray of shape (n_chains, n_draws, n_elements)
        The posterior's draws (every variable, flattened).
    """
    draws = np.asarray(draws, dtype=float)
    if draws.shape[0] == 1:
        return 1.0
    return float(np.mean(split_relative_ess(draws, "mean")))
