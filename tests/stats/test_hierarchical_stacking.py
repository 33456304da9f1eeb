"""Hierarchical stacking against a direct optimisation of its objective (written out here
over the weights' logits, minimised by Nelder-Mead without gradients), its limit (a prior
scale near 0: ordinary stacking), and a case whose answer is known (each model better in
its own region)."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

import bayesij


def _lpd(seed=0, n=80):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    region = np.where(rng.uniform(size=n) < 0.5, "east", "west")
    a = -1.0 - 0.4 * x + 0.3 * rng.normal(size=n)  # a worsens as x grows
    b = -1.3 + 0.3 * x + 0.3 * rng.normal(size=n)
    c = -1.2 + np.where(region == "east", 0.3, -0.3) + 0.3 * rng.normal(size=n)
    return pd.DataFrame({"a": a, "b": b, "c": c}), x, region


def test_the_weights_are_the_direct_maximum_of_the_penalised_log_score():
    lpd, x, region = _lpd()
    found = bayesij.hierarchical_stacking(lpd, x, region, prior_scale=0.7, intercept_scale=3.0)
    z = (x - x.mean()) / x.std()
    design = np.column_stack([z, region == "east", region == "west"]).astype(float)
    values = lpd.to_numpy()

    def penalised(theta):  # 2 free models x (intercept + 3 inputs)
        mu, beta = theta[:2], theta[2:].reshape(2, 3)
        logits = np.column_stack([mu + design @ beta.T, np.zeros(len(x))])
        log_w = logits - logsumexp(logits, axis=1, keepdims=True)
        score = np.sum(logsumexp(log_w + values, axis=1))
        return -score + np.sum(beta**2) / (2 * 0.7**2) + np.sum(mu**2) / (2 * 3.0**2)

    start = np.full(8, 0.1)  # BFGS on finite differences, from another start
    direct = minimize(penalised, start, method="BFGS", options={"gtol": 1e-9})
    theta = np.concatenate([found.intercepts.to_numpy(), found.effects.to_numpy().ravel()])
    assert penalised(theta) <= direct.fun + 1e-9  # at least as good as the direct search
    np.testing.assert_allclose(theta, direct.x, atol=1e-4)
    np.testing.assert_allclose(found.weights.sum(axis=1), 1.0)
    mixture = np.log(np.sum(found.weights.to_numpy() * np.exp(values), axis=1)).sum()
    assert found.score == pytest.approx(mixture, rel=1e-12)


def test_a_vanishing_prior_scale_gives_the_ordinary_stacking_weights():
    rng = np.random.default_rng(1)
    x = rng.normal(size=100)
    region = np.where(x > 0.5, "east", "west")
    lpd = pd.DataFrame({"a": -1.0 - 0.5 * x, "b": -1.0 + 0.5 * x}) + 0.2 * rng.normal(size=(100, 2))
    stacking = bayesij.model_weights(lpd)
    assert 0.05 < stacking.min()  # interior weights: the logits are finite
    pooled = bayesij.hierarchical_stacking(lpd, x, region, prior_scale=1e-6, intercept_scale=1e6)
    np.testing.assert_allclose(pooled.weights.to_numpy(), np.tile(stacking, (len(x), 1)), atol=1e-4)


def test_each_model_gets_the_region_it_predicts_and_the_mixture_scores_better():
    rng = np.random.default_rng(2)
    region = np.repeat(["north", "south"], 60)
    lpd = pd.DataFrame(
        {
            "a": np.where(region == "north", -1.0, -2.5) + 0.2 * rng.normal(size=120),
            "b": np.where(region == "north", -2.5, -1.0) + 0.2 * rng.normal(size=120),
        }
    )
    found = bayesij.hierarchical_stacking(lpd, groups=region)
    assert found.weights.loc[region == "north", "a"].min() > 0.9
    assert found.weights.loc[region == "south", "b"].min() > 0.9
    one = bayesij.model_weights(lpd).to_numpy()
    assert found.score > np.log(np.exp(lpd.to_numpy()) @ one).sum() + 30


def test_bad_inputs_are_refused_by_name():
    lpd, x, region = _lpd()
    with pytest.raises(ValueError, match=r"^covariates: found shape \(3, 1\)"):
        bayesij.hierarchical_stacking(lpd, x[:3])
    with pytest.raises(ValueError, match=r"^covariates: found a constant column"):
        bayesij.hierarchical_stacking(lpd, np.ones(len(x)))
    with pytest.raises(ValueError, match=r"^groups: found shape \(2,\)"):
        bayesij.hierarchical_stacking(lpd, groups=["a", "b"])
    with pytest.raises(ValueError, match=r"^covariates: found None with groups None"):
        bayesij.hierarchical_stacking(lpd)
    with pytest.raises(ValueError, match=r"^prior_scale: "):
        bayesij.hierarchical_stacking(lpd, x, prior_scale=0.0)


def test_crps_weights_are_the_direct_optimum_of_the_mixtures_brute_force_crps():
    """Two models' predictive draws (a constant log-likelihood: uniform LOO weights); the
    mixture's CRPS written out from all pairs of draws (E|X - y| - E|X - X'| / 2) and the
    penalised sum maximised by BFGS on finite differences; model a is right in the north,
    model b in the south, and the weights say so."""
    rng = np.random.default_rng(4)
    n, s = 40, 60
    region = np.repeat(["north", "south"], n // 2)
    y = np.where(region == "north", 1.0, -1.0) + 0.3 * rng.normal(size=n)
    draws = {
        "a": rng.normal(1.0, 0.5, size=(1, s, n)),
        "b": rng.normal(-1.0, 0.5, size=(1, s, n)),
    }
    fits = {name: np.zeros((1, s, n)) for name in draws}
    found = bayesij.hierarchical_stacking(
        fits, groups=region, kind="crps", y=y, y_pred=draws, prior_scale=1.5
    )
    xa, xb = draws["a"][0], draws["b"][0]
    pair = {
        ("a", "a"): np.abs(xa[:, None] - xa[None]).mean(axis=(0, 1)),
        ("b", "b"): np.abs(xb[:, None] - xb[None]).mean(axis=(0, 1)),
        ("a", "b"): np.abs(xa[:, None] - xb[None]).mean(axis=(0, 1)),
    }
    near = {"a": np.abs(xa - y).mean(axis=0), "b": np.abs(xb - y).mean(axis=0)}
    north = (region == "north").astype(float)

    def penalised(theta):  # logit of a against b: mu + 1.5 (b_north north + b_south south)
        logit = theta[0] + 1.5 * (theta[1] * north + theta[2] * (1 - north))
        wa = 1 / (1 + np.exp(-logit))
        wb = 1 - wa
        crps = (
            wa * near["a"]
            + wb * near["b"]
            - 0.5 * (wa**2 * pair["a", "a"] + wb**2 * pair["b", "b"] + 2 * wa * wb * pair["a", "b"])
        )
        return np.sum(crps) + 0.5 * np.sum(theta[1:] ** 2) + 0.5 * theta[0] ** 2 / 100

    direct = minimize(penalised, np.full(3, 0.1), method="BFGS", options={"gtol": 1e-10})
    theta = [found.intercepts["a"], *(found.effects.loc["a"].to_numpy() / 1.5)]
    np.testing.assert_allclose(theta, direct.x, atol=1e-4)
    assert found.score == pytest.approx(
        -(direct.fun - 0.5 * np.sum(direct.x[1:] ** 2) - 0.5 * direct.x[0] ** 2 / 100), rel=1e-6
    )
    assert found.weights.loc[region == "north", "a"].min() > 0.8
    assert found.weights.loc[region == "south", "b"].min() > 0.8
    with pytest.raises(ValueError, match=r"^kind: found 'energy'; expected 'log' or 'crps'"):
        bayesij.hierarchical_stacking(fits, groups=region, kind="energy")
