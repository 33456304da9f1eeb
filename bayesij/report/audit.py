"""The model audit: influence, IJ vs posterior standard errors, LOO, WAIC and influential
subsets for each quantity, summarised in plain words, as Markdown, notebook HTML or a
self-contained HTML file with the figures embedded."""

from __future__ import annotations

import html
import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from bayesij.array.checks import (
    check_flag,
    check_labels,
    check_positive_int,
    constant_columns,
    fail,
)
from bayesij.data.fit import read
from bayesij.data.posterior import base_name
from bayesij.data.structure import Units
from bayesij.data.var_names import select_var_names
from bayesij.refit.amip import amip as refitted_amip
from bayesij.refit.backends import OnceEach
from bayesij.report.columns import column_definitions, index_as_columns
from bayesij.report.html import html_body, html_page
from bayesij.report.progress import Progress, check_progress
from bayesij.report.summary import (
    fragile,
    ij_comparison,
    summary_bullets,
    target_label,
    target_words,
    unit_words,
)
from bayesij.stats.amip import (
    AmipResult,
    asked_target,
    check_search_options,
    check_target,
    fit_draws,
    gradient_arrays,
    looks_like_scale,
    one_signed,
)
from bayesij.stats.amip_matched import matched_answers, matching_density
from bayesij.stats.audit_pass import audit_pass
from bayesij.stats.convergence import (
    Convergence,
    bfmi_of,
    convergence_of_draws,
    divergent_of,
)
from bayesij.stats.integrated import integrated_terms, recovered_terms
from bayesij.stats.jackknife import IJCovariance, ij_covariance, integrated_posterior

# Aliased: audit() has arguments named loo, waic and amip.
from bayesij.stats.loo import LooResult
from bayesij.stats.loo import loo as compute_loo
from bayesij.stats.power_scaling import psense
from bayesij.stats.waic import WaicResult

__all__ = ["audit", "Audit", "AuditSettings"]

#: Influence figures in a report: one per quantity up to this many (the rest named).
MAX_INFLUENCE_FIGURES = 12


