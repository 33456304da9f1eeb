"""The audit's verdict in plain words: at most eight one-sentence bullets, ranked by what
would change a conclusion first, then the IJ comparison per quantity with its reason.

Every sentence follows the answers the estimators give, Monte Carlo error included: a
conclusion is "decided by a handful of units" only when the search reached it, a model "may
be misspecified" for a quantity only when the quantity is global, its IJ variance is
Monte Carlo-precise and its linear approximation reliable; otherwise the sentence says
"undetermined" (with how many draws would decide) or "not applicable" (with why).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.amip import MC_MARGIN

__all__ = ["summary_bullets", "ij_comparison", "target_words", "unit_words", "MAX_BULLETS"]

#: A conclusion "depends on a handful" when this few units (or this small a share) flip it.
HANDFUL, SMALL_SHARE = 5, 0.01
#: The summary's length: what does not fit is in the detail below it.
MAX_BULLETS = 8
#: IJ sd / posterior sd within these bounds: the two agree.
AGREE = (0.8, 1.25)


def unit_words(unit: str, n: int | None = None) -> str:
    """``'firm'`` -> ``'firms'`` (``'1 firm'``, ``'2 firms'`` with ``n``)."""
    singular = {"obs": "observation", "group": "group"}.get(unit, unit)
    plural = _plural(singular)
    if n is None:
        return plural
    return f"{n} {singular if n == 1 else plural}"


#: Plurals English does not form by rule, for the group names fits use.
IRREGULAR = {"person": "people", "child": "children", "mouse": "mice", "datum": "data"}


def _plural(word: str) -> str:
    """``county`` -> ``counties``, ``city`` -> ``cities``, ``day`` -> ``days``, ``class``
    -> ``classes``, ``firm`` -> ``firms``; the last word of a name (``school district``)."""
    head, _, last = word.rpartition(" ")
    lower = last.lower()
    if lower in IRREGULAR:
        plural = IRREGULAR[lower]
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        plural = last[:-1] + "ies"
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    else:
        plural = last + "s"
    return f"{head} {plural}" if head else plural


def target_words(result) -> str:
    """What reaching an AMIP target does to the conclusion, from where it stands now:
    ``'reverse the sign of b'``, ``'remove the significance of b'``, ``'make b
    significant'``, ``'change b by -0.3'``."""
    q = result.quantity
    if not isinstance(result.target, str):
        if np.isclose(result.target, -0.5 * result.original_value, rtol=1e-9, atol=0.0):
            return f"halve {q} ({result.original_value:.3g} to {0.5 * result.original_value:.3g})"
        return f"change {q} by {result.target:.4g}"
    if result.target == "sign":
        return f"reverse the sign of {q}"
    significant = _significant(result)
    if result.target == "significance":
        return f"remove the significance of {q}" if significant else f"make {q} significant"
    if significant:
        return f"make {q} significant with the opposite sign"
    return f"make {q} significant with the sign opposite to its mean"


def target_label(result) -> str:
    """A target as a table shows it: its name, ``'halve'`` for a scale's halving, or the
    change asked for (``'change by -0.3'``), never a raw float."""
    if isinstance(result.target, str):
        return result.target
    if np.isclose(result.target, -0.5 * result.original_value, rtol=1e-9, atol=0.0):
        return "halve"
    return f"change by {result.target:.4g}"


def _significant(result) -> bool:
    """Whether mean ± z sd excludes 0 now (the metric is the end nearer 0)."""
    low_end = result.metric == "lower end"
    return bool(result.original_value > 0 if low_end else result.original_value < 0)


def fragile(amip: dict) -> list:
    """AMIP results whose target a handful of units reaches (a sure upper bound counts),
    smallest sets first; not those reached only by the first-order continuation past
    k-hat's threshold (:func:`first_order_only`), nor those a refit found not to reach it."""
    return [r for r in _reached_by_a_handful(amip) if not _continued(r)]


