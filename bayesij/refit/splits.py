"""K-fold splits: random, grouped (groups kept whole) and stratified.

Each returns the fold (1..K) of every observation, with fold sizes differing by at most one
(grouped: fold sizes in groups as balanced as a greedy assignment allows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.checks import check_positive_int, check_real, check_seed, fail
from bayesij.data.posterior import label_codes

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
    ``linear_regression_kfold`` Stan model computes; the Stan User's Guide draft's fold
    sizes are wrong).

    >>> kfold_split_contiguous(7, 3).tolist()
    [1, 1, 1, 2, 2, 3, 3]

    Examples
    --------
    >>> from bayesij import refit
    >>> refit.kfold_split_contiguous(6, K=3)
    array([1, 1, 2, 2, 3, 3])
    """
    check_positive_int(n_obs, "n_obs")
    K = _check_k(K, n_obs, "observations")
    sizes = n_obs // K + (np.arange(K) < n_obs % K)
    return np.repeat(np.arange(1, K + 1), sizes)


def lwcv_split(
    n_times: int, proportion: float, *, contiguous: bool = False, n_folds: int = 10, seed: int = 0
) -> list[np.ndarray]:
    """Leave-within-series-out folds of a series of ``n_times`` points (Ghosh et al. 2020,
    appendix).

    Each of ``n_folds`` folds is drawn independently (folds may overlap, as Monte Carlo
    cross-validation) with ``m = floor(proportion * n_times)``:

    * i.i.d.: ``m`` distinct time points uniformly at random;
    * contiguous: ``t`` uniform on ``m + 1 .. n_times`` (1-based) and the block
      ``t - m .. t``, i.e. ``m + 1`` consecutive points, as the appendix defines it.

    Returns a list of sorted 0-based positions, one array per fold.

    Examples
    --------
    >>> [fold.tolist() for fold in lwcv_split(10, 0.2, contiguous=True, n_folds=2, seed=1)]
    [[3, 4, 5], [4, 5, 6]]
    """
    check_positive_int(n_times, "n_times", minimum=2)
    proportion = check_real(proportion, "proportion", 0.0, 1.0, low_open=True, high_open=True)
    n_folds = check_positive_int(n_folds, "n_folds")
    size = int(np.floor(proportion * n_times))
    if size < 1 or (contiguous and size + 1 >= n_times):
        raise fail(
            "proportion",
            f"{proportion:g} of {n_times} time points ({size} left out)",
            "a share that leaves out at least one point and keeps some",
        )
    rng = np.random.default_rng(check_seed(seed))
    if contiguous:
        ends = rng.integers(size + 1, n_times + 1, size=n_folds)  # 1-based t
        return [np.arange(t - size - 1, t) for t in ends]
    return [np.sort(rng.choice(n_times, size=size, replace=False)) for _ in range(n_folds)]


def kfold_split_random(n_obs: int, K: int = 10, seed: int = 0) -> np.ndarray:
    """Random folds of ``n_obs`` observations, shape (n_obs,), values 1..K.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> np.bincount(refit.kfold_split_random(10, K=5, seed=0))[1:]  # balanced folds
    array([2, 2, 2, 2, 2])
    """
    check_positive_int(n_obs, "n_obs")
    K = _check_k(K, n_obs, "observations")
    return _balanced_labels(n_obs, K, np.random.default_rng(check_seed(seed)))


def label_vector(values, argument: str, what: str) -> np.ndarray:
    """One label per observation, none missing (NaN, None, ``pd.NA``), as given: a list
    mixing numbers and text stays mixed (NumPy would turn it all into text, so that ``1``
    and ``"1"`` merged)."""
    labels = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
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

    Examples
    --------
    >>> from bayesij import refit
    >>> folds = refit.kfold_split_grouped(["a", "a", "b", "b", "c", "c"], K=3, seed=1)
    >>> bool(folds[0] == folds[1] and folds[2] == folds[3])  # a group stays in one fold
    True
    """
    labels = label_vector(groups, "groups", "group")
    unique, codes = label_codes(labels, sort=True)
    sizes = np.bincount(codes, minlength=unique.size)
    if unique.size < 2:
        raise fail("groups", f"{unique.size} distinct group", "at least 2 groups to form folds")
    K = _check_k(K, unique.size, "groups")
    rng = np.random.default_rng(check_seed(seed))
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

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> folds = refit.kfold_split_stratified([0, 0, 0, 0, 1, 1, 1, 1], K=2, seed=0)
    >>> [sorted(np.asarray([0, 0, 0, 0, 1, 1, 1, 1])[folds == f].tolist()) for f in (1, 2)]
    [[0, 0, 1, 1], [0, 0, 1, 1]]
    """
    labels = label_vector(strata, "strata", "stratum")
    K = _check_k(K, labels.size, "observations")
    rng = np.random.default_rng(check_seed(seed))
    shuffled = rng.permutation(labels.size)
    _, codes = label_codes(labels[shuffled], sort=True)
    dealt = shuffled[np.argsort(codes, kind="stable")]
    folds = np.empty(labels.size, dtype=int)
    folds[dealt] = np.arange(labels.size) % K + 1
    return folds
