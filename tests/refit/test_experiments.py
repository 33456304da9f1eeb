"""Experiments against closed-form truth (conjugate normal backend), splitters, scheduler."""

import numpy as np
import pytest

import bayesij
from bayesij import refit
from conjugate import heteroskedastic_regression


@pytest.fixture(scope="module")
def backend():
    X, y = heteroskedastic_regression(200, np.random.default_rng(5))
    return refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000, seed=1)


@pytest.fixture(scope="module")
def post(backend):
    return backend.fit(np.ones(backend.n_obs))


def test_bootstrap_matches_the_ij_and_its_noise_correction_is_exact(backend, post):
    report = refit.bootstrap(post, backend, B=150, seed=2, executor="sequential", progress=False)
    ij = report.table("ij")
    # The IJ agrees with the exact bootstrap within both Monte Carlo / sampling errors ...
    assert np.all(np.abs(ij["z"]) < 3.5), ij
    # ... while the posterior variance of the slope (misspecified noise) does not.
    posterior = report.table("posterior").set_index("quantity")
    assert posterior.loc["beta[2]", "z"] < -4
    # Noise correction: the refit variance less the mean squared MCSE equals the variance
    # of the exact closed-form means under the same bootstrap counts.
    rng = np.random.default_rng(2)
    counts = rng.multinomial(200, np.full(200, 1 / 200), size=150)
    exact_means = np.array([backend.exact_means(c) for c in counts])
    truth = exact_means.var(axis=0, ddof=1)
    estimate = ij["exact"].to_numpy()
    # The refit means scatter around the exact means by their MCSE; what is left after the
    # correction is sampling noise of the correction (a few per cent here).
    np.testing.assert_allclose(estimate, truth, rtol=0.08)


def test_exact_loo_refits_equal_the_closed_form_predictive(backend, post):
    points = [0, 5, 17, 42]
    report = refit.loo(post, backend, points=points, executor="sequential", progress=False)
    psis = report.table("psis")
    truth = []
    for n in points:
        weights = np.ones(backend.n_obs)
        weights[n] = 0
        truth.append(backend.model.log_predictive(weights, [n])[0])
    z = (psis["exact"].to_numpy() - truth) / psis["exact_se"].to_numpy()
    assert np.all(np.abs(z) < 4), z
    assert report.summary["points refitted"] == 4
    corrected = report.summary["elpd_loo with exact refits"]
    assert corrected == pytest.approx(
        report.summary["elpd_loo (psis)"] - psis["error"].sum(), abs=1e-9
    )


def test_exact_kfold_equals_the_closed_form_and_psis_is_close(backend, post):
    folds = refit.kfold_split_random(backend.n_obs, 5, seed=3)
    report = refit.kfold(post, backend, folds=folds, executor="sequential", progress=False)
    psis = report.table("psis")
    truth = []
    for fold in psis["fold"]:
        held = np.flatnonzero(folds == fold)
        weights = (folds != fold).astype(float)
        truth.append(backend.model.log_predictive(weights, held).sum())
    z = (psis["exact"].to_numpy() - truth) / psis["exact_se"].to_numpy()
    assert np.all(np.abs(z) < 4), z
    # 40 held-out points of 200: the fold posteriors are close, the approximations too.
    assert np.all(np.abs(psis["relative_error"]) < 0.02)
    assert report.summary["elpd_kfold (exact)"] == pytest.approx(sum(truth), abs=0.5)


def test_drop_a_set_matches_the_closed_form_change(backend, post):
    ids = [3, 8, 13, 21, 34]
    report = refit.drop(post, backend, ids, executor="sequential", progress=False)
    weights = np.ones(backend.n_obs)
    weights[ids] = 0
    truth = backend.exact_means(weights) - backend.exact_means(np.ones(backend.n_obs))
    linear = report.table("linear")
    z = (linear["exact"].to_numpy() - truth) / linear["exact_se"].to_numpy()
    assert np.all(np.abs(z) < 4), z
    # Both approximations are close to the truth for a small set from N = 200.
    for method in ("linear", "reweighted"):
        rows = report.table(method)
        assert np.all(np.abs(rows["approximation"] - truth) < 0.3 * np.abs(truth).max())
    assert 0 <= report.summary["pareto_k of the set"] < 0.7


