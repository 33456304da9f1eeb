"""Approximate LOO: against ArviZ (in the run), R loo (saved values) and exact LOO of a
conjugate model; equivalences, properties, bad input."""

import warnings
from dataclasses import replace
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import bayesij
from bayesij.array import numeric
from bayesij.array.psis import tail_length
from conjugate import ConjugateNormal, exact_loo_log_predictive, heteroskedastic_regression
from peers import (
    ARVIZ_1,
    LOO_OPTIONS,
    from_dict,
    load_example,
    log_lik_values,
    peer_loo,
    psis_log_weights,
    r_log_lik,
)

DATA = Path(__file__).parents[1] / "reference"


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def _heavy_tailed_draws(seed, n_obs=300):
    rng = np.random.default_rng(seed)
    mu = rng.standard_t(3, size=(4, 500, 1)) * np.linspace(0.05, 3, n_obs)
    y = rng.standard_t(2, size=n_obs) * 3
    return -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)


def _idata(log_lik):
    return from_dict(posterior={"m": log_lik[..., 0]}, log_likelihood={"y": log_lik})


# ----------------------------------------------------------------------------- ArviZ
@pytest.mark.parametrize("source", ["centered_eight", "heavy0", "heavy1"])
def test_psis_equals_arviz_to_1e_10(source):
    """ArviZ 0.23's az.loo, or arviz-stats 1.x's loo, with the options that reproduce it
    (peers.LOO_OPTIONS: tail rule, ties, SE convention) and the same r_eff."""
    if source == "centered_eight":
        idata = load_example(source)
        log_lik = log_lik_values(idata)
    else:
        log_lik = _heavy_tailed_draws(int(source[-1]))
        idata = _idata(log_lik)
    theirs = peer_loo(idata, reff=0.8)
    ours = _quiet(bayesij.loo, log_lik, convention=replace(LOO_OPTIONS, r_eff=0.8))
    k_ours, k_theirs = ours.pointwise["pareto_k"].to_numpy(), theirs.pareto_k
    elpd_ours = ours.pointwise["elpd_loo"].to_numpy()
    compared = np.ones(k_ours.size, dtype=bool)
    if ARVIZ_1:
        # arviz-stats 1.3 returns NaN where a column's log-likelihood spans more than about
        # 700 nats (exp overflows; R loo, ArviZ 0.23 and bayesij stay finite), and drifts
        # where k-hat is far beyond 1 (k-hat 57.4 where the others give 60.4): compare
        # where it is finite with k-hat below 10 (all of eight schools, about a third of
        # these deliberately extreme heavy-tailed columns).
        spread = np.ptp(log_lik.reshape(-1, log_lik.shape[-1]), axis=0)
        assert np.all(spread[~np.isfinite(theirs.elpd_i)] > 700)
        compared = np.isfinite(theirs.elpd_i) & (k_theirs < 10)
        assert compared.sum() >= min(80, k_ours.size)
    np.testing.assert_allclose(elpd_ours[compared], theirs.elpd_i[compared], rtol=1e-10, atol=1e-10)
    assert np.array_equal(np.isinf(k_ours[compared]), np.isinf(k_theirs[compared]))
    finite = np.isfinite(k_theirs) & compared
    np.testing.assert_allclose(k_ours[finite], k_theirs[finite], rtol=1e-10, atol=1e-10)
    if compared.all():
        np.testing.assert_allclose(
            [ours.elpd, ours.se, ours.p_loo], [theirs.elpd, theirs.se, theirs.p], rtol=1e-10
        )
    if source != "centered_eight":
        assert (k_ours > 1).sum() > 10  # the smoothing and the inf cases are exercised


def test_ties_follow_arviz_by_default_and_r_loo_on_request():
    """Repeated MCMC draws (divergences in eight schools) tie with the tail cutoff at
    r_eff = 0.8: ArviZ fits only the draws above it, R loo the M largest by position."""
    idata = load_example("centered_eight")
    log_lik = log_lik_values(idata).reshape(-1, 8)
    cutoff_ties = [
        (np.sort(-log_lik[:, n]) == np.sort(-log_lik[:, n])[-151]).sum() for n in range(8)
    ]
    assert max(cutoff_ties) > 1
    above = _quiet(bayesij.loo, idata, convention=bayesij.PsisOptions(r_eff=0.8)).pointwise[
        "pareto_k"
    ]
    position = _quiet(
        bayesij.loo, idata, convention=bayesij.PsisOptions(r_eff=0.8, ties="position")
    ).pointwise["pareto_k"]
    tied = np.array(cutoff_ties) > 1
    assert np.all(above[~tied].to_numpy() == position[~tied].to_numpy())
    assert np.all(above[tied].to_numpy() != position[tied].to_numpy())


