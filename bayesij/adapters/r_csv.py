"""Draws and pointwise log-likelihood exported from R as CSV files.

What rstanarm, brms and cmdstanr users can write without knowing Python:

* ``write.csv(as.matrix(fit), "draws.csv")`` and ``write.csv(log_lik(fit), "log_lik.csv")``:
  one row per draw (chains one after another), R's row names in a first unnamed column;
* a draws-format CSV of the posterior package (``write.csv(posterior::as_draws_df(fit))``),
  whose ``.chain``, ``.iteration`` and ``.draw`` columns give the chains.
"""

from __future__ import annotations

import collections
import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd

from bayesij.array.checks import fail
from bayesij.data.arrays import from_arrays
from bayesij.data.posterior import Posterior, select_names

__all__ = ["from_csv"]

#: Columns of the posterior package's draws format that are not draws of a quantity.
DRAWS_META = (".chain", ".iteration", ".draw")


def _read(path, argument: str) -> pd.DataFrame:
    if not isinstance(path, (str, os.PathLike)):
        raise fail(argument, f"a {type(path).__name__}", "the path of a CSV file")
    if not Path(path).is_file():
        raise fail(argument, f"no file at {str(path)!r}", "the path of a CSV file")
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as error:
        raise fail(argument, f"a file pandas cannot read as CSV ({error})", "a CSV file") from None
    _check_unique_header(path, argument)
    first = table.columns[0]
    if first == "" or first.startswith("Unnamed: 0"):  # R's row names
        table = table.drop(columns=first)
    if table.shape[0] < 2 or table.shape[1] < 1:
        raise fail(argument, f"a table of shape {table.shape}", "one row per draw (at least 2)")
    return table


def _check_unique_header(path, argument: str) -> None:
    """Column names as written, each once: pandas renames a repeated ``a`` to ``a.1``, a
    quantity or observation the file never named."""
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        header = next(csv.reader(handle), [])
    counts = collections.Counter(header)
    repeated = [name for name, count in counts.items() if count > 1]
    if repeated:
        raise fail(
            argument,
            f"repeated column name(s) {repeated[:5]}",
            "each column named once (pandas would rename the second one, e.g. 'a.1')",
        )


def _numeric(table: pd.DataFrame, argument: str) -> np.ndarray:
    bad = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    if bad:
        raise fail(argument, f"non-numeric column(s) {bad[:5]}", "numbers in every column")
    return table.to_numpy(dtype=float)


def _obs_ids(columns) -> list:
    """``V1..VN`` or ``1..N`` (R's defaults) become 1..N; other names are kept."""
    names = [str(c) for c in columns]
    for prefix in ("V", ""):
        stripped = [n[len(prefix) :] if n.startswith(prefix) else "" for n in names]
        if all(s.isdigit() for s in stripped):
            return [int(s) for s in stripped]
    return names