def test_drop_groups_and_unknown_ids(backend, post):
    groups = np.arange(backend.n_obs) // 10
    report = refit.drop(post, backend, [0], groups=groups, executor="sequential", progress=False)
    assert report.summary["observations dropped"] == 10
    with pytest.raises(ValueError, match="ids: found labels \\[999\\]"):
        refit.drop(post, backend, [999], executor="sequential", progress=False)


def _high_leverage(n=60, seed=4):
    """A regression with four outlying points far out in x: PSIS k-hat is high there."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[:4] = [6.0, -6.5, 7.0, 6.2]
    y = 1 + 0.5 * x + rng.normal(size=n)
    y[:4] += [-5.0, 5.5, -6.0, 4.5]
    return np.column_stack([np.ones(n), x]), y


def test_scheduler_finds_the_badly_approximated_points_before_uniform_sampling():
    X, y = _high_leverage()
    backend = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=1000, seed=2)
    post = backend.fit(np.ones(y.size))
    with pytest.warns(UserWarning, match="Pareto k-hat"):
        psis = bayesij.loo(post).pointwise["elpd_loo"].to_numpy()
    truth = []
    for n in range(y.size):
        weights = np.ones(y.size)
        weights[n] = 0
        truth.append(backend.model.log_predictive(weights, [n])[0])
    bad = set(np.flatnonzero(np.abs(psis - truth) > 0.05).tolist())
    assert 1 <= len(bad) <= 4, bad  # a few points where PSIS is off by more than 0.05
    budget = 4
    auto = refit.loo(
        post,
        backend,
        points="auto",
        budget=budget,
        tolerance=0.0,
        executor="sequential",
        progress=False,
    )
    chosen = auto.table("psis")["obs"].tolist()
    assert bad <= set(chosen), (bad, chosen)
    assert chosen[0] == max(bad, key=lambda n: abs(psis[n] - truth[n]))
    # Uniform sampling needs on average (b / (b + 1)) (N + 1) refits to meet all b bad
    # points; the scheduler met them within its budget of 4.
    uniform = len(bad) / (len(bad) + 1) * (y.size + 1)
    assert uniform > 5 * budget


def test_scheduler_stops_early_when_the_remaining_error_is_small(backend, post):
    report = refit.loo(
        post, backend, points="auto", budget=30, executor="sequential", progress=False
    )
    assert report.summary["stopped early"] is True
    assert report.n_refits < 30
    se = bayesij.loo(post).se
    assert report.summary["estimated remaining error"] < 0.1 * se  # the default tolerance


@pytest.mark.parametrize("n, K", [(10, 3), (101, 10), (7, 7)])
def test_random_and_stratified_folds_are_balanced(n, K):
    for folds in (
        refit.kfold_split_random(n, K, seed=1),
        refit.kfold_split_stratified(np.arange(n) % 3, K, seed=1),
    ):
        sizes = np.bincount(folds)[1:]
        assert sizes.size == K and sizes.max() - sizes.min() <= 1
    strata = np.r_[np.zeros(30), np.ones(12)]
    folds = refit.kfold_split_stratified(strata, 4, seed=0)
    per_fold = [np.sum(strata[folds == k]) for k in range(1, 5)]
    assert max(per_fold) - min(per_fold) <= 1  # the rare class spread evenly


def test_grouped_folds_keep_groups_whole():
    groups = np.repeat(["a", "b", "c", "d", "e", "f"], 4)
    folds = refit.kfold_split_grouped(groups, 3, seed=2)
    for g in np.unique(groups):
        assert np.unique(folds[groups == g]).size == 1
    assert np.all(np.bincount(folds)[1:] == 8)


def test_bad_fold_arguments():
    with pytest.raises(ValueError, match="K: found 1"):
        refit.kfold_split_random(10, 1)
    with pytest.raises(
        ValueError, match="K: found 5; expected between 2 and the number of groups \\(3\\)"
    ):
        refit.kfold_split_grouped([1, 1, 2, 3], 5)