def first_order_only(amip: dict) -> list:
    """AMIP results a handful of units reaches only by the reweighted search's linear
    continuation, past the point where k-hat says reweighting the draws is reliable: the
    prediction is first order where first order is known to miss (a radon fit's "halve
    sigma_a" by 4 counties: refitted, a third of it), so a refit decides."""
    return [r for r in _reached_by_a_handful(amip) if _continued(r)]


def _reached_by_a_handful(amip: dict) -> list:
    """Results whose set is a handful and reaches the target, unless a refit said it does
    not; smallest sets first."""
    found = [
        r
        for r in amip.values()
        if r.reachable
        and _handful(r.n_drop, r.prop_drop)
        and (r.verification is None or r.verification["reached"])
    ]
    return sorted(found, key=lambda r: (r.n_drop, r.quantity))


def _continued(r) -> bool:
    """Whether a set's last units are the first-order continuation, with no refit yet."""
    return r.continued and r.verification is None


def _handful(size: float, share: float) -> bool:
    return bool(size <= HANDFUL or share <= SMALL_SHARE)


def open_questions(amip: dict) -> list:
    """AMIP results that leave open whether a handful of units decides: undetermined, with
    a smallest set that may still be a handful (the low end of its size interval; those
    whose low end is beyond a handful are counted among the conclusions that need more,
    :func:`_robust_bullet`)."""
    found = []
    for r in amip.values():
        if not r.undetermined or (r.reachable and _handful(r.n_drop, r.prop_drop)):
            continue
        low = r.size_interval[0] if r.size_interval else 0.0
        if not _handful(low, low / r.n_units):
            continue  # even the smallest plausible set is more than a handful
        found.append(r)
    return found


def summary_bullets(audit) -> list[str]:
    """At most :data:`MAX_BULLETS` one-sentence findings, most consequential first."""
    candidates = [
        _convergence_bullet(audit),
        _fragile_bullet(audit),
        _first_order_bullet(audit),
        _loo_bullet(audit),
        _misspecified_bullet(audit),
        _sensitivity_bullet(audit),
        _comparison_bullet(audit),
        _refit_bullet(audit),
        _undetermined_bullet(audit),
        _robust_bullet(audit),
        _ij_bullet(audit),
    ]
    return [b for b in candidates if b][:MAX_BULLETS]


def _convergence_bullet(audit) -> str:
    """First, where the draws have not converged: everything after inherits it."""
    found = getattr(audit, "convergence", None)
    if found is None or found.converged:
        return ""
    problems = found.problems()
    if found.mixed:  # only the effective draws are too few
        return (
            f"The draws are too few: {problems[0]}. R-hat and every Monte Carlo error below "
            "are unreliable with so few; draw more (bayesij.convergence)."
        )
    return (
        f"The draws have not converged: {'; '.join(problems)}. Every estimate below "
        "inherits that: run longer chains (or reparameterise) before trusting them "
        "(bayesij.convergence)."
    )


def _ids(ids, limit: int = 4) -> str:
    ids = [str(i) for i in ids]
    if len(ids) <= limit:
        return ", ".join(ids)
    return ", ".join(ids[:limit]) + f" and {len(ids) - limit} more"


def headline_amip(audit) -> dict:
    """The audit's AMIP results about quantities the verdict may name: not non-centred
    offsets (``audit.offsets``), standard normal by construction."""
    return {key: r for key, r in audit.amip.items() if r.quantity not in audit.offsets}


def _fragile_bullet(audit) -> str:
    found = fragile(headline_amip(audit))
    if not found:
        return ""
    unit = audit.unit_name
    shown = [
        f"dropping {'at most ' if r.upper_bound else ''}{unit_words(unit, r.n_drop)} of "
        f"{r.n_units} ({_ids(r.drop_ids)}) {_claim(r)} {target_words(r)}"
        for r in found[:3]
    ]
    more = f"; and {len(found) - 3} more (see the AMIP table)" if len(found) > 3 else ""
    return f"A handful of {unit_words(unit)} decides: " + "; ".join(shown) + more + "."


