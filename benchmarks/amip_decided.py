"""How many AMIP questions the draws decide, and how many refits decide the rest, on
regressions whose exact refits are known.

Models (exact references, none tuned to pass):

- ``kidiq``: a normal regression shaped like rstanarm's kidiq example (N = 434, a 0/1
  high-school indicator and an IQ score, residual sd 18), flat priors, sigma unknown;
- ``mesquite``: a normal regression with six covariates and t(4) noise (N = 46);
- ``micro``: a microcredit-shaped experiment (N = 16,560, 0.5 % of households with 100
  times the noise sd, an insignificant effect), with control variates from the gradient;
- ``wells400`` / ``wells``: a wells-like logistic regression (N = 400 / 3020);
- ``counts``: a Poisson regression (log link) of overdispersed counts (negative binomial,
  size 2; N = 500, a treatment, a normal and a skewed covariate): the model ignores the
  overdispersion, so a few large counts pull its coefficients;
- ``t4reg``: ``benchmarks/audit.py``'s regression (N = 2000, an intercept and nine normal
  covariates, t(4) noise: eleven quantities, more than the eight every second-order
  model may take whatever the draws);
- ``hier24`` / ``hier40`` / ``hier12``: varying intercepts ``y ~ N(alpha[g], sigma)``,
  ``alpha ~ N(mu, tau)``, flat priors, t(4) noise in the data (24 groups of 10, 40 of 6,
  12 of 20), saved as plain arrays (the observation is the unit; ``mu``, ``tau``,
  ``sigma`` and every ``alpha[g]`` are quantities): drawn and refitted by the exact Gibbs
  sampler (tests/helpers/hierarchy_gibbs.py), the questions on ``mu``;
- real data (public domain, tests/reference/public_data), none of it chosen for the
  answers: ``engel``, food expenditure on income (N = 235, Koenker & Bassett's
  heteroscedastic example); ``statecrime``, US states' 2009 murder rates on poverty,
  high-school graduation, urban and single-parent shares (N = 51, DC an outlier of
  leverage 0.74); ``anes96``, the 1996 election study's vote (logistic, N = 944, five
  covariates); ``randhie``, the RAND Health Insurance Experiment's doctor visits, a count
  with a long tail, fitted by a normal regression on nine covariates (N = 20,190);
  ``grunfeld``, 11 US firms' investment on their market value and capital, 1935-1954
  (N = 220, General Motors' and US Steel's firm-years far larger than the rest);
  ``modechoice``, whether a traveller between Australian cities chose a mode (air, train,
  bus, car), a logistic regression on its terminal time, costs, income and party size
  (N = 840); ``strikes``, US manufacturing strikes' durations in days, a Poisson
  regression on unanticipated industrial production (N = 62, the counts overdispersed);
  ``stackloss``, Brownlee's ammonia plant (N = 21, three covariates, four outliers);
  ``longley``, US employment 1947-1962 on six nearly collinear covariates (N = 16, NIST's
  accuracy test); ``danish``, Danish money demand (N = 55, four covariates);
  ``phillips``, US inflation on unemployment 1959-2009 (N = 203); ``sunspots``, Yule's
  autoregression of order 2 of yearly sunspot numbers (N = 307); ``randhie-poisson``,
  the RAND doctor visits as a Poisson regression on the nine covariates (N = 20,190).

Normal regressions are drawn exactly (``refit.FlatPriorRegressionBackend``: the refit after any
drop is the weighted least-squares posterior); logistic ones by independence
Metropolis-Hastings, exact in distribution (tests/helpers/logistic_amip.py; the Poisson
regression likewise), and a "reached" set of theirs is checked by the weighted MLE's
metric, or where that does not cross (it is O(1/n) off the posterior's) by the metric of
4 x 25,000 such draws without the set: refuted where that falls short by 3 Monte Carlo
SEs (on the travel-mode fit a set of 52 crossed by -0.00009, where the MLE's metric
stayed at 0.00024). Every question
(each coefficient but the intercept, three targets) is answered from the draws, then with
refits in the loop (``--refits``, ``max_refits=6``). A "reached" set, and an undetermined
answer's sure upper bound, is checked by the exact refit without it; a "not reachable"
against the OLS / estimating-equation AMIP's refit-confirmed set within ``alpha_max``. A
normal model is also asked the audit's question of halving its residual sd, checked
against the exact refit of its set and of the largest residuals' prefixes (the flat
prior's posterior mean of sigma in closed form). Columns:
questions, decided from the draws
(reached or not reachable), decided with refits, refits used (distinct sets), refuted, and
size intervals whose low end lies above the size of a set the exact refits confirm (the
reference's, from the draws or with refits).

``--gradient`` gives every model its log posterior's gradient (control variates, and for a
logistic regression the prior that the removal of a set recovered from the draws needs).
``--density`` gives the normal regressions and the hierarchies over observations their
model density instead (tests/helpers: ``RegressionDensity``, ``HierarchyDensity``): the
same gradient, and moment matching works out the removal of a set the draws leave open.

Run: ``python benchmarks/amip_decided.py [--refits] [--gradient] [--seed 2] [--models kidiq
...]`` (``--seed``: another set of draws of the same data). Runs on older bayesij versions
too (for before/after tables).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

import bayesij
from bayesij import refit
from common import amip_gradient

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
import hierarchy_gibbs as hierarchy  # noqa: E402
import logistic_amip as logistic  # noqa: E402
from ols_amip import (  # noqa: E402
    RegressionDensity,
    heavy_tailed_experiment,
    kidiq_shaped,
    mean_sd,
    mesquite_shaped,
    metric,
    metric_sign,
    ols_amip,
    smallest_prefix,
    t4_regression,
)
from public_data import LONGLEY, MODECHOICE, RANDHIE, STACKLOSS, STATECRIME, autoregression, design  # noqa: E402

TARGETS = ("sign", "significance", "sign_and_significance")

#: Whether every model is given its log posterior's gradient (``--gradient``), not only
#: the microcredit-shaped one.
GRADIENT = False
#: Whether the normal regressions and the hierarchies get their model density
#: (``--density``).
DENSITY = False

#: The seed of every model's draws (``--seed``): the same data, another set of draws.
SEED = 1


def micro(seed: int = 0):
    return heavy_tailed_experiment(16_560, seed=seed, effect=-0.085, outliers=0.005, spread=100.0)


MODELS = {
    "kidiq": (kidiq_shaped, "normal", False),
    "mesquite": (mesquite_shaped, "normal", False),
    "micro": (micro, "normal", True),
    "wells400": (lambda: logistic.wells_like(400, 3), "logistic", False),
    "wells": (lambda: logistic.wells_like(3020, 0), "logistic", False),
    "counts": (partial(logistic.counts_like, 500, 0), "poisson", False),
    "t4reg": (t4_regression, "normal", False),
    # real data, none of it chosen for the answers
    "engel": (partial(design, "engel.csv", "foodexp", ["income"]), "normal", False),
    "statecrime": (partial(design, "statecrime.csv", "murder", STATECRIME), "normal", False),
    "anes96": (
        partial(design, "anes96.csv", "vote", ["logpopul", "selfLR", "age", "educ", "income"]),
        "logistic",
        False,
    ),
    "randhie": (partial(design, "randhie.csv.gz", "mdvis", RANDHIE), "normal", False),
    "grunfeld": (partial(design, "grunfeld.csv", "invest", ["value", "capital"]), "normal", False),
    "modechoice": (partial(design, "modechoice.csv", "choice", MODECHOICE), "logistic", False),
    "strikes": (partial(design, "strikes.csv", "duration", ["iprod"]), "poisson", False),
    "stackloss": (partial(design, "stackloss.csv", "STACKLOSS", STACKLOSS), "normal", False),
    "longley": (partial(design, "longley.csv", "TOTEMP", LONGLEY), "normal", False),
    "danish": (partial(design, "danish.csv", "lrm", ["lry", "lpy", "ibo", "ide"]), "normal", False),
    "phillips": (partial(design, "macrodata.csv", "infl", ["unemp"]), "normal", False),
    "sunspots": (partial(autoregression, "sunspots.csv", "SUNACTIVITY", 2), "normal", False),
    "randhie-poisson": (partial(design, "randhie.csv.gz", "mdvis", RANDHIE), "poisson", False),
    "hier24": (partial(hierarchy.simulate, 24, 10, 3), "hierarchy", False),
    "hier40": (partial(hierarchy.simulate, 40, 6, 4), "hierarchy", False),
    "hier12": (partial(hierarchy.simulate, 12, 20, 5), "hierarchy", False),
}
#: The hierarchies again, asked over their groups' integrated log-likelihoods.
GROUPED = [f"{name}-groups" for name, (_, kind, _) in MODELS.items() if kind == "hierarchy"]


class Counting:
    """A backend that counts its refits and the distinct sets among them."""

    def __init__(self, inner):
        self.inner, self.n_obs, self.keys = inner, inner.n_obs, []
        if hasattr(inner, "fit_with_gradient"):
            self.fit_with_gradient = self._with_gradient

    def fit(self, weights):
        self.keys.append(np.asarray(weights, dtype=float).tobytes())
        return self.inner.fit(weights)

    def _with_gradient(self, weights):
        self.keys.append(np.asarray(weights, dtype=float).tobytes())
        return self.inner.fit_with_gradient(weights)


#: The GLMs' families (tests/helpers/logistic_amip.py) by the models' kinds.
FAMILIES = {"logistic": logistic.LOGISTIC, "poisson": logistic.POISSON}


def _reaches(kind, X, y, result, k, target) -> bool:
    """Whether the exact refit without the result's set reaches its target."""
    if kind in FAMILIES:  # the MLE's metric, or where it does not cross the posterior's
        dropped = np.flatnonzero(result.kept == 0)
        family = FAMILIES[kind]
        if logistic.crosses(X, y, dropped, k, target, family=family):
            return True
        return logistic.posterior_crosses(X, y, dropped, k, target, family=family) is not False
    after = metric(X, y, result.kept, k, metric_sign(result), 1.96)
    return bool(np.sign(after) != np.sign(result.original_value))


