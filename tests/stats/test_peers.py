"""One switch for a peer's conventions (bayesij.stats.peers): under each, PSIS-LOO equals
that peer's own answer on the same draws: R loo's saved values (tests/reference), ArviZ 0.23
or arviz-stats computed in the test, on ArviZ's example fit and on a PyMC fit sampled here."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij.stats.peers import CONVENTIONS
from peers import ARVIZ_1, REFERENCE, from_dict, load_example, r_log_lik


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def _peer_loo(data):
    """The installed peer's PSIS-LOO with its own defaults: (elpd_i, pareto_k, elpd, se, p)."""
    if ARVIZ_1:
        import arviz_stats

        r = _quiet(arviz_stats.loo, data, pointwise=True)
        return r.elpd_i.values.ravel(), r.pareto_k.values.ravel(), r.elpd, r.se, r.p
    import arviz as az

    r = _quiet(az.loo, data, pointwise=True)
    return r.loo_i.values.ravel(), r.pareto_k.values.ravel(), r.elpd_loo, r.se, r.p_loo


PEER = "arviz-stats" if ARVIZ_1 else "ArviZ 0.23"


def _assert_equal_to_peer(data):
    elpd_i, pareto_k, elpd, se, p = _peer_loo(data)
    ours = _quiet(bayesij.loo, data, convention=PEER)
    np.testing.assert_allclose(ours.pointwise["elpd_loo"], elpd_i, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.pointwise["pareto_k"], pareto_k, rtol=0, atol=1e-12)
    np.testing.assert_allclose([ours.elpd, ours.se, ours.p_loo], [elpd, se, p], rtol=1e-12)
    return ours


def test_the_installed_peer_s_convention_gives_its_loo_on_its_example_fit():
    ours = _assert_equal_to_peer(load_example("centered_eight"))
    default = _quiet(bayesij.loo, load_example("centered_eight"))
    assert not np.allclose(default.pointwise["pareto_k"], ours.pointwise["pareto_k"])


@pytest.mark.slow
def test_the_installed_peer_s_convention_gives_its_loo_on_a_pymc_fit():
    pm = pytest.importorskip("pymc", reason="CI samples PyMC in the Python 3.12 environment")
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(6), 8)
    x = rng.normal(size=groups.size)
    y = 1.0 + 0.5 * x + rng.normal(0, 0.7, 6)[groups] + rng.standard_t(3, size=groups.size)
    with pm.Model(coords={"group": np.arange(6), "obs": np.arange(y.size)}):
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfNormal("tau", 1)
        z = pm.Normal("z", 0, 1, dims="group")
        beta = pm.Normal("beta", 0, 2)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", mu + tau * z[groups] + beta * x, sigma, observed=y, dims="obs")
        data = _quiet(
            pm.sample,
            500,
            tune=500,
            chains=4,
            cores=1,
            random_seed=5,
            progressbar=False,
            idata_kwargs={"log_likelihood": True},
        )
    _assert_equal_to_peer(data)


@pytest.mark.parametrize("name", ["reference", "heavy"])
def test_the_r_loo_convention_gives_r_loo_s_values(name):
    pointwise = pd.read_csv(REFERENCE / f"r_loo_psis_{name}_pointwise.csv")
    estimates = pd.read_csv(REFERENCE / f"r_loo_psis_{name}_estimates.csv").set_index("quantity")
    ours = _quiet(bayesij.loo, r_log_lik(name), convention="R loo 2.5")
    np.testing.assert_allclose(ours.pointwise["elpd_loo"], pointwise["elpd_loo"], rtol=1e-10)
    np.testing.assert_allclose(ours.pointwise["pareto_k"], pointwise["pareto_k"], rtol=1e-9)
    np.testing.assert_allclose(ours.se, estimates.loc["elpd_loo", "se"], rtol=1e-10)  # sqrt(N) sd
    assert ours.ddof == 1


def test_an_option_given_explicitly_overrides_the_convention():
    log_lik = r_log_lik("reference")
    r_loo = bayesij.loo(log_lik, convention="R loo")
    with_ddof_0 = bayesij.loo(log_lik, convention=bayesij.PsisOptions("R loo", ddof=0))
    n = log_lik.shape[2]
    np.testing.assert_allclose(with_ddof_0.se, r_loo.se * np.sqrt((n - 1) / n), rtol=1e-12)
    floor = bayesij.loo(log_lik, convention=bayesij.PsisOptions("R loo", tail_rule="floor"))
    assert floor.tail_rule == "floor"


def test_conventions_are_named_and_checked():
    assert set(CONVENTIONS) == {
        "bayesij",
        "R loo",
        "R loo 2.10",
        "R loo 2.5",
        "arviz-stats",
        "ArviZ 0.23",
    }
    assert CONVENTIONS["R loo"] == CONVENTIONS["R loo 2.10"]  # the newest R loo
    log_lik = r_log_lik("reference")
    with pytest.raises(ValueError, match=r"^convention: found 'loo'; expected one of"):
        bayesij.loo(log_lik, convention="loo")
    # An array has no posterior draws to take ArviZ's r_eff from.
    with pytest.raises(ValueError, match=r"convention: found 'arviz-stats' for a log-likeli"):
        bayesij.loo(log_lik, convention="arviz-stats")
    given = bayesij.loo(log_lik, convention=bayesij.PsisOptions("arviz-stats", r_eff=0.8))
    assert given.tail_rule == "floor" and np.all(given.pointwise["r_eff"] == 0.8)
    default = bayesij.loo(log_lik)
    same = bayesij.loo(log_lik, convention="bayesij")
    pd.testing.assert_frame_equal(default.pointwise, same.pointwise)


