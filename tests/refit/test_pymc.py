"""refit.PyMCBackend: the weighted log density is exactly sum_n w_n log p(y_n | theta) plus
the prior, and an AMIP set of a PyMC regression is verified by a real PyMC refit."""

import numpy as np
import pytest

import bayesij
from bayesij import refit

pm = pytest.importorskip("pymc", reason="PyMC is sampled in the Python 3.12 environment")


def _regression_data(n=60, seed=8):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.5 + 0.25 * x + rng.normal(size=n)
    x[:3] = [3.5, 3.8, 4.1]  # three high-leverage points pull the slope down
    y[:3] = [-2.0, -2.5, -3.0]
    return x, y


def _regression(n=60, seed=8):
    x, y = _regression_data(n, seed)
    with pm.Model(coords={"obs": [f"p{i}" for i in range(n)]}) as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", alpha + beta * x, sigma, observed=y, dims="obs")
    return model


def test_the_weighted_log_density_is_exact():
    model = _regression()
    backend = refit.PyMCBackend(model)
    weights = np.random.default_rng(1).integers(0, 3, size=backend.n_obs).astype(float)
    weighted = backend._weighted_model(weights)
    point = {"alpha": 0.3, "beta": -0.2, "sigma_log__": np.log(1.3)}
    full = model.compile_logp()(point)
    log_lik = model.compile_fn(model.logp(vars=[model["y"]], sum=False)[0])(point)
    expected = full + np.sum((weights - 1.0) * log_lik)
    assert weighted.compile_logp()(point) == pytest.approx(expected, rel=1e-12)


def test_bad_model_and_observed_name():
    with pytest.raises(ValueError, match=r"model: found a dict; expected a pymc.Model"):
        refit.PyMCBackend({})
    with pytest.raises(ValueError, match=r"observed: found 'z'; expected one of the observed"):
        refit.PyMCBackend(_regression(), observed="z")


