"""Plots (rendered with Agg, checking what was drawn) and the audit report."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import bayesij  # noqa: E402
from bayesij import plots, refit  # noqa: E402


def small_regression(n, seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    return X, X @ [1.0, 0.5] + rng.normal(size=n)


@pytest.fixture(scope="module")
def backend():
    X, y = small_regression(60, seed=8)
    X[:3, 1] = [3.5, 3.8, 4.1]
    y[:3] = [-2.0, -2.5, -3.0]
    return refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000, seed=3)


@pytest.fixture(scope="module")
def post(backend):
    return backend.fit(np.ones(backend.n_obs))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_influence_plot_draws_every_unit_and_labels_the_top(post):
    scores = bayesij.influence(post)
    ax = plots.plot_influence(scores, "beta[2]", top=3)
    points = ax.lines[0].get_xydata()
    assert points.shape == (60, 2)
    np.testing.assert_allclose(points[:, 1], scores["psi"].sel(quantity="beta[2]"))
    labels = {text.get_text() for text in ax.texts}
    top = np.argsort(-np.abs(scores["psi"].sel(quantity="beta[2]").to_numpy()))[:3]
    assert labels == {str(i) for i in top}
    assert len(ax.collections) >= 1  # the MCSE bars


def test_khat_plot_marks_the_units_above_the_threshold(post):
    with pytest.warns(UserWarning):
        result = bayesij.loo(post)
    ax = plots.plot_khat(result)
    bad = result.bad_k_ids()
    offsets = [c.get_offsets() for c in ax.collections]
    assert sum(len(o) for o in offsets) == 60
    assert len(offsets[1]) == len(bad) >= 1
    assert any(abs(line.get_ydata()[0] - result.k_threshold) < 1e-12 for line in ax.lines)
    assert {t.get_text() for t in ax.texts} == {str(i) for i in bad[:10]}


def test_ij_plot_has_one_point_per_quantity(post):
    ij = bayesij.ij_covariance(post)
    ax = plots.plot_ij(ij)
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0], np.sqrt(ij.posterior_variance))
    assert [t.get_text() for t in ax.texts] == ["beta[1]", "beta[2]"]


def test_amip_plot_shows_the_curve_target_and_refit(backend, post):
    result = refit.verify(
        bayesij.amip(post, "beta[2]", target="sign"), backend, executor="sequential", progress=False
    )
    ax = plots.plot_amip(result)
    labels = [line.get_label() for line in ax.lines]
    assert "linear (sorted psi)" in labels and "reweighted (PSIS)" in labels
    target = [line for line in ax.lines if line.get_label().startswith("target")][0]
    assert target.get_ydata()[0] == pytest.approx(-result.original_value)
    star = ax.collections[-1].get_offsets()[0]
    assert star[0] == result.n_drop
    assert star[1] == pytest.approx(result.verification["change"])


def test_refit_plot_scatters_approximation_against_exact(backend, post):
    report = refit.loo(post, backend, points=[0, 1, 2, 10], executor="sequential", progress=False)
    ax = plots.plot_refit(report)
    assert ax.get_legend_handles_labels()[1] == ["psis", "ij", "cumulant"]
    psis = ax.containers[0].lines[0].get_xydata()
    np.testing.assert_allclose(psis[:, 0], report.table("psis")["exact"])


def test_loo_pit_plot_is_an_ecdf(post, backend):
    rng = np.random.default_rng(1)
    beta = post.quantities.values.reshape(-1, 2)
    y_rep = beta @ backend.model.X.T + rng.normal(size=(beta.shape[0], 60))
    pit = bayesij.loo_pit(post, backend.model.y, y_rep)
    ax = plots.plot_loo_pit(pit)
    ecdf = [line for line in ax.lines if line.get_label() == "LOO-PIT ECDF"][0]
    values = ecdf.get_ydata()
    assert values[0] >= 0 and values[-1] == 1.0 and np.all(np.diff(values) >= 0)


def test_audit_summary_names_the_fragile_conclusion_and_the_refits(post, tmp_path):
    result = bayesij.audit(post, quantities="beta[2]")
    summary = " ".join(result.summary())
    assert "sign of beta[2] depends on a handful of units" in summary
    assert "Refit without" in summary
    assert "k-hat above" in summary  # the planted points are badly approximated by PSIS
    markdown = result.to_markdown()
    assert markdown.startswith("# Model audit") and "| quantity |" in markdown
    html = result._repr_html_()
    assert "<h3>Summary</h3>" in html and "<img" not in html
    path = result.to_html(tmp_path / "audit.html")
    with open(path) as handle:
        page = handle.read()
    assert page.count("data:image/png;base64,") == len(result.figures())


def test_audit_of_a_robust_fit_says_so():
    X, y = small_regression(200, seed=9)
    y = X @ [1.0, 2.0] + np.random.default_rng(2).normal(size=200)
    post = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000).fit(np.ones(200))
    result = bayesij.audit(post, targets=("sign",), waic=False)
    summary = " ".join(result.summary())
    assert "Not decided by a handful of units" in summary
    assert "PSIS-LOO is reliable" in summary
    assert "No refit is needed" in summary
    assert result.waic is None


def test_audit_bad_input():
    with pytest.raises(ValueError, match="data: found a dict; expected a bayesij.Posterior"):
        bayesij.audit({})


def test_plots_put_each_unit_at_its_id_and_keep_the_legend_off_the_data(rng):
    theta = rng.normal(size=(4, 200, 1))
    y = rng.normal(size=40)
    y[38] = 6.0  # Stan id 39 is the most influential
    post = bayesij.from_arrays(theta, -0.5 * (y - theta) ** 2, obs_names=range(1, 41))
    ax = plots.plot_influence(bayesij.influence(post), "f[1]", top=3)
    texts = {t.get_text(): t.xy for t in ax.texts}
    assert texts["39"][0] == 39  # the label 39 sits at x = 39
    assert all(x == int(label) for label, (x, _) in texts.items())
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # beside the axes, over no data
    offsets = sorted(t.xyann[1] for t in ax.texts)
    assert len(set(offsets)) == len(offsets)  # staggered: no two labels share an offset


def test_audit_reports_prior_sensitivity_and_model_weights(backend, post):
    from scipy.stats import norm

    from tests.helpers.peers import from_dict

    beta = post.quantities.values
    log_prior = norm.logpdf(beta, 0.0, 10.0).sum(axis=2)  # the backend's N(0, 100 I) prior
    X, y = backend.model.X, backend.model.y
    intercept_only = refit.ConjugateNormalBackend(X[:, :1], y, sigma=1.0, draws=2000, seed=4)
    result = bayesij.audit(
        post,
        amip=False,
        log_prior=log_prior,
        compare_with={"intercept only": intercept_only.fit(np.ones(len(y)))},
    )
    expected = bayesij.psense(post, log_prior=log_prior)
    pd.testing.assert_frame_equal(result.sensitivity, expected, check_exact=False, rtol=1e-10)
    summary = result.summary()
    assert sum(line.startswith("Power-scaling sensitivity of beta[") for line in summary) == 2
    weights = result.comparison["weight"]
    assert set(weights.index) == {"audited", "intercept only"}
    assert weights.sum() == pytest.approx(1.0) and weights["audited"] > 0.5
    assert any(line.startswith("Stacking weights of the fits compared") for line in summary)
    assert "Power-scaling sensitivity" in result.tables()
    # A log_prior group in the data is found without being asked for.
    tree = from_dict(
        posterior={"beta": beta},
        log_likelihood={"y": post.log_lik.values},
        log_prior={"beta": log_prior},
    )
    found = bayesij.audit(tree, amip=False, loo=False, waic=False).sensitivity
    np.testing.assert_allclose(found[["prior", "likelihood"]], expected[["prior", "likelihood"]])
    assert bayesij.audit(post, amip=False).sensitivity is None
    with pytest.raises(ValueError, match=r"compare_with: found \{\}; expected a non-empty"):
        bayesij.audit(post, amip=False, compare_with={})
