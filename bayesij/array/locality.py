"""Whether a variable holds one element per group of the observations, read from the draws.

A group effect ``a_g`` moves the log-likelihood of its own group's observations and barely
any other's: across the posterior draws, an observation's log-likelihood correlates with
one level of a vector of group effects (its group's) and with the others only through the
population parameters they share. A vector of regression coefficients moves an
observation's log-likelihood through several of its elements at once (``x_n' beta``),
and a variable the log-likelihood does not depend on, through none beyond Monte Carlo
noise. A fit saved without its group index (a Stan fit's ``alpha[1..J]``, read by name)
still shows which of its variables are group effects, where the group effects are not
to be audited as global quantities (Giordano & Broderick 2023, local parameters).

References
----------
Giordano, R. & Broderick, T. (2023). The Bayesian infinitesimal jackknife for variance.
arXiv:2305.06466 (global and local parameters).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = [
    "one_level_each",
    "several_levels_each",
    "indexed_levels",
    "AGREEING",
    "level_chunks",
    "STRONG",
    "DOMINANT",
    "MIN_LEVELS",
    "MAX_ELEMENTS",
    "N_COLUMNS",
]

#: An observation is moved by a level when its squared correlation with the level
#: (summed over the level's elements) exceeds this many squared standard errors of the
#: correlation of independent draws (``E STRONG^2 / S`` for ``E`` elements at ``S`` draws).
STRONG = 5.0

#: ... and the variable is one level per group when, for the median of the observations
#: moved, the strongest level's squared correlation is this many times the next one's.
DOMINANT = 10.0

#: A variable with fewer levels than this is not tested (a regression's few categorical
#: effects, which do group the observations, are audited as global quantities).
MIN_LEVELS = 10

#: A variable with more elements than this is not tested (its correlations would cost
#: more than the estimators it is read for: 10^4 elements x 64 observations x the draws).
MAX_ELEMENTS = 10_000

#: Observations whose log-likelihood is read for the test: the first ones (a lazy
#: log-likelihood computes only its first chunk for them).
N_COLUMNS = 64

#: A chunk of levels holds at most this many bytes of draws (with 4000 draws, 2000
#: elements).
CHUNK_BYTES = 64 * 2**20


def level_chunks(n_levels: int, n_elements: int, n_draws: int) -> list[slice]:
    """Slices of the levels so that a chunk's draws stay within :data:`CHUNK_BYTES`."""
    step = max(1, CHUNK_BYTES // (8 * n_draws * max(n_elements, 1)))
    return [slice(start, min(start + step, n_levels)) for start in range(0, n_levels, step)]


def one_level_each(chunks: Iterable[np.ndarray], columns: np.ndarray) -> bool:
    """Whether each observation's log-likelihood moves with one level of a variable.

    Parameters
    ----------
    chunks : iterable of ndarray of shape (n_draws, l, E)
        The variable's draws a few levels at a time (:func:`level_chunks`; never the whole
        variable at once): ``l`` levels of the dim tested, ``E`` elements within a level
        (its other dims, flattened).
    columns : ndarray of shape (n_draws, m)
        The log-likelihood of a few observations at the same draws (columns with a value
        that is not finite are left out).

    Returns
    -------
    bool
        True when at least half of the observations are moved by some level (squared
        correlation above ``E STRONG^2 / S``) and, for the median of those, the strongest
        level's squared correlation is at least :data:`DOMINANT` times the next level's.
        False with fewer than two levels or no finite column.

    References
    ----------
    Giordano, R. & Broderick, T. (2023). The Bayesian infinitesimal jackknife for
    variance. arXiv:2305.06466.
    """
    ratio = _dominance(chunks, columns)
    return ratio is not None and bool(np.median(ratio) >= DOMINANT)


def several_levels_each(chunks: Iterable[np.ndarray], columns: np.ndarray) -> bool:
    """Whether each observation's log-likelihood moves with several levels of a variable
    at once, as with a regression's coefficients (``x_n' beta``): the evidence that a
    dim is *not* a grouping of the observations.

    Parameters
    ----------
    chunks, columns
        As :func:`one_level_each`.

    Returns
    -------
    bool
        True when at least half of the observations are moved by some level, the median
        of those is moved by a second level too (its squared correlation above the
        threshold of :func:`one_level_each`) and its strongest level's squared correlation
        is less than :data:`DOMINANT` times the next one's. False otherwise (also where the
        draws cannot tell).
    """
    ratio = _dominance(chunks, columns, second_moved=True)
    return ratio is not None and bool(np.median(ratio) < DOMINANT)


def _dominance(chunks, columns, second_moved: bool = False) -> np.ndarray | None:
    """The strongest level's squared correlation over the next one's, for each observation
    moved by some level (with ``second_moved``: the next one's set to 0 where it does not
    move the observation); None with fewer than half of the observations moved, fewer than
    two levels or no finite column."""
    columns = columns[:, np.isfinite(columns).all(axis=0)]
    if not columns.shape[1]:
        return None
    by_level, threshold = _squared_correlations(chunks, columns)
    if by_level.shape[0] < 2:
        return None
    second, top = np.partition(by_level, by_level.shape[0] - 2, axis=0)[-2:]
    moved = top > threshold
    if moved.sum() < columns.shape[1] / 2:
        return None
    if second_moved:
        second = np.where(second > threshold, second, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(second[moved] > 0, top[moved] / second[moved], np.inf)


#: An index agrees with a variable's levels when the level each moved observation moves
#: with most is the one the index gives it, for at least this share of them.
AGREEING = 0.75


def indexed_levels(chunks: Iterable[np.ndarray], columns: np.ndarray, codes) -> bool | None:
    """Whether each observation's log-likelihood moves with the level of a variable that an
    index gives it: the evidence that an index over the observations is a grouping (a
    0/1 covariate or a coefficient's position is not; a group index is).

    Parameters
    ----------
    chunks : iterable of ndarray of shape (n_draws, l, E)
        The variable's draws a few levels at a time, as :func:`one_level_each` reads them.
    columns : ndarray of shape (n_draws, m)
        The log-likelihood of the first ``m`` observations.
    codes : array_like of int, shape (m,)
        The level (0-based) that the index gives each of those observations.

    Returns
    -------
    bool or None
        True when at least half of the observations are moved by some level (as in
        :func:`one_level_each`) and, of those, at least :data:`AGREEING` move most with the
        level their code names; False when as many are moved and fewer agree; None when
        the draws cannot tell (fewer moved, fewer than two levels, no finite column).
    """
    codes = np.asarray(codes).reshape(-1)
    finite = np.isfinite(columns).all(axis=0)
    columns, codes = columns[:, finite], codes[finite]
    if not columns.shape[1]:
        return None
    by_level, threshold = _squared_correlations(chunks, columns)
    if by_level.shape[0] < 2:
        return None
    moved = by_level.max(axis=0) > threshold
    if moved.sum() < columns.shape[1] / 2:
        return None
    strongest = np.argmax(by_level, axis=0)
    return bool(np.mean(strongest[moved] == codes[moved]) >= AGREEING)


def _squared_correlations(chunks: Iterable[np.ndarray], columns: np.ndarray) -> tuple:
    """Each level's squared correlation with each column, summed over the level's
    elements (L, m), and the threshold above which a column is moved by a level
    (``E STRONG^2 / S``)."""
    observed = _standardised(np.asarray(columns, dtype=float))
    n_draws, parts, n_elements = observed.shape[0], [], 1
    for chunk in chunks:
        n_elements = chunk.shape[2]
        draws = _standardised(np.asarray(chunk, dtype=float).reshape(n_draws, -1))
        squared = (draws.T @ observed / n_draws) ** 2  # (l E, m)
        parts.append(squared.reshape(chunk.shape[1], n_elements, -1).sum(axis=1))
    by_level = np.concatenate(parts) if parts else np.zeros((0, columns.shape[1]))
    return by_level, n_elements * STRONG**2 / n_draws


def _standardised(values: np.ndarray) -> np.ndarray:
    """Columns less their mean over their sd (a constant column: zeros)."""
    centred = values - values.mean(axis=0)
    sd = np.sqrt(np.mean(centred**2, axis=0))
    return centred / np.where(sd > 0, sd, 1.0)
