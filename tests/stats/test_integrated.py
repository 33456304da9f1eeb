"""The integrated group terms' plumbing: which unit effect a density integrates, refusals
naming ``density``, and the terms paired with the units by label (the quadrature itself is
tested against SciPy and closed forms in tests/refit/test_pymc_groups.py)."""

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij
from bayesij.data.structure import marginal_columns
from bayesij.stats.integrated import group_terms, integrated_terms

TERMS = xr.DataArray(
    np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4),
    dims=("chain", "draw", "school"),
    coords={"school": ["a", "b", "c", "d"]},
)


class _Density:
    """Integrates only ``z``: ``ValueError`` for any other variable, as PyMCDensity
    refuses a variable it cannot integrate."""

    def group_log_lik(self, data, variable):
        if variable != "z":
            raise ValueError(f"variable: found {variable!r}")
        return TERMS


def test_the_first_unit_effect_the_density_integrates_is_taken():
    fit = SimpleNamespace(data=None, structure=SimpleNamespace(unit_effects=("u", "z")))
    terms, variable = integrated_terms(fit, _Density())
    assert variable == "z" and terms is TERMS
    assert integrated_terms(fit, object()) == (None, None)
    none = SimpleNamespace(data=None, structure=SimpleNamespace(unit_effects=("u",)))
    assert integrated_terms(none, _Density()) == (None, None)


def test_an_integration_that_fails_for_another_reason_is_not_read_as_no_effect():
    # Only a refusal of the variable moves on to the next effect; a log-likelihood that is
    # not finite is said as it is, not as "integrating none of the unit effects".
    class Failing:
        def group_log_lik(self, data, variable):
            raise ValueError("log_lik: found a log-likelihood that is not finite")

    fit = SimpleNamespace(data=None, structure=SimpleNamespace(unit_effects=("u", "z")))
    with pytest.raises(ValueError, match=r"^log_lik: found a log-likelihood that is not fin"):
        integrated_terms(fit, Failing())


def test_terms_are_paired_with_the_units_by_label():
    shuffled = marginal_columns(TERMS, ["c", "a", "d", "b"])
    np.testing.assert_array_equal(shuffled, TERMS.values[..., [2, 0, 3, 1]])
    # An array is laid out by the grouping's levels when it has one column per level.
    by_level = marginal_columns(TERMS.values, ["d", "a"], levels=["a", "b", "c", "d"])
    np.testing.assert_array_equal(by_level, TERMS.values[..., [3, 0]])
    with pytest.raises(ValueError, match=r"marginal_log_lik: found no term for the units \['e'\]"):
        marginal_columns(TERMS, ["a", "e"])


def test_a_fit_whose_units_are_observations_is_refused_by_name():
    log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(2, 50, 4))
    post = bayesij.from_arrays(np.zeros((2, 50, 1)), log_lik)
    with pytest.raises(ValueError, match="density: found a fit whose units are its observ"):
        group_terms(bayesij.read(post), _Density(), pd.RangeIndex(4))


