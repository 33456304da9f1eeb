"""Approximate K-fold elpd (PSIS and IJ per fold) against the exact closed form of a
conjugate normal regression."""

import numpy as np
import pytest

from bayesij.array.kfold import fold_elpd, subset_elpd
from conjugate import ConjugateNormal, heteroskedastic_regression


@pytest.fixture(scope="module")
def model():
    X, y = heteroskedastic_regression(200, np.random.default_rng(3))
    return ConjugateNormal(X, y)


def _exact(model, folds):
    exact = np.empty(model.n_obs)
    for k in np.unique(folds):
        held_out = np.flatnonzero(folds == k)
        weights = np.ones(model.n_obs)
        weights[held_out] = 0.0
        exact[held_out] = model.log_predictive(weights, held_out)
    return exact


def test_psis_and_ij_fold_elpd_track_the_exact_k_fold(model):
    rng = np.random.default_rng(4)
    draws = model.draws(8000, rng).reshape(4, 2000, -1)
    log_lik = model.log_lik(draws.reshape(8000, -1)).reshape(4, 2000, -1)
    folds = np.arange(model.n_obs) % 10
    approx = fold_elpd(log_lik, folds)
    exact = _exact(model, folds)
    assert approx.pareto_k.shape == (10,) and np.all(approx.pareto_k < 0.7)
    # Folds of 20 of 200: PSIS is close to exact, the first-order IJ a little further off.
    assert np.abs(approx.psis - exact).max() < 0.05
    assert abs(approx.psis.sum() - exact.sum()) < 0.5
    assert abs(approx.ij.sum() - exact.sum()) < 3.0
    assert np.abs(approx.psis - exact).mean() < np.abs(approx.ij - exact).mean()


def test_fold_elpd_rejects_folds_that_do_not_cover_every_code(model):
    log_lik = np.zeros((2, 10, model.n_obs))
    with pytest.raises(ValueError, match="folds"):
        fold_elpd(log_lik, np.full(model.n_obs, 3))


def test_subset_elpd_of_a_partition_equals_fold_elpd(model):
    rng = np.random.default_rng(8)
    log_lik = model.log_lik(model.draws(2000, rng)).reshape(4, 500, -1)
    folds = rng.permutation(np.arange(model.n_obs) % 7)
    partition = fold_elpd(log_lik, folds)
    subsets = [np.flatnonzero(folds == k) for k in range(folds.max() + 1)]
    overlapping = subset_elpd(log_lik, subsets)
    for method in ("psis", "ij"):
        per_fold = np.bincount(folds, getattr(partition, method))
        np.testing.assert_allclose(getattr(overlapping, method), per_fold, rtol=1e-12)
    np.testing.assert_allclose(overlapping.pareto_k, partition.pareto_k, rtol=1e-9)
    with pytest.raises(ValueError, match=r"subsets: found subset 1 = \[0, 0\]; expected distinct"):
        subset_elpd(log_lik, [[1], [0, 0]])


def test_subset_elpd_checks_its_input_by_default():
    log_lik = np.zeros((1, 100, 4))
    log_lik[0, 3, 1] = np.nan
    with pytest.raises(ValueError, match=r"^log_lik: found 1 NaN value"):
        subset_elpd(log_lik, [np.array([0, 1])])
