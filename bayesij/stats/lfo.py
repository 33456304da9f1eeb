"""Leave-future-out cross-validation from posterior draws: PSIS (with refits where k-hat is
too high, when a refit function is given) and the first-order IJ approximation with its
linearity check. Exact LFO, by a refit at every origin, is :func:`bayesij.lfo` with
``method="exact"`` (a refit campaign)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from bayesij.array._numeric import elpd_standard_error
from bayesij.array.checks import check_real, fail, impossible_columns
from bayesij.array.lfo import cumulative_log_lik, ij_lfo, lfo_origins, psis_lfo
from bayesij.data.convert import as_posterior
from bayesij.data.posterior import Posterior
from bayesij.data.source import as_source
from bayesij.stats.elpd import ElpdResult
from bayesij.stats.linearity import RELIABLE_BELOW, UNRELIABLE_ABOVE

__all__ = ["LfoResult", "lfo_from_draws", "lfo_table", "lfo_result", "METHODS"]

METHODS = ("exact", "psis", "ij")


@dataclass(frozen=True)
class LfoResult(ElpdResult):
    """M-step-ahead leave-future-out elpd.

    Attributes
    ----------
    method : str
        ``'exact'``, ``'psis'`` or ``'ij'``.
    horizon : int
        ``M``: each origin predicts the next ``M`` observations jointly.
    pointwise : pandas.DataFrame
        One row per origin, indexed by the first predicted observation: ``n_past`` (the
        observations the prediction conditions on), ``elpd``, ``pareto_k`` (PSIS from the
        draws in use: the full data, or the last refit), ``refitted`` (PSIS: the origin
        was refitted because k-hat passed ``k_threshold``), ``mcse`` (exact refits).
    elpd, se : float
        Sum over origins and its standard error ``sqrt(n var)``.
    n_refits : int
    nonlinearity : float
        IJ only: ``sqrt(sum (d_is - d_lin)^2 / sum d_lin^2)`` of the relative change of
        each block's predictive density, importance sampling vs first order, over origins
        with k-hat at most ``k_threshold`` (NaN otherwise). Thresholds as
        :func:`bayesij.linearity`.
    """

    method: str
    horizon: int
    pointwise: pd.DataFrame
    elpd: float
    se: float
    n_refits: int
    k_threshold: float
    nonlinearity: float = float("nan")

    criterion: ClassVar[str] = "lfo"

    @property
    def verdict(self) -> str:
        """IJ only: "reliable", "doubtful" or "unreliable" (as :func:`bayesij.linearity`)."""
        if self.method != "ij":
            return ""
        if not np.isfinite(self.nonlinearity) or self.nonlinearity > UNRELIABLE_ABOVE:
            return "unreliable"
        return "doubtful" if self.nonlinearity > RELIABLE_BELOW else "reliable"

    def _title(self) -> str:
        return (
            f"{self.horizon}-step-ahead leave-future-out elpd ({self.method}) over "
            f"{len(self.pointwise)} origins: {self.elpd:.2f} (SE {self.se:.2f}), "
            f"{self.n_refits} refit(s)"
        )

    def _details(self) -> list[str]:
        lines = []
        if self.method == "ij":
            lines.append(
                f"Linearity of the first-order approximation: index {self.nonlinearity:.3g} "
                f"({self.verdict})"
            )
        high = self.pointwise.index[self.pointwise["pareto_k"] > self.k_threshold]
        if self.method != "exact" and len(high):
            lines.append(
                f"k-hat above {self.k_threshold:g} at {len(high)} origin(s)"
                + (" (refitted there)" if self.method == "psis" and self.n_refits else "")
            )
        return lines


def lfo_from_draws(
    data,
    *,
    min_train: int,
    horizon: int = 1,
    method: str = "psis",
    k_threshold: float = 0.7,
    refit: Callable[[int], Posterior] | None = None,
    var_name=None,
    weight_derivative=None,
) -> LfoResult:
    """PSIS- or IJ-LFO from full-data draws (PSIS refitting through ``refit``).

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or array_like
        Draws of the posterior given all ``T`` observations, with the conditional
        log-likelihood terms ``log p(y_t | y_<t, theta)`` in time order.
    min_train, horizon : int
        Origins ``i = min_train .. T - horizon``.
    method : {"psis", "ij"}
    k_threshold : float, default 0.7
        PSIS: refit at an origin whose k-hat passes it (when ``refit`` is given).
    refit : callable, optional
        ``refit(i)`` returns the posterior given the first ``i`` observations (with the
        log-likelihood terms of all ``T``); :func:`bayesij.lfo` builds it from a backend.
    var_name : str, optional
        The conditional log-likelihood variable of an InferenceData or DataTree.
    weight_derivative : str, Posterior or array_like, optional
        IJ only: draws x ``T`` of ``d log p(y; theta, w) / d w_t`` at ``w = 1`` for a model
        whose weighted likelihood is not ``sum_t w_t l_t`` (an HMM whose weights multiply
        the emission densities inside the forward algorithm: the smoothed expectations of
        the emission log densities, which the shipped ``poisson_hmm`` Stan model emits as
        ``weight_derivative``). A string names a log-likelihood variable of ``data``;
        otherwise anything :func:`bayesij.data.convert.as_posterior` reads, with the same
        draws. Default: the conditional terms themselves.

    References
    ----------
    .. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2020). Approximate leave-future-out
       cross-validation for Bayesian time series models. J. Stat. Comput. Simul. 90(14).
    """
    if method not in ("psis", "ij"):
        raise fail("method", repr(method), f"one of {METHODS}")
    k_threshold = check_real(k_threshold, "k_threshold", 0.0, low_open=True)
    post = as_source(data, var_name=var_name, whole_matrix={"data": "lfo"}).posterior
    matrix = _conditional_terms(post)
    origins = lfo_origins(matrix.shape[1], min_train, horizon)
    cumulative = cumulative_log_lik(matrix)
    if weight_derivative is not None and method != "ij":
        raise fail(
            "weight_derivative",
            f"a value with method={method!r}",
            "weight_derivative only with method='ij' (PSIS and exact refits reweight by the "
            "conditional log_lik terms, exactly)",
        )
    if method == "ij":
        derivative = _derivative_terms(data, weight_derivative, matrix.shape)
        elpd, delta_lin = ij_lfo(cumulative, origins, horizon, derivative)
        steps = [psis_lfo(cumulative, int(i), matrix.shape[1], horizon) for i in origins]
        k = np.array([s[1] for s in steps])
        delta_is = np.array([s[2] for s in steps])
        used = k <= k_threshold
        index = float(
            np.sqrt(np.sum((delta_is - delta_lin)[used] ** 2) / np.sum(delta_lin[used] ** 2))
            if used.any() and np.any(delta_lin[used] != 0)
            else np.nan
        )
        frame = lfo_table(post, origins, elpd, k, np.zeros(origins.size, bool))
        return lfo_result("ij", horizon, frame, 0, k_threshold, index)
    return _psis_backwards(post, matrix, origins, horizon, k_threshold, refit)


def _conditional_terms(post: Posterior, argument: str = "log_lik") -> np.ndarray:
    """The (S, T) terms of a posterior's log-likelihood, which must be finite."""
    values, _ = post.units(None)
    matrix = np.asarray(values, dtype=float).reshape(-1, values.shape[2])
    if impossible_columns(matrix).any():
        raise fail(argument, "-inf values", "finite terms for LFO")
    return matrix


