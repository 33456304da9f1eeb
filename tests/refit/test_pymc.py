"""refit.PyMCBackend: the weighted log density is exactly sum_n w_n log p(y_n | theta) plus
the prior, and an AMIP set of a PyMC regression is verified by a real PyMC refit."""

import numpy as np
import pytest

import bayesij
from bayesij import refit

pm = pytest.importorskip("pymc", reason="PyMC is sampled in the Python 3.12 environment")


def _regression(n=60, seed=8):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.5 + 0.25 * x + rng.normal(size=n)
    x[:3] = [3.5, 3.8, 4.1]  # three high-leverage points pull the slope down
    y[:3] = [-2.0, -2.5, -3.0]
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
    seeded from the weights, gives there the refits it gives here."""
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
    for other in (pooled, on_dask):
        assert other.failures.empty
        np.testing.assert_allclose(other.table()["exact"], here.table()["exact"], rtol=1e-10)
