"""The cluster bootstrap of the radon model against its posterior and the IJ over counties.

Draws the 85 counties with replacement ``B`` times, each drawn copy a new county with its
own intercept (``refit.cluster_bootstrap`` with a model factory rebuilding the PyMC radon
model from the resampled houses), and compares the bootstrap sd of each global posterior
mean with the posterior sd and with the IJ over counties (which holds each county's own
intercept: it approximates reweighting counties, not drawing new ones).

    python examples/radon_cluster_bootstrap.py [B]

Needs PyMC; about 40 s per refit on a 2-core machine. The campaign is stored in
``radon-cluster-campaign/``: an interrupted run resumes.
"""

import sys
import warnings

import numpy as np
import pandas as pd

import bayesij
from bayesij import refit
from bayesij.demo import radon, radon_model, sample_radon

QUANTITIES = ["mu_a", "beta_uranium", "beta_floor", "sigma_a", "sigma_y"]
FRAME = radon()


def resampled_fit(rows, groups):
    """The radon model refitted to the houses at ``rows``, ``groups`` their new counties."""
    import pymc as pm

    frame = FRAME.iloc[rows].copy()
    frame["county_idx"] = groups
    frame["id"] = [f"h{i}" for i in range(len(frame))]
    counties = [f"c{k}" for k in range(int(groups.max()) + 1)]
    with warnings.catch_warnings(), radon_model(frame, counties):
        warnings.simplefilter("ignore")
        seed = int(np.sum(rows * np.arange(1, rows.size + 1)) % 2**31)
        fit = pm.sample(500, chains=4, cores=1, random_seed=seed, progressbar=False)
    draws = np.stack([fit["posterior"][q].values for q in QUANTITIES], axis=-1)
    log_lik = np.zeros(draws.shape[:2] + (1,))  # the campaign keeps the means only
    return bayesij.from_arrays(draws, log_lik, quantity_names=QUANTITIES)


def main(B: int = 20) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sample_radon(draws=1000, chains=4, seed=1)
    report = refit.cluster_bootstrap(
        fit,
        resampled_fit,
        B=B,
        groups="county",
        quantities=QUANTITIES,
        store="radon-cluster-campaign",
        executor="sequential",
    )
    table = report.comparisons.copy()
    table["approximation_sd"] = np.sqrt(table["approximation"].clip(lower=0))
    table["cluster_bootstrap_sd"] = np.sqrt(table["exact"].clip(lower=0))
    with pd.option_context("display.width", 120):
        print(table[["quantity", "method", "approximation_sd", "cluster_bootstrap_sd"]])
    print(report.summary)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
