"""Prior and likelihood sensitivity by power-scaling (priorsense, arviz-stats ``psense``),
with the first-order derivatives from the influence engine."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, check_finite, check_real, fail
from bayesij.array.power_scaling import power_sensitivity
from bayesij.data.inference_data import (
    _group,
    aligned_draws,
    flatten_variables,
    group_names,
    has_groups,
)
from bayesij.data.posterior import Posterior
from bayesij.data.source import as_source

__all__ = ["psense", "log_prior_draws"]

CONFLICT = "potential prior-data conflict"
WEAK_LIKELIHOOD = "potential strong prior / weak likelihood"


def psense(
    data,
    *,
    quantities=None,
    var_name=None,
    log_prior=None,
    alphas=(0.99, 1.01),
    threshold: float = 0.05,
) -> pd.DataFrame:
    """Sensitivity of each quantity to power-scaling the prior and the likelihood.

    Parameters
    ----------
    data : InferenceData, DataTree or Posterior
        Posterior draws of the quantities and the pointwise log-likelihood.
    log_prior : str, callable or array_like, optional
        The log prior density at each draw: ``None`` takes the ``log_prior`` group of an
        InferenceData / DataTree (all its variables summed); a string names a quantity of
        the posterior holding it (a Stan generated quantity such as brms' ``lprior``; it is
        left out of the results); a callable gets the :class:`Posterior` and returns it;
        an array has shape (n_chains, n_draws) or (n_chains, n_draws, k) (summed over
        ``k``).
    quantities : str or list of str, optional
    var_name : str or list of str, optional
        The log-likelihood variable(s), summed over observations for the likelihood.
    alphas : (float, float), default (0.99, 1.01)
        Powers below and above 1 of the finite differences.
    threshold : float, default 0.05
        Sensitivities at or above it count as sensitive (priorsense's default).

    Returns
    -------
    pandas.DataFrame
        Indexed by quantity: ``prior`` and ``likelihood`` (the derivative of the cumulative
        Jensen-Shannon distance with respect to ``log2 alpha``, as arviz-stats ``psense``),
        ``diagnosis`` (``"potential prior-data conflict"`` when both reach ``threshold``,
        ``"potential strong prior / weak likelihood"`` when only the prior does, else
        ``"-"``), and the first-order derivatives of the posterior mean,
        ``d_mean_prior = Cov(f, log p(theta))`` and ``d_mean_likelihood = Cov(f, sum_n l_n)
        = sum_n psi_n`` (the influence scores summed), each per unit of ``alpha``.

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    low, high = _alphas(alphas)
    threshold = check_real(threshold, "threshold", 0.0, low_open=True)
    post = as_source(
        data, var_name=var_name, need_quantities=True, whole_matrix={"data": "psense"}
    ).posterior
    prior = log_prior_draws(data, post, log_prior)
    if isinstance(log_prior, str):
        quantities = [q for q in (quantities or post.quantity_names) if q != log_prior]
    if quantities is not None:
        post = post.select(quantities)
    draws = post.quantities.values.reshape(-1, len(post.quantity_names))
    likelihood = post.log_lik.values.reshape(draws.shape[0], -1).sum(axis=1)
    check_finite(likelihood, "log_lik")
    order = np.argsort(draws, axis=0, kind="stable")  # one sort for both components
    table = pd.DataFrame(
        {
            "prior": power_sensitivity(draws, prior, (low, high), order),
            "likelihood": power_sensitivity(draws, likelihood, (low, high), order),
        },
        index=pd.Index(post.quantity_names, name="quantity"),
    )
    table["diagnosis"] = [_diagnosis(p, lik, threshold) for p, lik in table.to_numpy()]
    table["d_mean_prior"] = _covariances(draws, prior)
    table["d_mean_likelihood"] = _covariances(draws, likelihood)
    return table


def log_prior_draws(data, post: Posterior, log_prior=None) -> np.ndarray:
    """The log prior at each draw, shape (S,), from any source :func:`psense` accepts."""
    n_draws, per_chain = post.n_draws, post.n_draws // post.n_chains
    if log_prior is None:
        if not has_groups(data):
            raise fail(
                "log_prior",
                f"None with data a {type(data).__name__}",
                "the log prior: a log_prior group in data, a quantity name, a callable or "
                "an array of draws",
            )
        group = _group(data, "log_prior", "Save the log prior (e.g. PyMC's compute_log_prior)")
        if "posterior" in group_names(data):
            group = aligned_draws(group, _group(data, "posterior", ""), "log_prior")
        values, _ = flatten_variables(group, list(group.data_vars))
    elif isinstance(log_prior, str):
        if log_prior not in post.quantity_names:
            raise fail(
                "log_prior", repr(log_prior), f"a quantity of the posterior {post.quantity_names}"
            )
        values = post.select(log_prior).quantities.values
    elif callable(log_prior):
        values = log_prior(post)
    else:
        values = log_prior
    values = as_float_array(values, "log_prior")
    if values.size % n_draws or values.shape[: min(values.ndim, 2)] not in (
        (post.n_chains, per_chain),
        (n_draws,),
    ):
        raise fail(
            "log_prior",
            f"shape {values.shape}",
            f"one value per draw: ({post.n_chains}, {per_chain}[, k]) or ({n_draws},)",
        )
    summed = values.reshape(n_draws, -1).sum(axis=1)
    check_finite(summed, "log_prior")
    return summed


def _alphas(alphas) -> tuple[float, float]:
    try:
        low, high = (float(a) for a in alphas)
    except (TypeError, ValueError):
        raise fail("alphas", repr(alphas), "two powers (below 1, above 1)") from None
    if not 0 < low < 1 < high:
        raise fail("alphas", repr(alphas), "two powers with 0 < lower < 1 < upper")
    return low, high


def _diagnosis(prior: float, likelihood: float, threshold: float) -> str:
    if prior >= threshold and likelihood >= threshold:
        return CONFLICT
    if prior >= threshold:
        return WEAK_LIKELIHOOD
    return "-"


def _covariances(draws: np.ndarray, component: np.ndarray) -> np.ndarray:
    """``Cov(f, c)`` of each column with divisor ``S - 1`` (as the influence scores)."""
    centred = component - component.mean()
    return (draws - draws.mean(axis=0)).T @ centred / (draws.shape[0] - 1)
