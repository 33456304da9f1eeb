"""The audit report: the fragile conclusion and the refits named, a robust fit said to be
robust, bad input, prior sensitivity and model weights. (Its figures: test_plots.py.)"""

import matplotlib

matplotlib.use("Agg")

import dataclasses  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import bayesij  # noqa: E402
from bayesij import refit  # noqa: E402
from conjugate import noise_dominated_slope, small_regression  # noqa: E402


def test_audit_summary_names_the_fragile_conclusion_and_the_refits(backend, post, tmp_path):
    """The planted points reverse beta[2]'s sign and make it significant (exact refits in
    closed form confirm both sets). Reweighting is reliable for the first of them only,
    but the sets are sure at the pessimistic end of the band between the first- and
    second-order predictions: the verdict names them as deciding, and the refit that
    would verify them."""
    result = bayesij.audit(post, quantities="beta[2]")
    summary = " ".join(result.summary())
    assert "A handful of observations decides: dropping" in summary
    assert "is predicted to reverse the sign of beta[2]" in summary
    # beta[2]'s interval covers 0: the significance target is to make it significant.
    assert "is predicted to make beta[2] significant" in summary
    assert "Refit without" in summary and "bayesij.refit.verify" in summary
    assert "k-hat above" in summary  # the planted points are badly approximated by PSIS
    for (_, target), found in result.amip.items():
        weights = np.ones(backend.n_obs)
        weights[np.asarray(found.drop_ids)] = 0.0
        mean, cov = backend.model.posterior(weights)
        lower = mean[1] - 1.96 * np.sqrt(cov[1, 1])
        assert (mean[1] < 0) if target == "sign" else (lower > 0)  # the sets do reach
    markdown = result.to_markdown()
    assert markdown.startswith("# Model audit") and "| quantity |" in markdown
    assert "- `split_change`: the set chosen on half the draws" in markdown  # defined
    html = result._repr_html_()
    assert "Verdict" in html and "<img" not in html
    import matplotlib.pyplot as plt

    plt.close("all")  # figures other tests left open
    path = result.to_html(tmp_path / "audit.html")
    with open(path) as handle:
        page = handle.read()
    # One influence figure per quantity, the IJ and k-hat figures, one AMIP figure for the
    # quantity (its smallest reached set), each closed after rendering.
    assert page.count("data:image/png;base64,") == 1 + 2 + 1
    assert "AMIP: make beta[2] significant" in page
    assert not plt.get_fignums()


def test_audit_of_a_robust_fit_says_so():
    X, y = small_regression(200, seed=9)
    y = X @ [1.0, 2.0] + np.random.default_rng(2).normal(size=200)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(200))
    result = bayesij.audit(post, settings={"targets": ("sign",), "waic": False})
    summary = " ".join(result.summary())
    assert "2 of 2 conclusions searched need more than a handful of observations" in summary
    assert "PSIS-LOO is reliable" in summary
    assert "Refit" not in summary and "misspecified" not in summary
    assert result.waic is None


def test_audit_bad_input():
    with pytest.raises(ValueError, match="data: found a dict; expected a bayesij.Posterior"):
        bayesij.audit({})


