"""The array layer: every estimator as a function of NumPy arrays of posterior draws.

Depends on NumPy and SciPy only (no xarray, pandas or I/O); a test checks that importing it
loads neither. Draw arrays are ``(n_draws, n_columns)`` with optional ``chain_ids`` of shape
``(n_draws,)``, or ``(n_chains, n_draws, n_columns)``. One module per estimator, named as the
public function of the labelled layer (:mod:`bayesij.stats`) that wraps it: ``psis``,
``ess``, ``loo``, ``kfold``, ``waic``, ``dic``, ``influence``, ``jackknife``, ``linearity``,
``amip``; ``numeric`` and ``blocks`` hold what they share, ``checks`` the input checks.
"""

from bayesij.array.influence import InfluenceScores, influence_scores
from bayesij.array.jackknife import IJArrays, ij_covariance
from bayesij.array.numeric import sum_by_group

__all__ = ["InfluenceScores", "influence_scores", "sum_by_group", "IJArrays", "ij_covariance"]
