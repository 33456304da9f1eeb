"""The PyStan adapter on a real Stan fit (compiled once, cached by httpstan): chains, draws,
names, the log-likelihood and the selection of quantities."""

import numpy as np
import pytest

import bayesij
from bayesij.refit.stan import build_model

pytestmark = pytest.mark.stan


def test_from_pystan_keeps_chains_draws_and_names(pystan_fit):
    fit, data = pystan_fit
    post = bayesij.from_pystan(fit)
    assert post.quantity_names == ["alpha", "beta[1]", "beta[2]", "sigma"]
    assert post.obs_names == list(range(1, data["N"] + 1))
    assert (post.n_chains, post.log_lik.sizes["draw"]) == (3, 200)
    # fit._draws is PyStan's own (column, draw, chain) storage: read it independently.
    columns = list(fit.sample_and_sampler_param_names) + list(fit.constrained_param_names)
    raw = np.asarray(fit._draws)
    for name, column in [("beta[2]", "beta.2"), ("sigma", "sigma")]:
        expected = raw[columns.index(column)].T  # (chain, draw)
        np.testing.assert_array_equal(post.quantities.sel(quantity=name).values, expected)
    np.testing.assert_array_equal(post.log_lik.sel(obs=7).values, raw[columns.index("log_lik.7")].T)


def test_log_lik_is_the_normal_density_of_the_data(pystan_fit):
    fit, data = pystan_fit
    post = bayesij.from_pystan(fit)
    q = post.quantities
    mu = q.sel(quantity="alpha").values[..., None] + (
        q.sel(quantity="beta[1]").values[..., None] * data["X"][:, 0]
        + q.sel(quantity="beta[2]").values[..., None] * data["X"][:, 1]
    )
    sigma = q.sel(quantity="sigma").values[..., None]
    expected = -0.5 * ((data["y"] - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(post.log_lik.values, expected, rtol=1e-6, atol=1e-8)


def test_from_pystan_selects_quantities(pystan_fit):
    fit, _ = pystan_fit
    assert bayesij.from_pystan(fit, quantities=["beta"]).quantity_names == ["beta[1]", "beta[2]"]
    assert bayesij.from_pystan(fit, quantities="beta[2]").quantity_names == ["beta[2]"]
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'gamma'"):
        bayesij.from_pystan(fit, quantities=["gamma"])
    with pytest.raises(ValueError, match=r"log_lik: found no variable named 'll'"):
        bayesij.from_pystan(fit, log_lik="ll")


def test_a_varying_intercept_fit_read_by_name_has_its_group_effects_local():
    """A real PyStan fit of stan_models/varying_intercept.stan (12 groups of 5,
    non-centred: z and alpha = mu + tau z) read by name, no group index: the
    log-likelihood tells that z and alpha are one element per group, so the default audit
    is of mu, tau, beta and sigma (it was of all 28 elements), and the heading says how to
    pass the groups."""
    pytest.importorskip("stan")
    import warnings

    from bayesij.stan_models import example_data, stan_code

    data = example_data("varying_intercept", n=60, seed=1)
    model = build_model(stan_code("varying_intercept"), data=data, random_seed=1)
    fit = model.sample(num_chains=4, num_samples=250, num_warmup=300)
    post = bayesij.from_pystan(fit)
    units = bayesij.read(post).units
    assert units.local_variables == {"z", "alpha"} and not units.grouped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(post, settings={"targets": ("sign",), "amip": False})
    assert audit.quantities == ["mu", "tau", "beta[1]", "sigma"]
    assert "groups= / --groups" in audit.heading()
    grouped = bayesij.read(post, groups=data["g"]).units
    assert grouped.grouped and grouped.n_units == 12
