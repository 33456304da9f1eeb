"""The shipped Poisson HMM, whose weights act inside the forward algorithm (seed 000's scheme
(A)): its NumPy evaluation against brute-force enumeration, the Stan program against that,
and influence, IJ-LWCV, IJ- and PSIS-LFO against exact weighted refits."""

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import poisson

import bayesij
from bayesij import refit
from bayesij.refit.stan import build_model
from bayesij.stan_models import example_data, stan_code
from bayesij.stan_models.hmm import (
    fold_elpd,
    fold_elpd_ij,
    held_out_log_density,
    hmm_draws,
    log_marginal,
)

Y = np.array([2, 9, 4, 0, 12])
RATES = np.array([[2.0, 9.0], [1.5, 6.0], [3.0, 11.0]])
TRANSITIONS = np.array(
    [[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.3, 0.7]], [[0.95, 0.05], [0.5, 0.5]]]
)


def _enumerated(weights):
    """log p(y; theta, w) by summing over all 2^T state paths, per draw."""
    out = []
    for rates, gamma in zip(RATES, TRANSITIONS, strict=True):
        start = np.array([gamma[1, 0], gamma[0, 1]]) / (gamma[1, 0] + gamma[0, 1])
        terms = []
        for path in itertools.product((0, 1), repeat=Y.size):
            log_p = np.log(start[path[0]])
            log_p += sum(np.log(gamma[a, b]) for a, b in itertools.pairwise(path))
            log_p += np.sum(weights * poisson.logpmf(Y, rates[list(path)]))
            terms.append(log_p)
        out.append(logsumexp(terms))
    return np.array(out)


def test_the_numpy_forward_algorithm_equals_enumeration_of_the_state_paths():
    weights = np.array([1.0, 0.0, 2.5, 1.0, 0.3])
    np.testing.assert_allclose(log_marginal(RATES, TRANSITIONS, Y, weights), _enumerated(weights))
    # Held out O = {1, 3}: p(y_t | y_-O) = p(y_t, y_-O) / p(y_-O), each by enumeration.
    held_out = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    density = held_out_log_density(RATES, TRANSITIONS, Y, held_out)
    for t in (1, 3):
        with_t = held_out.copy()
        with_t[t] = 1.0
        np.testing.assert_allclose(density[:, t], _enumerated(with_t) - _enumerated(held_out))


pytest.importorskip("stan")
T = 150
QUANTITIES = ["lambda", "Gamma"]


@pytest.fixture(scope="module")
def short_fit():
    data = example_data("poisson_hmm", n=T, seed=3)
    model = build_model(stan_code("poisson_hmm"), data=data, random_seed=1)
    return data, model, model.sample(num_chains=1, num_samples=200, num_warmup=300)


@pytest.mark.stan
def test_the_stan_program_weights_the_emissions_inside_the_forward_algorithm(short_fit):
    data, model, fit = short_fit
    post = bayesij.from_pystan(fit, quantities=QUANTITIES)
    derivative = bayesij.from_pystan(fit, log_lik="weight_derivative", quantities=QUANTITIES)
    rates, transitions = hmm_draws(post)
    # log_lik: the one-step predictive terms, summing to log p(y; theta).
    terms = post.log_lik.values.reshape(-1, T)
    np.testing.assert_allclose(terms.sum(axis=1), log_marginal(rates, transitions, data["y"]))
    # weight_derivative: d log p(y; theta, w) / d w_t at w = 1, by central differences.
    h = 1e-5
    for t in (0, 37, 110, T - 1):
        up, down = np.ones(T), np.ones(T)
        up[t], down[t] = 1 + h, 1 - h
        numeric = log_marginal(rates, transitions, data["y"], up)
        numeric = (numeric - log_marginal(rates, transitions, data["y"], down)) / (2 * h)
        np.testing.assert_allclose(derivative.log_lik.values[0, :, t], numeric, atol=1e-6)
    # The weighted target the refits sample is log p(y; theta, w) of the same recursion.
    weights = np.random.default_rng(2).uniform(0, 2, size=T)
    weights[:3] = [0.0, 1.0, 2.0]
    reweighted = build_model(stan_code("poisson_hmm"), data={**data, "weights": weights})
    for s in (5, 150):
        draw = {name: np.asarray(fit[name])[..., s].tolist() for name in QUANTITIES}
        u = model.unconstrain_pars(draw)
        gap = reweighted.log_prob(u, adjust_transform=False)
        gap -= model.log_prob(u, adjust_transform=False)
        one = slice(s, s + 1)
        expected = log_marginal(rates[one], transitions[one], data["y"], weights)
        expected -= log_marginal(rates[one], transitions[one], data["y"])
        assert gap == pytest.approx(float(expected[0]), abs=1e-8)


