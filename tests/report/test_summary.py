"""The verdict's words: targets worded from where the quantity stands, units counted, the
IJ comparison made only where it is measured and applies, at most eight bullets."""

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij import refit
from bayesij.report.summary import MAX_BULLETS, ij_comparison, target_words, unit_words
from conjugate import small_regression


def _result(target, metric="mean", original=1.0, quantity="b"):
    return SimpleNamespace(quantity=quantity, target=target, metric=metric, original_value=original)


@pytest.mark.parametrize(
    ("target", "metric", "original", "words"),
    [
        ("sign", "mean", 0.4, "reverse the sign of b"),
        ("significance", "lower end", 0.2, "remove the significance of b"),
        ("significance", "lower end", -0.1, "make b significant"),
        ("significance", "upper end", -0.3, "remove the significance of b"),
        ("significance", "upper end", 0.3, "make b significant"),
        ("sign_and_significance", "upper end", -0.3, "make b significant with the opposite sign"),
        (-0.25, "mean", 1.0, "change b by -0.25"),
    ],
)
def test_targets_are_worded_from_where_the_quantity_stands(target, metric, original, words):
    assert target_words(_result(target, metric, original)) == words


def test_unit_words():
    assert unit_words("obs") == "observations" and unit_words("firm", 1) == "1 firm"
    assert unit_words("class", 2) == "2 classes" and unit_words("group", 0) == "0 groups"


def test_the_ij_comparison_needs_a_measured_ratio_and_a_global_quantity():
    X, y = small_regression(300, seed=3)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=4000).fit(np.ones(300))
    result = bayesij.audit(post, settings={"amip": False})
    table = ij_comparison(result)
    # A well-specified conjugate regression: both quantities measured, linear, and agreeing.
    assert (table["verdict"] == "agree").all(), table
    local = ij_comparison(SimpleNamespace(**{**vars(result), "local": ["beta[2]"]}))
    assert local.loc["beta[2]", "verdict"] == "not applicable"
    assert local.loc["beta[1]", "verdict"] == "agree"
    summary = result.summary()
    assert len(summary) <= MAX_BULLETS
    assert summary[-1].startswith("Posterior vs IJ standard errors: agree within 25 %")


def test_never_more_than_eight_bullets():
    rng = np.random.default_rng(5)
    X, y = small_regression(40, seed=5)
    y = y + rng.standard_t(1.5, size=40)  # heavy tails: LOO, AMIP and the IJ all speak
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(40))
    log_prior = np.zeros(post.quantities.shape[:2])
    result = bayesij.audit(
        post, log_prior=log_prior + post.quantities.values[..., 0], compare_with={"again": post}
    )
    assert 0 < len(result.summary()) <= MAX_BULLETS
    assert all(line.count(". ") == 0 or "e.g." in line for line in result.summary())
    assert isinstance(result.comparison_table, pd.DataFrame)


def test_misspecification_is_claimed_where_the_sandwich_says_so():
    """Heteroskedastic noise fitted with noise sd 1: the IJ sd is the sandwich sd, larger than
    the posterior sd by the closed-form ratio; the audit says "may be misspecified" for both
    coefficients (1.4 and 2.1 here: outside 0.8-1.25, the intercept's inside 0.5-2)."""
    from conjugate import heteroskedastic_regression

    X, y = heteroskedastic_regression(1000, np.random.default_rng(7))
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=4000).fit(np.ones(1000))
    result = bayesij.audit(post, settings={"amip": False})
    table = result.comparison_table
    assert (table["verdict"] == "posterior smaller").all(), table
    bread = np.linalg.inv(X.T @ X)  # posterior covariance (flat-ish prior, noise sd 1)
    beta = bread @ X.T @ y
    meat = X.T @ (X * ((y - X @ beta) ** 2)[:, None])
    sandwich = bread @ meat @ bread
    exact = np.sqrt(np.diag(sandwich) / np.diag(bread))
    measured = np.sqrt(result.ij.ratio.to_numpy())
    np.testing.assert_allclose(measured, exact, rtol=0.1)
    assert any("the model may be misspecified for them" in line for line in result.summary())


