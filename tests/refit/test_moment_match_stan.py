"""Moment matching through PyStan's log density on a shipped model with several high-k-hat
observations, against exact LOO refits (long chains)."""

import warnings

import numpy as np
import pytest

import bayesij
from bayesij import refit
from bayesij.stan_models import example_data

pytest.importorskip("stan")


def _outliers():
    """Twelve points of the shipped linear regression, two of them outliers at high
    leverage: several observations get k-hat above 0.5, one above 1."""
    data = example_data("linear_regression", n=12, seed=5)
    X, y = data["X"].copy(), data["y"].copy()
    X[:2, 0] = [3.5, -3.0]
    y[:2] = [-6.0, 6.0]
    return {**data, "X": X, "y": y}


@pytest.mark.stan
def test_the_pystan_density_reproduces_the_log_likelihood_draws_up_to_a_constant():
    data = _outliers()
    post = refit.PyStanBackend(
        "linear_regression", data, seed=3, num_chains=1, num_samples=40, num_warmup=200
    ).fit(np.ones(12))
    density = refit.PyStanDensity("linear_regression", data)
    upars = density.unconstrain(post)
    assert upars.shape == (40, 4)  # alpha, beta[1], beta[2], log(sigma)
    np.testing.assert_allclose(upars[:, 3], np.log(post.quantities.values[0, :, 3]))
    np.testing.assert_array_equal(density.unconstrain(post, rows=[7, 2]), upars[[7, 2]])
    for i in (0, 5):
        gap = post.log_lik.values[0, :, i] - density.log_lik_i(upars, i)
        assert np.ptp(gap) < 1e-8  # `~` drops the normal's constant: -0.5 log(2 pi) here
    with pytest.raises(ValueError, match=r"weights: found 'w'; expected a weight vector"):
        refit.PyStanDensity("linear_regression", data, weights="w")


@pytest.mark.stan
@pytest.mark.slow
def test_moment_matching_beats_psis_against_exact_refits_without_refitting():
    data = _outliers()
    backend = refit.PyStanBackend(
        "linear_regression", data, seed=3, num_chains=2, num_samples=500, num_warmup=500
    )
    post = backend.fit(np.ones(12))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = bayesij.loo(post)
        matched = bayesij.loo_moment_match(
            post, refit.PyStanDensity("linear_regression", data), loo=psis, k_threshold=0.5
        )
    chosen = np.flatnonzero(matched.pointwise["moment_matched"].to_numpy())
    assert chosen.size >= 3 and psis.pointwise["pareto_k"].max() > 1
    # Exact LOO: a long refit without each chosen observation.
    long_chains = refit.PyStanBackend(
        "linear_regression", data, seed=4, num_chains=4, num_samples=5000, num_warmup=1000
    )
    exact = []
    for i in chosen:
        weights = np.ones(12)
        weights[i] = 0.0
        draws = long_chains.fit(weights).log_lik.values[..., i].ravel()
        exact.append(np.logaddexp.reduce(draws) - np.log(draws.size))
    mm_error = np.abs(matched.pointwise["elpd_loo"].to_numpy()[chosen] - exact)
    psis_error = np.abs(psis.pointwise["elpd_loo"].to_numpy()[chosen] - exact)
    assert mm_error.sum() < 0.8 * psis_error.sum(), (mm_error, psis_error)
    worst = np.argmax(psis.pointwise["pareto_k"].to_numpy()[chosen])  # k-hat above 1
    assert mm_error[worst] < 0.5 * psis_error[worst], (mm_error, psis_error)


@pytest.mark.stan
@pytest.mark.slow
def test_the_pystan_score_gives_control_variates_that_cut_the_influence_noise():
    # The shipped linear regression on data with 3 % outliers (15 times the noise sd):
    # the score is the gradient of log_prob (finite differences), and psi's Monte Carlo
    # error with zero-variance control variates is several times smaller (7.5 times with
    # 4 x 1000 draws when measured; here 4 x 250).
    rng = np.random.default_rng(4)
    n = 200
    x = rng.normal(size=n)
    y = 1 + 0.5 * x + np.where(rng.random(n) < 0.03, 15.0, 1.0) * rng.standard_normal(n)
    data = {"N": n, "K": 1, "X": x[:, None], "y": y, "weights": np.ones(n)}
    backend = refit.PyStanBackend(
        "linear_regression", data, seed=3, num_chains=4, num_samples=250, num_warmup=500
    )
    post = backend.fit(np.ones(n))
    density = refit.PyStanDensity("linear_regression", data)
    score, upars = density.grad_log_posterior(post)
    assert score.shape == upars.shape == (4, 250, 3)
    point, step = upars[0, 0], 1e-5
    numeric = [
        (
            density.log_prob(np.array([point + step * e]))[0]
            - density.log_prob(np.array([point - step * e]))[0]
        )
        / (2 * step)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(score[0, 0], numeric, rtol=1e-5, atol=1e-6)
    # The compiled functions called directly equal PyStan's public (HTTP) ones.
    model = density._model()
    public = [model.log_prob(u.tolist()) for u in upars[0, :3]]
    np.testing.assert_allclose(density.log_prob(upars[0, :3]), public, rtol=1e-12)
    np.testing.assert_allclose(score[0, 0], model.grad_log_prob(upars[0, 0].tolist()))
    values = {
        "alpha": float(post.quantities.values[0, 0, 0]),
        "beta": [float(post.quantities.values[0, 0, 1])],
        "sigma": float(post.quantities.values[0, 0, 2]),
    }
    np.testing.assert_allclose(upars[0, 0], model.unconstrain_pars(values), rtol=1e-12)
    plain = bayesij.influence(post, quantities="beta[1]")
    cv = bayesij.influence(
        post, quantities="beta[1]", grad_log_posterior=score, unconstrained=upars
    )
    assert np.median(plain["mcse"].values / cv["mcse"].values) > 3


@pytest.mark.stan
@pytest.mark.slow
def test_a_varying_intercept_fits_amip_answer_is_decided_by_moment_matching_its_set():
    # The shipped varying-intercept model (12 groups of 5), the observation the unit: each
    # observation's log-likelihood moves with its own group's effect, so the draws alone
    # leave mu's sign open. With the PyStan density the search's set of 6 (the limit) is
    # removed by moment matching: far short, "not reachable". Long exact refits without
    # that set, and without the 6 largest observations, agree.
    data = example_data("varying_intercept", n=60, seed=1)
    backend = refit.PyStanBackend(
        "varying_intercept", data, seed=3, num_chains=4, num_samples=1000, num_warmup=500
    )
    post = backend.fit(np.ones(60))
    density = refit.PyStanDensity("varying_intercept", data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = bayesij.amip(post, "mu", "sign")
        found = bayesij.amip(post, "mu", "sign", grad_log_posterior=density)
    assert plain.answer == "undetermined" and plain.change_interval == (-np.inf, np.inf)
    assert found.answer == "not reachable" and "moment matching" in found.decided_by
    long_chains = refit.PyStanBackend(
        "varying_intercept", data, seed=4, num_chains=4, num_samples=4000, num_warmup=1000
    )
    mu = post.quantities.sel(quantity="mu").values
    low, high = found.change_interval
    after = long_chains.fit(found.kept).quantities.sel(quantity="mu").values
    assert low - 0.02 < after.mean() - mu.mean() < high + 0.02
    weights = np.ones(60)
    weights[np.argsort(data["y"])[-6:]] = 0.0
    largest = long_chains.fit(weights).quantities.sel(quantity="mu").values
    assert largest.mean() > 0.5 * mu.mean() > 0  # nowhere near a flip
