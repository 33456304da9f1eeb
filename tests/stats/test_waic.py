"""WAIC, functional cumulants, tempered CV loss and DIC: against ArviZ and exact mathematics."""

import warnings

import arviz as az
import numpy as np
import pytest
from scipy.special import logsumexp

import bayesij
from conjugate import (
    ConjugateNormal,
    exact_log_lik_cumulants,
    exact_log_mean_exp,
    exact_loo_log_predictive,
    heteroskedastic_regression,
)
from peers import ARVIZ_1, load_example, log_lik_values


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


@pytest.mark.skipif(
    ARVIZ_1,
    reason="arviz-stats 1.x has no WAIC: R loo's saved values and "
    "the direct formula check it on this environment",
)
@pytest.mark.parametrize("name", ["centered_eight", "non_centered_eight"])
def test_matches_arviz_waic(name):
    idata = az.load_arviz_data(name)
    ours = _quiet(bayesij.waic, idata)
    theirs = _quiet(az.waic, idata, pointwise=True)
    np.testing.assert_allclose(ours.elpd_waic, theirs.elpd_waic, rtol=1e-12)
    np.testing.assert_allclose(ours.p_waic, theirs.p_waic, rtol=1e-12)
    np.testing.assert_allclose(ours.se, theirs.se, rtol=1e-12)
    np.testing.assert_allclose(ours.pointwise["elpd_waic"], theirs.waic_i.values, rtol=1e-12)
    # Container, InferenceData and raw array input agree.
    raw = idata.log_likelihood["obs"].values
    np.testing.assert_allclose(_quiet(bayesij.waic, raw).elpd_waic, ours.elpd_waic, rtol=1e-13)
    post = bayesij.from_inference_data(idata)
    np.testing.assert_allclose(_quiet(bayesij.waic, post).elpd_waic, ours.elpd_waic, rtol=1e-13)


def test_warns_when_a_pointwise_variance_exceeds_0_4():
    rng = np.random.default_rng(0)
    log_lik = rng.normal(scale=[0.1] * 9 + [1.0], size=(2, 500, 10))
    with pytest.warns(UserWarning, match=r"1 of 10 units have p_waic .* above 0.4"):
        bayesij.waic(log_lik)


def _model(n, seed, noise=lambda x: 0.5 + np.abs(x[:, 1])):
    X, y = heteroskedastic_regression(n, np.random.default_rng(seed), noise=noise)
    return ConjugateNormal(X, y, sigma=1.0)


def _exact(model, beta):
    """Exact WAIC(beta), CvL(beta) and cumulants per observation for the tempered posterior."""
    weights = np.full(model.n_obs, beta)
    kappa = exact_log_lik_cumulants(model, weights)
    btl = -exact_log_mean_exp(model, 1, weights).mean()
    waic_loss = btl + beta * kappa[1].mean()
    cv_loss = (
        exact_log_mean_exp(model, -beta, weights) - exact_log_mean_exp(model, 1 - beta, weights)
    ).mean()
    return waic_loss, cv_loss, kappa.mean(axis=1)


def test_closed_form_cv_loss_is_exact_leave_one_out():
    model = _model(30, 1)
    _, cv_loss, _ = _exact(model, 1.0)
    np.testing.assert_allclose(cv_loss, -exact_loo_log_predictive(model).mean(), rtol=1e-10)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_cv_minus_waic_is_predicted_and_the_error_shrinks_faster(beta):
    """Exact CvL - WAIC against Y4/12 (beta = 1) or (beta - beta^2)/2 Y3, as N grows."""
    gaps, errors = [], []
    for n in [20, 80, 320, 1280]:
        gap, error = [], []
        for seed in range(5):
            waic_loss, cv_loss, y = _exact(_model(n, seed), beta)
            predicted = y[3] / 12 if beta == 1 else (beta - beta**2) / 2 * y[2]
            gap.append(abs(cv_loss - waic_loss))
            error.append(abs(cv_loss - waic_loss - predicted))
        gaps.append(np.mean(gap))
        errors.append(np.mean(error))
    gaps, errors = np.array(gaps), np.array(errors)
    assert np.all(np.diff(np.log(errors / gaps)) < -1)  # relative error falls > e-fold per 4x N
    assert errors[-1] < 0.03 * gaps[-1]


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_draw_estimates_converge_to_exact_tempered_values(beta):
    """Exact draws from the tempered posterior (weights beta); 8 sets of 20000 draws."""
    model = _model(50, 3)
    weights = np.full(50, beta)
    waic_loss, cv_loss, y = _exact(model, beta)
    rows = []
    for seed in range(8):
        draws = model.draws(20000, np.random.default_rng(seed), weights)
        result = _quiet(bayesij.waic, model.log_lik(draws), beta=beta)
        rows.append([result.waic_loss, result.cv_loss, *result.cumulants.values])
        np.testing.assert_allclose(result.waic_loss, -result.elpd_waic / 50, rtol=1e-12)
    rows = np.array(rows)
    exact = np.array([waic_loss, cv_loss, *y])
    z = (rows.mean(axis=0) - exact) / (rows.std(axis=0, ddof=1) / np.sqrt(len(rows)))
    assert np.all(np.abs(z) < 4.5), z