@pytest.mark.stan
def test_influence_is_the_derivative_of_the_exactly_reweighted_posterior_mean(short_fit):
    data, _, fit = short_fit
    derivative = bayesij.from_pystan(fit, log_lik="weight_derivative", quantities=QUANTITIES)
    rates, transitions = hmm_draws(derivative)
    psi = bayesij.influence(derivative, quantities="lambda[2]")["psi"].values[0]
    full = log_marginal(rates, transitions, data["y"])
    h = 1e-4
    for t in (37, 110):
        means = []
        for step in (h, -h):
            weights = np.ones(T)
            weights[t] += step
            log_ratio = log_marginal(rates, transitions, data["y"], weights) - full
            means.append(np.exp(log_ratio - logsumexp(log_ratio)) @ rates[:, 1])
        # The derivative of the reweighted mean is the covariance with divisor S; psi's is S - 1.
        n = rates.shape[0]
        assert psi[t] == pytest.approx((means[0] - means[1]) / (2 * h) * n / (n - 1), rel=1e-4)


@pytest.mark.stan
@pytest.mark.slow
def test_ij_and_psis_cross_validation_of_the_hmm_against_exact_weighted_refits():
    data = example_data("poisson_hmm", n=T, seed=3)
    y = np.asarray(data["y"])
    options = {"num_chains": 4, "num_samples": 500, "num_warmup": 500, "seed": 2}
    backend = refit.PyStanBackend("poisson_hmm", data, quantities=QUANTITIES, **options)
    full = backend.fit(np.ones(T))
    derivative = refit.PyStanBackend(
        "poisson_hmm", data, log_lik="weight_derivative", quantities=QUANTITIES, **options
    ).fit(np.ones(T))
    np.testing.assert_array_equal(full.quantities.values, derivative.quantities.values)

    # Leave-future-out: exact refits at every origin, PSIS and the IJ from the derivatives.
    exact = bayesij.lfo(full, backend, min_train=144, method="exact", progress=False)
    psis = bayesij.lfo(full, backend, min_train=144)
    ij = bayesij.lfo(full, min_train=144, method="ij", weight_derivative=derivative)
    truth = exact.pointwise["elpd"].to_numpy()
    gap = np.abs(psis.pointwise["elpd"].to_numpy() - truth)
    assert psis.n_refits < exact.n_refits == 6
    assert np.all(gap < 4 * exact.pointwise["mcse"].to_numpy() + 0.05), gap
    relative = np.abs(ij.pointwise["elpd"].to_numpy() - truth) / np.abs(truth)
    assert relative.mean() < 0.02, relative

    # Leave-within-series-out: the held-out predictive densities of each fold, IJ from the
    # full-data draws against the refit with the fold's weights 0.
    for fold in refit.lwcv_split(T, 0.05, contiguous=False, n_folds=3, seed=1):
        weights = np.ones(T)
        weights[fold] = 0.0
        refitted = backend.fit(weights)
        truth = fold_elpd(refitted, y, fold)
        assert abs(fold_elpd_ij(derivative, y, fold) - truth) < 0.03 * abs(truth)
        # The refit is the full-data posterior reweighted by p(y; w) / p(y): same weighting.
        rates, transitions = hmm_draws(full)
        log_ratio = log_marginal(rates, transitions, y, weights) - log_marginal(
            rates, transitions, y
        )
        reweighted = np.exp(log_ratio - logsumexp(log_ratio)) @ rates[:, 1]
        refit_mean = hmm_draws(refitted)[0][:, 1].mean()
        assert abs(reweighted - refit_mean) < 0.1, (reweighted, refit_mean)