# ----------------------------------------------------------------------------- R loo
@pytest.mark.parametrize("name", ["reference", "heavy"])
def test_psis_equals_r_loo_with_default_r_eff(name):
    """Values saved by tests/data/r_loo_reference.R (R loo 2.5.1, relative_eff from chains)."""
    log_lik = r_log_lik(name)
    expected = pd.read_csv(DATA / f"r_loo_psis_{name}_pointwise.csv")
    ours = _quiet(bayesij.loo, log_lik, convention=bayesij.PsisOptions(ddof=1, ties="position"))
    np.testing.assert_allclose(ours.pointwise["r_eff"], expected["r_eff"], rtol=1e-10)
    for column, theirs in [
        ("elpd_loo", "elpd_loo"),
        ("p_loo", "p_loo"),
        ("pareto_k", "pareto_k"),
        ("mcse_elpd_loo", "mcse_elpd_loo"),
        ("ess", "n_eff"),
    ]:
        np.testing.assert_allclose(
            ours.pointwise[column], expected[theirs], rtol=1e-9, err_msg=column
        )
    estimates = pd.read_csv(DATA / f"r_loo_psis_{name}_estimates.csv")
    np.testing.assert_allclose(
        ours.estimates().to_numpy(), estimates[["estimate", "se"]].to_numpy(), rtol=1e-10
    )
    if name == "heavy":
        assert ours.pointwise["pareto_k"].max() > 1
        assert ours.bad_k_ids() == list(np.flatnonzero(expected["pareto_k"] > 0.7))


def test_k_hat_far_above_one_keeps_a_positive_mcse_and_a_finite_ess():
    """k-hat from 7 to beyond 100 (tests/reference/log_lik_extreme.csv, R values saved by
    r_loo_reference.R). Where the smoothed tail lies hundreds of log units below the
    largest raw ratio, weights scaled to that ratio underflowed (ESS NaN, MCSE -0.0); such
    rows are now normalised in log space. R loo agrees wherever its own values are
    defined: at k-hat = 97 its simulated MCSE underflows to 0 (the relative-error formula
    used here has no exponential to underflow); where it gives k-hat Inf or NA (a tail
    that underflows), so does bayesij (inf), with the same unsmoothed elpd."""
    log_lik = r_log_lik("extreme")
    expected = pd.read_csv(DATA / "r_loo_psis_extreme_pointwise.csv")
    for ties in ("position", "above"):
        ours = _quiet(
            bayesij.loo, log_lik, convention=bayesij.PsisOptions(ddof=1, ties=ties)
        ).pointwise
        assert np.all(ours["mcse_elpd_loo"] > 0) and np.all(np.isfinite(ours["ess"]))
        assert np.all(np.isfinite(ours["elpd_loo"]))
    assert ours["pareto_k"].iloc[-1] > 50, "ties='above' smooths the last column's tail"
    ours = _quiet(
        bayesij.loo, log_lik, convention=bayesij.PsisOptions(ddof=1, ties="position")
    ).pointwise
    for column, theirs in [("elpd_loo", "elpd_loo"), ("ess", "n_eff"), ("p_loo", "p_loo")]:
        np.testing.assert_allclose(ours[column], expected[theirs], rtol=1e-9, err_msg=column)
    k_r = expected["pareto_k"].fillna(np.inf)
    np.testing.assert_allclose(ours["pareto_k"], k_r, rtol=1e-9)
    assert (k_r > 90).sum() == 5
    defined = expected["mcse_elpd_loo"] > 0
    np.testing.assert_allclose(
        ours["mcse_elpd_loo"][defined], expected["mcse_elpd_loo"][defined], rtol=1e-9
    )
    spread = _quiet(bayesij.loo_expectation, log_lik, log_lik, kind="sd")["value"]
    assert np.isfinite(spread.iloc[0]) and np.isnan(spread.iloc[-3:]).all(), "not inf"
    reff = float(ours["r_eff"].mean())
    data = from_dict(posterior={"m": log_lik[..., 0]}, log_likelihood={"y": log_lik})
    np.testing.assert_allclose(
        _quiet(bayesij.loo, log_lik, convention=replace(LOO_OPTIONS, r_eff=reff)).pointwise[
            "elpd_loo"
        ],
        peer_loo(data, reff).elpd_i,
        rtol=1e-9,
    )


