"""LOO R² with its Bayesian-bootstrap distribution (brms' loo_R2, arviz-stats' loo_r2):
its defining formula on explicit Dirichlet weights, equal to arviz-stats where installed;
and model-averaged predictive draws (weight_predictions): shares, membership, no repeats."""

import warnings

import numpy as np
import pytest
from scipy.stats import dirichlet

import bayesij
from peers import ARVIZ_1, from_dict


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    n = 60
    x = rng.normal(size=n)
    y = 1 + 2 * x + rng.standard_t(4, size=n)
    beta = rng.normal([1, 2], [0.15, 0.15], size=(4, 500, 2))
    mu = beta[..., :1] + beta[..., 1:] * x
    log_lik = -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)
    y_rep = mu + rng.normal(size=mu.shape)
    return y, beta, log_lik, y_rep


def test_loo_r2_is_one_minus_the_bootstrap_variance_ratio(regression):
    y, _, log_lik, y_rep = regression
    result = bayesij.loo_r2(log_lik, y, y_rep, n_simulations=300, seed=7)
    means = bayesij.loo_expectation(log_lik, y_rep)["value"].to_numpy()
    weights = dirichlet.rvs(np.ones(y.size), size=300, random_state=7)
    n = y.size
    for r2, w in zip(result.draws[:20], weights[:20], strict=False):

        def variance(v, w=w):
            centre = np.sum(w * v)
            return np.sum(w * (v - centre) ** 2) * n / (n - 1)

        assert r2 == pytest.approx(1 - variance(means - y) / variance(y), rel=1e-10)
    # The point LOO R² (equal weights) sits inside the bootstrap distribution.
    point = 1 - np.var(means - y) / np.var(y)
    low, high = result.summary()["eti_0.94"]
    assert low < point < high
    with pytest.raises(ValueError, match=r"y: found 59 observations; expected one per unit"):
        bayesij.loo_r2(log_lik, y[:59], y_rep)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' loo_r2 (Python >= 3.12)")
def test_loo_r2_equals_arviz_stats(regression):
    from arviz_stats import loo_r2

    y, beta, log_lik, y_rep = regression
    tree = from_dict(
        posterior={"b": beta},
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": y_rep},
        observed_data={"y": y},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = np.asarray(loo_r2(tree, "y", summary=False)).ravel()
        ours = bayesij.loo_r2(tree, y, y_rep, convention="arviz-stats").draws
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_weight_predictions_shares_and_draws():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, size=(4, 250, 3))
    b = rng.normal(10, 1, size=(2, 400, 3))  # 800 draws: the fewest sets the total
    mixed = bayesij.weight_predictions({"a": a, "b": b}, {"b": 0.25, "a": 0.75}, seed=3)
    assert mixed.draws.shape == (800, 3)
    assert (mixed.model == "a").sum() == 600 and (mixed.model == "b").sum() == 200
    flat_a, flat_b = a.reshape(-1, 3), b.reshape(-1, 3)
    from_a = mixed.draws[mixed.model == "a"]
    assert all((flat_a == row).all(axis=1).any() for row in from_a)  # each is one of a's
    assert len({tuple(row) for row in from_a}) == 600  # without replacement
    assert all((flat_b == row).all(axis=1).any() for row in mixed.draws[mixed.model == "b"])
    thirds = bayesij.weight_predictions({"a": a, "b": b, "c": b + 1}, seed=0)
    assert sorted(np.unique(thirds.model, return_counts=True)[1]) == [266, 267, 267]
    with pytest.raises(ValueError, match=r"weights: found no weight for \['b'\]"):
        bayesij.weight_predictions({"a": a, "b": b}, {"a": 1.0})
    with pytest.raises(ValueError, match=r"predictions: found draws of shapes"):
        bayesij.weight_predictions({"a": a, "b": b[..., :2]})
    with pytest.raises(ValueError, match=r"weights: found \[-1.0, 2.0\]"):
        bayesij.weight_predictions({"a": a, "b": b}, [-1.0, 2.0])


def test_weight_predictions_of_fits_is_a_datatree_with_joint_draws():
    rng = np.random.default_rng(2)
    y = rng.normal(size=3)
    fits = {}
    for name, (chains, draws, shift) in {"a": (4, 250, 0.0), "b": (2, 400, 10.0)}.items():
        y_rep = rng.normal(shift, 1, size=(chains, draws, 3))
        fits[name] = from_dict(
            posterior={"mu": rng.normal(size=(chains, draws))},
            posterior_predictive={"y": y_rep, "y_twice": 2 * y_rep},  # joint with y
            observed_data={"y": y},
        )
    mixed = bayesij.weight_predictions(fits, {"a": 0.75, "b": 0.25}, seed=3)
    predictive = mixed["posterior_predictive"]
    assert predictive["y"].dims[-1] == "sample" and predictive.sizes["sample"] == 800
    models = predictive["model"].values
    assert (models == "a").sum() == 600 and (models == "b").sum() == 200
    np.testing.assert_array_equal(predictive["y_twice"].values, 2 * predictive["y"].values)
    np.testing.assert_array_equal(mixed["observed_data"]["y"].values, y)
    b_draws = np.asarray(fits["b"]["posterior_predictive"]["y"].values).reshape(-1, 3)
    from_b = predictive["y"].values.T[models == "b"]
    assert all((b_draws == row).all(axis=1).any() for row in from_b)  # each one of b's
    assert len({tuple(row) for row in from_b}) == 200  # without replacement
    bare = from_dict(posterior={"mu": rng.normal(size=(2, 400))})
    with pytest.raises(
        ValueError, match=r"predictions\['b'\]: found a .* without a 'posterior_predictive' group"
    ):
        bayesij.weight_predictions({"a": fits["a"], "b": bare})
    with pytest.raises(ValueError, match=r"predictions\['b'\]: found a ndarray beside fits"):
        bayesij.weight_predictions({"a": fits["a"], "b": np.zeros((800, 3))})


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' weight_predictions (Python >= 3.12)")
def test_weight_predictions_of_fits_has_arviz_stats_layout():
    from arviz_stats import weight_predictions

    rng = np.random.default_rng(5)
    fits = [
        from_dict(
            posterior={"mu": rng.normal(size=(2, 100))},
            posterior_predictive={"y": rng.normal(k, 1, size=(2, 100, 4))},
            observed_data={"y": np.zeros(4)},
        )
        for k in range(2)
    ]
    theirs = weight_predictions(fits, weights=[0.5, 0.5], random_seed=1)
    ours = bayesij.weight_predictions({"m0": fits[0], "m1": fits[1]}, seed=1)
    assert set(ours.children) == set(theirs.children)
    assert ours["posterior_predictive"]["y"].dims == theirs["posterior_predictive"]["y"].dims
    assert ours["posterior_predictive"].sizes == theirs["posterior_predictive"].sizes