def test_a_refit_survives_its_samplers_numerical_warnings(monkeypatch):
    """PyMC's NUTS may warn "overflow encountered in dot" during warmup (its mass matrix's
    velocity): the refit goes on and is judged by its divergences; a warning from the
    user's own code still reaches the caller."""
    import warnings

    sample = pm.sample

    def sample_that_overflows(*args, **kwargs):
        warnings.warn_explicit(
            "overflow encountered in dot",
            RuntimeWarning,
            "quadpotential.py",
            1,
            module="pymc.step_methods.hmc.quadpotential",
        )
        return sample(*args, **kwargs)

    monkeypatch.setattr(pm, "sample", sample_that_overflows)
    backend = refit.PyMCBackend(_regression(), draws=50, tune=50, chains=1, seed=1)
    # Every warning recorded, the configuration's filters aside (as a user's script sees
    # them); not raised, which would change how PyTensor compiles for later tests.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = backend.fit(np.ones(backend.n_obs))
    assert post.n_draws == 50
    assert not [w for w in caught if "overflow encountered" in str(w.message)]

    def sample_with_user_warning(*args, **kwargs):
        warnings.warn("the user's own warning", RuntimeWarning, stacklevel=1)
        return sample(*args, **kwargs)

    monkeypatch.setattr(pm, "sample", sample_with_user_warning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend.fit(np.ones(backend.n_obs))
    assert [w for w in caught if "the user's own warning" in str(w.message)]


@pytest.mark.slow
def test_an_amip_set_of_a_pymc_regression_is_verified_by_a_real_refit():
    backend = refit.PyMCBackend(_regression(), draws=1000, tune=1000, chains=4, seed=3)
    post = backend.fit(np.ones(backend.n_obs))
    assert post.obs_names[:2] == ["p0", "p1"] and "beta" in post.quantity_names
    result = bayesij.amip(post, "beta", target="sign", alpha_max=0.1)
    assert result.answer == "reached" and result.n_drop <= 6
    checked = refit.verify(result, backend, progress=False)
    truth = checked.verification
    assert truth["reached"]  # the refit without the set really reverses the sign
    # The same weights give the same refit (seeded from the weights).
    again = refit.verify(result, backend, progress=False).verification
    assert again["mean"] == truth["mean"]
    # Refits in the loop: the set is confirmed by a PyMC refit inside the search.
    looped = bayesij.amip(post, "beta", target="sign", backend=backend, max_refits=4)
    assert looped.answer == "reached" and looped.verification["reached"]
    assert looped.n_drop <= result.n_drop


@pytest.mark.slow
def test_pymc_refits_run_on_processes_and_dask_as_in_this_process():
    """The backend travels to loky and Dask workers (its model as cloudpickle bytes) and,
    seeded from the weights, gives the same refits in every worker process, and there the
    refits it gives here."""
    distributed = pytest.importorskip("distributed")
    backend = refit.PyMCBackend(_regression(n=30), draws=300, tune=300, chains=2, seed=5)
    post = backend.fit(np.ones(backend.n_obs))
    here = refit.loo(post, backend, points=["p0", "p1"], executor="sequential", progress=False)
    pooled = refit.loo(post, backend, points=["p0", "p1"], executor=2, progress=False)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        with distributed.Client(cluster) as client:
            on_dask = refit.loo(post, backend, points=["p0", "p1"], executor=client, progress=False)
    assert pooled.failures.empty and on_dask.failures.empty
    # Two new worker processes, two executors: the same draws.
    np.testing.assert_allclose(on_dask.table()["exact"], pooled.table()["exact"], rtol=1e-10)
    # This process: equal to 1e-10 in most runs, but after the suite's other tests in the
    # same process a refit has differed by 1.4e-6 and by 1.1e-4 relative (3.12: rounding
    # carried along a NUTS trajectory), where a refit seeded otherwise differs by 9e-4.
    np.testing.assert_allclose(pooled.table()["exact"], here.table()["exact"], rtol=3e-4)
    reseeded = refit.PyMCBackend(backend.model, draws=300, tune=300, chains=2, seed=6)
    other_seed = refit.loo(post, reseeded, points=["p0"], executor="sequential", progress=False)
    shift = abs(other_seed.table()["exact"].iloc[0] / here.table()["exact"].iloc[0] - 1)
    assert shift > 3e-4, shift


def test_density_score_is_the_log_posterior_gradient_on_the_unconstrained_scale():
    """alpha, beta ~ N(0, 10), sigma ~ HalfNormal(2) (value log sigma): the gradient with
    the Jacobian, in closed form, at arbitrary draws of an InferenceData / DataTree."""
    from peers import from_dict

    model = _regression()
    rng = np.random.default_rng(2)
    alpha, beta = rng.normal(0.4, 0.2, size=(2, 2, 50))
    sigma = np.exp(rng.normal(0.2, 0.1, size=(2, 50)))
    data = from_dict(posterior={"alpha": alpha, "beta": beta, "sigma": sigma})
    score, unconstrained = refit.PyMCDensity(model).grad_log_posterior(data)
    assert score.shape == unconstrained.shape == (2, 50, 3)
    np.testing.assert_allclose(unconstrained[..., 2], np.log(sigma), rtol=1e-12)
    covariate, outcome = _regression_data()
    resid = outcome - alpha[..., None] - beta[..., None] * covariate
    s2 = sigma[..., None] ** 2
    expected = np.stack(
        [
            (resid / s2).sum(-1) - alpha / 100,
            (resid * covariate / s2).sum(-1) - beta / 100,
            -outcome.size + (resid**2 / s2).sum(-1) - sigma**2 / 4 + 1,
        ],
        axis=-1,
    )
    np.testing.assert_allclose(score, expected, rtol=1e-9)
    with pytest.raises(ValueError, match=r"data: found a posterior without \['sigma'\]"):
        refit.PyMCDensity(model).grad_log_posterior(
            from_dict(posterior={"alpha": alpha, "beta": beta})
        )
    with pytest.raises(ValueError, match=r"model: found a dict; expected a pymc.Model"):
        refit.PyMCDensity({})


@pytest.mark.slow
def test_density_score_gives_control_variates_for_a_sampled_pymc_model():
    """A sampled PyMC regression with heavy-tailed noise: the control-variate influences of
    the most extreme observations have a far smaller Monte Carlo error than the plain
    ones, and the audit with the density says so."""
    rng = np.random.default_rng(4)
    n = 300
    x = rng.normal(size=n)
    y = 1.0 + 0.3 * x + rng.normal(size=n) * np.where(rng.uniform(size=n) < 0.03, 15.0, 1.0)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 10.0)
        pm.Normal("y", alpha + beta * x, sigma, observed=y)
        fit = pm.sample(500, tune=500, chains=4, cores=1, random_seed=5, progressbar=False)
        pm.compute_log_likelihood(fit, progressbar=False)
    density = refit.PyMCDensity(model)
    score, unconstrained = density.grad_log_posterior(fit)
    plain = bayesij.influence(fit, quantities="beta")
    controlled = bayesij.influence(
        fit, quantities="beta", grad_log_posterior=score, unconstrained=unconstrained
    )
    extreme = np.argsort(-np.abs(y - y.mean()))[:9]
    ratio = plain["mcse"].values[0, extreme] / controlled["mcse"].values[0, extreme]
    assert np.median(ratio) > 3
    report = bayesij.audit(
        fit, quantities=["beta"], grad_log_posterior=density, settings={"method": "linear"}
    )
    assert any("zero-variance control variates" in line for line in report.skipped_words())


