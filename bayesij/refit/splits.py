"""K-fold splits: random, grouped (groups kept whole) and stratified.

Each returns the fold (1..K) of every observation, with fold sizes differing by at most one
(grouped: fold sizes in groups as balanced as a greedy assignment allows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.checks import check_positive_int, fail

__all__ = ["kfold_split_random", "kfold_split_grouped", "kfold_split_stratified"]


def _check_k(K: int, n_units: int, unit: str) -> int:
    check_positive_int(K, "K")
    if not 2 <= K <= n_units:
        raise fail("K", str(K), f"between 2 and the number of {unit} ({n_units})")
    return int(K)


def _balanced_labels(n: int, K: int, rng) -> np.ndarray:
    """Labels 1..K, each used floor(n/K) or ceil(n/K) times, in random order."""
    return rng.permutation(np.arange(n) % K + 1)


def kfold_split_contiguous(n_obs: int, K: int = 10) -> np.ndarray:
    """Contiguous folds in order, shape (n_obs,), values 1..K: sizes differ by at most one,
    the first ``n_obs % K`` folds holding one more (the assignment the shipped
    ``linear_regression_kfold`` Stan model computes; seed 004's fold sizes are wrong).

    >>> kfold_split_contiguous(7, 3).tolist()
    [1, 1, 1, 2, 2, 3, 3]
    """
    check_positive_int(n_obs, "n_obs")
    K = _check_k(K, n_obs, "observations")
    sizes = n_obs // K + (np.arange(K) < n_obs % K)
    return np.repeat(np.arange(1, K + 1), sizes)


def kfold_split_random(n_obs: int, K: int = 10, seed: int = 0) -> np.ndarray:
    """Random folds of ``n_obs`` observations, shape (n_obs,), values 1..K."""
    check_positive_int(n_obs, "n_obs")
    K = _check_k(K, n_obs, "observations")
    return _balanced_labels(n_obs, K, np.random.default_rng(seed))


def _label_vector(values, argument: str, what: str) -> np.ndarray:
    """One label per observation, none missing (NaN or None)."""
    labels = np.asarray(values)
    if labels.ndim != 1:
        raise fail(argument, f"shape {labels.shape}", f"one {what} label per observation")
    missing = pd.isna(labels)
    if missing.any():
        raise fail(
            argument,
            f"{int(missing.sum())} missing label(s) (first at {int(np.argmax(missing))})",
            f"a {what} label for every observation",
        )
    return labels


def kfold_split_grouped(groups, K: int = 10, seed: int = 0) -> np.ndarray:
    """Folds that keep every group whole: shape (n_obs,), values 1..K.

    Groups are shuffled and assigned, largest first, to the fold with the fewest
    observations so far, so fold sizes are as even as the group sizes allow (exactly
    balanced in groups when all groups have the same size).
    """
    labels = _label_vector(groups, "groups", "group")
    unique, codes, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    if unique.size < 2:
        raise fail("groups", f"{unique.size} distinct group", "at least 2 groups to form folds")
    K = _check_k(K, unique.size, "groups")
    rng = np.random.default_rng(seed)
    order = rng.permutation(unique.size)
    order = order[np.argsort(-sizes[order], kind="stable")]
    fold_of_group = np.empty(unique.size, dtype=int)
    filled = np.zeros(K, dtype=int)
    for group in order:
        fold = int(np.argmin(filled))
        fold_of_group[group] = fold + 1
        filled[fold] += sizes[group]
    return fold_of_group[codes]


def kfold_split_stratified(strata, K: int = 10, seed: int = 0) -> np.ndarray:
    """Folds with each stratum (e.g. outcome class) spread evenly: shape (n_obs,), 1..K.

    Observations are ordered by stratum (randomly within each) and dealt to folds in
    turn, so every fold gets floor or ceil of its share of each stratum and fold sizes
    differ by at most one.
    """
    labels = _label_vector(strata, "strata", "stratum")
    K = _check_k(K, labels.size, "observations")
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(labels.size)
    _, codes = np.unique(labels[shuffled], return_inverse=True)
    dealt = shuffled[np.argsort(codes, kind="stable")]
    folds = np.empty(labels.size, dtype=int)
    folds[dealt] = np.arange(labels.size) % K + 1
    return folds