def test_loo_expectations_equal_r_loo_e_loo():
    # Values as R loo 2.5.1's E_loo; its k-hat (of sqrt(1 + g^2) r, loo <= 2.7) is not ours:
    # k-hat follows arviz-stats and loo >= 2.8 (test_loo_expectations_equal_arviz_stats).
    log_lik = r_log_lik("reference")
    y_rep = np.loadtxt(DATA / "y_rep_reference.csv", delimiter=",")
    expected = pd.read_csv(DATA / "r_loo_expectations.csv")
    mean = bayesij.loo_expectation(log_lik, y_rep, kind="mean")
    np.testing.assert_allclose(mean["value"], expected["mean"], rtol=1e-10)
    q90 = bayesij.loo_expectation(log_lik, y_rep, kind="quantile", prob=0.9)
    np.testing.assert_allclose(q90["value"], expected["q90"], rtol=1e-10)


def test_loo_expectations_with_repeated_states_equal_r_loo_under_its_convention():
    # Tied draws inside the tail and at its cutoff: R's order (r_loo_ties.R).
    log_lik = r_log_lik("ties")
    y_rep = np.loadtxt(DATA / "y_rep_ties.csv", delimiter=",")
    expected = pd.read_csv(DATA / "r_loo_ties.csv")
    for kind, column, prob in (("mean", "mean", None), ("quantile", "q25", 0.25)):
        ours = bayesij.loo_expectation(log_lik, y_rep, kind=kind, prob=prob, convention="R loo 2.5")
        np.testing.assert_allclose(ours["value"], expected[column], rtol=1e-12)
    default = bayesij.loo_expectation(log_lik, y_rep)  # ties left out of the tail
    assert not np.allclose(default["value"], expected["mean"], rtol=1e-6)


def _fit_with_replicates(name: str):
    """R's saved log-likelihood ``name`` as a fit with noisy replicates of it as the
    posterior predictive (either ArviZ generation), and the replicates."""
    log_lik = r_log_lik(name)
    rng = np.random.default_rng(0)
    y_rep = log_lik + rng.normal(size=log_lik.shape)
    data = from_dict(
        posterior={"mu": rng.normal(size=log_lik.shape[:2])},
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": y_rep},
        observed_data={"y": np.zeros(log_lik.shape[2])},
    )
    return data, y_rep


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats needs ArviZ 1.x (Python >= 3.12)")
@pytest.mark.parametrize("name", ["reference", "heavy", "ties"])
@pytest.mark.parametrize(
    "kind,prob",
    [
        ("mean", None),
        ("median", None),
        ("var", None),
        ("sd", None),
        ("quantile", 0.25),
        ("quantile", 0.9),
    ],
)
def test_loo_expectations_equal_arviz_stats(name, kind, prob):
    import arviz_stats

    data, y_rep = _fit_with_replicates(name)
    theirs, khat = _quiet(arviz_stats.loo_expectations, data, kind=kind, probs=prob)
    ours = bayesij.loo_expectation(data, y_rep, kind=kind, prob=prob, convention="arviz-stats")
    np.testing.assert_allclose(ours["pareto_k"], khat.values.ravel(), rtol=0, atol=1e-8)
    # "ties": tied draws inside the tail and at its cutoff take the smoothed weights in the
    # order of NumPy's unstable argsort, as in arviz-stats (R's stable order differs)
    value, expected = ours["value"].to_numpy(), theirs.values.ravel()
    # One draw holding all the weight: no variance to estimate, NaN here (arviz-stats
    # returns the uncorrected weighted variance).
    one_draw = np.isnan(value) & (ours["pareto_k"].to_numpy() > 1)
    assert kind in ("var", "sd") or not one_draw.any()
    np.testing.assert_allclose(value[~one_draw], expected[~one_draw], rtol=1e-10, atol=1e-12)
    if name == "ties" and kind == "mean":
        stable = bayesij.loo_expectation(
            data, y_rep, kind=kind, convention=bayesij.PsisOptions("arviz-stats", ties="position")
        )
        assert np.abs(stable["value"].to_numpy() - expected).max() > 1e-8


