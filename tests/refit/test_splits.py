"""Fold assignments (as R loo's kfold_split_*): every observation in one fold, fold sizes
as even as the units allow, groups kept whole, strata spread evenly, and leave-within-
series-out folds of the documented size and shape (Ghosh et al. 2020, appendix)."""

import numpy as np
import pytest

from bayesij.refit import splits


@pytest.mark.parametrize("n, K", [(7, 3), (100, 10), (101, 10), (25, 25)])
def test_contiguous_and_random_folds_are_balanced(n, K):
    contiguous = splits.kfold_split_contiguous(n, K)
    assert np.all(np.diff(contiguous) >= 0)  # in order
    for labels in (contiguous, splits.kfold_split_random(n, K, seed=3)):
        sizes = np.bincount(labels, minlength=K + 1)[1:]
        assert sizes.sum() == n and sizes.max() - sizes.min() <= 1
        assert set(labels) == set(range(1, K + 1))
    sizes = np.bincount(contiguous)[1:]
    assert np.all(sizes[: n % K] == n // K + 1)  # the first n % K folds hold one more


def test_grouped_folds_keep_groups_whole_and_stratified_folds_spread_strata():
    groups = np.repeat(np.arange(12), 5)
    folds = splits.kfold_split_grouped(groups, K=4, seed=1)
    for g in range(12):
        assert np.unique(folds[groups == g]).size == 1
    assert np.all(np.bincount(folds)[1:] == 15)  # equal groups: exactly balanced
    strata = np.array([0] * 30 + [1] * 10)
    folds = splits.kfold_split_stratified(strata, K=5, seed=2)
    for fold in range(1, 6):
        assert np.sum((folds == fold) & (strata == 1)) == 2
        assert np.sum((folds == fold) & (strata == 0)) == 6


def test_lwcv_folds_and_refusals():
    iid = splits.lwcv_split(50, 0.1, n_folds=20, seed=0)
    assert all(fold.size == 5 and np.unique(fold).size == 5 for fold in iid)
    blocks = splits.lwcv_split(50, 0.1, contiguous=True, n_folds=20, seed=0)
    for fold in blocks:  # m + 1 consecutive points inside the series
        assert fold.size == 6 and np.all(np.diff(fold) == 1) and 0 <= fold[0] and fold[-1] < 50
    with pytest.raises(ValueError, match=r"^K: found 1; expected between 2"):
        splits.kfold_split_contiguous(10, 1)
    with pytest.raises(ValueError, match=r"^proportion: "):
        splits.lwcv_split(10, 0.05)
    with pytest.raises(ValueError, match=r"^groups: found 1 missing label"):
        splits.kfold_split_grouped(np.array([1.0, np.nan, 2.0]), K=2)


@pytest.mark.parametrize("n, K", [(10, 3), (101, 10), (7, 7)])
def test_random_and_stratified_folds_are_balanced(n, K):
    for folds in (
        splits.kfold_split_random(n, K, seed=1),
        splits.kfold_split_stratified(np.arange(n) % 3, K, seed=1),
    ):
        sizes = np.bincount(folds)[1:]
        assert sizes.size == K and sizes.max() - sizes.min() <= 1
    strata = np.r_[np.zeros(30), np.ones(12)]
    folds = splits.kfold_split_stratified(strata, 4, seed=0)
    per_fold = [np.sum(strata[folds == k]) for k in range(1, 5)]
    assert max(per_fold) - min(per_fold) <= 1  # the rare class spread evenly


def test_grouped_folds_keep_groups_whole():
    groups = np.repeat(["a", "b", "c", "d", "e", "f"], 4)
    folds = splits.kfold_split_grouped(groups, 3, seed=2)
    for g in np.unique(groups):
        assert np.unique(folds[groups == g]).size == 1
    assert np.all(np.bincount(folds)[1:] == 8)


def test_bad_fold_arguments():
    with pytest.raises(ValueError, match="K: found 1"):
        splits.kfold_split_random(10, 1)
    with pytest.raises(
        ValueError, match="K: found 5; expected between 2 and the number of groups \\(3\\)"
    ):
        splits.kfold_split_grouped([1, 1, 2, 3], 5)
