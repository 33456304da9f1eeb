"""PyStanDensity's integrated group terms on a real PyStan fit of the shipped
varying-intercept program (12 groups of 5, non-centred ``alpha = mu + tau z``), against
the normal hierarchy's closed form, and through loo_integrated and the audit's backend."""

import warnings

import numpy as np
import pytest

import bayesij
from bayesij import refit
from bayesij.array.hierarchy import normal_group_log_lik
from bayesij.refit import stan_density
from bayesij.refit.stan import build_model

#: A first (uncached) PyStan build can leave a file of httpstan's open until collected; as
#: an unraisable ResourceWarning it would fail whichever test the collection lands in.
pytestmark = pytest.mark.filterwarnings(
    "ignore:unclosed file:ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(scope="module")
def varying_intercept():
    pytest.importorskip("stan")
    from bayesij.stan_models import example_data, stan_code

    data = example_data("varying_intercept", n=60, seed=1)
    model = build_model(stan_code("varying_intercept"), data=data, random_seed=1)
    fit = model.sample(num_chains=2, num_samples=300, num_warmup=300)
    return bayesij.from_pystan(fit), data


def _closed_form(post, data) -> np.ndarray:
    """log N(y_g | mu + X beta, sigma^2 I + tau^2 11') of each group at each draw."""
    draws = {n: post.quantities.sel(quantity=n).values for n in ("mu", "tau", "sigma", "beta[1]")}
    mean = draws["mu"][..., None] + draws["beta[1]"][..., None] * data["X"][:, 0]
    return normal_group_log_lik(data["y"] - mean, data["g"] - 1, draws["tau"], draws["sigma"])


@pytest.mark.stan
def test_the_integrated_terms_of_a_stan_hierarchy_equal_the_normal_closed_form(
    varying_intercept,
):
    post, data = varying_intercept
    terms = refit.PyStanDensity("varying_intercept", data).group_log_lik(post, "z")
    assert terms.dims == ("chain", "draw", "z_dim_0") and terms.shape == (2, 300, 12)
    assert list(terms["z_dim_0"].values) == [str(j) for j in range(1, 13)]
    np.testing.assert_allclose(terms.values, _closed_form(post, data), rtol=1e-10, atol=1e-10)


@pytest.mark.stan
def test_loo_over_a_stan_programs_groups_integrated_equals_arviz_on_the_closed_form(
    varying_intercept,
):
    from tests.helpers.peers import ARVIZ_1, from_dict, peer_loo

    post, data = varying_intercept
    density = refit.PyStanDensity("varying_intercept", data)
    peer = bayesij.PsisOptions("arviz-stats" if ARVIZ_1 else "ArviZ 0.23", r_eff=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.loo_integrated(post, density, groups=data["g"], convention=peer)
    closed = _closed_form(post, data)
    expected = peer_loo(
        from_dict(posterior={"m": np.zeros(closed.shape[:2])}, log_likelihood={"y": closed}),
        reff=1.0,
    )
    assert result.integrated == "z" and result.n_units == 12
    assert result.elpd == pytest.approx(float(expected.elpd), abs=1e-8)
    np.testing.assert_allclose(result.pointwise["elpd_loo"], expected.elpd_i, atol=1e-8)
    assert "pareto_k_conditional" in result.pointwise
    # integrating the group's effect out removes what made each group's k-hat high
    assert result.pointwise["pareto_k"].max() < result.pointwise["pareto_k_conditional"].max()


@pytest.mark.stan
@pytest.mark.parametrize("holder", ["backend", "grad_log_posterior"])
def test_the_audit_given_a_pystan_backend_judges_the_ij_over_integrated_groups(
    varying_intercept, holder
):
    """The model's backend, or its density as grad_log_posterior, integrates each group's
    effect out: the verdict reads the integrated terms; without either it names them."""
    post, data = varying_intercept
    model = {
        "backend": refit.PyStanBackend("varying_intercept", data, num_chains=2, num_samples=300),
        "grad_log_posterior": refit.PyStanDensity("varying_intercept", data),
    }[holder]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = {"groups": data["g"], "settings": {"amip": False}}
        audit = bayesij.audit(post, **{holder: model}, **options)
        bare = bayesij.audit(post, **options)
    sentences = " ".join(audit.summary())
    assert "PSIS-LOO over the groups' integrated log-likelihoods" in sentences
    assert "IJ over the groups' integrated log-likelihoods" in sentences
    assert "marginal_log_lik" not in sentences
    assert "integrated out (marginal_log_lik=)" in " ".join(bare.summary())


@pytest.mark.stan
@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("alpha", r"variable: found 'alpha'; expected a vector in the Stan program's parameters"),
        ("sigma", r"variable: found 'sigma'; .*one element per group \(\['z'\]\)"),
        ("beta", r"variable: found 'beta'; expected a vector"),  # one element: global
    ],
)
def test_a_variable_that_is_no_group_effect_is_refused(varying_intercept, variable, message):
    post, data = varying_intercept
    with pytest.raises(ValueError, match=message):
        refit.PyStanDensity("varying_intercept", data).group_log_lik(post, variable)