@dataclass(frozen=True)
class Audit:
    """Everything :func:`audit` computed, and the report built from it (frozen, as every
    result: ``dataclasses.replace`` makes a changed copy).

    Attributes
    ----------
    quantities : list of str
        The quantities audited (see :func:`audit`'s ``var_names``).
    units : Units
        The exchangeable unit and how it was found (:func:`bayesij.data.structure.find_units`).
    local : list of str
        The audited quantities that are local (per unit: group effects, non-centred offsets,
        per-observation values); the IJ-vs-posterior comparison does not apply to them.
    offsets : list of str
        The audited quantities that are non-centred offsets (``z_a`` of ``a = mu + sigma
        z_a``; ``Fit.structure.auxiliaries``): standard normal by construction, reported in
        the tables when asked for, never in the verdict.
    unit_effects : list of str
        Posterior variables over the units' own dim (a hierarchy's group effects): the IJ
        over those units then approximates the weight bootstrap, not a bootstrap drawing
        new units, and its comparison with the posterior sd is "undetermined".
    influence : xarray.Dataset
        :func:`bayesij.influence` (psi, mcse).
    ij : IJCovariance
        With the linearity check attached.
    loo, waic : LooResult, WaicResult or None
        Over the units (leave-one-group-out when grouped).
    loo_observations : LooResult or None
        When grouped: PSIS-LOO over the observations, as ``az.loo`` computes it.
    ij_integrated : IJCovariance or None
        With ``marginal_log_lik``: the IJ of the global quantities over the units'
        integrated log-likelihoods (:func:`bayesij.stats.jackknife.integrated_ij`), the
        cluster bootstrap's approximation; a hierarchy's IJ-vs-posterior verdicts come
        from it.
    loo_integrated : LooResult or None
        With ``marginal_log_lik`` (and ``loo``): leave-one-unit-out PSIS over the units'
        integrated log-likelihoods, the same elpd as ``loo`` (``log p(y_g | y_-g)``) with
        the group's own effect integrated instead of reweighted (k-hat far smaller); the
        verdict's LOO sentence reads it.
    integrated_from : str
        Where the integrated log-likelihoods came from when the audit recovered them from
        the draws (:func:`~bayesij.stats.integrated.recovered_terms`: ``"z ~ N(0, 1),
        entering as sd_u * z, of the Poisson GLMM recovered from the draws"``); empty when
        they were given or the model's.
    amip : dict
        ``(quantity, target) -> AmipResult``, exactly what :func:`bayesij.amip` returns for
        the same question.
    skipped : dict
        ``(quantity, target) -> reason`` for targets not searched (sign targets of
        one-signed quantities named like scales, such as ``sigma``).
    sensitivity : pandas.DataFrame or None
        :func:`bayesij.psense` of the quantities, when a log prior was available.
    prior_selection : tuple of str or None
        The ``log_prior`` terms power-scaled when the fit is hierarchical: its top-level
        priors only (``Fit.structure``); the group-level terms (the effects' distribution,
        a non-centred offset's ``N(0, 1)``) are the model, not a prior the user chose.
        None: the whole log prior.
    comparison : pandas.DataFrame or None
        :func:`bayesij.compare` with stacking weights of this fit (``"audited"``) and the
        fits given in ``compare_with``.
    description : str
        The posterior audited.
    control_variates : bool
        Whether the AMIP influences used zero-variance control variates
        (``grad_log_posterior``).
    convergence : Convergence or None
        :func:`bayesij.convergence` of the audited quantities (R-hat, bulk and tail ESS,
        divergences): draws that have not converged are the verdict's first sentence.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> report = bayesij.audit(post, settings={"targets": ("sign",)})
    >>> report.to_markdown().startswith("# ")
    True
    """

    quantities: list
    influence: object
    ij: IJCovariance
    loo: LooResult | None
    waic: WaicResult | None
    amip: dict = field(default_factory=dict)
    description: str = ""
    skipped: dict = field(default_factory=dict)
    sensitivity: pd.DataFrame | None = None
    comparison: pd.DataFrame | None = None
    units: Units = field(default_factory=lambda: Units("observation", None, "no groups given"))
    local: list = field(default_factory=list)
    offsets: list = field(default_factory=list)
    unit_effects: list = field(default_factory=list)
    loo_observations: LooResult | None = None
    ij_integrated: IJCovariance | None = None
    loo_integrated: LooResult | None = None
    integrated_from: str = ""
    n_quantities_available: int = 0
    method: str = "reweighted"
    not_computed: list = field(default_factory=list)
    prior_selection: tuple | None = None
    control_variates: bool = False
    convergence: Convergence | None = None

    @property
    def unit_name(self) -> str:
        return self.units.name

    @property
    def comparison_table(self) -> pd.DataFrame:
        """Per quantity, the IJ-vs-posterior verdict and its reason
        (:func:`bayesij.report.summary.ij_comparison`)."""
        return ij_comparison(self)

    # ----------------------------------------------------------------- plain words
    def fragile(self) -> list[AmipResult]:
        """AMIP results whose target a handful of units reaches, smallest sets first."""
        return fragile(self.amip)

    def summary(self) -> list[str]:
        """The verdict: at most eight one-sentence findings, most consequential first."""
        return summary_bullets(self)

    def heading(self) -> str:
        """What was audited, over which unit and why (the line above the summary)."""
        n_units = self.ij.n_units
        unit = unit_words(self.unit_name, n_units)
        text = f"Units: {unit} ({self.units.reason})."
        if self.units.others:
            text += f" Other groupings in the fit: {', '.join(self.units.others)} (groups=)."
        if self.integrated_from:
            text += (
                f" Their terms with their own effect integrated out, which the IJ verdicts, "
                f"the LOO and the AMIP answers read: {self.integrated_from} "
                "(marginal_log_lik= or the model's density to give the model's own)."
            )
        shown = len(self.quantities)
        available = self.n_quantities_available or shown
        text += (
            f" Quantities: {shown} of {available}"
            + (
                f" ({shown - len(self.local)} global, {len(self.local)} local)"
                if self.local
                else ""
            )
            + (" — choose with var_names." if available > shown else ".")
        )
        return text

    def skipped_words(self) -> list[str]:
        """Why targets were not searched, one line per reason."""
        lines = []
        scales = sorted({q for (q, _), why in self.skipped.items() if why == "one-signed scale"})
        if scales:
            lines.append(
                f"Sign targets skipped for {', '.join(scales)}: every draw is positive and the "
                "name is a scale's, so its sign cannot change."
            )
        halved = sorted({q for (q, _), why in self.skipped.items() if why.startswith("scale:")})
        if halved:
            lines.append(
                f"Significance of the scales {', '.join(halved)} asked as halving their mean: "
                "mean - 1.96 sd of a positive scale tests nothing."
            )
        constant = sorted({q for (q, _), why in self.skipped.items() if why == "constant"})
        if constant:
            lines.append(
                f"No influence search for {', '.join(constant)}: constant over the draws, so "
                "no data can move it."
            )
        if self.amip and self.method == "linear":
            lines.append(
                "Influential sets by the linear method: first-order predictions from the "
                "influence scores, not re-estimated by reweighting the draws."
            )
        if self.amip and self.control_variates:
            lines.append(
                "Influence scores of the influential-set searches estimated with "
                "zero-variance control variates from the log posterior's gradient (smaller "
                "Monte Carlo error than the plain covariances)."
            )
        matched = [
            f"{r.quantity} {target_label(r)}"
            for r in self.amip.values()
            if r.decided_by.startswith("moment matching")
        ]
        if matched:
            lines.append(
                "Set removals worked out by moment matching the draws with the model density "
                f"(k-hat below its threshold): {', '.join(matched)}; their answers and change "
                "intervals are those removals'."
            )
        return lines + list(self.not_computed)

    # ----------------------------------------------------------------- tables and figures
    def tables(self) -> dict[str, pd.DataFrame]:
        """The report's tables by title (each defined in :data:`bayesij.report.columns.COLUMNS`)."""
        tables = {"Standard errors (posterior vs IJ)": self._se_table()}
        if self.convergence is not None:
            tables["Convergence (R-hat, ESS)"] = self.convergence.table
        if self.amip:
            rows = pd.concat([_amip_row(r) for r in self.amip.values()], ignore_index=True)
            tables["Influential subsets (AMIP)"] = rows.set_index(["quantity", "target"])
        if self.ij.linearity is not None:
            linearity = self.ij.linearity.table()
            linearity["refit_first"] = linearity["refit_first"].map(lambda ids: _ids(ids, 3))
            tables["Linearity of the IJ"] = linearity
        tables[f"Most influential {unit_words(self.unit_name)} (|psi|)"] = self._top_units()
        if self.loo is not None:
            tables["PSIS-LOO"] = self.loo.estimates()
            tables["Pareto k-hat"] = self.loo.pareto_k_table()
        if self.loo_observations is not None:
            tables["PSIS-LOO over observations (as az.loo)"] = self.loo_observations.estimates()
        if self.waic is not None:
            tables["WAIC"] = self.waic.estimates()
        if self.sensitivity is not None:
            title = "Power-scaling sensitivity"
            if self.prior_selection is not None:
                title += f" (top-level priors: {', '.join(self.prior_selection)})"
            tables[title] = self.sensitivity
        if self.comparison is not None:
            tables["Model comparison (PSIS-LOO, stacking weights)"] = self.comparison
        return tables

    def _se_table(self) -> pd.DataFrame:
        """Per quantity, the sds its verdict reads (the IJ over the integrated group terms
        where the verdict is judged by it), the verdict and its reason."""
        columns = ["posterior_sd", "ij_sd", "sd_ratio", "mcse_ij_variance"]
        table = self.ij.table()[columns].assign(draws_needed=self.ij.draws_needed)
        comparison = self.comparison_table
        integrated = comparison.index[comparison["why"] == "integrated"]
        if len(integrated):
            judged = self.ij_integrated
            other = judged.table()[columns].assign(draws_needed=judged.draws_needed)
            table.loc[integrated] = other.loc[integrated].to_numpy()
        return table.join(comparison[["verdict", "reason"]])

    def _top_units(self, n: int = 5) -> pd.DataFrame:
        psi = self.influence["psi"].to_pandas()
        rows = {
            q: psi.loc[q].abs().sort_values(ascending=False).index[:n].tolist()
            for q in self.quantities
        }
        table = pd.DataFrame.from_dict(
            rows, orient="index", columns=[_ordinal(i + 1) for i in range(min(n, psi.shape[1]))]
        )
        table.index.name = "quantity"
        return table

    def figures(self):
        """``(title, figure)`` pairs, made one at a time (close each after use): influence
        per quantity, IJ vs posterior sd, k-hat, and one AMIP figure per quantity whose
        conclusion a search reached or left undetermined."""
        import matplotlib.pyplot as plt

        from bayesij import plots

        for q in self.quantities[:MAX_INFLUENCE_FIGURES]:
            fig, ax = plt.subplots(figsize=(6.4, 3.0))
            plots.plot_influence(self.influence, q, ax=ax, unit=self.unit_name)
            yield f"Influence on {q}", fig
        fig, ax = plt.subplots(figsize=(4.8, 4.2))
        plots.plot_ij(self.ij, ax=ax)
        yield "IJ vs posterior sd", fig
        if self.loo is not None:
            fig, ax = plt.subplots(figsize=(6.4, 3.0))
            plots.plot_khat(self.loo, ax=ax, unit=self.unit_name)
            yield "Pareto k-hat", fig
        for result in self._amip_to_plot().values():
            fig, ax = plt.subplots(figsize=(6.4, 3.4))
            plots.plot_amip(result, ax=ax, units=unit_words(self.unit_name))
            yield f"AMIP: {target_words(result)}", fig

    def figure_note(self) -> str:
        """What the figures leave out, said (empty when nothing is)."""
        n = len(self.quantities)
        if n <= MAX_INFLUENCE_FIGURES:
            return ""
        return (
            f"Influence figures for the first {MAX_INFLUENCE_FIGURES} of {n} quantities; "
            "plots.plot_influence(audit.influence, name) draws any other."
        )

    def _amip_to_plot(self) -> dict:
        """Per quantity, the most consequential search that reached (or may reach) its
        target: the smallest reached set, else an undetermined one."""
        chosen = {}
        for result in sorted(self.amip.values(), key=lambda r: (not r.reachable, r.n_drop)):
            if result.reachable or result.undetermined:
                chosen.setdefault(result.quantity, result)
        return chosen

    # ----------------------------------------------------------------- renderings
    def to_markdown(self) -> str:
        """The report as Markdown (heading, summary, then the tables with their columns
        defined). Names from the data are escaped, so the text is safe to render."""
        parts = ["# Model audit", "", _escape_md(self.description, line=True), ""]
        parts += [_escape_md(self.heading(), line=True), "", "## Summary", ""]
        parts += [f"- {_escape_md(line, line=True)}" for line in self.summary()]
        for line in self.skipped_words():
            parts += ["", _escape_md(line, line=True)]
        for title, table in self.tables().items():
            parts += ["", f"## {_escape_md(title)}", "", _markdown_table(table)]
            defined = column_definitions(table)
            if defined:
                parts += [""] + [f"- `{c}`: {d}" for c, d in defined.items()]
        return "\n".join(parts) + "\n"

    def _repr_html_(self) -> str:

        return html_body(self, figures=False)

    def to_html(self, path) -> str:
        """Write a single self-contained HTML file (figures embedded as PNG); returns the
        path."""

        page = html_page(self)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
        return str(path)

    def to_csv(self, folder) -> str:
        """Write the audit for other languages to read (R's ``read.csv`` and jsonlite):
        each of :meth:`tables` as a CSV file (index columns first; an unnamed one is
        ``row``: ``elpd_loo``, ``p_loo``...) and ``index.json`` with
        the heading, the summary and, per table, its title, file and index columns; returns
        the path of ``index.json``. The folder is made if it does not exist.

        Examples
        --------
        >>> import json, pathlib, tempfile, numpy as np, bayesij
        >>> rng = np.random.default_rng(0)
        >>> y = rng.normal(size=50)
        >>> mu = rng.normal(y.mean(), 0.15, size=(2, 400, 1))
        >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
        >>> folder = tempfile.mkdtemp()
        >>> index = bayesij.audit(post, settings={"amip": False}).to_csv(folder)
        >>> [t["file"] for t in json.loads(pathlib.Path(index).read_text())["tables"]][:2]
        ['standard_errors.csv', 'convergence.csv']
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise fail("folder", f"the file {str(folder)!r}", "a folder to write the tables in")
        folder.mkdir(parents=True, exist_ok=True)
        listed, used = [], set()
        for title, table in self.tables().items():
            name = _file_name(title, used)
            frame, index = index_as_columns(table)
            frame.to_csv(folder / name, index=False)
            listed.append({"title": title, "file": name, "index": index})
        contents = {
            "heading": self.heading(),
            "description": self.description,
            "summary": self.summary(),
            "tables": listed,
        }
        path = folder / "index.json"
        path.write_text(json.dumps(contents, indent=1, ensure_ascii=False), encoding="utf-8")
        return str(path)

    def __str__(self) -> str:
        return self.to_markdown()


def _file_name(title: str, used: set) -> str:
    """A table's file name from its title's first words (``'Standard errors (posterior vs
    IJ)'`` -> ``standard_errors.csv``), made unique within ``used``."""
    words = re.findall(r"[a-z0-9]+", title.split("(")[0].lower()) or ["table"]
    stem = "_".join(words)
    name, k = f"{stem}.csv", 2
    while name in used:
        name, k = f"{stem}_{k}.csv", k + 1
    used.add(name)
    return name


