"""Leave-one-out expectations of per-draw values from a (draws, observations) matrix.

``E[g | y_-n]`` is the self-normalised importance-sampling estimate with the PSIS
leave-one-out weights of observation ``n``: its value (mean, variance, sd, weighted
quantiles by R loo's or arviz-stats' rule), its Monte Carlo SE by the delta method and the
k-hat of the expectation, one chunk of observations at a time on threads. NumPy only; the
labelled wrapper is :func:`bayesij.stats.loo.loo_expectation`.

References
----------
.. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto smoothed
   importance sampling. JMLR 25(72) (the k-hat of a function's expectation).
.. [2] Hyndman, R. J. and Fan, Y. (1996). Sample quantiles in statistical packages. The
   American Statistician 50(4), 361-365 (type 7).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.numeric import logsumexp_columns, map_chunks, obs_chunks, read_columns
from bayesij.array.pareto import own_tail_khat_rows
from bayesij.array.psis import psis_chunk

__all__ = [
    "KINDS",
    "QUANTILE_RULES",
    "loo_column_weights",
    "loo_expectations",
    "expectation_khat",
    "weighted_quantile",
    "weighted_quantile_type7",
]

#: The expectations computed: ``var`` and ``sd`` are the weighted variance with the
#: effective-sample correction ``1 - sum w^2``; ``median`` is the quantile at 1/2.
KINDS = ("mean", "median", "var", "sd", "quantile")


def loo_column_weights(
    matrix: np.ndarray,
    chunk,
    tails: np.ndarray,
    ties: str,
    saved: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The normalised PSIS leave-one-out weights of the observations ``chunk``.

    Parameters
    ----------
    matrix : ndarray of shape (S, N)
        The log-likelihood, draws by observations.
    chunk : slice or ndarray of int
        The observations.
    tails : ndarray of shape (N,)
        Pareto tail lengths (:func:`bayesij.array.psis.tail_length`).
    ties : str
        The tie rule of the tail's order (:func:`bayesij.array.psis.psis_chunk`).
    saved : ndarray of shape (S, N), optional
        Normalised log-weights saved by an earlier smoothing: used as they are.
    rows : ndarray of shape (n_cols, S), optional
        The chunk's log-likelihood as contiguous rows, when the caller has them.

    Returns
    -------
    weights : ndarray of shape (S, n_cols)
    pareto_k : ndarray of shape (n_cols,) or None
        None where the weights were ``saved``.
    """
    if saved is not None:
        return np.exp(saved[:, chunk]), None
    from bayesij.array.kernels.psis import psis_weight_rows  # compiled: numba

    if rows is None:
        rows = np.ascontiguousarray(read_columns(matrix, chunk).T)
    tails = tails[chunk]
    weights, pareto_k, done = psis_weight_rows(rows, tails, ties)
    rest = np.flatnonzero(~done)
    if rest.size:  # rows the compiled pass leaves (module bayesij.array.kernels.psis)
        smoothed = psis_chunk(-rows[rest].T, tails[rest], ties)
        log_weights = smoothed.log_weights - logsumexp_columns(smoothed.log_weights)
        weights[rest] = np.exp(log_weights).T
        pareto_k[rest] = smoothed.pareto_k
    return weights.T, pareto_k