def test_audit_reports_prior_sensitivity_and_model_weights(backend, post):
    from scipy.stats import norm

    from tests.helpers.peers import from_dict

    beta = post.quantities.values
    log_prior = norm.logpdf(beta, 0.0, 10.0).sum(axis=2)  # the backend's N(0, 100 I) prior
    X, y = backend.model.X, backend.model.y
    intercept_only = refit.ConjugateNormalBackend(X[:, :1], y, sigma=1.0, draws=2000, seed=4)
    result = bayesij.audit(
        post,
        log_prior=log_prior,
        compare_with={"intercept only": intercept_only.fit(np.ones(len(y)))},
        settings={"amip": False},
    )
    expected = bayesij.psense(post, log_prior=log_prior)
    pd.testing.assert_frame_equal(result.sensitivity, expected, check_exact=False, rtol=1e-10)
    summary = result.summary()
    assert any(line.startswith("Power-scaling") for line in summary)
    weights = result.comparison["weight"]
    assert set(weights.index) == {"audited", "intercept only"}
    assert weights.sum() == pytest.approx(1.0) and weights["audited"] > 0.5
    line = next(line for line in summary if line.startswith("Stacking weights of the fits"))
    second, row = result.comparison.index[1], result.comparison.iloc[1]
    assert f"{second} predicts worse by {-row['elpd_diff']:.1f}" in line
    assert f"(p_worse {row['p_worse']:.2f}" in line
    assert ("normal approximation may be poorly calibrated" in line) == bool(row["diag_diff"])
    assert ("elpd_loo may be biased" in line) == bool(row["diag_elpd"])
    assert "Power-scaling sensitivity" in result.tables()
    # A log_prior group in the data is found without being asked for.
    tree = from_dict(
        posterior={"beta": beta},
        log_likelihood={"y": post.log_lik.values},
        log_prior={"beta": log_prior},
    )
    found = bayesij.audit(tree, settings={"amip": False, "loo": False, "waic": False}).sensitivity
    np.testing.assert_allclose(found[["prior", "likelihood"]], expected[["prior", "likelihood"]])
    assert bayesij.audit(post, settings={"amip": False}).sensitivity is None
    with pytest.raises(ValueError, match=r"compare_with: found \{\}; expected a non-empty"):
        bayesij.audit(post, compare_with={}, settings={"amip": False})


def test_an_undetermined_influential_set_is_said_to_be_open_with_the_draws_that_decide():
    X, y = small_regression(200, seed=9)
    y = X @ [1.0, 0.3] + np.random.default_rng(2).standard_t(2, size=200)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(200))
    probe = bayesij.amip(post, "beta[2]", -10.0, method="linear", alpha_max=0.05)
    limit = float(probe.curve["second_order"].iloc[probe.n_drop])  # what 10 units just do
    result = bayesij.audit(
        post,
        quantities="beta[2]",
        settings={"targets": (limit,), "method": "linear", "alpha_max": 0.05},
    )
    (amip,) = result.amip.values()
    assert amip.answer == "undetermined"
    summary = " ".join(result.summary())
    assert "undetermined" in summary and "a refit decides, about" in summary
    assert "inf draws" not in summary
    assert amip.table()["answer"].iloc[0] == "undetermined"  # the report's AMIP table says it
    assert summary.count("undetermined") == 1  # counted once, where its size interval puts it


def test_the_amip_table_writes_an_infinite_end_with_its_sign():
    """A change unbounded downwards (a second-order breakdown while halving a scale) was
    printed "inf – -0.23", an interval whose low end lay above its high end."""
    from bayesij.report.audit import _amip_row

    X, y = small_regression(60, seed=9)
    post = refit.FlatPriorRegressionBackend(X, y, draws=1000, seed=2).fit(np.ones(y.size))
    result = bayesij.amip(post, "beta[2]", "sign")
    inf = float("inf")
    row = _amip_row(
        dataclasses.replace(result, change_interval=(-inf, -0.23), size_interval=(4.0, inf))
    ).iloc[0]
    assert row["change_interval"] == "-inf – -0.23"
    assert row["size_interval"] == "4 – inf"
    row = _amip_row(
        dataclasses.replace(result, change_interval=(-inf, inf), size_interval=(inf, inf))
    ).iloc[0]
    assert row["change_interval"] == "-inf – inf"
    assert row["size_interval"] == "beyond alpha_max"


def test_no_misspecification_claim_from_a_noise_dominated_ij():
    post = noise_dominated_slope()
    result = bayesij.audit(post, settings={"amip": False})
    summary = " ".join(result.summary())
    assert "undetermined for b (Monte Carlo noise dominates the IJ variance" in summary
    table = result.comparison_table
    assert table.loc["b", "verdict"] == "undetermined"
    assert f"about {result.ij.draws_needed['b']:.3g} draws" in table.loc["b", "reason"]
    assert "misspecified" not in summary


