"""loo_influence against arviz-stats 1.3's ``loo_influence`` on the same fit, and against
the exact leave-one-out posterior mean of a conjugate normal model."""

import warnings

import numpy as np
import pytest

import bayesij
from peers import ARVIZ_1, from_dict

RNG = np.random.default_rng(11)
N = 24
Y = np.r_[RNG.normal(size=N - 1), 5.0]  # an outlier last
PRIOR_SD = 10.0


def _normal_mean_fit(n_chains=4, n_draws=1000, seed=3):
    """Exact posterior draws of a normal mean (sd 1, prior N(0, 10^2)), the log-likelihood
    and posterior predictive draws, as an ArviZ container of the installed generation."""
    rng = np.random.default_rng(seed)
    precision = N + PRIOR_SD**-2
    mu = rng.normal(Y.sum() / precision, precision**-0.5, size=(n_chains, n_draws))
    log_lik = -0.5 * (Y - mu[..., None]) ** 2 - 0.5 * np.log(2 * np.pi)
    y_rep = mu[..., None] + rng.normal(size=(n_chains, n_draws, N))
    fit = from_dict(
        posterior={"mu": mu, "sigma_rep": np.exp(0.1 * mu)},
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": y_rep},
        observed_data={"y": Y},
    )
    return fit, mu, precision


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def test_the_mean_shift_is_the_exact_leave_one_out_change_over_the_posterior_sd():
    # Leaving y_n out, the posterior mean is (sum y - y_n) / (precision - 1), in closed
    # form; the shift estimates |that - mean| / sd, within its Monte Carlo error.
    fit, mu, precision = _normal_mean_fit()
    shift, k = bayesij.loo_influence(fit, quantities="mu", group="posterior")
    exact = np.abs((Y.sum() - Y) / (precision - 1) - Y.sum() / precision) * np.sqrt(precision)
    table = _quiet(bayesij.loo_expectation, fit, np.broadcast_to(mu[..., None], (*mu.shape, N)))
    error = table["mcse"].to_numpy() * np.sqrt(precision)
    assert np.all(np.abs(shift["mu"].to_numpy() - exact) <= 4 * error + 0.02)
    assert int(shift["mu"].to_numpy().argmax()) == N - 1
    assert (k["mu"] < 0.7).all()


def test_the_first_order_shift_is_the_influence_score():
    # |psi_n| / sd is the shift's first order: near it for ordinary points, below the
    # PSIS shift's own linearisation error elsewhere.
    fit, mu, _ = _normal_mean_fit()
    shift, _ = bayesij.loo_influence(fit, quantities="mu", group="posterior")
    psi = bayesij.influence(fit, quantities=["mu"]).sel(quantity="mu")["psi"].to_numpy()
    first = np.abs(psi) / mu.std()
    ordinary = np.arange(N - 1)
    np.testing.assert_allclose(shift["mu"].to_numpy()[ordinary], first[ordinary], atol=0.02)


def test_quantile_shifts_are_mean_absolute_and_unstandardised():
    fit, mu, _ = _normal_mean_fit()
    shift, _ = bayesij.loo_influence(
        fit, quantities="mu", group="posterior", kind="quantile", prob=[0.25, 0.75]
    )
    table = _quiet(
        bayesij.loo_expectation,
        fit,
        np.broadcast_to(mu[..., None], (*mu.shape, N)),
        kind="quantile",
        prob=[0.25, 0.75],
    )
    full = np.quantile(mu, [0.25, 0.75])
    by_hand = np.abs(table["value"].to_numpy() - full).mean(axis=1)
    np.testing.assert_allclose(shift["mu"].to_numpy(), by_hand, rtol=1e-12)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats needs ArviZ 1.x (Python >= 3.12)")
@pytest.mark.parametrize("kind", ["mean", "median", "sd", "var", "octiles"])
@pytest.mark.parametrize("group", ["posterior", "posterior_predictive"])
def test_loo_influence_equals_arviz_stats(kind, group):
    from arviz_stats import loo_influence

    fit, *_ = _normal_mean_fit()
    names = {"var_names": "mu"} if group == "posterior" else {}
    theirs, their_k = _quiet(loo_influence, fit, group=group, kind=kind, **names)
    ours, our_k = bayesij.loo_influence(
        fit,
        quantities="mu" if group == "posterior" else None,
        group=group,
        kind=kind,
        convention="arviz-stats",
    )
    column = "mu" if group == "posterior" else "y"
    np.testing.assert_allclose(ours[column], _values(theirs), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(our_k[column], _values(their_k), rtol=1e-8)


def _values(result) -> np.ndarray:
    """arviz-stats' shift or k-hat: a DataArray, or a Dataset of one variable (its k-hat of
    a posterior variable is named after the log-likelihood)."""
    if hasattr(result, "data_vars"):
        (result,) = result.data_vars.values()
    return result.values