def _amip_row(result: AmipResult) -> pd.DataFrame:
    size = result.size_interval
    change = result.change_interval
    row = {  # the answer and the units first: visible without scrolling
        "quantity": result.quantity,
        "target": target_label(result),
        "answer": (result.answer or ("reached" if result.reachable else "not reachable"))
        + (" (upper bound)" if result.upper_bound else ""),
        "n_drop": result.n_drop if result.reachable else np.nan,
        "dropped": _ids(result.drop_ids, 5) if result.reachable else "",
        "size_interval": _interval(size, "{:.0f}") if size else "",
        "metric": result.metric,
        "original": result.original_value,
        "predicted_change": result.predicted_change,
        "split_change": result.monte_carlo.get("split", np.nan) if result.monte_carlo else np.nan,
        "change_interval": _interval(change, "{:.3g}") if change else "",
    }
    if result.verification is not None:
        row.update(
            refit_change=result.verification["change"], refit_reached=result.verification["reached"]
        )
    return pd.DataFrame([row])


def _interval(bounds, fmt: str) -> str:
    """An interval's two ends as text, an infinite end with its sign (a change unbounded
    downwards is ``-inf – x``); a size interval wholly past the limit (``(inf, inf)``) is
    ``beyond alpha_max``."""
    low, high = bounds
    if np.isposinf(low) and np.isposinf(high):
        return "beyond alpha_max"

    def show(value: float) -> str:
        if np.isnan(value):
            return "n/a"
        return ("inf" if value > 0 else "-inf") if np.isinf(value) else fmt.format(value)

    return f"{show(low)} – {show(high)}"


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _ids(ids, limit: int = 8) -> str:
    shown = ", ".join(map(str, list(ids)[:limit]))
    return shown + (", ..." if len(ids) > limit else "")