@pytest.mark.stan
def test_a_missing_log_lik_is_refused(varying_intercept):
    post, data = varying_intercept
    with pytest.raises(ValueError, match=r"log_lik: found 'll'; expected a generated quantity"):
        refit.PyStanDensity("varying_intercept", data).group_log_lik(post, "z", log_lik="ll")


def test_a_prior_whose_gradient_is_not_linear_is_refused(monkeypatch):
    """Student-t effects: the gradient of the log prior, -(nu + 1) a / (nu + a^2), is not
    linear in a; a normal's is, and gives back its mean and sd."""
    upars = np.array([[0.3, -1.2, 0.1], [0.5, 0.2, -0.7]])
    positions = np.array([[0], [2]])  # two groups, one effect each

    def normal(model, moved):
        return -(moved - 0.4) / 1.5**2

    monkeypatch.setattr(stan_density, "_log_prob_grads", normal)
    mean, sd = stan_density._normal_prior(None, upars, positions, ["u"])
    np.testing.assert_allclose(mean, 0.4)
    np.testing.assert_allclose(sd, 1.5)

    def student_t(model, moved):
        return -4.0 * moved / (3.0 + moved**2)

    monkeypatch.setattr(stan_density, "_log_prob_grads", student_t)
    with pytest.raises(ValueError, match=r"variable: found 'u', whose prior .* is not normal"):
        stan_density._normal_prior(None, upars, positions, ["u"])


def test_correlated_effects_are_refused(monkeypatch):
    """An intercept and a slope whose prior is a bivariate normal with correlation: the
    gradient in one moves with the other, which independent normal terms cannot say."""
    upars = np.array([[0.3, -1.2, 0.1, 0.4], [0.5, 0.2, -0.7, 0.1]])
    positions = np.array([[0, 2], [1, 3]])  # two groups, (intercept, slope)
    precision = np.linalg.inv([[1.0, 0.6], [0.6, 1.0]])

    def bivariate(model, moved):
        effects = moved[:, positions]  # (S, G, 2)
        grads = np.zeros_like(moved)
        grads[:, positions] = -effects @ precision
        return grads

    monkeypatch.setattr(stan_density, "_log_prob_grads", bivariate)
    with pytest.raises(ValueError, match=r"variable: found 'a', whose prior is correlated"):
        stan_density._normal_prior(None, upars, positions, ["a", "s"])


INTERCEPT_AND_SLOPE = """
data {
  int<lower=1> N; int<lower=1> J; array[N] int<lower=1, upper=J> g;
  vector[N] x; vector[N] y; vector<lower=0>[N] weights;
}
parameters {
  real b0; real b1; real<lower=0> tau_a; real<lower=0> tau_s; real<lower=0> sigma;
  vector[J] z_a; vector[J] z_s;
}
model {
  vector[N] mu = b0 + tau_a * z_a[g] + (b1 + tau_s * z_s[g]) .* x;
  b0 ~ normal(0, 2); b1 ~ normal(0, 2); tau_a ~ normal(0, 1); tau_s ~ normal(0, 1);
  sigma ~ normal(0, 1); z_a ~ std_normal(); z_s ~ std_normal();
  target += dot_product(weights, -0.5 * square((y - mu) / sigma) - log(sigma));
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | b0 + tau_a * z_a[g[n]]
                                          + (b1 + tau_s * z_s[g[n]]) * x[n], sigma);
}
"""


@pytest.mark.stan
def test_an_intercept_and_a_slope_per_group_integrate_to_the_multivariate_normal():
    """Two non-centred effects per group (a Stan program of 6 groups of 4): the joint
    integral is the multivariate normal y_g ~ N(b0 + b1 x_g, sigma^2 I + tau_a^2 11'
    + tau_s^2 x_g x_g'), and loo_integrated integrates both, not the intercept alone."""
    pytest.importorskip("stan")
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(6)
    g = np.repeat(np.arange(6), 4) + 1
    x = rng.normal(size=24)
    y = rng.normal(1.0 + rng.normal(0, 0.7, 6)[g - 1] + (0.5 + rng.normal(0, 0.4, 6)[g - 1]) * x)
    data = {"N": 24, "J": 6, "g": g, "x": x, "y": y, "weights": np.ones(24)}
    model = build_model(INTERCEPT_AND_SLOPE, data=data, random_seed=1)
    post = bayesij.from_pystan(model.sample(num_chains=2, num_samples=40, num_warmup=200))
    density = refit.PyStanDensity(INTERCEPT_AND_SLOPE, data)
    terms = density.group_log_lik(post, ("z_a", "z_s"), n_nodes=4)
    q = {
        n: post.quantities.sel(quantity=n).values.ravel()
        for n in ("b0", "b1", "tau_a", "tau_s", "sigma")
    }
    flat = terms.values.reshape(-1, 6)
    for s in range(0, flat.shape[0], 7):
        for j in range(6):
            xs = x[g == j + 1]
            cov = (
                q["sigma"][s] ** 2 * np.eye(4)
                + q["tau_a"][s] ** 2
                + q["tau_s"][s] ** 2 * np.outer(xs, xs)
            )
            expected = multivariate_normal(q["b0"][s] + q["b1"][s] * xs, cov).logpdf(y[g == j + 1])
            assert flat[s, j] == pytest.approx(expected, rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.loo_integrated(post, density, groups=g)
    assert result.integrated == "z_a, z_s"