@pytest.mark.parametrize(
    "kind,prob", [("mean", None), ("sd", None), ("median", None), ("quantile", 0.9)]
)
@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_loo_expectation_mcse_covers_the_error_against_exact_loo(kind, prob):
    # Conjugate regression: the linear predictor x_n beta has the exact LOO posterior
    # N(x_n m_-n, x_n S_-n x_n); over 20 sets of 1000 exact draws, (error / MCSE) has mean
    # square near 1.
    X, y = heteroskedastic_regression(40, np.random.default_rng(5))
    model = ConjugateNormal(X, y, sigma=1.0)
    exact = []
    for n in range(y.size):
        mean, cov = model.posterior(np.r_[np.ones(n), 0.0, np.ones(y.size - n - 1)])
        exact.append((X[n] @ mean, np.sqrt(X[n] @ cov @ X[n])))
    exact = np.array(exact)
    truth = {
        "mean": exact[:, 0],
        "median": exact[:, 0],
        "sd": exact[:, 1],
        "quantile": exact[:, 0] + scipy.stats.norm.ppf(0.9) * exact[:, 1],
    }[kind]
    z = []
    for seed in range(20):
        beta = model.draws(1000, np.random.default_rng(seed))
        result = _quiet(
            bayesij.loo_expectation,
            model.log_lik(beta)[None],
            (beta @ X.T)[None],
            kind=kind,
            prob=prob,
            convention=bayesij.PsisOptions(r_eff=1.0),
        )
        z.append((result["value"] - truth) / result["mcse"])
    z = np.concatenate(z)
    assert 0.6 < np.mean(z**2) < 1.6, np.mean(z**2)


def test_the_khat_of_a_two_valued_expectation_is_the_ratios_own(rng):
    """arviz-stats' rule: where h takes two values (0/1 predictions) the k-hat of h r is not
    fitted and the expectation's k-hat is that of the ratios alone (a quantile's)."""
    log_lik = r_log_lik("reference")
    y_rep = np.loadtxt(DATA / "y_rep_reference.csv", delimiter=",")
    binary = 1.0 + (y_rep > np.median(y_rep))  # two values, neither 0
    k = {
        kind: bayesij.loo_expectation(log_lik, values, kind=kind, prob=0.5)["pareto_k"]
        for kind, values in (("mean", binary), ("quantile", binary), ("var", y_rep))
    }
    np.testing.assert_array_equal(k["mean"], k["quantile"])
    ratio_k = bayesij.loo_expectation(log_lik, y_rep, kind="quantile", prob=0.5)["pareto_k"]
    assert (k["var"].to_numpy() > ratio_k.to_numpy()).any()  # h r fitted: its k-hat counts


def test_loo_expectation_mean_and_variance_from_arviz_weights():
    """Weighted mean and variance sum w (g - mean)^2 / (1 - sum w^2), computed here from
    ArviZ's own PSIS weights with the same r_eff."""
    log_lik = r_log_lik("reference")
    y_rep = np.loadtxt(DATA / "y_rep_reference.csv", delimiter=",")
    w = np.exp(psis_log_weights(log_lik, reff=0.9))  # (draws, obs), normalised
    mean = (w * y_rep).sum(axis=0)
    variance = (w * (y_rep - mean) ** 2).sum(axis=0) / (1 - (w**2).sum(axis=0))
    tail_rule = LOO_OPTIONS.tail_rule
    ours = {
        kind: bayesij.loo_expectation(
            log_lik,
            y_rep,
            kind=kind,
            convention=bayesij.PsisOptions(r_eff=0.9, tail_rule=tail_rule),
        )["value"]
        for kind in ("mean", "var", "sd")
    }
    np.testing.assert_allclose(ours["mean"], mean, rtol=1e-10)
    np.testing.assert_allclose(ours["var"], variance, rtol=1e-10)
    np.testing.assert_allclose(ours["sd"], np.sqrt(variance), rtol=1e-10)


def test_loo_pit_equals_arviz(rng):
    log_lik = r_log_lik("reference")
    y_rep = np.loadtxt(DATA / "y_rep_reference.csv", delimiter=",")
    y = np.loadtxt(DATA / "y_reference.csv", delimiter=",")
    ours = bayesij.loo_pit(
        log_lik,
        y,
        y_rep,
        convention=bayesij.PsisOptions(r_eff=0.9, tail_rule=LOO_OPTIONS.tail_rule),
    )
    log_weights = psis_log_weights(log_lik, reff=0.9)
    if ARVIZ_1:
        # arviz-stats 1.x's loo_pit smooths its own ECDF; the LOO-PIT of R loo and ArviZ
        # 0.23 is the weighted share of replicates below y, here from the peer's weights.
        theirs = (np.exp(log_weights) * (y_rep <= y)).sum(axis=0)
    else:
        theirs = _quiet(az.loo_pit, y=y, y_hat=y_rep.T, log_weights=log_weights.T)
    np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-10)