#: Characters that end a line in some renderer (controls, line and paragraph separators).
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
#: What would make a line of text a heading, quote, list item or rule.
_BLOCK_START = re.compile(r"^(\s*)([#>+\-=*~_]|\d+[.)])")


def _escape_md(text, line: bool = False) -> str:
    """Markdown-safe text from names in the data: one line (newlines and other control
    characters become spaces, so no heading or image can be started on a line of its own),
    HTML-significant characters, backslashes, backticks and asterisks escaped, and ``](``
    broken so that no inline link or image (``[x](javascript:...)``, ``![](tracking-url)``)
    can form. ``line=True``: text that starts a line or list item, whose first character
    could otherwise open a heading, quote or list."""
    text = _LINE_BREAKS.sub(" ", str(text))
    text = html.escape(text, quote=False)
    for char in ("\\", "`", "*"):
        text = text.replace(char, "\\" + char)
    text = text.replace("](", "]\\(")
    if line:
        text = _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text, count=1)
    return text


def _markdown_table(table: pd.DataFrame) -> str:
    frame = table.reset_index()
    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    header = [_escape_md(c).replace("|", "/") for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value) -> str:
    """A table cell: 4 significant digits, and a blank (never a number) for NaN."""
    if isinstance(value, (float, np.floating)):
        return "" if np.isnan(value) else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        value = ", ".join(map(str, value))
    return _escape_md(value).replace("|", "/")


@dataclass(frozen=True)
class AuditSettings:
    """What :func:`audit` computes and how it runs, set together (as
    :class:`~bayesij.PsisOptions` sets how PSIS smooths); each field checked when set.

    Parameters
    ----------
    targets : tuple of str, default ("sign", "significance")
        AMIP targets for every quantity (see :func:`bayesij.amip`).
    loo, waic, amip : bool, default True
        Which parts to compute.
    method : {None, "reweighted", "linear"}, optional
        AMIP method. None: "reweighted" for a log-likelihood in memory, "linear" for a lazy
        one (a dask-backed ``log_likelihood`` group or :func:`bayesij.loglik_function`,
        read one block at a time: the reweighted search revisits the whole matrix at every
        step). The report names the method.
    alpha_max : float, default 0.1
        Largest share of units an influential set may hold (as :func:`bayesij.amip`).
    max_refits : int, default 6
        Refits per AMIP question with a ``backend`` (on a logistic regression with sets of
        120-300 of 3020, 6 refits found sets within 4 % of the estimating equation's
        iterated AMIP).
    progress : bool, optional
        One line per stage on standard error while the audit works (``bayesij audit
        [2.1 s]: one pass over 4000 draws x 3020 observations ...``). None: shown in a
        terminal and in Jupyter, silent in scripts and logs; True or False to decide.
    client : dask.distributed.Client, optional
        Run the pass over a lazy log-likelihood's blocks as tasks on this cluster (a
        function's blocks are evaluated there, a dask chunk is computed there): each worker
        holds a block at a time and returns per-unit results; the linear AMIP sets are
        summed on the workers too. The columns of the units the AMIP's second-order model
        reads (at most 4096 per question) come here. A log-likelihood in memory is audited
        here, as without a client (as :func:`bayesij.loo`'s ``client``).

    Examples
    --------
    >>> import bayesij
    >>> settings = bayesij.AuditSettings(targets=("sign",), waic=False, progress=False)
    >>> settings.targets, settings.max_refits
    (('sign',), 6)
    """

    targets: tuple = ("sign", "significance")
    loo: bool = True
    waic: bool = True
    amip: bool = True
    method: str | None = None
    alpha_max: float = 0.1
    max_refits: int = 6
    progress: bool | None = None
    client: object = None

    def __post_init__(self):
        for name in ("loo", "waic", "amip"):
            check_flag(getattr(self, name), name)
        targets = tuple(check_labels(self.targets, "targets"))
        for target in targets:
            check_target(target, "targets")
        object.__setattr__(self, "targets", targets)
        check_search_options(self.alpha_max, self.method or "reweighted")
        check_positive_int(self.max_refits, "max_refits")
        check_progress(self.progress)
        if self.client is not None and not callable(getattr(self.client, "submit", None)):
            raise fail("client", f"a {type(self.client).__name__}", "a dask.distributed Client")