def _groups_argument(audit) -> str:
    """How to name the audit's unit again as ``groups=``: the grouping's name when the fit
    holds it, else the labels given."""
    units = audit.units
    return "the same groups" if units.name == "group" else repr(units.name)


def _loo_bullet(audit) -> str:
    loo = audit.loo
    integrated = audit.loo_integrated
    if integrated is not None:
        return _integrated_loo_bullet(audit, integrated)
    if loo is None:
        return ""
    unit = audit.unit_name
    if loo.k_threshold <= 0:  # 1 - 1/log10(S) for S <= 10 draws
        return (
            f"PSIS-LOO cannot be checked with {loo.n_draws} draws: its k-hat threshold "
            "1 - 1/log10(S) is not positive until S > 10; draw more before trusting "
            f"elpd {loo.elpd:.1f}."
        )
    bad, exact = loo.unreliable_ids(), loo.exact_ids()
    exact_note = ""
    if exact:
        exact_note = (
            f" ({unit_words(unit, len(exact))} with a log-likelihood constant over the draws "
            f"({_ids(exact)}): k-hat inf, but {'its' if len(exact) == 1 else 'their'} "
            "estimate is exact)"
        )
    if bad:
        call = "bayesij.refit.loo(fit, backend, points=[...])"
        if audit.units.grouped:
            groups = _groups_argument(audit)
            call = (
                f"bayesij.refit.loo(fit, backend, points=[...], groups={groups}), each "
                f"{unit_words(unit, 1)[2:]} left out whole and scored jointly"
            )
        integrate = ""
        if _integration_words(audit):  # each group's effect reweighted, not integrated
            integrate = (
                f"; or each one's {audit.unit_effects[0]} integrated out, whose k-hats are "
                "far smaller (bayesij.loo_integrated(fit, density), e.g. "
                "refit.PyMCDensity(model))"
            )
        return (
            f"PSIS-LOO is unreliable for {len(bad)} of {unit_words(unit, loo.n_units)} "
            f"(k-hat above {loo.k_threshold:.2f}: {_ids(bad)}): refit "
            + ("it" if len(bad) == 1 else "them")
            + f" for exact LOO ({call}){exact_note}{integrate}."
        )
    how = f" (leave-one-{unit_words(unit, 1)[2:]}-out)" if audit.units.grouped else ""
    below = "every k-hat is below" if not exact else "every other k-hat is below"
    return (
        f"PSIS-LOO{how} is reliable: {below} {loo.k_threshold:.2f} "
        f"(elpd {loo.elpd:.1f}, SE {loo.se:.1f}){exact_note}."
    )


def _integrated_loo_bullet(audit, loo) -> str:
    """The LOO sentence over a hierarchy's integrated group terms, with the k-hats of the
    conditional ones beside it."""
    units = unit_words(audit.unit_name)
    bad = loo.unreliable_ids()
    before = ""
    if audit.loo is not None:
        high = len(audit.loo.unreliable_ids())
        before = f"; over the conditional terms {high} of {audit.loo.n_units} were above"
    over = f"PSIS-LOO over the {units}' integrated log-likelihoods"
    if audit.integrated_from:
        over += " (recovered from the draws)"
    if bad:
        return (
            f"{over} is unreliable for {len(bad)} of {unit_words(audit.unit_name, loo.n_units)} "
            f"(k-hat above {loo.k_threshold:.2f}: {_ids(bad)}{before}): refit "
            + ("it" if len(bad) == 1 else "them")
            + f" for exact LOO (bayesij.refit.loo(..., groups={_groups_argument(audit)}))."
        )
    return (
        f"{over} is reliable: every k-hat is below {loo.k_threshold:.2f} (elpd "
        f"{loo.elpd:.1f}, SE {loo.se:.1f}{before})."
    )


