"""Influential subsets (AMIP) against the closed-form conjugate normal regression."""

import numpy as np
import pytest

import bayesij
from bayesij import refit


def _fragile_regression(n=200, seed=6):
    """A weak positive slope (about 1.5 posterior sds) that a few high-leverage points help
    hold up."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 1.0 + 0.12 * x + rng.normal(size=n)
    x[:4] = [2.5, 2.7, 2.9, -2.6]
    y[:4] = [2.0, 1.9, 2.2, 0.2]
    return np.column_stack([np.ones(n), x]), y


@pytest.fixture(scope="module")
def backend():
    return refit.ConjugateNormalBackend(*_fragile_regression(), sigma=1.0, draws=8000, seed=4)


@pytest.fixture(scope="module")
def post(backend):
    return backend.fit(np.ones(backend.n_obs))


def _without(backend, ids):
    weights = np.ones(backend.n_obs)
    weights[list(ids)] = 0
    return backend.model.posterior(weights)


@pytest.mark.parametrize("method", ["linear", "reweighted"])
def test_a_reached_sign_change_is_a_real_sign_change(backend, post, method):
    result = bayesij.amip(post, "beta[2]", target="sign", method=method)
    assert result.reachable and 1 <= result.n_drop <= 20
    assert result.prop_drop == pytest.approx(result.n_drop / 200)
    mean, _ = _without(backend, result.drop_ids)
    assert mean[1] < 0 < result.original_value
    assert result.predicted_value * result.original_value <= 0


@pytest.mark.parametrize("method", ["linear", "reweighted"])
def test_a_reached_significance_change_is_real(backend, post, method):
    result = bayesij.amip(post, "beta[2]", target="significance", method=method)
    assert result.metric in ("lower end", "upper end") and result.reachable
    mean, cov = _without(backend, result.drop_ids)
    side = -1 if result.metric == "lower end" else 1
    end = mean[1] + side * 1.96 * np.sqrt(cov[1, 1])
    assert np.sign(end) != np.sign(result.original_value)
    low, high = result.predicted_interval
    assert low <= result.predicted_mean <= high


def test_reweighting_is_at_least_as_accurate_as_the_linear_prediction(backend, post):
    # Deleting high-leverage points changes X^T W X: the posterior mean is curved in the
    # weights, so the linear prediction misses part of the change.
    errors = {}
    for method in ("linear", "reweighted"):
        result = bayesij.amip(post, "beta[2]", target=-0.1, method=method)
        mean, _ = _without(backend, result.drop_ids)
        exact_change = mean[1] - backend.exact_means(np.ones(backend.n_obs))[1]
        errors[method] = abs(result.predicted_change - exact_change)
    assert errors["reweighted"] <= errors["linear"], errors
    assert errors["linear"] > 0.005  # a case with clear curvature


def test_the_split_draw_estimate_removes_the_optimism_of_the_naive_one():
    # f is independent of every log-likelihood column (its true influence is 0 for every
    # unit), yet the largest estimated influences are positive by selection.
    rng = np.random.default_rng(0)
    naive, split = [], []
    for _ in range(25):
        f = rng.normal(size=(4, 250, 1))
        log_lik = rng.normal(size=(4, 250, 100)) - 2.0
        post = bayesij.from_arrays(f, log_lik, quantity_names=["f"])
        check = bayesij.amip(post, "f", target=1e6, method="linear").monte_carlo
        naive.append(check["naive"])
        split.append(check["split"])
    naive, split = np.array(naive), np.array(split)
    se_naive, se_split = naive.std(ddof=1) / 5, split.std(ddof=1) / 5
    assert naive.mean() > 6 * se_naive  # selected on the same draws: optimistic
    assert abs(split.mean()) < 3 * se_split  # estimated on the other draws: no bias
    assert naive.mean() > 5 * abs(split.mean())


def test_not_reachable_is_an_answer(post):
    result = bayesij.amip(post, "beta[1]", target="sign", alpha_max=0.02, method="linear")
    assert not result.reachable and np.isnan(result.prop_drop)
    assert result.n_drop == 4 and result.stopped == "alpha_max"
    assert "not reachable" in str(result)
    assert result.curve["linear"].size == 5


def test_verify_refits_and_agrees_with_the_closed_form(backend, post):
    result = bayesij.amip(post, "beta[2]", target="sign", method="reweighted")
    verified = refit.verify(result, backend, executor="sequential", progress=False)
    mean, _ = _without(backend, result.drop_ids)
    assert verified.verification["mean"] == pytest.approx(mean[1], abs=0.01)
    assert verified.verification["reached"] is True
    table = verified.table()
    assert {"refit", "refit_change", "refit_reached"} <= set(table.columns)
    assert "refit without the set" in str(verified)


def test_groups_are_dropped_whole(backend, post):
    groups = np.arange(backend.n_obs) // 5
    result = bayesij.amip(post, "beta[2]", target="sign", groups=groups, method="linear")
    assert result.unit == "group" and result.n_units == 40
    assert 0 in result.drop_ids  # the group holding the high-leverage points


def test_bad_input(post):
    with pytest.raises(ValueError, match="quantity: found 'gamma'"):
        bayesij.amip(post, "gamma")
    for delta in (0.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="target: found"):
            bayesij.amip(post, "beta[2]", target=delta)
    with pytest.raises(ValueError, match="target: found 'sig'"):
        bayesij.amip(post, "beta[2]", target="sig")
    for alpha in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha_max: found"):
            bayesij.amip(post, "beta[2]", alpha_max=alpha)
    with pytest.raises(ValueError, match="groups: found shape"):
        bayesij.amip(post, "beta[2]", groups=np.arange(10))
    with pytest.raises(ValueError, match="groups: found 1 missing label"):
        bayesij.amip(post, "beta[2]", groups=[None] + [1] * 199)
