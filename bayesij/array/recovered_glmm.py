"""A generalised linear mixed model recovered from its draws: each group's log-likelihood
with its own effect integrated out, without the model's density.

In a normal, Poisson or logistic GLMM each observation's log-likelihood is its family's at
a linear predictor ``eta_n = x_n beta + c_n m a_g(n)``: affine in the global quantities and
in the group's effect ``a_g`` times a multiplier ``m`` (1 for a centred effect, the scale
``sigma_u`` of a non-centred ``a = z``, ``u = sigma_u z``). The draws hold ``l_n`` at each
draw, so the family, the counts and ``eta_n`` are recovered as the GLM recovery does
(:func:`bayesij.array.amip_logistic.recover_glm`; a normal observation's residual from
its log-likelihood, a rank-one quadratic, its sd a positive quantity or fixed in the
model), one group at a time over the global
quantities and that group's ``m a_g``, and checked at every draw. The effects' prior is
then recognised by Stein's identity, which the posterior draws satisfy for the model's own
prior: ``E[d/da_g log p(theta, a | y)] = 0`` and ``E[a_g d/da_g log p(theta, a | y)] = -1``
with ``d/da_g log p = d/da_g log p(y_g | theta, a_g) + d/da_g log p(a_g | theta)``; the
likelihood's part is known from the recovered predictor, so a candidate prior (``N(0, 1)``
for a non-centred effect; ``N(0, tau^2)`` or ``N(mu, tau^2)`` over the fit's scalars for a
centred one) that leaves these means beyond their Monte Carlo error is not the model's.
Each group's term ``log ∫ p(y_g | theta, a) p(a | theta) da`` is then integrated: in
closed form for the normal family, else by adaptive Gauss-Hermite quadrature about the
group's mode, found by Newton's method on the likelihood's own derivatives.

References
----------
.. [1] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of latent
   variable models: conditional versus marginal likelihoods. Psychometrika 84(3), 802-829.
.. [2] Hyvärinen, A. (2005). Estimation of non-normalized statistical models by score
   matching. Journal of Machine Learning Research 6, 695-709 (Stein's identity).
.. [3] Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature. Biometrika
   81(3), 624-629.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np
from scipy.special import expit, gammaln, log_expit

from bayesij.array.amip_logistic import RECOVERED, _affine_predictors, _whitened

__all__ = ["RecoveredGlmm", "effect_prior", "recover_glmm", "recovered_group_log_lik"]

#: The most draws on which each group's predictors are fitted (:func:`_central_rows`; the
#: Poisson recovery fits a quadratic in the group's ``R`` whitened quantities,
#: ``1 + R + R(R + 1)/2`` terms, on at most half of them).
FIT_DRAWS = 256

#: The largest difference, relative to ``1 + |l|``, between the recovered log-likelihood
#: and the draws' at any draw and observation: the recovery is exact to round-off.
CHECKED = 1e-6

#: The largest share of the top eigenvalue that the others of a normal residual's
#: square may have (a quadratic of rank one to round-off).
RANK_ONE = 1e-6

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)

#: Values (draws x observations) worked on at a time: 8 MB of float64.
CHUNK = 2**20

#: The most Newton steps to a group's mode before its quadrature (each at most two prior
#: sds long; the likelihoods are log-concave in the effect).
NEWTON_STEPS = 50

#: Batches of the draws for the Monte Carlo error of Stein's means.
BATCHES = 20

#: Monte Carlo errors within which both of Stein's means must lie for a prior to be the
#: model's (their z-scores are about standard normal for the model's own prior).
STEIN_Z = 4.0


class RecoveredGlmm(NamedTuple):
    """The recovered model (:func:`recover_glmm`): each observation's linear predictor is
    ``offsets + quantities @ coefficients.T + loading * multiplier * effect[:, codes]``.

    Attributes
    ----------
    family : {"poisson", "bernoulli", "normal"}
        ``"bernoulli"``: the predictor is the logit of the observed outcome,
        ``l = log expit(eta)``; ``"normal"``: the predictor is the residual ``y - mean``
        (its sign either way), ``l = log N(eta | 0, sd^2)``.
    offsets, coefficients : ndarray of shape (N,), (N, P)
        The predictors' constants and coefficients on the global quantities.
    loading : ndarray of shape (N,)
        ``d eta_n / d(m a_g(n))``: 1 for an intercept, a covariate for a slope.
    counts : ndarray of shape (N,) or None
        The Poisson counts.
    quantities, effect : ndarray of shape (S, P), (S, G)
        The global quantities' and the effects' draws.
    multiplier : ndarray of shape (S,)
        ``m`` at each draw.
    multiplied_by : int or None
        The column of ``quantities`` that ``m`` is (None: 1).
    codes : ndarray of int, shape (N,)
        Each observation's group.
    sd_column : int or None
        The column of ``quantities`` that is the normal family's residual sd.
    log_sd : ndarray of shape (N,) or None
        The normal family's log residual sd of each observation where it is fixed in the
        model (no column of ``quantities``): the predictor is then the residual over it.
    score : ndarray of shape (S, G) or None
        ``d/da_g log p(y_g | theta, a_g)`` at each draw, where the check at every draw
        (:func:`recover_glmm`) found it on the way.
    """

    family: str
    offsets: np.ndarray
    coefficients: np.ndarray
    loading: np.ndarray
    counts: np.ndarray | None
    quantities: np.ndarray
    effect: np.ndarray
    multiplier: np.ndarray
    multiplied_by: int | None
    codes: np.ndarray
    sd_column: int | None = None
    score: np.ndarray | None = None
    log_sd: np.ndarray | None = None

    def fixed(self, rows: slice) -> np.ndarray:
        """The predictors' part without the effects (K, N) at the draws ``rows``."""
        return self.offsets + self.quantities[rows] @ self.coefficients.T

    def eta(self, rows: slice) -> np.ndarray:
        """The predictors (K, N) at the draws ``rows``."""
        scaled = self.effect[rows] * self.multiplier[rows, None]
        return self.fixed(rows) + self.loading * scaled[:, self.codes]

    def log_lik(self, eta: np.ndarray, rows: slice) -> np.ndarray:
        """Each observation's log-likelihood at the predictors ``eta`` (K, N) of the draws
        ``rows``."""
        if self.family == "poisson":
            counts = np.asarray(self.counts)
            return counts * eta - np.exp(eta) - gammaln(counts + 1.0)
        if self.family == "normal":
            sd = self.sd(rows)
            return -0.5 * (eta / sd) ** 2 - self.log_sd_at(rows) - _HALF_LOG_2PI
        return log_expit(eta)

    def slope(self, eta: np.ndarray, rows: slice) -> np.ndarray:
        """``d l / d eta`` at the predictors ``eta`` (K, N) of the draws ``rows``."""
        if self.family == "poisson":
            return np.asarray(self.counts) - np.exp(eta)
        if self.family == "normal":
            return -eta / self.sd(rows) ** 2
        return expit(-eta)

    def curvature(self, eta: np.ndarray, rows: slice) -> np.ndarray:
        """``-d^2 l / d eta^2`` at the predictors ``eta`` (K, N) of the draws ``rows``."""
        if self.family == "poisson":
            return np.exp(eta)
        if self.family == "normal":
            return np.broadcast_to(1.0 / self.sd(rows) ** 2, eta.shape)
        return expit(eta) * expit(-eta)

    def sd(self, rows: slice) -> np.ndarray:
        """The normal family's residual sd (K, 1) at the draws ``rows``, on the
        predictor's scale (1 where the sd is fixed: the predictor is the residual over
        it)."""
        if self.sd_column is None:
            return np.ones((len(self.multiplier[rows]), 1))
        return self.quantities[rows, self.sd_column][:, None]

    def log_sd_at(self, rows: slice) -> np.ndarray:
        """The log residual sd (K, 1) or (N,) that the normal density divides by."""
        if self.log_sd is not None:
            return self.log_sd
        return np.log(self.sd(rows))

    def effect_score(self) -> np.ndarray:
        """``d/da_g log p(y_g | theta, a_g)`` at each draw (S, G)."""
        if self.score is not None:
            return self.score
        grouped = _Grouped.of(self)
        out = np.empty(self.effect.shape)
        for rows in draw_chunks(self.effect.shape[0], self.codes.size):
            out[rows] = grouped.score(grouped.eta(rows), rows)
        return out


