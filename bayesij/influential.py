"""Influential subsets (AMIP): the fewest observations (or groups) whose removal changes a
conclusion, predicted from the draws and checked by refitting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bayesij._checks import fail
from bayesij.array import amip as arrays
from bayesij.array.psis import pareto_k_threshold
from bayesij.posterior import Posterior

__all__ = ["amip", "AmipResult", "TARGETS", "METHODS"]

TARGETS = ("sign", "significance", "sign_and_significance")
METHODS = ("linear", "reweighted")


@dataclass(frozen=True)
class _Goal:
    """What to move and how far: the metric ``mean + sign z sd``, a direction and amount."""

    metric: str
    sign: int
    direction: int
    need: float
    value: float
    z: float


def _goal(f: np.ndarray, target, z: float) -> _Goal:
    mean, sd = float(f.mean()), float(f.std(ddof=1))
    if not isinstance(target, str):
        return _Goal("mean", 0, 1 if target > 0 else -1, abs(float(target)), mean, z)
    if target == "sign":
        return _Goal("mean", 0, -1 if mean > 0 else 1, abs(mean), mean, z)
    # The end on the mean's side is the far one (larger in magnitude), the other the near.
    same_side = 1 if mean >= 0 else -1
    sign = -same_side if target == "significance" else same_side
    value = mean + sign * z * sd
    name = "lower end" if sign < 0 else "upper end"
    return _Goal(name, sign, -1 if value > 0 else 1, abs(value), value, z)


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
    verification : dict or None
        After :meth:`verify`: the refit value, change and whether the target was reached.
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
    groups: object = None
    post: Posterior | None = field(default=None, repr=False, compare=False)
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
        row = {"quantity": self.quantity, "target": str(self.target), "metric": self.metric,
               "original": self.original_value, "n_drop": self.n_drop,
               "prop_drop": self.prop_drop, "reachable": self.reachable,
               "predicted": self.predicted_value, "predicted_change": self.predicted_change}
        if self.verification is not None:
            row.update(refit=self.verification["value"],
                       refit_change=self.verification["change"],
                       refit_reached=self.verification["reached"])
        return pd.DataFrame([row])

    def verify(self, backend, **campaign) -> AmipResult:
        """Refit without ``drop_ids`` (:func:`bayesij.refit.drop`) and record what happened.

        Returns a new result whose ``verification`` holds the refit mean and sd, the
        metric's refit value and change, and whether the target is really reached; extra
        keyword arguments (``store``, ``executor``, ``progress``) go to the campaign.
        """
        from bayesij.refit.experiments import drop  # the refit layer, above this one

        report = drop(self.post, backend, self.drop_ids, groups=self.groups,
                      quantities=[self.quantity], **campaign)
        refit = report.summary.get("refit", {}).get(self.quantity)
        if refit is None:
            raise RuntimeError(f"backend: the refit failed ({report.failures.to_dict()}).")
        mean, sd = refit
        value = mean + {"mean": 0, "lower end": -1, "upper end": 1}[self.metric] * self.z * sd
        change = value - self.original_value
        verification = {"mean": mean, "sd": sd, "value": value, "change": change,
                        "reached": self._reached(change), "report": report}
        return replace(self, verification=verification)

    def _reached(self, change: float) -> bool:
        if isinstance(self.target, str):
            return bool(np.sign(self.original_value + change) != np.sign(self.original_value))
        return bool(np.sign(change) == np.sign(self.target) and abs(change) >= abs(
            self.target))

    def __str__(self) -> str:
        unit = "observations" if self.unit == "obs" else "groups"
        head = (f"AMIP for {self.quantity}, target {self.target!r} ({self.metric} = "
                f"{self.original_value:.4g}), method {self.method}:")
        if self.reachable:
            body = (f"  dropping {self.n_drop} of {self.n_units} {unit} "
                    f"({100 * self.prop_drop:.2f} %) is predicted to move the {self.metric} "
                    f"to {self.predicted_value:.4g}; interval after: "
                    f"[{self.predicted_interval[0]:.4g}, {self.predicted_interval[1]:.4g}]")
        else:
            body = (f"  not reachable by dropping up to {self.n_drop} {unit} (stopped: "
                    f"{self.stopped}); the largest predicted change is "
                    f"{self.predicted_change:.4g}")
        ids = ", ".join(map(str, self.drop_ids[:15])) + (" ..." if self.n_drop > 15 else "")
        lines = [head, body, f"  set: [{ids}]"]
        mc = self.monte_carlo
        if mc:
            lines.append(f"  Monte Carlo check ({mc['how']}): change {mc['naive']:.4g} where "
                         f"chosen, {mc['split']:.4g} on the other draws (95 % interval "
                         f"{mc['interval'][0]:.4g} to {mc['interval'][1]:.4g})")
        if self.verification is not None:
            v = self.verification
            lines.append(f"  refit without the set: {self.metric} {v['value']:.4g} (change "
                         f"{v['change']:.4g}); target reached: {v['reached']}")
        return "\n".join(lines)

    __repr__ = __str__


def _check_arguments(post, quantity, target, alpha_max, z, method):
    if not isinstance(post, Posterior):
        raise fail("post", f"a {type(post).__name__}", "a bayesij.Posterior")
    if quantity not in post.quantity_names:
        raise fail("quantity", repr(quantity), f"one of {post.quantity_names[:10]}")
    if isinstance(target, str):
        if target not in TARGETS:
            raise fail("target", repr(target), f"one of {TARGETS} or a change Δ (float)")
    elif not (isinstance(target, (int, float)) and math.isfinite(target) and target != 0):
        raise fail("target", repr(target), "a finite, non-zero change Δ, or one of "
                   f"{TARGETS}")
    if not (isinstance(alpha_max, (int, float)) and 0 < alpha_max < 1):
        raise fail("alpha_max", repr(alpha_max), "a proportion in (0, 1)")
    if not (isinstance(z, (int, float)) and math.isfinite(z) and z > 0):
        raise fail("z", repr(z), "a finite positive multiple of the posterior sd")
    if method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")


def _metric_influence(f, log_lik, goal):
    """Influence of the goal's metric on every unit: one pass over the draws."""
    return arrays.influence_scores(arrays.metric_draws(f, goal.sign, goal.z)[..., None],
                                   log_lik)


