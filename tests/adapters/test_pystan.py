"""The PyStan adapter on a real Stan fit (compiled once, cached by httpstan): chains, draws,
names, the log-likelihood and the selection of quantities."""

import numpy as np
import pytest

import bayesij

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