def _sigma_reference(X, y, change: float) -> int | None:
    """The smallest prefix of the largest residuals whose exact refit moves the residual
    sd's mean by ``change`` (within ``alpha_max`` = 10 %), or None: a set refits confirm,
    an upper bound of the smallest (bisection; the change grows along the prefix)."""
    order = np.argsort(-np.abs(y - X @ np.linalg.lstsq(X, y, rcond=None)[0]))
    start, limit = mean_sd(X, y, np.ones(y.size)), int(np.floor(0.1 * y.size))

    def reaches(size: int) -> bool:
        weights = np.ones(y.size)
        weights[order[:size]] = 0
        return mean_sd(X, y, weights) - start <= change

    return smallest_prefix(reaches, limit)


def _sigma_question(X, y, post, backend, refits, extra, row) -> None:
    """The audit's question of the residual sd, halved (the Delta target -mean / 2),
    against exact refits: a "reached" set's own and the largest residuals' prefixes."""
    draws = post.quantities.sel(quantity="sigma").values
    change = -0.5 * float(draws.mean())
    reference = _sigma_reference(X, y, change)
    limit = int(np.floor(0.1 * y.size))

    def refuted(result) -> bool:
        if result.reachable and result.n_drop:  # "reached", or a sure upper bound
            return mean_sd(X, y, result.kept) - mean_sd(X, y, np.ones(y.size)) > change
        return result.answer == "not reachable" and reference is not None and reference <= limit

    line = _ask(post, "sigma", change, extra, backend if refits else None, row, refuted, reference)
    print(line + f" | reference {reference}", flush=True)


