"""refit.PyMCDensity.group_log_lik: a PyMC hierarchy's group terms with each group's effect
integrated out, against an independent NumPy quadrature, the closed form of a normal
hierarchy, and leave-one-group-out by exact PyMC refits."""

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy.special import logsumexp
from scipy.stats import poisson

import bayesij
from bayesij import refit
from bayesij.array.hierarchy import intercept_group_log_lik, normal_group_log_lik

pm = pytest.importorskip("pymc", reason="PyMC is sampled in the Python 3.12 environment")

N_GROUPS, PER_GROUP = 15, 4


def _poisson_glmm_data(seed=0):
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(N_GROUPS), PER_GROUP)
    x = rng.normal(size=codes.size)
    effects = rng.normal(0.0, 0.8, N_GROUPS)
    y = rng.poisson(np.exp(0.5 + 0.3 * x + effects[codes]))
    return codes, x, y


def _sample(model, draws=300, seed=1):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws, tune=300, chains=2, cores=1, random_seed=seed, progressbar=False)
        return pm.compute_log_likelihood(idata, progressbar=False)


@pytest.fixture(scope="module")
def glmm():
    """An epilepsy-shaped Poisson GLMM (patients x visits, a non-centred normal patient
    intercept ``sd_u * z``, the patient index saved as pm.Data), its fit and its
    integrated patient terms."""
    codes, x, y = _poisson_glmm_data()
    coords = {"patient": [f"p{g}" for g in range(N_GROUPS)], "obs": np.arange(codes.size)}
    with pm.Model(coords=coords) as model:
        index = pm.Data("patient_idx", codes, dims="obs")
        b0 = pm.Normal("b0", 0.0, 2.0)
        b1 = pm.Normal("b1", 0.0, 2.0)
        sd_u = pm.HalfNormal("sd_u", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="patient")
        pm.Poisson("y", pm.math.exp(b0 + b1 * x + sd_u * z[index]), observed=y, dims="obs")
    idata = _sample(model)
    density = refit.PyMCDensity(model)
    return codes, x, y, model, idata, density, density.group_log_lik(idata, "z")


def test_the_integrated_terms_are_an_independent_quadrature_s(glmm):
    # The same integral over the intercept a = sd_u z ~ N(0, sd_u^2), with SciPy's Poisson
    # log-pmf at the draws: the model's own functions and prior are read right.
    codes, x, y, _, idata, _, terms = glmm
    post = idata.posterior
    b0, b1, sd_u = (post[name].values[..., None] for name in ("b0", "b1", "sd_u"))

    def log_lik_at(a):
        return poisson.logpmf(y, np.exp(b0 + b1 * x + a))

    expected = intercept_group_log_lik(log_lik_at, codes, sd_u[..., 0])
    assert terms.dims == ("chain", "draw", "patient")
    assert list(terms.coords["patient"].values) == [f"p{g}" for g in range(N_GROUPS)]
    np.testing.assert_allclose(terms.values, expected, rtol=1e-9, atol=1e-9)


def test_a_logistic_glmm_s_terms_are_an_independent_quadrature_s():
    # Bernoulli outcomes on a logit scale, a centred intercept u ~ N(0, sd_u): SciPy's
    # log-pmf of the same linear predictor, integrated by the array-level quadrature.
    from scipy.special import log_expit

    rng = np.random.default_rng(7)
    codes = np.repeat(np.arange(12), 6)
    x = rng.normal(size=codes.size)
    y = rng.random(codes.size) < 1 / (1 + np.exp(-(0.3 + x + rng.normal(0, 1, 12)[codes])))
    with pm.Model() as model:
        b0, b1 = pm.Normal("b0", 0.0, 2.0), pm.Normal("b1", 0.0, 2.0)
        sd_u = pm.HalfNormal("sd_u", 1.0)
        u = pm.Normal("u", 0.0, sd_u, shape=12)
        pm.Bernoulli("y", logit_p=b0 + b1 * x + u[codes], observed=y.astype(int))
    idata = _sample(model, draws=100)
    terms = refit.PyMCDensity(model).group_log_lik(idata, "u")
    post = idata.posterior
    b0, b1 = (post[name].values[..., None] for name in ("b0", "b1"))

    def log_lik_at(a):
        eta = b0 + b1 * x + a
        return np.where(y, log_expit(eta), log_expit(-eta))

    expected = intercept_group_log_lik(log_lik_at, codes, post["sd_u"].values)
    # The two quadratures place their nodes from finite differences of their own step
    # (the effects' spread, or each draw's sd_u): they agree to 1e-5; SciPy's adaptive
    # integration of the worst draws is within 1e-5 of both (16 nodes).
    np.testing.assert_allclose(terms.values, expected, rtol=1e-5)
    from scipy.integrate import quad
    from scipy.stats import norm

    worst = np.unravel_index(
        np.argsort(-np.abs(terms.values - expected), axis=None)[:3], terms.shape
    )
    for c, d, g in zip(*worst, strict=True):
        rows = codes == g

        def integrand(a, c=c, d=d, rows=rows):
            eta = b0[c, d, 0] + b1[c, d, 0] * x[rows] + a
            ll = np.where(y[rows], log_expit(eta), log_expit(-eta)).sum()
            return np.exp(ll) * norm.pdf(a, 0.0, post["sd_u"].values[c, d])

        scale = 6 * post["sd_u"].values[c, d]
        exact = np.log(quad(integrand, -scale, scale, epsabs=0, epsrel=1e-12, limit=200)[0])
        assert terms.values[c, d, g] == pytest.approx(exact, rel=1e-5)
        assert expected[c, d, g] == pytest.approx(exact, rel=1e-5)