def _path(method, f, log_lik, goal, k_max, k_threshold, scores=None):
    if method == "linear":
        scores = _metric_influence(f, log_lik, goal) if scores is None else scores
        return arrays.linear_path(scores.psi[0], goal.direction, goal.need, k_max,
                                  scores.mcse[0])
    return arrays.reweighted_path(f, log_lik, goal.sign, goal.z, goal.direction, goal.need,
                                  k_max, k_threshold)


def amip(post, quantity: str, target="sign", groups=None, alpha_max: float = 0.1,
         z: float = 1.96, method: str = "reweighted") -> AmipResult:
    """Approximate most influential set: the fewest units whose removal reaches a target.

    Parameters
    ----------
    post : Posterior
    quantity : str
        A quantity name (``'beta[1]'``).
    target : {"sign", "significance", "sign_and_significance"} or float, default "sign"
        ``"sign"``: the posterior mean crosses 0. ``"significance"``: the end of
        ``mean ± z sd`` nearer 0 crosses it (significant becomes not, or the reverse).
        ``"sign_and_significance"``: the far end crosses 0 (significant with the opposite
        sign). A float Δ: the posterior mean moves by Δ (its sign gives the direction).
    groups : array_like or mapping, optional
        Drop whole groups (default ``post.groups``); otherwise observations.
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
    _check_arguments(post, quantity, target, alpha_max, z, method)
    f = post.quantities.sel(quantity=quantity).values
    log_lik, units = post.units(groups)
    n_units = units.size
    k_max = max(1, int(np.floor(alpha_max * n_units)))
    goal = _goal(f, target, float(z))
    k_threshold = pareto_k_threshold(post.n_draws)
    scores = _metric_influence(f, log_lik, goal)
    path = _path(method, f, log_lik, goal, k_max, k_threshold, scores)
    linear = _path("linear", f, log_lik, replace(goal, need=np.inf), k_max, k_threshold,
                   scores)
    curve = pd.DataFrame({"n_drop": np.arange(linear.change.size), "linear": linear.change})
    if method == "reweighted":
        curve = curve.merge(pd.DataFrame({"n_drop": path.sizes, "reweighted": path.change,
                                          "pareto_k": path.pareto_k}), on="n_drop",
                            how="outer")
    change = float(path.change[-1])
    mean_after, sd_after = _after(f, log_lik, path.order, method)
    result = AmipResult(
        quantity=quantity, target=target, metric=goal.metric, original_value=goal.value,
        z=float(z), drop_ids=units.values[path.order].tolist(), n_units=int(n_units),
        predicted_change=change, predicted_mean=mean_after,
        predicted_interval=(mean_after - z * sd_after, mean_after + z * sd_after),
        curve=curve, method=method, stopped=path.stopped,
        monte_carlo=_split_check(method, f, log_lik, goal, k_max, k_threshold, path),
        unit=units.dims[0], groups=groups, post=post)
    return result


def _after(f, log_lik, order, method) -> tuple[float, float]:
    """Predicted posterior mean and sd after dropping ``order``."""
    flat = f.reshape(-1)
    if order.size == 0:
        return float(flat.mean()), float(flat.std(ddof=1))
    if method == "reweighted":
        set_lik = log_lik[:, :, order].sum(axis=2).reshape(-1)
        weights, _ = arrays.set_weights(set_lik, f.shape)
        mean = float(weights @ flat)
        return mean, float(np.sqrt(weights @ (flat - mean) ** 2))
    change_mean, _ = arrays.linear_set_change(f, log_lik, order, 0, 1.0)
    change_sd, _ = arrays.linear_set_change(f, log_lik, order, 1, 1.0)
    mean = float(flat.mean()) + change_mean
    return mean, float(flat.std(ddof=1)) + change_sd - change_mean


def _split_check(method, f, log_lik, goal, k_max, k_threshold, path) -> dict:
    """Choose the set on one half of the draws, estimate its effect on the other."""
    how, (first, second), axis = arrays.split_halves(*f.shape)
    take = (lambda a, part: a[part]) if axis == 0 else (lambda a, part: a[:, part])
    f_a, f_b = take(f, first), take(f, second)
    if f_a.shape[1] < 4 or f_b.shape[1] < 4:
        return {}
    l_a, l_b = take(log_lik, first), take(log_lik, second)
    goal_a = replace(goal, need=goal.need if path.stopped == "reached" else np.inf)
    chosen = _path(method, f_a, l_a, goal_a, max(1, path.order.size), k_threshold).order
    if chosen.size == 0:
        return {}
    split, mcse = arrays.linear_set_change(f_b, l_b, chosen, goal.sign, goal.z)
    if method == "reweighted":
        naive = _reweighted_change(f_a, l_a, chosen, goal.sign, goal.z)
        split = _reweighted_change(f_b, l_b, chosen, goal.sign, goal.z)
    else:
        naive, _ = arrays.linear_set_change(f_a, l_a, chosen, goal.sign, goal.z)
    return {"how": how, "n_drop": int(chosen.size), "naive": naive, "split": split,
            "mcse": mcse, "interval": (split - 1.96 * mcse, split + 1.96 * mcse)}


def _reweighted_change(f, log_lik, order, sign, z) -> float:
    flat = f.reshape(-1)
    before = arrays.weighted_value(flat, np.full(flat.size, 1 / flat.size), sign, z)[0]
    weights, _ = arrays.set_weights(log_lik[:, :, order].sum(axis=2).reshape(-1), f.shape)
    return arrays.weighted_value(flat, weights, sign, z)[0] - before