def test_the_density_at_unconstrained_draws_is_the_models_log_density_and_log_likelihood():
    """log_prob is every term of the model with the Jacobian (prior and likelihood, closed
    form), log_lik_i one observation's term; a Posterior and an InferenceData give the
    same unconstrained draws."""
    from scipy.stats import halfnorm, norm

    from peers import from_dict

    model = _regression()
    rng = np.random.default_rng(3)
    alpha, beta = rng.normal(0.4, 0.2, size=(2, 2, 40))
    sigma = np.exp(rng.normal(0.2, 0.1, size=(2, 40)))
    covariate, outcome = _regression_data()
    mean = alpha[..., None] + beta[..., None] * covariate
    log_lik = norm.logpdf(outcome, mean, sigma[..., None])
    data = from_dict(
        posterior={"alpha": alpha, "beta": beta, "sigma": sigma}, log_likelihood={"y": log_lik}
    )
    density = refit.PyMCDensity(model)
    upars = density.unconstrain(data)
    np.testing.assert_allclose(upars, density.unconstrain(bayesij.read(data).posterior()))
    expected = (
        norm.logpdf(alpha, 0, 10)
        + norm.logpdf(beta, 0, 10)
        + halfnorm.logpdf(sigma, scale=2.0)
        + np.log(sigma)  # the Jacobian of sigma = exp(value)
        + log_lik.sum(-1)
    )
    # PyMC's normalising constants differ from SciPy's by 7e-8 in 120 nats (the same at
    # every draw, so no ratio moment matching forms sees it).
    np.testing.assert_allclose(density.log_prob(upars), expected.ravel(), rtol=1e-9)
    np.testing.assert_allclose(density.log_lik_i(upars, 7), log_lik[..., 7].ravel(), rtol=1e-10)
    with pytest.raises(ValueError, match=r"upars: found an array of shape \(80, 2\)"):
        density.log_prob(upars[:, :2])
    with pytest.raises(ValueError, match=r"observed: found 'z'"):
        refit.PyMCDensity(model, observed="z")


def _outlier_fit(seed: int = 2):
    """y_n ~ N(mu, 1), mu ~ N(0, 10), nine points and an outlier at 9: PSIS cannot leave the
    outlier out (k-hat above 0.7), and the exact LOO predictive is normal."""
    y = np.append(np.random.default_rng(1).normal(0.0, 1.0, size=9), 9.0)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=y)
        fit = pm.sample(1000, chains=4, cores=1, random_seed=seed, progressbar=False)
        pm.compute_log_likelihood(fit, progressbar=False)
    return y, model, fit


def _exact_loo(y: np.ndarray, prior_sd: float = 10.0) -> np.ndarray:
    from scipy.stats import norm

    rest = y.sum() - y
    precision = 1 / prior_sd**2 + y.size - 1
    return norm.logpdf(y, rest / precision, np.sqrt(1 / precision + 1))