def audit_settings(settings) -> AuditSettings:
    """``settings`` as :class:`AuditSettings`: None (every default), one, or a mapping of
    some of its fields (unknown names refused, naming the fields there are)."""
    if settings is None:
        return AuditSettings()
    if isinstance(settings, AuditSettings):
        return settings
    names = [f.name for f in fields(AuditSettings)]
    if not isinstance(settings, Mapping):
        raise fail(
            "settings",
            f"a {type(settings).__name__}",
            f"an AuditSettings or a mapping of some of its fields ({', '.join(names)})",
        )
    unknown = [key for key in settings if key not in names]
    if unknown:
        raise fail("settings", f"the key {unknown[0]!r}", f"fields of AuditSettings: {names}")
    return AuditSettings(**settings)


def audit(
    data,
    *,
    groups=None,
    quantities=None,
    var_name=None,
    var_names=None,
    filter_vars=None,
    settings=None,
    log_prior=None,
    compare_with: dict | None = None,
    grad_log_posterior=None,
    backend=None,
    marginal_log_lik=None,
) -> Audit:
    """Audit a fit: which conclusions hang on a few units, whether posterior and
    frequentist standard errors agree, how reliable LOO is, and what to refit.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        Draws of the quantities and the pointwise log-likelihood.
    groups : None, False, str or array_like, optional
        The exchangeable unit. None: read from the fit — an integer index variable of
        ``constant_data`` over the observations into a posterior dim (PyMC's
        ``pm.Data("firm_idx", ..., dims="obs")`` indexing ``a`` of dims ``"firm"``), or a
        coordinate of the observations named like a posterior dim; a Posterior's own groups;
        else the observations. A string names such a dim, coordinate or ``constant_data``
        variable; labels give the group of each observation; False: the observations.
        Influence, IJ, LOO (leave-one-group-out), linearity and AMIP then run over the
        groups, and the report says which unit it used and why.
    quantities : str or list of str, optional
        Variables or elements (``'a[General Motors]'``, ``'a[1]'``) instead of
        ``var_names``.
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.
    var_names : str or list of str, optional
        Posterior variables to audit, as ArviZ reads them (``"~z_a"`` excludes). Default:
        the global variables — those with no dim over the units (the observations' dims
        and the group dim). Per-group effects, non-centred offsets and per-observation
        values do not concentrate as data grow; audit them by naming them.
    filter_vars : {None, "like", "regex"}, optional
        How ``var_names`` matches (as in ArviZ).
    settings : AuditSettings or mapping, optional
        What to compute and how to run (:class:`AuditSettings`: ``targets``, ``loo``,
        ``waic``, ``amip``, ``method``, ``alpha_max``, ``max_refits``, ``progress``,
        ``client``), or a mapping of some of its fields (``{"targets": ("sign",)}``); None:
        every default.
    log_prior : str, callable or array_like, optional
        The log prior at each draw (as :func:`bayesij.psense`); the report then gains a
        power-scaling sensitivity section. Default: ``data``'s ``log_prior`` group when it
        has one.
    compare_with : dict of str to data, optional
        Other fits of the same observations (anything :func:`bayesij.loo` reads, or their
        LooResults); the report then compares them with this fit (named ``"audited"``) by
        PSIS-LOO with stacking weights.
    grad_log_posterior : density or (array_like, array_like), optional
        The log posterior's gradient for the AMIP influences' zero-variance control
        variates (far smaller Monte Carlo error where a unit's log-likelihood is
        heavy-tailed across draws, so sets are not padded to beat it): a model density with
        ``grad_log_posterior(fit) -> (gradient, unconstrained)`` at the fit's draws
        (:class:`bayesij.refit.PyStanDensity`, :class:`bayesij.refit.PyMCDensity`) or those
        two arrays, each (n_chains, n_draws, P), as :func:`bayesij.amip`'s
        ``grad_log_posterior`` and ``unconstrained``. The report says
        so. Best with ``method="linear"`` (the reweighted search reweights the plain
        draws). Without a ``backend``, a density with ``log_prob`` and ``log_lik_i`` also
        decides the answers the draws leave open over observations by
        moment matching their sets' removal, as :func:`bayesij.amip`; and one that
        integrates a hierarchy's unit effects (``group_log_lik``:
        :class:`bayesij.refit.PyMCDensity`, :class:`bayesij.refit.PyStanDensity`) gives
        the integrated terms when no ``marginal_log_lik`` is given, as a backend that
        holds the model does.
    backend : refit backend, optional
        The model, to refit without candidate sets (:mod:`bayesij.refit`:
        ``refit.PyMCBackend(model, ...)``, ``refit.PyStanBackend(code, data, ...)``,
        ``refit.CmdStanPyBackend``, or any object with ``fit(weights) -> Posterior``). With
        it every AMIP question is answered by refits in the loop, as
        :func:`bayesij.amip` with ``backend=`` does: the cheap search's claim is refitted,
        then bisected to the smallest set a refit confirms; the answers, sets and intervals
        are the refits'. Without it, answers the draws cannot decide say so ("a refit
        decides") with about how many refits would. A backend that holds the model
        (``refit.PyMCBackend``) also integrates a hierarchy's unit effects out when no
        ``marginal_log_lik`` is given (its ``group_log_lik``, over the first of the fit's
        unit effects that is a vector with one unbounded element per unit), and the
        verdicts are judged over those terms as with ``marginal_log_lik``.
    marginal_log_lik : array_like of shape (n_chains, n_draws, G), optional
        For a hierarchy grouped by its units: each unit's log-likelihood with its own
        effects integrated out. Paired by label: an ``xarray.DataArray`` whose last dim
        is labelled with the units' labels; an array's columns are the levels of the
        grouping's posterior dim in its order (index 0, 1, ... as the helpers below take
        group codes; unused levels allowed), or, for groups given as labels, the units in
        the order of ``report.influence``'s unit coordinate. From
        :func:`bayesij.array.hierarchy.normal_group_log_lik` (closed form) or
        :func:`~bayesij.array.hierarchy.intercept_group_log_lik` (adaptive quadrature,
        any likelihood with a normal random intercept). The global quantities'
        IJ-vs-posterior verdicts then come from the IJ over these integrated terms, which
        approximates the cluster bootstrap (``ij_integrated``), instead of "undetermined";
        their AMIP questions are answered over them (dropping a group removes its
        integrated term: the draws decide where the conditional terms cannot); and from
        :meth:`bayesij.refit.PyMCDensity.group_log_lik` for any PyMC likelihood.

    Returns
    -------
    Audit
        ``summary()`` (at most eight sentences), ``to_markdown()``, ``to_html(path)`` and
        ``_repr_html_`` for notebooks.

    Notes
    -----
    The IJ-vs-posterior comparison (and its "may be misspecified") applies only to global
    quantities, only when the IJ variance is Monte Carlo-precise and its linear
    approximation reliable; otherwise the report says "undetermined" (with how many draws
    would decide) or "not applicable" (with why). Each piece of work is done once, in one
    pass over the draws (:func:`bayesij.stats.audit_pass.audit_pass`): the influence
    scores and IJ sums, PSIS-LOO with the quantities' leave-one-out means (the linearity
    check's, no stored weights), WAIC and every AMIP metric's influence; the reweighted
    searches of every quantity and target then share their passes over the draws
    (:func:`bayesij.array.amip_lockstep.run_in_lockstep`).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> report = bayesij.audit(post, settings={"targets": ("sign",)})
    >>> report.units.name, len(report.summary()) <= 8
    ('observation', True)

    References
    ----------
    Giordano, R. & Broderick, T. (2023). The Bayesian infinitesimal jackknife for variance.
    Broderick, T., Giordano, R. & Meager, R. (2020). An automatic finite-sample robustness
    metric: when can dropping a little data make a big difference? arXiv:2011.14999.
    """
    settings = audit_settings(settings)
    loo, waic, amip, targets = settings.loo, settings.waic, settings.amip, settings.targets
    alpha_max, max_refits, client = settings.alpha_max, settings.max_refits, settings.client
    say = Progress(settings.progress, "audit")
    say.stage("reading the fit")
    fit = read(data, groups=groups, var_name=var_name)
    units = fit.units
    chosen, n_available = _chosen_quantities(fit, var_names, filter_vars, quantities)
    source = fit.source(
        quantities=chosen,
        need_quantities=True,
        whole_matrix={"method": settings.method if settings.method == "reweighted" else None},
    )
    method = settings.method or ("linear" if source.lazy else "reweighted")
    if source.lazy and log_prior is not None:
        raise fail(
            "log_prior",
            "a log prior with a lazy log-likelihood",
            "no log_prior: power-scaling sensitivity needs the whole draws x units matrix in "
            "memory",
        )
    names = list(source.quantity_names)
    with warnings.catch_warnings():  # every diagnostic is part of the report
        warnings.simplefilter("ignore")
        questions, skipped = _questions(source, names, targets) if amip else ([], {})
        gradient = gradient_arrays(grad_log_posterior, fit) if questions else (None, None)
        say.stage(
            f"one pass over {source.n_draws} draws x {unit_words(units.name, source.n_units)}: "
            f"influence, IJ, LOO, WAIC, {len(questions)} AMIP question(s)"
        )
        parameters = fit_draws(fit) if questions else None  # the AMIP models'
        found = audit_pass(
            source,
            questions,
            method=method,
            alpha_max=alpha_max,
            score=gradient[0],
            unconstrained=gradient[1],
            parameters=parameters,
            client=client,
        )
        integrated_from = ""
        if marginal_log_lik is None and units.grouped:  # a holder of the model may integrate
            holder = backend if backend is not None else grad_log_posterior
            marginal_log_lik, integrated_from = _terms_from_model(fit, holder, say)
        integrated, integrated_loo, integrated_post = _integrated(
            source,
            names,
            fit,
            units,
            marginal_log_lik,
            found.ij.influence,
            loo,
            parameters.model if parameters is not None else None,
        )
        answers = dict(zip(questions, found.amip, strict=True))
        if backend is None and matching_density(grad_log_posterior) is not None:
            say.stage("AMIP answers left open: their sets' removal by moment matching")
            answers = matched_answers(answers, source, grad_log_posterior, gradient[1])
        if integrated_post is not None and backend is None:  # with one, refits answer all
            answers.update(_amip_integrated(integrated_post, answers, alpha_max, method))
        if backend is not None and questions:
            say.stage(f"refits in the loop: {len(questions)} question(s), up to {max_refits} each")
            answers, n_refits = _refitted(
                fit,
                answers,
                backend,
                max_refits,
                gradient,
                alpha_max,
                method,
                on_refit=lambda k, dropped: say.stage(
                    f"refit {k}: without {dropped} of {fit.n_obs} observations"
                ),
            )
            say.stage(f"refits in the loop: {n_refits} distinct set(s) refitted")
        loo_observations = None
        if loo and units.grouped:
            say.stage("LOO over the observations")
            loo_observations = compute_loo(fit, groups=False)
        sensitivity, selection, not_computed = None, None, []
        if not source.lazy:
            if log_prior is not None or fit.has_log_prior:
                say.stage("power-scaling sensitivity")
            selection = _top_level_priors(fit, log_prior)
            sensitivity = _sensitivity(fit, names, log_prior, selection)
        elif fit.has_log_prior:
            not_computed.append(
                "Power-scaling sensitivity: the fit has a log prior, but the log-likelihood is "
                "lazy and psense needs the whole draws x units matrix in memory."
            )
        if compare_with:
            say.stage(f"LOO of {len(compare_with)} model(s) to compare with")
        result = Audit(
            quantities=names,
            influence=found.ij.influence,
            ij=replace(found.ij, linearity=found.linearity),
            loo=found.loo if loo else None,
            waic=found.waic if waic else None,
            amip=answers,
            skipped=skipped,
            description=_description(source),
            units=units,
            local=fit.local_quantities(names),
            offsets=[q for q in names if base_name(q) in fit.structure.auxiliaries],
            unit_effects=list(fit.structure.unit_effects),
            n_quantities_available=n_available,
            method=method,
            control_variates=gradient[0] is not None,
            ij_integrated=integrated,
            loo_integrated=integrated_loo,
            integrated_from=integrated_from,
            convergence=_convergence(fit, source, names),
            loo_observations=loo_observations,
            sensitivity=sensitivity,
            prior_selection=selection,
            not_computed=not_computed,
            comparison=_comparison(found.loo, compare_with, fit.unit_labels()),
        )
    say.done()
    return result


