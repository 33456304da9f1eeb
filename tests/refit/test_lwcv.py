"""Leave-within-series-out CV: the folds of seed 000's appendix, and exact refits against the
closed form, with PSIS and IJ errors reported as the seed reports them."""

import numpy as np
import pytest

from bayesij import refit
from refit_helpers import BACKEND


def test_lwcv_folds_follow_the_appendix():
    iid = refit.lwcv_split(200, 0.05, n_folds=30, seed=3)
    assert all(fold.size == 10 and np.unique(fold).size == 10 for fold in iid)
    assert len({tuple(fold) for fold in iid}) == 30
    blocks = refit.lwcv_split(200, 0.05, contiguous=True, n_folds=300, seed=3)
    assert all(np.array_equal(b, np.arange(b[0], b[0] + 11)) for b in blocks)  # m + 1 points
    ends = np.array([b[-1] for b in blocks]) + 1  # 1-based t, uniform on m + 1 .. T
    assert ends.min() >= 11 and ends.max() <= 200 and np.unique(ends).size > 100
    with pytest.raises(ValueError, match=r"proportion: found 0.001 of 200 time points \(0"):
        refit.lwcv_split(200, 0.001)


@pytest.mark.parametrize("contiguous", [False, True])
def test_exact_lwcv_equals_the_closed_form_and_the_approximations_are_close(contiguous):
    post = BACKEND.fit(np.ones(BACKEND.n_obs))
    folds = refit.lwcv_split(BACKEND.n_obs, 0.1, contiguous=contiguous, n_folds=6, seed=2)
    report = refit.lwcv(post, BACKEND, folds, executor="sequential", progress=False)
    exact = report.table("psis")["exact"].to_numpy()
    closed = []
    for fold in folds:
        weights = np.ones(BACKEND.n_obs)
        weights[fold] = 0.0
        closed.append(BACKEND.model.log_predictive(weights, fold).sum())
    se = report.table("psis")["exact_se"].to_numpy()
    assert np.all(np.abs(exact - np.array(closed)) < 4 * se + 1e-3)
    assert report.n_refits == 6 and report.summary["folds"] == 6
    assert report.summary["mean relative error (psis)"] < 0.05
    assert report.summary["mean relative error (ij)"] < 0.02
    undefined = report.summary["folds where the ij is undefined"]
    assert undefined == np.isnan(report.table("ij")["approximation"]).sum() <= 2
    with pytest.raises(ValueError, match=r"folds: found subset 0 = \[99\]; expected distinct"):
        refit.lwcv(post, BACKEND, [[99]], executor="sequential", progress=False)
    with pytest.raises(ValueError, match=r"folds: found 3; expected a list of arrays"):
        refit.lwcv(post, BACKEND, 3, executor="sequential", progress=False)