def ij_comparison(audit) -> pd.DataFrame:
    """Per quantity: ``verdict`` (agree, posterior smaller, posterior larger, undetermined,
    not applicable, constant), ``reason`` (a clause), ``why`` (the kind of reason:
    ``ratio``, ``integrated``, ``local``, ``noise``, ``barely moved``, ``linearity``,
    ``hierarchy``, ``suspected grouping``, ``constant``) and ``ratio`` (IJ sd / posterior
    sd where a verdict reads it). Over a hierarchy's groups with the groups' integrated
    log-likelihoods (``audit.ij_integrated``), a global quantity is judged by the IJ over
    those, the cluster bootstrap's approximation."""
    ij = audit.ij
    integrated = audit.ij_integrated
    rows = {}
    for q in ij.variance.index:
        if q in ij.constant:
            rows[q] = ("constant", "constant over the draws", "constant", np.nan)
        elif q in audit.local:
            rows[q] = (
                "not applicable",
                "local (per group or observation): it does not concentrate as data grow",
                "local",
                np.nan,
            )
        elif audit.unit_effects and integrated is not None and q in integrated.variance.index:
            rows[q] = _judged(integrated, q, None, "integrated", audit)
        else:
            rows[q] = _judged(ij, q, ij.linearity, "ratio", audit)
    frame = pd.DataFrame.from_dict(
        rows, orient="index", columns=["verdict", "reason", "why", "ratio"]
    )
    frame.index.name = "quantity"
    return frame


def _judged(ij, q: str, linear, kind: str, audit) -> tuple:
    """One global quantity's verdict from an IJ (its noise, then the reasons not to read
    it, then the ratio of the sds)."""
    corrected, mcse, needed = ij.variance_corrected, ij.mcse, ij.draws_needed
    if not corrected[q] > 2 * mcse[q] and needed[q] > ij.n_draws:
        why = (
            f"Monte Carlo noise dominates the IJ variance: about {needed[q]:.3g} draws "
            f"(now {ij.n_draws}) would measure it"
        )
        return ("undetermined", why, "noise", np.nan)
    if not corrected[q] > 2 * mcse[q]:
        why = "the IJ variance is within 2 MCSE of 0, far below the posterior variance"
        return ("undetermined", why, "barely moved", np.nan)
    if kind == "ratio" and audit.unit_effects:  # before linearity: the cluster bootstrap
        return ("undetermined", _hierarchy_reason(audit), "hierarchy", np.nan)
    if kind == "ratio" and audit.units.suspected:
        return ("undetermined", _suspected_reason(audit), "suspected grouping", np.nan)
    if linear is not None and linear.verdict[q] in ("doubtful", "unreliable"):
        reason = _linearity_reason(linear, q, audit.unit_name)
        return ("undetermined", reason, "linearity", np.nan)
    ratio = float(np.sqrt(ij.ratio[q])) if ij.ratio[q] > 0 else np.nan
    over = (
        f" over the {unit_words(audit.unit_name)}' integrated log-likelihoods (the cluster "
        "bootstrap's approximation)"
        if kind == "integrated"
        else ""
    )
    words = f"IJ sd{over} / posterior sd {ratio:.2f}"
    low, high = (_sd_ratio(ij, q, sign) for sign in (-1.0, 1.0))
    if _side(low) != _side(high):  # Monte Carlo error spans an edge of the band
        return ("undetermined", _edge_reason(ij, q, words, (low, high)), kind, ratio)
    return (_side(ratio), words, kind, ratio)


def _side(ratio: float) -> str:
    """The verdict of an sd ratio: within :data:`AGREE`, above it or below it."""
    if AGREE[0] <= ratio <= AGREE[1]:
        return "agree"
    return "posterior smaller" if ratio > AGREE[1] else "posterior larger"


