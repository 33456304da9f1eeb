"""The estimators of an audit from one pass over the draws: IJ covariance and influence,
PSIS-LOO, the linearity check, WAIC and the AMIP searches' influences, each block of units
read once (:func:`bayesij.array.audit.audit_parts`)."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from bayesij.array.amip import influence_centres
from bayesij.array.audit import audit_parts
from bayesij.array.jackknife import ij_join
from bayesij.array.linearity import LinearityArrays
from bayesij.array.numeric import release_freed_memory
from bayesij.data.source import join_blocks, map_blocks
from bayesij.stats.amip import (
    Z_DEFAULT,
    amip_goals,
    joined_influence,
    offer_block,
    pass_keeps,
    searches_from,
    set_columns,
)
from bayesij.stats.jackknife import IJCovariance, ij_result, source_setup
from bayesij.stats.linearity import LinearityResult, linearity_result
from bayesij.stats.loo import LooResult, loo_results
from bayesij.stats.peers import psis_rules
from bayesij.stats.waic import WaicResult, waic_result

__all__ = ["AuditPass", "audit_pass"]


class AuditPass(NamedTuple):
    """What :func:`audit_pass` computed: each the result the estimator of its name gives
    for the same source (``ij_covariance``, ``loo``, ``linearity`` with ``scores`` from the
    IJ, ``waic``, and ``amip`` of each question, without refits)."""

    ij: IJCovariance
    loo: LooResult
    linearity: LinearityResult
    waic: WaicResult
    amip: list


def audit_pass(
    source,
    questions: list,
    *,
    method: str,
    alpha_max: float,
    z: float = Z_DEFAULT,
    score=None,
    unconstrained=None,
    parameters=None,
    client=None,
) -> AuditPass:
    """Every estimator of an audit from one read of each block of units of ``source``.

    Parameters
    ----------
    source : LogLikSource
        With the quantities' draws (:func:`bayesij.data.fit.as_source`,
        ``need_quantities=True``); lazy or in memory.
    questions : list of (str, target)
        The AMIP questions, ``(quantity, target)`` pairs as :func:`bayesij.amip` takes them;
        may be empty.
    method : {"linear", "reweighted"}
        AMIP method ("reweighted" needs the matrix in memory: its greedy steps revisit it).
    alpha_max, z : float
        As :func:`bayesij.amip`.
    score, unconstrained : array_like of shape (n_chains, n_draws, P), optional
        As :func:`bayesij.amip`: the AMIP influences with zero-variance control variates.
    parameters : FitDraws, optional
        The fit's posterior draws the AMIP's models read (:func:`bayesij.stats.amip.
        fit_draws`): the second-order model's parameters and every quantity for the models
        recovered from the draws; default the source's quantities.
    client : dask.distributed.Client, optional
        Run the pass over a lazy source's blocks on this cluster, and sum the linear sets
        and take the second-order model's columns there
        (:func:`bayesij.data.source.map_blocks`): only per-unit results, the sets' sums and
        those columns come back.

    Returns
    -------
    AuditPass

    Notes
    -----
    Influence, IJ sums, PSIS-LOO (with the quantities' leave-one-out means, which are the
    linearity check's importance-sampling changes), WAIC terms and the AMIP metrics'
    influences all depend on a unit's own column, so they come from one read of each block:
    a dask chunk or a function's block is computed once for all of them. PSIS follows
    bayesij's conventions (as :func:`bayesij.loo` with none given).

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [2] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    .. [3] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric. arXiv:2011.14999.
    """
    n_blocks = 50
    setup = source_setup(source, n_blocks=n_blocks)
    draws = source.quantity_draws
    settings = psis_rules(None)
    r_eff = source.relative_eff(settings.r_eff_rule, settings.convention, given=settings.r_eff)
    fs, goals = amip_goals(source, questions, z) if questions else ([], [])
    kernel = partial(
        audit_parts,
        setup=setup,
        tail_rule=settings.tail_rule,
        ties=settings.ties,
        fs=fs,
        goals=goals,
        with_half=method == "linear",
        score=score,
        unconstrained=unconstrained,
        centres=influence_centres(fs, goals, method == "linear", score, unconstrained),
    )
    per_unit = {"positions": np.arange(source.n_units), "r_eff": r_eff}
    gradient = None if score is None else (score, unconstrained)
    # on a cluster the blocks stay there: nothing kept of them here
    kept = set_columns(source, goals, method, gradient) if client is None else None
    keeps = pass_keeps(source, fs, goals, method, alpha_max)

    def keep(block, start, part) -> None:
        offer_block(kept, keeps, block, start, part.influence)

    parts = map_blocks(source, kernel, per_unit=per_unit, join=False, keep=keep, client=client)
    del per_unit  # the positions (a unit's int64 each)
    names, index = list(source.quantity_names), source.index  # one index for every result
    ij_arrays = ij_join([part.ij for part in parts], setup)
    loo_parts, waic_parts = [part.loo for part in parts], [part.waic for part in parts]
    influence_parts = [part.influence for part in parts]
    del parts  # each section's list holds its blocks alone: joining lets go of them
    release_freed_memory()  # the pass's temporaries, before the searches allocate theirs
    loo_arrays = join_blocks(loo_parts)
    waic_parts = join_blocks(waic_parts)
    influence = None
    if keeps is not None:  # the pass kept what the searches read: nothing to join
        influence = keeps.into(source.n_units)
        release_freed_memory()  # what the exact cut let go, before the columns are read
    elif questions:
        influence = joined_influence(influence_parts, goals)
    del influence_parts
    ij = ij_result(ij_arrays, names, source.units, draws, n_blocks)
    loo = loo_results(
        {"psis": loo_arrays}, index, source.n_draws, settings.tail_rule, settings.ddof
    )["psis"]
    scores = ij_arrays.scores
    assert loo_arrays.expectations is not None  # asked for with expectation_draws
    changes = LinearityArrays(
        -scores.psi, loo_arrays.expectations, loo_arrays.pareto_k, scores.mcse
    )
    checked = linearity_result(changes, draws, names, index, source.n_draws)
    waic = waic_result(waic_parts, index, beta=1.0, ddof=0, n_draws=source.n_draws)
    # copied into the results: not held while the searches run (at N = 4 10^5 the
    # joined WAIC terms are 18 MiB)
    del changes, loo_arrays, waic_parts
    found = []
    if questions:
        searches = searches_from(
            source,
            questions,
            (fs, goals),
            influence,
            method,
            alpha_max,
            gradient=gradient,
            kept=kept,
            parameters=parameters,
            client=client,
        )
        found = [result for result, _ in searches]
    return AuditPass(ij, loo, checked, waic, found)
