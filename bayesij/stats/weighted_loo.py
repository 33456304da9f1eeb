"""PSIS-LOO of a fit with weighted observations: frequency (compressed) or survey weights.

A weight multiplies an observation's log-likelihood in the fit, as bayesij's refit backends
do: ``log p(theta | y, w) = log p(theta) + sum_n w_n log p(y_n | theta) + const``. What
leaving one out means depends on what the weight is:

- **frequency** weights (rows standing for ``w_n`` identical observations, stan-dev/loo#168):
  leave one *copy* out — the importance ratio is ``1 / p(y_n | theta)``, the fit without it
  has weight ``w_n - 1`` — and each row's LOO density counts ``w_n`` times. Totals, SE and
  comparisons equal those of the disaggregated data (each row repeated ``w_n`` times).
- **survey** weights (a sampled unit standing for ``w_n`` population units): leave the
  *unit* out — the ratio is ``1 / p(y_n | theta)^{w_n}``, the fit without it has weight 0 —
  score its one observation, and estimate the population total ``sum_n w_n elpd_n`` with
  the with-replacement SE of its terms, ``sqrt(N var_n(w_n elpd_n))``.

References
----------
.. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
   using leave-one-out cross-validation and WAIC. Statistics and Computing 27, 1413-1432.
.. [2] Lumley, T. (2010). Complex Surveys: A Guide to Analysis Using R. Wiley (the
   with-replacement variance of a weighted total).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesij.array.checks import LOG_LIK_LIMIT, as_float_array, fail
from bayesij.data.arrays import from_arrays
from bayesij.data.fit import read
from bayesij.stats.loo import LooResult, loo, loo_expectation

__all__ = ["WeightedLooResult", "loo_weighted", "WEIGHT_KINDS"]

WEIGHT_KINDS = ("frequency", "survey")


@dataclass(frozen=True)
class WeightedLooResult(LooResult):
    """PSIS-LOO of weighted observations (:func:`loo_weighted`).

    ``pointwise`` has one row per *row* of the data: ``weight``; ``elpd_loo``, ``p_loo``,
    ``lppd`` and ``mcse_elpd_loo`` of one observation of that row; ``pareto_k``, ``ess``
    and ``r_eff`` of its importance ratios. ``elpd`` is ``sum_n w_n elpd_loo_n``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(4, 500, 20))
    >>> result = bayesij.loo_weighted(log_lik, np.full(20, 2))  # every row stands for two
    >>> result.n_units
    20
    """

    kind: str = "frequency"

    @property
    def weights(self) -> np.ndarray:
        return self.pointwise["weight"].to_numpy()

    @property
    def pointwise_elpd(self) -> pd.Series:
        """Each row's weighted elpd ``w_n elpd_loo_n`` (what :func:`bayesij.compare` sums)."""
        return self.pointwise["elpd_loo"] * self.pointwise["weight"]

    @property
    def elpd(self) -> float:
        return float(self.pointwise_elpd.sum())

    @property
    def p_loo(self) -> float:
        return float((self.pointwise["p_loo"] * self.pointwise["weight"]).sum())

    @property
    def p(self) -> float:
        return self.p_loo

    @property
    def se(self) -> float:
        return weighted_standard_error(
            self.pointwise["elpd_loo"].to_numpy(), self.weights, self.kind, self.ddof
        )

    @property
    def mcse(self) -> float:
        return float(np.sqrt(((self.pointwise["mcse_elpd_loo"] * self.weights) ** 2).sum()))

    def estimates(self) -> pd.DataFrame:
        """elpd_loo, p_loo and looic with their SE, weighted (SE of p_loo as the elpd's)."""
        p_terms = self.pointwise["p_loo"].to_numpy()
        rows = {
            "elpd_loo": (self.elpd, self.se),
            "p_loo": (
                self.p_loo,
                weighted_standard_error(p_terms, self.weights, self.kind, self.ddof),
            ),
            "looic": (-2 * self.elpd, 2 * self.se),
        }
        return pd.DataFrame(rows, index=["Estimate", "SE"]).T

    def _title(self) -> str:
        total = self.weights.sum()
        return (
            f"elpd (loo, {self.kind} weights) of {self.n_units} rows (total weight "
            f"{total:.6g}) from {self.n_draws} draws"
        )


def weighted_standard_error(values: np.ndarray, weights: np.ndarray, kind: str, ddof: int) -> float:
    """SE of ``sum_n w_n values_n``.

    ``"frequency"``: that of the disaggregated data, ``sqrt(W var_w)`` with
    ``W = sum w`` and ``var_w = sum_n w_n (v_n - vbar_w)^2 / (W - ddof)``.
    ``"survey"``: the with-replacement SE of a weighted total, ``sqrt(N var_n(w_n v_n))``
    with divisor ``N - ddof``.
    """
    if kind == "survey":
        terms = weights * values
        n = terms.size
        return float(np.sqrt(n * terms.var(ddof=ddof))) if n > ddof else float("nan")
    total = weights.sum()
    if total <= ddof:
        return float("nan")
    centre = np.sum(weights * values) / total
    variance = np.sum(weights * (values - centre) ** 2) / (total - ddof)
    return float(np.sqrt(total * variance))