# ----------------------------------------------------------------------------- exact truth
@pytest.mark.parametrize("method", ["psis", "is", "ij", "cumulant"])
def test_errors_against_exact_loo_shrink_as_n_grows(method):
    """Conjugate normal regression: exact log p(y_n | y_-n) in closed form, 4000 exact draws."""
    errors = []
    for n in [20, 80, 320]:
        error = []
        for seed in range(3):
            X, y = heteroskedastic_regression(n, np.random.default_rng(seed))
            model = ConjugateNormal(X, y, sigma=1.0)
            beta = model.draws(4000, np.random.default_rng(100 + seed))
            result = _quiet(
                bayesij.loo,
                model.log_lik(beta)[None],
                method=method,
                convention=bayesij.PsisOptions(r_eff=1.0),
            )
            exact = exact_loo_log_predictive(model)
            error.append(np.mean(np.abs(result.pointwise["elpd_loo"] - exact)))
        errors.append(np.mean(error))
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < 0.01


def test_reported_mcse_covers_the_error_of_psis():
    X, y = heteroskedastic_regression(40, np.random.default_rng(5))
    model = ConjugateNormal(X, y, sigma=1.0)
    exact = exact_loo_log_predictive(model)
    z = []
    for seed in range(20):
        beta = model.draws(1000, np.random.default_rng(seed))
        result = _quiet(
            bayesij.loo, model.log_lik(beta)[None], convention=bayesij.PsisOptions(r_eff=1.0)
        )
        z.append((result.pointwise["elpd_loo"] - exact) / result.pointwise["mcse_elpd_loo"])
    z = np.concatenate(z)
    assert 0.5 < np.mean(z**2) < 2.0  # importance sampling bias is small next to the noise


# ----------------------------------------------------------------------------- equivalences
def test_two_dimensional_equals_three_dimensional_with_given_r_eff():
    log_lik = r_log_lik("reference")
    a = bayesij.loo(log_lik, convention=bayesij.PsisOptions(r_eff=0.5))
    b = bayesij.loo(
        log_lik.reshape(-1, log_lik.shape[2]), convention=bayesij.PsisOptions(r_eff=0.5)
    )
    pd.testing.assert_frame_equal(a.pointwise, b.pointwise)


def test_chunked_equals_whole(monkeypatch):
    log_lik = _heavy_tailed_draws(2, n_obs=600)
    whole = _quiet(bayesij.loo, log_lik)
    monkeypatch.setattr(numeric, "CHUNK_BYTES", 8 * 2000 * 300)
    chunked = _quiet(bayesij.loo, log_lik)
    pd.testing.assert_frame_equal(whole.pointwise, chunked.pointwise, rtol=1e-12)


def test_container_inference_data_and_array_agree():
    idata = load_example("centered_eight")
    results = [
        _quiet(bayesij.loo, source)
        for source in (
            idata,
            bayesij.from_inference_data(idata),
            log_lik_values(idata),
        )
    ]
    for other in results[1:]:
        np.testing.assert_allclose(other.pointwise["elpd_loo"], results[0].pointwise["elpd_loo"])


