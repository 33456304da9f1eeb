"""Plots of bayesij's result objects (matplotlib). Each takes a result and an optional
``ax`` and returns the axes; nothing here computes statistics beyond arranging results."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.checks import fail

__all__ = [
    "plot_influence",
    "plot_khat",
    "plot_ij",
    "plot_amip",
    "plot_refit",
    "plot_loo_pit",
    "plot_compare",
    "plot_calibration",
    "plot_loo_intervals",
    "plot_psense_sequence",
    "plot_psense_ecdf",
    "plot_psense_density",
]


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6.4, 3.6))[1]


#: Most unit names written under an axis: more would overlap at the report's width (the
#: most influential units are labelled beside their points whatever their number).
MAX_TICK_LABELS = 15


def _unit_positions(labels, ax) -> np.ndarray:
    """x of each unit: its id when the ids are numbers (Stan's 1-based indices, positions of
    arrays), else its position, with the names of at most :data:`MAX_TICK_LABELS` evenly
    spaced units as tick labels (cut to 16 characters)."""
    labels = np.asarray(labels)
    if labels.dtype.kind in "iuf":
        return labels.astype(float)
    x = np.arange(labels.size, dtype=float)
    count = min(labels.size, MAX_TICK_LABELS)
    shown = np.unique(np.linspace(0, labels.size - 1, count).round().astype(int))
    ax.set_xticks(
        x[shown], [_plain(labels[i], 16) for i in shown], rotation=45, ha="right", fontsize=7
    )
    return x


#: Characters of a name shown in a figure: a longer one is cut (with an ellipsis); names of
#: thousands of characters make matplotlib's layout slow and can exhaust its renderer.
NAME_WIDTH = 40


def _plain(text, width: int = NAME_WIDTH) -> str:
    """A name from the data as plain text on one line, at most ``width`` characters: a ``$``
    would start matplotlib's mathtext (a name such as ``'$x_{1'`` would make the figure fail
    to render), a newline would stack lines, and a long name would take the figure."""
    text = " ".join(str(text).split())
    if len(text) > width:
        text = text[: width - 1] + "\u2026"
    return text.replace("$", r"\$")


def _label_points(ax, x, y, labels, indices) -> None:
    """Label points, staggering the offsets so that neighbouring labels do not overlap."""
    for rank, i in enumerate(indices):
        ax.annotate(
            _plain(labels[i]),
            (x[i], y[i]),
            textcoords="offset points",
            xytext=(4, 4 + 9 * (rank % 3)),
            fontsize=8,
        )


def _legend_outside(ax) -> None:
    """The legend beside the axes, where it hides no data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def plot_influence(scores, quantity: str, top: int = 5, ax=None, unit: str | None = None):
    """Influence ``psi`` of every unit on ``quantity`` with ±2 MCSE bars; the ``top`` largest
    in absolute value are labelled.

    ``scores`` is the Dataset returned by :func:`bayesij.influence`; ``unit`` names the
    axis (``"county"``; default the dataset's dim, ``obs`` or ``group``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> ax = bayesij.plots.plot_influence(bayesij.influence(post), "mu")
    >>> ax.get_title()
    'Influence on mu'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    axis_name = unit
    unit = [dim for dim in scores["psi"].dims if dim != "quantity"][0]
    psi = scores["psi"].sel(quantity=quantity).to_numpy()
    mcse = scores["mcse"].sel(quantity=quantity).to_numpy()
    labels = scores[unit].to_numpy()
    x = _unit_positions(labels, ax)
    ax.errorbar(x, psi, yerr=2 * mcse, fmt="o", ms=3, lw=0.8, color="C0", label="psi ± 2 MCSE")
    ax.axhline(0.0, color="0.6", lw=0.8)
    _label_points(ax, x, psi, labels, np.argsort(-np.abs(np.nan_to_num(psi)))[:top])
    ax.set(
        xlabel=_plain(axis_name or unit),
        ylabel="psi = Cov(f, log-lik)",
        title=f"Influence on {_plain(quantity)}",
    )
    _legend_outside(ax)
    return ax


def plot_khat(result, ax=None, unit: str | None = None):
    """Pareto k-hat of every unit of a :class:`bayesij.LooResult`, with the thresholds;
    ``unit`` names the axis (default the result's index name).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> ax = bayesij.plots.plot_khat(bayesij.loo(post))
    >>> ax.get_title()
    'PSIS-LOO diagnostics'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    k = result.pointwise["pareto_k"].to_numpy()
    x = _unit_positions(result.pointwise.index.to_numpy(), ax)
    bad = k > result.k_threshold
    ax.scatter(x[~bad], k[~bad], s=10, color="C0", label="k-hat")
    ax.scatter(
        x[bad],
        np.minimum(k[bad], 2.0),
        s=18,
        color="C3",
        marker="x",
        label=f"k-hat > {result.k_threshold:.2f}",
    )
    ax.axhline(
        result.k_threshold,
        color="C3",
        ls="--",
        lw=0.8,
        label=f"threshold min(1 - 1/log10 S, 0.7) = {result.k_threshold:.2f}",
    )
    ax.axhline(1.0, color="0.4", ls=":", lw=0.8, label="1")
    _label_points(ax, x, np.minimum(k, 2.0), result.pointwise.index, np.flatnonzero(bad)[:10])
    ax.set(
        xlabel=_plain(unit or result.pointwise.index.name or "unit"),
        ylabel="Pareto k-hat",
        title="PSIS-LOO diagnostics",
    )
    _legend_outside(ax)
    return ax


def plot_ij(ij, ax=None):
    """IJ (frequentist) against posterior standard errors per quantity, from an
    :class:`bayesij.IJCovariance`; bars are ±2 Monte Carlo errors of the IJ sd.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> ax = bayesij.plots.plot_ij(bayesij.ij_covariance(post))
    >>> ax.get_title()
    'Frequentist vs posterior standard errors'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    posterior = np.sqrt(ij.posterior_variance.to_numpy())
    variance = np.clip(ij.variance_corrected.to_numpy(), 0.0, None)
    sd = np.sqrt(variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.where(sd > 0, ij.mcse.to_numpy() / (2 * sd), np.nan)
    ax.errorbar(posterior, sd, yerr=2 * error, fmt="o", color="C0", label="IJ sd ± 2 MCSE")
    top = np.nanmax(np.r_[posterior, sd + 2 * np.nan_to_num(error)]) * 1.1
    ax.plot([0, top], [0, top], color="0.5", lw=0.8, ls="--", label="equal")
    for name, px, py in zip(ij.posterior_variance.index, posterior, sd, strict=True):
        ax.annotate(_plain(name), (px, py), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set(
        xlabel="posterior sd",
        ylabel="IJ (bootstrap) sd",
        xlim=(0, top),
        ylim=(0, top),
        title="Frequentist vs posterior standard errors",
    )
    ax.legend(loc="best", fontsize=8)
    return ax


def plot_amip(result, ax=None, units: str | None = None):
    """Predicted change of the metric against the number of units dropped — to first order
    and to second along the linear ranking, reweighted where the draws allow — the change
    the target needs, the smallest set's size interval, and the refits (in the loop, or
    :func:`bayesij.refit.verify`'s); ``units`` names them (``"counties"``; default
    observations or groups). Each curve's label says which estimate it is.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> ax = bayesij.plots.plot_amip(bayesij.amip(post, "mu", target="sign"))
    >>> ax.get_title()
    'Influential subset for mu'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    curve = result.curve
    ax.plot(curve["n_drop"], curve["linear"], color="C0", label="first order (sorted psi)")
    if "second_order" in curve:
        finite = curve[np.isfinite(curve["second_order"])]
        ax.plot(
            finite["n_drop"],
            finite["second_order"],
            color="C4",
            ls="-.",
            label="second order (quadratic model)",
        )
    if "reweighted" in curve:
        _reweighted_curve(ax, curve)
    needed = -result.original_value if isinstance(result.target, str) else result.target
    ax.axhline(needed, color="C3", ls="--", lw=0.8, label=f"change needed ({result.target})")
    _size_marks(ax, result)
    if result.refits is not None:
        _refit_marks(ax, result)
    elif result.verification is not None:
        ax.scatter(
            [result.n_drop],
            [result.verification["change"]],
            s=60,
            marker="*",
            color="k",
            zorder=3,
            label="refit",
        )
    ax.set(
        xlabel=f"number of {units or ('observations' if result.unit == 'obs' else 'groups')} "
        "dropped "
        f"({result.answer or 'searched'})",
        ylabel=f"change of the {result.metric}",
        title=f"Influential subset for {_plain(result.quantity)}",
    )
    ax.legend(loc="best", fontsize=8)
    return ax