def _convergence(fit, source, names: list) -> Convergence | None:
    """:func:`bayesij.convergence` of the audited quantities' draws (None with fewer than
    4 draws a chain)."""
    draws = source.quantity_draws
    if draws.shape[1] < 4:
        return None
    return convergence_of_draws(draws, names, divergent_of(fit), bfmi_of(fit))


def _terms_from_model(fit, holder, say):
    """The units' log-likelihoods with their own effect integrated out, from a backend or
    density that holds the model (``group_log_lik``: :class:`bayesij.refit.PyMCBackend`,
    :class:`bayesij.refit.PyMCDensity`; anything else, gradient arrays or None, gives
    None), over the
    first of the fit's unit effects that is one unbounded element per unit
    (:func:`~bayesij.stats.integrated.integrated_terms`); None when ``holder`` cannot, or
    no effect is such (two effects per unit, a transformed one: the verdicts then stay
    undetermined and name the cluster bootstrap)."""
    terms, variable = integrated_terms(fit, holder)
    if terms is not None:
        say.stage(f"each {fit.units.name}'s {variable} integrated out (the model's)")
        return terms, ""
    if fit.structure.unit_effects:
        say.stage("a GLMM recovered from the draws, to integrate each unit's effect out")
    terms, words = recovered_terms(fit)
    return terms, words or ""