def test_audit_passes_the_gradient_to_its_amip_searches():
    """With the log posterior's gradient (a density's score(post) or the arrays) the audit's
    influential sets are amip's with control variates, and smaller than the plain ones on
    a heavy-tailed field experiment."""
    from ols_amip import heavy_tailed_experiment

    X, y = heavy_tailed_experiment(2000, seed=0)
    backend = refit.FlatPriorRegressionBackend(X, y, draws=2000, chains=4, seed=1)
    post, score, theta = backend.fit_with_gradient(np.ones(y.size))

    class Density:
        def grad_log_posterior(self, fit):
            assert (
                fit.content is post
            )  # the audited fit, read once: a density reads every parameter
            return score, theta

    targets = ("sign", "significance")
    kwargs = {"quantities": ["beta[2]"], "settings": {"targets": targets, "method": "linear"}}
    with_cv = bayesij.audit(post, grad_log_posterior=Density(), **kwargs)
    plain = bayesij.audit(post, **kwargs)
    for target in targets:
        expected = bayesij.amip(
            post, "beta[2]", target, method="linear", grad_log_posterior=(score, theta)
        )
        got = with_cv.amip[("beta[2]", target)]
        assert got.drop_ids == expected.drop_ids and got.answer == expected.answer
        assert got.n_drop <= plain.amip[("beta[2]", target)].n_drop
    assert any("zero-variance control variates" in line for line in with_cv.skipped_words())
    same = bayesij.audit(post, grad_log_posterior=(score, theta), **kwargs)
    assert same.amip[("beta[2]", "sign")].drop_ids == with_cv.amip[("beta[2]", "sign")].drop_ids
    with pytest.raises(
        ValueError, match=r"grad_log_posterior: found a str; expected a model density"
    ):
        bayesij.audit(post, grad_log_posterior="grad", **kwargs)


def test_a_scale_s_significance_is_asked_as_halving_it():
    """mean - 1.96 sd of a positive scale tests nothing: the audit asks whether a handful
    of units halves it, the change Delta = -mean / 2, in words "halve sigma_a"."""
    from bayesij.report.summary import target_words

    rng = np.random.default_rng(4)
    y = rng.normal(size=60)
    sigma_a = np.exp(rng.normal(-1.9, 0.6, size=(4, 500, 1)))  # positive, near 0
    mu = y.mean() + rng.normal(size=(4, 500, 1)) / np.sqrt(60)
    post = bayesij.from_arrays(
        np.concatenate([mu, sigma_a], axis=2),
        -0.5 * (y - mu) ** 2 + 0.1 * (sigma_a - sigma_a.mean()) * (y > 1.5),
        quantity_names=["mu", "sigma_a"],
    )
    audit = bayesij.audit(post, settings={"targets": ("sign", "significance"), "amip": True})
    halving = -0.5 * float(sigma_a.mean())
    assert ("sigma_a", "significance") in audit.skipped and ("sigma_a", halving) in audit.amip
    result = audit.amip[("sigma_a", halving)]
    assert result.metric == "mean" and np.isclose(result.original_value, sigma_a.mean())
    assert target_words(result).startswith("halve sigma_a (0.")
    assert any("asked as halving their mean" in line for line in audit.skipped_words())
    # the tables say "halve", never the raw change (issue 68)
    table = audit.tables()["Influential subsets (AMIP)"]
    assert "halve" in table.index.get_level_values("target")
    assert repr(halving) not in audit.to_markdown() and str(halving) not in audit.to_markdown()


def test_a_verified_set_is_no_longer_left_to_a_refit(backend, post):
    """Once refit.verify has refitted a set the reweighted search reached only to first
    order, the verdict reads the refit: the set joins the handful that decides."""
    from dataclasses import replace

    from bayesij.report.summary import first_order_only, fragile

    result = bayesij.audit(post, quantities="beta[2]")
    # A set the reweighted search reached by its continuation with its size left open (a
    # sure upper bound): what the verdict leaves to a refit.
    key, reached = next((k, r) for k, r in result.amip.items() if r.answer == "reached")
    continued = replace(
        reached,
        answer="undetermined",
        upper_bound=reached.n_drop,
        n_reweighted=1,
        method="reweighted",
        undetermined_by="linearisation",
    )
    assert continued.n_drop > 1 and continued.continued
    result = replace(result, amip={**result.amip, key: continued})
    assert continued in first_order_only(result.amip)
    verified = refit.verify(continued, backend, progress=False)
    checked = replace(result, amip={**result.amip, key: verified})
    assert verified not in first_order_only(checked.amip) and verified in fragile(checked.amip)
    assert "A handful of observations decides" in " ".join(checked.summary())
    refuted = replace(verified, verification={**verified.verification, "reached": False})
    assert refuted not in fragile({key: refuted}) + first_order_only({key: refuted})