def _sd_ratio(ij, q: str, sign: float) -> float:
    """The sd ratio at the corrected IJ variance plus ``sign`` times 2 MCSE (at least 0)."""
    variance = ij.variance_corrected[q] + sign * 2.0 * ij.mcse[q]
    return float(np.sqrt(max(variance, 0.0) / ij.posterior_variance[q]))


def _edge_reason(ij, q: str, words: str, band: tuple) -> str:
    """Why a verdict is undetermined when the sd ratio's 2-MCSE ``band`` spans an edge of
    :data:`AGREE`: the band, the edge nearest the ratio and the draws (the MCSE falling as
    ``1 / sqrt(S)``) at which 2 MCSE would stop short of it."""
    ratio = float(np.sqrt(ij.ratio[q]))
    inside = [e for e in AGREE if band[0] <= e <= band[1]]
    edge = min(inside, key=lambda e: abs(np.log(ratio / e)))
    gap = abs(ij.variance_corrected[q] - edge**2 * ij.posterior_variance[q])
    needed = ij.n_draws * (2.0 * ij.mcse[q] / gap) ** 2 if gap > 0 else np.inf
    return (
        f"{words}, {band[0]:.2f} to {band[1]:.2f} within 2 MCSE of the IJ variance: across "
        f"{edge:g}, the edge of agreement; about {needed:.3g} draws (now {ij.n_draws}) "
        "would decide"
    )


def _exact_bootstrap(audit) -> str:
    """The exact bootstrap that checks the IJ over the audit's units: the weight bootstrap
    of observations, or the cluster bootstrap that draws whole groups."""
    if not audit.units.grouped:
        return "bayesij.refit.bootstrap"
    return f"bayesij.refit.cluster_bootstrap over the {unit_words(audit.unit_name)}"


def _suspected_reason(audit) -> str:
    """Why the IJ over observations does not judge a sd when the fit looks grouped."""
    names = ", ".join(repr(d) for d in audit.units.suspected)
    what = "variable" if audit.units.local_variables else "posterior dim"
    return (
        f"the fit looks grouped (the {what} {names}) but does not say which observation "
        "belongs to which group: the observations may not be exchangeable units; pass "
        "groups= to compare over the groups"
    )


def _hierarchy_reason(audit) -> str:
    """Why the IJ over a hierarchy's groups does not judge a global quantity's sd."""
    units = unit_words(audit.unit_name)
    return (
        f"the IJ over {units} holds each one's own effect ({', '.join(audit.unit_effects)}): "
        f"it approximates reweighting the {units} (one drawn twice counts twice, with one "
        f"effect), not drawing new {units}; bayesij.refit.cluster_bootstrap decides"
        f"{_integrated_ij_words(audit)}"
    )


def _linearity_reason(linear, q: str, unit: str) -> str:
    index = linear.index[q]
    excluded, n = linear.n_excluded, len(linear.pareto_k)
    parts = [f"the IJ's linear approximation is {linear.verdict[q]}"]
    if excluded:
        parts.append(
            f"k-hat above {linear.k_threshold:.2f} for {excluded} of {unit_words(unit, n)}"
        )
    if np.isfinite(index):
        parts.append(f"nonlinearity index {index:.2f}")
    else:
        parts.append("no unit left to compute its nonlinearity index")
    return ": ".join(parts[:1]) + " (" + "; ".join(parts[1:]) + ")"


def _misspecified_bullet(audit) -> str:
    table = audit.comparison_table
    sides = table[table["verdict"].isin(["posterior smaller", "posterior larger"])]
    if sides.empty:
        return ""
    words = ", ".join(f"{q} ({sides.loc[q, 'ratio']:.2f})" for q in sides.index)
    return (
        f"The posterior and frequentist (IJ over {_ij_over(audit, sides)}) sd disagree "
        f"by more than 25 % for {words} (IJ sd / posterior sd): the model may be "
        "misspecified for " + ("it." if len(sides) == 1 else "them.")
    )