def _normal_hierarchy_tree(seed=0, n_groups=6, per_group=5):
    """A normal hierarchy saved with its linear predictor ``eta = mu + u[g]`` (draws of
    mu, tau, sigma and the school effects u), its index in constant_data."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(n_groups), per_group)
    y = rng.normal(size=codes.size) + rng.normal(0, 1, n_groups)[codes]
    shape = (2, 150)
    mu, tau = rng.normal(0, 0.2, shape), rng.uniform(0.5, 1.5, shape)
    sigma = rng.uniform(0.8, 1.2, shape)
    u = rng.normal(0, 1, (*shape, n_groups)) * tau[..., None]
    eta = mu[..., None] + u[..., codes]
    log_lik = (
        -0.5 * ((y - eta) / sigma[..., None]) ** 2 - np.log(np.sqrt(2 * np.pi) * sigma)[..., None]
    )
    draws = ("chain", "draw")
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {
                    "mu": (draws, mu),
                    "tau": (draws, tau),
                    "sigma": (draws, sigma),
                    "u": ((*draws, "school"), u),
                    "eta": ((*draws, "obs"), eta),
                }
            ),
            "log_likelihood": xr.Dataset({"y": ((*draws, "obs"), log_lik)}),
            "observed_data": xr.Dataset({"y": ("obs", y)}),
            "constant_data": xr.Dataset({"school_idx": ("obs", codes)}),
        }
    )
    return tree, codes, y, mu, tau, sigma


def test_a_declared_normal_hierarchy_integrates_to_its_closed_form():
    from bayesij.array.hierarchy import normal_group_log_lik

    tree, codes, y, mu, tau, sigma = _normal_hierarchy_tree()
    density = bayesij.GlmDensity("normal", "eta", "u", "tau", mean="mu", sigma="sigma")
    centred = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma")
    ours = density.group_log_lik(tree)
    # u ~ N(0, tau) here: with mean="mu" the predictor less u plus mu counts mu twice, so
    # the closed form is of y - 2 mu; without it, of y - mu.
    np.testing.assert_allclose(
        ours.values, normal_group_log_lik(y - 2 * mu[..., None], codes, tau, sigma), rtol=1e-8
    )
    np.testing.assert_allclose(
        centred.group_log_lik(tree).values,
        normal_group_log_lik(y - mu[..., None], codes, tau, sigma),
        rtol=1e-8,
    )
    result = bayesij.loo_integrated(tree, centred)
    assert result.integrated == "u" and result.n_units == 6
    assert "pareto_k_conditional" in result.pointwise


def _in_the_installed_arviz(tree):
    """``tree`` as the installed ArviZ generation holds a fit: a DataTree with ArviZ 1.x,
    an InferenceData with ArviZ 0.23."""
    import arviz as az

    if int(az.__version__.split(".")[0]) >= 1:
        return tree
    return az.InferenceData(**{name: tree[name].to_dataset() for name in tree.children})


@pytest.mark.filterwarnings("ignore")  # these draws are no posterior's: every k-hat warns
def test_loo_integrated_is_psis_over_the_closed_form_terms():
    # a normal hierarchy's integrated terms in closed form (each school's observations
    # jointly normal): loo_integrated is PSIS-LOO over them, with the conditional terms'
    # k-hats beside, each observation's school as members, and log_jacobian added to each
    # school's elpd (p_loo and k-hat unchanged); in the installed ArviZ's container
    from bayesij.array.hierarchy import normal_group_log_lik

    tree, codes, y, mu, tau, sigma = _normal_hierarchy_tree()
    fit = _in_the_installed_arviz(tree)
    density = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma")
    result = bayesij.loo_integrated(fit, density)
    exact = bayesij.loo(normal_group_log_lik(y - mu[..., None], codes, tau, sigma))
    for column in ("elpd_loo", "p_loo", "pareto_k"):
        np.testing.assert_allclose(
            result.pointwise[column].to_numpy(), exact.pointwise[column].to_numpy(), rtol=1e-7
        )
    conditional = bayesij.loo(fit, groups="school_idx")
    np.testing.assert_array_equal(
        result.pointwise["pareto_k_conditional"], conditional.pointwise["pareto_k"]
    )
    np.testing.assert_array_equal(result.members.to_numpy().astype(int), codes)
    jacobian = np.linspace(-1.0, 1.0, codes.max() + 1)
    moved = bayesij.loo_integrated(fit, density, log_jacobian=jacobian)
    np.testing.assert_allclose(
        moved.pointwise["elpd_loo"] - result.pointwise["elpd_loo"], jacobian, atol=1e-12
    )
    np.testing.assert_array_equal(moved.pointwise["pareto_k"], result.pointwise["pareto_k"])
    np.testing.assert_allclose(moved.elpd - result.elpd, jacobian.sum(), atol=1e-9)


@pytest.mark.parametrize("family", ["poisson", "bernoulli", "binomial"])
def test_declared_glmms_integrate_as_scipy_does(family):
    from scipy.integrate import quad
    from scipy.stats import binom, norm, poisson

    tree, codes, _, mu, tau, _ = _normal_hierarchy_tree(seed=1)
    rng = np.random.default_rng(2)
    trials = rng.integers(1, 6, codes.size)
    eta = tree["posterior"]["eta"].values
    mean = np.exp(eta) if family == "poisson" else 1 / (1 + np.exp(-eta))
    if family == "poisson":
        y = rng.poisson(mean[0, 0]).astype(float)
    else:
        y = rng.binomial(trials if family == "binomial" else 1, mean[0, 0]).astype(float)
    tree["observed_data"] = xr.Dataset({"y": ("obs", y)})
    tree["constant_data"] = xr.Dataset(
        {"school_idx": ("obs", codes), "trials": ("obs", trials.astype(float))}
    )
    density = bayesij.GlmDensity(
        family, "eta", "u", "tau", trials="trials" if family == "binomial" else None
    )
    ours = density.group_log_lik(tree).values
    u = tree["posterior"]["u"].values
    for c, s, g in [(0, 0, 0), (1, 7, 3), (0, 99, 5)]:
        rows = codes == g
        base = eta[c, s, rows] - u[c, s, g]

        def integrand(a, base=base, rows=rows, sd=tau[c, s]):
            linear = base + a
            if family == "poisson":
                pmf = poisson.pmf(y[rows], np.exp(linear))
            else:
                pmf = binom.pmf(
                    y[rows], trials[rows] if family == "binomial" else 1, 1 / (1 + np.exp(-linear))
                )
            return np.prod(pmf) * norm.pdf(a, 0.0, sd)

        sd = tau[c, s]
        exact = np.log(quad(integrand, -12 * sd, 12 * sd, epsabs=0, epsrel=1e-12)[0])
        np.testing.assert_allclose(ours[c, s, g], exact, rtol=1e-6)


def test_a_declared_density_refuses_what_it_cannot_read():
    tree, *_ = _normal_hierarchy_tree()
    with pytest.raises(ValueError, match=r"^family: found 'gamma'"):
        bayesij.GlmDensity("gamma", "eta", "u", "tau")
    with pytest.raises(ValueError, match=r"^sigma: found None for the normal family"):
        bayesij.GlmDensity("normal", "eta", "u", "tau")
    with pytest.raises(ValueError, match=r"^trials: found None for the binomial family"):
        bayesij.GlmDensity("binomial", "eta", "u", "tau")
    density = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma")
    with pytest.raises(ValueError, match=r"^variable: found 'z'; expected the declared"):
        density.group_log_lik(tree, "z")
    swapped = bayesij.GlmDensity("normal", "u", "eta", "tau", sigma="sigma")
    with pytest.raises(ValueError, match=r"^density: found 'u' of 6 elements and 'eta' of 30"):
        swapped.group_log_lik(tree)
    with pytest.raises(ValueError, match=r"^density: found 'u' of 6 elements; expected a scalar"):
        bayesij.GlmDensity("normal", "eta", "u", "u", sigma="sigma").group_log_lik(tree)


def _slope_tree(seed=3, n_groups=5, per_group=4):
    """A normal hierarchy with varying intercepts u and slopes v (independent), saved with
    its predictor ``eta = mu + u[g] + (beta + v[g]) x``, the covariate in constant_data."""
    tree, codes, y, mu, tau, sigma = _normal_hierarchy_tree(seed, n_groups, per_group)
    rng = np.random.default_rng(seed + 10)
    x = rng.normal(size=codes.size)
    shape = mu.shape
    beta, tau_v = rng.normal(0.3, 0.1, shape), rng.uniform(0.3, 0.9, shape)
    v = rng.normal(size=(*shape, n_groups)) * tau_v[..., None]
    eta = tree["posterior"]["eta"].values + (beta[..., None] + v[..., codes]) * x
    draws = ("chain", "draw")
    posterior = (
        tree["posterior"]
        .to_dataset()
        .assign(
            beta=(draws, beta),
            tau_v=(draws, tau_v),
            v=((*draws, "school"), v),
            eta=((*draws, "obs"), eta),
        )
    )
    tree["posterior"] = posterior
    tree["constant_data"] = xr.Dataset({"school_idx": ("obs", codes), "x": ("obs", x)})
    return tree, codes, y, x, mu, beta, tau, tau_v, sigma


def test_a_declared_slope_integrates_jointly_to_the_normal_marginal():
    # With u ~ N(0, tau^2) and v ~ N(0, tau_v^2) independent, each school's observations
    # are jointly normal: mean mu + beta x, covariance sigma^2 I + tau^2 11' + tau_v^2 xx'.
    from scipy.stats import multivariate_normal

    tree, codes, y, x, mu, beta, tau, tau_v, sigma = _slope_tree()
    slope = bayesij.GlmSlope("v", "tau_v", "x")
    density = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma", slope=slope)
    assert density.declared == ("u", "v")
    ours = density.group_log_lik(tree).values
    for c, s in [(0, 0), (1, 42), (0, 149)]:
        for g in range(codes.max() + 1):
            rows = codes == g
            xg = x[rows]
            cov = (
                sigma[c, s] ** 2 * np.eye(rows.sum())
                + tau[c, s] ** 2
                + tau_v[c, s] ** 2 * np.outer(xg, xg)
            )
            exact = multivariate_normal.logpdf(y[rows], mu[c, s] + beta[c, s] * xg, cov)
            np.testing.assert_allclose(ours[c, s, g], exact, rtol=1e-8)
    # the intercept alone: the slope stays conditional (the one-effect closed form)
    from bayesij.array.hierarchy import normal_group_log_lik

    eta = tree["posterior"]["eta"].values
    u = tree["posterior"]["u"].values
    alone = density.group_log_lik(tree, "u").values
    np.testing.assert_allclose(
        alone, normal_group_log_lik(y - (eta - u[..., codes]), codes, tau, sigma), rtol=1e-8
    )
    result = bayesij.loo_integrated(tree, density)
    assert result.integrated == "u, v" and result.n_units == codes.max() + 1


def test_a_declared_bernoulli_slope_integrates_as_a_fine_grid_does():
    from scipy.stats import norm

    tree, codes, _, x, *_ = _slope_tree(seed=4)
    eta = tree["posterior"]["eta"].values
    y = np.random.default_rng(5).binomial(1, 1 / (1 + np.exp(-eta[0, 0]))).astype(float)
    tree["observed_data"] = xr.Dataset({"y": ("obs", y)})
    slope = bayesij.GlmSlope("v", "tau_v", "x")
    ours = bayesij.GlmDensity("bernoulli", "eta", "u", "tau", slope=slope).group_log_lik(tree)
    post = tree["posterior"]
    u, v, tau, tau_v = (post[k].values for k in ("u", "v", "tau", "tau_v"))
    grid = np.linspace(-1, 1, 801)
    for c, s, g in [(0, 0, 0), (1, 17, 3)]:
        rows = codes == g
        base = eta[c, s, rows] - u[c, s, g] - v[c, s, g] * x[rows]
        a = grid[:, None, None] * 8 * tau[c, s]
        b = grid[None, :, None] * 8 * tau_v[c, s]
        linear = base + a + b * x[rows]
        log_lik = (y[rows] * linear - np.logaddexp(0.0, linear)).sum(axis=-1)
        density = (
            np.exp(log_lik)
            * norm.pdf(a[..., 0], 0, tau[c, s])
            * norm.pdf(b[..., 0], 0, tau_v[c, s])
        )
        exact = np.log(np.trapezoid(np.trapezoid(density, b[0, :, 0], axis=1), a[:, 0, 0]))
        np.testing.assert_allclose(ours.values[c, s, g], exact, rtol=1e-6)


def test_a_declared_slope_refuses_what_it_cannot_read():
    tree, *_ = _slope_tree()
    with pytest.raises(ValueError, match=r"^slope: found a tuple; expected a bayesij.GlmSlope"):
        bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma", slope=("v", "tau_v", "x"))
    with pytest.raises(ValueError, match=r"^covariate: found 3"):
        bayesij.GlmSlope("v", "tau_v", 3)
    missing = bayesij.GlmDensity(
        "normal", "eta", "u", "tau", sigma="sigma", slope=bayesij.GlmSlope("v", "tau_v", "w")
    )
    with pytest.raises(ValueError, match=r"^slope: found a covariate 'w' the fit does not save"):
        missing.group_log_lik(tree)
    wrong = bayesij.GlmDensity(
        "normal", "eta", "u", "tau", sigma="sigma", slope=bayesij.GlmSlope("eta", "tau_v", "x")
    )
    with pytest.raises(ValueError, match=r"^slope: found 'eta' of 20 elements"):
        wrong.group_log_lik(tree)
    with pytest.raises(ValueError, match=r"^variable: found 'v'; expected the declared"):
        missing.group_log_lik(tree, "v")


def test_a_declared_slope_may_be_centred_or_non_centred():
    # The same fit saved as a centred slope vc = beta + v (its mean inside) and as a
    # non-centred one z * tau_v: the same terms as the plain declaration.
    tree, *_ = _slope_tree()
    post = tree["posterior"].to_dataset()
    draws = ("chain", "draw", "school")
    tree["posterior"] = post.assign(
        vc=(draws, (post["beta"] + post["v"]).values),
        zv=(draws, (post["v"] / post["tau_v"]).values),
    )
    eta = "eta"
    plain = bayesij.GlmDensity(
        "normal", eta, "u", "tau", sigma="sigma", slope=bayesij.GlmSlope("v", "tau_v", "x")
    ).group_log_lik(tree)
    for slope in (
        bayesij.GlmSlope("vc", "tau_v", "x", mean="beta"),
        bayesij.GlmSlope("zv", "tau_v", "x", multiplier="tau_v"),
    ):
        density = bayesij.GlmDensity("normal", eta, "u", "tau", sigma="sigma", slope=slope)
        np.testing.assert_allclose(density.group_log_lik(tree).values, plain.values, rtol=1e-10)


@pytest.fixture(scope="module")
def recovered_glmm_tree():
    """A non-centred Poisson GLMM's fit (12 patients of 5 visits; z drawn exactly given
    the globals under N(0, 1)) as PyMC saves it, and its patients' integrated terms by
    SciPy's Poisson log-pmf and the array-level quadrature."""
    from scipy.stats import poisson

    from bayesij.array.hierarchy import intercept_group_log_lik
    from tests.helpers.glmm_draws import as_tree, poisson_glmm

    codes, x, y, theta, z, log_lik = poisson_glmm(seed=4)
    fixed = (theta[:, [0]] + theta[:, [1]] * x).reshape(2, 1000, -1)
    expected = intercept_group_log_lik(
        lambda a: poisson.logpmf(y, np.exp(fixed + a)), codes, theta[:, 2].reshape(2, 1000)
    )
    terms = xr.DataArray(
        expected,
        dims=("chain", "draw", "patient"),
        coords={"patient": [f"p{g}" for g in range(12)]},
    )
    return as_tree(codes, y, theta, z, log_lik), terms


