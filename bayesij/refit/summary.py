"""What a campaign keeps of each refit: posterior means with their Monte Carlo errors and the
log predictive densities of the points it was asked about (never the full draws)."""

from __future__ import annotations

import numpy as np

from bayesij.array.ess import relative_eff
from bayesij.array.holdout import joint_log_predictive_density, log_predictive_density
from bayesij.data.posterior import Posterior

__all__ = ["summarise"]


def _mean_and_mcse(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, sds and MCSEs ``sd / sqrt(S r_eff)`` of (n_chains, n_draws, K) draws."""
    flat = draws.reshape(-1, draws.shape[-1])
    sd = flat.std(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcse = sd / np.sqrt(flat.shape[0] * relative_eff(draws))
    return flat.mean(axis=0), sd, np.where(sd > 0, mcse, 0.0)


def summarise(post: Posterior, points=(), point_groups=()) -> dict:
    """A JSON-ready summary of a fit: quantity means, sds, MCSEs; lpd of ``points``.

    ``points`` are positions of observations whose ``log p(x_n | fit)`` is wanted (the
    held-out ones of a LOO or K-fold refit); ``point_groups``, a group code per point, asks
    for each group's joint ``log p(x_g | fit)`` too (``lpd_groups``, in the order the
    groups first appear among the points, with ``lpd_groups_mcse``).
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
        held_out = post.log_lik.values[:, :, list(points)]
        lpd = log_predictive_density(held_out, check=False)
        record["lpd"], record["lpd_mcse"] = lpd.elpd.tolist(), lpd.mcse.tolist()
        # Jointly: log p(x_points | fit), e.g. a block of future observations given the past.
        record["lpd_joint"], record["lpd_joint_mcse"] = joint_log_predictive_density(held_out)
    if len(points) and len(point_groups):
        codes = np.asarray(point_groups)
        joint = [
            joint_log_predictive_density(held_out[:, :, codes == g])
            for g in dict.fromkeys(codes.tolist())
        ]
        record["lpd_groups"] = [value for value, _ in joint]
        record["lpd_groups_mcse"] = [mcse for _, mcse in joint]
    return record
