"""The demonstration audit: a real Stan regression in which a few observations matter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bayesij.adapters.pystan import from_pystan
from bayesij.data.posterior import Posterior
from bayesij.refit.stan import sample_pystan
from bayesij.stan_models import stan_code

__all__ = [
    "demo_data",
    "fit_demo",
    "demo_backend",
    "grunfeld",
    "grunfeld_model",
    "sample_grunfeld",
    "radon",
    "radon_model",
    "sample_radon",
]

GRUNFELD = Path(__file__).parent / "demo_data" / "grunfeld.csv"


def demo_data(n: int = 80, seed: int = 20261120) -> dict:
    """Data for ``bayesij/stan_models/linear_regression.stan`` with three high-leverage points.

    A weak positive slope (0.3, noise sd 1) over ``n - 3`` ordinary points, plus three
    points far out in x that pull the slope down: the sign of the slope rests on them.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 1.0 + 0.3 * x + rng.normal(size=n)
    x[-3:] = [3.2, 3.6, 4.0]
    y[-3:] = [-2.5, -3.0, -2.0]
    return {"N": n, "K": 1, "X": x[:, None], "y": y, "weights": np.ones(n)}


#: The demo's quantities and warmup, for its fit and its refits alike.
DEMO_QUANTITIES = ["alpha", "beta", "sigma"]
DEMO_WARMUP = 1000


def fit_demo(
    n: int = 80,
    seed: int = 20261120,
    num_chains: int = 4,
    num_samples: int = 1000,
    progress: bool = False,
) -> tuple[Posterior, dict]:
    """Compile (once; PyStan caches the build) and sample the demo regression.

    Returns the posterior container of ``alpha``, ``beta[1]`` and ``sigma`` and the data.
    ``progress=True`` shows PyStan's progress on stderr.
    """
    data = demo_data(n, seed)
    fit = sample_pystan(
        stan_code("linear_regression"),
        data,
        seed,
        num_chains=num_chains,
        num_samples=num_samples,
        progress=progress,
        num_warmup=DEMO_WARMUP,
    )
    return from_pystan(fit, quantities=DEMO_QUANTITIES), data


def demo_backend(data: dict):
    """The demo regression refitted by PyStan under observation weights (the program and
    settings of :func:`fit_demo`): what ``bayesij demo`` verifies its open verdicts with."""
    from bayesij.refit.backends import PyStanBackend

    return PyStanBackend(
        "linear_regression", data, quantities=DEMO_QUANTITIES, num_warmup=DEMO_WARMUP
    )


def grunfeld() -> pd.DataFrame:
    """Grunfeld's (1950) investment panel: 11 US firms x 20 years (1935-1954) of gross
    investment, market value and capital stock (public domain, as statsmodels ships it),
    with the firm's code (``firm_idx``, order of first appearance) and an ``id`` such as
    ``'General Motors 1935'``."""
    frame = pd.read_csv(GRUNFELD)
    firms = list(dict.fromkeys(frame["firm"]))
    frame["firm_idx"] = frame["firm"].map({f: i for i, f in enumerate(firms)})
    frame["id"] = frame["firm"] + " " + frame["year"].astype(str)
    return frame


def grunfeld_model(frame: pd.DataFrame | None = None, reference: pd.DataFrame | None = None):
    """A hierarchical PyMC model of the Grunfeld panel (needs PyMC)::

        log invest ~ Normal(a[firm] + b[value] log value + b[capital] log capital, sigma)
        a = mu_a + tau_a * z_a,  z_a ~ Normal(0, 1)   (non-centred firm intercepts)

    with the log predictors standardised (by ``reference``'s mean and sd, default
    ``frame``'s: a model of some rows with the whole panel's scaling is the whole model
    without the others), the firms as the ``firm`` coordinate, the rows' ids as the
    ``obs`` coordinate and ``firm_idx`` as ``pm.Data`` over ``obs``: the fit then says
    which unit is exchangeable (:func:`bayesij.audit` reads it).
    """
    import pymc as pm

    frame = grunfeld() if frame is None else frame
    firms = list(dict.fromkeys(grunfeld()["firm"]))
    coords = {"firm": firms, "obs": frame["id"].tolist(), "coef": ["value", "capital"]}
    x = standardised_predictors(frame, frame if reference is None else reference)
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


