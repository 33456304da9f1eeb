"""The PSIS weights of the posterior without a set of units, in one compiled call.

A reweighted AMIP step (:func:`bayesij.array.amip.set_weights`) smooths the ratios
``exp(-sum_{u in set} l_u)`` over the draws once per step, hundreds of steps per audit: R
loo's relative efficiency of the ratios (the short-lag autocorrelations and Geyer's
sequence), the tail length it gives and the Pareto-smoothed weights. Called one after the
other from Python those are a dozen small calls per step; here they are one, with the same
arithmetic in the same order (so the same weights and k-hat to the bit).

NumPy references: :func:`bayesij.array.ess.log_lik_relative_eff_rows`,
:func:`bayesij.array.psis.tail_length` and :func:`bayesij.array.kernels.psis.
psis_weight_rows` (``tests/array/kernels/test_set_weights.py``).

References
----------
Vehtari, A., Simpson, D., Gelman, A., Yao, Y. & Gabry, J. (2024). Pareto smoothed
importance sampling. Journal of Machine Learning Research 25(72).
"""

from __future__ import annotations

import math

import numpy as np

from bayesij.array.kernels.autocorrelation import _autocorrelations, _geyer_rows
from bayesij.array.kernels.fastmath import compiled
from bayesij.array.kernels.psis import TIES, _weight_rows

__all__ = ["psis_set_weights"]


def psis_set_weights(
    set_lik: np.ndarray, n_chains: int, fft_size: int, n_lags: int
) -> tuple[np.ndarray, float] | None:
    """Normalised PSIS weights ``∝ exp(-set_lik)`` over the draws and their k-hat, with the
    tail length of R loo's relative efficiency of ``exp(-set_lik)``.

    Parameters
    ----------
    set_lik : ndarray of shape (n_draws,)
        The set's summed log-likelihood at each draw, each chain's draws contiguous.
    n_chains : int
    fft_size : int
        R's FFT size for the draws per chain (:func:`bayesij.array.ess.fft_next_good_size`).
    n_lags : int
        Lags summed directly (:data:`bayesij.array.ess.SHORT_LAGS`).

    Returns
    -------
    (weights, k) or None
        None where the NumPy path decides: a value that is not finite, equal values, a
        Geyer sequence that runs past ``n_lags``, or a tail the compiled smoothing leaves
        (:func:`~bayesij.array.kernels.psis.psis_weight_rows`' ``done``).
    """
    lik = np.ascontiguousarray(set_lik, dtype=np.float64)
    weights = np.empty(lik.size)
    k = np.full(1, np.nan)
    if not _set_weights(lik, n_chains, fft_size, n_lags, TIES["above"], weights, k):
        return None
    return weights, float(k[0])


@compiled
def _set_weights(lik, n_chains, fft_size, n_lags, ties, weights, k):
    n_total = lik.shape[0]
    low, high = math.inf, -math.inf
    for s in range(n_total):
        value = lik[s]
        if not math.isfinite(value):
            return False
        low = min(low, value)
        high = max(high, value)
    if not high - low > 0:
        return False
    negated = np.empty((1, n_total))
    for s in range(n_total):
        negated[0, s] = -lik[s]
    rho = np.empty((n_lags, 1))
    _autocorrelations(negated, n_chains, fft_size, rho)
    r_eff, stops = np.empty(1), np.empty(1, dtype=np.bool_)
    _geyer_rows(rho, n_total, n_total // n_chains, r_eff, stops)
    if not stops[0] or not math.isfinite(r_eff[0]):
        return False
    raw = min(0.2 * n_total, 3 * math.sqrt(n_total / max(r_eff[0], 1e-3)))
    tail = np.full(1, min(math.ceil(raw), n_total - 1))
    done = np.zeros(1, dtype=np.bool_)
    _weight_rows(lik.reshape((1, n_total)), tail, ties, weights.reshape((1, n_total)), k, done)
    return done[0]
