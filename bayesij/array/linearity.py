"""How far the linear (IJ) prediction of leaving a unit out is from an importance-sampling one.

For each quantity ``f`` and unit ``u`` (observation or group), from the same draws:

* the linear prediction of the change of ``E[f]`` when ``u`` is left out,
  ``delta_lin(u) = -psi_u = -Cov(f, l_u)``;
* the importance-sampling estimate of the same change,
  ``delta_is(u) = E[f w_u] / E[w_u] - E[f]`` with ``w_u = 1 / p(x_u | theta)``
  Pareto-smoothed (PSIS), valid to all orders where its k-hat is small.

Where the posterior mean is linear in the unit's weight the two agree up to Monte Carlo
error; where it is not (local parameters that do not concentrate, outliers in a heavy-tailed
likelihood) they part.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import checked_r_eff, fail, impossible_columns
from bayesij.array.influence import InfluenceScores, influence_scores
from bayesij.array.loo import loo_methods
from bayesij.array.numeric import obs_chunks

__all__ = ["LinearityArrays", "leave_out_changes", "nonlinearity_index"]


class LinearityArrays(NamedTuple):
    """Predicted changes of posterior means when each unit is left out.

    Attributes
    ----------
    delta_lin : ndarray of shape (n_quantities, n_units)
        ``-psi``: the first-order (IJ) prediction.
    delta_is : ndarray of shape (n_quantities, n_units)
        The PSIS estimate.
    pareto_k : ndarray of shape (n_units,)
        k-hat of the importance ratios ``1 / p(x_u | theta)``.
    mcse_lin : ndarray of shape (n_quantities, n_units)
        Monte Carlo standard error of ``delta_lin``.
    """

    delta_lin: np.ndarray
    delta_is: np.ndarray
    pareto_k: np.ndarray
    mcse_lin: np.ndarray


def leave_out_changes(
    quantities: np.ndarray,
    log_lik: np.ndarray,
    r_eff=None,
    tail_rule: str = "ceil",
    *,
    ties: str = "above",
    scores: InfluenceScores | None = None,
    log_weights: np.ndarray | None = None,
    pareto_k: np.ndarray | None = None,
    check: bool = True,
) -> LinearityArrays:
    """Linear and importance-sampling predictions of leaving out each unit.

    Parameters
    ----------
    quantities : ndarray of shape (n_chains, n_draws, n_quantities)
    log_lik : ndarray of shape (n_chains, n_draws, n_units)
        Finite log-likelihood of each exchangeable unit.
    r_eff : float or array_like of shape (n_units,), optional
        Relative efficiency for the Pareto tail length; default R loo's from the chains.
    tail_rule : {"ceil", "floor"}, default "ceil"
    ties : {"above", "position", "quicksort"}, default "above"
        As :func:`bayesij.array.psis.psis_chunk`.
    scores : InfluenceScores, optional
        ``psi`` and its MCSE for these quantities and units, when already computed (the IJ
        covariance computes them in the same pass).
    log_weights, pareto_k : ndarray of shape (n_draws_total, n_units) and (n_units,), optional
        Normalised PSIS leave-one-unit-out log-weights and their k-hat, when already
        computed (a LOO result kept with ``save_psis=True``): no smoothing is done again.
        Otherwise the PSIS-LOO pass (:func:`bayesij.array.loo.loo_methods`, its compiled
        kernel) gives the leave-one-out means from its own smoothed weights, which are
        never stored.
    check : bool, default True
        As :func:`bayesij.array.influence.influence_scores`.

    Returns
    -------
    LinearityArrays

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [2] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """
    given_r_eff = None if r_eff is None else checked_r_eff(r_eff, log_lik.shape[2])
    if impossible_columns(log_lik).any():  # column by column: no matrix-sized mask
        raise fail("log_lik", "-inf values", "finite log-likelihood for the linearity check")
    if scores is None:
        scores = influence_scores(quantities, log_lik, check=check)
    n_chains, n_draws, n_units = log_lik.shape
    f = quantities.reshape(n_chains * n_draws, -1)
    if log_weights is not None and pareto_k is not None:
        delta_is = np.empty((f.shape[1], n_units))
        for chunk in obs_chunks(n_units, 2 * f.shape[0]):
            delta_is[:, chunk] = f.T @ np.exp(log_weights[:, chunk]) - f.mean(axis=0)[:, None]
        return LinearityArrays(-scores.psi, delta_is, np.asarray(pareto_k), scores.mcse)
    smoothed = loo_methods(
        log_lik,
        ("psis",),
        r_eff=given_r_eff,
        tail_rule=tail_rule,
        ties=ties,
        check=False,
        expectation_draws=f,
    )["psis"]
    assert smoothed.expectations is not None  # asked for with expectation_draws
    delta_is = smoothed.expectations - f.mean(axis=0)[:, None]
    return LinearityArrays(-scores.psi, delta_is, smoothed.pareto_k, scores.mcse)


def nonlinearity_index(
    changes: LinearityArrays, k_threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """``sqrt(sum_u (delta_is - delta_lin)^2 / sum_u delta_lin^2)`` over reliable units.

    Units whose k-hat exceeds ``k_threshold`` are left out (their IS estimate is not
    trustworthy). Returns the index per quantity, shape (n_quantities,), and the mask of
    units used, shape (n_units,).
    """
    used = changes.pareto_k <= k_threshold
    difference = (changes.delta_is - changes.delta_lin)[:, used]
    scale = (changes.delta_lin[:, used] ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        index = np.sqrt((difference**2).sum(axis=1) / scale)
    return index, used
