"""LOO from the draws of an approximate posterior or of the mixture of LOO posteriors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.approximate_loo import ApproximateLoo, approximate_posterior_loo, mixture_loo
from bayesij.array.checks import as_float_array, check_ddof, fail
from bayesij.data.fit import read
from bayesij.stats.loo import LooResult, warn_about_khat, with_log_jacobian
from bayesij.stats.peers import psis_settings

__all__ = ["loo_approximate_posterior", "loo_mixture"]


def loo_approximate_posterior(
    data,
    log_p,
    log_g,
    *,
    var_name=None,
    convention=None,
    log_jacobian=None,
) -> LooResult:
    """PSIS-LOO from the draws of a posterior approximation (Laplace, variational,
    Pathfinder), corrected to the posterior, as R loo's ``loo_approximate_posterior``.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        The pointwise log-likelihood at the approximation's draws, (S, N) or (chains,
        draws, N) (the draws are independent: ``r_eff`` is 1).
    log_p : array_like, shape (S,) or (chains, draws)
        The log posterior density (up to a constant) at each draw, e.g. Stan's
        ``lp__``.
    log_g : array_like, same shape
        The approximation's log density at each draw, e.g. CmdStan's ``lp_approx__``.
    var_name : str, optional
        Log-likelihood variable of an InferenceData / DataTree.
    convention : str or PsisOptions, optional
        As :func:`bayesij.loo`: its tail rule, tie rule and SE divisor (``"R loo"`` for R
        loo's); ``r_eff`` is 1 and cannot be given.
    log_jacobian : array_like of shape (N,), optional
        As :func:`bayesij.loo`.

    Returns
    -------
    LooResult
        ``method="psis-approximate"``. ``pareto_k`` is the k-hat of the corrected ratios
        ``log p - log g - l_n``: above the threshold, the approximation is too far from the
        leave-one-out posterior (or from the posterior: check ``pareto_khat`` of
        ``log_p - log_g``). ``lppd`` and ``p_loo`` are R loo's, the plain mean of
        ``p(y_n | theta)`` over the approximation's draws.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))  # draws of g
    >>> log_g = -0.5 * ((mu[..., 0] - y.mean()) * np.sqrt(40)) ** 2  # g's log density
    >>> log_p = log_g  # the posterior itself here: no correction
    >>> result = bayesij.loo_approximate_posterior(-0.5 * (y - mu) ** 2, log_p, log_g)
    >>> result.n_units
    40

    References
    ----------
    .. [1] Magnusson, M., Andersen, M. R., Jonasson, J. and Vehtari, A. (2020).
       Leave-one-out cross-validation for Bayesian model comparison in large data.
       AISTATS 2020.
    """
    settings = psis_settings(convention, None)
    tail_rule, ties = settings.tail_rule, settings.ties
    post = read(data, var_name=var_name).in_memory("loo_approximate_posterior")
    log_lik = post.log_lik.values.reshape(-1, post.n_obs)
    correction = _per_draw(log_p, "log_p", post) - _per_draw(log_g, "log_g", post)
    arrays = approximate_posterior_loo(log_lik, correction, tail_rule, ties)
    return _result(arrays, post, "psis-approximate", tail_rule, settings.ddof, log_jacobian)


def loo_mixture(data, *, var_name=None, ddof: int = 0, log_jacobian=None) -> LooResult:
    """LOO by mixture importance sampling (Silva & Zanella 2024), from draws of
    ``q(theta) ∝ p(theta | y) sum_n 1 / p(y_n | theta)``.

    Sample the model with ``log_sum_exp(-log_lik)`` added to its log density (one line in
    a Stan program's model block); the draws hold every leave-one-out posterior at once,
    and the estimator's weights are bounded, so it stays stable where PSIS-LOO's k-hat is
    high (high-dimensional models, influential observations).

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        The pointwise log-likelihood ``log p(y_n | theta)`` (not including the mixture
        term) at the mixture's draws.
    var_name, ddof, log_jacobian
        As :func:`bayesij.loo`.

    Returns
    -------
    LooResult
        ``method="mixture"``; ``pareto_k`` the k-hat of each observation's mixture weights
        (a diagnostic of how much of the sample serves that observation), ``lppd`` from the
        same draws weighted back to the posterior, ``r_eff`` per observation from the
        chains is not used (the MCSE assumes independent draws).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> log_lik = -0.5 * (y - mu) ** 2
    >>> mixture, psis = bayesij.loo_mixture(log_lik), bayesij.loo(log_lik)
    >>> bool(abs(mixture.elpd - psis.elpd) < 0.5)  # both close to exact LOO here
    True

    References
    ----------
    .. [1] Silva, L. A. and Zanella, G. (2024). Robust leave-one-out cross-validation for
       high-dimensional Bayesian models. Journal of the American Statistical Association
       119, 2369-2381.
    """
    post = read(data, var_name=var_name).in_memory("loo_mixture")
    arrays = mixture_loo(post.log_lik.values.reshape(-1, post.n_obs))
    return _result(arrays, post, "mixture", "ceil", ddof, log_jacobian)


def _per_draw(values, argument: str, post) -> np.ndarray:
    """A log density per draw, (S,), checked against the draws of ``post``."""
    values = as_float_array(values, argument)
    shapes = {(post.n_draws,), (post.n_chains, post.n_draws // post.n_chains)}
    if values.shape not in shapes:
        raise fail(
            argument,
            f"shape {values.shape}",
            f"one value per draw, shape {sorted(shapes, key=len)}",
        )
    flat = values.reshape(-1)
    if not np.all(np.isfinite(flat)):
        raise fail(
            argument,
            f"{int(np.sum(~np.isfinite(flat)))} non-finite value(s)",
            "finite log densities",
        )
    return flat


def _result(arrays: ApproximateLoo, post, method: str, tail_rule: str, ddof, log_jacobian):
    ddof = check_ddof(ddof)
    pointwise = pd.DataFrame(
        {
            "elpd_loo": arrays.elpd,
            "p_loo": arrays.lppd - arrays.elpd,
            "pareto_k": arrays.pareto_k,
            "mcse_elpd_loo": arrays.mcse,
            "ess": arrays.ess,
            "r_eff": np.ones(arrays.elpd.size),
            "lppd": arrays.lppd,
        },
        index=pd.Index(post.obs_names, name="obs"),
    )
    result = LooResult(pointwise, method, post.n_draws, tail_rule, ddof)
    if method != "mixture":
        warn_about_khat(result)
    return with_log_jacobian(result, log_jacobian)