def loo_expectations(
    matrix: np.ndarray,
    values: np.ndarray,
    weights_of,
    r_eff: np.ndarray,
    kind: str,
    probs: list,
    rule: str = "R loo",
    diagnostics: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leave-one-out expectations of ``values``, their Monte Carlo SE and k-hat.

    Parameters
    ----------
    matrix : ndarray of shape (S, N)
        The log-likelihood, draws by observations.
    values : ndarray of shape (S, N)
        ``g`` at each draw for each observation.
    weights_of : callable
        ``weights_of(chunk, rows) -> (weights (S, n_cols), k-hat or None)``: the chunk's
        normalised leave-one-out weights (:func:`loo_column_weights`).
    r_eff : ndarray of shape (N,)
        Relative efficiencies, dividing the MCSE's variance.
    kind : {"mean", "median", "var", "sd", "quantile"}
    probs : list
        The probabilities of ``"quantile"`` (``[0.5]`` for the median, ``[None]`` else).
    rule : {"R loo", "type 7"}, default "R loo"
        The weighted quantile (:data:`QUANTILE_RULES`).
    diagnostics : bool, default True
        Compute the MCSE and k-hat (NaN without).

    Returns
    -------
    value, mcse : ndarray of shape (len(probs), N)
        The MCSE is the delta method's for self-normalised importance sampling,
        ``sqrt(sum_s w_s^2 phi_s^2 / r_eff)`` with ``phi`` the estimate's influence
        function (for quantiles: the weighted quantiles at ``p -/+`` the CDF's SE, half
        their distance).
    k : ndarray of shape (N,)
        :func:`expectation_khat`.
    """
    n_obs = matrix.shape[1]
    value = np.empty((len(probs), n_obs))
    mcse, k = np.full((len(probs), n_obs), np.nan), np.full(n_obs, np.nan)

    def work(chunk):  # chunks on threads: each writes its own columns
        rows = np.ascontiguousarray(read_columns(matrix, chunk).T)  # (n_cols, S)
        weights, _ = weights_of(chunk, rows)
        g = np.ascontiguousarray(values[:, chunk].T).T  # as the weights: column-major
        for j, p in enumerate(probs):
            value[j, chunk], influence = _weighted_estimate(g, weights, kind, p, rule)
            if not diagnostics:
                continue
            with np.errstate(invalid="ignore"):
                error = np.sqrt(np.sum(weights**2 * influence**2, axis=0) / r_eff[chunk])
            if kind == "sd":
                error /= 2 * value[j, chunk]
            elif kind in ("median", "quantile"):
                error = _quantile_mcse(g, weights, p, error, rule)
            mcse[j, chunk] = error
        if diagnostics:
            k[chunk] = expectation_khat(rows, g.T, kind)

    map_chunks(work, obs_chunks(n_obs, 12 * matrix.shape[0]))
    return value, mcse, k


def weighted_quantile(values: np.ndarray, weights: np.ndarray, prob: float) -> np.ndarray:
    """R loo's weighted quantile per column: linear between the cumulative weights (with
    equal weights, Hyndman and Fan's type 4).

    Parameters
    ----------
    values, weights : ndarray of shape (S, n)
    prob : float

    Returns
    -------
    ndarray of shape (n,)
    """
    order = np.argsort(values, axis=0, kind="stable")
    x = np.take_along_axis(values, order, axis=0)
    cumulative = np.cumsum(np.take_along_axis(weights, order, axis=0), axis=0)
    cumulative /= cumulative[-1]
    index = np.argmax(cumulative >= prob, axis=0)
    columns = np.arange(values.shape[1])
    previous = np.maximum(index - 1, 0)
    x0, x1 = x[previous, columns], x[index, columns]
    w0, w1 = cumulative[previous, columns], cumulative[index, columns]
    with np.errstate(invalid="ignore", divide="ignore"):
        interpolated = x0 + (x1 - x0) * (prob - w0) / (w1 - w0)
    return np.where(index == 0, x[0], interpolated)


def weighted_quantile_type7(values: np.ndarray, weights: np.ndarray, prob) -> np.ndarray:
    """arviz-stats' weighted quantile per column: Hyndman and Fan's type 7 on the effective
    sample size ``n_w = 1 / sum w^2`` (``h = (n_w - 1) p + 1``), spread over the sorted
    values by their cumulative weights (with equal weights, NumPy's default quantile).

    Parameters
    ----------
    values, weights : ndarray of shape (S, n)
    prob : float

    Returns
    -------
    ndarray of shape (n,)
    """
    order = np.argsort(values, axis=0, kind="stable")
    x = np.take_along_axis(values, order, axis=0)
    w = np.take_along_axis(weights, order, axis=0)
    w = w / w.sum(axis=0)
    n_w = 1.0 / (w**2).sum(axis=0)
    cumulative = np.vstack([np.zeros((1, w.shape[1])), np.cumsum(w, axis=0)])
    h = np.clip((n_w - 1) * prob + 1, 1, n_w)
    u = np.maximum((h - 1) / n_w, np.minimum(h / n_w, cumulative))
    return np.sum(x * np.diff(u * n_w - h + 1, axis=0), axis=0)


#: Weighted quantile rules of the peers' conventions (:mod:`bayesij.stats.peers`).
QUANTILE_RULES = {"R loo": weighted_quantile, "type 7": weighted_quantile_type7}


def _weighted_estimate(g, weights, kind, prob, rule):
    """The weighted estimate per column and the influence term of each draw (for the
    quantiles: the CDF's, ``1{g <= q} - p``)."""
    mean = (weights * g).sum(axis=0)
    if kind == "mean":
        return mean, g - mean
    if kind in ("median", "quantile"):
        q = QUANTILE_RULES[rule](g, weights, float(prob))
        return q, (g <= q).astype(float) - prob
    spread = 1 - (weights**2).sum(axis=0)  # 0 when one draw holds all the weight
    squares = (g - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = (weights * squares).sum(axis=0) / spread
    variance[spread < 1e-8] = np.nan  # one effective draw: no variance to estimate
    value = variance if kind == "var" else np.sqrt(variance)
    return value, squares - variance


def _quantile_mcse(g, weights, prob, cdf_se, rule):
    """Half the distance between the weighted quantiles at ``prob -/+ cdf_se``."""
    low = QUANTILE_RULES[rule](g, weights, np.clip(prob - cdf_se, 0.0, 1.0))
    high = QUANTILE_RULES[rule](g, weights, np.clip(prob + cdf_se, 0.0, 1.0))
    return (high - low) / 2


def expectation_khat(log_lik: np.ndarray, g: np.ndarray, kind: str) -> np.ndarray:
    """k-hat of LOO expectations as arviz-stats computes it.

    The raw ratios ``r = exp(min l - l)`` (right tail) and, for the mean, variance and sd,
    ``h r`` with ``h = g`` or ``g^2`` (both tails), each with the tail length
    :func:`bayesij.array.psis.khat_tail_length` of its own relative tail ESS
    (:func:`bayesij.array.pareto.own_tail_khat_rows`); the larger of the two (the ratios'
    where ``h`` has at most two distinct values or is not finite).

    Parameters
    ----------
    log_lik, g : ndarray of shape (n, S)
        One observation per row: its log-likelihood and values at each draw.
    kind : {"mean", "median", "var", "sd", "quantile"}

    Returns
    -------
    ndarray of shape (n,)
    """
    ratios = np.exp(log_lik.min(axis=1, keepdims=True) - log_lik)  # each row one chain
    k_r = own_tail_khat_rows(ratios, "right")
    if kind in ("median", "quantile"):
        return k_r
    h = g if kind == "mean" else g**2
    ratios *= h
    k_hr = own_tail_khat_rows(ratios, "both")
    k = np.fmax(k_hr, k_r)
    return np.where(_few_values(h), k_r, k)


def _few_values(h: np.ndarray) -> np.ndarray:
    """Per row of (n, S) ``h``: not finite everywhere, or at most two distinct values
    (every value its row's smallest or largest)."""
    with np.errstate(invalid="ignore"):
        low, high = h.min(axis=1, keepdims=True), h.max(axis=1, keepdims=True)
        two = np.all((h == low) | (h == high), axis=1)
    return two | ~np.isfinite(h).all(axis=1)