def _chain_ids(table: pd.DataFrame, chains, n_rows: int) -> np.ndarray:
    if ".chain" in table.columns:
        if chains is not None:
            found = np.unique(table[".chain"]).size
            if found != chains:
                raise fail("chains", repr(chains), f"the {found} chains of the .chain column")
        return table[".chain"].to_numpy()
    if chains is None:
        return np.zeros(n_rows, dtype=int)
    if isinstance(chains, bool) or not isinstance(chains, (int, np.integer)) or chains < 1:
        raise fail("chains", repr(chains), "a whole number of chains >= 1")
    if n_rows % chains:
        raise fail(
            "chains",
            f"{chains} chains for {n_rows} draws",
            "a number of chains that divides the number of draws",
        )
    return np.repeat(np.arange(chains), n_rows // chains)


def _keys(table: pd.DataFrame) -> list[str]:
    """The columns that name a draw: ``.chain`` with ``.draw`` (or ``.iteration``)."""
    if ".chain" not in table.columns:
        return []
    within = ".draw" if ".draw" in table.columns else ".iteration"
    return [".chain", within] if within in table.columns else []


def _paired_by_draw(draws: pd.DataFrame, log_lik: pd.DataFrame):
    """Both tables in the same draw order, paired by their ``.chain`` / ``.draw`` columns
    when both have them (rows in different orders are matched, not mispaired); a log-lik
    table whose draws are not the draws table's is refused."""
    keys, ll_keys = _keys(draws), _keys(log_lik)
    if not ll_keys:
        return draws, log_lik
    if keys != ll_keys:
        raise fail(
            "log_lik",
            f"draw columns {ll_keys} while draws has {keys or 'none'}",
            "the same draw columns in both files (or none in the log-likelihood file: then "
            "its rows are the draws file's, in order)",
        )
    draws, log_lik = (
        draws.sort_values(keys, kind="stable"),
        log_lik.sort_values(keys, kind="stable"),
    )
    own, other = draws[keys].to_numpy(), log_lik[keys].to_numpy()
    duplicated = draws.duplicated(keys).any() or log_lik.duplicated(keys).any()
    if duplicated or not np.array_equal(own, other):
        raise fail(
            "log_lik",
            "draws (.chain, "
            + keys[1]
            + ") that are not the draws file's"
            + (" (a draw twice)" if duplicated else ""),
            "the same draws in both files, each once",
        )
    return draws.reset_index(drop=True), log_lik.reset_index(drop=True)


def from_csv(
    draws, log_lik, *, chains: int | None = None, quantities=None, groups=None
) -> Posterior:
    """A posterior container from CSV files of draws and pointwise log-likelihood.

    Parameters
    ----------
    draws : str or path
        One row per draw, one column per quantity (``write.csv(as.matrix(fit))`` in R, or a
        posterior draws-format CSV with ``.chain`` / ``.iteration`` / ``.draw`` columns).
    log_lik : str or path
        One row per draw (the same draws, in the same order), one column per observation
        (``write.csv(log_lik(fit))``). Columns ``V1..VN`` or ``1..N`` become ids 1..N.
    chains : int, optional
        Number of chains, stacked one after another in the rows (as ``as.matrix`` writes
        them). Taken from the ``.chain`` column when there is one; default one chain (then
        Monte Carlo errors cannot see differences between chains).
    quantities : str or list of str, optional
        Columns to keep (default: all).
    groups : array_like or mapping, optional
        Exchangeable unit of each observation.

    Returns
    -------
    Posterior

    Examples
    --------
    >>> import numpy as np, pandas as pd, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> pd.DataFrame(rng.normal(size=(400, 2)), columns=["(Intercept)", "x"]).to_csv(
    ...     os.path.join(folder, "draws.csv"))
    >>> pd.DataFrame(rng.normal(size=(400, 5)), columns=[f"V{i}" for i in range(1, 6)]).to_csv(
    ...     os.path.join(folder, "log_lik.csv"))
    >>> post = from_csv(os.path.join(folder, "draws.csv"), os.path.join(folder, "log_lik.csv"),
    ...                 chains=4)
    >>> post.n_chains, post.quantity_names, post.obs_names
    (4, ['(Intercept)', 'x'], [1, 2, 3, 4, 5])
    """
    draw_table = _read(draws, "draws")
    ll_table = _read(log_lik, "log_lik")
    if draw_table.shape[0] != ll_table.shape[0]:
        raise fail(
            "log_lik",
            f"{ll_table.shape[0]} rows while draws has {draw_table.shape[0]}",
            "one row per draw in both files, the same draws in the same order",
        )
    draw_table, ll_table = _paired_by_draw(draw_table, ll_table)
    codes = _chain_ids(draw_table, chains, draw_table.shape[0])
    ll_table = ll_table.drop(columns=[c for c in DRAWS_META if c in ll_table.columns])
    draw_table = draw_table.drop(columns=[c for c in DRAWS_META if c in draw_table.columns])
    names = [str(c) for c in draw_table.columns]
    if quantities is not None:
        names = select_names(names, quantities)
        draw_table = draw_table[names]
    return from_arrays(
        _numeric(draw_table, "draws"),
        _numeric(ll_table, "log_lik"),
        chain_ids=codes,
        quantity_names=names,
        obs_names=_obs_ids(ll_table.columns),
        groups=groups,
    )