def test_the_tables_written_for_r_read_back_as_the_audit_s_own(tmp_path):
    """Audit.to_csv: every table read back with pandas equals the audit's table (index
    columns first, an unnamed index as 'row'); index.json lists them with the summary.
    A file where the folder should be is refused by name."""
    import json

    X, y = small_regression(200, seed=9)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(200))
    result = bayesij.audit(post, settings={"targets": ("sign",)})
    from pathlib import Path

    index = json.loads(Path(result.to_csv(tmp_path / "tables")).read_text(encoding="utf-8"))
    assert index["summary"] == result.summary() and index["heading"] == result.heading()
    tables = result.tables()
    assert [t["title"] for t in index["tables"]] == list(tables)
    assert len({t["file"] for t in index["tables"]}) == len(tables)
    for entry in index["tables"]:
        read = pd.read_csv(tmp_path / "tables" / entry["file"]).set_index(entry["index"])
        ours = tables[entry["title"]]
        assert read.shape == ours.shape, entry["title"]
        numeric = ours.select_dtypes("number").columns
        np.testing.assert_allclose(read[numeric].to_numpy(float), ours[numeric].to_numpy(float))
    loo = pd.read_csv(tmp_path / "tables" / "psis_loo.csv").set_index("row")
    expected = result.loo.estimates().loc["elpd_loo", "Estimate"]
    assert loo.loc["elpd_loo", "Estimate"] == pytest.approx(expected)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="^folder: found the file"):
        result.to_csv(tmp_path / "a_file")


def test_settings_as_an_object_or_a_mapping_give_the_same_audit():
    """AuditSettings and a mapping of some of its fields are one thing; an unknown key is
    refused naming the fields there are; a setting is checked when set, before any pass."""
    rng = np.random.default_rng(4)
    draws = rng.normal(0.3, 0.1, size=(2, 200, 1))
    post = bayesij.from_arrays(draws, rng.normal(-1, 0.1, size=(2, 200, 20)) + 0.2 * draws)
    as_object = bayesij.audit(
        post, settings=bayesij.AuditSettings(targets=("sign",), waic=False, progress=False)
    )
    as_mapping = bayesij.audit(
        post, settings={"targets": ("sign",), "waic": False, "progress": False}
    )
    assert as_object.waic is None and as_mapping.waic is None
    assert list(as_object.amip) == list(as_mapping.amip) == [("f[1]", "sign")]
    assert as_object.to_markdown() == as_mapping.to_markdown()
    with pytest.raises(ValueError, match=r"settings: found the key 'target'; expected fields"):
        bayesij.audit(post, settings={"target": ("sign",)})
    with pytest.raises(ValueError, match=r"max_refits: found 0; expected an integer >= 1"):
        bayesij.AuditSettings(max_refits=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        as_object_settings = bayesij.AuditSettings()
        as_object_settings.loo = False


def test_a_varying_intercept_fit_saved_as_arrays_has_mu_s_significance_decided():
    # The audit searches mu, tau and sigma, not the 24 group effects; the varying-intercept
    # model recovered from the draws reads every quantity of the fit, effects included
    # (stats.amip.fit_draws), and decides mu's significance: the exact Gibbs refit without
    # its set moves mu's lower end below zero.
    from hierarchy_gibbs import GibbsHierarchyBackend, metric_after, simulate

    y, group = simulate(24, 10, 3)
    post = GibbsHierarchyBackend(y, group, seed=1).fit(np.ones(y.size))
    found = bayesij.audit(post).amip[("mu", "significance")]
    assert found.answer == "reached" and "varying-intercept" in found.decided_by
    assert found.size_interval[0] <= found.n_drop == found.size_interval[1] < 24
    dropped = np.flatnonzero(found.kept == 0)
    assert metric_after(y, group, [], "mu", -1) > 0.02
    assert metric_after(y, group, dropped, "mu", -1) < 0.0