def _reweighted_curve(ax, curve) -> None:
    """The reweighted search's points: reweighted ones (only where some unit was), and the
    first-order continuation from the last of them."""
    rows = curve.dropna(subset=["reweighted"])
    how = rows["estimate"] if "estimate" in rows else pd.Series("reweighted", rows.index)
    rows = rows[how.isin(["start", "reweighted", "linear continuation"]).to_numpy()]
    how = how[how.isin(["start", "reweighted", "linear continuation"])]
    continued = (how == "linear continuation").to_numpy()
    reweighted = rows[~continued]  # the start (nothing dropped) and reweighted steps
    if (reweighted["n_drop"] > 0).any():
        ax.plot(
            reweighted["n_drop"],
            reweighted["reweighted"],
            "o-",
            ms=3,
            color="C1",
            label="reweighted (PSIS)",
        )
    if continued.any():  # drawn on from the last reweighted set it continues
        start = max(int(np.argmax(continued)) - 1, 0)  # the last reweighted set
        part = rows.iloc[start:][np.r_[True, continued[start + 1 :]]]
        label = (
            "first order from the last reweighted set"
            if (reweighted["n_drop"] > 0).any()
            else "first order along the reweighted search"
        )
        ax.plot(part["n_drop"], part["reweighted"], "s--", ms=3, color="C2", label=label)