def below_reference(result, reference) -> bool:
    """Whether the answer's size interval starts above a set the exact refits confirm (its
    low end claims more units are needed than ``reference`` of them, which reach)."""
    low = result.size_interval[0] if result.size_interval else 0.0
    return reference is not None and reference < low


def _ask(post, quantity, target, extra, backend, row, refuted, reference=None) -> str:
    """One question from the draws, and with ``backend`` by refits in the loop (their
    distinct sets counted): counted in ``row`` (``refuted(result)`` checks an answer
    against the exact refits); the line to print."""
    result = bayesij.amip(post, quantity, target, **extra)
    row["questions"] += 1
    row["draws"] += result.answer in ("reached", "not reachable")
    row["refuted"] += refuted(result)
    row["low_refuted"] += below_reference(result, reference)
    line = f"  {quantity} {target}: {result.answer} {result.n_drop} {result.size_interval}"
    line += " REFUTED" if refuted(result) else ""
    if backend is not None:
        counting = Counting(backend)
        looped = bayesij.amip(post, quantity, target, backend=counting, max_refits=6, **extra)
        row["refits_decided"] += looped.answer in ("reached", "not reachable")
        row["refits"] += len(set(counting.keys))
        row["refuted"] += refuted(looped)
        row["low_refuted"] += below_reference(looped, reference)
        repeated = len(counting.keys) - len(set(counting.keys))
        line += f" | refits: {looped.answer} {looped.n_drop} {looped.size_interval}"
        line += f" ({len(counting.keys)} refits"
        line += f", {repeated} repeated)" if repeated else ")"
        line += " REFUTED" if refuted(looped) else ""
    return line


