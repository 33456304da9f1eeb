"""A set's removal from a normal varying-intercept model, worked out from the draws with
the group effects integrated out.

A varying-intercept model ``y_n ~ N(alpha[g_n] + x_n . beta, sigma)``, ``alpha_g ~ N(mu,
tau)`` (``beta``: the slopes of a few predictors, or none), saved as plain arrays (every
``alpha[g]`` a quantity, no group index) is recovered from its draws: each observation's
``q_n = -2 sigma^2 (l_n + log(2 pi) / 2 + log sigma)`` is ``(y_n - alpha[g_n] - x_n .
beta)^2`` exactly, which names its group's effect and the slopes and gives ``y_n`` and
``x_n`` (:func:`_slopes_of`); ``mu`` and ``tau`` are the quantities no observation holds
whose normal prior on the effects the draws confirm (each effect's conditional mean and
variance given ``mu``, ``tau``, ``sigma``, ``beta`` and its group's observations,
:func:`_effects_conditional`).

Importance sampling of a removal over the draws of the observations' own log-likelihood
fails after two or three observations of one group (the group's effect moves with them);
integrated over the effects, a group's observations have the closed-form likelihood

    log m_g = -(n/2) log(2 pi) - ((n-1)/2) log sigma^2 - log(sigma^2 + n tau^2) / 2
              - SS_g / (2 sigma^2) - n (rbar_g - mu)^2 / (2 (sigma^2 + n tau^2))

in the residuals ``r_n = y_n - x_n . beta`` of its observations (mean ``rbar_g``, sum of
squares about it ``SS_g``), so the posterior of ``(mu, tau, sigma, beta)`` without a set
is the draws' reweighted by the ratio of the touched groups' ``m_g`` without and with it
(the priors cancel, whatever they are): a Rao-Blackwellised importance sample whose Pareto
k-hat stays low for many more observations. A quantity of ``mu``, ``tau``, ``sigma`` and
``beta`` alone is answered; a group effect (whose own conditional moves with its group's
observations) is not.

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
from bayesij.array.amip_logistic import (
    Affine,
    _pieces,
    _ratios_khat,
    _recall,
    _recovery_rows,
    remembered,
)
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

#: Slopes of predictors shared by the observations beside their group effects, at most
#: (each adds its products with the effect and the other slopes to every observation's
#: exact fit: with 8, 54 terms on the 256 recovery draws).
MAX_SLOPES = 8

#: Columns an observation's effect is tried among where slopes are fitted, the likeliest
#: first (:func:`_likeliest_effects`): where a slope's terms outweigh its group's, the slope
#: looks likelier than the effect (and, the slopes excluded, ``mu`` may).
EFFECT_TRIES = 4

#: Each slope found must leave at most this share of what the fits left before it
#: (:func:`_slopes_of`); the observations it is chosen on, at most (those fitted worst).
SLOPE_PROGRESS, SLOPE_UNITS = 0.75, 8

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
    mean, basis : ndarray of shape (P,), (P, 3 + B)
        The model's parameters ``(mu, tau, sigma, beta)`` in the posterior's quantities
        ``theta`` (S, P): ``theta @ basis - mean @ basis`` (:func:`~bayesij.array.
        amip_logistic.whitened_draws`); what a searched quantity must be affine in.
    groups : ndarray of shape (N,)
        Each observation's group (0 .. G - 1).
    y : ndarray of shape (N,)
        The observations, recovered.
    x : ndarray of shape (N, B)
        Their predictors, recovered (B = 0: none).
    phi : ndarray of shape (S, 3 + B)
        The draws of ``mu``, ``tau``, ``sigma`` and the slopes ``beta``.
    n_chains : int
        The draws' chains (of equal length, one after another): the Monte Carlo errors
        count their autocorrelation.
    samples : dict, optional
        The importance samples drawn so far (:func:`~bayesij.array.amip_logistic.
        remembered`).
    orders : dict, optional
        The first orders worked out so far (:meth:`first_order_of`).
    """

    mean: np.ndarray
    basis: np.ndarray
    groups: np.ndarray
    y: np.ndarray
    x: np.ndarray
    phi: np.ndarray
    n_chains: int
    samples: dict | None = None
    orders: dict | None = None

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
            "recovered from them (each observation's group effect, value and predictors "
            "recovered exactly, the effects' normal prior confirmed by the draws), the "
            "group effects integrated out; its Pareto k-hat checked"
        )

    def log_weights(self, dropped) -> np.ndarray:
        """The log of the importance ratios (S,) of the posterior without ``dropped``: the
        touched groups' integrated likelihood without the set over with it."""
        dropped = np.unique(np.asarray(dropped, dtype=int))
        out = np.zeros(self.phi.shape[0])
        touched = np.unique(self.groups[dropped])
        if not touched.size:
            return out
        keep = np.ones(self.y.size, dtype=bool)
        before = residual_sums(kept_stats(self, keep).of(touched), self.phi[:, 3:])
        keep[dropped] = False
        after = residual_sums(kept_stats(self, keep).of(touched), self.phi[:, 3:])
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
        return self.first_order_of(quantity.at(self.phi - self.mean @ self.basis), goal, dropped)

    def first_order_of(self, f: np.ndarray, goal, dropped=()) -> np.ndarray:
        """:meth:`first_order` of the quantity whose draws are ``f`` (S,), each worked out
        once (kept in ``orders``: the greedy orders of the model and of its Laplace
        variant, :mod:`bayesij.array.amip_hierarchy_laplace`, ask for the same)."""
        dropped = np.unique(np.asarray(dropped, dtype=int))
        # the same draws by another fit of the quantity differ by round-off: rounded
        key = ("first order", np.round(f, 9).tobytes(), goal.sign, goal.z, dropped.tobytes())
        return _recall(self, "orders", key, lambda: self._first_order(f, goal, dropped))

    def _first_order(self, f: np.ndarray, goal, dropped: np.ndarray) -> np.ndarray:
        """:meth:`first_order_of`, worked out now."""
        base = self.log_weights(dropped)
        start = _metric(f, base, goal.sign, goal.z)
        keep = np.ones(self.y.size, dtype=bool)
        keep[dropped] = False
        count, total, squares = residual_sums(kept_stats(self, keep), self.phi[:, 3:])
        now = _log_marginal((count, total, squares), self.phi)  # (S, G): groups as kept
        total, squares = np.atleast_2d(total), np.atleast_2d(squares)  # (1 or S, G)
        out = np.zeros(self.y.size)
        kept = np.flatnonzero(keep)
        for part in np.array_split(kept, max(1, kept.size // FIRST_ORDER_UNITS)):
            g, r = self.groups[part], _residuals(self, part)  # each unit's group less the unit
            less = (count[g] - 1, total[:, g] - r, squares[:, g] - r**2)
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
    quantity (those ``scales`` marks first) makes every observation a normal one of one
    quantity's mean plus up to :data:`MAX_SLOPES` others' times its predictors, or no two
    other quantities are the mean and sd of the effects' normal prior as the draws confirm
    it."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape[1] > MAX_QUANTITIES:
        return None
    rows = _recovery_rows(theta.shape[0])
    pieces = _pieces(log_lik, rows)  # read a block of observations at a time
    first = next(pieces, None)
    if first is None:
        return None
    # the residual sd and the slopes: the first that explain the first observations (most
    # models fail there), then every observation read in those, no piece held beyond its fit
    found = _scale_of(theta, first, scales)
    if found is None:
        return None
    scale, slopes = found
    parts, n_units = [], 0
    for piece in chain([first], pieces):
        n_units += piece.shape[1]
        one = _observations(theta[rows], piece, scale, slopes)
        if one is None or theta.shape[1] * n_units > MAX_PRODUCTS or n_units > MAX_UNITS:
            return None
        parts.append(one[:3])
    effect, y, x = (np.concatenate(part) for part in zip(*parts, strict=True))
    model = _with_prior(theta, (scale, slopes), effect, y, x)
    return None if model is None else model._replace(n_chains=int(n_chains))


def effects_explain(theta: np.ndarray, log_lik, scales: np.ndarray) -> bool:
    """Whether the first observations of ``log_lik`` (a function yielding its rows, as
    :func:`recover_hierarchy` reads it; a lazy source's columns its pass kept) are each a
    normal one of one quantity's mean (and the slopes'), as :func:`recover_hierarchy`
    first asks: whether reading every observation to recover the model may pay."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape[1] > MAX_QUANTITIES:
        return False
    rows = _recovery_rows(theta.shape[0])
    first = next(_pieces(log_lik, rows), None)
    return first is not None and _scale_of(theta, first, scales) is not None


def _scale_of(theta: np.ndarray, first: np.ndarray, scales: np.ndarray) -> tuple | None:
    """The first positive quantity (those ``scales`` marks first, at most
    :data:`MAX_SCALES`) as whose residual sd the first :data:`FIRST_UNITS` observations of
    ``first`` (K, n; at the recovery draws) are each normal of one quantity's mean plus
    the slopes' (:func:`_slopes_of`), and those slopes: ``(scale, slopes)``."""
    positive = [j for j in range(theta.shape[1]) if np.all(theta[:, j] > 0)]
    order = sorted(positive, key=lambda j: not bool(np.asarray(scales)[j]))[:MAX_SCALES]
    at = theta[_recovery_rows(theta.shape[0])]
    for j in order:
        found = _observations(at, first[:, :FIRST_UNITS], j)
        if found is not None:
            return j, found[3]
    return None


def _observations(theta: np.ndarray, values: np.ndarray, scale: int, slopes=None):
    """Each observation's effect (N,; a column of ``theta``), value (N,) and predictors
    (N, B), and the slopes (B columns of ``theta``), where every ``q_n`` at the recovery
    draws (``theta`` (K, P), ``values`` (K, N)) is ``(y_n - theta_j - x_n . theta_B)^2``
    for one column ``j`` other than ``scale`` and the slopes; ``slopes``: those found on
    earlier observations, else found here (:func:`_slopes_of`). None otherwise."""
    sigma = theta[:, scale]
    q = -2 * sigma[:, None] ** 2 * (values + 0.5 * _LOG_2PI + np.log(sigma)[:, None])
    spread = np.sum((q - q.mean(axis=0)) ** 2, axis=0)
    if not np.all(np.isfinite(q)) or np.any(spread <= 0):
        return None
    slopes = _slopes_of(theta, q, scale, spread) if slopes is None else slopes
    if slopes is None:
        return None
    ranked = _likeliest_effects(theta, q, [scale, *slopes], EFFECT_TRIES if slopes else 1)
    if ranked is None:
        return None
    effect = ranked[0]
    for other in ranked[1:]:  # where a slope's terms outweigh the effect's: the next column
        left = _slope_fits(theta, q, effect, slopes)[2]
        missed = np.sum(left**2, axis=0) > RECOVERED * spread
        if not missed.any():
            break
        effect = np.where(missed, other, effect)
    fitted = _exact_fits(theta, q, effect, slopes, spread)
    return None if fitted is None else (effect, *fitted, slopes)


def _exact_fits(theta, q, effect, slopes: list, spread) -> tuple | None:
    """Each observation's value (N,) and predictors (N, B) with ``q = (y - theta_effect -
    x . theta_slopes)^2`` at every recovery draw, to :data:`RECOVERED` of its spread; None
    where one is not."""
    if slopes:
        fits = _slope_fits(theta, q, effect, slopes)
        y, x = fits[0], fits[1]
        mean = theta[:, effect] + theta[:, slopes] @ x.T  # (K, N)
        if np.any(np.sum((q - (y - mean) ** 2) ** 2, axis=0) > RECOVERED * spread):
            return None
        return y, x
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
    return y, np.zeros((q.shape[1], 0))


def _slope_fits(theta, q, effect, slopes: list) -> tuple:
    """For each observation, ``q - theta_effect^2`` fitted by least squares on the terms of
    ``(y - a - x . b)^2 - a^2`` (``a`` its effect's draws, ``b`` the slopes'): the value
    ``-coef(a) / 2`` (N,), the predictors ``coef(a b) / 2`` (N, B) and what the fit leaves
    of each (K, N). One fit per effect, its observations together."""
    b = theta[:, slopes]
    k = len(slopes)
    first, second = np.triu_indices(k)
    products = b[:, first] * b[:, second]  # each pair of slopes once
    y, x, left = np.zeros(q.shape[1]), np.zeros((q.shape[1], k)), np.zeros(q.shape)
    for j in np.unique(effect):
        at = np.flatnonzero(effect == j)
        a = theta[:, j : j + 1]
        design = np.column_stack([np.ones_like(a), a, b, a * b, products])
        target = q[:, at] - a**2
        coef = np.linalg.lstsq(design, target, rcond=None)[0]
        y[at], x[at] = -0.5 * coef[1], 0.5 * coef[2 + k : 2 + 2 * k].T
        left[:, at] = target - design @ coef
    return y, x, left


def _slopes_of(theta: np.ndarray, q: np.ndarray, scale: int, spread: np.ndarray) -> list | None:
    """The slopes of the observations' predictors (columns of ``theta``, at most
    :data:`MAX_SLOPES`; none for a varying-intercept model alone): added one at a time, the
    quantity whose terms (itself, its product with each observation's effect, its square)
    explain most of what the fits on the effects and the slopes so far leave
    (:func:`_best_slope`), until every ``q_n`` is fitted to :data:`RECOVERED` of its
    spread; None where it is not by then, or where a slope leaves more than
    :data:`SLOPE_PROGRESS` of what was left before it (not such a model: refused at once)."""
    slopes: list = []
    before = np.inf
    while True:
        ranked = _likeliest_effects(theta, q, [scale, *slopes])
        if ranked is None:
            return None
        effect = ranked[0]
        share = np.sum(_left_by_fits(theta, q, effect, slopes) ** 2, axis=0) / spread
        if np.all(share <= RECOVERED):
            return slopes
        if len(slopes) == MAX_SLOPES or share.sum() > SLOPE_PROGRESS * before:
            return None
        before = share.sum()
        worst = np.argsort(-share)[:SLOPE_UNITS]  # the observations the slopes must explain
        left = _left_by_fits(theta, q[:, worst], effect[worst], slopes)
        best = _best_slope(theta, left, effect[worst], [scale, *slopes])
        if best is None:
            return None
        slopes.append(best)


def _left_by_fits(theta: np.ndarray, q: np.ndarray, effect: np.ndarray, slopes: list):
    """What each observation's least-squares fit on its effect and the ``slopes`` leaves
    of ``q - a^2`` (K, N) (:func:`_slope_fits`; on the effect alone: its centred value)."""
    if slopes:
        return _slope_fits(theta, q, effect, slopes)[2]
    a = theta[:, effect]
    a_c, target = a - a.mean(axis=0), q - a**2
    t_c = target - target.mean(axis=0)
    return t_c - a_c * (np.sum(a_c * t_c, axis=0) / np.sum(a_c**2, axis=0))


def _best_slope(theta: np.ndarray, left: np.ndarray, effect: np.ndarray, excluded: list):
    """The column of ``theta`` (K, P), not ``excluded``, whose centred terms ``c``, ``a_n c``
    and ``c^2`` (``a_n``: the observation's effect) explain the largest share of what its
    fits leave (``left`` (K, N)), summed over the observations (an observation's own
    effect counting nothing for it: where a slope's term is larger than its group's, the
    slope is taken for its effect, and the others' fits then name it); None where none
    explains any."""
    c = theta - theta.mean(axis=0)
    squares = theta**2 - (theta**2).mean(axis=0)
    score = np.zeros(theta.shape[1])
    for n in range(left.shape[1]):
        a = theta[:, effect[n] : effect[n] + 1]
        cross = a * theta - (a * theta).mean(axis=0)
        terms = np.stack([c, cross, squares], axis=0)  # (3, K, P)
        gram = np.einsum("ikp,jkp->pij", terms, terms)
        right = np.einsum("ikp,k->pi", terms, left[:, n])
        coef = np.linalg.pinv(gram, hermitian=True) @ right[:, :, None]
        with np.errstate(divide="ignore", invalid="ignore"):  # a unit fitted already: 0
            share = np.einsum("pi,pi->p", right, coef[:, :, 0]) / float(left[:, n] @ left[:, n])
        share[effect[n]] = 0.0  # its own effect: no slope of its own fit
        score += np.where(np.isfinite(share), share, 0.0)
    score[excluded] = -np.inf
    best = int(np.argmax(score))
    return best if np.isfinite(score[best]) and score[best] > 0 else None


def _likeliest_effects(theta: np.ndarray, q: np.ndarray, excluded: list, ranks: int = 1):
    """For each observation (``q`` (K, N)), the ``ranks`` columns of ``theta`` (K, P) not
    ``excluded`` in whose centred values and squares its ``q`` is best explained, the best
    first ((ranks, N); two products with every column at once, a block of observations at
    a time), or None where no column varies."""
    d = theta - theta.mean(axis=0)
    e = d**2 - (d**2).mean(axis=0)
    g11, g12, g22 = (d * d).sum(axis=0), (d * e).sum(axis=0), (e * e).sum(axis=0)
    det = g11 * g22 - g12**2
    usable = det > 1e-12 * np.maximum(g11 * g22, np.finfo(float).tiny)
    usable[excluded] = False
    if not usable.any():
        return None
    ranks = min(ranks, int(usable.sum()))
    effect = np.empty((ranks, q.shape[1]), dtype=int)
    step = max(1, (1 << 22) // max(1, theta.shape[1]))  # 32 MiB of products a block
    for start in range(0, q.shape[1], step):
        centred = q[:, start : start + step] - q[:, start : start + step].mean(axis=0)
        b1, b2 = d.T @ centred, e.T @ centred  # (P, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = g22[:, None] * b1**2 - 2 * g12[:, None] * b1 * b2 + g11[:, None] * b2**2
            explained = np.where(usable[:, None], explained / det[:, None], -np.inf)
        if ranks == 1:
            effect[0, start : start + step] = np.argmax(explained, axis=0)
        else:
            best = np.argpartition(-explained, ranks - 1, axis=0)[:ranks]
            order = np.argsort(-np.take_along_axis(explained, best, axis=0), axis=0)
            effect[:, start : start + step] = np.take_along_axis(best, order, axis=0)
    return effect


def _with_prior(theta, held: tuple, effect: np.ndarray, y: np.ndarray, x: np.ndarray):
    """The model of observations ``y`` with predictors ``x`` of effects ``effect`` (columns
    of ``theta``), ``held`` the residual sd's column and the slopes', with the two other
    quantities that are the effects' normal prior's mean and sd (:func:`_effects_conditional`);
    None where none are."""
    scale, slopes = held
    columns, groups = np.unique(effect, return_inverse=True)
    taken = {scale, *slopes, *columns.tolist()}
    others = [j for j in range(theta.shape[1]) if j not in taken]
    if columns.size < 2:
        return None
    positive = [j for j in others if np.all(theta[:, j] > 0)]  # once, not once a pair
    effects = theta[:, columns]
    centre = effects.mean(axis=1)
    for mu in others:
        for tau in positive:
            # mu's own conditional first: (S,) a pair, where the effects' is (S, G)
            if tau == mu or not _standard(
                _mu_conditional(theta[:, mu], theta[:, tau], centre, columns.size)
            ):
                continue
            phi = theta[:, [mu, tau, scale, *slopes]]
            if _effects_conditional(effects, phi, (y, x), groups):
                basis = np.zeros((theta.shape[1], phi.shape[1]))
                basis[[mu, tau, scale, *slopes], np.arange(phi.shape[1])] = 1.0
                origin = np.zeros(theta.shape[1])
                return HierarchyModel(origin, basis, groups, y, x, phi, 1, {}, {})
    return None


def _effects_conditional(effects, phi, data: tuple, groups) -> bool:
    """Whether the effects' draws (S, G) are those of a normal prior ``N(mu, tau)`` given the
    draws ``phi`` (S, 3 + B) of ``mu``, ``tau``, ``sigma`` and the slopes (BDA3 section
    5.4): standardised by their conditional mean and sd given those and their groups'
    observations (``data``: ``y`` (N,) and ``x`` (N, B)), and ``mu`` by its own given the
    effects and ``tau`` (``N(mean(alpha), tau^2 / G)`` under a flat or vague prior: where
    the groups' data hold their effects, only this one sees ``tau``), each :func:`_standard`."""
    y, x = data
    count, total, _ = residual_sums(group_stats(y, x, groups, effects.shape[1]), phi[:, 3:])
    mu, tau, sigma = (phi[:, k : k + 1] for k in range(3))
    precision = count / sigma**2 + 1 / tau**2
    mean = (total / sigma**2 + mu / tau**2) / precision
    z_effects = (effects - mean) * np.sqrt(precision)
    z_mu = _mu_conditional(mu[:, 0], tau[:, 0], effects.mean(axis=1), effects.shape[1])
    return _standard(z_effects) and _standard(z_mu)


def _mu_conditional(mu: np.ndarray, tau: np.ndarray, centre: np.ndarray, n_groups: int):
    """``mu`` (S,) standardised by its conditional given the effects' mean ``centre`` (S,)
    and ``tau`` (S,): ``N(centre, tau^2 / G)`` (:func:`_effects_conditional`)."""
    return (mu - centre) * np.sqrt(n_groups) / tau


def _standard(z: np.ndarray) -> bool:
    """Whether draws ``z`` are finite with a mean within :data:`CONDITIONAL_MEAN` of 0 and a
    variance within a factor :data:`CONDITIONAL_SCALE` of 1."""
    if not np.all(np.isfinite(z)):
        return False
    variance = float(np.mean(z**2) - np.mean(z) ** 2)
    return abs(float(np.mean(z))) < CONDITIONAL_MEAN and (
        1 / CONDITIONAL_SCALE < variance < CONDITIONAL_SCALE
    )


class GroupStats(NamedTuple):
    """Each group's count ``n`` (G,) and the sums of its observations' ``y``, ``y^2``
    (G,), ``x``, ``x y`` (G, B) and ``x x'`` (G, B, B): what a group's integrated
    likelihood reads at any draw of the slopes, whatever N."""

    n: np.ndarray
    sy: np.ndarray
    syy: np.ndarray
    sx: np.ndarray
    sxy: np.ndarray
    sxx: np.ndarray

    def of(self, which: np.ndarray) -> GroupStats:
        """The statistics of the groups ``which`` alone."""
        return GroupStats(*(part[which] for part in self))


def group_stats(y: np.ndarray, x: np.ndarray, groups: np.ndarray, size: int) -> GroupStats:
    """The :class:`GroupStats` of each of ``size`` groups, of the observations ``y`` (N,)
    with predictors ``x`` (N, B) in the groups ``groups`` (N,)."""

    def summed(weights=None) -> np.ndarray:
        return np.bincount(groups, weights, size)

    k = range(x.shape[1])
    sx = np.array([summed(x[:, i]) for i in k]).reshape(len(k), size).T
    sxy = np.array([summed(x[:, i] * y) for i in k]).reshape(len(k), size).T
    sxx = np.array([[summed(x[:, i] * x[:, j]) for j in k] for i in k])
    sxx = sxx.reshape(len(k), len(k), size).transpose(2, 0, 1)
    return GroupStats(summed().astype(float), summed(y), summed(y**2), sx, sxy, sxx)


def kept_stats(model: HierarchyModel, keep: np.ndarray) -> GroupStats:
    """The :class:`GroupStats` of each of ``model``'s groups, of its observations ``keep``
    (a mask)."""
    size = int(model.groups.max()) + 1
    return group_stats(model.y[keep], model.x[keep], model.groups[keep], size)


def residual_sums(stats: GroupStats, beta: np.ndarray) -> tuple:
    """Each group's count (G,) and the sum and sum of squares of its residuals ``y - x .
    beta``: (G,) without predictors, else (S, G) at each draw of the slopes ``beta`` (S,
    B)."""
    if not stats.sx.shape[1]:
        return stats.n, stats.sy, stats.syy
    total = stats.sy - beta @ stats.sx.T
    squares = stats.syy - 2 * beta @ stats.sxy.T
    squares = squares + np.einsum("si,gij,sj->sg", beta, stats.sxx, beta)
    return stats.n, total, squares


def _residuals(model: HierarchyModel, units: np.ndarray) -> np.ndarray:
    """The residuals ``y - x . beta`` of the ``units``: (k,) without predictors, else (S, k)
    at each draw of the slopes."""
    if not model.x.shape[1]:
        return model.y[units]
    return model.y[units] - model.phi[:, 3:] @ model.x[units].T


def _log_marginal(sums: tuple, phi: np.ndarray) -> np.ndarray:
    """Each group's log-likelihood with its effect integrated out (S, G) at the draws
    ``phi`` (S, 3) of ``mu``, ``tau``, ``sigma``, from its observations' count, sum and sum
    of squares ``sums`` (:func:`residual_sums`); 0 for a group without
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
