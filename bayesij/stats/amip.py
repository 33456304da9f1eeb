"""Influential subsets (AMIP): the fewest observations (or groups) whose removal changes a
conclusion, predicted from the draws and checked by refitting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bayesij.array.amip import METHODS, TARGETS, amip_search
from bayesij.array.checks import fail
from bayesij.array.psis import pareto_k_threshold
from bayesij.data.convert import as_posterior

__all__ = ["amip", "AmipResult", "TARGETS", "METHODS"]


@dataclass(frozen=True)
class AmipResult:
    """An approximate most influential set and what removing it is predicted to do.

    Attributes
    ----------
    quantity : str
    target : str or float
        ``'sign'``, ``'significance'``, ``'sign_and_significance'`` or the change Δ.
    metric : str
        What the target moves: ``'mean'``, ``'lower end'`` or ``'upper end'`` of
        ``mean ± z sd``.
    original_value : float
        The metric on the full data.
    drop_ids : list
        The set, as observation ids or group labels, in the order it was built.
    n_drop, n_units : int
    prop_drop : float
        ``n_drop / n_units`` (APIP); NaN when not reachable.
    reachable : bool
        Whether a set of at most ``alpha_max`` of the units reaches the target (if not,
        ``drop_ids`` is the largest set tried and the prediction is for it).
    predicted_change, predicted_value : float
        Of the metric, after dropping ``drop_ids``.
    predicted_mean, predicted_interval : float, tuple
        Predicted posterior mean and ``mean ± z sd`` after the drop.
    curve : pandas.DataFrame
        ``n_drop``, the predicted change of the metric (``linear``; ``reweighted`` and its
        ``pareto_k`` along the greedy path for that method).
    method : str
    stopped : str
        Why the set stopped growing.
    monte_carlo : dict
        The split-draw check: the set chosen on one half of the draws, its predicted change
        on that half (``naive``, optimistic) and on the other half (``split``) with an
        approximate 95 % interval.
    kept : ndarray of shape (n_obs,)
        Observation weights of the refit that checks the set: 0 for every observation
        of a dropped unit, 1 otherwise (:func:`bayesij.refit.verify` refits with them).
    verification : dict or None
        After :func:`bayesij.refit.verify`: the refit mean and sd, the metric's refit value
        and change, and whether the target was reached.

    The result holds what it reports, not the posterior draws.
    """

    quantity: str
    target: object
    metric: str
    original_value: float
    z: float
    drop_ids: list
    n_units: int
    predicted_change: float
    predicted_mean: float
    predicted_interval: tuple
    curve: pd.DataFrame
    method: str
    stopped: str
    monte_carlo: dict
    unit: str = "obs"
    kept: np.ndarray | None = field(default=None, repr=False, compare=False)
    verification: dict | None = field(default=None)

    @property
    def reachable(self) -> bool:
        return self.stopped == "reached"

    @property
    def n_drop(self) -> int:
        return len(self.drop_ids)

    @property
    def prop_drop(self) -> float:
        return self.n_drop / self.n_units if self.reachable else float("nan")

    @property
    def predicted_value(self) -> float:
        return self.original_value + self.predicted_change

    def table(self) -> pd.DataFrame:
        """One row in the spirit of zaminfluence: target, metric, set size and predictions."""
        row = {
            "quantity": self.quantity,
            "target": str(self.target),
            "metric": self.metric,
            "original": self.original_value,
            "n_drop": self.n_drop,
            "prop_drop": self.prop_drop,
            "reachable": self.reachable,
            "predicted": self.predicted_value,
            "predicted_change": self.predicted_change,
        }
        if self.verification is not None:
            row.update(
                refit=self.verification["value"],
                refit_change=self.verification["change"],
                refit_reached=self.verification["reached"],
            )
        return pd.DataFrame([row])

    def with_refit(self, mean: float, sd: float, **extra) -> AmipResult:
        """A copy whose ``verification`` records a refit without the set: its posterior
        ``mean`` and ``sd`` of the quantity, the metric's value and change, and whether the
        target is really reached (used by :func:`bayesij.refit.verify`)."""
        value = mean + {"mean": 0, "lower end": -1, "upper end": 1}[self.metric] * self.z * sd
        change = value - self.original_value
        verification = {
            "mean": mean,
            "sd": sd,
            "value": value,
            "change": change,
            "reached": self._reached(change),
            **extra,
        }
        return replace(self, verification=verification)

    def _reached(self, change: float) -> bool:
        if isinstance(self.target, str):
            return bool(np.sign(self.original_value + change) != np.sign(self.original_value))
        return bool(np.sign(change) == np.sign(self.target) and abs(change) >= abs(self.target))

    def __str__(self) -> str:
        unit = "observations" if self.unit == "obs" else "groups"
        head = (
            f"AMIP for {self.quantity}, target {self.target!r} ({self.metric} = "
            f"{self.original_value:.4g}), method {self.method}:"
        )
        if self.reachable:
            body = (
                f"  dropping {self.n_drop} of {self.n_units} {unit} "
                f"({100 * self.prop_drop:.2f} %) is predicted to move the {self.metric} "
                f"to {self.predicted_value:.4g}; interval after: "
                f"[{self.predicted_interval[0]:.4g}, {self.predicted_interval[1]:.4g}]"
            )
        else:
            body = (
                f"  not reachable by dropping up to {self.n_drop} {unit} (stopped: "
                f"{self.stopped}); the largest predicted change is "
                f"{self.predicted_change:.4g}"
            )
        ids = ", ".join(map(str, self.drop_ids[:15])) + (" ..." if self.n_drop > 15 else "")
        lines = [head, body, f"  set: [{ids}]"]
        mc = self.monte_carlo
        if mc:
            lines.append(
                f"  Monte Carlo check ({mc['how']}): change {mc['naive']:.4g} where "
                f"chosen, {mc['split']:.4g} on the other draws (95 % interval "
                f"{mc['interval'][0]:.4g} to {mc['interval'][1]:.4g})"
            )
        if self.verification is not None:
            v = self.verification
            lines.append(
                f"  refit without the set: {self.metric} {v['value']:.4g} (change "
                f"{v['change']:.4g}); target reached: {v['reached']}"
            )
        return "\n".join(lines)

    __repr__ = __str__


def _check_arguments(post, quantity, target, alpha_max, z, method):
    if quantity not in post.quantity_names:
        raise fail("quantity", repr(quantity), f"one of {post.quantity_names[:10]}")
    if isinstance(target, str):
        if target not in TARGETS:
            raise fail("target", repr(target), f"one of {TARGETS} or a change Δ (float)")
    elif not (isinstance(target, (int, float)) and math.isfinite(target) and target != 0):
        raise fail("target", repr(target), f"a finite, non-zero change Δ, or one of {TARGETS}")
    if not (isinstance(alpha_max, (int, float)) and 0 < alpha_max < 1):
        raise fail("alpha_max", repr(alpha_max), "a proportion in (0, 1)")
    if not (isinstance(z, (int, float)) and math.isfinite(z) and z > 0):
        raise fail("z", repr(z), "a finite positive multiple of the posterior sd")
    if method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")


def amip(
    data,
    quantity: str,
    target="sign",
    *,
    groups=None,
    log_lik=None,
    alpha_max: float = 0.1,
    z: float = 1.96,
    method: str = "reweighted",
) -> AmipResult:
    """Approximate most influential set: the fewest units whose removal reaches a target.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        Draws of the quantity and the pointwise log-likelihood.
    quantity : str
        A quantity name (``'beta[1]'``).
    target : {"sign", "significance", "sign_and_significance"} or float, default "sign"
        ``"sign"``: the posterior mean crosses 0. ``"significance"``: the end of
        ``mean ± z sd`` nearer 0 crosses it (significant becomes not, or the reverse).
        ``"sign_and_significance"``: the far end crosses 0 (significant with the opposite
        sign). A float Δ: the posterior mean moves by Δ (its sign gives the direction).
    groups : array_like or mapping, optional
        Drop whole groups (default: the container's groups); otherwise observations.
    log_lik : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.
    alpha_max : float, default 0.1
        Largest proportion of units to consider; beyond it the target is "not reachable".
    z : float, default 1.96
    method : {"reweighted", "linear"}, default "reweighted"
        "linear": units by sorted influence, the first-order prediction. "reweighted": grow
        the set greedily, re-estimating by PSIS-reweighting the draws with
        ``exp(-sum_{n in set} l_n)`` after each addition; it stops (and says so) when the
        weights' k-hat passes ``min(1 - 1/log10 S, 0.7)``.

    Returns
    -------
    AmipResult

    Notes
    -----
    A target counts as reached only when the predicted change passes it by two Monte Carlo
    standard errors of the prediction. Noise in the estimated influences also makes the top
    of a sorted list look more influential than it is. ``monte_carlo`` reports the
    split-draw check: the set is chosen again on one half of the draws (half the chains,
    or the first half of each draw sequence for one chain) and its effect estimated on the
    other half, with a 95 % interval from the batch-means Monte Carlo error.

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999.
    .. [2] Giordano, R. and Broderick, T. (2024). Approximate data deletion and replication
       with the Bayesian influence function (talk; seed 001).
    """
    post = as_posterior(data, log_lik=log_lik, need_quantities=True)
    _check_arguments(post, quantity, target, alpha_max, z, method)
    f = post.quantities.sel(quantity=quantity).values
    log_lik_units, units = post.units(groups)
    codes, _ = post.unit_codes(groups)
    n_units = units.size
    found = amip_search(
        f,
        log_lik_units,
        target,
        z=float(z),
        method=method,
        k_max=max(1, int(np.floor(alpha_max * n_units))),
        k_threshold=pareto_k_threshold(post.n_draws),
    )
    goal, path = found.goal, found.path
    curve = pd.DataFrame(
        {"n_drop": np.arange(found.linear_change.size), "linear": found.linear_change}
    )
    if method == "reweighted":
        curve = curve.merge(
            pd.DataFrame(
                {"n_drop": path.sizes, "reweighted": path.change, "pareto_k": path.pareto_k}
            ),
            on="n_drop",
            how="outer",
        )
    mean, sd = found.mean_after, found.sd_after
    return AmipResult(
        quantity=quantity,
        target=target,
        metric=goal.metric,
        original_value=goal.value,
        z=float(z),
        drop_ids=units.values[path.order].tolist(),
        n_units=int(n_units),
        predicted_change=float(path.change[-1]),
        predicted_mean=mean,
        predicted_interval=(mean - z * sd, mean + z * sd),
        curve=curve,
        method=method,
        stopped=path.stopped,
        monte_carlo=found.monte_carlo,
        unit=units.dims[0],
        kept=(~np.isin(codes, path.order)).astype(float),
    )
