"""Bayesian R²: equal to arviz-stats' (Python >= 3.12) and to its definition on draws whose
values are known."""

import numpy as np
import pytest
import xarray as xr

import bayesij


def _tree(rng):
    mu = rng.normal(0, 2, size=(4, 250, 30))
    sigma = np.exp(rng.normal(0, 0.1, size=(4, 250)))
    coords = {"chain": range(4), "draw": range(250), "obs": range(30)}
    posterior = xr.Dataset(
        {"mu": (("chain", "draw", "obs"), mu), "sigma": (("chain", "draw"), sigma)}, coords=coords
    )
    log_lik = xr.Dataset(
        {"y": (("chain", "draw", "obs"), rng.normal(-1, 0.1, (4, 250, 30)))}, coords=coords
    )
    return xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_lik}), mu, sigma


def test_as_arviz_stats():
    arviz_stats = pytest.importorskip("arviz_stats", reason="arviz-stats 1.x (Python >= 3.12)")
    tree, _, _ = _tree(np.random.default_rng(1))
    expected = arviz_stats.bayesian_r2(tree, pred_mean="mu", scale="sigma", summary=False)
    ours = bayesij.bayesian_r2(tree, "mu", "sigma").draws
    np.testing.assert_allclose(ours, np.asarray(expected).ravel(), rtol=1e-12)


def test_the_definition_on_known_draws():
    rng = np.random.default_rng(2)
    tree, mu, sigma = _tree(rng)
    result = bayesij.bayesian_r2(tree, "mu", "sigma")
    flat_mu, flat_sigma = mu.reshape(1000, 30), sigma.reshape(1000)
    explained = flat_mu.var(axis=1, ddof=1)
    np.testing.assert_allclose(result.draws, explained / (explained + flat_sigma**2), rtol=1e-13)
    as_var = bayesij.bayesian_r2(None, flat_mu, flat_sigma**2, scale_kind="var").draws
    np.testing.assert_allclose(as_var, result.draws, rtol=1e-13)
    # A container's quantities by variable name.
    post = bayesij.from_inference_data(tree)
    np.testing.assert_allclose(bayesij.bayesian_r2(post, "mu", "sigma").draws, result.draws)
    summary = result.summary(0.9)
    assert summary["mean"] == pytest.approx(result.draws.mean())
    low, high = summary["eti_0.9"]
    assert np.mean((result.draws >= low) & (result.draws <= high)) == pytest.approx(0.9, abs=0.01)


def test_bernoulli_pseudo_variance_and_bad_input():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, size=(400, 20))
    r2 = bayesij.bayesian_r2(None, p).draws
    explained = p.var(axis=1, ddof=1)
    np.testing.assert_allclose(r2, explained / (explained + (p * (1 - p)).mean(axis=1)))
    with pytest.raises(ValueError, match=r"scale: found None with predicted means outside"):
        bayesij.bayesian_r2(None, p * 3)
    with pytest.raises(ValueError, match=r"scale_kind: found 'sigma'"):
        bayesij.bayesian_r2(None, p, np.ones(400), scale_kind="sigma")
    with pytest.raises(ValueError, match=r"scale: found 3 draws; expected one per draw"):
        bayesij.bayesian_r2(None, p, np.ones(3))
    tree, _, _ = _tree(rng)
    with pytest.raises(ValueError, match=r"pred_mean: found 'eta'; expected a posterior variable"):
        bayesij.bayesian_r2(tree, "eta", "sigma")


def test_the_bootstrap_in_blocks_is_the_bootstrap_of_all_the_weights_at_once():
    """N = 3000: the Dirichlet weights come a block of simulations at a time (never the
    4000 x N matrix), the same draws as all at once, so the same R² draws."""
    from scipy.stats import dirichlet

    rng = np.random.default_rng(3)
    n = 3000
    y = rng.normal(size=n)
    mu = rng.normal(0.0, 0.05, size=(2, 50, 1))
    y_pred = mu + rng.normal(size=(2, 50, n))
    result = bayesij.loo_r2(-0.5 * (y - mu) ** 2, y, y_pred, seed=11)
    means = bayesij.loo_expectation(-0.5 * (y - mu) ** 2, y_pred)["value"].to_numpy()
    weights = dirichlet.rvs(np.ones(n), size=4000, random_state=11)  # all at once
    correction = n / (n - 1)

    def variance(values):
        return (weights @ values**2 - (weights @ values) ** 2) * correction

    expected = np.clip(1 - variance(means - y) / variance(y), -1, 1)
    np.testing.assert_allclose(result.draws, expected, rtol=1e-12, atol=1e-14)


def _tree_with_observations(rng):
    tree, mu, sigma = _tree(rng)
    y = rng.normal(0, 2.5, size=30)
    observed = xr.Dataset({"y": (("obs",), y)}, coords={"obs": range(30)})
    return (
        xr.DataTree.from_dict(
            {**{k: v.to_dataset() for k, v in tree.children.items()}, "observed_data": observed}
        ),
        mu,
        y,
    )


def test_residual_r2_as_arviz_stats():
    arviz_stats = pytest.importorskip("arviz_stats", reason="arviz-stats 1.x (Python >= 3.12)")
    tree, _, _ = _tree_with_observations(np.random.default_rng(4))
    expected = arviz_stats.residual_r2(tree, pred_mean="mu", obs_name="y", summary=False)
    ours = bayesij.residual_r2(tree, "mu").draws  # y read from observed_data, as the peer
    np.testing.assert_allclose(ours, np.asarray(expected).ravel(), rtol=1e-12)


def test_residual_r2_takes_the_residual_variance_from_the_data():
    """Draws whose predicted means equal the data everywhere explain all of it (R² 1);
    otherwise the residual variance over the observations, per draw, replaces sigma²."""
    rng = np.random.default_rng(5)
    tree, mu, y = _tree_with_observations(rng)
    result = bayesij.residual_r2(tree, "mu")
    flat = mu.reshape(1000, 30)
    explained = flat.var(axis=1, ddof=1)
    residual = np.array([np.var(y - draw, ddof=1) for draw in flat])
    np.testing.assert_allclose(result.draws, explained / (explained + residual), rtol=1e-12)
    np.testing.assert_allclose(bayesij.residual_r2(None, mu, y).draws, result.draws)
    exact = np.broadcast_to(y, (2, 10, 30))
    np.testing.assert_allclose(bayesij.residual_r2(None, exact, y).draws, 1.0)
