"""A hierarchical PyMC panel model of the Grunfeld (1950) investment data, sampled for real.

The data: 11 US firms x 20 years (1935-1954) of gross investment, market value and capital
stock (``tests/reference/grunfeld.csv``, public domain, as statsmodels ships it). The model:

    log invest[i] ~ Normal(a[firm[i]] + b_value * log value[i] + b_capital * log capital[i],
                           sigma)
    a = mu_a + tau_a * z_a,  z_a ~ Normal(0, 1)  (non-centred firm intercepts)

with the firm names as the ``firm`` coordinate and "firm year" labels as observation ids, so
that the exchangeable unit (the firm) can be read from the fit: the ``firm_idx`` constant
data indexes the posterior dim ``firm``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).parent.parent / "reference" / "grunfeld.csv"


def grunfeld() -> pd.DataFrame:
    """The 220 rows, with the firm's code (order of first appearance) and an id."""
    frame = pd.read_csv(DATA)
    firms = list(dict.fromkeys(frame["firm"]))
    frame["firm_idx"] = frame["firm"].map({f: i for i, f in enumerate(firms)})
    frame["id"] = frame["firm"] + " " + frame["year"].astype(str)
    return frame


def panel_model(frame: pd.DataFrame | None = None):
    """The PyMC model (non-centred firm intercepts) of ``frame`` (default: all rows)."""
    import pymc as pm

    frame = grunfeld() if frame is None else frame
    firms = list(dict.fromkeys(grunfeld()["firm"]))
    coords = {"firm": firms, "obs": frame["id"].tolist(), "coef": ["value", "capital"]}
    x = np.log(frame[["value", "capital"]].to_numpy())
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    with pm.Model(coords=coords) as model:
        firm_idx = pm.Data("firm_idx", frame["firm_idx"].to_numpy(), dims="obs")
        mu_a = pm.Normal("mu_a", 4.0, 2.0)
        tau_a = pm.HalfNormal("tau_a", 2.0)
        z_a = pm.Normal("z_a", 0.0, 1.0, dims="firm")
        a = pm.Deterministic("a", mu_a + tau_a * z_a, dims="firm")
        b = pm.Normal("b", 0.0, 1.0, dims="coef")
        sigma = pm.HalfNormal("sigma", 1.0)
        mean = a[firm_idx] + pm.math.dot(x, b)
        pm.Normal("log_invest", mean, sigma, observed=np.log(frame["invest"]), dims="obs")
    return model


def sample_panel(draws: int = 1000, chains: int = 4, seed: int = 1):
    """Posterior draws with the pointwise log-likelihood and the log prior (a DataTree under
    PyMC 6, an InferenceData under PyMC 5)."""
    import pymc as pm

    model = panel_model()
    with model:
        fit = pm.sample(draws=draws, chains=chains, cores=1, random_seed=seed, progressbar=False)
        pm.compute_log_likelihood(fit, progressbar=False)
        pm.stats.compute_log_prior(fit, progressbar=False)
    return fit