def test_a_centred_normal_hierarchy_integrates_to_its_closed_form():
    # y ~ N(b0 + u_g, sigma), u ~ N(mu_u, tau): the group's marginal is multivariate normal.
    rng = np.random.default_rng(5)
    codes = np.repeat(np.arange(6), 3)
    y = rng.normal(1.0 + rng.normal(0, 0.7, 6)[codes], 0.5)
    with pm.Model() as model:
        mu_u = pm.Normal("mu_u", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        u = pm.Normal("u", mu_u, tau, shape=6)
        pm.Normal("y", u[codes], sigma, observed=y)
    idata = _sample(model, draws=100)
    terms = refit.PyMCDensity(model).group_log_lik(idata, "u")
    post = idata.posterior
    residuals = y - post["mu_u"].values[..., None]
    closed = normal_group_log_lik(residuals, codes, post["tau"].values, post["sigma"].values)
    assert terms.dims == ("chain", "draw", "u_dim_0")
    np.testing.assert_allclose(terms.values, closed, rtol=1e-8)


def _intercept_and_slope_data(seed=6, n_groups=6, per_group=4):
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(n_groups), per_group)
    x = rng.normal(size=codes.size)
    effects = rng.normal(0, [0.7, 0.4], (n_groups, 2))
    y = rng.normal(1.0 + effects[codes, 0] + (0.5 + effects[codes, 1]) * x, 0.5)
    return codes, x, y


def _intercept_and_slope_marginal(codes, x, y, post, tau_a, tau_s) -> np.ndarray:
    """log N(y_g | b0 + b1 x_g, sigma^2 I + tau_a^2 11' + tau_s^2 x_g x_g') per draw."""
    from scipy.stats import multivariate_normal

    b0, b1, sigma = (post[n].values.ravel() for n in ("b0", "b1", "sigma"))
    tau_a, tau_s = np.ravel(tau_a), np.ravel(tau_s)
    out = np.empty((b0.size, codes.max() + 1))
    for s in range(b0.size):
        for g in range(out.shape[1]):
            xg, n = x[codes == g], int((codes == g).sum())
            cov = sigma[s] ** 2 * np.eye(n) + tau_a[s] ** 2 + tau_s[s] ** 2 * np.outer(xg, xg)
            out[s, g] = multivariate_normal(b0[s] + b1[s] * xg, cov).logpdf(y[codes == g])
    return out.reshape(*post["b0"].shape, -1)