def _ij_over(audit, rows: pd.DataFrame) -> str:
    """What the IJ of the comparison table's ``rows`` is over: the units, or their
    integrated log-likelihoods where any row's verdict reads those."""
    over = unit_words(audit.unit_name)
    if (rows["why"] == "integrated").any():
        return f"the {over}' integrated log-likelihoods, the cluster bootstrap's approximation"
    return over


def _ij_bullet(audit) -> str:
    table = audit.comparison_table
    parts = []
    agree = table.index[table["verdict"] == "agree"].tolist()
    if agree:
        parts.append(f"agree within 25 % for {_ids(agree, 6)}")
    says = {
        "noise": "Monte Carlo noise dominates the IJ variance; see draws_needed",
        "barely moved": "its IJ variance is indistinguishable from 0, far below the posterior "
        "variance",
        "linearity": "the IJ's linear approximation is unreliable; an exact bootstrap, "
        f"{_exact_bootstrap(audit)}, would decide",
        "suspected grouping": "the fit looks grouped but does not record the groups; "
        "groups= decides",
        "hierarchy": f"the IJ over {unit_words(audit.unit_name)} holds each one's own effect, "
        f"{', '.join(audit.unit_effects)}, so it approximates reweighting them, not drawing "
        f"new {unit_words(audit.unit_name)}; bayesij.refit.cluster_bootstrap would decide"
        f"{_integrated_ij_words(audit)}",
    }
    for why, words in says.items():
        which = table.index[table["why"] == why].tolist()
        if which:
            parts.append(f"undetermined for {_ids(which, 4)} ({words})")
    edge = table[(table["verdict"] == "undetermined") & table["why"].isin(["ratio", "integrated"])]
    if len(edge):
        over = _ij_over(audit, edge)
        over += "," if "," in over else ""  # the integrated terms' apposition closed
        parts.append(
            f"undetermined for {_ids(edge.index.tolist(), 4)} (the IJ over {over} gives an "
            "sd ratio within 2 Monte Carlo standard errors of 0.8 or 1.25, the edges of "
            "agreement; more draws decide)"
        )
    local = int((table["why"] == "local").sum())
    if local:
        parts.append(
            f"not applicable to the {local} local (per-group or per-observation) quantities, "
            "which do not concentrate"
        )
    if not parts:
        return ""
    return "Posterior vs IJ standard errors: " + "; ".join(parts) + "."


def _sensitivity_bullet(audit) -> str:
    table = audit.sensitivity
    if table is None:
        return ""
    flagged = table[(table["diagnosis"] != "-") & ~table.index.isin(audit.offsets)]
    scaled = ""
    if audit.prior_selection is not None:
        n = len(audit.prior_selection)
        scaled = (
            f" (the {n} top-level prior term{'s' if n > 1 else ''} scaled, named in the "
            "table; the group-level terms are the hierarchy's model, not priors)"
        )
    if flagged.empty:
        return (
            "Power-scaling: no prior or likelihood sensitivity above the threshold for "
            + (f"the {len(table)} quantities" if len(table) > 1 else str(table.index[0]))
            + f"{scaled}."
        )
    kinds = {}
    for q, row in flagged.iterrows():
        kinds.setdefault(row.diagnosis, []).append(q)
    words = "; ".join(f"{kind} for {_ids(names, 4)}" for kind, names in kinds.items())
    return f"Power-scaling sensitivity{scaled}: {words}."