def test_r_and_arviz_conventions_differ_only_by_ddof():
    rng = np.random.default_rng(1)
    log_lik = rng.normal(-1, 0.2, size=(4, 100, 12))
    arviz_like, r_like = (bayesij.waic(log_lik, ddof=d) for d in (0, 1))
    s = 400
    np.testing.assert_allclose(r_like.p_waic, arviz_like.p_waic * s / (s - 1), rtol=1e-12)
    assert r_like.elpd_waic < arviz_like.elpd_waic


def test_grouped_waic_sums_the_group_log_lik():
    rng = np.random.default_rng(2)
    log_lik = rng.normal(-1, 0.1, size=(2, 200, 6))
    groups = ["a", "a", "b", "b", "c", "c"]
    grouped = bayesij.waic(log_lik, groups=groups)
    summed = log_lik.reshape(2, 200, 3, 2).sum(axis=3)
    np.testing.assert_allclose(grouped.elpd_waic, bayesij.waic(summed).elpd_waic, rtol=1e-13)
    assert list(grouped.pointwise.index) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beta": 0.0}, r"beta: found 0.0; expected a finite number > 0"),
        ({"beta": np.inf}, r"beta: found inf; expected a finite number > 0"),
        ({"ddof": 2}, r"ddof: found 2; expected 0 \(ArviZ\) or 1 \(R loo\)"),
        ({"groups": [0, 1]}, r"groups: found shape \(2,\); expected one label per"),
    ],
)
def test_waic_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bayesij.waic(np.zeros((10, 4)) - 1.0, **kwargs)


@pytest.mark.parametrize(
    "log_lik, message",
    [
        (np.where(np.eye(10, 4) == 1, np.nan, -1.0), r"data: found 4 NaN value\(s\)"),
        (np.where(np.eye(10, 4) == 1, np.inf, -1.0), r"data: found 4 \+inf value\(s\)"),
        (-np.ones((1, 4)), r"data: found 1 draw; expected at least 2 posterior draws"),
        (-np.ones(4), r"data: found an array of shape \(4,\); expected a log-likelihood"),
    ],
)
def test_waic_bad_log_lik(log_lik, message):
    with pytest.raises(ValueError, match=message):
        bayesij.waic(log_lik)


def test_impossible_observation_has_infinite_p_waic():
    log_lik = np.random.default_rng(0).normal(-1, 0.1, size=(200, 3))
    log_lik[5, 1] = -np.inf
    with pytest.warns(UserWarning, match=r"1 of 3 units have p_waic"):
        result = bayesij.waic(log_lik)
    assert result.pointwise["p_waic"].iloc[1] == np.inf
    assert result.pointwise["elpd_waic"].iloc[1] == -np.inf
    assert np.all(np.isfinite(result.pointwise.iloc[[0, 2]]))


DATA = __import__("pathlib").Path(__file__).parents[1] / "reference"


def _reference_input():
    table = np.loadtxt(DATA / "log_lik_reference.csv", delimiter=",", skiprows=1)
    chains = table[:, 0].astype(int)
    return table[:, 1:].reshape(chains.max(), -1, table.shape[1] - 1)


def test_matches_r_loo_waic_with_ddof_1():
    """Values saved by tests/data/r_loo_reference.R (R loo 2.5.1) on the same matrix."""
    log_lik = _reference_input()
    ours = _quiet(bayesij.waic, log_lik, ddof=1)
    pointwise = np.genfromtxt(DATA / "r_loo_waic_pointwise.csv", delimiter=",", names=True)
    np.testing.assert_allclose(ours.pointwise["elpd_waic"], pointwise["elpd_waic"], rtol=1e-12)
    np.testing.assert_allclose(ours.pointwise["p_waic"], pointwise["p_waic"], rtol=1e-12)
    estimates = np.genfromtxt(
        DATA / "r_loo_waic_estimates.csv",
        delimiter=",",
        names=True,
        dtype=None,
        encoding="utf-8",
        usecols=(1, 2),
    )
    np.testing.assert_allclose(
        ours.estimates().to_numpy(),
        np.column_stack([estimates["estimate"], estimates["se"]]),
        rtol=1e-12,
    )
    if not ARVIZ_1:  # the same input through ArviZ 0.23 (ddof = 0)
        arviz = _quiet(
            az.waic, az.from_dict(posterior={"m": log_lik[..., 0]}, log_likelihood={"y": log_lik})
        )
        np.testing.assert_allclose(
            _quiet(bayesij.waic, log_lik).elpd_waic, arviz.elpd_waic, rtol=1e-12
        )


@pytest.mark.parametrize("ddof", [0, 1])
def test_matches_the_definition_computed_directly(ddof):
    """elpd_waic_n = log mean_s p_sn - Var_s(l_sn) and its SE, by scipy on the data of every
    ArviZ generation (eight schools)."""
    log_lik = log_lik_values(load_example("centered_eight")).reshape(-1, 8)
    lppd = logsumexp(log_lik, axis=0) - np.log(log_lik.shape[0])
    pointwise = lppd - log_lik.var(axis=0, ddof=ddof)
    ours = bayesij.waic(log_lik, ddof=ddof)
    np.testing.assert_allclose(ours.pointwise["elpd_waic"], pointwise, rtol=1e-12)
    se = np.sqrt(pointwise.size * pointwise.var(ddof=ddof))
    np.testing.assert_allclose([ours.elpd_waic, ours.se], [pointwise.sum(), se], rtol=1e-12)
