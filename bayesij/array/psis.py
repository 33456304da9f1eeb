"""Pareto-smoothed importance sampling, vectorised across observations.

For each column of log importance ratios (one observation in leave-one-out), as R loo and
ArviZ do one column at a time:

1. shift so that the largest ratio is 0;
2. take the ``M`` largest ratios as the tail, ``M = ceil(min(S/5, 3 sqrt(S / r_eff)))``
   (``floor`` in the PSIS paper, the posterior package and arviz-stats), the ``(M+1)``-th
   largest as the cutoff. With ``ties="above"`` a cutoff below ``log`` of the smallest
   normal float is floored there, as ArviZ 0.23 does, the tail then being the ratios above
   the floor; with ``ties="position"`` such a tail (exponentials that underflow) gets
   k-hat = inf and is not smoothed, as in R loo and arviz-stats. Draws tied with the
   cutoff (repeated MCMC draws) are left out of the tail as ArviZ 0.23 does
   (``ties="above"``), kept by stable sorted position (later draws last) as R loo does
   (``ties="position"``), or by NumPy's default, unstable sort of the whole row as
   arviz-stats does (``ties="quicksort"``: the same array sorts the same way, so tied draws
   get the same smoothed weights);
3. fit a generalized Pareto distribution to ``exp(tail) - exp(cutoff)`` by Zhang and
   Stephens' empirical Bayes method (grid of ``30 + floor(sqrt(M))`` points) with the weakly
   informative prior ``k <- (M k + 5) / (M + 10)``;
4. replace the tail by the fitted quantiles at ``(z - 1/2) / M``, ``z = 1..M``, in sorted
   order; truncate at the largest raw weight (0); normalise.

Here all columns of a chunk are done together: the top ``M_max + 1`` ratios come from one
partial sort, tails of different lengths share one array (aligned at the largest value, the
unused rows masked), and the grid search is one broadcast over grid points, tail draws and
columns.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import fail

__all__ = [
    "tail_length",
    "check_tail_rule",
    "PsisChunk",
    "psis_chunk",
    "psis_rows",
    "gpd_fit",
    "pareto_k_threshold",
    "TIE_RULES",
    "khat_tail_length",
    "pareto_khat_columns",
    "right_tail_khat",
]

#: Fewer tail draws than this and no generalized Pareto fit is made (k-hat = inf).
MIN_TAIL = 5
#: Log of the smallest normal float: the floor of the cutoff.
LOG_TINY = float(np.log(np.finfo(float).tiny))


def pareto_k_threshold(n_draws: int) -> float:
    """The sample-size dependent k-hat threshold ``min(1 - 1/log10(S), 0.7)``."""
    return float(min(1 - 1 / np.log10(n_draws), 0.7))


def check_tail_rule(rule: str) -> None:
    """The tail rule must be "ceil" or "floor"."""
    if rule not in ("ceil", "floor"):
        raise fail("tail_rule", repr(rule), "'ceil' (R loo <= 2.10, ArviZ 0.23) or 'floor'")


def tail_length(n_draws: int, r_eff, rule: str = "ceil") -> np.ndarray:
    """Tail lengths ``M = ceil|floor(min(0.2 S, 3 sqrt(S / r_eff)))`` per observation."""
    check_tail_rule(rule)
    raw = np.minimum(0.2 * n_draws, 3 * np.sqrt(n_draws / np.asarray(r_eff, dtype=float)))
    rounded = np.ceil(raw) if rule == "ceil" else np.floor(raw)
    return np.minimum(rounded, n_draws - 1).astype(int)


class GpdFit(NamedTuple):
    """Generalized Pareto fits of many tails: shape ``k`` and scale ``sigma``, each (n_cols,)."""

    k: np.ndarray
    sigma: np.ndarray


def _sum_log1p(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_i log1p(-theta[j, c] x[i, c])`` for each grid point j and column c, (m, n_cols).

    The grid's sums of logs need far fewer logarithms than one per term. The tail is split
    into four contiguous quarters whose factors ``1 - theta x`` are multiplied before one
    ``log``: a quarter of the logarithms, one grid point at a time in reused buffers. The
    rounding of ``1 - theta x`` costs about ``M eps`` in absolute terms, which matters only
    where the sum itself is tiny (``theta`` near 0); there, and where a product leaves the
    float range, the sum is formed term by term with ``log1p``.
    """
    m_rows, n_cols = x.shape
    quarter = -(-m_rows // 4)
    padded = np.concatenate([np.zeros((4 * quarter - m_rows, n_cols)), x])
    out = np.empty(theta.shape)
    factors = np.empty_like(padded)
    product = np.empty((quarter, n_cols))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for j, row in enumerate(theta):
            np.multiply(padded, -row, out=factors)
            factors += 1
            np.multiply(factors[:quarter], factors[quarter : 2 * quarter], out=product)
            product *= factors[2 * quarter : 3 * quarter]
            product *= factors[3 * quarter :]
            np.log(product, out=product)
            product.sum(axis=0, out=out[j])
    scale = np.abs(theta) * x.sum(axis=0) / np.maximum((x > 0).sum(axis=0), 1)
    exact = ~np.isfinite(out) | (scale < 1e-2)
    if exact.any():
        grid, columns = np.nonzero(exact)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[grid, columns] = np.log1p(-theta[grid, columns][:, None] * x[:, columns].T).sum(
                axis=1
            )
    return out


def gpd_fit(tails: np.ndarray, lengths: np.ndarray) -> GpdFit:
    """Zhang-Stephens generalized Pareto fits with the weakly informative prior on k.

    Parameters
    ----------
    tails : ndarray of shape (M_max, n_cols)
        Exceedances sorted ascending down each column and aligned at the bottom: column
        ``c`` uses rows ``M_max - lengths[c]`` to ``M_max - 1``; other rows are ignored.
    lengths : ndarray of shape (n_cols,)
        Tail length of each column (at least 5).

    Returns
    -------
    GpdFit
        ``k`` is inf where the fit fails (NaN).

    References
    ----------
    .. [1] Zhang, J. and Stephens, M. A. (2009). A new and efficient estimation method for
       the generalized Pareto distribution. Technometrics 51(3), 316-325.
    .. [2] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    m_max, n_cols = tails.shape
    columns = np.arange(n_cols)
    valid = np.arange(m_max)[:, None] >= (m_max - lengths)[None, :]
    x = np.where(valid, tails, 0.0)  # log1p(-theta * 0) = 0: masked rows add nothing
    largest = x[-1]
    quartile = x[m_max - lengths + np.floor(lengths / 4 + 0.5).astype(int) - 1, columns]
    grid_sizes = 30 + np.floor(np.sqrt(lengths)).astype(int)
    j = np.arange(1, grid_sizes.max() + 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = 1 / largest + (1 - np.sqrt(grid_sizes / (j - 0.5))) / 3 / quartile
        mean_log = _sum_log1p(theta, x) / lengths
        profile = lengths * (np.log(-theta / mean_log) - mean_log - 1)
    profile = np.where(j <= grid_sizes, profile, -np.inf)
    top = np.max(profile, axis=0)
    weights = np.exp(profile - top)
    weights /= weights.sum(axis=0)
    theta_hat = np.where(weights > 0, theta * weights, 0.0).sum(axis=0)
    theta_hat[np.isnan(top)] = np.nan  # e.g. a quartile of 0 (underflowed tail): k-hat inf, as R
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.log1p(-theta_hat * x).sum(axis=0) / lengths
        sigma = -k / theta_hat
    k = (lengths * k + 10 * 0.5) / (lengths + 10)
    return GpdFit(np.where(np.isnan(k), np.inf, k), sigma)


def _gpd_quantiles(lengths: np.ndarray, m_max: int, fit: GpdFit) -> np.ndarray:
    """Fitted quantiles at ``(z - 1/2) / M`` aligned like the tails, shape (M_max, n_cols)."""
    z = np.arange(m_max)[:, None] - (m_max - lengths)[None, :] + 1
    p = (z - 0.5) / lengths
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        log_tail = np.log1p(-p)
        tiny = np.abs(fit.k) < np.finfo(float).eps
        quantile = np.where(tiny, -log_tail, np.expm1(-fit.k * log_tail) / fit.k) * fit.sigma
    return np.where(fit.sigma > 0, quantile, np.nan)


class PsisChunk(NamedTuple):
    """PSIS of a chunk of columns.

    Attributes
    ----------
    log_weights : ndarray of shape (n_draws, n_cols)
        Smoothed and truncated log weights, shifted so the largest raw ratio is 0, not
        normalised. Outside the smoothed tail they equal the shifted raw log ratios.
    pareto_k : ndarray of shape (n_cols,)
    tail_len : ndarray of shape (n_cols,)
    smoothed : ndarray of shape (n_cols, M_max)
        Draw indices whose weights were replaced by the smoothed tail, -1 where unused.
    tail_raw, tail_smoothed : ndarray of shape (n_cols, M_max)
        The shifted raw log ratios at those draws and their smoothed values (-inf where
        unused).
    """

    log_weights: np.ndarray
    pareto_k: np.ndarray
    tail_len: np.ndarray
    smoothed: np.ndarray
    tail_raw: np.ndarray
    tail_smoothed: np.ndarray


TIE_RULES = ("above", "position", "quicksort")


def psis_chunk(log_ratios: np.ndarray, tail_len: np.ndarray, ties: str = "above") -> PsisChunk:
    """Pareto-smooth the log ratios of a chunk of columns.

    Parameters
    ----------
    log_ratios : ndarray of shape (n_draws, n_cols)
        Finite values.
    tail_len : ndarray of shape (n_cols,)
    ties : {"above", "position", "quicksort"}, default "above"
        Which draws form the tail when some equal the cutoff (repeated MCMC draws), and in
        which order tied draws take the smoothed values: "above" takes only those strictly
        above it, as ArviZ 0.23; "position" takes the ``M`` largest by stable sorted
        position, as R loo; "quicksort" by the position NumPy's default ``argsort`` gives
        them, as arviz-stats.

    Returns
    -------
    PsisChunk
        ``log_weights`` of shape (n_draws, n_cols).
    """
    rows = psis_rows(np.ascontiguousarray(log_ratios.T), tail_len, ties)
    return rows._replace(log_weights=rows.log_weights.T)


def _largest_in_tie_order(lw: np.ndarray, count: int, ties: str) -> np.ndarray:
    """Per row, the draws of the ``count`` largest values, (n_rows, count), in an order
    that a stable sort by value turns into the tie rule's: draw order (the last ``count``
    positions of a stable ascending sort, as R loo's ``sort.int``), or for "quicksort" the
    last ``count`` positions of NumPy's default ``argsort`` of the row, as arviz-stats.

    A partial sort picks any of the draws tied with the smallest value it keeps (repeated
    MCMC states); where the row holds more such draws than were kept, the row is sorted
    whole so that, as in R, the later draws are the ones in the tail. Under "quicksort" a
    row with any tie among (or at) its largest values is sorted whole.
    """
    n_draws = lw.shape[1]
    top = np.argpartition(lw, n_draws - count, axis=1)[:, n_draws - count :]
    top.sort(axis=1)  # ties then keep draw order in the stable sort by value that follows
    values = np.take_along_axis(lw, top, axis=1)
    smallest = values.min(axis=1, keepdims=True)
    tied_out = (lw == smallest).sum(axis=1) > (values == smallest).sum(axis=1)
    if ties == "quicksort":
        tied_in = (np.diff(np.sort(values, axis=1), axis=1) == 0).any(axis=1)
        rows = np.flatnonzero(tied_out | tied_in)
        for chunk in np.array_split(rows, max(1, rows.size // 256)):  # bounded memory
            # ascending, in the tie order of NumPy's sort of each row alone
            top[chunk] = np.argsort(lw[chunk], axis=1)[:, n_draws - count :]
        return top
    for row in np.flatnonzero(tied_out):
        top[row] = np.sort(np.argsort(lw[row], kind="stable")[n_draws - count :])
    return top


def psis_rows(
    log_ratios: np.ndarray,
    tail_len: np.ndarray,
    ties: str = "above",
    *,
    shifted: bool = False,
    write_back: bool = True,
) -> PsisChunk:
    """As :func:`psis_chunk` with observations as rows: ``log_ratios`` (n_cols, n_draws).

    Working along rows keeps each observation's draws contiguous in memory, which makes the
    partial sort and the reductions several times faster. With ``shifted=True`` the rows
    already have maximum 0 and are smoothed in place (no copy); otherwise a shifted copy is
    made. With ``write_back=False`` the smoothed tail is only returned (``tail_smoothed``
    at draws ``smoothed``) and ``log_weights`` stays the raw shifted log ratios.
    """
    n_cols, n_draws = log_ratios.shape
    if shifted:
        lw = log_ratios
    else:
        lw = log_ratios - log_ratios.max(axis=1, keepdims=True)  # <= 0: no truncation needed
    lw = np.ascontiguousarray(lw)  # the flat indexing below needs contiguous rows
    m_max = int(tail_len.max())
    k = np.full(n_cols, np.inf)
    fitted = tail_len >= MIN_TAIL
    smoothed_draws = np.full((n_cols, max(m_max, 0)), -1)
    tail_raw = np.full((n_cols, max(m_max, 0)), -np.inf)
    tail_smoothed = tail_raw.copy()
    if m_max < MIN_TAIL:
        return PsisChunk(lw, k, tail_len, smoothed_draws, tail_raw, tail_smoothed)
    rows = np.arange(n_cols)
    # Flat indices into lw (contiguous rows): faster than take_along_axis for small blocks.
    top = _largest_in_tie_order(lw, m_max + 1, ties)
    top += rows[:, None] * n_draws
    flat = lw.reshape(-1)
    values = flat[top]
    order = np.argsort(values, axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    values = flat[top].T  # (m_max + 1, n_cols), ascending
    cutoff = values[m_max - tail_len, rows]  # the (M+1)-th largest
    tails = values[1:]
    # Below the smallest normal float exp() underflows: as ArviZ, the cutoff is floored there
    # and the tail is what lies above it (R loo would fit zeros and return k-hat = inf).
    # R loo and arviz-stats fit the underflowed values as they are (ties="position").
    floored = (cutoff < LOG_TINY) & (ties == "above")
    cutoff = np.where(floored, LOG_TINY, cutoff)
    if ties == "above" or floored.any():
        above = np.minimum(tail_len, (tails > cutoff).sum(axis=0))
        tail_len = np.where(floored | (ties == "above"), above, tail_len)
        fitted &= tail_len >= MIN_TAIL
    spread = tails[-1] - tails[m_max - np.clip(tail_len, 1, m_max), rows]
    fitted &= np.abs(spread) >= np.finfo(float).eps / 100  # R: all tail values equal
    if fitted.any():
        exp_cutoff = np.exp(cutoff[fitted])
        fit = gpd_fit(np.exp(tails[:, fitted]) - exp_cutoff, tail_len[fitted])
        k[fitted] = fit.k
        finite = np.isfinite(fit.k)
        smooth = np.flatnonzero(fitted)[finite]
        quantiles = _gpd_quantiles(
            tail_len[smooth], m_max, GpdFit(fit.k[finite], fit.sigma[finite])
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            smoothed = np.minimum(np.log(quantiles + exp_cutoff[finite]), 0.0)  # truncate
        in_tail = (np.arange(m_max)[:, None] >= (m_max - tail_len[smooth])[None, :]).T
        positions = top[smooth, 1:]  # flat indices (n_smooth, m_max)
        raw = tails[:, smooth].T
        if write_back:
            flat[positions] = np.where(in_tail, smoothed.T, raw)
        draws = positions - smooth[:, None] * n_draws
        smoothed_draws[smooth] = np.where(in_tail, draws, -1)
        tail_raw[smooth] = np.where(in_tail, raw, -np.inf)
        tail_smoothed[smooth] = np.where(in_tail, smoothed.T, -np.inf)
    return PsisChunk(lw, k, tail_len, smoothed_draws, tail_raw, tail_smoothed)


def khat_tail_length(n_draws: int, r_eff, tail: str = "right") -> np.ndarray:
    """The tail length of the Pareto k-hat diagnostic of a function of draws (posterior's
    and arviz-stats' ``pareto_khat``): ``floor(3 sqrt(S / r_eff))`` when ``S r_eff > 225``,
    else ``floor(S / 5)`` (also where ``r_eff`` is NaN); fitting both tails, at most
    ``S // 2`` and at least 5.

    Parameters
    ----------
    n_draws : int
    r_eff : float or ndarray of shape (n_cols,)
    tail : {"right", "both"}

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    r_eff = np.atleast_1d(np.asarray(r_eff, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        long = n_draws * r_eff > 225
        length = np.where(long, np.floor(3 * np.sqrt(n_draws / np.where(long, r_eff, 1.0))), 0)
    length = np.where(long, length, np.floor(n_draws / 5)).astype(int)
    if tail == "both":
        length = np.clip(length, 5, n_draws // 2)
    return length


def pareto_khat_columns(values: np.ndarray, tail_len, tail: str = "right") -> np.ndarray:
    """k-hat of the generalized Pareto fit to the largest values of each column (and, with
    ``tail="both"``, to the smallest: the larger k-hat), without smoothing, as
    ``pareto_khat`` of posterior and arviz-stats: the tail is the ``M`` largest values,
    the cutoff the next, and the fit Zhang and Stephens' with the weakly informative prior.

    Parameters
    ----------
    values : ndarray of shape (n_draws, n_cols)
    tail_len : ndarray of shape (n_cols,)
        :func:`khat_tail_length`.
    tail : {"right", "both"}

    Returns
    -------
    ndarray of shape (n_cols,)
        NaN where a tail has fewer than 5 draws or all its values are equal (for "both":
        where either tail is).
    """
    tail_len = np.broadcast_to(np.asarray(tail_len, dtype=int), values.shape[1])
    sides = (values,) if tail == "right" else (-values, values)
    n_draws = values.shape[0]
    # only the largest M + 1 values of a column matter: a partial sort, then those sorted
    kept = int(np.clip(max(int(tail_len.max(initial=0)), MIN_TAIL) + 1, 1, n_draws))
    k = np.full(values.shape[1], -np.inf)
    for side in sides:
        rows = np.ascontiguousarray(side.T)  # each column's draws contiguous: a faster sort
        top = np.partition(rows, n_draws - kept, axis=1)[:, n_draws - kept :]
        k = np.maximum(k, right_tail_khat(np.sort(top, axis=1).T, tail_len, n_draws))
    return k


def right_tail_khat(ordered: np.ndarray, tail_len: np.ndarray, n_draws: int) -> np.ndarray:
    """k-hat of each column's ``tail_len`` largest values above the next one, from the
    columns' largest values in ascending order (``ordered``, at least ``tail_len + 1`` of
    them) among ``n_draws``."""
    n_kept, n_cols = ordered.shape
    columns = np.arange(n_cols)
    k = np.full(n_cols, np.nan)
    usable = (tail_len >= MIN_TAIL) & (tail_len < n_draws)
    length = np.where(usable, tail_len, MIN_TAIL)
    usable &= length < n_kept
    length = np.where(usable, length, min(MIN_TAIL, n_kept - 1))
    cutoff = ordered[n_kept - length - 1, columns]
    spread = ordered[-1] - ordered[n_kept - length, columns]
    usable &= np.abs(spread) >= np.finfo(float).tiny
    if usable.any():
        m_max = int(length[usable].max())
        top = ordered[n_kept - m_max :, usable] - cutoff[usable]
        k[usable] = gpd_fit(top, length[usable]).k
    return k
