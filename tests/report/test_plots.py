"""The report's figures: every unit drawn at its id and the top ones labelled, k-hat against
the threshold, one IJ point per quantity, the AMIP curve with its target and refit, exact
against approximate refits, LOO-PIT as an ECDF, legends off the data."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayesij  # noqa: E402
from bayesij import plots, refit  # noqa: E402


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
    # Steps estimated by the linear continuation are drawn and labelled as such.
    curve = result.curve.dropna(subset=["reweighted"])
    continued = (curve["estimate"] == "linear continuation").to_numpy()
    lines = {line.get_label(): line for line in ax.lines}
    assert continued.any() == ("linear continuation from the last reweighted set" in lines)
    reweighted = list(lines["reweighted (PSIS)"].get_xdata())
    assert reweighted == curve["n_drop"][~continued].tolist()  # from 0 dropped
    if continued.any():  # drawn on from the last reweighted set
        drawn = lines["linear continuation from the last reweighted set"].get_xdata()
        assert drawn[0] == reweighted[-1]
    target = [line for line in ax.lines if line.get_label().startswith("change needed")][0]
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
