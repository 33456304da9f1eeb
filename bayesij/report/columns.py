"""What each column of the audit report's tables holds: the definitions printed under the
tables (Markdown and HTML)."""

from __future__ import annotations

import pandas as pd

__all__ = ["COLUMNS", "column_definitions", "index_as_columns"]

#: What each column of the report's tables holds.
COLUMNS = {
    "rhat": "rank-normalised split R-hat (above 1.01: the chains have not mixed)",
    "ess_bulk": "bulk effective sample size (below 100 per chain: too few)",
    "ess_tail": "tail effective sample size, the 5 % and 95 % quantiles' (below 100 per chain: "
    "too few)",
    "posterior_sd": "posterior standard deviation of the quantity",
    "ij_sd": "infinitesimal-jackknife (frequentist) sd over the units, Monte Carlo-corrected",
    "sd_ratio": "ij_sd / posterior_sd (blank where the corrected IJ variance is not positive)",
    "mcse_ij_variance": "Monte Carlo standard error of the IJ variance",
    "draws_needed": "draws (in all) at which the IJ variance would pass 2 MCSE",
    "verdict": "the comparison's (or check's) conclusion",
    "reason": "why: the ratio, or what makes the comparison undetermined or not applicable",
    "target": "sign, significance, sign_and_significance, or a change to reach",
    "metric": "what the target moves: the mean, or the end of mean ± 1.96 sd nearer 0",
    "original": "the metric on all the data",
    "answer": "reached / not reachable / undetermined (by Monte Carlo error or the "
    "linearisation: a refit decides; with n_drop, "
    "a sure set that may be more than twice the smallest: an upper bound)",
    "n_drop": "size of the set dropped (the smallest found that reaches the target; an upper "
    "bound when the answer is undetermined)",
    "size_interval": "95 % interval of the smallest set's size, Monte Carlo error and "
    "linearisation together (inf: beyond alpha_max)",
    "predicted_change": "the metric's change predicted from all draws, to second order (set "
    "chosen and predicted on the same draws: optimistic); after refits, the refit's",
    "split_change": "the set chosen on half the draws, its first-order change predicted on "
    "the other half: free of the selection's optimism (first order, so short where the "
    "second order is not)",
    "change_interval": "95 % Monte Carlo interval of predicted_change",
    "dropped": "the units of the set",
    "nonlinearity_index": "how far the IJ's linear leave-one-unit-out changes are from "
    "importance sampling (reliable <= 0.1 < doubtful <= 0.3 < unreliable)",
    "units_excluded": "units whose k-hat is too high to check (refit them)",
    "refit_first": "units to refit first to check the linear approximation",
    "prior": "power-scaling sensitivity to the prior (CJS distance gradient)",
    "likelihood": "power-scaling sensitivity to the likelihood",
    "diagnosis": "prior-data conflict, strong prior / weak likelihood, or -",
}


def column_definitions(table: pd.DataFrame) -> dict:
    """The definitions of ``table``'s columns that :data:`COLUMNS` has."""
    return {c: COLUMNS[c] for c in table.columns if c in COLUMNS}


def index_as_columns(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``table`` with its row labels as ordinary first columns, and their names: an unnamed
    level is ``row`` (``elpd_loo``, ``p_loo``...); a default 0, 1, ... index is dropped.
    What the HTML report and the CSV files for R both show."""
    if isinstance(table.index, pd.RangeIndex) and table.index.name is None:
        return table, []
    named = table.rename_axis([n if n is not None else "row" for n in table.index.names])
    return named.reset_index(), [str(n) for n in named.index.names]
