"""The model audit: influence, IJ vs posterior standard errors, LOO, WAIC and influential
subsets for each quantity, summarised in plain words, as Markdown, notebook HTML or a
self-contained HTML file with the figures embedded."""

from __future__ import annotations

import base64
import html
import io
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bayesij.array.checks import check_flag, check_labels, constant_columns, fail
from bayesij.array.influence import InfluenceScores
from bayesij.data.inference_data import group_names, has_groups
from bayesij.data.source import as_source
from bayesij.stats.amip import (
    AmipResult,
    check_search_options,
    check_target,
    looks_like_scale,
    one_signed,
)
from bayesij.stats.amip import amip as compute_amip
from bayesij.stats.compare import compare
from bayesij.stats.jackknife import IJCovariance, ij_covariance
from bayesij.stats.linearity import linearity

# Aliased: audit() has arguments named loo, waic and amip.
from bayesij.stats.loo import LooResult
from bayesij.stats.loo import loo as compute_loo
from bayesij.stats.power_scaling import psense
from bayesij.stats.waic import WaicResult
from bayesij.stats.waic import waic as compute_waic

__all__ = ["audit", "Audit"]

#: A conclusion "depends on a handful" when this few units (or this small a share) flip it.
HANDFUL, SMALL_SHARE = 5, 0.01


