"""LOO from draws that are not the posterior's: an approximation's (equal to R loo 2.5.1's
``loo_approximate_posterior`` on a Laplace approximation of a logistic regression, and to
the exact LOO of a conjugate model within Monte Carlo error), the mixture of the LOO
posteriors (Silva & Zanella 2024; exact mixture draws of a conjugate model give its exact
LOO), and the Jacobian of a transformed response (exactly the LOO of the untransformed
model)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import lognorm, multivariate_normal, norm

import bayesij
from bayesij.refit.conjugate import ConjugateNormal
from peers import ARVIZ_1, REFERENCE, from_dict


def test_equals_r_loo_approximate_posterior():
    table = np.loadtxt(REFERENCE / "approximate_posterior_input.csv", delimiter=",", skiprows=1)
    r = pd.read_csv(REFERENCE / "r_loo_approximate.csv")
    ours = bayesij.loo_approximate_posterior(
        table[:, 2:], table[:, 0], table[:, 1], convention=bayesij.PsisOptions(ddof=1)
    )
    pointwise = ours.pointwise
    for column in ("elpd_loo", "p_loo", "pareto_k"):
        np.testing.assert_allclose(pointwise[column], r[column], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pointwise["ess"], r["n_eff"], rtol=1e-10)
    assert ours.se == pytest.approx(r["se_elpd_loo"].iloc[0], rel=1e-10)
    assert ours.method == "psis-approximate" and "approximate posterior" in str(ours)


def _conjugate(seed: int, n_obs: int = 30, outliers: int = 0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_obs), rng.normal(size=n_obs)])
    y = X @ [1.0, 0.5] + rng.normal(size=n_obs)
    y[:outliers] += 6.0
    model = ConjugateNormal(X, y, sigma=1.0)
    exact = np.array([model.log_predictive(np.arange(n_obs) != n, [n])[0] for n in range(n_obs)])
    return rng, model, exact


def test_approximate_posterior_equals_exact_loo_within_mc_error():
    rng, model, exact = _conjugate(1)
    mean, cov = model.posterior()
    proposal = multivariate_normal(mean + 0.1 * np.sqrt(np.diag(cov)), 1.5**2 * cov)
    beta = proposal.rvs(size=4000, random_state=rng)
    log_p = multivariate_normal(mean, cov).logpdf(beta) + 7.0  # constants do not matter
    result = bayesij.loo_approximate_posterior(
        model.log_lik(beta), log_p, proposal.logpdf(beta), convention=bayesij.PsisOptions(ddof=1)
    )
    pointwise = result.pointwise
    assert (pointwise["pareto_k"] < 0.5).all()
    error = np.abs(pointwise["elpd_loo"].to_numpy() - exact)
    assert (error < 4 * pointwise["mcse_elpd_loo"].to_numpy()).all()
    # Without the correction (the approximation taken for the posterior) it is off.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        naive = bayesij.loo(model.log_lik(beta)[None], convention=bayesij.PsisOptions(ddof=1))
    assert abs(naive.elpd - exact.sum()) > 5 * abs(result.elpd - exact.sum())


def test_mixture_draws_give_exact_loo_where_psis_struggles():
    rng, model, exact = _conjugate(2, n_obs=25, outliers=2)
    n_obs, n_draws = exact.size, 4000
    # The mixture p(theta|y) sum_n 1/p(y_n|theta) is the mixture of the LOO posteriors
    # p(theta|y_-n) with weights proportional to 1 / p(y_n | y_-n): sample it exactly.
    component_weights = np.exp(-exact - np.max(-exact))
    components = rng.choice(n_obs, size=n_draws, p=component_weights / component_weights.sum())
    beta = np.empty((n_draws, 2))
    for n in range(n_obs):
        chosen = components == n
        beta[chosen] = model.draws(int(chosen.sum()), rng, np.arange(n_obs) != n)
    result = bayesij.loo_mixture(model.log_lik(beta), ddof=1)
    pointwise = result.pointwise
    error = np.abs(pointwise["elpd_loo"].to_numpy() - exact)
    assert (error < 4 * pointwise["mcse_elpd_loo"].to_numpy() + 1e-3).all()
    assert abs(result.elpd - exact.sum()) < 4 * result.mcse
    assert "mixture IS-LOO" in str(result)


def test_log_jacobian_puts_a_log_model_on_the_original_scale():
    """A normal model of log y is a lognormal model of y: with the Jacobian -log y its LOO
    equals that of the lognormal log-likelihood of the same draws."""
    rng = np.random.default_rng(3)
    y = rng.lognormal(0.3, 0.8, size=50)
    mu = rng.normal(np.log(y).mean(), 0.8 / np.sqrt(50), size=(4, 500, 1))
    of_log = norm.logpdf(np.log(y), mu, 0.8)
    of_y = lognorm.logpdf(y, s=0.8, scale=np.exp(mu))
    adjusted = bayesij.loo(of_log, log_jacobian=-np.log(y), convention=bayesij.PsisOptions(ddof=1))
    direct = bayesij.loo(of_y, convention=bayesij.PsisOptions(ddof=1))
    for column in ("elpd_loo", "p_loo", "pareto_k", "lppd"):
        np.testing.assert_allclose(adjusted.pointwise[column], direct.pointwise[column], atol=1e-10)
    assert adjusted.elpd == pytest.approx(direct.elpd) and adjusted.se == pytest.approx(direct.se)
    assert bayesij.loo(of_log).elpd - adjusted.elpd == pytest.approx(np.log(y).sum())
    with pytest.raises(ValueError, match=r"log_jacobian: found shape \(3,\); expected one value"):
        bayesij.loo(of_log, log_jacobian=np.ones(3))
    # The mixture's weights are those of the log-likelihood it was sampled with (of log y):
    # the Jacobian is added after, not folded into them.
    mixture = bayesij.loo_mixture(of_log, log_jacobian=-np.log(y))
    assert mixture.elpd == pytest.approx(bayesij.loo_mixture(of_log).elpd - np.log(y).sum())


@pytest.mark.parametrize(
    ("log_p", "log_g", "message"),
    [
        (np.zeros(7), np.zeros(2000), r"log_p: found shape \(7,\); expected one value per draw"),
        (np.zeros(2000), np.full(2000, np.nan), r"log_g: found 2000 non-finite value\(s\)"),
    ],
)
def test_bad_log_densities_are_refused_by_name(log_p, log_g, message):
    with pytest.raises(ValueError, match=message):
        bayesij.loo_approximate_posterior(np.zeros((4, 500, 3)), log_p, log_g)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' loo_approximate_posterior (Python >= 3.12)")
def test_equal_to_arviz_stats_approximate_mixture_and_jacobian():
    """arviz-stats' tail rule is "floor"; its mixture p_loo averages p(y_n | theta) over the
    mixture's draws, ours over the draws weighted back to the posterior (the elpd, SE and
    k-hat are the same)."""
    import xarray as xr
    from arviz_stats import loo as arviz_loo
    from arviz_stats import loo_approximate_posterior as arviz_approximate

    table = np.loadtxt(REFERENCE / "approximate_posterior_input.csv", delimiter=",", skiprows=1)
    log_lik = table[None, :, 2:]
    tree = from_dict(posterior={"b": table[None, :, 0]}, log_likelihood={"y": log_lik})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = arviz_approximate(tree, table[:, 0], table[:, 1], pointwise=True)
        ours = bayesij.loo_approximate_posterior(
            log_lik,
            table[:, 0],
            table[:, 1],
            convention=bayesij.PsisOptions(tail_rule="floor", ddof=1),
        )
        np.testing.assert_allclose(ours.pointwise["elpd_loo"], theirs.elpd_i, atol=1e-12)
        np.testing.assert_allclose(ours.pointwise["pareto_k"], theirs.pareto_k, atol=1e-12)
        assert ours.se == pytest.approx(theirs.se, rel=1e-12)
        assert ours.p_loo == pytest.approx(theirs.p, rel=1e-12)
        theirs = arviz_loo(tree, pointwise=True, mixture=True)
        ours = bayesij.loo_mixture(log_lik, ddof=1)
        np.testing.assert_allclose(ours.pointwise["elpd_loo"], theirs.elpd_i, atol=1e-12)
        assert ours.se == pytest.approx(theirs.se, rel=1e-12)
        jacobian = -0.01 * np.arange(log_lik.shape[2])
        theirs = arviz_loo(
            tree, pointwise=True, log_jacobian=xr.DataArray(jacobian, dims=["y_dim_0"])
        )
        ours = bayesij.loo(tree, log_jacobian=jacobian, convention="arviz-stats")
        np.testing.assert_allclose(ours.pointwise["elpd_loo"], theirs.elpd_i, atol=1e-12)
        assert ours.p_loo == pytest.approx(theirs.p, rel=1e-12)