def test_leave_group_out_equals_loo_of_summed_log_lik():
    log_lik = r_log_lik("reference")[..., :24]
    groups = np.repeat(["a", "b", "c", "d", "e", "f"], 4)
    grouped = bayesij.loo(log_lik, groups=groups)
    summed = bayesij.loo(log_lik.reshape(4, 250, 6, 4).sum(axis=3))
    np.testing.assert_allclose(grouped.pointwise["elpd_loo"], summed.pointwise["elpd_loo"])
    assert list(grouped.pointwise.index) == list("abcdef")


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31), shift=st.floats(-50, 50))
def test_permutation_and_column_constants(seed, shift):
    rng = np.random.default_rng(seed)
    log_lik = -0.5 * (rng.normal(size=8) - rng.normal(size=(2, 200, 1)) * 0.5) ** 2
    base = _quiet(bayesij.loo, log_lik, convention=bayesij.PsisOptions(r_eff=1.0)).pointwise
    order = rng.permutation(8)
    permuted = _quiet(
        bayesij.loo, log_lik[..., order], convention=bayesij.PsisOptions(r_eff=1.0)
    ).pointwise
    np.testing.assert_allclose(permuted["elpd_loo"], base["elpd_loo"].to_numpy()[order])
    constants = shift * np.arange(8)
    shifted = _quiet(
        bayesij.loo, log_lik + constants, convention=bayesij.PsisOptions(r_eff=1.0)
    ).pointwise
    np.testing.assert_allclose(shifted["pareto_k"], base["pareto_k"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(shifted["elpd_loo"], base["elpd_loo"] + constants, atol=1e-8)


def test_tail_rules():
    assert tail_length(4000, 1.0, "ceil") == 190  # 3 sqrt(4000) = 189.7
    assert tail_length(4000, 1.0, "floor") == 189
    assert tail_length(100, 1.0, "ceil") == 20  # 0.2 S
    a = bayesij.loo(r_log_lik("reference"), convention=bayesij.PsisOptions(tail_rule="floor"))
    b = bayesij.loo(r_log_lik("reference"), convention=bayesij.PsisOptions(tail_rule="ceil"))
    assert not np.allclose(a.pointwise["pareto_k"], b.pointwise["pareto_k"])


# ----------------------------------------------------------------------------- bad input
def test_result_accessors_and_text():
    result = _quiet(bayesij.loo, r_log_lik("heavy"))
    assert result.k_threshold == pytest.approx(min(1 - 1 / np.log10(1000), 0.7))
    table = result.pareto_k_table()
    assert table["count"].sum() == 30 and table.loc["(1, Inf)", "count"] >= 3
    text = str(result)
    assert "Computed from 1000 by 30 log-likelihood matrix (PSIS-LOO" in text
    assert "Pareto k diagnostic values" in text and "unit(s) above k-hat 0.67" in text
    np.testing.assert_allclose(result.mcse, np.sqrt((result.pointwise["mcse_elpd_loo"] ** 2).sum()))


def test_warnings_for_high_k_constant_columns_and_few_draws(rng):
    with pytest.warns(UserWarning, match=r"units have Pareto k-hat above 0.67"):
        bayesij.loo(r_log_lik("heavy"))
    log_lik = rng.normal(-1, 0.1, size=(2, 300, 4))
    log_lik[..., 2] = -1.5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = bayesij.loo(log_lik)
    messages = " | ".join(str(w.message) for w in caught)
    assert "1 unit(s) have a log-likelihood constant over all draws (positions [2])" in messages
    assert "their LOO estimate is exact" in messages
    # k-hat inf is 'bad' in R loo's table, but the estimate is exact: no refit advised.
    assert "units have Pareto k-hat above" not in messages
    assert result.bad_k_ids() == [2] and result.unreliable_ids() == []
    assert np.isinf(result.pointwise["pareto_k"].iloc[2])
    assert np.isfinite(result.pointwise["elpd_loo"]).all()
    with pytest.warns(UserWarning, match=r"Only 60 draws \(fewer than 100\)"):
        bayesij.loo(rng.normal(-1, 0.1, size=(60, 4)))


@pytest.mark.parametrize("method", ["psis", "is", "ij", "cumulant"])
def test_impossible_observation_has_minus_infinite_elpd(rng, method):
    log_lik = rng.normal(-1, 0.1, size=(1, 400, 3))
    base = _quiet(
        bayesij.loo, log_lik, convention=bayesij.PsisOptions(r_eff=1.0), method=method
    ).pointwise
    log_lik[0, 10, 1] = -np.inf
    with pytest.warns(UserWarning, match=r"1 unit\(s\) have log-likelihood -inf at some draws"):
        result = _quiet_except_impossible(
            bayesij.loo, log_lik, convention=bayesij.PsisOptions(r_eff=1.0), method=method
        )
    row = result.pointwise.iloc[1]
    assert row["elpd_loo"] == -np.inf and row["p_loo"] == np.inf and row["pareto_k"] == np.inf
    pd.testing.assert_frame_equal(result.pointwise.iloc[[0, 2]], base.iloc[[0, 2]])


def _quiet_except_impossible(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Pareto k-hat above")
        return function(*args, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "exact"}, r"method: found 'exact'; expected one of"),
        ({"tail_rule": "round"}, r"tail_rule: found 'round'; expected 'ceil'"),
        ({"r_eff": -1.0}, r"r_eff: found values that are not finite and positive"),
        ({"ddof": 3}, r"ddof: found 3; expected 0 \(ArviZ\) or 1 \(R loo\)"),
        ({"convention": "R"}, r"convention: found 'R'; expected one of \['ArviZ 0.23', 'R loo'"),
        ({"groups": [1, 2]}, r"groups: found shape \(2,\)"),
    ],
)
def test_bad_arguments(kwargs, message):
    """Bad options are named whether given to ``PsisOptions`` or (method, groups) to loo."""
    options = {k: v for k, v in kwargs.items() if k in ("tail_rule", "r_eff", "ddof", "convention")}
    rest = {k: v for k, v in kwargs.items() if k not in options}
    with pytest.raises(ValueError, match=message):
        bayesij.loo(np.zeros((2, 200, 4)) - 1.0, convention=bayesij.PsisOptions(**options), **rest)