def test_conclusions_that_need_many_units_are_counted_reached_or_not():
    """The robust bullet for sets larger than a handful: all reached (no 'not reachable'
    clause; it once raised on an empty maximum), or some not reachable within alpha_max,
    or some undetermined beyond a handful: each counted once, as what it is."""
    from bayesij.report.summary import _robust_bullet

    def result(reachable, n_drop, answer=None):
        answer = answer or ("reached" if reachable else "not reachable")
        return SimpleNamespace(
            reachable=reachable,
            n_drop=n_drop,
            prop_drop=n_drop / 300,
            undetermined=answer == "undetermined",
            answer=answer,
            quantity="mu",
            continued=False,
            verification=None,
            size_interval=(150.0, float("inf")),
            upper_bound=0,
            n_units=300,
            refits_needed=7,
            undetermined_by="linearisation",
            draws_needed=float("nan"),
            n_draws=4000,
        )

    reached = {("mu", "sign"): result(True, 25), ("mu", "significance"): result(True, 40)}
    audit = SimpleNamespace(amip=reached, unit_name="observation", offsets=[])
    assert (
        _robust_bullet(audit)
        == "2 of 2 conclusions searched need more than a handful of observations."
    )
    audit.amip[("mu", 0.5)] = result(False, 30)
    assert _robust_bullet(audit).endswith(
        "(2 reached by larger sets; 1 not reachable by dropping up to 30 observations)."
    )
    audit.amip[("mu", 0.25)] = result(False, 30, "undetermined")
    text = _robust_bullet(audit)
    assert text.startswith("4 of 4 conclusions searched need more than a handful")
    assert "1 not reachable by dropping up to 30" in text  # not counted twice
    assert "1 undetermined beyond a handful, at least 150 each)." in text
    assert "For that one, a refit decides, about 7 refits each by bisection" in text
    assert not re.search(r"\([^)]*\(", text)  # no parentheses inside parentheses
    assert "inf" not in text


def test_a_sure_upper_bound_is_fragile_open_or_robust_by_its_interval():
    """An undetermined answer with a sure upper bound: a handful when the bound is one
    ("at most"), open when only the size interval's low end is one (the bullet gives both
    ends), robust when even the low end is more than a handful."""
    from bayesij.report.summary import (
        _fragile_bullet,
        _robust_bullet,
        _undetermined_bullet,
        fragile,
        open_questions,
    )

    def bounded(n_drop, low, target="sign"):
        return SimpleNamespace(
            reachable=True,
            undetermined=True,
            upper_bound=n_drop,
            n_drop=n_drop,
            n_units=10_000,
            prop_drop=n_drop / 10_000,
            size_interval=(float(low), float(n_drop - 1)),
            draws_needed=73_000.0,
            n_draws=4000,
            quantity="b",
            continued=False,
            verification=None,
            target=target,
            drop_ids=list(range(n_drop)),
            answer="undetermined",
            undetermined_by="Monte Carlo error",
            refits_needed=6,
        )

    small, wide, far = bounded(4, 1), bounded(174, 25), bounded(500, 200, 0.5)
    audit = SimpleNamespace(
        amip={("b", "sign"): small, ("b", "x"): wide, ("b", 0.5): far},
        unit_name="obs",
        offsets=[],
        unit_effects=[],
        ij_integrated=None,
    )
    assert fragile(audit.amip) == [small] and open_questions(audit.amip) == [wide]
    assert "dropping at most 4 observations of 10000 (0, 1, 2, 3)" in _fragile_bullet(audit)
    text = _undetermined_bullet(audit)
    assert "takes at most 174 observations and perhaps as few as 25" in text
    assert "undetermined by Monte Carlo error" in text
    assert "a refit decides, about 6 refits each" in text
    assert "or up to about 7.3e+04 draws (now 4000)" in text
    assert "decides 1 more conclusion is" in text  # after the fragile bullet: "more"
    alone = SimpleNamespace(
        amip={("b", "x"): wide}, unit_name="obs", offsets=[], unit_effects=[], ij_integrated=None
    )
    assert "decides 1 conclusion is undetermined" in _undetermined_bullet(alone)  # nothing before
    assert "marginal_log_lik" not in _undetermined_bullet(alone)
    # over a hierarchy's groups read with their own effects: the terms the draws would decide on
    patients = SimpleNamespace(**{**vars(alone), "unit_name": "patient", "unit_effects": ["z"]})
    assert _undetermined_bullet(patients).endswith(
        "; or the draws, over the patients' terms with their own effect integrated out "
        "(marginal_log_lik=refit.PyMCDensity(model).group_log_lik(fit, 'z'), "
        "refit.PyStanDensity's likewise, or bayesij.GlmDensity's; or the model's density "
        "as grad_log_posterior=, or a backend that holds it)."
    )
    assert _robust_bullet(audit) == (
        "1 of 3 conclusions searched needs more than a handful of observations."
    )


def _after_convergence(result) -> list:
    """The verdict's sentences after the one on the draws' convergence, if any."""
    return [s for s in result.summary() if not s.startswith("The draws ")]


