"""Experiments against closed-form truth (conjugate normal backend): bootstrap, LOO, K-fold
and drop-a-set refits. (Folds: test_splits.py; the scheduler: test_scheduler.py.)"""

import numpy as np
import pytest

import bayesij
from bayesij import refit


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
    # Each exact value's own k-hat: a normal model's predictive densities have light tails.
    assert np.all(psis["exact_khat"] < 0.7)
    assert report.summary["refits with k-hat above 0.7 (their exact value unreliable)"] == 0
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
    # The exact K-fold as an elpd result: per observation, in the order of the data.
    result = report.result
    assert list(result.pointwise.index) == list(range(backend.n_obs))
    assert np.all(result.pointwise["exact_khat"] < 0.7)
    exact = np.concatenate(
        [backend.model.log_predictive((folds != f).astype(float), [n]) for n, f in enumerate(folds)]
    )
    z = (result.pointwise["elpd_kfold"].to_numpy() - exact) / result.pointwise["mcse"].to_numpy()
    assert np.all(np.abs(z) < 5), z
    assert result.elpd == pytest.approx(report.summary["elpd_kfold (exact)"], rel=1e-12)
    values = result.pointwise["elpd_kfold"].to_numpy()
    assert result.se == pytest.approx(np.sqrt(values.size) * values.std(ddof=1), rel=1e-12)
    assert list(result.estimates().index) == ["elpd_kfold", "p_kfold", "kfoldic"]
    # p_kfold = lpd of the full fit - elpd_kfold: against the closed-form predictives.
    full = backend.model.log_predictive(np.ones(backend.n_obs), np.arange(backend.n_obs))
    # Monte Carlo error: the refit's (mcse) and about as much from the full fit's lpd.
    error = result.pointwise["p_kfold"].to_numpy() - (full - exact)
    assert np.all(np.abs(error) < 5 * np.sqrt(2) * result.pointwise["mcse"].to_numpy())
    assert result.p == pytest.approx(float(np.sum(full - exact)), abs=0.3)
    table = bayesij.compare(
        {"kfold": result, "loo": bayesij.loo(post, convention=bayesij.PsisOptions(ddof=1))}
    )
    assert abs(table["elpd_diff"].min()) < 3 * table["se_diff"].max() + 1


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


def test_a_kfold_whose_every_refit_failed_says_why(post):
    class Failing:
        n_obs = post.n_obs

        def fit(self, weights):
            raise RuntimeError("the sampler did not start")

    with pytest.raises(RuntimeError, match=r"kfold: all 4 refits failed \(reasons: .*did not st"):
        refit.kfold(post, Failing(), K=4, executor="sequential", progress=False)


def test_a_refit_of_the_kept_rows_only_is_a_failure_not_other_columns(backend, post):
    # The held-out point is read by position from the refit's log-likelihood: a backend
    # that reports the kept rows only would hand over another observation's column.
    class KeptOnly:
        n_obs = backend.n_obs

        def fit(self, weights):
            full = backend.fit(weights)
            keep = np.asarray(weights) > 0
            return bayesij.from_arrays(
                full.quantities.values,
                full.log_lik.values[..., keep],
                quantity_names=full.quantity_names,
            )

    report = refit.loo(post, KeptOnly(), points=[3], executor="sequential", progress=False)
    assert report.summary["points refitted"] == 0
    assert (
        report.failures["reason"]
        .str.contains(
            f"backend: found a refit whose log-likelihood has {backend.n_obs - 1} observations"
        )
        .all()
    )
