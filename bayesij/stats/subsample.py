"""PSIS-LOO on a subsample of the observations with the difference estimator (Magnusson,
Andersen, Jonasson and Vehtari; R loo's ``loo_subsample``): a cheap approximation of every
observation's elpd, exact PSIS on ``m`` of them drawn at random, and a standard error that
includes the subsampling error."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np
import pandas as pd

from bayesij.array.checks import check_ddof, check_positive_int, check_seed, fail
from bayesij.array.waic import log_mean_exp
from bayesij.data.lazy import LogLikFunction
from bayesij.data.source import as_source, map_blocks
from bayesij.stats.elpd import ElpdResult
from bayesij.stats.loo import loo as compute_loo

__all__ = ["LooSubsample", "loo_subsample", "APPROXIMATIONS"]

APPROXIMATIONS = ("lpd", "plpd")


@dataclass(frozen=True)
class LooSubsample(ElpdResult):
    """PSIS-LOO estimated from a subsample of the observations.

    Attributes
    ----------
    elpd : float
        The difference estimator ``sum_n pi_n + (N / m) sum_{j in S} (elpd_j - pi_j)``.
    se : float
        ``sqrt(N sigma^2)``, the estimated SE of elpd_loo over observations (as a full PSIS
        run would report, with the divisor ``N - ddof``).
    subsampling_se : float
        ``N sqrt((1 - m / N) s^2 / m)``: the error of estimating elpd from ``m`` of ``N``.
    n_obs, n_sampled : int
    approximation : str
    pointwise : pandas.DataFrame
        The sampled observations: ``elpd_loo``, ``pareto_k``, ``approximation``.
    approximations : pandas.Series
        ``pi_n`` of every observation.
    """

    elpd: float
    se: float
    subsampling_se: float
    n_obs: int
    n_sampled: int
    approximation: str
    pointwise: pd.DataFrame
    approximations: pd.Series
    ddof: int = 0

    criterion: ClassVar[str] = "loo"
    elpd_column: ClassVar[str] = "elpd_loo"

    @property
    def looic(self) -> float:
        return -2 * self.elpd

    @property
    def n_units(self) -> int:
        return self.n_obs

    def _title(self) -> str:
        return (
            f"PSIS-LOO from {self.n_sampled} of {self.n_obs} observations (difference "
            f"estimator, approximation {self.approximation!r}; subsampling SE "
            f"{self.subsampling_se:.2f})"
        )


def loo_subsample(
    data,
    observations: int = 400,
    *,
    var_name=None,
    approximation: str = "lpd",
    seed: int = 0,
    r_eff=None,
    tail_rule: str = "ceil",
    ties: str = "above",
    ddof: int = 0,
) -> LooSubsample:
    """PSIS-LOO from ``observations`` randomly chosen observations, all the others entering
    through a cheap approximation.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, array_like or LogLikFunction
        As :func:`bayesij.loo` (lazy log-likelihoods included: only the sampled
        observations' draws are ever needed in full, plus the approximation's pass).
    observations : int, default 400
        ``m``, the subsample size (at most the number of observations).
    approximation : {"lpd", "plpd"}, default "lpd"
        ``pi_n``: ``"lpd"`` the log pointwise predictive density ``log mean_s p(y_n |
        theta_s)`` (one pass over the draws); ``"plpd"`` the log density at the posterior
        mean of the draws, ``log p(y_n | theta_bar)``: one evaluation per observation, for a
        :func:`bayesij.loglik_function` whose draws are an (S, D) array.
    seed : int, default 0
        Of the simple random sample without replacement.
    var_name, r_eff, tail_rule, ties, ddof
        As :func:`bayesij.loo` (``r_eff`` per observation of all ``N``, or one number).

    Returns
    -------
    LooSubsample

    References
    ----------
    .. [1] Magnusson, M., Andersen, M. R., Jonasson, J. and Vehtari, A. (2019). Bayesian
       leave-one-out cross-validation for large data. ICML, PMLR 97.
    .. [2] Magnusson, M., Vehtari, A., Jonasson, J. and Andersen, M. R. (2020).
       Leave-one-out cross-validation for Bayesian model comparison in large data. AISTATS,
       PMLR 108 (the difference estimator).
    """
    if approximation not in APPROXIMATIONS:
        raise fail("approximation", repr(approximation), f"one of {APPROXIMATIONS}")
    ddof = check_ddof(ddof)
    seed = check_seed(seed)
    source = as_source(data, var_name=var_name)
    n_obs = source.n_units
    m = check_positive_int(observations, "observations", minimum=2)
    if m > n_obs:
        raise fail("observations", str(m), f"at most the {n_obs} observations")
    approx = _approximations(source, approximation)
    sampled = np.sort(np.random.default_rng(seed).choice(n_obs, size=m, replace=False))
    draws = source.rows(sampled)
    given = np.asarray(r_eff)[sampled] if r_eff is not None and np.ndim(r_eff) else r_eff
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the k-hats are reported in the pointwise table
        exact = compute_loo(draws, r_eff=given, tail_rule=tail_rule, ties=ties)
    e = exact.pointwise["elpd_loo"].to_numpy()
    k = exact.pointwise["pareto_k"].to_numpy()
    return _difference_estimator(e, approx, sampled, source.index, k, approximation, ddof)


def _difference_estimator(e, approx, sampled, index, pareto_k, approximation, ddof):
    n_obs, m = approx.size, sampled.size
    gap = e - approx[sampled]
    total = approx.sum() + n_obs / m * gap.sum()
    subsampling_var = n_obs**2 * (1 - m / n_obs) * gap.var(ddof=1) / m
    # sigma^2 of the pointwise elpd: E[e^2] - E[e]^2 estimated the same way.
    second = (np.sum(approx**2) + n_obs / m * np.sum(e**2 - approx[sampled] ** 2)) / n_obs
    variance = max(second - (total / n_obs) ** 2, 0.0) * n_obs / (n_obs - ddof)
    pointwise = pd.DataFrame(
        {
            "elpd_loo": e,
            "pareto_k": pareto_k,
            "approximation": approx[sampled],
        },
        index=index[sampled],
    )
    return LooSubsample(
        elpd=float(total),
        se=float(np.sqrt(n_obs * variance)),
        subsampling_se=float(np.sqrt(subsampling_var)),
        n_obs=n_obs,
        n_sampled=m,
        approximation=approximation,
        pointwise=pointwise,
        approximations=pd.Series(approx, index=index, name=approximation),
        ddof=ddof,
    )


def _approximations(source, approximation: str) -> np.ndarray:
    """``pi_n`` of every observation, one block of the source at a time."""
    if approximation == "plpd":
        function = source.reader
        if not isinstance(function, LogLikFunction) or np.ndim(function.draws) != 2:
            raise fail(
                "approximation",
                "'plpd' without parameter draws",
                "'lpd', or 'plpd' with a loglik_function whose draws are an (S, D) array",
            )
        point = np.asarray(function.draws, dtype=float).mean(axis=0, keepdims=True)
        at_mean = LogLikFunction(function.fn, function.data, point, 1, function.block_size)
        return map_blocks(as_source(at_mean), partial(np.squeeze, axis=(0, 1)))
    # log mean_s exp(l_sn): no other moments
    return map_blocks(source, partial(log_mean_exp, alpha=1.0, check=False))


def compare_subsampled(results: dict) -> pd.DataFrame:
    """:func:`bayesij.compare` of subsampled results: the difference estimator applied to
    each model's pointwise differences from the best (same subsample required).

    Returns columns ``elpd_diff``, ``se_diff``, ``subsampling_se_diff``, ``elpd``, ``se``,
    ``subsampling_se``, best model first.
    """
    first = next(iter(results.values()))
    for name, result in results.items():
        if not isinstance(result, LooSubsample):
            raise fail(
                "results",
                f"a {type(result).__name__} for {name!r} beside subsampled results",
                "LooSubsample results only (or no subsampled result)",
            )
        same = result.n_obs == first.n_obs and result.pointwise.index.equals(first.pointwise.index)
        if not same:
            raise fail(
                "results",
                f"{name!r} subsampled on other observations",
                "the same subsample (same data, observations and seed)",
            )
    order = sorted(results, key=lambda name: results[name].elpd, reverse=True)
    best = results[order[0]]
    sampled = np.flatnonzero(best.approximations.index.isin(best.pointwise.index))
    rows = []
    for name in order:
        result = results[name]
        gaps = result.pointwise["elpd_loo"].to_numpy() - best.pointwise["elpd_loo"].to_numpy()
        approx = result.approximations.to_numpy() - best.approximations.to_numpy()
        index = best.approximations.index
        no_k = np.full(gaps.size, np.nan)
        diff = _difference_estimator(gaps, approx, sampled, index, no_k, "", result.ddof)
        rows.append(
            {
                "model": name,
                "elpd_diff": diff.elpd,
                "se_diff": diff.se,
                "subsampling_se_diff": diff.subsampling_se,
                "elpd": result.elpd,
                "se": result.se,
                "subsampling_se": result.subsampling_se,
            }
        )
    return pd.DataFrame(rows).set_index("model")