def test_loo_advice_spares_exact_units_and_needs_enough_draws():
    """A unit whose log-likelihood is constant over the draws has k-hat inf (as R loo and
    ArviZ) but an exact PSIS estimate (leaving it out reweights every draw alike): no refit
    is advised for it. With 10 draws or fewer the k-hat threshold is not positive, and the
    verdict says the draws are too few instead of quoting a negative threshold."""
    import warnings

    rng = np.random.default_rng(0)
    log_lik = rng.normal(-1, 0.3, (4, 100, 5))
    log_lik[..., 2] = -1.7
    draws = rng.normal(size=(4, 100, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = bayesij.loo(log_lik)
        result = bayesij.audit(bayesij.from_arrays(draws, log_lik.copy()))
    assert np.isinf(loo.pointwise["pareto_k"][2]) and loo.bad_k_ids() == [2]
    assert loo.exact_ids() == [2] and loo.unreliable_ids() == []
    # Exact: the LOO posterior is the posterior, so elpd_loo is that log-likelihood.
    assert loo.pointwise["elpd_loo"][2] == pytest.approx(-1.7, abs=1e-14)
    first = _after_convergence(result)[0]  # 4 x 100 draws: their ESS may be too few
    assert first.startswith("PSIS-LOO is reliable") and "refit" not in first
    assert "(2): k-hat inf, but its estimate is exact" in first
    log_lik[..., 0] = 30 * rng.standard_cauchy((4, 100))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.audit(bayesij.from_arrays(draws, log_lik))
    assert _after_convergence(result)[0].startswith(
        "PSIS-LOO is unreliable for 1 of 5 observations (k-hat above 0.62: 0): refit it"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        few = bayesij.audit(
            bayesij.from_arrays(rng.normal(size=(1, 2, 1)), rng.normal(-1, 0.3, (1, 2, 5)))
        )
    assert few.summary()[0].startswith("PSIS-LOO cannot be checked with 2 draws")
    assert not any("-2.32" in line for line in few.summary())


def test_units_are_named_in_plural_as_english_forms_them():
    from bayesij.report.summary import unit_words

    words = ["county", "city", "day", "firm", "class", "person", "school district", "obs"]
    assert [unit_words(w) for w in words] == [
        "counties",
        "cities",
        "days",
        "firms",
        "classes",
        "people",
        "school districts",
        "observations",
    ]
    assert unit_words("county", 1) == "1 county" and unit_words("county", 3) == "3 counties"


def test_a_ratio_measured_over_the_wrong_unit_is_undetermined_not_agree():
    """The same measured IJ/posterior ratio (a conjugate regression: 'agree' for both
    coefficients) is 'undetermined' when the units carry their own effects (the IJ then
    approximates reweighting units, not drawing new ones) and when the fit looks grouped
    without recording the groups; each reason names what decides, and the IJ bullet says
    it. Real hierarchies reach these rows only where their linearity check passes."""
    from dataclasses import replace

    import bayesij
    from bayesij import refit
    from bayesij.report.summary import _ij_bullet, _integration_words, ij_comparison
    from conjugate import small_regression

    X, y = small_regression(200, seed=9)
    y = X @ [1.0, 2.0] + np.random.default_rng(2).normal(size=200)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(200))
    audit = bayesij.audit(post, settings={"targets": ("sign",), "waic": False})
    assert (audit.comparison_table["verdict"] == "agree").all()
    hierarchy = replace(audit, unit_effects=["a", "z_a"])
    table = ij_comparison(hierarchy)
    assert (table["verdict"] == "undetermined").all() and (table["why"] == "hierarchy").all()
    assert "holds each one's own effect (a, z_a)" in table["reason"].iloc[0]
    assert "bayesij.refit.cluster_bootstrap decides" in table["reason"].iloc[0]
    assert "cluster_bootstrap would decide" in _ij_bullet(hierarchy)
    assert "own effect, a, z_a, so it approximates" in _ij_bullet(hierarchy)  # no ( inside (
    # the remedy the draws have: the IJ over the integrated terms, until they are given
    for text in (table["reason"].iloc[0], _ij_bullet(hierarchy)):
        assert "or the IJ over the observations' terms with their own effect integrated" in text
        assert "(marginal_log_lik=)" in text
    given = replace(hierarchy, ij_integrated=audit.ij)  # any IJ: the terms were given
    assert _integration_words(given) == "" and "marginal_log_lik" not in _ij_bullet(given)
    assert "group_log_lik(fit, 'a')" in _integration_words(hierarchy)
    suspected = replace(audit, units=replace(audit.units, suspected=("firm",)))
    table = ij_comparison(suspected)
    assert (table["why"] == "suspected grouping").all()
    assert "the posterior dim 'firm'" in table["reason"].iloc[0]
    assert not any("misspecified" in line for line in suspected.summary())
    named = replace(
        audit,
        units=replace(audit.units, suspected=("alpha",), local_variables=frozenset({"alpha"})),
    )
    table = ij_comparison(named)
    assert (table["why"] == "suspected grouping").all()
    assert "(the variable 'alpha')" in table["reason"].iloc[0]


def test_a_set_a_refit_confirmed_is_worded_so_and_not_sent_to_be_verified():
    """With a backend the audit's sets are the refits': the verdict says a refit confirms
    them (exact closed-form refits of the demo regression here), and asks for no refit."""
    from bayesij.demo import demo_data

    data = demo_data()
    X = np.column_stack([np.ones(80), data["X"][:, 0]])
    backend = refit.ConjugateNormalBackend(X, data["y"], sigma=1.0)
    post = backend.fit(np.ones(80))
    cheap = " ".join(
        bayesij.audit(post, settings={"loo": False, "waic": False, "progress": False}).summary()
    )
    assert "is predicted to" in cheap and "to verify that" in cheap
    looped = bayesij.audit(
        post, backend=backend, settings={"loo": False, "waic": False, "progress": False}
    )
    words = " ".join(looped.summary())
    assert "is confirmed by a refit to" in words and "is predicted to" not in words
    assert "to verify that" not in words
    for result in looped.amip.values():  # each set named is one an exact refit reaches
        if result.answer == "reached":
            assert result.verification is not None and result.verification["reached"]


def test_an_sd_ratio_within_its_monte_carlo_error_of_an_edge_is_undetermined():
    """A conjugate regression fitted with noise sd ``s`` below the data's: the IJ variance
    is the sandwich's exactly (the log-likelihood is quadratic in beta), so the exact sd
    ratios are known; ``s`` sets them to 1.30 and 1.27, past the 1.25 edge of agreement.
    With 1000 draws the IJ's Monte Carlo error spans the edge: never "agree" (beta[2]'s
    point estimate 1.22 alone would say so), undetermined with the band holding the exact
    ratio and the draws that would decide; with 40,000 draws both are "posterior
    smaller"."""
    X, y = small_regression(300, seed=3)
    bread = np.linalg.inv(X.T @ X)
    residuals = y - X @ (bread @ X.T @ y)
    sandwich = bread @ (X.T @ (X * residuals[:, None] ** 2)) @ bread
    at_unit_sd = np.sqrt(np.diag(sandwich) / np.diag(bread))
    s = at_unit_sd[0] / 1.30
    exact = at_unit_sd / s
    backend = refit.ConjugateNormalBackend(X, y, sigma=s, draws=1000, seed=1)
    result = bayesij.audit(backend.fit(np.ones(300)), settings={"amip": False})
    table = ij_comparison(result)
    assert "(the IJ over observations gives an sd ratio within 2 Monte" in result.summary()[-1]
    assert table.loc["beta[2]", "ratio"] < 1.25  # the point estimate's side is "agree"
    assert (table["verdict"] == "undetermined").all(), table
    for q, ratio in zip(["beta[1]", "beta[2]"], exact, strict=True):
        band = re.search(r"(\d\.\d\d) to (\d\.\d\d) within 2 MCSE", table.loc[q, "reason"])
        assert float(band[1]) <= ratio <= float(band[2]) and "across 1.25" in table.loc[q, "reason"]
        assert "draws (now 1000) would decide" in table.loc[q, "reason"]
    backend = refit.ConjugateNormalBackend(X, y, sigma=s, draws=40_000, seed=1)
    result = bayesij.audit(backend.fit(np.ones(300)), settings={"amip": False})
    assert (ij_comparison(result)["verdict"] == "posterior smaller").all()
    np.testing.assert_allclose(np.sqrt(result.ij.ratio.to_numpy()), exact, rtol=0.02)


def test_the_edge_s_band_and_draws_follow_from_the_ij_s_monte_carlo_error():
    """IJ variance 1.1 +- 0.4 (MCSE) against a posterior variance of 1: the sd ratio's
    band is sqrt(1.1 -+ 0.8), 0.55 to 1.38, holding both edges; the nearer to 1.05 (on
    the log scale) is 1.25, and 2 MCSE fall short of it at 1000 (0.8 / (1.5625 - 1.1))^2
    = 2992 draws."""
    from bayesij.report.summary import _edge_reason, _sd_ratio

    ij = SimpleNamespace(
        variance_corrected=pd.Series({"b": 1.1}),
        mcse=pd.Series({"b": 0.4}),
        posterior_variance=pd.Series({"b": 1.0}),
        ratio=pd.Series({"b": 1.1}),
        n_draws=1000,
    )
    band = _sd_ratio(ij, "b", -1.0), _sd_ratio(ij, "b", 1.0)
    assert band == pytest.approx((np.sqrt(0.3), np.sqrt(1.9)), rel=1e-12)
    reason = _edge_reason(ij, "b", "IJ sd / posterior sd 1.05", band)
    assert "0.55 to 1.38 within 2 MCSE" in reason and "across 1.25, the edge" in reason
    assert "about 2.99e+03 draws (now 1000) would decide" in reason
