"""The array layer: every estimator as a function of NumPy arrays of posterior draws.

Depends on NumPy and SciPy only (no xarray, pandas or I/O); a test checks that importing it
loads neither. Draw arrays are ``(n_draws, n_columns)`` with optional ``chain_ids`` of shape
``(n_draws,)``, or ``(n_chains, n_draws, n_columns)``.
"""

from bayesij.array.influence import InfluenceScores, influence_scores, sum_by_group
from bayesij.array.jackknife import IJArrays, ij_covariance

__all__ = ["InfluenceScores", "influence_scores", "sum_by_group", "IJArrays", "ij_covariance"]
