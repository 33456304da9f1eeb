"""A set's removal from a normal varying-intercept model, worked out from the draws with
the group effects integrated out.

A varying-intercept model ``y_n ~ N(alpha[g_n], sigma)``, ``alpha_g ~ N(mu, tau)``, saved as
plain arrays (every ``alpha[g]`` a quantity, no group index) is recovered from its draws:
each observation's ``q_n = -2 sigma^2 (l_n + log(2 pi) / 2 + log sigma)`` is
``(y_n - alpha[g_n])^2`` exactly, which names its group's effect and gives ``y_n``; ``mu``
and ``tau`` are the quantities no observation holds whose normal prior on the effects the
draws confirm (each effect's conditional mean and variance given ``mu``, ``tau``, ``sigma``
and its group's observations, :func:`_effects_conditional`).

Importance sampling of a removal over the draws of the observations' own log-likelihood
fails after two or three observations of one group (the group's effect moves with them);
integrated over the effects, a group's observations have the closed-form likelihood

    log m_g = -(n/2) log(2 pi) - ((n-1)/2) log sigma^2 - log(sigma^2 + n tau^2) / 2
              - SS_g / (2 sigma^2) - n (ybar_g - mu)^2 / (2 (sigma^2 + n tau^2)),

so the posterior of ``(mu, tau, sigma)`` without a set is the draws' reweighted by the ratio
of the touched groups' ``m_g`` without and with it (the priors cancel, whatever they are):
a Rao-Blackwellised importance sample whose Pareto k-hat stays low for many more
observations. A quantity of ``mu``, ``tau`` and ``sigma`` alone is answered; a group effect
(whose own conditional moves with its group's observations) is not.

References
----------
.. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric: when can dropping a little data make a big difference?
   arXiv:2011.14999.
.. [2] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
   smoothed importance sampling. Journal of Machine Learning Research 25(72).
.. [3] Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A. and Rubin,
   D. B. (2013). Bayesian Data Analysis, 3rd ed., section 5.4 (the marginal posterior of
   a normal hierarchical model's hyperparameters).
"""

from __future__ import annotations

from itertools import chain
from typing import NamedTuple

import numpy as np

from bayesij.array.amip import MC_MARGIN, mean_mcse
from bayesij.array.amip_logistic import Affine, _pieces, _ratios_khat, _recovery_rows, remembered
from bayesij.array.numeric import top_positive

__all__ = ["HierarchyModel", "recover_hierarchy", "effects_explain"]

#: The share of ``q_n``'s variance over the recovery draws that ``(y_n - alpha)^2`` may
#: leave for the observation to count as a normal one of that effect (round-off: 1e-28).
RECOVERED = 1e-12

#: The effects' standardised conditional draws (:func:`_effects_conditional`) must have a
#: mean within this of 0 and a variance within this factor of 1, pooled over the groups.
#: A normal prior's are N(0, 1) up to Monte Carlo error (0.01 for 4000 draws of 24
#: groups); swapping ``mu`` and ``tau``, or a Student-t prior, is far outside.
CONDITIONAL_MEAN = 0.1
CONDITIONAL_SCALE = 1.15

#: More quantities than this are not searched for the observations' effects (each
#: observation is fitted on every quantity: its cost grows as their number times N).
MAX_QUANTITIES = 2000

#: More quantities times observations than this are not searched either: each observation's
#: effect is found by two products of its recovery draws with every quantity's (2 x 256 x
#: this many multiplications: about a second).
MAX_PRODUCTS = 20_000_000

#: More observations than this are not searched: the model's greedy order reweights every
#: observation's removal at each step (an audit of 1000 observations in 10 groups took
#: 12 s against 0.5 s without the model, 10^4 took 147 s).
MAX_UNITS = 500

#: Positive quantities tried as the residual sd (those named as scales first), and the
#: observations each is first tried on: a model that is not such a hierarchy is refused
#: after a few of its observations.
MAX_SCALES, FIRST_UNITS = 4, 32

#: Units whose removals :meth:`HierarchyModel.first_order` reweights at once (4000 draws:
#: 8 MiB).
FIRST_ORDER_UNITS = 256

_LOG_2PI = np.log(2 * np.pi)