def test_a_lazy_log_likelihood_needs_r_eff_for_arviz_s_convention():
    log_lik = r_log_lik("reference")
    dask = pytest.importorskip("dask.array")
    lazy = from_dict(
        posterior={"mu": np.zeros(log_lik.shape[:2])},
        log_likelihood={"y": dask.from_array(log_lik, chunks=(4, 250, 10))},
    )
    with pytest.raises(ValueError, match=r"convention: found 'arviz-stats' with a lazy"):
        bayesij.loo(lazy, convention="arviz-stats")


# ------------------------------------------------------------------- one settings object
def test_a_convention_s_rules_are_known_before_any_draw_is_read():
    """``psis_rules`` reads no draws: the r_eff rule is named, an r_eff given is kept as
    given (the rule applied to draws: ``tests/stats/test_r_loo_2_10.py``)."""
    from bayesij.stats.peers import psis_rules

    rules = psis_rules("R loo")
    assert (rules.tail_rule, rules.ties, rules.r_eff, rules.ddof) == ("ceil", "position", None, 1)
    assert (rules.r_eff_rule, rules.convention) == ("split", "R loo")
    assert psis_rules(None).r_eff_rule == "chains" and psis_rules("arviz-stats").r_eff_rule == (
        "posterior"
    )
    assert psis_rules(bayesij.PsisOptions("R loo", r_eff=0.5)).r_eff == 0.5


def test_a_name_is_short_for_its_options_and_options_override_one_rule():
    """``convention="R loo"`` is ``PsisOptions("R loo")``; overriding its SE divisor changes
    only the SE, by exactly sqrt(N / (N - 1)) against R's sd (elpd and k-hat untouched)."""
    log_lik = r_log_lik("reference")
    named = bayesij.loo(log_lik, convention="R loo")
    spelled = bayesij.loo(log_lik, convention=bayesij.PsisOptions("R loo"))
    pd.testing.assert_frame_equal(named.pointwise, spelled.pointwise, check_exact=True)
    r_but_ddof_0 = bayesij.loo(log_lik, convention=bayesij.PsisOptions("R loo", ddof=0))
    n = log_lik.shape[2]
    pd.testing.assert_frame_equal(named.pointwise, r_but_ddof_0.pointwise, check_exact=True)
    np.testing.assert_allclose(named.se, r_but_ddof_0.se * np.sqrt(n / (n - 1)), rtol=1e-12)
    assert repr(bayesij.PsisOptions("R loo", ddof=0)) == "PsisOptions(convention='R loo', ddof=0)"
    with pytest.raises(ValueError, match=r"^convention: found a dict; expected None, a conv"):
        bayesij.loo(log_lik, convention={"ddof": 1})


def test_linearity_follows_the_convention_it_is_given():
    """linearity hard-coded the ceil tail rule; now its PSIS changes are the array kernel's
    under the options given (floor and ceil give different k-hats on these draws)."""
    from bayesij.array.linearity import leave_out_changes

    rng = np.random.default_rng(3)
    y = np.r_[rng.normal(size=29), 6.0]  # an outlier: a heavy tail for its ratios
    mu = y.mean() + rng.normal(size=(4, 250, 1)) / np.sqrt(30)
    post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    for rule in ("ceil", "floor"):
        ours = bayesij.linearity(post, convention=bayesij.PsisOptions(tail_rule=rule, r_eff=1.0))
        kernel = leave_out_changes(mu, -0.5 * (y - mu) ** 2, r_eff=1.0, tail_rule=rule)
        np.testing.assert_allclose(ours.pareto_k.to_numpy(), kernel.pareto_k, rtol=1e-12)
        np.testing.assert_allclose(ours.delta_is.to_numpy(), kernel.delta_is, rtol=1e-12)
    floor = bayesij.linearity(post, convention=bayesij.PsisOptions(tail_rule="floor"))
    ceil = bayesij.linearity(post)
    assert not np.allclose(floor.pareto_k, ceil.pareto_k)


def test_linearity_follows_the_tie_rule_it_is_given():
    """Repeated draws (a chain that sticks, each state four times) put ties at the tail
    cutoff: linearity's PSIS changes follow the options' tie rule, as the kernel's."""
    from bayesij.array.linearity import leave_out_changes

    rng = np.random.default_rng(5)
    y = np.r_[rng.normal(size=29), 5.0]
    mu = np.repeat(y.mean() + rng.normal(size=(4, 50, 1)) / np.sqrt(30), 4, axis=1)
    log_lik = -0.5 * (y - mu) ** 2
    post = bayesij.from_arrays(mu, log_lik, quantity_names=["mu"])
    found = {}
    for ties in ("above", "position"):
        options = bayesij.PsisOptions(ties=ties, r_eff=1.0)
        found[ties] = _quiet(bayesij.linearity, post, convention=options)
        kernel = leave_out_changes(mu, log_lik, r_eff=1.0, ties=ties)
        np.testing.assert_allclose(found[ties].delta_is.to_numpy(), kernel.delta_is, rtol=1e-12)
    assert not np.allclose(found["above"].pareto_k, found["position"].pareto_k)