def _comparison_bullet(audit) -> str:
    table = audit.comparison
    if table is None:
        return ""
    weights = ", ".join(f"{name} {w:.2f}" for name, w in table["weight"].items())
    worse = []
    for name, row in table.iloc[1:].iterrows():
        caveats = [f"p_worse {row['p_worse']:.2f}"]
        if row["diag_diff"]:
            caveats.append(f"{row['diag_diff']}: the normal approximation may be poorly calibrated")
        if row["diag_elpd"]:
            caveats.append(f"{row['diag_elpd']}: its elpd_loo may be biased")
        worse.append(
            f"{name} predicts worse by {-row['elpd_diff']:.1f} ± {row['se_diff']:.1f} elpd "
            f"({', '.join(caveats)})"
        )
    return (
        f"Stacking weights of the fits compared (best elpd_loo: {table.index[0]}): {weights}; "
        + "; ".join(worse)
        + "."
    )


def _first_order_bullet(audit) -> str:
    found = first_order_only(headline_amip(audit))
    if not found:
        return ""
    unit = audit.unit_name
    shown = found[:2]
    claims = " and ".join(
        f"dropping {unit_words(unit, r.n_drop)} ({_ids(r.drop_ids)}) would {target_words(r)}"
        for r in shown
    )
    more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
    reliable = " and ".join(str(r.n_reweighted) for r in shown)
    return (
        f"Undetermined, a refit decides: {claims}{more} to first order, but reweighting the "
        f"draws is reliable (k-hat) for only the first {reliable} of "
        f"{'those' if len(shown) > 1 else 'its'} {unit_words(unit)}, and first order can miss "
        "beyond that: bayesij.refit.verify(result, backend) decides."
    )


def _claim(result) -> str:
    """How the set is known to reach its target: by a refit without it, or predicted."""
    if result.verification is not None and result.verification["reached"]:
        return "is confirmed by a refit to"
    return "is predicted to"


def _refit_bullet(audit) -> str:
    """Which set to refit, unless every set named is a refit's already."""
    found = [r for r in fragile(headline_amip(audit)) if r.verification is None]
    if not found:
        return ""
    first = found[0]
    call = "bayesij.refit.verify" if first.unit == "obs" else "bayesij.refit.verify(..., fit=)"
    return (
        f"Refit without {_ids(first.drop_ids)} to verify that it would {target_words(first)} "
        f"({call} with a refit backend: refit.PyStanBackend, refit.PyMCBackend, ...)."
    )


def _undetermined_bullet(audit) -> str:
    open_ = open_questions(headline_amip(audit))
    if not open_:
        return ""
    bounded = [r for r in open_ if r.upper_bound]
    bounds = ""
    if bounded:
        r = min(bounded, key=lambda r: r.n_drop)
        bounds = (
            f" (to {target_words(r)} takes at most {unit_words(audit.unit_name, r.n_drop)} "
            f"and perhaps as few as {r.size_interval[0]:.0f})"
        )
    more = " more" if _fragile_bullet(audit) or _first_order_bullet(audit) else ""
    integrated = _integration_words(audit)
    return (
        f"Whether a handful of {unit_words(audit.unit_name)} decides {len(open_)}{more} "
        f"conclusion{'s' if len(open_) > 1 else ''} is undetermined{_open_by(open_)}{bounds}: "
        f"{_deciders(open_)}" + (f"; or the draws, {integrated}" if integrated else "") + "."
    )


def _integrated_ij_words(audit) -> str:
    """ ", or the IJ over ... integrated" where :func:`_integration_words` has a remedy."""
    if not _integration_words(audit):
        return ""
    return (
        f", or the IJ over the {unit_words(audit.unit_name)}' terms with their own effect "
        "integrated out (marginal_log_lik=), which approximates it"
    )


def _integration_words(audit) -> str:
    """Where the units are a hierarchy's groups whose own effects the fit holds and the
    audit read their conditional terms: how to give it the terms with those effects
    integrated out, over which the draws can decide (on an epilepsy-shaped Poisson GLMM
    over 59 patients, 6 of 11 AMIP questions where the conditional terms decided none, and
    the IJ approximates the cluster bootstrap); empty otherwise."""
    if not audit.unit_effects or audit.ij_integrated is not None:
        return ""
    effect = audit.unit_effects[0]
    return (
        f"over the {unit_words(audit.unit_name)}' terms with their own effect integrated out "
        f"(marginal_log_lik=refit.PyMCDensity(model).group_log_lik(fit, {effect!r}), "
        "refit.PyStanDensity's likewise, or bayesij.GlmDensity's; or the model's density "
        "as grad_log_posterior=, or a backend that holds it)"
    )