def test_bad_log_lik_and_values(rng):
    log_lik = rng.normal(-1, 0.1, size=(200, 4))
    with pytest.raises(ValueError, match=r"data: found 200 NaN value\(s\) \(first at draw 0"):
        bayesij.loo(np.where(np.arange(4) == 2, np.nan, log_lik))
    with pytest.raises(ValueError, match=r"values: found shape \(200, 3\); expected one value"):
        bayesij.loo_expectation(log_lik, rng.normal(size=(200, 3)))
    with pytest.raises(ValueError, match=r"kind: found 'mode'; expected one of"):
        bayesij.loo_expectation(log_lik, rng.normal(size=(200, 4)), kind="mode")
    with pytest.raises(ValueError, match=r"prob: found 1.5; expected a probability"):
        bayesij.loo_expectation(log_lik, rng.normal(size=(200, 4)), kind="quantile", prob=1.5)
    with pytest.raises(ValueError, match=r"y: found shape \(3,\); expected one value per"):
        bayesij.loo_pit(log_lik, np.zeros(3), rng.normal(size=(200, 4)))
    for bad in ([0.5, 1.0], [], [[0.1]], "0.5", [True]):
        with pytest.raises(ValueError, match=r"prob: found .*; expected a probability"):
            bayesij.loo_expectation(log_lik, rng.normal(size=(200, 4)), kind="quantile", prob=bad)


@pytest.mark.parametrize("name", ["reference", "ties"])
def test_several_quantiles_at_once_equal_one_at_a_time(name):
    log_lik = r_log_lik(name)
    y_rep = log_lik + np.random.default_rng(1).normal(size=log_lik.shape)
    probs = [0.05, 0.5, 0.95]
    for convention in (None, "R loo"):
        table = _quiet(
            bayesij.loo_expectation,
            log_lik,
            y_rep,
            kind="quantile",
            prob=probs,
            convention=convention,
        )
        assert list(table["value"].columns) == probs
        for p in probs:
            one = _quiet(
                bayesij.loo_expectation,
                log_lik,
                y_rep,
                kind="quantile",
                prob=p,
                convention=convention,
            )
            for column in ("value", "mcse", "pareto_k"):
                np.testing.assert_array_equal(table[(column, p)].to_numpy(), one[column].to_numpy())
    assert (table["value"].diff(axis=1).iloc[:, 1:] >= 0).all().all()  # ordered quantiles


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats needs ArviZ 1.x (Python >= 3.12)")
def test_several_quantiles_equal_arviz_stats():
    import arviz_stats

    data, y_rep = _fit_with_replicates("ties")
    probs = [0.1, 0.5, 0.9]
    theirs, _ = _quiet(arviz_stats.loo_expectations, data, kind="quantile", probs=probs)
    ours = bayesij.loo_expectation(data, kind="quantile", prob=probs, convention="arviz-stats")
    expected = np.asarray(theirs.transpose("quantile", ...)).reshape(len(probs), -1)
    np.testing.assert_allclose(ours["value"].to_numpy().T, expected, rtol=1e-10, atol=1e-12)


def test_one_thread_equals_many(monkeypatch):

    log_lik = _heavy_tailed_draws(3, n_obs=700)
    monkeypatch.setattr(numeric, "CHUNK_BYTES", 8 * 4000 * 200)
    monkeypatch.setattr(numeric, "THREADS", 4)
    many = _quiet(bayesij.loo, log_lik)
    monkeypatch.setattr(numeric, "THREADS", 1)
    one = _quiet(bayesij.loo, log_lik)
    pd.testing.assert_frame_equal(many.pointwise, one.pointwise)


def test_interleaved_chain_ids_give_the_same_r_eff():
    from bayesij.array.loo import loo_pointwise

    log_lik = r_log_lik("reference")  # (4, 250, 25)
    interleaved = np.transpose(log_lik, (1, 0, 2)).reshape(1000, 25)
    chains = np.tile(np.arange(4), 250)
    a = loo_pointwise(log_lik)
    b = loo_pointwise(interleaved, chain_ids=chains)
    np.testing.assert_allclose(b.r_eff, a.r_eff, rtol=1e-12)
    np.testing.assert_allclose(b.elpd, a.elpd, rtol=1e-12)


