"""What a campaign keeps of each refit: posterior means with their Monte Carlo errors and the
log predictive densities of the points it was asked about (never the full draws)."""

from __future__ import annotations

import numpy as np

from bayesij.array.ess import relative_eff
from bayesij.array.holdout import joint_log_predictive_density, log_predictive_density
from bayesij.array.pareto import own_tail_khat_rows
from bayesij.data.posterior import Posterior

__all__ = ["summarise", "held_out_khat"]


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
    groups first appear among the points, with ``lpd_groups_mcse``). Each density has the
    Pareto k-hat of its draws beside it (``lpd_khat``, ``lpd_joint_khat``,
    ``lpd_groups_khat``: :func:`held_out_khat`): above 0.7 the refit's own Monte Carlo
    mean of the predictive density is unreliable, "exact" or not.
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
        record["lpd_khat"] = held_out_khat(held_out).tolist()
        # Jointly: log p(x_points | fit), e.g. a block of future observations given the past.
        record["lpd_joint"], record["lpd_joint_mcse"] = joint_log_predictive_density(held_out)
        record["lpd_joint_khat"] = float(held_out_khat(held_out.sum(axis=2, keepdims=True))[0])
    if len(points) and len(point_groups):
        codes = np.asarray(point_groups)
        joint = [
            joint_log_predictive_density(held_out[:, :, codes == g])
            for g in dict.fromkeys(codes.tolist())
        ]
        record["lpd_groups"] = [value for value, _ in joint]
        record["lpd_groups_mcse"] = [mcse for _, mcse in joint]
        sums = np.stack(
            [held_out[:, :, codes == g].sum(axis=2) for g in dict.fromkeys(codes.tolist())],
            axis=2,
        )
        record["lpd_groups_khat"] = held_out_khat(sums).tolist()
    return record


def held_out_khat(log_lik: np.ndarray) -> np.ndarray:
    """The Pareto k-hat of the draws of each held-out predictive density ``exp(l_n)``
    (n_chains, n_draws, P) -> (P,): the right tail's, its length from the draws' own tail
    ESS (``posterior::pareto_khat``'s rule, the chains stacked; inf where a few draws hold
    all the density and the tail has no spread). The exact refit's
    ``log mean_s exp(l_sn)`` is a Monte Carlo mean of these draws: with k-hat above 0.7 its
    error is not the reported MCSE (brms issues 1882, 1849)."""
    flat = np.asarray(log_lik, dtype=float).reshape(-1, np.shape(log_lik)[-1]).T  # (P, S)
    top = np.max(flat, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        scaled = np.exp(flat - np.where(np.isfinite(top), top, 0.0))
        k = own_tail_khat_rows(scaled, "right")
    # NaN where the tail has no spread (a few draws hold all the density, the rest 0): the
    # mean is one draw's, as unreliable as a k-hat can say.
    return np.where(np.isnan(k), np.inf, k)