def _integrated(
    source, names: list, fit, units, marginal_log_lik, influence, loo: bool, parameters=None
):
    """The IJ of the global quantities over the units' integrated log-likelihoods, the
    leave-one-unit-out PSIS over them and the posterior the AMIP questions read there (None,
    None, None without them); refused for observations as the units (there is no group
    effect to integrate). That posterior holds the global ones among the second-order
    models' ``parameters`` (:func:`~bayesij.stats.amip.fit_parameters`) too: the
    integrated terms move with every global quantity, and an audit asked about ``mu``
    alone modelled mu's questions in mu alone, where the second-order model broke down
    and in ``mu``, ``tau`` and ``sigma`` decides ("not reachable", as the exact refits:
    tests/refit/test_cluster.py)."""
    if marginal_log_lik is None:
        return None, None, None
    if not units.grouped:
        raise fail(
            "marginal_log_lik",
            "integrated terms for a fit whose units are its observations",
            "a grouped fit (groups= or an index in the fit): one integrated term per group",
        )
    extra_draws, extra_names = parameters if parameters is not None else (None, [])
    local = set(fit.local_quantities(list(dict.fromkeys(names + list(extra_names)))))
    # Without a global quantity the IJ has nothing to judge; the LOO still needs draws.
    kept = [k for k, q in enumerate(names) if q not in local] or list(range(len(names)))
    unit_dim = next(d for d in influence.dims if d != "quantity")
    labels = list(influence[unit_dim].values)
    terms = fit.unit_columns(marginal_log_lik, labels)
    draws, asked = source.quantity_draws[..., kept], [names[k] for k in kept]
    post = integrated_posterior(draws, asked, terms, source.n_units, units=labels)
    ij, left_out = ij_covariance(post), (compute_loo(post) if loo else None)
    extra = [k for k, q in enumerate(extra_names) if q not in local and q not in asked]
    if extra:  # the AMIP questions' second-order models read every global quantity
        draws = np.concatenate([draws, extra_draws[..., extra]], axis=-1)
        named = asked + [extra_names[k] for k in extra]
        post = integrated_posterior(draws, named, terms, source.n_units, units=labels)
    return ij, left_out, post