def standardised_predictors(frame: pd.DataFrame, reference: pd.DataFrame) -> np.ndarray:
    """``log value`` and ``log capital`` of ``frame``, centred and scaled as ``reference``'s."""
    x, base = (np.log(f[["value", "capital"]].to_numpy()) for f in (frame, reference))
    return (x - base.mean(axis=0)) / base.std(axis=0)


def sample_grunfeld(draws: int = 1000, chains: int = 4, seed: int = 1):
    """Sample :func:`grunfeld_model` with the pointwise log-likelihood and the log prior
    stored (PyMC 6: a DataTree; PyMC 5: an InferenceData), as a user would."""
    import pymc as pm

    with grunfeld_model():
        fit = pm.sample(draws=draws, chains=chains, cores=1, random_seed=seed, progressbar=False)
        pm.compute_log_likelihood(fit, progressbar=False)
        pm.stats.compute_log_prior(fit, progressbar=False)
    return fit


RADON = Path(__file__).parent / "demo_data" / "radon.csv"


def radon() -> pd.DataFrame:
    """Gelman & Hill's (2007) Minnesota radon data: 919 houses in 85 counties, the log radon
    level, the floor it was measured on (0 basement, 1 first floor) and the county's log
    uranium, with the county's code (``county_idx``, order of first appearance) and an
    ``id`` such as ``'AITKIN 1'`` (the house's number within its county)."""
    frame = pd.read_csv(RADON)
    counties = list(dict.fromkeys(frame["county"]))
    frame["county_idx"] = frame["county"].map({c: i for i, c in enumerate(counties)})
    frame["id"] = frame["county"] + " " + (frame.groupby("county").cumcount() + 1).astype(str)
    return frame


def radon_model(frame: pd.DataFrame | None = None, counties: list | None = None):
    """Gelman & Hill's varying-intercept radon model in PyMC, non-centred (needs PyMC)::

        log_radon ~ Normal(a[county] + beta_floor floor, sigma_y)
        a = mu_a + beta_uranium log_uranium[county] + sigma_a z_a,  z_a ~ Normal(0, 1)

    with the counties as the ``county`` coordinate (default all 85, whichever rows
    ``frame`` holds: a county without rows keeps its intercept, drawn from the population)
    and ``county_idx`` as ``pm.Data`` over ``obs``. ``counties``: other county labels,
    ``frame``'s ``county_idx`` coding them (a cluster bootstrap's resampled counties, each
    with its rows and its uranium level).
    """
    import pymc as pm

    everything = radon()
    frame = everything if frame is None else frame
    if counties is None:
        counties = list(dict.fromkeys(everything["county"]))
        uranium = everything.groupby("county", sort=False)["log_uranium"].first()[counties]
    else:
        uranium = frame.groupby("county_idx")["log_uranium"].first().reindex(range(len(counties)))
    coords = {"county": list(counties), "obs": frame["id"].tolist()}
    with pm.Model(coords=coords) as model:
        county_idx = pm.Data("county_idx", frame["county_idx"].to_numpy(), dims="obs")
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        beta_uranium = pm.Normal("beta_uranium", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        z_a = pm.Normal("z_a", 0.0, 1.0, dims="county")
        a = pm.Deterministic(
            "a", mu_a + beta_uranium * uranium.to_numpy() + sigma_a * z_a, dims="county"
        )
        beta_floor = pm.Normal("beta_floor", 0.0, 10.0)
        sigma_y = pm.HalfNormal("sigma_y", 1.0)
        mean = a[county_idx] + beta_floor * frame["floor"].to_numpy()
        pm.Normal("log_radon", mean, sigma_y, observed=frame["log_radon"].to_numpy(), dims="obs")
    return model


def sample_radon(draws: int = 1000, chains: int = 4, seed: int = 1):
    """Sample :func:`radon_model` with the pointwise log-likelihood and the log prior stored,
    as a user would."""
    import pymc as pm

    with radon_model():
        fit = pm.sample(draws=draws, chains=chains, cores=1, random_seed=seed, progressbar=False)
        pm.compute_log_likelihood(fit, progressbar=False)
        pm.stats.compute_log_prior(fit, progressbar=False)
    return fit