def _open_by(results: list) -> str:
    """What leaves undetermined answers open, in words."""
    # a cause with its details ("the draws: the mean ... ") is named by its first words
    causes = sorted({(r.undetermined_by or "Monte Carlo error").split(":")[0] for r in results})
    names = {
        "Monte Carlo error": "Monte Carlo error",
        "linearisation": "the linear approximation",
        "refits": "the refits so far",
        "refit budget": "the refit budget",
        "second-order breakdown": "the second-order model's breakdown",
    }
    return " by " + " and ".join(names.get(c, c) for c in causes)


def _deciders(results: list) -> str:
    """What would decide undetermined answers: refits (about how many each), and more
    draws where the 1 / sqrt(S) law says they would."""
    by_draws = [r for r in results if r.undetermined_by.startswith("the draws")]
    others = [r for r in results if not r.undetermined_by.startswith("the draws")]
    words = []
    if others:
        refits = max(max(r.refits_needed for r in others), 1)
        words.append(
            f"a refit decides, about {refits} refits each by bisection with a backend given "
            "to amip or audit"
        )
        draws = [
            r.draws_needed
            for r in others
            if r.undetermined_by in ("", "Monte Carlo error") and np.isfinite(r.draws_needed)
        ]
        if draws:
            words[-1] += f", or up to about {max(draws):.3g} draws (now {results[0].n_draws})"
    if by_draws:  # which side of zero a metric starts on: only more draws tell
        named = [f"{r.quantity}'s {r.metric} ({r.original_value:.2g})" for r in by_draws[:3]]
        if len(by_draws) > 3:
            named[-1] += f" and {len(by_draws) - 3} more"
        verb = "is" if len(by_draws) == 1 else "are"
        text = f"more draws decide whether {' and '.join(named)} {verb} past 0 already (within"
        text += f" {MC_MARGIN:g} Monte Carlo standard errors of it now"
        draws = [r.draws_needed for r in by_draws if np.isfinite(r.draws_needed)]
        if draws:
            text += f"; about {max(draws):.3g} draws in all, now {results[0].n_draws}"
        words.append(text + ")")
    return "; ".join(words)


def _robust_bullet(audit) -> str:
    searched = headline_amip(audit)
    found = set(map(id, fragile(searched) + open_questions(searched) + first_order_only(searched)))
    robust = [r for r in searched.values() if id(r) not in found]
    if not robust:
        return ""
    verb = "needs" if len(robust) == 1 else "need"
    text = (
        f"{len(robust)} of {len(searched)} conclusions searched {verb} more than a handful "
        f"of {unit_words(audit.unit_name)}"
    )
    reached = [r for r in robust if r.reachable]
    far = [r for r in robust if r.answer == "not reachable"]
    beyond = [r for r in robust if not r.reachable and r.answer != "not reachable"]
    parts = []
    if reached and (far or beyond):
        parts.append(f"{len(reached)} reached by larger sets")
    if far:
        limit = unit_words(audit.unit_name, max(r.n_drop for r in far))
        parts.append(f"{len(far)} not reachable by dropping up to {limit}")
    if beyond:
        low = min(r.size_interval[0] for r in beyond if r.size_interval)
        parts.append(f"{len(beyond)} undetermined beyond a handful, at least {low:.0f} each")
    text += f" ({'; '.join(parts)})." if parts else "."
    if beyond:
        which = "that one" if len(beyond) == 1 else f"those {len(beyond)}"
        text += f" For {which}, {_deciders(beyond)}."
    return text
