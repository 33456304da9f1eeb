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