def _reference(kind, X, y, k, target):
    if kind in FAMILIES:
        found = logistic.ee_amip(X, y, k, target, family=FAMILIES[kind])[0]
    else:
        found = ols_amip(X, y, k, target)[0]
    return None if found is None else int(found.size)


def _refuted(kind, X, y, result, k, target, reference) -> bool:
    if result.reachable and result.n_drop:  # "reached", or a sure upper bound
        return not _reaches(kind, X, y, result, k, target)
    limit = int(np.floor(0.1 * y.size))
    return result.answer == "not reachable" and reference is not None and reference <= limit


def _hierarchy_refuted(y, group, result, reference, grouped: bool) -> bool:
    """A "reached" set checked by the long exact Gibbs refit without it (``grouped``: its
    units are groups, all their observations dropped); "not reachable" against the
    reference's exact-refit-confirmed set within ``alpha_max``."""
    if result.reachable and result.n_drop:  # "reached", or a sure upper bound
        sign = {"mean": 0, "lower end": -1, "upper end": 1}[result.metric]
        dropped = np.flatnonzero(result.kept == 0)
        if grouped:
            dropped = np.flatnonzero(np.isin(group, dropped))
        after = hierarchy.metric_after(y, group, dropped, "mu", sign)
        return bool(np.sign(after) == np.sign(result.original_value))
    return result.answer == "not reachable" and reference is not None