@pytest.mark.slow
def test_moment_matching_through_a_pymc_model_reaches_the_exact_loo():
    y, model, fit = _outlier_fit()
    exact = _exact_loo(y)
    with pytest.warns(UserWarning, match="Pareto k-hat above"):
        psis = bayesij.loo(fit)
    assert psis.pointwise["pareto_k"].iloc[-1] > psis.k_threshold
    matched = bayesij.loo_moment_match(fit, refit.PyMCDensity(model), loo=psis)
    table = matched.pointwise
    assert table["moment_matched"].iloc[-1] and table["pareto_k"].iloc[-1] < 0.5
    error = abs(table["elpd_loo"].iloc[-1] - exact[-1])
    assert error < 4 * table["mcse_elpd_loo"].iloc[-1]  # 0.077 against an MCSE of 0.033
    assert error < abs(psis.pointwise["elpd_loo"].iloc[-1] - exact[-1]) / 4  # PSIS: 0.43
    # The others by plain PSIS: within the Monte Carlo error of the posterior mean they share.
    np.testing.assert_allclose(table["elpd_loo"].iloc[:-1], exact[:-1], atol=0.06)


def test_moment_matching_refuses_a_pymc_model_built_on_other_data():
    # The model's data keep the outlier (the matched observation) but another row differs:
    # each matched observation's own log-likelihood agrees, the tilted posterior does not.
    y, _, fit = _outlier_fit()
    other = y.copy()
    other[0] += 2.0
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=other)
    with pytest.raises(
        ValueError, match=r"^model: found a log-likelihood that differs from the fi"
    ):
        bayesij.loo_moment_match(fit, refit.PyMCDensity(model))


@pytest.mark.slow
def test_moment_matching_through_a_pymc_model_agrees_with_arviz_stats():
    """arviz-stats' loo_moment_match(model=) on the same draws: equal within Monte Carlo
    error where matched (the two implementations split and weight the draws differently),
    equal where not."""
    arviz_stats = pytest.importorskip("arviz_stats", reason="ArviZ 1.x (Python >= 3.12)")
    y, model, fit = _outlier_fit()
    with pytest.warns(UserWarning, match="Pareto k-hat above"):
        psis = bayesij.loo(fit, convention="arviz-stats")
    matched = bayesij.loo_moment_match(fit, refit.PyMCDensity(model), loo=psis).pointwise
    with pytest.warns(UserWarning):
        peer = arviz_stats.loo_moment_match(fit, arviz_stats.loo(fit, pointwise=True), model=model)
    theirs = np.asarray(peer.elpd_i)
    assert abs(matched["elpd_loo"].iloc[-1] - theirs[-1]) < 2 * matched["mcse_elpd_loo"].iloc[-1]
    np.testing.assert_allclose(matched["elpd_loo"].iloc[:-1], theirs[:-1], rtol=1e-10)


def test_a_pymc_hierarchys_open_amip_answer_gets_the_moment_matched_change_of_its_set():
    # A non-centred varying-intercept model (12 groups of 5, t(4) noise), the observation
    # the unit: the draws alone bound no set's change. With refit.PyMCDensity the search's
    # set is removed by moment matching, and the exact PyMC refit without it lands in the
    # matched change interval (within the refit's own Monte Carlo error).
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "helpers"))
    from hierarchy_gibbs import simulate

    y, group = simulate(12, 5, 3)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        tau = pm.HalfNormal("tau", 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        z = pm.Normal("z", 0.0, 1.0, shape=12)
        pm.Normal("y", mu + tau * z[group], sigma, observed=y)
    backend = refit.PyMCBackend(model, seed=1, draws=1000, tune=1000, chains=4)
    post = backend.fit(np.ones(y.size))
    plain = bayesij.amip(post, "mu", "sign")
    found = bayesij.amip(post, "mu", "sign", grad_log_posterior=refit.PyMCDensity(model))
    assert plain.change_interval == (-np.inf, np.inf)
    assert "moment matching" in found.decided_by
    low, high = found.change_interval
    assert np.isfinite([low, high]).all()
    mu_draws = post.quantities.sel(quantity="mu").values
    after = backend.fit(found.kept).quantities.sel(quantity="mu").values
    error = 3 * after.std() / np.sqrt(after.size / 4)  # ESS a quarter of the draws, at worst
    assert low - error < after.mean() - mu_draws.mean() < high + error
