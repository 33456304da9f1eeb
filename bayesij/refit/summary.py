"""What a campaign keeps of each refit: posterior means with their Monte Carlo errors and the
log predictive densities of the points it was asked about (never the full draws)."""

from __future__ import annotations

import numpy as np

from bayesij.array._numeric import exp_and_logsumexp
from bayesij.array.ess import relative_eff
from bayesij.data.posterior import Posterior

__all__ = ["summarise", "log_predictive_density"]


def _mean_and_mcse(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, sds and MCSEs ``sd / sqrt(S r_eff)`` of (n_chains, n_draws, K) draws."""
    flat = draws.reshape(-1, draws.shape[-1])
    sd = flat.std(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcse = sd / np.sqrt(flat.shape[0] * relative_eff(draws))
    return flat.mean(axis=0), sd, np.where(sd > 0, mcse, 0.0)


def log_predictive_density(log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log mean_s exp(l_s)`` of each column of (n_chains, n_draws, K) and its MCSE.

    The MCSE is the delta method on the mean of ``p = exp(l)``: ``sd(p) / (mean(p)
    sqrt(S r_eff))`` with r_eff from the chains.
    """
    flat = log_lik.reshape(-1, log_lik.shape[-1])
    scaled, lse = exp_and_logsumexp(flat.T)
    lpd = lse - np.log(flat.shape[0])
    mean = scaled.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = relative_eff(scaled.T.reshape(log_lik.shape))
        mcse = scaled.std(axis=1, ddof=1) / mean / np.sqrt(flat.shape[0] * efficiency)
    return lpd, np.where(np.isfinite(mcse), mcse, np.nan)


def summarise(post: Posterior, points=()) -> dict:
    """A JSON-ready summary of a fit: quantity means, sds, MCSEs; lpd of ``points``.

    ``points`` are positions of observations whose ``log p(x_n | fit)`` is wanted (the
    held-out ones of a LOO or K-fold refit).
    """
    mean, sd, mcse = _mean_and_mcse(post.quantities.values)
    record = {
        "quantities": post.quantity_names,
        "mean": mean.tolist(),
        "sd": sd.tolist(),
        "mcse": mcse.tolist(),
        "n_draws": post.n_draws,
        "points": [int(p) for p in points],
        "lpd": [],
        "lpd_mcse": [],
    }
    if len(points):
        lpd, lpd_mcse = log_predictive_density(
            np.asarray(post.log_lik.values[:, :, list(points)], dtype=float)
        )
        record["lpd"], record["lpd_mcse"] = lpd.tolist(), lpd_mcse.tolist()
    return record
