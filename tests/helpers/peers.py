"""The peers bayesij is checked against, in whichever ArviZ generation is installed.

Python 3.11 gets ArviZ 0.23 (``InferenceData``, ``az.loo``, ``az.waic``, ``az.psislw``);
Python >= 3.12 can get ArviZ 1.x (``xarray.DataTree``, arviz-stats' ``loo``). Each helper
returns the same thing in both, with the bayesij options that reproduce that peer.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import arviz as az
import numpy as np
from scipy.special import logsumexp

from bayesij import PsisOptions

ARVIZ_1 = int(az.__version__.split(".")[0]) >= 1

#: bayesij.loo options that reproduce the installed peer: ArviZ 0.23 (ceil tail rule, ties
#: left out of the tail, SE with ddof 0) or arviz-stats 1.x (floor, ties by NumPy's sort, ddof 1).
LOO_OPTIONS = (
    PsisOptions(tail_rule="floor", ties="quicksort", ddof=1)
    if ARVIZ_1
    else PsisOptions(tail_rule="ceil", ties="above", ddof=0)
)


def quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def load_example(name: str):
    """An example fit shipped with ArviZ (InferenceData in 0.23, DataTree in 1.x)."""
    return quiet(az.load_arviz_data, name)


def log_lik_values(data, variable: str = "obs") -> np.ndarray:
    """A log_likelihood variable's values (chain, draw, obs...), either generation."""
    return data["log_likelihood"][variable].values


def from_dict(**groups):
    """``az.from_dict`` with groups as keywords (0.23) or as one dict (1.x); ArviZ 0.23's
    ``from_dict`` has no ``log_prior`` keyword, so that group is added afterwards."""
    if ARVIZ_1:
        return az.from_dict(groups)
    log_prior = groups.pop("log_prior", None)
    data = az.from_dict(**groups)
    if log_prior is not None:
        data.add_groups({"log_prior": log_prior})
    return data


class PeerLoo(NamedTuple):
    elpd_i: np.ndarray
    pareto_k: np.ndarray
    elpd: float
    se: float
    p: float
    log_weights: np.ndarray | None  # (n_draws, n_obs), normalised


def peer_loo(data, reff: float) -> PeerLoo:
    """PSIS-LOO by the installed peer: ``az.loo`` (0.23) or ``arviz_stats.loo`` (1.x)."""
    if ARVIZ_1:
        import arviz_stats

        result = quiet(arviz_stats.loo, data, pointwise=True, reff=reff)
        weights = result.log_weights
        if weights is not None:
            obs_dims = [d for d in weights.dims if d not in ("chain", "draw")]
            weights = weights.transpose("chain", "draw", *obs_dims).values
            weights = weights.reshape(-1, int(np.prod(weights.shape[2:])))
            with np.errstate(invalid="ignore"):  # columns arviz-stats leaves NaN
                weights = weights - logsumexp(weights, axis=0)
        return PeerLoo(
            result.elpd_i.values.ravel(),
            result.pareto_k.values.ravel(),
            result.elpd,
            result.se,
            result.p,
            weights,
        )
    result = quiet(az.loo, data, pointwise=True, reff=reff)
    return PeerLoo(
        result.loo_i.values.ravel(),
        result.pareto_k.values.ravel(),
        result.elpd_loo,
        result.se,
        result.p_loo,
        None,
    )


def psis_log_weights(log_lik: np.ndarray, reff: float) -> np.ndarray:
    """Normalised PSIS leave-one-out log-weights (n_draws, n_obs) by the installed peer,
    for a log-likelihood of shape (n_chains, n_draws, n_obs)."""
    if ARVIZ_1:
        data = from_dict(posterior={"m": log_lik[..., 0]}, log_likelihood={"y": log_lik})
        return peer_loo(data, reff).log_weights
    log_weights, _ = quiet(az.psislw, -log_lik.reshape(-1, log_lik.shape[2]).T, reff=reff)
    return log_weights.T


#: R loo's saved reference values and the inputs they were computed from.
REFERENCE = Path(__file__).parents[1] / "reference"


def r_log_lik(name: str) -> np.ndarray:
    """A log-likelihood saved for R loo, its chain in the first column: (chains, draws, N)."""
    table = np.loadtxt(REFERENCE / f"log_lik_{name}.csv", delimiter=",", skiprows=1)
    chains = table[:, 0].astype(int)
    return table[:, 1:].reshape(chains.max(), -1, table.shape[1] - 1)