def _refit_marks(ax, result) -> None:
    """Each refit in the loop: its set size and change, filled where it reached the
    target."""
    refits = result.refits
    change = refits["refit_value"] - result.original_value
    reached = refits["reached"].to_numpy(dtype=bool)
    ax.scatter(
        refits["n_drop"][reached],
        change[reached],
        s=40,
        marker="*",
        color="k",
        zorder=3,
        label="refit: reached",
    )
    if (~reached).any():
        ax.scatter(
            refits["n_drop"][~reached],
            change[~reached],
            s=30,
            marker="x",
            color="k",
            zorder=3,
            label="refit: not reached",
        )


def _size_marks(ax, result) -> None:
    """The smallest set's 95 % size interval (Monte Carlo error and linearisation; shaded,
    where finite) and the reported set's size (a sure upper bound when the answer is
    undetermined)."""
    if result.size_interval and result.refits is None:
        low, high = result.size_interval
        if np.isfinite(low):
            right = high if np.isfinite(high) else result.curve["n_drop"].max()
            ax.axvspan(
                low,
                right,
                color="0.85",
                zorder=0,
                label="smallest set, 95 % interval (Monte Carlo and linearisation)",
            )
    if result.reachable and result.n_drop:
        what = "set (an upper bound)" if result.upper_bound else "set"
        ax.axvline(result.n_drop, color="k", lw=0.8, ls=":", label=f"{what}: {result.n_drop}")