def _quiet_audit(tree, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesij.audit(tree, settings={"targets": ("sign",)}, **options)


def _assert_same_integrated(bare, given):
    """The audit given nothing read the same integrated terms as the one given them: the
    same IJ over the groups, the same leave-one-group-out, every IJ verdict over them."""
    np.testing.assert_allclose(
        bare.ij_integrated.variance_corrected, given.ij_integrated.variance_corrected, rtol=1e-8
    )
    np.testing.assert_allclose(
        bare.loo_integrated.pointwise["elpd_loo"],
        given.loo_integrated.pointwise["elpd_loo"],
        rtol=0,
        atol=1e-8,
    )
    assert (bare.comparison_table["why"] == "integrated").all()


def test_the_audit_integrates_a_glmm_recovered_from_its_draws_as_scipy_does(recovered_glmm_tree):
    # No model given: the audit recovers the Poisson GLMM from the log-likelihood's draws,
    # recognises z ~ N(0, 1) scaled by sd_u, and reads the same integrated terms as when
    # SciPy's are given: the same IJ over the patients, the same leave-one-patient-out.
    tree, terms = recovered_glmm_tree
    bare, given = _quiet_audit(tree), _quiet_audit(tree, marginal_log_lik=terms)
    words = "z ~ N(0, 1), entering as sd_u * z, of the Poisson GLMM recovered from the draws"
    assert bare.integrated_from == words and given.integrated_from == ""
    assert words in bare.heading() and "recovered" not in given.heading()
    _assert_same_integrated(bare, given)
    assert "(recovered from the draws)" in " ".join(bare.summary())
    for key, result in given.amip.items():
        assert (bare.amip[key].answer, bare.amip[key].n_drop) == (result.answer, result.n_drop)


def test_effects_drawn_under_another_prior_leave_the_conditional_terms_and_the_remedy():
    # z drawn under N(0, 2^2) where the log-likelihood is the same GLMM's: no candidate prior
    # satisfies Stein's identity, so nothing is integrated and the verdict names the remedy.
    from tests.helpers.glmm_draws import as_tree, poisson_glmm

    codes, _, y, theta, z, log_lik = poisson_glmm(seed=4, prior_sd_z=2.0)
    audit = _quiet_audit(as_tree(codes, y, theta, z, log_lik))
    assert audit.integrated_from == "" and audit.ij_integrated is None
    assert "integrated out (marginal_log_lik=" in " ".join(audit.summary())


def test_a_level_without_observations_is_left_out_of_the_recovered_terms(recovered_glmm_tree):
    # The posterior keeps a patient whose visits are not in the log-likelihood (a level of
    # the dim no observation indexes): the units are the observed patients, and their
    # recovered terms are SciPy's for them.
    tree, terms = recovered_glmm_tree
    kept = {"obs": slice(5, None)}  # patient p0's five visits dropped
    fewer = tree.map_over_datasets(lambda d: d.isel(kept) if "obs" in d.dims else d)
    audit = _quiet_audit(fewer)
    assert audit.integrated_from.startswith("z ~ N(0, 1)")
    assert list(audit.loo_integrated.pointwise.index) == [f"p{g}" for g in range(1, 12)]
    expected = bayesij.loo(terms.isel(patient=slice(1, None))).pointwise["elpd_loo"]
    np.testing.assert_allclose(audit.loo_integrated.pointwise["elpd_loo"], expected, atol=1e-8)


def test_the_audit_integrates_a_normal_hierarchy_whose_sds_are_fixed_in_the_model():
    # Measurement sds known to the model (no draws of them): the audit recovers the
    # residuals over them and integrates each group's effect out, reading the terms a
    # dense solve gives: the same IJ over the groups and leave-one-group-out.
    from tests.helpers.glmm_draws import as_tree, dense_normal_terms, fixed_sd_hierarchy

    codes, x, y, s, theta, z, log_lik = fixed_sd_hierarchy(seed=2)
    tree = as_tree(codes, y, theta, z, log_lik)
    expected = dense_normal_terms(y - theta[:, [0]] - theta[:, [1]] * x, codes, s, theta[:, 2])
    terms = xr.DataArray(
        expected.reshape(2, 1000, -1),
        dims=("chain", "draw", "patient"),
        coords={"patient": [f"p{g}" for g in range(z.shape[1])]},
    )
    bare, given = _quiet_audit(tree), _quiet_audit(tree, marginal_log_lik=terms)
    assert bare.integrated_from == (
        "z ~ N(0, 1), entering as sd_u * z, of the normal hierarchy (residual sd fixed in "
        "the model) recovered from the draws"
    )
    _assert_same_integrated(bare, given)