@dataclass
class Audit:
    """Everything :func:`audit` computed, and the report built from it.

    Attributes
    ----------
    quantities : list of str
    influence : xarray.Dataset
        :func:`bayesij.influence` (psi, mcse).
    ij : IJCovariance
        With the linearity check attached.
    loo, waic : LooResult, WaicResult or None
    amip : dict
        ``(quantity, target) -> AmipResult``, exactly what :func:`bayesij.amip` returns for
        the same question.
    skipped : dict
        ``(quantity, target) -> reason`` for targets not searched (sign targets of
        one-signed quantities named like scales, such as ``sigma``).
    sensitivity : pandas.DataFrame or None
        :func:`bayesij.psense` of the quantities, when a log prior was available.
    comparison : pandas.DataFrame or None
        :func:`bayesij.compare` with stacking weights of this fit (``"audited"``) and the
        fits given in ``compare_with``.
    description : str
        The posterior audited.
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

    # ----------------------------------------------------------------- plain words
    def fragile(self) -> list[AmipResult]:
        """AMIP results whose target a handful of units reaches."""
        return [
            r
            for r in self.amip.values()
            if r.reachable and (r.n_drop <= HANDFUL or r.prop_drop <= SMALL_SHARE)
        ]

    def summary(self) -> list[str]:
        """The opening summary: one sentence per finding."""
        lines = []
        fragile = self.fragile()
        for r in self.amip.values():
            if r in fragile:
                how = (
                    " (in part by a linear continuation: reweighting the draws became unreliable)"
                    if r.n_reweighted < r.n_drop and r.method == "reweighted"
                    else ""
                )
                lines.append(
                    f"The {_target_words(r)} of {r.quantity} depends on a handful "
                    f"of units: dropping {r.n_drop} of {r.n_units} "
                    f"({100 * r.prop_drop:.2g} %: {_ids(r.drop_ids)}) is predicted"
                    f"{how} to reverse it."
                )
        open_ = [r for r in self.amip.values() if r.undetermined]
        for r in open_:
            lines.append(
                f"Whether a handful of units decides the {_target_words(r)} of {r.quantity} "
                f"is undetermined by Monte Carlo error: about {r.draws_needed:.3g} draws "
                f"(now {r.n_draws}) would tell."
            )
        robust = [r for r in self.amip.values() if r not in fragile and r not in open_]
        if robust:
            words = ", ".join(
                f"the {_target_words(r)} of {r.quantity} ("
                + (
                    f"{r.n_drop} units, {100 * r.prop_drop:.2g} %"
                    if r.reachable
                    else f"not reachable by dropping up to {r.n_drop} units"
                )
                + ")"
                for r in robust
            )
            lines.append(f"Not decided by a handful of units: {words}.")
        scales = sorted({q for (q, _), why in self.skipped.items() if why != "constant"})
        if scales:
            lines.append(
                f"Sign targets skipped for {', '.join(scales)}: every draw is positive and the "
                "name is a scale's, so its sign cannot change."
            )
        constant = sorted({q for (q, _), why in self.skipped.items() if why == "constant"})
        if constant:
            lines.append(
                f"No influence search for {', '.join(constant)}: constant over the draws, so "
                "no data can move it."
            )
        lines += self._se_words()
        if self.loo is not None:
            bad = self.loo.bad_k_ids()
            if bad:
                lines.append(
                    f"PSIS-LOO is unreliable for {len(bad)} of {self.loo.n_units} "
                    f"units (k-hat above {self.loo.k_threshold:.2f}: {_ids(bad)})."
                )
            else:
                lines.append(
                    f"PSIS-LOO is reliable: every k-hat is below "
                    f"{self.loo.k_threshold:.2f} (elpd_loo {self.loo.elpd:.1f}, SE "
                    f"{self.loo.se:.1f})."
                )
        lines += self._sensitivity_words() + self._comparison_words()
        lines += self._refit_words()
        return lines

    def _sensitivity_words(self) -> list[str]:
        if self.sensitivity is None:
            return []
        return [
            f"Power-scaling sensitivity of {q}: prior {row.prior:.3f}, likelihood "
            f"{row.likelihood:.3f}"
            + (f" ({row.diagnosis})." if row.diagnosis != "-" else " (no concern).")
            for q, row in self.sensitivity.iterrows()
        ]

    def _comparison_words(self) -> list[str]:
        if self.comparison is None:
            return []
        weights = ", ".join(f"{name} {w:.2f}" for name, w in self.comparison["weight"].items())
        best = self.comparison.index[0]
        return [f"Stacking weights of the fits compared (best elpd_loo: {best}): {weights}."]

    def _se_words(self) -> list[str]:
        ratio = np.sqrt(np.clip(self.ij.ratio, 0, None))
        lines = []
        noisy = self._noise_dominated()
        if noisy:
            needed = self.ij.draws_needed
            words = ", ".join(
                f"{q} (about {needed[q]:.3g} draws would measure it)"
                if needed[q] > self.ij.n_draws
                else f"{q} (the data barely move it)"
                for q in noisy
            )
            lines.append(
                "IJ vs posterior sd undetermined for "
                f"{words}: Monte Carlo noise dominates the IJ variance."
            )
        ratio = ratio.drop(noisy)
        agree = [q for q in ratio.index if 0.8 <= ratio[q] <= 1.25]
        if agree:
            lines.append(
                "Posterior and frequentist (IJ) standard errors agree within 25 % "
                f"for {', '.join(agree)}."
            )
        for side, test in (("smaller", lambda r: r > 1.25), ("larger", lambda r: r < 0.8)):
            which = [q for q in ratio.index if q not in agree and test(ratio[q])]
            if which:  # one sentence for all quantities on the same side
                words = ", ".join(f"{q} ({ratio[q]:.2f})" for q in which)
                lines.append(
                    f"The posterior sd is {side} than the frequentist (IJ) sd for {words} "
                    "(IJ sd / posterior sd): the model may be misspecified for "
                    + ("it." if len(which) == 1 else "them.")
                )
        if self.ij.linearity is not None:
            verdicts = self.ij.linearity.verdict
            untrusted = [q for q in verdicts.index if verdicts[q] in ("doubtful", "unreliable")]
            if untrusted:
                lines.append(
                    "The IJ's linear approximation is doubtful or unreliable for "
                    f"{', '.join(untrusted)}: check it with an exact bootstrap "
                    "(bayesij.refit.bootstrap)."
                )
        return lines

    def _noise_dominated(self) -> list:
        """Quantities whose corrected IJ variance is within 2 MCSE of 0: no comparison with
        the posterior sd can be made from these draws."""
        corrected, mcse = self.ij.variance_corrected, self.ij.mcse
        constant = set(self.ij.constant)
        return [q for q in corrected.index if not corrected[q] > 2 * mcse[q] and q not in constant]

    def _refit_words(self) -> list[str]:
        lines = [
            f"Refit without {_ids(r.drop_ids)} to verify the {_target_words(r)} of "
            f"{r.quantity} (bayesij.refit.verify)."
            for r in self.fragile()
        ]
        if self.loo is not None and self.loo.bad_k_ids():
            lines.append(
                f"Refit leaving out {_ids(self.loo.bad_k_ids())} for exact LOO (bayesij.refit.loo)."
            )
        if not lines and not self._bootstrap_advised():
            lines.append("No refit is needed for these checks.")
        return lines

    def _bootstrap_advised(self) -> bool:
        verdicts = self.ij.linearity.verdict if self.ij.linearity is not None else None
        return verdicts is not None and bool(verdicts.isin(["doubtful", "unreliable"]).any())

    # ----------------------------------------------------------------- tables and figures
    def tables(self) -> dict[str, pd.DataFrame]:
        """The report's tables by title."""
        tables = {"Standard errors (posterior vs IJ)": self.ij.table()}
        if self.ij.linearity is not None:
            tables["Linearity of the IJ"] = self.ij.linearity.table()
        if self.amip:
            tables["Influential subsets (AMIP)"] = pd.concat(
                [r.table() for r in self.amip.values()], ignore_index=True
            )
        psi = self.influence["psi"].to_pandas()
        top = {
            q: psi.loc[q].abs().sort_values(ascending=False).index[:5].tolist()
            for q in self.quantities
        }
        tables["Most influential units (|psi|)"] = pd.DataFrame(top).T
        if self.loo is not None:
            tables["PSIS-LOO"] = self.loo.estimates()
            tables["Pareto k-hat"] = self.loo.pareto_k_table()
        if self.waic is not None:
            tables["WAIC"] = self.waic.estimates()
        if self.sensitivity is not None:
            tables["Power-scaling sensitivity"] = self.sensitivity
        if self.comparison is not None:
            tables["Model comparison (PSIS-LOO, stacking weights)"] = self.comparison
        return tables

    def figures(self) -> dict:
        """Matplotlib figures by title (Agg-rendered when written to HTML)."""
        import matplotlib.pyplot as plt

        from bayesij import plots

        figures = {}
        for q in self.quantities[:6]:
            fig, ax = plt.subplots(figsize=(6.4, 3.4))
            plots.plot_influence(self.influence, q, ax=ax)
            figures[f"Influence on {q}"] = fig
        fig, ax = plt.subplots(figsize=(4.8, 4.2))
        plots.plot_ij(self.ij, ax=ax)
        figures["IJ vs posterior sd"] = fig
        if self.loo is not None:
            fig, ax = plt.subplots(figsize=(6.4, 3.4))
            plots.plot_khat(self.loo, ax=ax)
            figures["Pareto k-hat"] = fig
        for (q, target), result in self.amip.items():
            fig, ax = plt.subplots(figsize=(6.4, 3.4))
            plots.plot_amip(result, ax=ax)
            figures[f"AMIP: {target} of {q}"] = fig
        return figures

    # ----------------------------------------------------------------- renderings
    def to_markdown(self) -> str:
        """The report as Markdown (summary, then the tables)."""
        parts = ["# Model audit", "", self.description, "", "## Summary", ""]
        parts += [f"- {line}" for line in self.summary()]
        for title, table in self.tables().items():
            parts += ["", f"## {title}", "", _markdown_table(table)]
        return "\n".join(parts) + "\n"

    def _html_body(self, figures: bool) -> str:
        parts = [
            "<h2>Model audit</h2>",
            f"<p>{html.escape(self.description)}</p>",
            "<h3>Summary</h3>",
            "<ul>",
        ]
        parts += [f"<li>{html.escape(line)}</li>" for line in self.summary()]
        parts.append("</ul>")
        for title, table in self.tables().items():
            parts += [
                f"<h3>{html.escape(title)}</h3>",
                table.to_html(float_format=lambda v: f"{v:.4g}", border=0),
            ]
        if figures:
            import matplotlib.pyplot as plt

            for title, fig in self.figures().items():
                buffer = io.BytesIO()
                fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
                plt.close(fig)
                data = base64.b64encode(buffer.getvalue()).decode()
                parts += [
                    f"<h3>{html.escape(title)}</h3>",
                    f'<img alt="{html.escape(title)}" src="data:image/png;base64,{data}"/>',
                ]
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        return self._html_body(figures=False)

    def to_html(self, path) -> str:
        """Write a single self-contained HTML file (figures embedded as PNG); returns the
        path."""
        page = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Model audit</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:auto}"
            "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}"
            "</style></head><body>" + self._html_body(figures=True) + "</body></html>"
        )
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
        return str(path)

    def __str__(self) -> str:
        return self.to_markdown()