def run_hierarchy(name: str, refits: bool) -> dict:
    """The questions on ``mu`` of a varying-intercept model (:data:`MODELS`): over its
    observations, or (``-groups``) over its groups from each group's log-likelihood with
    its effect integrated out, as the audit asks them of a fit whose grouping it knows
    (refits then drop whole groups)."""
    grouped = name.endswith("-groups")
    y, group = MODELS[name.removesuffix("-groups")][0]()
    if grouped:
        backend = hierarchy.GroupGibbsBackend(y, group, seed=SEED)
        reference_of = hierarchy.group_reference
    else:
        backend = hierarchy.GibbsHierarchyBackend(y, group, seed=SEED)
        reference_of = hierarchy.greedy_reference
    post = backend.fit(np.ones(backend.n_obs))
    density = (
        {}
        if grouped or not DENSITY
        else {"grad_log_posterior": hierarchy.HierarchyDensity(y, group)}
    )
    draws = post.quantities.sel(quantity="mu").values
    limit = int(np.floor(0.1 * backend.n_obs))
    row = dict(
        model=name, questions=0, draws=0, refits_decided=0, refits=0, refuted=0, low_refuted=0
    )
    start = time.perf_counter()
    for target, sign in (("sign", 0), ("significance", 1), ("sign_and_significance", -1)):
        # the interval end nearer zero (significance) or farther (sign and significance)
        end = int(-np.sign(draws.mean())) * sign
        flip = -float(np.sign(hierarchy.metric_after(y, group, [], "mu", end)))
        reference = reference_of(y, group, end, flip, limit)
        refuted = partial(_hierarchy_refuted, y, group, reference=reference, grouped=grouped)
        line = _ask(
            post, "mu", target, density, backend if refits else None, row, refuted, reference
        )
        print(line + f" | reference {reference}", flush=True)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run(name: str, refits: bool) -> dict:
    if name.endswith("-groups") or MODELS[name][1] == "hierarchy":
        return run_hierarchy(name, refits)
    make, kind, control_variates = MODELS[name]
    X, y = make()
    if kind in FAMILIES:
        backend = logistic.LogisticBackend(X, y, seed=SEED, family=FAMILIES[kind])
    else:
        backend = refit.FlatPriorRegressionBackend(X, y, draws=4000, seed=SEED)
    post, score, theta = backend.fit_with_gradient(np.ones(y.size))
    extra = amip_gradient(score, theta) if control_variates or GRADIENT else {}
    if DENSITY and kind == "normal":
        extra = {"grad_log_posterior": RegressionDensity(X, y, score, theta)}
    row = dict(
        model=name, questions=0, draws=0, refits_decided=0, refits=0, refuted=0, low_refuted=0
    )
    start = time.perf_counter()
    for k in range(1, X.shape[1]):
        for target in TARGETS:
            quantity = f"beta[{k + 1}]"
            reference = _reference(kind, X, y, k, target)
            refuted = partial(_refuted, kind, X, y, k=k, target=target, reference=reference)
            line = _ask(
                post, quantity, target, extra, backend if refits else None, row, refuted, reference
            )
            print(line + f" | reference {reference}", flush=True)
    if kind == "normal":
        _sigma_question(X, y, post, backend, refits, extra, row)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = list(MODELS) + GROUPED
    parser.add_argument("--models", nargs="+", default=names, choices=names)
    parser.add_argument("--refits", action="store_true", help="also refits in the loop")
    parser.add_argument(
        "--gradient", action="store_true", help="every model with its log posterior's gradient"
    )
    parser.add_argument(
        "--density", action="store_true", help="regressions and hierarchies with their density"
    )
    parser.add_argument("--seed", type=int, default=1, help="the seed of every model's draws")
    args = parser.parse_args()
    global GRADIENT, DENSITY, SEED
    GRADIENT, DENSITY, SEED = args.gradient, args.density, args.seed
    warnings.simplefilter("ignore")
    rows = []
    for name in args.models:
        print(f"{name}:", flush=True)
        rows.append(run(name, args.refits))
    print(f"\nbayesij {getattr(bayesij, '__version__', '?')}")
    header = "| model | questions | decided from draws | decided with refits | refits | refuted |"
    print(header + " size interval above a refit-confirmed set |\n|---|---|---|---|---|---|---|")
    for r in rows:
        with_refits = f"{r['refits_decided']}" if args.refits else "-"
        print(
            f"| {r['model']} | {r['questions']} | {r['draws']} | {with_refits} | "
            f"{r['refits'] if args.refits else '-'} | {r['refuted']} | {r['low_refuted']} |"
        )


if __name__ == "__main__":
    main()