class _Grouped(NamedTuple):
    """A :class:`RecoveredGlmm` with its observations sorted by group (stable): the
    groups' sums are then sums of runs of columns, with no gather of the observations."""

    model: RecoveredGlmm
    order: np.ndarray  # (N,): the model's observations, in the sorted model's order
    starts: np.ndarray  # (G,): each group's first position
    sizes: np.ndarray  # (G,): its observations

    @classmethod
    def of(cls, model: RecoveredGlmm) -> _Grouped:
        order = np.argsort(model.codes, kind="stable")
        codes = model.codes[order]
        sizes = np.bincount(codes, minlength=model.effect.shape[1])
        counts = None if model.counts is None else np.asarray(model.counts)[order]
        log_sd = None if model.log_sd is None else model.log_sd[order]
        sorted_model = model._replace(
            offsets=model.offsets[order],
            coefficients=model.coefficients[order],
            loading=model.loading[order],
            counts=counts,
            codes=codes,
            log_sd=log_sd,
        )
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        return cls(sorted_model, order, starts, sizes)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Each group's sum (K, G) of the sorted observations' ``values`` (K, N); 0 for a
        group without one."""
        observed = self.sizes > 0  # their starts strictly increasing, each below N
        if observed.all():
            return np.add.reduceat(values, self.starts, axis=1)
        out = np.zeros((values.shape[0], self.sizes.size))
        out[:, observed] = np.add.reduceat(values, self.starts[observed], axis=1)
        return out

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        """``per_group`` (K, G) at each sorted observation (K, N)."""
        return np.repeat(per_group, self.sizes, axis=1)

    def eta(self, rows: slice, effect: np.ndarray | None = None) -> np.ndarray:
        """The sorted predictors (K, N) at the draws ``rows``, at the effects ``effect``
        (K, G; default the draws')."""
        model = self.model
        if effect is None:
            effect = model.effect[rows] * model.multiplier[rows, None]
        return model.fixed(rows) + model.loading * self.spread(effect)

    def score(self, eta: np.ndarray, rows: slice) -> np.ndarray:
        """``d/da_g log p(y_g | theta, a_g)`` (K, G) at the sorted predictors ``eta``."""
        model = self.model
        return self.sums(model.slope(eta, rows) * model.loading) * model.multiplier[rows, None]


def draw_chunks(n_draws: int, n_obs: int) -> list[slice]:
    """Slices of the draws of about :data:`CHUNK` values of ``n_obs`` observations each."""
    step = max(1, CHUNK // max(n_obs, 1))
    return [slice(start, min(start + step, n_draws)) for start in range(0, n_draws, step)]


def recover_glmm(log_lik, codes, quantities, effect) -> RecoveredGlmm | None:
    """The normal, Poisson or logistic GLMM whose observations' log-likelihood ``log_lik``
    (S, N) is at the draws of the global ``quantities`` (S, P) and of each group's effect
    ``effect`` (S, G), the observations' groups ``codes`` (N,), or None where none is.

    Tried with the effect entering as it is (centred) and then multiplied by each global
    quantity whose draws are all positive (a non-centred effect's scale), in that order:
    the first under which every group's observations are one family's, with predictors
    affine in the global quantities and ``m a_g`` (fitted on :data:`FIT_DRAWS` draws),
    the log-likelihood recovered at every draw to :data:`CHECKED`, and every observation
    loading on its own group's effect.
    """
    log_lik = np.asarray(log_lik, dtype=float)
    quantities = np.asarray(quantities, dtype=float)
    effect = np.asarray(effect, dtype=float)
    codes = np.asarray(codes, dtype=int)
    n_draws = log_lik.shape[0]
    positive = [k for k in range(quantities.shape[1]) if np.all(quantities[:, k] > 0)]
    for k in [None, *positive]:
        multiplier = np.ones(n_draws) if k is None else quantities[:, k]
        found = _recovered_groups(log_lik, codes, quantities, effect * multiplier[:, None])
        if found is None:
            continue
        family, offsets, coefficients, loading, per_obs, sd_column = found
        counts = per_obs if family == "poisson" else None
        model = RecoveredGlmm(
            family,
            offsets,
            coefficients,
            loading,
            counts,
            quantities,
            effect,
            multiplier,
            k,
            codes,
            None if sd_column == "fixed" else sd_column,
            log_sd=per_obs if sd_column == "fixed" else None,
        )
        score = _checked_score(model, log_lik)
        if score is not None:
            return model._replace(score=score)
    return None


def _recovered_groups(log_lik, codes, quantities, scaled) -> tuple | None:
    """The family, the predictors' offsets (N,), coefficients (N, P) and loadings (N,),
    the counts (or a fixed sd's logarithms, N) and the normal family's sd column (or
    ``"fixed"``) of every group's observations on the
    global ``quantities`` and their group's column of ``scaled`` (the effects times the
    multiplier), or None where some group's are not one family's affine predictors, or
    do not load on their effect (:func:`_group_predictors`)."""
    n_obs = log_lik.shape[1]
    on_theta = np.empty((n_obs, quantities.shape[1] + 2))  # offset, coefficients, loading
    counts, chosen = np.zeros(n_obs), dict[str, object]()
    for g in range(scaled.shape[1]):
        members = np.flatnonzero(codes == g)
        if not members.size:
            continue
        whitened = _whitened(np.column_stack([quantities, scaled[:, g]]))
        if whitened is None:
            return None
        mean, basis, u = whitened
        rows = _central_rows(u)
        found = _group_predictors(u[rows], log_lik[np.ix_(rows, members)], quantities[rows], chosen)
        if found is None:
            return None
        beta = np.linalg.pinv(basis.T) @ found[0][1:]  # (P + 1, n): on the draws
        on_theta[members] = np.vstack([found[0][0] - mean @ beta, beta]).T
        if found[1] is not None:
            counts[members] = found[1]
    if not chosen or np.any(np.abs(on_theta[:, -1]) < 1e-8):
        return None  # no group, or an observation its group's effect does not move
    offsets, coefficients, loading = on_theta[:, 0], on_theta[:, 1:-1], on_theta[:, -1]
    family = chosen["family"]
    kept = counts if family == "poisson" or chosen.get("sd") == "fixed" else None
    return family, offsets, coefficients, loading, kept, chosen.get("sd")


def _group_predictors(u, values, quantities, chosen: dict) -> tuple | None:
    """One group's predictors on ``[1, u]`` (R + 1, n) and counts (or None) from its
    observations' log-likelihood ``values`` (K, n) at the whitened draws ``u`` (K, R):
    a logistic or Poisson regression's
    (:func:`~bayesij.array.amip_logistic._affine_predictors`), else a normal one's whose
    sd is a positive column of ``quantities`` (K, P) (:func:`_normal_residuals`); the
    family and sd found at the first group are kept in ``chosen`` and asked of every
    other."""
    family = chosen.get("family")
    if family in (None, "poisson", "bernoulli"):
        found = _affine_predictors(u, iter([values]))
        if found is not None:
            named = "bernoulli" if found[1] is None else "poisson"
            return found if chosen.setdefault("family", named) == named else None
        if family is not None:
            return None
    columns = [chosen["sd"]] if "sd" in chosen else [*range(quantities.shape[1]), "fixed"]
    for k in columns:
        if k == "fixed":
            fixed = _fixed_sd_residuals(u, values)
            if fixed is not None:
                chosen.update(family="normal", sd=k)
            return fixed
        if not np.all(quantities[:, k] > 0):
            continue
        residuals = _normal_residuals(u, values, quantities[:, k])
        if residuals is not None:
            chosen.update(family="normal", sd=k)
            return residuals, None
    return None


def _quadratic_form(u: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """The symmetric matrices (n, R + 1, R + 1) of the quadratics in ``[1, u]`` that the
    values ``q`` (K, n) are at the whitened draws ``u`` (K, R), fitted by least squares;
    None where some ``q`` is not such a quadratic to
    :data:`~bayesij.array.amip_logistic.RECOVERED` of its variance, or the draws are too
    few for its terms."""
    n_draws, r = u.shape
    design = np.column_stack([np.ones(n_draws), u])
    pairs = [(i, j) for i in range(r + 1) for j in range(i, r + 1)]
    if len(pairs) > n_draws // 2:
        return None
    features = np.column_stack([design[:, i] * design[:, j] for i, j in pairs])
    coefficients, *_ = np.linalg.lstsq(features, q, rcond=None)
    left = q - features @ coefficients
    spread = q - q.mean(axis=0)
    if np.any(np.sum(left**2, axis=0) > RECOVERED * np.sum(spread**2, axis=0)):
        return None
    matrix = np.zeros((q.shape[1], r + 1, r + 1))
    for (i, j), c in zip(pairs, coefficients, strict=True):
        matrix[:, i, j] += c if i == j else c / 2.0
        if i != j:
            matrix[:, j, i] += c / 2.0
    return matrix


def _normal_residuals(u: np.ndarray, values: np.ndarray, sd: np.ndarray) -> np.ndarray | None:
    """The residuals ``y - mean`` (R + 1, n) on ``[1, u]`` of normal observations of sd
    ``sd`` (K,) whose log-likelihood at the whitened draws ``u`` (K, R) is ``values``
    (K, n), each up to its sign: ``q = -2 sd^2 (l + log(2 pi)/2 + log sd)`` is the
    residual's square, a quadratic in ``[1, u]`` of rank one, whose matrix's leading
    eigenvector is the residual's coefficients; None where some ``q`` is not such a
    square to :data:`~bayesij.array.amip_logistic.RECOVERED` of its variance."""
    q = -2.0 * sd[:, None] ** 2 * (values + np.log(sd)[:, None] + _HALF_LOG_2PI)
    matrix = _quadratic_form(u, q)
    if matrix is None:
        return None
    eigenvalues, vectors = np.linalg.eigh(matrix)
    top = eigenvalues[:, -1]
    if np.any(top <= 0) or np.any(np.abs(eigenvalues[:, :-1]) > RANK_ONE * top[:, None]):
        return None
    return (np.sqrt(top)[:, None] * vectors[:, :, -1]).T


def _fixed_sd_residuals(u: np.ndarray, values: np.ndarray) -> tuple | None:
    """The residuals over their sd (R + 1, n) on ``[1, u]`` and the log sds (n,) of normal
    observations whose sd is fixed in the model, from their log-likelihood ``values``
    (K, n) at the whitened draws ``u`` (K, R): ``q = -2 (l + log(2 pi)/2)`` is
    ``(v . [1, u])^2 + 2 log sd``, a quadratic whose ``u`` block is ``v_u v_u^T`` (rank
    one), whose cross terms are ``v_0 v_u`` and whose constant is ``v_0^2 + 2 log sd``;
    None where some ``q`` is no quadratic with such a ``u`` block (the check at every draw
    refuses the rest)."""
    matrix = _quadratic_form(u, -2.0 * (values + _HALF_LOG_2PI))
    if matrix is None:
        return None
    eigenvalues, vectors = np.linalg.eigh(matrix[:, 1:, 1:])
    top = eigenvalues[:, -1]
    if np.any(top <= 0) or np.any(np.abs(eigenvalues[:, :-1]) > RANK_ONE * top[:, None]):
        return None
    slopes = np.sqrt(top)[:, None] * vectors[:, :, -1]  # (n, R): v_u, up to its sign
    first = np.einsum("nr,nr->n", matrix[:, 0, 1:], slopes) / top  # from v_0 v_u
    return np.column_stack([first, slopes]).T, 0.5 * (matrix[:, 0, 0] - first**2)


def _central_rows(u: np.ndarray) -> np.ndarray:
    """The draws (in order) nearest the centre of the whitened draws ``u`` (S, R), as many
    as four times the terms of a quadratic in ``R`` (at least 64, at most
    :data:`FIT_DRAWS`): where the Poisson recovery's quadratic start is closest to its
    log-likelihood. With a group's effect spread as widely as its prior (sd 1 on the
    predictor's scale), 36 of 200 groups' predictors were not recovered on evenly spaced
    draws and none on the central ones, in half the time."""
    n_draws, r = u.shape
    wanted = min(n_draws, FIT_DRAWS, max(64, 4 * (1 + r + r * (r + 1) // 2)))
    return np.sort(np.argpartition(np.einsum("sr,sr->s", u, u), wanted - 1)[:wanted])


def _checked_score(model: RecoveredGlmm, log_lik: np.ndarray) -> np.ndarray | None:
    """The effects' score (S, G) (:meth:`RecoveredGlmm.effect_score`) where ``model``
    gives ``log_lik`` (S, N) at every draw to :data:`CHECKED`, else None: one pass over
    the draws for both, the draws compared where they lie (a compiled count)."""
    from bayesij.array.kernels.values import count_apart  # compiled kernels: numba

    grouped = _Grouped.of(model)
    score = np.empty(model.effect.shape)
    for rows in draw_chunks(*log_lik.shape):
        eta = grouped.eta(rows)
        recovered = grouped.model.log_lik(eta, rows)
        if count_apart(recovered, log_lik[rows], grouped.order, CHECKED):
            return None
        score[rows] = grouped.score(eta, rows)
    return score


def effect_prior(model: RecoveredGlmm, quantities) -> tuple | None:
    """The effects' normal prior ``(mean (S,), sd (S,), words)`` that Stein's identity
    recognises at the draws (:data:`STEIN_Z`): ``N(0, 1)`` for a non-centred effect;
    ``N(0, q_k^2)``, else ``N(q_j, q_k^2)``, over the positive global quantities ``q_k``
    and any other ``q_j``, for a centred one (``words``: the columns, as ``(j, k)``, None
    for 0 and 1); None where none is, or where more than one of a kind is."""
    quantities = np.asarray(quantities, dtype=float)
    score = model.effect_score()
    n_draws = score.shape[0]
    kinds: list[list[tuple[int | None, int | None]]]
    if model.multiplied_by is not None:
        kinds = [[(None, None)]]
    else:
        columns = range(quantities.shape[1])
        positive = [k for k in columns if np.all(quantities[:, k] > 0)]
        kinds = [
            [(None, k) for k in positive],
            [(j, k) for k in positive for j in columns if j != k],
        ]
    for kind in kinds:
        passed = [
            c for c in kind if _stein_holds(model.effect, score, *_moments(c, quantities, n_draws))
        ]
        if len(passed) == 1:
            j, k = passed[0]
            return (*_moments(passed[0], quantities, n_draws), (j, k))
        if passed:
            return None
    return None


def _moments(candidate: tuple, quantities: np.ndarray, n_draws: int) -> tuple:
    j, k = candidate
    mean = np.zeros(n_draws) if j is None else quantities[:, j]
    sd = np.ones(n_draws) if k is None else quantities[:, k]
    return mean, sd


def _stein_holds(effect, score, mean, sd) -> bool:
    """Whether both of Stein's means over the groups (per draw, summed) are within
    :data:`STEIN_Z` batch-means Monte Carlo errors of 0 for the prior ``N(mean, sd^2)``."""
    centred = effect - mean[:, None]
    full = score - centred / sd[:, None] ** 2
    first = full.sum(axis=1)
    second = (centred * full + 1.0).sum(axis=1)
    return all(abs(_z_score(values)) <= STEIN_Z for values in (first, second))


def _z_score(values: np.ndarray) -> float:
    """The mean of ``values`` (S,) over its batch-means standard error."""
    batches = np.array([b.mean() for b in np.array_split(values, BATCHES)])
    error = batches.std(ddof=1) / np.sqrt(BATCHES)
    if error == 0:
        return 0.0 if batches.mean() == 0 else np.inf
    return float(values.mean() / error)


def recovered_group_log_lik(model: RecoveredGlmm, mean, sd, n_nodes: int = 16) -> np.ndarray:
    """Each group's log-likelihood with its effect integrated out of the recovered
    ``model`` under the prior ``N(mean, sd^2)`` (each (S,)), at each draw (S, G):
    ``log ∫ prod_{n in g} p(y_n | eta_n + c_n m (a - a_g)) N(a | mean, sd^2) da``: in
    closed form for the normal family (:func:`_normal_integral`), else by adaptive
    Gauss-Hermite quadrature about each group's mode, found by Newton's method on the
    recovered likelihood's own derivatives, a chunk of draws at a time
    (:func:`_quadrature`; the quadrature of
    :func:`bayesij.array.hierarchy.integrate_effects`, whose Newton steps on finite
    differences took 51 iterations on a normal hierarchy of 30 groups of 100)."""
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    if model.family == "normal":
        return _normal_integral(model, mean, sd)
    grouped = _Grouped.of(model)
    n_draws, n_groups = model.effect.shape
    out = np.empty((n_draws, n_groups))
    for rows in draw_chunks(n_draws, model.codes.size):
        m = model.multiplier[rows, None]
        base = grouped.eta(rows, np.broadcast_to(m * mean[rows, None], (m.size, n_groups)))
        out[rows] = _quadrature(
            grouped, rows, (base, grouped.model.loading * m), sd[rows, None], n_nodes
        )
    return out


def _normal_integral(model: RecoveredGlmm, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """``log ∫ prod_n N(r_n + c_n d | 0, sigma^2) N(d | 0, v) dd`` of each group (S, G),
    ``r`` the residuals at the prior's mean, ``c = loading * m``, ``v = sd^2``:
    ``log N(r | 0, sigma^2 I + v c c^T)`` by Sherman-Morrison. The residuals are affine,
    ``r_n = x_n . w``, in ``w = (1, quantities, m mean)`` with ``x_n = (offset_n,
    coefficients_n, loading_n)`` and ``c_n = m x_n . e`` (``e`` the last unit vector), so
    the groups' sums of ``c r`` and ``r^2`` are ``m (R e) . (R w)`` and ``|R w|^2`` with
    ``R`` the triangular factor of the group's rows (:func:`_group_roots`): no work per
    observation and draw, and no sum of large products that cancel."""
    grouped = _Grouped.of(model)
    n_groups, sizes, ordered = grouped.sizes.size, grouped.sizes, grouped.model
    x = np.column_stack([ordered.offsets, ordered.coefficients, ordered.loading])  # (N, Q)
    roots = _group_roots(x, sizes)
    on_loading = roots[:, :, -1]  # R e for the residuals' loading column e: (G, Q)
    loading_sq = np.sum(on_loading**2, axis=1)  # the sums of loading^2
    out = np.empty(model.effect.shape)
    for rows in draw_chunks(model.effect.shape[0], n_groups * x.shape[1] ** 2):
        m = model.multiplier[rows]
        w = np.column_stack([np.ones(m.size), model.quantities[rows], m * mean[rows]])
        at = np.einsum("gqr,kr->kgq", roots, w)  # R w: the residuals' sums of products
        rr = np.sum(at**2, axis=2)
        cr = m[:, None] * np.einsum("kgq,gq->kg", at, on_loading)
        cc = m[:, None] ** 2 * loading_sq
        var = model.sd(rows) ** 2  # (K, 1)
        v = sd[rows, None] ** 2
        joint = var + v * cc
        quadratic = (rr - v * cr**2 / joint) / var
        out[rows] = -0.5 * (sizes * np.log(2 * np.pi * var) + np.log(joint / var) + quadratic)
    if ordered.log_sd is not None:  # the residuals over a fixed sd: its Jacobian
        out -= grouped.sums(ordered.log_sd[None, :])
    return out


def _group_roots(x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each group's triangular factor ``R`` (G, Q, Q), ``R^T R`` the Gram matrix of its
    rows of ``x`` (N, Q; the groups' rows adjacent, ``sizes`` (G,) of them): the QR
    decomposition of its rows, so that ``|R w|^2`` is their sum of squares at ``w`` without
    squaring the rows (a residual of 1 that is ``1e5 - 1e5`` loses 1e-11 of itself, where
    the Gram matrix's quadratic form lost 1e-5)."""
    roots = np.zeros((sizes.size, x.shape[1], x.shape[1]))
    for g, rows in enumerate(np.split(x, np.cumsum(sizes)[:-1])):
        if rows.shape[0]:
            root = cast(np.ndarray, np.linalg.qr(rows, mode="r"))  # R alone: an array
            roots[g, : root.shape[0]] = root
    return roots


def _quadrature(grouped: _Grouped, rows: slice, predictor: tuple, scale, n_nodes: int):
    """Adaptive Gauss-Hermite quadrature (K, G) of each group's effect ``d`` (the effect
    less the prior's mean), the sorted predictors ``base + shift d``: Newton's method to
    each group's mode on the likelihood's gradient and curvature, each step at most 2
    ``scale`` long, then ``n_nodes`` nodes scaled by the curvature there (Liu and Pierce
    1994)."""
    base, shift = predictor
    model, sums, spread = grouped.model, grouped.sums, grouped.spread

    def at(d: np.ndarray) -> tuple:
        eta = base + shift * spread(d)
        gradient = sums(shift * model.slope(eta, rows)) - d / scale**2
        curvature = sums(shift**2 * model.curvature(eta, rows))
        return gradient, curvature + 1.0 / scale**2

    d = np.zeros((base.shape[0], grouped.sizes.size))
    for _ in range(NEWTON_STEPS):
        gradient, precision = at(d)
        step = np.clip(gradient / precision, -2.0 * scale, 2.0 * scale)
        d = d + step
        if np.all(np.abs(step) <= 1e-10 * scale):
            break
    precision = at(d)[1]
    root = 1.0 / np.sqrt(precision)  # (K, G)
    nodes, weights = np.polynomial.hermite.hermgauss(n_nodes)
    normaliser = -np.log(np.sqrt(2 * np.pi) * scale)
    total = None
    for x, w in zip(nodes, weights, strict=True):
        a = d + np.sqrt(2.0) * root * x
        values = sums(model.log_lik(base + shift * spread(a), rows))
        term = values + normaliser - 0.5 * (a / scale) ** 2 + x**2 + np.log(w)
        total = term if total is None else np.logaddexp(total, term)
    return total + np.log(root) + 0.5 * np.log(2.0)
