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

import numpy as np

__all__ = ["one_level_each", "STRONG", "DOMINANT", "MIN_LEVELS", "MAX_ELEMENTS", "N_COLUMNS"]

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

#: Elements standardised at a time (with 4000 draws, 64 MiB).
_CHUNK_BYTES = 64 * 2**20


def one_level_each(draws: np.ndarray, levels: np.ndarray, columns: np.ndarray) -> bool:
    """Whether each observation's log-likelihood moves with one level of a variable.

    Parameters
    ----------
    draws : ndarray of shape (n_draws, Q)
        Draws of posterior quantities (read a chunk of columns at a time: no copy of the
        variable's draws).
    levels : ndarray of int, shape (L, E)
        The columns of ``draws`` that are the variable's elements, by level (``L``, the dim
        tested) and the elements within a level (``E``: its other dims, flattened).
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
    n_draws = draws.shape[0]
    n_levels, n_elements = levels.shape
    columns = columns[:, np.isfinite(columns).all(axis=0)]
    if n_levels < 2 or not columns.shape[1]:
        return False
    observed = _standardised(np.asarray(columns, dtype=float))
    flat = levels.reshape(-1)
    squared = np.empty((flat.size, observed.shape[1]))  # (L E, m)
    step = max(1, _CHUNK_BYTES // (8 * n_draws))
    for start in range(0, flat.size, step):
        part = _standardised(np.asarray(draws[:, flat[start : start + step]], dtype=float))
        squared[start : start + step] = (part.T @ observed / n_draws) ** 2
    squared = squared.reshape(n_levels, n_elements, -1).sum(axis=1)  # (L, m)
    second, top = np.partition(squared, n_levels - 2, axis=0)[-2:]
    moved = top > n_elements * STRONG**2 / n_draws
    if moved.sum() < columns.shape[1] / 2:
        return False
    with np.errstate(divide="ignore"):
        ratio = np.where(second[moved] > 0, top[moved] / second[moved], np.inf)
    return bool(np.median(ratio) >= DOMINANT)


def _standardised(values: np.ndarray) -> np.ndarray:
    """Columns less their mean over their sd (a constant column: zeros)."""
    centred = values - values.mean(axis=0)
    sd = np.sqrt(np.mean(centred**2, axis=0))
    return centred / np.where(sd > 0, sd, 1.0)
