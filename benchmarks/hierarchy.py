"""A Poisson GLMM of the epilepsy shape judged over its patients, with the patients'
effects integrated out (``refit.PyMCDensity.group_log_lik``), against exact PyMC refits.

The data are simulated in the shape of MASS's ``epil`` (59 patients x 4 visits, a
patient-level treatment, log baseline count and age, a fourth-visit indicator, counts
around 8, a normal patient intercept of sd 0.5); the model is the usual non-centred
Poisson GLMM with the patient index saved as ``pm.Data``. Printed:

- leave-one-patient-out: PSIS k-hat over the patients' conditional terms (the draws'
  log-likelihood summed by patient) and over the integrated ones; for the patients whose
  conditional k-hat is highest, the integrated PSIS elpd beside the exact one (PyMC refit
  without the patient, its integrated term averaged over the refit's draws);
- the sd of the treatment effect's posterior mean: the posterior sd, the IJ over the
  patients' conditional terms, the IJ over the integrated ones (with the audit's verdict),
  and a cluster bootstrap of ``--refits`` exact refits (patients drawn with replacement as
  new patients: ``refit.cluster_bootstrap``).

Run: ``python benchmarks/hierarchy.py [--refits 40] [--exact 3]`` (PyMC; about 15 s a
refit on 2 cores).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import logsumexp

import bayesij
from bayesij import refit

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


def model_of(X, codes, y):
    import pymc as pm

    n_groups = int(codes.max()) + 1
    coords = {"patient": [f"p{g}" for g in range(n_groups)], "obs": np.arange(y.size)}
    with pm.Model(coords=coords) as model:
        index = pm.Data("patient_idx", codes, dims="obs")
        b0 = pm.Normal("b0", 0.0, 5.0)
        b = pm.Normal("b", 0.0, 2.0, shape=X.shape[1])
        sd_u = pm.HalfNormal("sd_u", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="patient")
        eta = b0 + pm.math.dot(X, b) + sd_u * z[index]
        pm.Poisson("y", pm.math.exp(eta), observed=y, dims="obs")
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
    parser.add_argument("--exact", type=int, default=3, help="patients refitted exactly")
    args = parser.parse_args()
    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)
    X, codes, y = epilepsy_shaped()
    model = model_of(X, codes, y)
    start = time.perf_counter()
    idata = sample(model)
    print(f"fit: {time.perf_counter() - start:.1f} s")
    density = refit.PyMCDensity(model)
    start = time.perf_counter()
    terms = density.group_log_lik(idata, "z")
    print(f"integrated terms: {time.perf_counter() - start:.1f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditional = bayesij.loo(idata, groups="patient_idx").pointwise
        integrated = bayesij.loo(terms).pointwise
        audit = bayesij.audit(idata, quantities=["b[1]"], amip=False, marginal_log_lik=terms)
    print(
        f"leave-one-patient-out: k-hat > 0.7 for {(conditional['pareto_k'] > 0.7).sum()} of "
        f"{N_PATIENTS} patients (conditional), {(integrated['pareto_k'] > 0.7).sum()} "
        f"(integrated; max {integrated['pareto_k'].max():.2f})"
    )
    backend = refit.PyMCBackend(model, draws=1000, tune=1000, chains=2)
    for g in np.argsort(-conditional["pareto_k"].to_numpy())[: args.exact]:
        weights = np.ones(y.size)
        weights[codes == g] = 0.0
        left_out = density.group_log_lik(backend.fit(weights), "z").values[..., g].ravel()
        exact = logsumexp(left_out) - np.log(left_out.size)
        row = integrated.iloc[g]
        print(
            f"  patient {g}: conditional k-hat {conditional['pareto_k'].iloc[g]:.2f}; "
            f"integrated k-hat {row['pareto_k']:.2f}, PSIS {row['elpd_loo']:.3f} "
            f"± {row['mcse_elpd_loo']:.3f}, exact {exact:.3f}"
        )
    posterior_sd = float(idata.posterior["b"].values[..., 0].std())
    conditional_ij = float(np.sqrt(audit.ij.variance_corrected["b[1]"]))
    integrated_ij = float(np.sqrt(audit.ij_integrated.variance_corrected["b[1]"]))
    verdict = audit.comparison_table.loc["b[1]"]
    print(
        f"treatment effect: posterior sd {posterior_sd:.3f}; IJ over patients "
        f"{conditional_ij:.3f} (conditional), {integrated_ij:.3f} (integrated: verdict "
        f"{verdict['verdict']!r}, why {verdict['why']!r})"
    )
    if args.refits:

        def fit(rows, groups):
            return sample(model_of(X[rows], np.asarray(groups), y[rows]), draws=500)

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


if __name__ == "__main__":
    main()