def plot_refit(report, ax=None):
    """Approximation against exact refit for every row of a :class:`RefitReport`, one colour
    per method, with ±2 Monte Carlo error bars and the identity line.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> from bayesij import refit
    >>> backend = refit.ConjugateNormalBackend(np.ones((20, 1)), y, sigma=1.0, draws=1000)
    >>> fit = backend.fit(np.ones(20))
    >>> exact = refit.loo(fit, backend, points=[0, 1], executor="sequential", progress=False)
    >>> ax = bayesij.plots.plot_refit(exact)
    >>> ax.get_title()
    'Approximation vs exact: loo'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    table = report.comparisons
    for i, (method, rows) in enumerate(table.groupby("method", sort=False)):
        ax.errorbar(
            rows["exact"],
            rows["approximation"],
            xerr=2 * rows["exact_se"].fillna(0),
            yerr=2 * rows["approximation_se"].fillna(0),
            fmt="o",
            ms=4,
            color=f"C{i}",
            label=method,
        )
    values = pd.concat([table["exact"], table["approximation"]]).dropna()
    if len(values):
        low, high = values.min(), values.max()
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="0.5", ls="--", lw=0.8)
    ax.set(
        xlabel="exact (refit)",
        ylabel="approximation",
        title=f"Approximation vs exact: {_plain(report.experiment)}",
    )
    ax.legend(loc="best", fontsize=8)
    return ax


def plot_loo_pit(pit, ax=None, difference: bool = True, kind: str = "ecdf"):
    """LOO-PIT values against the uniform: by default their ECDF with its simultaneous 95 %
    band (Säilynoja et al. 2022), as the difference ``ECDF - uniform`` (the band around 0
    shows every part of the distribution at the same scale).

    ``pit`` is a :class:`bayesij.stats.pit.PitEcdf` (:func:`bayesij.pit_ecdf`, for another
    level or seed), a :class:`bayesij.stats.pit.PitDensity` (:func:`bayesij.pit_density`,
    for ``kind="overlay"``) or the PIT values themselves (:func:`bayesij.loo_pit`).

    ``kind="qq"`` draws the same test as a quantile plot, R bayesplot's
    ``ppc_loo_pit_qq``: the sorted values against the uniform's quantiles
    ``(i - 1/2) / n``, the simultaneous band turned with it (the share of values below
    each PIT value that the band allows). ``kind="overlay"`` draws the values' density
    over the densities of 100 uniform samples of the same size, as bayesplot's
    ``ppc_loo_pit_overlay``: a hump in the middle says the predictive distributions are
    too wide, a U that they are too narrow, a slope that they are shifted.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> y_rep = mu + rng.normal(size=(4, 250, 20))     # posterior predictive draws
    >>> pit = bayesij.loo_pit(post, y, y_rep)
    >>> ax = bayesij.plots.plot_loo_pit(pit)
    >>> ax.get_title()
    'LOO-PIT: inside the band, uniformity p = 0.908'
    >>> bayesij.plots.plot_loo_pit(pit, kind="qq").get_xlabel()
    'uniform quantile'
    >>> bayesij.plots.plot_loo_pit(pit, kind="overlay").get_ylabel()
    'density'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    from bayesij.stats.pit import PitDensity, PitEcdf, pit_density, pit_ecdf

    kinds = ("ecdf", "qq", "overlay")
    if kind not in kinds:
        raise fail("kind", repr(kind), f"one of {kinds}")
    if kind == "overlay":
        return _pit_overlay(pit if isinstance(pit, PitDensity) else pit_density(pit), ax)
    if isinstance(pit, PitDensity):
        raise fail("pit", "a PitDensity", "PIT values or a PitEcdf for kind='ecdf' or 'qq'")
    result = pit if isinstance(pit, PitEcdf) else pit_ecdf(pit)
    ax = _axes(ax)
    if kind == "qq":
        return _pit_qq(result, pit, ax)
    grid = result.grid
    base = grid if difference else np.zeros_like(grid)
    level = f"{100 * result.prob:g} % simultaneous band (uniform)"
    ax.fill_between(
        grid, result.lower - base, result.upper - base, step="post", color="0.85", label=level
    )
    ax.plot(grid, grid - base, color="0.5", lw=0.8, ls="--")
    ax.step(grid, result.ecdf - base, where="post", color="C0", label="LOO-PIT ECDF")
    ax.set(
        xlabel="PIT",
        ylabel="ECDF - uniform" if difference else "ECDF",
        xlim=(0, 1),
        title=_pit_title(result),
    )
    if not difference:
        ax.set_ylim(0, 1)
    _legend_outside(ax)
    return ax


def _pit_title(result) -> str:
    verdict = "outside the band" if result.outside else "inside the band"
    return f"LOO-PIT: {verdict}, uniformity p = {result.p_value:.3f}"


def _pit_qq(result, pit, ax):
    """The sorted PIT values against the uniform quantiles, the ECDF's band turned."""
    from bayesij.stats.pit import PitEcdf

    level = f"{100 * result.prob:g} % simultaneous band (uniform)"
    ax.fill_betweenx(
        result.grid, result.lower, result.upper, step="post", color="0.85", label=level
    )
    ax.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls="--")
    if isinstance(pit, PitEcdf):  # the values themselves are not kept: the ECDF's steps
        ax.step(result.ecdf, result.grid, where="pre", color="C0", label="LOO-PIT")
    else:
        values = np.sort(np.asarray(pit, dtype=float).reshape(-1))
        quantiles = (np.arange(values.size) + 0.5) / values.size
        ax.plot(quantiles, values, ".", ms=3, color="C0", label="LOO-PIT")
    ax.set(
        xlabel="uniform quantile",
        ylabel="PIT",
        xlim=(0, 1),
        ylim=(0, 1),
        title=_pit_title(result),
    )
    _legend_outside(ax)
    return ax