def _derivative_terms(data, weight_derivative, shape) -> np.ndarray | None:
    """The cumulative sums of the weight derivatives, checked against the terms' shape."""
    if weight_derivative is None:
        return None
    if isinstance(weight_derivative, str):
        derivative = as_posterior(data, var_name=weight_derivative)
    else:
        derivative = as_posterior(weight_derivative, argument="weight_derivative")
    matrix = _conditional_terms(derivative, "weight_derivative")
    if matrix.shape != shape:
        raise fail(
            "weight_derivative",
            f"draws x time points {matrix.shape}",
            f"the shape of the log-likelihood terms, {shape}",
        )
    return cumulative_log_lik(matrix)


def _psis_backwards(post, matrix, origins, horizon, k_threshold, refit) -> LfoResult:
    """From the last origin back to the first, reweighting the draws of the latest fit
    (the full data, then each refit) and refitting where k-hat passes the threshold."""
    n_times = matrix.shape[1]
    cumulative, fitted_to = cumulative_log_lik(matrix), n_times
    elpd, k, mcse = (np.empty(origins.size) for _ in range(3))
    refitted = np.zeros(origins.size, dtype=bool)
    for index in range(origins.size - 1, -1, -1):
        i = int(origins[index])
        elpd[index], k[index], _, mcse[index] = psis_lfo(cumulative, i, fitted_to, horizon)
        if k[index] > k_threshold and refit is not None:
            cumulative = cumulative_log_lik(_conditional_terms(refit(i)))
            fitted_to, refitted[index] = i, True
            elpd[index], _, _, mcse[index] = psis_lfo(cumulative, i, i, horizon)  # exact
    frame = lfo_table(post, origins, elpd, k, refitted, mcse)
    return lfo_result("psis", horizon, frame, int(refitted.sum()), k_threshold)


def lfo_table(post, origins, elpd, k, refitted, mcse=None) -> pd.DataFrame:
    ids = np.asarray(post.obs_names, dtype=object)[origins]
    return pd.DataFrame(
        {
            "n_past": origins,
            "elpd": elpd,
            "pareto_k": k,
            "refitted": refitted,
            "mcse": np.full(origins.size, np.nan) if mcse is None else mcse,
        },
        index=pd.Index(ids, name="origin"),
    )


def lfo_result(method, horizon, frame, n_refits, k_threshold, index=float("nan")) -> LfoResult:
    values = frame["elpd"].to_numpy()
    return LfoResult(
        method=method,
        horizon=horizon,
        pointwise=frame,
        elpd=float(values.sum()),
        se=elpd_standard_error(values, 0),
        n_refits=n_refits,
        k_threshold=k_threshold,
        nonlinearity=index,
    )
