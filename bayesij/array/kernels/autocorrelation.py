"""The relative efficiency of ``exp(l)``: autocorrelations summed lag by lag (four lags per
pass over the draws) until Geyer's sequence stops, as R loo's ``relative_eff`` combines them
over chains.

NumPy reference: the FFT autocovariances and the Geyer sequence (``_geyer_tau``) of
:mod:`bayesij.array.ess` (``tests/array/kernels/test_autocorrelation.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from bayesij.array.kernels.cache import CACHE
from bayesij.array.kernels.fastmath import compiled, exp, min_max, reordered, row_mean

__all__ = ["short_lag_autocorrelations", "geyer_relative_eff"]


def short_lag_autocorrelations(
    rows: np.ndarray, n_chains: int, fft_size: int, n_lags: int
) -> np.ndarray:
    """Autocorrelations of ``exp(rows)`` at lags ``0..n_lags-1`` as R loo's ``relative_eff``
    combines them over chains, each lag summed directly (no FFT).

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_chains * n_draws)
        Log values, the draws of each chain contiguous; each row is shifted by its maximum
        before ``exp`` (values below ``exp(-708)`` count as ``exp(-708)``, a change far
        below the rounding of the sums).
    n_chains : int
    fft_size : int
        R's FFT size for ``n_draws`` (:func:`bayesij.array.ess.fft_next_good_size`): its
        autocovariances are the lagged sums times ``fft_size / n_draws^2``.
    n_lags : int

    Returns
    -------
    ndarray of shape (n_lags, n_rows)
        ``rho_t = 1 - (W - mean_c acov_c(t)) / var_plus``, ``rho_0 = 1``, as
        :func:`bayesij.array.ess.relative_eff_rows` (NaN for a constant row); NaN after the
        first pair ``rho_2j + rho_2j+1`` that is not positive, where Geyer's sequence stops.
    """
    out = np.empty((n_lags, rows.shape[0]))
    _autocorrelations(np.ascontiguousarray(rows, dtype=np.float64), n_chains, fft_size, out)
    return out


@compiled
def _autocorrelations(rows, n_chains, fft_size, out):
    n_total = rows.shape[1]
    n = n_total // n_chains
    values = np.empty(n_total)
    means = np.empty(n_chains)
    lagged = np.empty(4)
    for r in range(rows.shape[0]):
        row = rows[r]
        _, high = min_max(row)
        out[:, r] = math.nan
        out[0, r] = 1.0
        if not math.isfinite(high):  # every draw impossible: constant, as R loo's 0.5
            continue
        for c in range(n_chains):  # each chain's exp(l - high), centred
            chain = slice(c * n, (c + 1) * n)
            means[c] = _centred_exp(row[chain], high, values[chain]) / n
        scale = fft_size / n**2 / n_chains
        for t in range(min(out.shape[0], n)):
            if t % 4 == 0:  # lags t..t+3 in one pass over the draws
                _lagged_sums(values, n, n_chains, t, lagged)
            if t == 0:
                mean_var = lagged[0] * scale * n / (n - 1)
                var_plus = mean_var * (n - 1) / n
                if n_chains > 1:
                    grand = row_mean(means)
                    for c in range(n_chains):
                        var_plus += (means[c] - grand) ** 2 / (n_chains - 1)
                continue
            out[t, r] = 1 - (mean_var - lagged[t % 4] * scale) / var_plus
            if t % 2 == 1 and not out[t - 1, r] + out[t, r] > 0:
                break  # Geyer's sequence stops at this pair: later lags are not used


def geyer_relative_eff(rho: np.ndarray, n_total: int, n_draws: int) -> tuple:
    """R loo's relative efficiency from short-lag autocorrelations, for the columns whose
    Geyer sequence stops within the lags given; compiled, the same arithmetic in the same
    order as :func:`bayesij.array.ess._geyer_tau` (each sum from the first pair on), so
    equal to it to the bit.

    Parameters
    ----------
    rho : ndarray of shape (n_lags, n_rows)
        :func:`short_lag_autocorrelations`.
    n_total, n_draws : int
        Draws in all and per chain.

    Returns
    -------
    r_eff : ndarray of shape (n_rows,)
        ``n_total / tau / n_total``; NaN where the sequence runs past the lags.
    stops : ndarray of bool, shape (n_rows,)
        Where it stops within them (the others need every lag: the FFT).
    """
    r_eff = np.empty(rho.shape[1])
    stops = np.empty(rho.shape[1], dtype=np.bool_)
    _geyer_rows(np.ascontiguousarray(rho, dtype=np.float64), n_total, n_draws, r_eff, stops)
    return r_eff, stops


@compiled
def _geyer_rows(rho, n_total, n_draws, r_eff, stops):
    n_pairs = rho.shape[0] // 2
    floor = 1 / math.log10(n_total)
    for r in range(rho.shape[1]):
        first = -1
        for j in range(n_pairs):
            pair = rho[2 * j, r] + rho[2 * j + 1, r]
            ends = n_draws <= 5 if j == 0 else 2 * j >= n_draws - 5
            if not pair > 0 or ends:
                first = j
                break
        stops[r] = first >= 0
        if first < 0:
            r_eff[r] = math.nan
            continue
        body, adjusted = 0.0, math.inf
        for j in range(first):  # the monotone sequence: each pair at most the one before
            pair = rho[2 * j, r] + rho[2 * j + 1, r]
            adjusted = min(adjusted, math.inf if math.isnan(pair) else pair)
            body += adjusted
        last_even = rho[2 * first, r]
        last_pair = rho[2 * first, r] + rho[2 * first + 1, r]
        last = last_even if (last_even > 0 or last_pair >= 0) else 0.0
        tau = 2.0 if first == 0 else -1 + 2 * body + last
        r_eff[r] = n_total / max(tau, floor) / n_total


@reordered
def _centred_exp(chain, high, out):
    """``out = exp(chain - high)`` (values below ``exp(-708)`` count as that) minus its
    mean; returns the sum before centring (vectorised)."""
    total = 0.0
    for s in range(chain.shape[0]):
        v = exp(max(chain[s] - high, -708.0))
        out[s] = v
        total += v
    mean = total / chain.shape[0]
    for s in range(chain.shape[0]):
        out[s] -= mean
    return total


@njit(nogil=True, cache=CACHE, error_model="numpy", boundscheck=False, fastmath=True)
def _lagged_sums(centred, n, n_chains, lag, out):
    """``out[j] = sum_c sum_i d[c, i] d[c, i + lag + j]`` for ``j < 4`` (0 where
    ``lag + j >= n``) over chains of ``n`` contiguous finite values: four lags per pass."""
    out[:] = 0.0
    for c in range(n_chains):
        chain = centred[c * n : (c + 1) * n]
        common = max(n - lag - 3, 0)  # i where all four products exist
        # slices indexed by the loop variable alone (no wraparound test): vectorised
        head, lag0, lag1 = chain[:common], chain[lag : lag + common], chain[lag + 1 :]
        lag2, lag3 = chain[lag + 2 :], chain[lag + 3 :]
        s0 = s1 = s2 = s3 = 0.0
        for i in range(common):
            a = head[i]
            s0 += a * lag0[i]
            s1 += a * lag1[i]
            s2 += a * lag2[i]
            s3 += a * lag3[i]
        out[0] += s0
        out[1] += s1
        out[2] += s2
        out[3] += s3
        for j in range(4):  # the last few products of the shorter lags
            for i in range(common, n - lag - j):
                out[j] += chain[i] * chain[i + lag + j]
