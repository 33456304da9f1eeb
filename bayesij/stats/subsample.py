"""PSIS-LOO on a subsample of the observations with the difference estimator (Magnusson,
Andersen, Jonasson and Vehtari; R loo's ``loo_subsample``): a cheap approximation of every
observation's elpd, exact PSIS on ``m`` of them drawn at random, and a standard error that
includes the subsampling error."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar

import numpy as np
import pandas as pd

from bayesij.array.checks import check_positive_int, check_seed, fail
from bayesij.array.psis import pareto_k_threshold
from bayesij.array.waic import log_mean_exp
from bayesij.data.fit import as_log_lik_source, as_source
from bayesij.data.lazy import LogLikFunction
from bayesij.data.source import map_blocks
from bayesij.stats.compare_diagnostics import difference_flag, khat_flag, probability_below_zero
from bayesij.stats.elpd import ElpdResult
from bayesij.stats.loo import loo as compute_loo
from bayesij.stats.peers import PsisOptions, psis_settings

__all__ = ["LooSubsample", "loo_subsample", "update_subsample", "APPROXIMATIONS"]

APPROXIMATIONS = ("lpd", "plpd")


@dataclass(frozen=True)
class LooSubsample(ElpdResult):
    """PSIS-LOO estimated from a subsample of the observations.

    Attributes
    ----------
    elpd : float
        The difference estimator ``sum_n pi_n + (N / m) sum_{j in S} (elpd_j - pi_j)``.
    se : float
        The estimated SE of elpd_loo over observations, as R loo's and arviz-stats'
        ``loo_subsample``: ``sqrt(t_pi2 + N mean(e^2 - pi^2) - (t_e^2 - v + 2 t_pi elpd -
        t_pi^2) / N)`` (``t_pi``, ``t_pi2`` the sums of the approximations and of their
        squares over all ``N``, ``t_e = N mean(e - pi)`` over the subsample, ``v`` the
        subsampling variance), times ``sqrt(N / (N - ddof))``.
    subsampling_se : float
        ``N sqrt((1 - m / N) s^2 / m)``: the error of estimating elpd from ``m`` of ``N``.
    n_obs, n_sampled : int
    approximation : str
    pointwise : pandas.DataFrame
        The sampled observations: ``elpd_loo``, ``pareto_k``, ``approximation``.
    approximations : pandas.Series
        ``pi_n`` of every observation.
    sampled : ndarray of int
        Positions (0-based) of the sampled observations, ascending.
    psis_options : PsisOptions
        The PSIS settings used (``r_eff``, ``tail_rule``, ``ties``), which
        :func:`update_subsample` keeps.
    k_threshold : float
        ``min(1 - 1 / log10(S), 0.7)`` of the draws: the sampled observations' k-hat above
        it make ``compare``'s ``diag_elpd``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(4, 500, 400))
    >>> result = bayesij.loo_subsample(log_lik, 100)
    >>> result.n_sampled, result.n_obs
    (100, 400)
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
    sampled: np.ndarray | None = None
    psis_options: PsisOptions | None = None
    k_threshold: float | None = None

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
    observations=400,
    *,
    var_name=None,
    approximation: str = "lpd",
    seed: int = 0,
    convention=None,
) -> LooSubsample:
    """PSIS-LOO from ``observations`` randomly chosen observations, all the others entering
    through a cheap approximation.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, array_like or LogLikFunction
        As :func:`bayesij.loo` (lazy log-likelihoods included: only the sampled
        observations' draws are ever needed in full, plus the approximation's pass).
    observations : int or array_like of int, default 400
        ``m``, the size of a simple random sample without replacement (at most the number
        of observations), or the positions (0-based) of the observations to use.
    approximation : {"lpd", "plpd"}, default "lpd"
        ``pi_n``: ``"lpd"`` the log pointwise predictive density ``log mean_s p(y_n |
        theta_s)`` (one pass over the draws); ``"plpd"`` the log density at the posterior
        mean of the draws, ``log p(y_n | theta_bar)``: one evaluation per observation, for a
        :func:`bayesij.loglik_function` whose draws are an (S, D) array.
    seed : int, default 0
        Of the random sample.
    convention, var_name
        As :func:`bayesij.loo` (an ``r_eff`` per observation of all ``N``, or one number).
        The SE's ``ddof`` is 0 unless :class:`bayesij.PsisOptions` gives it: 0 is R loo's
        and arviz-stats' SE here (a convention's name does not change it).

    Returns
    -------
    LooSubsample
        :func:`update_subsample` adds observations to it.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=400)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(400), size=(4, 500, 1))
    >>> log_lik = -0.5 * (y - mu) ** 2
    >>> sub = bayesij.loo_subsample(log_lik, 100)  # PSIS on 100 observations, 400 estimated
    >>> full = bayesij.loo(log_lik)
    >>> bool(abs(sub.elpd - full.elpd) < 3 * sub.subsampling_se)
    True

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
    seed = check_seed(seed)
    source = as_log_lik_source(data, var_name=var_name)
    settings = psis_settings(convention, source, ddof=0)
    ddof = settings.ddof
    options = PsisOptions(r_eff=settings.r_eff, tail_rule=settings.tail_rule, ties=settings.ties)
    approx = _approximations(source, approximation)
    sampled = _new_sample(observations, np.zeros(source.n_units, bool), seed)
    e, k = _exact_psis(source, sampled, options)
    result = _difference_estimator(
        e, approx, sampled, source.index, k, approximation, ddof, options
    )
    return replace(result, k_threshold=pareto_k_threshold(source.n_draws))


def update_subsample(
    result: LooSubsample, data, observations=400, *, seed: int = 0
) -> LooSubsample:
    """A subsampled PSIS-LOO with more observations: those of ``result`` (not recomputed)
    and ``observations`` new ones.

    Parameters
    ----------
    result : LooSubsample
        From :func:`loo_subsample` on the same ``data``.
    data
        The same log-likelihood (as :func:`loo_subsample`).
    observations : int or array_like of int, default 400
        How many new observations to draw at random among those not yet sampled, or their
        positions (0-based; none may be sampled already).
    seed : int, default 0

    Returns
    -------
    LooSubsample
        With the PSIS settings, approximation and ``ddof`` of ``result``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=400)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(400), size=(4, 500, 1))
    >>> log_lik = -0.5 * (y - mu) ** 2
    >>> first = bayesij.loo_subsample(log_lik, 50)
    >>> bayesij.update_subsample(first, log_lik, 50).n_sampled  # 50 more observations
    100
    """
    if not isinstance(result, LooSubsample) or result.sampled is None:
        raise fail("result", f"a {type(result).__name__}", "a LooSubsample from loo_subsample")
    source = as_log_lik_source(data)
    if source.n_units != result.n_obs:
        raise fail(
            "data",
            f"{source.n_units} observations",
            f"the {result.n_obs} observations of the result being updated",
        )
    taken = np.zeros(result.n_obs, bool)
    taken[result.sampled] = True
    new = _new_sample(observations, taken, check_seed(seed))
    e_new, k_new = _exact_psis(source, new, result.psis_options)
    sampled = np.concatenate([result.sampled, new])
    order = np.argsort(sampled)
    e = np.concatenate([result.pointwise["elpd_loo"].to_numpy(), e_new])[order]
    k = np.concatenate([result.pointwise["pareto_k"].to_numpy(), k_new])[order]
    approx = result.approximations.to_numpy()
    updated = _difference_estimator(
        e,
        approx,
        sampled[order],
        source.index,
        k,
        result.approximation,
        result.ddof,
        result.psis_options,
    )
    return replace(updated, k_threshold=result.k_threshold)


def _new_sample(observations, taken: np.ndarray, seed: int) -> np.ndarray:
    """Positions of new observations, ascending: ``observations`` drawn at random among
    those not ``taken``, or given as positions (checked: integers, in range, distinct, not
    taken); at least 2 in all."""
    n_obs, free = taken.size, np.flatnonzero(~taken)
    if np.ndim(observations) == 0:
        m = check_positive_int(observations, "observations", minimum=1 if taken.any() else 2)
        if m > free.size:
            raise fail("observations", str(m), f"at most the {free.size} observations not sampled")
        return np.sort(np.random.default_rng(seed).choice(free, size=m, replace=False))
    positions = np.asarray(observations)
    if positions.ndim != 1 or positions.dtype.kind not in "iu" or positions.size == 0:
        raise fail(
            "observations",
            f"an array of dtype {positions.dtype} and shape {positions.shape}",
            "an integer, or a 1-D array of observation positions (integers)",
        )
    bad = (positions < 0) | (positions >= n_obs)
    if bad.any() or np.unique(positions).size != positions.size:
        found = f"position {positions[bad][0]}" if bad.any() else "repeated positions"
        raise fail("observations", found, f"distinct positions in 0 .. {n_obs - 1}")
    if taken[positions].any():
        raise fail(
            "observations",
            f"positions already sampled ({positions[taken[positions]][:5].tolist()})",
            "observations not in the subsample yet",
        )
    if positions.size + taken.sum() < 2:
        raise fail("observations", "1 observation", "at least 2 in the subsample")
    return np.sort(positions)


def _exact_psis(source, sampled: np.ndarray, options: PsisOptions) -> tuple[np.ndarray, np.ndarray]:
    """PSIS-LOO elpd and k-hat of the sampled observations."""
    r_eff = options.r_eff
    given = np.asarray(r_eff)[sampled] if r_eff is not None and np.ndim(r_eff) else r_eff
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the k-hats are reported in the pointwise table
        exact = compute_loo(source.rows(sampled), convention=replace(options, r_eff=given))
    return exact.pointwise["elpd_loo"].to_numpy(), exact.pointwise["pareto_k"].to_numpy()


def _difference_estimator(e, approx, sampled, index, pareto_k, approximation, ddof, options=None):
    """R loo's ``srs_diff_est``: the total, its subsampling variance and the estimate of
    ``sum_n (e_n - mean e)^2`` (the pointwise variance times ``N``)."""
    n_obs, m = approx.size, sampled.size
    gap = e - approx[sampled]
    t_pi, t_e = approx.sum(), n_obs * gap.mean()
    total = t_pi + t_e
    subsampling_var = n_obs**2 * (1 - m / n_obs) * gap.var(ddof=1) / m
    squares = np.sum(approx**2) + n_obs * np.mean(e**2 - approx[sampled] ** 2)
    spread = squares - (t_e**2 - subsampling_var + 2 * t_pi * total - t_pi**2) / n_obs
    variance = max(spread, 0.0) / (n_obs - ddof)
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
        sampled=np.asarray(sampled),
        psis_options=options,
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

    Returns columns ``elpd_diff``, ``se_diff``, ``subsampling_se_diff``, ``p_worse`` (the
    normal probability that the model predicts worse than the best, with both SEs:
    ``sqrt(se_diff^2 + subsampling_se_diff^2)``), ``diag_diff`` and ``diag_elpd`` (as
    :func:`bayesij.compare`'s; k-hat of the sampled observations), ``elpd``, ``se``,
    ``subsampling_se`` and ``rank``, best model first.
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
        both = float(np.hypot(diff.se, diff.subsampling_se))  # the data's and the subsample's
        rows.append(
            {
                "model": name,
                "elpd_diff": diff.elpd,
                "se_diff": diff.se,
                "subsampling_se_diff": diff.subsampling_se,
                "p_worse": probability_below_zero(diff.elpd, both),
                "diag_diff": difference_flag(diff.elpd, result.n_obs),
                "diag_elpd": khat_flag(result.pointwise["pareto_k"], result.k_threshold),
                "elpd": result.elpd,
                "se": result.se,
                "subsampling_se": result.subsampling_se,
                "rank": len(rows),
            }
        )
    return pd.DataFrame(rows).set_index("model")