def loo_weighted(
    data,
    weights,
    *,
    var_name=None,
    kind: str = "frequency",
    convention=None,
) -> WeightedLooResult:
    """PSIS-LOO of a fit whose observations carry frequency or survey weights.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        Draws of the *weighted* fit (each observation's log-likelihood multiplied by its
        weight in the model) and the *unweighted* pointwise log-likelihood
        ``log p(y_n | theta)`` of one observation of each row, shape (chains, draws, N).
    weights : array_like, shape (N,)
        The weight of each row (each is a unit here, whatever groups ``data`` carries),
        as given to the fit: frequency weights >= 1 (counts of
        identical observations; fractional values allowed), survey weights > 0.
    kind : {"frequency", "survey"}, default "frequency"
        Frequency: leave one copy of a row out (ratio ``1/p(y_n|theta)``), count its LOO
        density ``w_n`` times; equal to PSIS-LOO of the disaggregated data. Survey: leave
        the whole unit out (ratio ``1/p(y_n|theta)^{w_n}``, its k-hat says whether the fit
        without the unit is reachable), estimate the population total ``sum w_n elpd_n``
        with the with-replacement SE of its terms.
    var_name, convention
        As :func:`bayesij.loo`.

    Returns
    -------
    WeightedLooResult
        A :class:`~bayesij.LooResult` whose ``elpd``, ``se``, ``p_loo`` and ``estimates()``
        are weighted; :func:`bayesij.compare` takes it beside other weighted results of the
        same rows and weights.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model
       evaluation using leave-one-out cross-validation and WAIC. Statistics and Computing
       27, 1413-1432.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from scipy.stats import norm
    >>> y, counts = np.array([-1.0, 0.0, 0.5, 2.0]), np.array([3, 10, 6, 1])
    >>> mu = np.random.default_rng(0).normal(np.average(y, weights=counts), 0.22, (4, 500, 1))
    >>> log_lik = norm.logpdf(y, mu, 1.0)                   # one observation of each row
    >>> compressed = bayesij.loo_weighted(log_lik, counts, convention="R loo")
    >>> full = bayesij.loo(np.repeat(log_lik, counts, axis=2), convention="R loo")  # one per row
    >>> bool(np.isclose(compressed.elpd, full.elpd)), bool(np.isclose(compressed.se, full.se))
    (True, True)
    """
    if kind not in WEIGHT_KINDS:
        raise fail("kind", repr(kind), f"one of {WEIGHT_KINDS}")
    post = read(data, var_name=var_name).in_memory("loo_weighted")
    w = _checked_weights(weights, post.n_obs, kind)
    log_lik = post.log_lik.values  # one row is one unit here, whatever groups post has
    _check_weighted_range(w, log_lik)
    if kind == "frequency":
        plain = loo(_rows_of(log_lik, np.ones_like(w), post), convention=convention)
        pointwise = plain.pointwise.copy()
    else:
        pointwise, plain = _unit_left_out(log_lik, w, post, convention)
    pointwise.insert(0, "weight", w)
    return WeightedLooResult(
        pointwise,
        plain.method,
        plain.n_draws,
        plain.tail_rule,
        plain.ddof,
        None,
        constant=plain.constant,
        kind=kind,
    )


def _rows_of(log_lik: np.ndarray, w: np.ndarray, post):
    """A container of ``w_n log p(y_n | theta)``, one unit per row, ids and the posterior's
    quantities kept (a peer convention's r_eff reads them)."""
    return from_arrays(
        post.quantities.values,
        log_lik * w,
        quantity_names=post.quantity_names,
        obs_names=post.obs_names,
    )


def _unit_left_out(
    log_lik: np.ndarray, w: np.ndarray, post, convention
) -> tuple[pd.DataFrame, LooResult]:
    """Survey weights: ratios from ``w_n log p(y_n | theta)``, expectation of one
    observation's density ``p(y_n | theta)``."""
    weighted = _rows_of(log_lik, w, post)
    ratios = loo(weighted, convention=convention, save_psis=True)
    top = log_lik.max(axis=(0, 1))
    density = loo_expectation(weighted, np.exp(log_lik - top), psis=ratios)
    with np.errstate(divide="ignore"):
        elpd = np.log(density["value"].to_numpy()) + top
    lppd = np.log(np.exp(log_lik - top).mean(axis=(0, 1))) + top
    pointwise = ratios.pointwise.copy()
    pointwise["elpd_loo"] = elpd
    pointwise["p_loo"] = lppd - elpd
    pointwise["lppd"] = lppd
    pointwise["mcse_elpd_loo"] = (density["mcse"] / density["value"]).to_numpy()
    return pointwise, ratios


def _check_weighted_range(w: np.ndarray, log_lik: np.ndarray) -> None:
    """Weights times the log-likelihood must stay a log density (within
    ``±LOG_LIK_LIMIT``): an oversized weight is the weights' fault, not the
    log-likelihood's."""
    with np.errstate(over="ignore", invalid="ignore"):
        largest = w * np.max(np.where(np.isneginf(log_lik), 0.0, np.abs(log_lik)), axis=(0, 1))
    bad = ~(largest <= LOG_LIK_LIMIT)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise fail(
            "weights",
            f"{int(bad.sum())} weight(s) so large that weight x log-likelihood passes "
            f"±{LOG_LIK_LIMIT:.0e} (first: {w[first]:.3g} at observation {first})",
            "survey weights on a usual scale (e.g. normalised to mean 1)",
        )


def _checked_weights(weights, n_obs: int, kind: str) -> np.ndarray:
    w = as_float_array(weights, "weights")
    if w.shape != (n_obs,):
        raise fail("weights", f"shape {w.shape}", f"one weight per observation, shape ({n_obs},)")
    low = 1.0 if kind == "frequency" else 0.0
    bad = ~np.isfinite(w) | (w < low if kind == "frequency" else w <= low)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        expected = (
            "frequency weights >= 1 (a row is at least one observation; drop rows of weight 0)"
            if kind == "frequency"
            else "survey weights > 0"
        )
        raise fail(
            "weights",
            f"{int(bad.sum())} value(s) out of range (first {float(w[first])!r} at {first})",
            expected,
        )
    return w