def _pit_overlay(result, ax):
    """The PIT values' density over the uniform samples' densities."""
    ax = _axes(ax)
    for i, density in enumerate(result.uniform):
        label = f"{len(result.uniform)} uniform samples" if i == 0 else None
        ax.plot(result.grid, density, color="0.8", lw=0.6, label=label)
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.plot(result.grid, result.density, color="C0", lw=1.6, label="LOO-PIT")
    low, high = result.uniform.min(axis=0), result.uniform.max(axis=0)
    share = np.mean((result.density < low) | (result.density > high))
    ax.set(
        xlabel="PIT",
        ylabel="density",
        xlim=(0, 1),
        title=f"LOO-PIT density: {100 * share:.0f} % of [0, 1] outside the uniform samples'",
    )
    _legend_outside(ax)
    return ax


def plot_compare(table, ax=None):
    """Models' elpd ± SE (open circles) and difference to the best ± its SE (filled,
    with ``p_worse``), from :func:`bayesij.compare`; best model on top.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> wide = bayesij.from_arrays(mu, -0.5 * ((y - mu) / 2) ** 2 - np.log(2))   # sd 2
    >>> table = bayesij.compare({"sd 1": bayesij.loo(post), "sd 2": bayesij.loo(wide)})
    >>> ax = bayesij.plots.plot_compare(table)
    >>> ax.get_title()
    'Model comparison'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    y = np.arange(len(table))[::-1].astype(float)
    ax.errorbar(
        table["elpd"], y, xerr=table["se"], fmt="o", mfc="none", color="C0", label="elpd ± SE"
    )
    best = table["elpd"].iloc[0]
    diff = table.iloc[1:]
    ax.errorbar(
        best + diff["elpd_diff"],
        y[1:] - 0.25,
        xerr=diff["se_diff"],
        fmt="o",
        color="C1",
        label="best + elpd_diff ± se_diff",
    )
    probability = "p_worse" if "p_worse" in table else "p_better"
    for yy, (_, row) in zip(y[1:] - 0.25, diff.iterrows(), strict=True):
        flag = f" ({row['diag_diff']})" if row.get("diag_diff") else ""
        ax.annotate(
            f"{probability} {row[probability]:.2f}{flag}",
            (best + row["elpd_diff"], yy),
            textcoords="offset points",
            xytext=(0, -11),
            ha="center",
            fontsize=7,
        )
    ax.axvline(best, color="0.6", lw=0.8, ls="--")
    ax.set_ylim(-0.9, len(table) - 0.5)  # room for the last model's note
    ax.set_yticks(y, [_plain(name) for name in table.index])
    ax.set(xlabel="elpd", title="Model comparison")
    _legend_outside(ax)
    return ax


def plot_calibration(result, ax=None):
    """CORP reliability diagram (:func:`bayesij.calibration`): PAV-calibrated against
    forecast probability, with the consistency band and the Brier-score decomposition.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> outcome = (rng.random(200) < 0.3).astype(float)
    >>> ax = bayesij.plots.plot_calibration(bayesij.calibration(outcome, np.full(200, 0.3)))
    >>> brier = f"{np.mean((outcome - 0.3) ** 2):.3f}"   # a constant forecast: all of it UNC
    >>> ax.get_title() == f"Reliability: Brier {brier} = MCB 0.000 - DSC 0.000 + UNC {brier}"
    True
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    table = result.table
    ax.fill_between(
        table["forecast"],
        table["lower"],
        table["upper"],
        step="post",
        color="0.85",
        label="consistency band",
    )
    ax.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls="--")
    ax.step(
        table["forecast"], table["calibrated"], where="post", color="C0", label="PAV-calibrated"
    )
    ax.set(
        xlabel="forecast probability",
        ylabel="conditional event probability",
        xlim=(0, 1),
        ylim=(0, 1),
        title=(
            f"Reliability: Brier {result.score:.3f} = MCB {result.miscalibration:.3f} "
            f"- DSC {result.discrimination:.3f} + UNC {result.uncertainty:.3f}"
        ),
    )
    _legend_outside(ax)
    return ax