def test_a_random_intercept_and_slope_integrate_jointly_to_the_closed_form():
    """Several effects per group: a centred intercept and slope as two vectors, and the
    same as one non-centred (group, effect) matrix; both integrate to the multivariate
    normal marginal, and loo_integrated integrates both effects, not the first alone."""
    codes, x, y = _intercept_and_slope_data()
    coords = {"group": [f"g{g}" for g in range(6)], "effect": ["a", "s"], "obs": range(24)}
    with pm.Model(coords=coords) as vectors:
        index = pm.Data("group_idx", codes, dims="obs")
        b0, b1 = pm.Normal("b0", 0, 2), pm.Normal("b1", 0, 2)
        tau_a, tau_s = pm.HalfNormal("tau_a", 1), pm.HalfNormal("tau_s", 1)
        sigma = pm.HalfNormal("sigma", 1)
        a = pm.Normal("a", 0, tau_a, dims="group")
        slope = pm.Normal("slope", 0, tau_s, dims="group")
        mean = b0 + a[index] + (b1 + slope[index]) * x
        pm.Normal("y", mean, sigma, observed=y, dims="obs")
    idata = _sample(vectors, draws=60)
    post = idata.posterior
    terms = refit.PyMCDensity(vectors).group_log_lik(idata, ("a", "slope"), n_nodes=5)
    closed = _intercept_and_slope_marginal(codes, x, y, post, post["tau_a"], post["tau_s"])
    assert terms.dims == ("chain", "draw", "group")
    np.testing.assert_allclose(terms.values, closed, rtol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.loo_integrated(idata, refit.PyMCDensity(vectors))
    assert result.integrated == "a, slope"

    with pm.Model(coords=coords) as matrix:
        b0, b1 = pm.Normal("b0", 0, 2), pm.Normal("b1", 0, 2)
        tau = pm.HalfNormal("tau", 1, dims="effect")
        sigma = pm.HalfNormal("sigma", 1)
        z = pm.Normal("z", 0, 1, dims=("group", "effect"))
        u = z * tau
        pm.Normal("y", b0 + u[codes, 0] + (b1 + u[codes, 1]) * x, sigma, observed=y)
    idata = _sample(matrix, draws=60)
    post = idata.posterior
    terms = refit.PyMCDensity(matrix).group_log_lik(idata, "z", n_nodes=5)
    tau = post["tau"].values
    closed = _intercept_and_slope_marginal(codes, x, y, post, tau[..., 0], tau[..., 1])
    np.testing.assert_allclose(terms.values, closed, rtol=1e-8)


def test_group_effects_are_refused_unless_one_per_observation(glmm):
    *_, density, _ = glmm
    idata = glmm[4]
    with pytest.raises(ValueError, match=r"variable: found 'sd_u' of shape \(\), transformed"):
        density.group_log_lik(idata, "sd_u")
    with pytest.raises(ValueError, match=r"variable: found 'w'; expected a free variable"):
        density.group_log_lik(idata, "w")
    with pm.Model() as model:  # each observation on two effects
        a = pm.Normal("a", 0.0, 1.0, shape=3)
        pm.Normal("y", a[[0, 1, 2, 0]] + a[[1, 2, 0, 2]], 1.0, observed=np.zeros(4))
    idata = _sample(model, draws=20)
    with pytest.raises(ValueError, match="variable: found 'a', of which some observations"):
        refit.PyMCDensity(model).group_log_lik(idata, "a")


@pytest.mark.slow
def test_leave_one_patient_out_on_integrated_terms_matches_exact_refits(glmm):
    # Conditional on its own intercept a patient's terms leave PSIS with k-hat above 0.7
    # for most patients; integrated, none. For the two patients whose conditional k-hat is
    # highest, the integrated PSIS elpd equals the exact one: the model refitted by PyMC
    # without the patient, its integrated term averaged over the refit's draws.
    codes, _, _, model, idata, density, terms = glmm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditional = bayesij.loo(idata, groups="patient_idx").pointwise
    integrated = bayesij.loo(terms).pointwise
    assert (conditional["pareto_k"] > 0.7).sum() >= N_GROUPS // 3
    assert (integrated["pareto_k"] < 0.7).all()
    backend = refit.PyMCBackend(model, draws=1000, tune=500, chains=2)
    for g in np.argsort(-conditional["pareto_k"].to_numpy())[:2]:
        weights = np.ones(codes.size)
        weights[codes == g] = 0.0
        left_out = density.group_log_lik(backend.fit(weights), "z").values[..., g].ravel()
        exact = logsumexp(left_out) - np.log(left_out.size)
        ratios = np.exp(left_out - left_out.max())
        mcse = ratios.std() / ratios.mean() / np.sqrt(left_out.size / 2)  # ESS ~ S/2
        psis = integrated["elpd_loo"].iloc[g]
        assert abs(psis - exact) <= 3 * mcse + 0.1, (g, psis, exact, mcse)


def test_an_audit_given_the_pymc_backend_judges_the_patients_integrated(glmm):
    # Without marginal_log_lik, the backend's model integrates the patient intercepts out
    # itself: the same terms, the verdicts "integrated", no AMIP refit needed for it. With
    # nothing given, the audit recovers the Poisson GLMM from the draws and integrates the
    # same terms (to round-off), saying so.
    *_, model, idata, _, terms = glmm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = bayesij.audit(idata, marginal_log_lik=terms, settings={"amip": False})
        backed = bayesij.audit(idata, backend=refit.PyMCBackend(model), settings={"amip": False})
        dense = bayesij.audit(
            idata, grad_log_posterior=refit.PyMCDensity(model), settings={"amip": False}
        )
        bare = bayesij.audit(idata, settings={"amip": False})
    for other in (backed, dense, bare):  # the model's own integration, or the recovered one
        np.testing.assert_allclose(
            other.ij_integrated.variance_corrected,
            given.ij_integrated.variance_corrected,
            rtol=1e-8,
        )
        assert (other.comparison_table["why"] == "integrated").all()
    assert bare.integrated_from.startswith("z ~ N(0, 1), entering as sd_u * z, of the Poisson")
    assert backed.integrated_from == dense.integrated_from == given.integrated_from == ""
    # nothing is left to name: every audit reads integrated terms
    for report in (given, bare):
        told = " ".join(report.summary())
        assert "marginal_log_lik" not in told and "loo_integrated" not in told


def test_loo_given_the_density_leaves_groups_out_over_integrated_terms(glmm):
    # loo_integrated finds the patients' intercepts itself: its values are PSIS over the
    # integrated terms (labelled by patient), the conditional k-hats beside them.
    *_, idata, density, terms = glmm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditional = bayesij.loo(idata, groups="patient_idx")
    result = bayesij.loo_integrated(idata, density, groups="patient_idx")
    by_hand = bayesij.loo(terms)
    assert result.integrated == "z"
    assert list(result.pointwise.index) == list(conditional.pointwise.index)
    np.testing.assert_allclose(
        result.pointwise["elpd_loo"], by_hand.pointwise["elpd_loo"], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        result.pointwise["pareto_k_conditional"], conditional.pointwise["pareto_k"], atol=0
    )
    assert result.pointwise["pareto_k"].max() < 0.7 < conditional.pointwise["pareto_k"].max()


def test_loo_given_a_density_refuses_what_it_cannot_integrate(glmm):
    *_, idata, density, _ = glmm
    with pytest.raises(ValueError, match="density: found a fit whose units are its observ"):
        bayesij.loo_integrated(idata, density, groups=False)
    with pytest.raises(ValueError, match="density: found object integrating none"):
        bayesij.loo_integrated(idata, object(), groups="patient_idx")


def test_a_declared_glmm_saved_with_its_predictor_equals_the_model_s_integration(glmm):
    # The same Poisson GLMM read without its model: its linear predictor saved beside the
    # draws (as a Deterministic would be), the family declared. The terms are the model's.
    codes, x, _, _, idata, _, terms = glmm
    post = idata.posterior
    eta = (
        post["b0"]
        + post["b1"] * xr.DataArray(x, dims="obs")
        + post["sd_u"] * post["z"].isel(patient=xr.DataArray(codes, dims="obs"))
    )
    saved = idata.copy()
    saved.posterior["eta"] = eta.drop_vars("patient", errors="ignore").transpose(
        "chain", "draw", "obs"
    )
    density = bayesij.GlmDensity("poisson", "eta", "z", "sd_u", multiplier="sd_u")
    declared = density.group_log_lik(saved)
    np.testing.assert_allclose(declared.values, terms.values, rtol=1e-7)
    result = bayesij.loo_integrated(saved, density)
    np.testing.assert_allclose(
        result.pointwise["elpd_loo"], bayesij.loo(terms).pointwise["elpd_loo"], rtol=1e-7
    )


@pytest.mark.slow
def test_amip_over_the_patients_integrated_terms_is_what_exact_refits_say(glmm):
    # The audit's AMIP over the patients from their integrated terms: with 15 patients at
    # most one may be dropped (alpha_max 0.1), so every answer is known exactly from the
    # 15 refits of the model by PyMC, each without one patient. A "reached" patient's
    # refit crosses the target; "not reachable": no patient's refit crosses it past its
    # Monte Carlo error.
    codes, _, _, model, idata, _, terms = glmm
    targets = ("sign", "significance", "sign_and_significance")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = bayesij.audit(
            idata, marginal_log_lik=terms, quantities=["b0", "b1"], settings={"targets": targets}
        )
        bare = bayesij.audit(idata, quantities=["b0", "b1"], settings={"targets": targets})
    for key, result in report.amip.items():  # the GLMM recovered from the draws: the same
        assert (bare.amip[key].answer, bare.amip[key].drop_ids) == (
            result.answer,
            result.drop_ids,
        )
    backend = refit.PyMCBackend(model, draws=1000, tune=500, chains=2)
    refits = {}
    for g in range(N_GROUPS):
        weights = np.ones(codes.size)
        weights[codes == g] = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refits[g] = backend.fit(weights)
    decided = 0
    for (quantity, _), result in report.amip.items():
        sign = {"mean": 0, "lower end": -1, "upper end": 1}[result.metric]
        before = np.sign(result.original_value)
        ends = {}
        for g, post in refits.items():
            draws = post.quantities.sel(quantity=quantity).values.ravel()
            mcse = draws.std() / np.sqrt(draws.size / 4)  # ESS at least a quarter of S
            ends[g] = (draws.mean() + sign * 1.96 * draws.std(), 2 * mcse)
        if result.answer == "reached":
            (g,) = [int(str(label).removeprefix("p")) for label in result.drop_ids]
            assert np.sign(ends[g][0]) != before, (quantity, result.target, g, ends[g])
        if result.answer == "not reachable":
            assert all(before * end > -margin for end, margin in ends.values()), (
                quantity,
                result.target,
            )
        decided += result.answer != "undetermined"
    assert decided >= 4, {key: r.answer for key, r in report.amip.items()}