class DrawsRemoval(NamedTuple):
    """The metric ``mean + sign z sd`` of a quantity under reweighted draws
    (:meth:`HierarchyModel.removal`), with each draw's term of its Monte Carlo error: what
    :class:`~bayesij.array.amip_logistic.Removal` gives of a removal in the regressions'
    models, its band the error of these draws (their autocorrelation counted) instead of
    the prior's.

    Attributes
    ----------
    mid : float
    influence : ndarray of shape (n_chains, n_draws)
        ``S w_s [(f_s - mean) + sign z ((f_s - mean)^2 - sd^2) / (2 sd)]``: the metric's
        error is their mean's.
    """

    mid: float
    influence: np.ndarray

    @property
    def band(self) -> tuple[float, float]:
        """``mid`` give or take :data:`~bayesij.array.amip.MC_MARGIN` Monte Carlo errors."""
        half = MC_MARGIN * _mean_error(self.influence)
        return self.mid - half, self.mid + half

    def change_from(self, before: DrawsRemoval) -> tuple[float, float, float]:
        """The change from ``before`` (another set's removal from the same draws): its low
        end, value and high end, the error of the two paired draw by draw."""
        change = self.mid - before.mid
        half = MC_MARGIN * _mean_error(self.influence - before.influence)
        return change - half, change, change + half