def _amip_integrated(post, answers: dict, alpha_max: float, method) -> dict:
    """The AMIP questions of the global quantities answered over the units' integrated
    log-likelihoods (``post``: :func:`~bayesij.stats.jackknife.integrated_posterior`):
    dropping a group removes its integrated term from the global quantities' posterior,
    exactly, and the second-order model in the global quantities explains those terms
    (the conditional ones move with the group's own effect: their band stays open). On a
    normal hierarchy of 30 schools, mu's sign and sign-and-significance become "not
    reachable" from the draws (every set of 3 refitted in closed form agrees); its
    significance, 4 % short of the target, stays undetermined."""
    names = set(post.quantity_names)
    return {
        (quantity, target): replace(
            refitted_amip(
                post, quantity, asked_target(target, answer.z), alpha_max=alpha_max, method=method
            ),
            unit="group",  # the integrated posterior's units are the fit's groups
        )
        for (quantity, target), answer in answers.items()
        if quantity in names
    }


def _refitted(
    fit, answers: dict, backend, max_refits, gradient, alpha_max, method, on_refit=None
) -> tuple:
    """Every AMIP question answered by refits in the loop (:func:`bayesij.amip` with the
    same search options and ``backend``), and the distinct refits made: one refit of a set
    answers every question that drops it (:class:`~bayesij.refit.backends.OnceEach`), so
    no set is refitted twice."""
    once = OnceEach(backend, on_refit=on_refit)
    answered = {
        (quantity, target): refitted_amip(
            fit,
            quantity,
            asked_target(target, answer.z),
            alpha_max=alpha_max,
            method=method,
            backend=once,
            max_refits=max_refits,
            grad_log_posterior=gradient,
        )
        for (quantity, target), answer in answers.items()
    }
    return answered, once.n_refits


def _description(source) -> str:
    """The audited posterior in a line: the container's repr, or a lazy source's shape."""
    if source.posterior is not None:
        return repr(source.posterior)
    return (
        f"lazy log-likelihood: {source.n_chains} chains x {source.shape[1]} draws, "
        f"{source.n_units} observations in {len(source.bounds())} blocks; "
        f"{len(source.quantity_names)} quantit{'y' if len(source.quantity_names) == 1 else 'ies'}"
    )


def _chosen_quantities(fit, var_names, filter_vars, quantities) -> tuple[list, int]:
    """The quantities to audit (``quantities``, ``var_names``, else the global variables)
    and how many elements the posterior has in all."""
    sizes = fit.variable_sizes()
    variables = list(sizes)
    if quantities is not None:
        if var_names is not None:
            raise fail("var_names", repr(var_names), "None when quantities is given")
        return quantities, sum(sizes.values())
    if var_names is not None:
        return select_var_names(variables, var_names, filter_vars), sum(sizes.values())
    if filter_vars is not None:
        raise fail("filter_vars", repr(filter_vars), "None when var_names is not given")
    dims = fit.posterior_dims()
    chosen = [v for v in variables if not set(dims.get(v, ())) & fit.units.local_dims]
    if not dims and (fit.units.grouped or fit.units.local_variables):  # a Posterior: group
        # effects (one element per group, or found so by the log-likelihood)
        local = set(map(base_name, fit.local_quantities(fit.element_names())))
        chosen = [v for v in variables if v not in local]
    return (chosen or variables or None), sum(sizes.values())


#: A scale's significance is asked as this change of its mean, relative to the mean: can a
#: handful of units halve it (three counties carrying half of a group sd)?
SCALE_CHANGE = -0.5


def _questions(source, names, targets) -> tuple[list, dict]:
    """The AMIP questions (quantity, target) worth searching, and the skipped ones with
    why: constant quantities, and sign targets of one-signed quantities named like scales,
    whose significance is asked as halving their mean (``mean - z sd`` of a positive scale
    tests nothing). The searches run together (:func:`bayesij.stats.audit_pass.audit_pass`)."""
    constant = dict(zip(names, constant_columns(source.quantity_draws), strict=True))
    questions, skipped = [], {}
    for k, q in enumerate(names):
        draws = source.quantity_draws[..., k]
        scale = one_signed(draws) is not None and looks_like_scale(q)
        for t in targets:
            if constant[q]:
                skipped[(q, t)] = "constant"
            elif scale and t in ("sign", "sign_and_significance"):
                skipped[(q, t)] = "one-signed scale"
            elif scale and t == "significance":
                skipped[(q, t)] = "scale: asked as halving"
                questions.append((q, SCALE_CHANGE * float(draws.mean())))
            else:
                questions.append((q, t))
    return questions, skipped


def _sensitivity(fit, names, log_prior, selection) -> pd.DataFrame | None:
    """Power-scaling sensitivity when a log prior is given or the fit carries one."""
    if log_prior is None and not fit.has_log_prior:
        return None
    return psense(fit, log_prior=log_prior, quantities=names, prior_selection=selection)


def _top_level_priors(fit, log_prior) -> tuple | None:
    """The fit's top-level prior terms when its own ``log_prior`` group also holds
    group-level ones (None: scale it all, or the log prior given)."""
    if log_prior is not None or not fit.has_log_prior or not fit.structure.hierarchical:
        return None
    return fit.structure.top_level_priors or None


def _comparison(loo_result, compare_with, groups) -> pd.DataFrame | None:
    """PSIS-LOO comparison with stacking weights of this fit and ``compare_with``'s."""
    if compare_with is None:
        return None
    if not isinstance(compare_with, dict) or not compare_with or "audited" in compare_with:
        raise fail(
            "compare_with",
            repr(compare_with)[:80],
            "a non-empty dict of other fits by name (not 'audited', this fit's name)",
        )
    # Imported here: its stacking weights' optimiser and normal tails (scipy.optimize and
    # scipy.stats) cost an audit that compares nothing 70 MiB of memory.
    from bayesij.stats.compare import compare

    results = {"audited": loo_result}
    for name, other in compare_with.items():
        results[name] = other if isinstance(other, LooResult) else compute_loo(other, groups=groups)
    return compare(results, weights="stacking")