def plot_loo_intervals(y, lower, upper, center=None, labels=None, ax=None, ribbon=False):
    """Observations against their LOO predictive intervals (e.g. the 5 % and 95 % quantiles
    of :func:`bayesij.loo_expectation`), ordered by the interval's centre; observations
    outside are marked and labelled. ``ribbon=True`` draws the intervals as one band
    (bayesplot's ``ppc_loo_ribbon``), for many observations.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> ax = bayesij.plots.plot_loo_intervals(y, y - 2, y + 2)
    >>> ax.get_title()
    'LOO predictive intervals: 100 % of observations inside'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    y, lower, upper = (np.asarray(v, dtype=float) for v in (y, lower, upper))
    center = (lower + upper) / 2 if center is None else np.asarray(center, dtype=float)
    labels = np.arange(y.size) if labels is None else np.asarray(labels)
    order = np.argsort(center, kind="stable")
    x = np.arange(y.size)
    if ribbon:
        ax.fill_between(
            x, lower[order], upper[order], color="C0", alpha=0.3, lw=0, label="LOO interval"
        )
    else:
        ax.vlines(
            x, lower[order], upper[order], color="C0", lw=1.2, alpha=0.6, label="LOO interval"
        )
    ax.scatter(x, center[order], s=8, color="C0", marker="_", label="LOO centre")
    out = (y[order] < lower[order]) | (y[order] > upper[order])
    ax.scatter(x[~out], y[order][~out], s=10, color="k", label="observed")
    ax.scatter(x[out], y[order][out], s=18, color="C3", marker="x", label="observed, outside")
    distance = np.maximum(lower[order] - y[order], y[order] - upper[order])
    _label_points(ax, x, y[order], labels[order], np.argsort(-distance)[: min(5, out.sum())])
    ax.margins(y=0.15)  # room for the labels inside the axes
    inside = 1 - out.mean()
    ax.set(
        xlabel="observations, by LOO centre",
        ylabel="y",
        title=f"LOO predictive intervals: {100 * inside:.0f} % of observations inside",
    )
    _legend_outside(ax)
    return ax


def plot_psense_sequence(sequence, quantity: str, ax=None):
    """A quantity's power-scaled posterior mean ± sd along alpha (:func:`bayesij.psense_sequence`),
    with the CJS distance on a second axis; scalings whose k-hat is too high are crossed.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> log_prior = -0.5 * mu[..., 0] ** 2 / 25       # mu ~ N(0, 5)
    >>> sequence = bayesij.psense_sequence(post, log_prior=log_prior, quantities=["mu"])
    >>> ax = bayesij.plots.plot_psense_sequence(sequence, "mu")
    >>> ax.get_title()
    'Power-scaling: mu'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    rows = sequence[sequence["quantity"] == quantity]
    if rows.empty:
        raise fail("quantity", repr(quantity), f"one of {sorted(set(sequence['quantity']))}")
    alpha = rows["alpha"].to_numpy()
    ok = rows["reliable"].to_numpy()
    ax.errorbar(
        alpha[ok], rows["mean"][ok], yerr=rows["sd"][ok], fmt="o-", color="C0", label="mean ± sd"
    )
    if (~ok).any():
        ax.scatter(
            alpha[~ok], rows["mean"][~ok], marker="x", s=40, color="C3", label="k-hat too high"
        )
    ax.axvline(1.0, color="0.6", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xticks(alpha, [f"{a:.2f}" for a in alpha], fontsize=7)
    ax.minorticks_off()
    ax.set(
        xlabel="power-scaling alpha",
        ylabel=_plain(quantity),
        title=f"Power-scaling: {_plain(quantity)}",
    )
    twin = ax.twinx()
    twin.plot(alpha, rows["cjs"], color="C2", lw=0.8, ls=":", label="CJS distance")
    twin.set_ylabel("CJS distance", color="C2")
    handles = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(
        handles[0] + more[0],
        handles[1] + more[1],
        loc="upper left",
        bbox_to_anchor=(1.12, 1.0),
        fontsize=8,
        frameon=False,
    )
    return ax


def plot_psense_ecdf(scaled, quantity: str, ax=None):
    """A quantity's weighted ECDF under each power-scaling of
    :func:`bayesij.power_scaled_draws` (the smallest and largest alpha, and 1), as
    priorsense's ``powerscale_plot_ecdf``; dashed where the scaling's k-hat is too high.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> log_prior = -0.5 * mu[..., 0] ** 2 / 25       # mu ~ N(0, 5)
    >>> scaled = bayesij.power_scaled_draws(post, log_prior=log_prior)
    >>> ax = bayesij.plots.plot_psense_ecdf(scaled, "mu")
    >>> ax.get_title()
    'Power-scaling the prior: mu'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    ax = _axes(ax)
    column = _scaled_column(scaled, quantity)
    x = scaled.draws[:, column]
    order = np.argsort(x, kind="stable")
    for i, values, style in _extreme_scalings(scaled, column):
        at = np.argsort(values, kind="stable")
        ax.step(values[at], np.cumsum(scaled.weights[i][at]), where="post", **style)
    ax.step(
        x[order],
        np.arange(1, x.size + 1) / x.size,
        where="post",
        color="k",
        lw=0.9,
        label="posterior (alpha = 1)",
    )
    ax.set(
        xlabel=_plain(quantity),
        ylabel="ECDF",
        ylim=(0, 1),
        title=f"Power-scaling the {scaled.component}: {_plain(quantity)}",
    )
    _legend_outside(ax)
    return ax


def plot_psense_density(scaled, quantity: str, ax=None, points: int = 200):
    """A quantity's density under the smallest and largest power-scaling of
    :func:`bayesij.power_scaled_draws` beside the posterior's, as priorsense's
    ``powerscale_plot_dens``: Gaussian kernel density estimates of the draws with each
    scaling's importance weights (bandwidth by Scott's rule on the weights' effective
    sample size); dashed where the scaling's k-hat is too high.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=20)
    >>> mu = rng.normal(y.mean(), 0.22, size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> log_prior = -0.5 * mu[..., 0] ** 2 / 25       # mu ~ N(0, 5)
    >>> scaled = bayesij.power_scaled_draws(post, log_prior=log_prior)
    >>> ax = bayesij.plots.plot_psense_density(scaled, "mu")
    >>> ax.get_title()
    'Power-scaling the prior: mu'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    from scipy.stats import gaussian_kde

    ax = _axes(ax)
    column = _scaled_column(scaled, quantity)
    x = scaled.draws[:, column]
    if np.ptp(x) == 0:
        raise fail("quantity", f"{quantity!r}, constant over the draws", "a quantity that varies")
    grid = np.linspace(x.min(), x.max(), points)
    for i, values, style in _extreme_scalings(scaled, column):
        ax.plot(grid, gaussian_kde(values, weights=scaled.weights[i])(grid), **style)
    ax.plot(grid, gaussian_kde(x)(grid), color="k", lw=0.9, label="posterior (alpha = 1)")
    ax.set(
        xlabel=_plain(quantity),
        ylabel="density",
        title=f"Power-scaling the {scaled.component}: {_plain(quantity)}",
    )
    _legend_outside(ax)
    return ax


def _scaled_column(scaled, quantity: str) -> int:
    """The column of ``quantity`` in :func:`bayesij.power_scaled_draws`' draws."""
    if quantity not in scaled.quantities:
        raise fail("quantity", repr(quantity), f"one of {scaled.quantities}")
    return scaled.quantities.index(quantity)


def _extreme_scalings(scaled, column: int):
    """The smallest and largest power-scaling: their index, the quantity's draws there and
    the line style (colour, dashed where k-hat is too high, a label saying so)."""
    low, high = int(np.argmin(scaled.alphas)), int(np.argmax(scaled.alphas))
    for i, colour in [(low, "C0"), (high, "C3")]:
        flag = "" if scaled.reliable[i] else f", k-hat {scaled.pareto_k[i]:.2f}"
        flag += "" if scaled.moved == () or scaled.moved[i] is None else ", moment-matched"
        style = {
            "color": colour,
            "ls": "-" if scaled.reliable[i] else "--",
            "label": f"{scaled.component} ^ {scaled.alphas[i]:.2f}{flag}",
        }
        yield i, scaled.draws_at(i)[:, column], style
