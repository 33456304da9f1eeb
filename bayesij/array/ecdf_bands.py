"""Simultaneous confidence bands for the ECDF of values that should be uniform (LOO-PIT), and
the uniformity test they give (Säilynoja, Bürkner & Vehtari 2022).

A pointwise band at level ``p`` holds the ECDF of ``n`` uniform values at each evaluation
point ``z`` with probability ``p``: the binomial quantiles of ``Bin(n, z)`` over ``n``. The
simultaneous band widens ``p`` until the whole ECDF stays inside with probability
``prob``: for each of many simulated uniform samples the smallest ``p`` whose band holds it
everywhere is ``gamma = 1 - 2 min_z min(F(n ECDF(z)), 1 - F(n ECDF(z) - 1))`` (``F`` the
binomial CDF), and the band's ``p`` is the ``prob`` quantile of those. The same ``gamma`` of
the observed values is the test statistic: its p-value is the share of simulated samples
with a ``gamma`` at least as large.

References
----------
.. [1] Säilynoja, T., Bürkner, P.-C. and Vehtari, A. (2022). Graphical test for discrete
   uniformity and its applications in goodness-of-fit evaluation and multiple sample
   comparison. Statistics and Computing 32, 32.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import bdtr, bdtrik

__all__ = ["EcdfBand", "simultaneous_band", "uniformity_gamma"]


class EcdfBand(NamedTuple):
    """``grid`` (n + 1,) from 0 to 1 in steps of 1/n; ``lower`` / ``upper`` the band there;
    ``pointwise_prob`` the pointwise level it corresponds to; ``gammas`` (n_simulations,)
    the statistic of each simulated uniform sample."""

    grid: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    pointwise_prob: float
    gammas: np.ndarray


def uniformity_gamma(values: np.ndarray, eval_points: np.ndarray) -> np.ndarray:
    """``gamma`` of each row of ``values`` (m, n): the smallest pointwise level whose
    binomial band holds that row's ECDF at every evaluation point."""
    n = values.shape[1]
    counts = np.empty((values.shape[0], eval_points.size), dtype=np.int64)
    for row, sample in enumerate(np.sort(values, axis=1)):
        counts[row] = np.searchsorted(sample, eval_points, side="right")
    lower_tail = np.min(bdtr(counts, n, eval_points), axis=1)
    below = np.where(counts > 0, bdtr(np.maximum(counts - 1, 0), n, eval_points), 0.0)
    upper_tail = np.min(1 - below, axis=1)  # P(count >= observed); 1 at a count of 0
    return 1 - 2 * np.minimum(lower_tail, upper_tail)


def simultaneous_band(n: int, prob: float, n_simulations: int, rng) -> EcdfBand:
    """The simultaneous ``prob`` band of the ECDF of ``n`` uniform values, by simulation.

    Parameters
    ----------
    n : int
        Number of values.
    prob : float
        Simultaneous coverage.
    n_simulations : int
        Simulated uniform samples (drawn as ``rng.uniform(size=(n_simulations, n))``).
    rng : numpy.random.Generator

    References
    ----------
    .. [1] Säilynoja, T., Bürkner, P.-C. and Vehtari, A. (2022). Statistics and Computing
       32, 32.
    """
    eval_points = np.arange(1, n) / n
    gammas = uniformity_gamma(rng.uniform(0, 1, size=(n_simulations, n)), eval_points)
    pointwise = float(np.quantile(gammas, prob))
    tail = (1 - pointwise) / 2
    lower = np.ceil(bdtrik(tail, n, eval_points)) / n
    upper = np.ceil(bdtrik(1 - tail, n, eval_points)) / n
    grid = np.r_[0.0, eval_points, 1.0]
    return EcdfBand(grid, np.r_[0.0, lower, 1.0], np.r_[0.0, upper, 1.0], pointwise, gammas)