def test_saved_psis_weights_give_the_same_answers_without_smoothing_again():
    """save_psis keeps R loo's smoothed log-weights: exp(weights) sum to 1 per unit, give
    back elpd_loo, and LOO expectations, LOO-PIT and the linearity check computed from them
    equal those that smooth again."""
    log_lik = r_log_lik("reference")
    y_rep = np.loadtxt(DATA / "y_rep_reference.csv", delimiter=",")
    y = np.loadtxt(DATA / "y_reference.csv", delimiter=",")
    post = bayesij.from_arrays(y_rep.reshape(log_lik.shape)[..., :2], log_lik)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = bayesij.loo(post, save_psis=True)
        plain = bayesij.loo(post)
        weights = kept.log_weights
        assert weights.shape == (log_lik.shape[0] * log_lik.shape[1], log_lik.shape[2])
        np.testing.assert_allclose(np.exp(weights).sum(axis=0), 1.0, rtol=1e-12)
        matrix = log_lik.reshape(-1, log_lik.shape[2])
        np.testing.assert_allclose(
            logsumexp(matrix + weights, axis=0), kept.pointwise["elpd_loo"], rtol=1e-12
        )
        assert plain.log_weights is None
        for kind in ("mean", "var", "quantile"):
            prob = 0.9 if kind == "quantile" else None
            pd.testing.assert_frame_equal(
                bayesij.loo_expectation(post, y_rep, kind=kind, prob=prob, psis=kept),
                bayesij.loo_expectation(post, y_rep, kind=kind, prob=prob),
                rtol=1e-12,
            )
        pd.testing.assert_series_equal(
            bayesij.loo_pit(post, y, y_rep, psis=kept),
            bayesij.loo_pit(post, y, y_rep),
            rtol=1e-12,
        )
        reused, smoothed = bayesij.linearity(post, psis=kept), bayesij.linearity(post)
        pd.testing.assert_frame_equal(reused.delta_is, smoothed.delta_is, rtol=1e-10)
        with pytest.raises(ValueError, match=r"psis: found a LooResult without saved PSIS"):
            bayesij.loo_expectation(post, y_rep, psis=plain)
        grouped = bayesij.loo(post, groups=np.arange(25) // 5, save_psis=True)
        with pytest.raises(ValueError, match=r"psis: found saved weights of shape \(1000, 5\)"):
            bayesij.linearity(post, psis=grouped)


@pytest.mark.parametrize("name", ["reference", "heavy"])
def test_truncated_importance_sampling_equals_r_loo(name):
    """method="tis": R loo 2.5.1's loo(is_method = "tis") (tests/reference/r_loo_tis.R),
    the ratios cut at their mean times sqrt(S): elpd, p_loo, its MCSE and n_eff. R reports
    k-hat 0 for TIS; here PSIS's k-hat of the same ratios stays as the diagnostic."""
    log_lik = r_log_lik(name)
    expected = pd.read_csv(DATA / f"r_loo_tis_{name}_pointwise.csv")
    ours = _quiet(bayesij.loo, log_lik, method="tis", convention="R loo 2.5")
    for column, theirs in [
        ("elpd_loo", "elpd_loo"),
        ("p_loo", "p_loo"),
        ("mcse_elpd_loo", "mcse_elpd_loo"),
        ("ess", "n_eff"),
    ]:
        np.testing.assert_allclose(
            ours.pointwise[column], expected[theirs], rtol=1e-9, err_msg=column
        )
    assert (expected["pareto_k"] == 0).all()
    psis = _quiet(bayesij.loo, log_lik, convention="R loo 2.5")
    np.testing.assert_array_equal(ours.pointwise["pareto_k"], psis.pointwise["pareto_k"])
    if name == "heavy":  # where PSIS's tail is long, truncation differs from smoothing
        assert np.abs(ours.pointwise["elpd_loo"] - psis.pointwise["elpd_loo"]).max() > 1e-3


@pytest.mark.parametrize("convention", [None, "R loo"])
def test_an_impossible_draw_counts_as_zero_likelihood_in_r_eff(convention):
    """An observation impossible at one draw (log-likelihood -inf) has elpd -inf and k-hat
    inf; its r_eff is still that of exp(log_lik) with exp(-inf) = 0, as R loo computes it
    (``relative_eff(exp(log_lik), chain_id)``: bayesij's default; the split-chain ESS of
    ``exp(log_lik)``: "R loo"), not of a stand-in value."""
    from bayesij.array.ess import relative_eff, split_relative_ess

    rng = np.random.default_rng(0)
    log_lik = rng.normal(-1.0, 0.3, size=(4, 250, 5))
    log_lik[0, 3, 2] = -np.inf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = bayesij.loo(log_lik, convention=convention)
    assert any("log-likelihood -inf at some draws" in str(w.message) for w in caught)
    likelihood = np.exp(log_lik[..., 2])
    if convention is None:
        expected = relative_eff(likelihood.reshape(-1, 1), np.repeat(np.arange(4), 250))[0]
    else:
        expected = split_relative_ess((likelihood / likelihood.max())[..., None])[0]
    row = result.pointwise.iloc[2]
    assert row["r_eff"] == pytest.approx(expected, rel=1e-12)
    assert row["elpd_loo"] == -np.inf and row["pareto_k"] == np.inf
