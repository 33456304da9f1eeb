"""Divergences between a sample and the same sample reweighted (a power-scaled posterior
against the posterior): priorsense's ``div_measure`` choices other than the cumulative
Jensen-Shannon distance, which :mod:`bayesij.array.power_scaling` computes.

The density-based ones (Jensen-Shannon, Hellinger, Kullback-Leibler) compare Gaussian
kernel density estimates on a common grid, computed exactly as R's ``density()`` does
(linear binning, FFT convolution, ``bw.nrd0``, 512 points from the sample's minimum to its
maximum), each normalised to sum to 1, as priorsense does; the Wasserstein and
Kolmogorov-Smirnov distances compare the weighted and unweighted empirical distributions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DENSITY_MEASURES", "EMPIRICAL_MEASURES", "r_density", "reweighting_divergence"]

#: Measures of two kernel density estimates on one grid.
DENSITY_MEASURES = ("js_div", "js_dist", "hellinger_dist", "kl_div", "kl_dist")
#: Measures of the two empirical distributions.
EMPIRICAL_MEASURES = ("ws_dist", "ks_dist")


def bandwidth_nrd0(x: np.ndarray) -> float:
    """R's ``bw.nrd0``: ``0.9 min(sd, IQR / 1.34) n^(-1/5)`` (Silverman's rule of thumb)."""
    spread = float(np.std(x, ddof=1))
    q75, q25 = np.percentile(x, [75, 25])
    low = min(spread, (q75 - q25) / 1.34)
    if not low:
        low = spread or abs(float(x[0])) or 1.0
    return 0.9 * low * x.size ** (-0.2)


def r_density(x: np.ndarray, weights, start: float, stop: float, n: int = 512) -> np.ndarray:
    """The Gaussian kernel density estimate of R's ``density(x, weights=, from=start,
    to=stop)`` at ``n`` points from ``start`` to ``stop`` (R's algorithm: the sample
    linearly binned on ``2n`` points over ``[start - 4 bw, stop + 4 bw]``, convolved with
    the kernel by FFT, interpolated; ``bw`` is ``bw.nrd0`` of the unweighted sample, as R
    takes it). Equal to R 4.2's to 1e-15.

    Parameters
    ----------
    x : ndarray of shape (S,)
    weights : ndarray of shape (S,) summing to 1, or None (1 / S each)
    """
    bw = bandwidth_nrd0(x)
    w = np.full(x.size, 1.0 / x.size) if weights is None else weights
    lo, up = start - 4 * bw, stop + 4 * bw
    binned = np.zeros(2 * n)
    position = (x - lo) / ((up - lo) / (n - 1))
    cell = np.floor(position).astype(int)
    frac = position - cell
    inside = (cell >= 0) & (cell <= n - 2)
    np.add.at(binned, cell[inside], w[inside] * (1 - frac[inside]))
    np.add.at(binned, cell[inside] + 1, w[inside] * frac[inside])
    binned[0] += np.sum((w * frac)[cell == -1])
    np.add.at(binned, cell[cell == n - 1], (w * (1 - frac))[cell == n - 1])
    lags = np.linspace(0.0, 2 * (up - lo), 2 * n)
    lags[n + 1 :] = -lags[n - 1 : 0 : -1]
    kernel = np.exp(-0.5 * (lags / bw) ** 2) / (np.sqrt(2 * np.pi) * bw)
    smooth = np.fft.ifft(np.fft.fft(binned) * np.conj(np.fft.fft(kernel))).real[:n]
    return np.interp(np.linspace(start, stop, n), np.linspace(lo, up, n), np.maximum(smooth, 0))


def reweighting_divergence(x: np.ndarray, weights: np.ndarray, measure: str) -> float:
    """The divergence ``measure`` between the sample ``x`` (S,) and the same sample
    reweighted by ``weights`` (S,), normalised: P the sample's, Q the reweighted one's.

    ``js_div``: Jensen-Shannon divergence in bits; ``js_dist`` its square root;
    ``hellinger_dist``: ``2 sqrt(1 - sum sqrt(p q))`` (philentropy's scale);
    ``kl_div``: ``KL(P || Q) = sum p log(p / q)``; ``kl_dist`` its square root — each of
    the two density estimates normalised to sum to 1 on the grid (priorsense). ``ws_dist``:
    the 1-Wasserstein distance ``int |F_P - F_Q|``; ``ks_dist``: ``max |F_P - F_Q|``.

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    weights = weights / weights.sum()
    if measure in EMPIRICAL_MEASURES:
        order = np.argsort(x, kind="stable")
        gap = np.cumsum(np.full(x.size, 1.0 / x.size) - weights[order])
        if measure == "ks_dist":
            return float(np.max(np.abs(gap)))
        return float(np.sum(np.abs(gap[:-1]) * np.diff(x[order])))
    start, stop = float(x.min()), float(x.max())
    p = r_density(x, None, start, stop)
    q = r_density(x, weights, start, stop)
    p, q = p / p.sum(), q / q.sum()
    if measure in ("js_div", "js_dist"):
        m = 0.5 * (p + q)
        value = 0.5 * _relative_entropy(p, m, np.log2) + 0.5 * _relative_entropy(q, m, np.log2)
    elif measure == "hellinger_dist":
        return float(2 * np.sqrt(max(1 - np.sum(np.sqrt(p * q)), 0.0)))
    else:
        value = _relative_entropy(p, q, np.log)
    return float(np.sqrt(value) if measure.endswith("_dist") else value)


def _relative_entropy(p: np.ndarray, q: np.ndarray, log) -> float:
    """``sum p log(p / q)`` with ``0 log 0 = 0`` and a ratio over ``q = 0`` taken as
    philentropy's ``epsilon = 1e-5`` (where the kernel estimate's FFT rounds a far tail to
    0: ``p`` is as small there, and the term negligible)."""
    positive = p > 0
    ratio = np.full(p.shape, 1e-5)
    np.divide(p, q, out=ratio, where=positive & (q > 0))
    return float(np.sum(p[positive] * log(ratio[positive])))
