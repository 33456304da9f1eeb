"""Every per-unit quantity of an audit from one read of each block of units.

The audit needs, for every unit, its influence on the quantities and their IJ sums
(:func:`bayesij.array.jackknife.ij_part`), its PSIS-LOO terms with the leave-one-out means
of the quantities that the linearity check compares with ``-psi``
(:func:`bayesij.array.loo.loo_methods`), its WAIC terms
(:func:`bayesij.array.waic.waic_parts`, from the rows PSIS-LOO transposes: one
transposition for both) and the influence of every AMIP metric
(:func:`bayesij.array.amip.metrics_influence`). Each depends on the unit's own column
only, so one block read once gives them all: a lazy log-likelihood (dask chunks, a
function) is computed once for the whole audit, not once per section.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from bayesij.array.amip import goal_influence
from bayesij.array.jackknife import IJPart, IJSetup, ij_part
from bayesij.array.loo import LooArrays, loo_methods
from bayesij.array.waic import WaicParts, terms_of_rows

__all__ = ["AuditParts", "audit_parts"]


class AuditParts(NamedTuple):
    """The per-unit parts of one block of units.

    Attributes
    ----------
    ij : IJPart
        Influence scores and the IJ sums of the block (joined by
        :func:`bayesij.array.jackknife.ij_join`).
    loo : LooArrays
        PSIS-LOO of the block's units, with ``expectations`` (K, b): the leave-one-out
        means of the quantities.
    waic : WaicParts
    influence : dict or None
        :func:`bayesij.array.amip.goal_influence` of the AMIP goals (None without goals).
    """

    ij: IJPart
    loo: LooArrays
    waic: WaicParts
    influence: dict | None


def audit_parts(
    log_lik: np.ndarray,
    positions: np.ndarray,
    *,
    setup: IJSetup,
    r_eff: np.ndarray | None = None,
    tail_rule: str = "ceil",
    ties: str = "above",
    fs: list | None = None,
    goals: list | None = None,
    with_half: bool = False,
    score: np.ndarray | None = None,
    unconstrained: np.ndarray | None = None,
    centres: dict | None = None,
) -> AuditParts:
    """The audit's parts of one checked block of units, (n_chains, n_draws, b).

    Parameters
    ----------
    log_lik : ndarray of shape (n_chains, n_draws, b)
    positions : ndarray of shape (b,)
        The units' positions (for messages).
    setup : IJSetup
        The quantities' shared IJ setup (:func:`bayesij.array.jackknife.ij_setup`); its
        centred draws are those whose leave-one-out means the LOO pass also returns.
    r_eff : ndarray of shape (b,), optional
        Relative efficiencies (default: from the chains, as R loo).
    tail_rule, ties : str
        PSIS options (:func:`bayesij.array.loo.loo_methods`).
    fs, goals : list, optional
        The AMIP goals and their quantities' draws (n_chains, n_draws) each.
    with_half : bool, default False
        Also the goals' influence on the first half of the draws (the linear AMIP's
        split-draw check).
    score, unconstrained : ndarray of shape (n_chains, n_draws, P), optional
        The log posterior's gradient and the unconstrained draws: the goals' influences
        with zero-variance control variates (:func:`bayesij.array.amip.goal_influence`).
    centres : dict, optional
        :func:`bayesij.array.amip.influence_centres` of the goals, computed once for every
        block.

    Returns
    -------
    AuditParts
    """
    ij = ij_part(log_lik, setup, positions)
    waic_terms = np.empty((6, log_lik.shape[-1]))  # WAIC's, from PSIS's transposed rows
    loo = loo_methods(
        log_lik,
        ("psis",),
        r_eff=r_eff,
        tail_rule=tail_rule,
        ties=ties,
        check=False,
        expectation_draws=setup.centred_f,
        each_chunk=partial(terms_of_rows, beta=1.0, out=waic_terms),
    )["psis"]
    waic = WaicParts(*waic_terms)
    influence = None
    if goals:
        influence = goal_influence(
            log_lik, fs or [], goals, with_half, score, unconstrained, centres
        )
    return AuditParts(ij, loo, waic, influence)