class HierarchyModel(NamedTuple):
    """A normal varying-intercept model recovered from its draws (:func:`recover_hierarchy`).

    Attributes
    ----------
    mean, basis : ndarray of shape (P,), (P, 3)
        The model's parameters ``(mu, tau, sigma)`` in the posterior's quantities ``theta``
        (S, P): ``theta @ basis - mean @ basis`` (:func:`~bayesij.array.amip_logistic.
        whitened_draws`); what a searched quantity must be affine in.
    groups : ndarray of shape (N,)
        Each observation's group (0 .. G - 1).
    y : ndarray of shape (N,)
        The observations, recovered.
    phi : ndarray of shape (S, 3)
        The draws of ``mu``, ``tau`` and ``sigma``.
    n_chains : int
        The draws' chains (of equal length, one after another): the Monte Carlo errors
        count their autocorrelation.
    samples : dict, optional
        The importance samples drawn so far (:func:`~bayesij.array.amip_logistic.
        remembered`).
    """

    mean: np.ndarray
    basis: np.ndarray
    groups: np.ndarray
    y: np.ndarray
    phi: np.ndarray
    n_chains: int
    samples: dict | None = None

    @property
    def log_quantities(self) -> bool:
        """Its removals take the quantities as they are (importance samples)."""
        return False

    @property
    def reweights_the_draws(self) -> bool:
        """Its removals reweight the draws, their band the reweighted draws' Monte Carlo
        error: the importance-sampling check adds nothing to it
        (:func:`~bayesij.array.amip_logistic._checked_band`)."""
        return True

    @property
    def decided_by(self) -> str:
        """How an answer decided in this model was worked out (``AmipResult.decided_by``)."""
        return (
            "importance sampling of the draws of the normal varying-intercept model "
            "recovered from them (each observation's group effect and value recovered "
            "exactly, the effects' normal prior confirmed by the draws), the group effects "
            "integrated out; its Pareto k-hat checked"
        )

    def log_weights(self, dropped) -> np.ndarray:
        """The log of the importance ratios (S,) of the posterior without ``dropped``: the
        touched groups' integrated likelihood without the set over with it."""
        dropped = np.unique(np.asarray(dropped, dtype=int))
        out = np.zeros(self.phi.shape[0])
        touched = np.unique(self.groups[dropped])
        if not touched.size:
            return out
        before = _group_sums(self.y, self.groups, touched)
        keep = np.ones(self.y.size, dtype=bool)
        keep[dropped] = False
        after = _group_sums(self.y[keep], self.groups[keep], touched)
        return (_log_marginal(after, self.phi) - _log_marginal(before, self.phi)).sum(axis=1)

    def removal(self, dropped, quantity: Affine, sign: int, z: float) -> DrawsRemoval:
        """The metric ``mean + sign z sd`` of the quantity without ``dropped`` from the
        reweighted draws, with each draw's term of its Monte Carlo error
        (:class:`DrawsRemoval`)."""
        f = quantity.at(self.phi - self.mean @ self.basis)
        w = _normalised(self.log_weights(dropped))
        mean = float(w @ f)
        sd = float(np.sqrt(max(float(w @ (f - mean) ** 2), 0.0)))
        term = f - mean
        if sign and sd > 0:
            term = term + sign * z * (term**2 - sd**2) / (2 * sd)
        influence = (f.size * w * term).reshape(self.n_chains, -1)
        return DrawsRemoval(mean + sign * z * sd, influence)

    def importance_sample(self, dropped, seed: int = 0) -> tuple:
        """The draws in the model's parameters (S, 3: ``mu``, ``tau``, ``sigma``; what
        :func:`~bayesij.array.amip_logistic.whitened_draws` gives), the normalised
        importance weights of the posterior without ``dropped`` (S,) and their Pareto k-hat
        (each set worked out once: :func:`~bayesij.array.amip_logistic.remembered`)."""
        return remembered(self, dropped, seed, HierarchyModel.drawn_sample)

    def drawn_sample(self, dropped, seed: int = 0) -> tuple:
        """:meth:`importance_sample`, worked out now (``seed``: unused, the draws are given)."""
        w = _normalised(self.log_weights(dropped))
        return self.phi - self.mean @ self.basis, w, _ratios_khat(w)

    def first_order(self, quantity: Affine, goal, dropped=()) -> np.ndarray:
        """Each observation's change (N,) of the goal's metric when it is dropped beside
        ``dropped``: not a linearisation, each one's removal reweighted exactly; 0 for
        those already dropped."""
        dropped = np.unique(np.asarray(dropped, dtype=int))
        f = quantity.at(self.phi - self.mean @ self.basis)
        base = self.log_weights(dropped)
        start = _metric(f, base, goal.sign, goal.z)
        keep = np.ones(self.y.size, dtype=bool)
        keep[dropped] = False
        sums = _group_sums(self.y[keep], self.groups[keep], np.arange(self.groups.max() + 1))
        now = _log_marginal(sums, self.phi)  # (S, G): every group as it is kept
        out = np.zeros(self.y.size)
        kept = np.flatnonzero(keep)
        for part in np.array_split(kept, max(1, kept.size // FIRST_ORDER_UNITS)):
            g, y = self.groups[part], self.y[part]  # each unit's group less the unit
            less = (sums[0][g] - 1, sums[1][g] - y, sums[2][g] - y**2)
            log_w = base[:, None] + _log_marginal(less, self.phi) - now[:, g]  # (S, k)
            out[part] = _metric(f[:, None], log_w, goal.sign, goal.z) - start
        return out

    def ranking(self, quantity: Affine, goal, k_max: int) -> np.ndarray:
        """The observations (K,), at most ``k_max``, whose removal alone moves the goal's
        metric toward its target, largest first (:meth:`first_order`)."""
        return top_positive(goal.direction * self.first_order(quantity, goal), k_max)


def recover_hierarchy(
    theta: np.ndarray, log_lik, scales: np.ndarray, n_chains: int = 1
) -> HierarchyModel | None:
    """The :class:`HierarchyModel` whose observations' log-likelihood ``log_lik`` (S, N; or a
    function yielding its rows a block at a time) are at the draws ``theta`` (S, P) of the
    posterior's quantities (``n_chains`` chains one after another); None where no positive
    quantity (those ``scales`` marks first)
    makes every observation a normal one of one quantity's mean, or no two other
    quantities are the mean and sd of the effects' normal prior as the draws confirm it."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape[1] > MAX_QUANTITIES:
        return None
    rows = _recovery_rows(theta.shape[0])
    pieces = _pieces(log_lik, rows)  # read a block of observations at a time
    first = next(pieces, None)
    if first is None:
        return None
    # the residual sd: the first that explains the first observations (most models fail
    # there), then every observation read in that one, no piece held beyond its own fit
    scale = _scale_of(theta, first, scales)
    if scale is None:
        return None
    found, n_units = [], 0
    for piece in chain([first], pieces):
        n_units += piece.shape[1]
        one = _observations(theta[rows], piece, scale)
        if one is None or theta.shape[1] * n_units > MAX_PRODUCTS or n_units > MAX_UNITS:
            return None
        found.append(one)
    effect, y = (np.concatenate(parts) for parts in zip(*found, strict=True))
    model = _with_prior(theta, scale, effect, y)
    return None if model is None else model._replace(n_chains=int(n_chains))


def effects_explain(theta: np.ndarray, log_lik, scales: np.ndarray) -> bool:
    """Whether the first observations of ``log_lik`` (a function yielding its rows, as
    :func:`recover_hierarchy` reads it; a lazy source's columns its pass kept) are each a
    normal one of one quantity's mean, as :func:`recover_hierarchy` first asks: whether
    reading every observation to recover the model may pay."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape[1] > MAX_QUANTITIES:
        return False
    rows = _recovery_rows(theta.shape[0])
    first = next(_pieces(log_lik, rows), None)
    return first is not None and _scale_of(theta, first, scales) is not None


def _scale_of(theta: np.ndarray, first: np.ndarray, scales: np.ndarray) -> int | None:
    """The first positive quantity (those ``scales`` marks first, at most
    :data:`MAX_SCALES`) as whose residual sd the first :data:`FIRST_UNITS` observations of
    ``first`` (K, n; at the recovery draws) are each normal of one quantity's mean."""
    positive = [j for j in range(theta.shape[1]) if np.all(theta[:, j] > 0)]
    order = sorted(positive, key=lambda j: not bool(np.asarray(scales)[j]))[:MAX_SCALES]
    at = theta[_recovery_rows(theta.shape[0])]
    return next((j for j in order if _observations(at, first[:, :FIRST_UNITS], j)), None)


def _observations(theta: np.ndarray, values: np.ndarray, scale: int) -> tuple | None:
    """Each observation's effect (N,; a column of ``theta``) and value (N,) where every
    ``q_n`` at the recovery draws (``theta`` (K, P), ``values`` (K, N)) is
    ``(y_n - theta_j)^2`` for one column ``j`` other than ``scale``; None otherwise."""
    sigma = theta[:, scale]
    q = -2 * sigma[:, None] ** 2 * (values + 0.5 * _LOG_2PI + np.log(sigma)[:, None])
    spread = np.sum((q - q.mean(axis=0)) ** 2, axis=0)
    if not np.all(np.isfinite(q)) or np.any(spread <= 0):
        return None
    effect = _likeliest_effects(theta, q, scale)
    if effect is None:
        return None
    y = np.zeros(q.shape[1])
    step = max(1, (1 << 22) // q.shape[0])  # observations a block: 32 MiB of effects
    for start in range(0, q.shape[1], step):  # each one fitted exactly on its effect
        part = slice(start, start + step)
        a = theta[:, effect[part]]  # (K, n)
        target = q[:, part] - a**2  # y^2 - 2 y a
        a_c = a - a.mean(axis=0)
        slope = np.sum(a_c * target, axis=0) / np.sum(a_c**2, axis=0)  # -2y
        fitted = target.mean(axis=0) + slope * a_c
        if np.any(np.sum((target - fitted) ** 2, axis=0) > RECOVERED * spread[part]):
            return None
        y[part] = -0.5 * slope
    return effect, y


def _likeliest_effects(theta: np.ndarray, q: np.ndarray, scale: int) -> np.ndarray | None:
    """For each observation (``q`` (K, N)), the column of ``theta`` (K, P) other than
    ``scale`` in whose centred values and squares its ``q`` is best explained (two
    products with every column at once, a block of observations at a time), or None where
    no column varies."""
    d = theta - theta.mean(axis=0)
    e = d**2 - (d**2).mean(axis=0)
    g11, g12, g22 = (d * d).sum(axis=0), (d * e).sum(axis=0), (e * e).sum(axis=0)
    det = g11 * g22 - g12**2
    usable = det > 1e-12 * np.maximum(g11 * g22, np.finfo(float).tiny)
    usable[scale] = False
    if not usable.any():
        return None
    effect = np.empty(q.shape[1], dtype=int)
    step = max(1, (1 << 22) // max(1, theta.shape[1]))  # 32 MiB of products a block
    for start in range(0, q.shape[1], step):
        centred = q[:, start : start + step] - q[:, start : start + step].mean(axis=0)
        b1, b2 = d.T @ centred, e.T @ centred  # (P, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = g22[:, None] * b1**2 - 2 * g12[:, None] * b1 * b2 + g11[:, None] * b2**2
            explained = np.where(usable[:, None], explained / det[:, None], -np.inf)
        effect[start : start + step] = np.argmax(explained, axis=0)
    return effect


def _with_prior(theta, scale: int, effect: np.ndarray, y: np.ndarray):
    """The model of observations ``y`` of effects ``effect`` (columns of ``theta``) and the
    residual sd ``theta[:, scale]``, with the two other quantities that are the effects'
    normal prior's mean and sd (:func:`_effects_conditional`); None where none are."""
    columns, groups = np.unique(effect, return_inverse=True)
    others = [j for j in range(theta.shape[1]) if j != scale and j not in set(columns.tolist())]
    if columns.size < 2:
        return None
    for mu in others:
        for tau in others:
            if tau == mu or not np.all(theta[:, tau] > 0):
                continue
            phi = theta[:, [mu, tau, scale]]
            if _effects_conditional(theta[:, columns], phi, y, groups):
                basis = np.zeros((theta.shape[1], 3))
                basis[[mu, tau, scale], [0, 1, 2]] = 1.0
                return HierarchyModel(np.zeros(theta.shape[1]), basis, groups, y, phi, 1, {})
    return None


def _effects_conditional(effects, phi, y, groups) -> bool:
    """Whether the effects' draws (S, G) are those of a normal prior ``N(mu, tau)`` given the
    draws ``phi`` (S, 3) of ``mu``, ``tau`` and ``sigma`` (BDA3 section 5.4): standardised
    by their conditional mean and sd given those and their groups' observations, and
    ``mu`` by its own given the effects and ``tau`` (``N(mean(alpha), tau^2 / G)`` under a
    flat or vague prior: where the groups' data hold their effects, only this one sees
    ``tau``), each :func:`_standard`."""
    count, total, _ = _group_sums(y, groups, np.arange(effects.shape[1]))
    mu, tau, sigma = (phi[:, k : k + 1] for k in range(3))
    precision = count / sigma**2 + 1 / tau**2
    mean = (total / sigma**2 + mu / tau**2) / precision
    z_effects = (effects - mean) * np.sqrt(precision)
    z_mu = (mu[:, 0] - effects.mean(axis=1)) * np.sqrt(effects.shape[1]) / tau[:, 0]
    return _standard(z_effects) and _standard(z_mu)


def _standard(z: np.ndarray) -> bool:
    """Whether draws ``z`` are finite with a mean within :data:`CONDITIONAL_MEAN` of 0 and a
    variance within a factor :data:`CONDITIONAL_SCALE` of 1."""
    if not np.all(np.isfinite(z)):
        return False
    variance = float(np.mean(z**2) - np.mean(z) ** 2)
    return abs(float(np.mean(z))) < CONDITIONAL_MEAN and (
        1 / CONDITIONAL_SCALE < variance < CONDITIONAL_SCALE
    )


def _group_sums(y: np.ndarray, groups: np.ndarray, which: np.ndarray) -> tuple:
    """The count, sum and sum of squares (each (len(which),)) of the observations ``y`` of
    each of the groups ``which``."""
    size = int(max(groups.max(initial=-1), which.max(initial=-1))) + 1
    count = np.bincount(groups, minlength=size).astype(float)[which]
    total = np.bincount(groups, weights=y, minlength=size)[which]
    squares = np.bincount(groups, weights=y**2, minlength=size)[which]
    return count, total, squares


def _log_marginal(sums: tuple, phi: np.ndarray) -> np.ndarray:
    """Each group's log-likelihood with its effect integrated out (S, G) at the draws
    ``phi`` (S, 3) of ``mu``, ``tau``, ``sigma``, from its observations' count, sum and sum
    of squares ``sums`` (three (G,) arrays, :func:`_group_sums`); 0 for a group without
    observations."""
    count, total, squares = sums
    mu, tau, sigma = (phi[:, k : k + 1] for k in range(3))
    n = count[None, :]
    var, joint = sigma**2, sigma**2 + n * tau**2
    with np.errstate(divide="ignore", invalid="ignore"):
        ybar = np.where(n > 0, total / np.maximum(n, 1), 0.0)
        within = np.maximum(squares - n * ybar**2, 0.0)
        out = (
            -0.5 * n * _LOG_2PI
            - 0.5 * (n - 1) * np.log(var)
            - 0.5 * np.log(joint)
            - within / (2 * var)
            - n * (ybar - mu) ** 2 / (2 * joint)
        )
    return np.where(n > 0, out, 0.0)


def _metric(f: np.ndarray, log_w: np.ndarray, sign: int, z: float):
    """``mean + sign z sd`` of the draws ``f`` (S,) under the importance weights
    ``exp(log_w)`` (S,), or of each column of weights (S, k) with ``f`` (S, 1): (k,)."""
    w = _normalised(log_w)
    mean = np.sum(w * f, axis=0)
    sd = np.sqrt(np.maximum(np.sum(w * (f - mean) ** 2, axis=0), 0.0))
    out = mean + sign * z * sd
    return float(out) if np.ndim(out) == 0 else out


def _mean_error(influence: np.ndarray) -> float:
    """The Monte Carlo standard error of the mean of per-draw terms ``influence``
    (n_chains, n_draws), their autocorrelation counted (:func:`~bayesij.array.amip.
    mean_mcse`); 0 where every term is 0 (a removal against itself)."""
    return mean_mcse(influence) if np.any(influence) else 0.0


def _normalised(log_w: np.ndarray) -> np.ndarray:
    """Importance weights summing to one (along the first axis) from their logarithms."""
    w = np.exp(log_w - log_w.max(axis=0))
    return w / w.sum(axis=0)