def _target_words(result: AmipResult) -> str:
    if isinstance(result.target, str):
        return {
            "sign": "sign",
            "significance": "significance",
            "sign_and_significance": "sign and significance",
        }[result.target]
    return f"change by {result.target:.4g}"


def _ids(ids, limit: int = 8) -> str:
    shown = ", ".join(map(str, list(ids)[:limit]))
    return shown + (", ..." if len(ids) > limit else "")


def _markdown_table(table: pd.DataFrame) -> str:
    frame = table.reset_index()
    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    return str(value).replace("|", "/")


def audit(
    data,
    *,
    groups=None,
    quantities=None,
    var_name=None,
    targets=("sign", "significance"),
    loo: bool = True,
    waic: bool = True,
    amip: bool = True,
    method: str = "reweighted",
    alpha_max: float = 0.1,
    log_prior=None,
    compare_with: dict | None = None,
) -> Audit:
    """Audit a fit: which conclusions hang on a few observations, whether posterior and
    frequentist standard errors agree, how reliable LOO is, and what to refit.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        Draws of the quantities and the pointwise log-likelihood.
    quantities : str or list of str, optional
        Default: every quantity.
    groups : optional
        Exchangeable units (default: the container's groups).
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.
    targets : tuple, default ("sign", "significance")
        AMIP targets for every quantity (see :func:`bayesij.amip`).
    loo, waic, amip : bool, default True
        Which parts to compute.
    method : str, default "reweighted"
        AMIP method.
    alpha_max : float, default 0.1
        Largest share of units an influential set may hold (as :func:`bayesij.amip`).
    log_prior : str, callable or array_like, optional
        The log prior at each draw (as :func:`bayesij.psense`); the report then gains a
        power-scaling sensitivity line per quantity. Default: ``data``'s ``log_prior``
        group when it has one (no line otherwise).
    compare_with : dict of str to data, optional
        Other fits of the same observations (anything :func:`bayesij.loo` reads, or their
        LooResults); the report then compares them with this fit (named ``"audited"``) by
        PSIS-LOO with stacking weights.

    Returns
    -------
    Audit
        ``summary()``, ``to_markdown()``, ``to_html(path)`` and ``_repr_html_`` for
        notebooks.

    Notes
    -----
    Each piece of work is done once: the influence scores come from the IJ covariance's
    pass over the draws, and the linearity check reuses them and the PSIS-LOO smoothed
    weights (which the audit then drops, so it holds no draws x units array).
    """
    loo, waic, amip = (check_flag(v, a) for v, a in ((loo, "loo"), (waic, "waic"), (amip, "amip")))
    targets = check_labels(targets, "targets")
    for target in targets:
        check_target(target, "targets")
    check_search_options(alpha_max, method)
    post = as_source(
        data,
        quantities=quantities,
        var_name=var_name,
        need_quantities=True,
        whole_matrix={"data": "the audit"},
    ).posterior
    names = post.quantity_names
    with warnings.catch_warnings():  # every diagnostic is part of the report
        warnings.simplefilter("ignore")
        ij = ij_covariance(post, groups=groups)
        loo_result = compute_loo(post, groups=groups, save_psis=True) if loo else None
        scores = InfluenceScores(ij.influence["psi"].values, ij.influence["mcse"].values)
        checked = linearity(post, groups=groups, scores=scores, loo=loo_result)
        result = Audit(
            quantities=names,
            influence=ij.influence,
            ij=replace(ij, linearity=checked),
            loo=replace(loo_result, log_weights=None) if loo_result is not None else None,
            waic=compute_waic(post, groups=groups) if waic else None,
            description=repr(post),
        )
        result.sensitivity = _sensitivity(data, post, names, log_prior)
        result.comparison = _comparison(loo_result, compare_with, post, groups)
        if amip:
            constant = dict(zip(names, constant_columns(post.quantities.values), strict=True))
            for q in names:
                draws = post.quantities.sel(quantity=q).values
                scale = one_signed(draws) is not None and looks_like_scale(q)
                for t in targets:
                    if constant[q]:
                        result.skipped[(q, t)] = "constant"
                        continue
                    if scale and t in ("sign", "sign_and_significance"):
                        result.skipped[(q, t)] = "one-signed scale"
                        continue
                    result.amip[(q, t)] = compute_amip(
                        post, q, target=t, groups=groups, method=method, alpha_max=alpha_max
                    )
    return result


def _sensitivity(data, post, names, log_prior) -> pd.DataFrame | None:
    """Power-scaling sensitivity when a log prior is given or ``data`` carries one."""
    if log_prior is None and not (has_groups(data) and "log_prior" in group_names(data)):
        return None
    source = data if log_prior is None else post
    return psense(source, log_prior=log_prior, quantities=names)


def _comparison(loo_result, compare_with, post, groups) -> pd.DataFrame | None:
    """PSIS-LOO comparison with stacking weights of this fit and ``compare_with``'s."""
    if compare_with is None:
        return None
    if not isinstance(compare_with, dict) or not compare_with or "audited" in compare_with:
        raise fail(
            "compare_with",
            repr(compare_with)[:80],
            "a non-empty dict of other fits by name (not 'audited', this fit's name)",
        )
    own = loo_result if loo_result is not None else compute_loo(post, groups=groups)
    results = {"audited": replace(own, log_weights=None)}
    for name, other in compare_with.items():
        results[name] = other if isinstance(other, LooResult) else compute_loo(other, groups=groups)
    return compare(results, weights="stacking")
