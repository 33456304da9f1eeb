"""Hierarchical models judged over their groups, with the groups' effects integrated out
(``refit.PyMCDensity.group_log_lik``), against exact PyMC refits.

``--model poisson`` (default): a Poisson GLMM of the epilepsy shape.

The data are simulated in the shape of MASS's ``epil`` (59 patients x 4 visits, a
patient-level treatment, log baseline count and age, a fourth-visit indicator, counts
around 8, a normal patient intercept of sd 0.5); the model is the usual non-centred
Poisson GLMM with the patient index saved as ``pm.Data``. Printed:

- leave-one-patient-out: PSIS k-hat over the patients' conditional terms (the draws'
  log-likelihood summed by patient) and over the integrated ones; for the patients whose
  conditional k-hat is highest, the integrated PSIS elpd beside the exact one (PyMC refit
  without the patient, its integrated term averaged over the refit's draws);
- the audit of the fit alone, which recovers the GLMM from its draws
  (``bayesij.stats.integrated.recovered_terms``; nothing for the normal radon model): how
  far its integrated terms are from the model's, its time, and how many of its AMIP
  answers are decided and equal to those of the audit given the model's terms;
- the sd of the treatment effect's posterior mean: the posterior sd, the IJ over the
  patients' conditional terms, the IJ over the integrated ones (with the audit's verdict),
  and a cluster bootstrap of ``--refits`` exact refits (patients drawn with replacement as
  new patients: ``refit.cluster_bootstrap``).

``--model logistic``: a logistic GLMM (60 schools x 8 pupils, a school-level treatment and
a pupil-level covariate, a normal school intercept of sd 1). ``--model radon``: PyMC's
varying-intercept radon model on Gelman & Hill's Minnesota data (919 houses in 85 counties,
``log_radon ~ Normal(a[county] + b floor, sigma)``, non-centred county intercepts; shipped
in ``bayesij/demo_data``); its "treatment effect" is the floor coefficient.

``--significance`` also asks the group-level AMIP question of the effect's significance
with the model given (``bayesij.audit(backend=refit.PyMCBackend,
settings={"max_refits": 3})``; the budget is ``--max-refits``) and checks a reached set by
one more exact refit without it.

Run: ``python benchmarks/hierarchy.py [--model poisson|logistic|radon] [--refits 40]
[--exact 3] [--significance]`` (PyMC; 15-60 s a refit on 2 cores).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import bayesij
from bayesij import refit
from bayesij.array.holdout import log_predictive_density

N_PATIENTS, VISITS = 59, 4


def epilepsy_shaped(seed: int = 0):
    """Covariates (n, 4: treatment, log baseline / 4, centred log age, visit 4), patient
    codes and counts of the epilepsy shape."""
    rng = np.random.default_rng(seed)
    treated = (np.arange(N_PATIENTS) >= 28).astype(float)
    log_base = np.log(rng.gamma(2.0, 16.0, N_PATIENTS) + 6) / 4
    log_age = np.log(rng.uniform(18, 42, N_PATIENTS))
    log_age -= log_age.mean()
    codes = np.repeat(np.arange(N_PATIENTS), VISITS)
    visit4 = np.tile([0.0, 0.0, 0.0, 1.0], N_PATIENTS)
    X = np.column_stack([treated[codes], log_base[codes], log_age[codes], visit4])
    effects = rng.normal(0.0, 0.5, N_PATIENTS)
    eta = -1.3 - 0.3 * X[:, 0] + 3.5 * X[:, 1] + 0.4 * X[:, 2] - 0.1 * X[:, 3]
    return X, codes, rng.poisson(np.exp(eta + effects[codes]))


def logistic_shaped(seed: int = 0, n_schools: int = 60, pupils: int = 8):
    """Covariates (n, 2: a school-level treatment, a pupil-level standard normal), school
    codes and 0/1 outcomes of a logistic GLMM with a normal school intercept of sd 1."""
    rng = np.random.default_rng(seed)
    treated = (np.arange(n_schools) % 2).astype(float)
    codes = np.repeat(np.arange(n_schools), pupils)
    X = np.column_stack([treated[codes], rng.normal(size=codes.size)])
    eta = -0.3 + 0.7 * X[:, 0] + 0.8 * X[:, 1] + rng.normal(0.0, 1.0, n_schools)[codes]
    return X, codes, rng.binomial(1, 1.0 / (1.0 + np.exp(-eta))).astype(float)


def radon():
    """Gelman & Hill's Minnesota radon data (shipped): the floor (n, 1), county codes and
    log radon."""
    import pandas as pd

    path = Path(bayesij.__file__).parent / "demo_data" / "radon.csv"
    table = pd.read_csv(path)
    codes = pd.factorize(table["county"])[0]
    return table[["floor"]].to_numpy(float), codes, table["log_radon"].to_numpy(float)


DATA = {"poisson": epilepsy_shaped, "logistic": logistic_shaped, "radon": radon}


def model_of(X, codes, y, family: str = "poisson"):
    import pymc as pm

    n_groups = int(codes.max()) + 1
    coords = {"group": [f"g{g}" for g in range(n_groups)], "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        index = pm.Data("group_idx", codes, dims="obs")
        b0 = pm.Normal("b0", 0.0, 5.0)
        b = pm.Normal("b", 0.0, 2.0, shape=X.shape[1])
        sd_u = pm.HalfNormal("sd_u", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        eta = b0 + pm.math.dot(X, b) + sd_u * z[index]
        if family == "poisson":
            pm.Poisson("y", pm.math.exp(eta), observed=y, dims="obs")
        elif family == "logistic":
            pm.Bernoulli("y", logit_p=eta, observed=y, dims="obs")
        else:
            sigma = pm.HalfNormal("sigma", 1.0)
            pm.Normal("y", eta, sigma, observed=y, dims="obs")
    return model


def sample(model, seed: int = 1, draws: int = 1000):
    import pymc as pm

    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws, tune=1000, chains=2, cores=1, random_seed=seed, progressbar=False)
        return pm.compute_log_likelihood(idata, progressbar=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refits", type=int, default=40, help="cluster bootstrap refits")
    parser.add_argument("--exact", type=int, default=3, help="groups refitted exactly")
    parser.add_argument("--model", choices=list(DATA), default="poisson")
    parser.add_argument("--significance", action="store_true", help="group-level AMIP")
    parser.add_argument("--max-refits", type=int, default=3, help="refits in the AMIP loop")
    args = parser.parse_args()
    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    X, codes, y = DATA[args.model]()
    n_groups = int(codes.max()) + 1
    model = model_of(X, codes, y, args.model)
    start = time.perf_counter()
    idata = sample(model)
    print(f"fit: {time.perf_counter() - start:.1f} s")
    density = refit.PyMCDensity(model)
    start = time.perf_counter()
    terms = density.group_log_lik(idata, "z")
    print(f"integrated terms: {time.perf_counter() - start:.1f} s")
    recovered_from_draws(idata, terms)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditional = bayesij.loo(idata, groups="group_idx").pointwise
        integrated = bayesij.loo(terms).pointwise
        audit = bayesij.audit(
            idata, quantities=["b[1]"], marginal_log_lik=terms, settings={"amip": False}
        )
    print(
        f"leave-one-group-out: k-hat > 0.7 for {(conditional['pareto_k'] > 0.7).sum()} of "
        f"{n_groups} groups (conditional), {(integrated['pareto_k'] > 0.7).sum()} "
        f"(integrated; max {integrated['pareto_k'].max():.2f})"
    )
    backend = refit.PyMCBackend(model, draws=1000, tune=1000, chains=2)
    for g in np.argsort(-conditional["pareto_k"].to_numpy())[: args.exact]:
        weights = np.ones(y.size)
        weights[codes == g] = 0.0
        left_out = density.group_log_lik(backend.fit(weights), "z").values[..., g : g + 1]
        exact = log_predictive_density(left_out)  # the refit's mean, its own MCSE
        row = integrated.iloc[g]
        gap = abs(row["elpd_loo"] - exact.elpd[0])
        print(
            f"  group {g}: conditional k-hat {conditional['pareto_k'].iloc[g]:.2f}; "
            f"integrated k-hat {row['pareto_k']:.2f}, PSIS {row['elpd_loo']:.3f} "
            f"± {row['mcse_elpd_loo']:.3f}, exact {exact.elpd[0]:.3f} ± {exact.mcse[0]:.3f} "
            f"(gap {gap / np.hypot(row['mcse_elpd_loo'], exact.mcse[0]):.1f} joint MCSE)"
        )
    posterior_sd = float(idata.posterior["b"].values[..., 0].std())
    conditional_ij = float(np.sqrt(audit.ij.variance_corrected["b[1]"]))
    integrated_ij = float(np.sqrt(audit.ij_integrated.variance_corrected["b[1]"]))
    verdict = audit.comparison_table.loc["b[1]"]
    print(
        f"effect b[1]: posterior sd {posterior_sd:.3f}; IJ over groups "
        f"{conditional_ij:.3f} (conditional), {integrated_ij:.3f} (integrated: verdict "
        f"{verdict['verdict']!r}, why {verdict['why']!r})"
    )
    if args.refits:

        def fit(rows, groups):
            return sample(model_of(X[rows], np.asarray(groups), y[rows], args.model), draws=500)

        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = refit.cluster_bootstrap(
                idata,
                fit,
                B=args.refits,
                groups=codes,
                quantities=["b[1]"],
                marginal_log_lik=terms,
                executor="sequential",
                progress=False,
            )
        rows = report.comparisons.set_index("method")
        boot, boot_se = rows.loc["posterior", "exact"], rows.loc["posterior", "exact_se"]
        marginal = rows.loc["ij (marginal)", "approximation"]
        print(
            f"cluster bootstrap ({report.n_refits} refits, {time.perf_counter() - start:.0f} s):"
            f" sd {np.sqrt(boot):.3f} (variance {boot:.4f} ± {boot_se:.4f}); the IJ over the "
            f"integrated terms {np.sqrt(marginal):.3f}"
        )
    if args.significance:
        significance(idata, model, X, codes, y, backend, args.max_refits)


def recovered_from_draws(idata, terms) -> None:
    """The audit given nothing but the fit (the GLMM recovered from its draws,
    :func:`bayesij.stats.integrated.recovered_terms`) beside the audit given the model's
    integrated terms: how far apart the terms are, and the AMIP answers of each."""
    from bayesij.data.fit import read
    from bayesij.stats.integrated import recovered_terms

    start = time.perf_counter()
    recovered, words = recovered_terms(read(idata))
    took = time.perf_counter() - start
    if recovered is None:
        print(f"recovered from the draws: nothing ({took:.1f} s)")
        return
    gap = float(np.abs(recovered.values - terms.values).max())
    print(f"recovered from the draws ({took:.1f} s): {words}; max |term - model's| {gap:.1e}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        bare = bayesij.audit(idata)
        took = time.perf_counter() - start
        given = bayesij.audit(idata, marginal_log_lik=terms)
    same = sum(
        (r.answer, list(r.drop_ids)) == (given.amip[k].answer, list(given.amip[k].drop_ids))
        for k, r in bare.amip.items()
    )
    decided = sum(r.answer != "undetermined" for r in bare.amip.values())
    print(
        f"audit of the fit alone: {took:.1f} s, {decided} of {len(bare.amip)} AMIP answers "
        f"decided, {same} the same as given the model's terms"
    )


class Counted:
    """A backend that counts its refits (and the distinct sets among them)."""

    def __init__(self, inner):
        self.inner, self.keys = inner, []

    def fit(self, weights):
        self.keys.append(np.asarray(weights, dtype=float).tobytes())
        return self.inner.fit(weights)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def significance(idata, model, X, codes, y, backend, max_refits: int = 3) -> None:
    """The group-level AMIP question of b[1]'s significance with the model given, and the
    set a refit confirmed (within the limit, or past it: ``past_limit_ids``) checked by one
    more exact refit without it, with another seed."""
    counted = Counted(refit.PyMCBackend(model, draws=1000, tune=1000, chains=2, seed=7))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(
            idata, quantities=["b[1]"], backend=counted, settings={"max_refits": max_refits}
        )
    answer = audit.amip[("b[1]", "significance")]
    print(
        f"b[1] significance over groups: {answer.answer}, {answer.n_drop} groups, size "
        f"{answer.size_interval}, {len(counted.keys)} refits ({len(set(counted.keys))} distinct), "
        f"{time.perf_counter() - start:.0f} s"
    )
    print(f"  {answer}")
    if answer.answer == "reached":
        kept = np.asarray(answer.kept, dtype=float)
        weights = kept[codes] if kept.size != y.size else kept  # a weight per group
    elif answer.past_limit_ids:  # the larger set a refit confirmed: checked again
        dropped = [int(label[1:]) for label in answer.past_limit_ids]  # "g12" -> 12
        weights = (~np.isin(codes, dropped)).astype(float)
    else:
        return
    draws = backend.fit(weights).quantities.sel(quantity="b[1]").values.ravel()
    low, high = np.quantile(draws, [0.025, 0.975])
    print(
        f"  independent refit (another seed) without the {int((weights == 0).sum())} rows of "
        f"the confirmed set: b[1] mean {draws.mean():.3f}, 95 % interval ({low:.3f}, "
        f"{high:.3f}); original {answer.original_value:.3f}"
    )


if __name__ == "__main__":
    main()
