"""A set's removal from a logistic regression, worked out from the draws: each
observation's log-likelihood recovered exactly as a function of the parameters, the prior
estimated from the draws, and the posterior without the set found by Newton's method.

A Bernoulli observation with a logit link has ``l_n = log expit(eta_n)`` with ``eta_n``
(the sign of ``y_n`` absorbed) affine in the coefficients, so ``logit(exp(l_n))`` is an
exact affine function of the parameters over the draws. Where a least-squares fit on the
draws leaves less than :data:`RECOVERED` of its variance for every observation, the
log-likelihood is known at any parameter value, and the posterior without a set ``S`` is
``p(theta) prod_{n not in S} expit(eta_n(theta))``, ``p`` the prior.

The prior is not in the draws, and is taken as normal (flat included). Stein's identity
``E[grad log p(theta | y) (theta - mean)'] = -I`` over the posterior, in coordinates where
the draws have unit covariance, gives its precision ``P = E[g u'] + I`` with ``g`` the
log-likelihood's gradient there [1]_. Its error is the Monte Carlo error of the draws'
covariance: on a wells-like logistic regression (flat prior, 4000 independent-sampler
draws) ``P``'s eigenvalues were -0.08 to 0.05 in those units, and the spread of ``P`` over
batches of the draws matches that. The removal's metric is worked out at that estimate,
and its sensitivity toward each batch's estimate gives its standard error through the prior
(batch means [3]_ and the delta method: only the prior's error along the directions that move
the quantity counts, and for a change, only what the prior does to it beyond what it does
to the full data's metric); the answer uses the change give or take
:data:`~bayesij.array.amip.MC_MARGIN` of those, the margin of every other Monte Carlo
error of the searches (it was 2: on the RAND experiment's normal regression, N = 20,190,
one set of 4000 exact draws put the prior 2.6 errors off along the move of halving the
residual sd, and a set of 1158 said to halve it fell short on exact refit; over 12 sets
of draws the errors' spread was 0.95 of the batch-means estimate). On the wells-like
regressions (N = 400 and 3020) that band, at two errors, was a third to a half as wide
as the one it replaced (the prior's precision give or take two standard errors in
every direction at once), and the exact refits confirmed every answer it decided.

The moments without the set are the Laplace approximation's (the mode and the inverse
Hessian there): for a logistic regression with N in the hundreds or more the posterior
mean and mode differ by a small fraction of a posterior sd, and an importance-sampling
check at the chosen set (:func:`importance_sample`, with its Pareto k-hat) widens the band
by any difference it finds.

References
----------
.. [1] Hyvärinen, A. (2005). Estimation of non-normalized statistical models by score
   matching. Journal of Machine Learning Research 6, 695-709 (Stein's identity for the
   parameters of a density from its score).
.. [2] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric: when can dropping a little data make a big difference?
   arXiv:2011.14999.
.. [3] Flegal, J. M. and Jones, G. L. (2010). Batch means and spectral variance
   estimators in Markov chain Monte Carlo. Annals of Statistics 38, 1034-1070 (the
   prior's standard error by batches of the draws).
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
from scipy.special import gammaincinv

from bayesij.array.amip import MC_MARGIN, far_short, mean_mcse, metric_mcse
from bayesij.array.amip_counts import poisson_coefficients
from bayesij.array.newton import laplace_mode
from bayesij.array.numeric import map_ordered, obs_chunks, top_positive
from bayesij.array.psis import khat_tail_length, pareto_k_threshold, pareto_khat_columns

__all__ = [
    "Logistic",
    "LogisticModel",
    "Poisson",
    "LOGISTIC",
    "family_of",
    "Removal",
    "recover_glm",
    "predictors_affine",
    "row_pieces",
    "TileFits",
    "predictor_fits",
    "Affine",
    "affine_in",
    "whitened_draws",
    "removal",
    "importance_sample",
    "sampled_moments",
    "smallest_removal",
    "LaplacePrefixes",
    "checked_removal",
    "smallest_settled",
    "laplace_far_short",
    "SmallestRemoval",
    "model_ranking",
    "model_low",
    "model_greedy",
]

#: The share of ``logit(exp(l_n))``'s variance over the draws that an affine function of the
#: parameters may leave for the observation to count as a logistic one: round-off is
#: 1e-28 on a logistic regression; a normal or Poisson observation leaves 1e-3 or more.
RECOVERED = 1e-18

#: Draws (evenly spaced) on which each observation's logit is fitted and checked.
RECOVERY_DRAWS = 256

#: Batches of the draws for the prior's standard error (of 100 draws each of 4000: with
#: 20, the variance's 19 degrees of freedom left the error half its spread over
#: independent sets of draws on one wells-like fit).
PRIOR_BATCHES = 40

#: Importance draws of the check at the chosen set.
CHECK_DRAWS = 2000


@dataclass(frozen=True)
class Logistic:
    """A logistic regression's observations, ``l = log expit(eta)`` (the outcome folded
    into the sign of ``eta``): the terms Newton's method, the first order, the removal's
    band, the gradient and the importance-sampling check take of their family."""

    name: ClassVar[str] = "logistic"

    def kept(self, keep: np.ndarray) -> Logistic:
        """The family of the observations ``keep`` (a mask) of these."""
        return self

    def derivatives(self, eta: np.ndarray) -> tuple:
        """``dl/deta`` and ``-d2l/deta2`` (n,): ``expit(-eta)`` and ``expit(eta)
        expit(-eta)``."""
        p = _expit(eta)
        missed = 1.0 - p  # expit(-eta) to 1e-16 absolute
        return missed, p * missed

    def third(self, eta: np.ndarray) -> np.ndarray:
        """``-d3l/deta3`` (n,)."""
        p = _expit(eta)
        return p * (1 - p) * (1 - 2 * p)

    def log_lik(self, eta: np.ndarray) -> float:
        """The observations' log-likelihood summed at one point, ``eta`` (n,), in double
        precision."""
        return float(np.sum(_log_expit(np.array(eta, dtype=float))))

    def score(self, eta: np.ndarray, chunk: slice) -> np.ndarray:
        """``dl/deta`` of the observations ``chunk`` (S, n), in ``eta``'s precision."""
        return _expit(-eta)

    def summed(self, eta: np.ndarray, chunk: slice) -> np.ndarray:
        """The observations ``chunk``'s log-likelihood summed at each draw (S,): in single
        precision, summed in double."""
        return _log_expit(eta.astype(np.float32)).sum(axis=1, dtype=float)


@dataclass(frozen=True, eq=False)
class Poisson:
    """A Poisson regression's observations, ``l = y eta - exp(eta)`` up to a constant, of
    ``counts`` ``y`` (n,): the terms of :class:`Logistic`."""

    counts: np.ndarray
    name: ClassVar[str] = "Poisson"

    def kept(self, keep: np.ndarray) -> Poisson:
        """The family of the observations ``keep`` (a mask) of these."""
        return Poisson(self.counts[keep])

    def derivatives(self, eta: np.ndarray) -> tuple:
        """``y - exp(eta)`` and ``exp(eta)`` (n,)."""
        with np.errstate(over="ignore"):
            mean = np.exp(eta)
        return self.counts - mean, mean

    def third(self, eta: np.ndarray) -> np.ndarray:
        """``exp(eta)`` (n,)."""
        return np.exp(eta)

    def log_lik(self, eta: np.ndarray) -> float:
        """The observations' log-likelihood summed at one point, ``eta`` (n,), up to a
        constant, in double precision."""
        with np.errstate(over="ignore"):
            return float(eta @ self.counts - np.exp(eta).sum())

    def score(self, eta: np.ndarray, chunk: slice) -> np.ndarray:
        """``y - exp(eta)`` of the observations ``chunk`` (S, n), in ``eta``'s precision."""
        return self.counts[chunk].astype(eta.dtype) - np.exp(eta)

    def summed(self, eta: np.ndarray, chunk: slice) -> np.ndarray:
        """The observations ``chunk``'s log-likelihood summed at each draw (S,), up to a
        constant, in double precision."""
        return (eta @ self.counts[chunk]) - np.exp(eta).sum(axis=1)


#: The logistic family (it holds nothing of its observations).
LOGISTIC = Logistic()


def family_of(counts: np.ndarray | None) -> Logistic | Poisson:
    """The family of recovered observations: :data:`LOGISTIC` without ``counts``, else
    :class:`Poisson` of them (:attr:`LogisticModel.counts`)."""
    return LOGISTIC if counts is None else Poisson(counts)


class LogisticModel(NamedTuple):
    """A logistic regression recovered from its draws, in whitened parameters ``u``
    (``theta = mean + basis u``, the draws' covariance ``I`` in ``u``).

    Attributes
    ----------
    mean : ndarray of shape (P,)
    basis : ndarray of shape (P, R)
    offsets : ndarray of shape (N,)
        ``eta_n(u) = offsets[n] + slopes[:, n] . u``.
    slopes : ndarray of shape (R, N)
    precision : ndarray of shape (R, R)
        The prior's estimated precision in ``u``.
    pull : ndarray of shape (R,)
        The prior's gradient at ``u = 0``.
    batches : ndarray of shape (B, R, R)
        Stein's estimate of the precision on each of :data:`PRIOR_BATCHES` batches of the
        draws (B = 0 where the prior is known).
    counts : ndarray of shape (N,), optional
        A Poisson regression's counts (``l_n = y_n eta_n - exp(eta_n)`` up to a
        constant); None for a logistic regression (``l_n = log expit(eta_n)``).
    samples : dict, optional
        The latest importance samples drawn in this model, by set and seed, each with
        the fields it was drawn with (:func:`remembered`).
    modes : dict, optional
        The Laplace approximation of each set's removal worked out in this model, by set,
        each with the fields it was worked out with (:func:`_laplace_without`).
    """

    mean: np.ndarray
    basis: np.ndarray
    offsets: np.ndarray
    slopes: np.ndarray
    precision: np.ndarray
    pull: np.ndarray
    batches: np.ndarray
    counts: np.ndarray | None = None
    samples: dict | None = None
    modes: dict | None = None

    @property
    def log_quantities(self) -> bool:
        """Whether its removals take a positive quantity whose logarithm is affine
        (:func:`affine_in`): false, they are Laplace approximations of ``c . u``."""
        return False

    @property
    def decided_by(self) -> str:
        """How an answer decided in this model was worked out (``AmipResult.decided_by``)."""
        return (
            f"Newton's method in the {self.family.name} regression recovered from the draws (each "
            "observation's log-likelihood recovered exactly, the prior from the draws or the "
            "gradient; checked by importance sampling)"
        )

    @property
    def family(self) -> Logistic | Poisson:
        """The observations' family (:class:`Logistic` or :class:`Poisson`)."""
        return family_of(self.counts)

    def parameters(self, theta: np.ndarray) -> np.ndarray:
        """The draws ``theta`` the model was recovered from, as its parameters."""
        return theta

    def removal(self, dropped, quantity: Affine, sign: int, z: float):
        """:func:`removal` in this model."""
        return removal(self, dropped, quantity, sign, z)

    def importance_sample(self, dropped, seed: int = 0):
        """:func:`importance_sample` in this model (:func:`remembered`)."""
        return remembered(self, dropped, seed, importance_sample)

    def ranking(self, quantity: Affine, goal, k_max: int) -> np.ndarray:
        """:func:`model_ranking` in this model."""
        return model_ranking(self, quantity, goal, k_max)

    def first_order(self, quantity: Affine, goal, dropped=()) -> np.ndarray:
        """:func:`first_order` in this model."""
        return first_order(self, quantity, goal, dropped)


class Removal(NamedTuple):
    """The metric ``mean + sign z sd`` of a parameter without a set (:func:`removal`).

    Attributes
    ----------
    mid : float
        At the prior's estimate.
    moves : ndarray of shape (B,)
        Its change per unit move of the prior's precision toward each batch's estimate
        (empty where the prior is known).
    """

    mid: float
    moves: np.ndarray

    @property
    def band(self) -> tuple[float, float]:
        """``mid`` give or take :data:`~bayesij.array.amip.MC_MARGIN` standard errors
        through the prior."""
        half = _prior_error(self.moves)
        return self.mid - half, self.mid + half

    def change_from(self, before: Removal) -> tuple[float, float, float]:
        """The change from ``before`` (the same metric with another set removed, often
        none): its low end, value and high end, the prior's error common to both counted
        once (the batches' moves differenced)."""
        change = self.mid - before.mid
        half = _prior_error(self.moves - before.moves)
        return change - half, change, change + half


def _prior_error(moves: np.ndarray) -> float:
    """:data:`~bayesij.array.amip.MC_MARGIN` batch-means standard errors of a metric
    whose moves toward the batches' estimates of the prior are ``moves`` (B,), each error
    its upper 95 % confidence bound (the batches' variance has only B - 1 degrees of freedom: on one
    wells-like fit it came out at half the spread over independent sets of draws); 0
    without batches."""
    if moves.size < 2:
        return 0.0
    return float(
        MC_MARGIN * _variance_bound(moves.size) * np.std(moves, ddof=1) / np.sqrt(moves.size)
    )


@functools.cache
def _variance_bound(n_batches: int) -> float:
    """The upper 95 % confidence bound of a standard error from ``n_batches`` batch means,
    over the estimate (1.23 for 40 batches)."""
    dof = n_batches - 1
    return float(np.sqrt(dof / (2 * gammaincinv(dof / 2, 0.05))))  # scipy.stats' chi2.ppf


def recover_glm(theta: np.ndarray, log_lik, score: np.ndarray | None = None, fitted=None):
    """The :class:`LogisticModel` whose observations' log-likelihood ``log_lik`` (S, N) are at
    the draws ``theta`` (S, P), or None where some observation is not one (a value not
    finite or not below 0, or ``logit(exp(l))`` not affine in the parameters to
    :data:`RECOVERED`), or where some direction of the parameters moves no observation's
    logit (a hierarchy's scale, or a quantity that is a nonlinear function of others: the
    prior in them is then not a fixed normal one), fitted and checked on
    :data:`RECOVERY_DRAWS` draws (an affine function is fixed by ``R + 1`` of them); a
    chunk of observations at a time, stopping at the first that fails. With ``score``
    (S, P), the log posterior's gradient in ``theta`` at the draws, the prior's gradient
    is the score less the log-likelihood's: where that is affine in the parameters (a
    normal or flat prior) to round-off, the prior is known (no ``batches``); otherwise, and
    without a score, Stein's estimate over every draw.

    ``log_lik`` may also be a function that, given the draws' rows (K,), yields those
    rows' values (K, n) of consecutive blocks of observations, in order: a
    log-likelihood read a block at a time, only those rows of each kept. ``fitted``: what
    the predictors' fit gave where the pieces were offered to it as a pass read them
    (:meth:`~bayesij.array.amip_normal.RegressionFeed.glm`, False where it failed);
    ``log_lik`` is then not read."""
    whitened = _whitened(theta)
    if whitened is None:
        return None
    mean, basis, u = whitened
    rows = _recovery_rows(theta.shape[0])
    if fitted is None:
        fitted = _affine_predictors(u[rows], _pieces(log_lik, rows))
    found = fitted or None
    if found is None:
        return None
    coefficients, counts = found
    offsets, slopes = coefficients[0], coefficients[1:]
    strengths = np.linalg.svd(slopes, compute_uv=False)
    if strengths[-1] <= 1e-8 * strengths[0]:
        return None  # a direction no observation holds: a hierarchy's scale, a transform
    known, family = None, family_of(counts)
    if score is not None:
        at = _log_lik_gradient(u[rows], (offsets, slopes, family), float)
        known = _known_prior(u[rows], at, (score @ basis)[rows])
    if known is not None:
        precision, pull, batches = *known, np.zeros((0, u.shape[1], u.shape[1]))
    else:
        gradient = _log_lik_gradient(u, (offsets, slopes, family))
        precision, batches = _prior_precision(u, gradient)
        pull = -gradient.mean(axis=0)  # E[grad log posterior] = 0 at the draws' mean u = 0
    return LogisticModel(
        mean, basis, offsets, slopes, precision, pull, batches, counts, samples={}, modes={}
    )


#: A recovered model's fields that remember what was worked out in it, not what it is.
MEMORY = ("samples", "modes")

#: How many importance samples a recovered model remembers (:func:`remembered`; one of
#: the normal model's 8000 draws of ten parameters takes 0.7 MB). On the audit benchmarks
#: at N = 10^4 (t(4), normal, logistic) 16 drew 22, 21 and 24 samples, 64 drew 21, 20
#: and 24, none remembered 40, 38 and 26.
REMEMBERED = 16


def remembered(model, dropped, seed: int, sample):
    """``sample(model, dropped, seed)``, an importance sample of the removal of
    ``dropped`` (the units in that order), drawn once per model: the latest
    :data:`REMEMBERED` are kept in ``model.samples`` (none where it is None), each with the
    model's other fields, so that a model made from it by ``_replace`` (which shares the
    dict) draws its own. The check of a set's smallest prefix, the low end's spread and
    the largest set's check ask for the same sets, and the normal model's removals are
    samples: at N = 10^4 the logistic, t(4) and normal audits drew 26, 40 and 38 samples,
    24, 22 and 21 of them different. A model is asked by one thread at a time (the
    questions are decided in turn)."""
    key = (np.asarray(dropped, dtype=int).tobytes(), seed)
    return _recall(model, "samples", key, lambda: sample(model, dropped, seed), REMEMBERED)


def _recall(model, table: str, key, work, limit: int | None = None):
    """``work()``, kept in the model's field ``table`` (one of :data:`MEMORY`; nothing kept
    where it is None) under ``key`` with the model's other fields, and given again while
    they are the same objects: a model made by ``_replace`` shares the dict and works out
    its own. Past ``limit`` entries the oldest is forgotten."""
    memory = getattr(model, table)
    if memory is None:
        return work()
    fields = tuple(getattr(model, name) for name in model._fields if name not in MEMORY)
    known = memory.get(key)
    if known is not None and all(a is b for a, b in zip(known[0], fields, strict=True)):
        return known[1]
    found = work()
    memory.pop(key, None)  # the newest last
    if limit is not None and len(memory) >= limit:
        del memory[next(iter(memory))]  # the oldest
    memory[key] = (fields, found)
    return found


def predictors_affine(theta: np.ndarray, log_lik) -> bool:
    """Whether every observation is a logistic one (``logit(exp(l))`` affine in the draws
    ``theta`` (S, P) to :data:`RECOVERED`) or every one a Poisson one
    (:func:`~bayesij.array.amip_counts.poisson_coefficients`): the first test of
    :func:`recover_glm` (``log_lik`` as there), without the rest, for a subset of the
    observations."""
    whitened = _whitened(theta)
    if whitened is None:
        return False
    rows = _recovery_rows(theta.shape[0])
    return _affine_predictors(whitened[2][rows], _pieces(log_lik, rows)) is not None


def _whitened(theta: np.ndarray) -> tuple | None:
    """The draws' mean (P,), a basis (P, R) of the directions they vary in, and the draws
    in it with unit covariance (S, R); None where they do not vary."""
    mean = theta.mean(axis=0)
    centred = theta - mean
    values, vectors = np.linalg.eigh(centred.T @ centred / theta.shape[0])
    keep = values > 1e-12 * max(values.max(), 0.0)
    if not keep.any():
        return None
    basis = vectors[:, keep] * np.sqrt(values[keep])
    return mean, basis, centred @ (vectors[:, keep] / np.sqrt(values[keep]))


def _recovery_rows(n_draws: int) -> np.ndarray:
    """The :data:`RECOVERY_DRAWS` evenly spaced draws each logit is fitted on."""
    return np.unique(np.linspace(0, n_draws - 1, min(n_draws, RECOVERY_DRAWS)).astype(int))


def _pieces(log_lik, rows: np.ndarray):
    """``log_lik``'s rows ``rows`` a block of observations at a time (``log_lik``: an
    (S, N) matrix, or a function that yields them, :func:`recover_glm`)."""
    return log_lik(rows) if callable(log_lik) else row_pieces(log_lik, rows)


def row_pieces(log_lik: np.ndarray, rows: np.ndarray):
    """The draws ``rows`` (K,) of an (S, N) matrix, a chunk of observations at a time
    (each (K, n), in order): what :func:`recover_glm` reads."""
    for chunk in obs_chunks(log_lik.shape[1], len(rows)):
        yield log_lik[rows, chunk]


def _affine_predictors(u: np.ndarray, pieces) -> tuple | None:
    """The coefficients (R + 1, N) of each observation's linear predictor on ``[1, u]``
    over some draws (``u``: those draws, (K, R); ``pieces``: their log-likelihood (K, n) of
    consecutive blocks of observations, in order), and the counts (N,) of a Poisson
    regression (None for a logistic one: ``eta = logit(exp(l))``); None where some
    observation is not one of the family that the first observations are (or a value is
    not finite, or not below 0): read no further than the first such piece."""
    fits, finish = predictor_fits(u)
    return finish(fits.fed(pieces))


def predictor_fits(u: np.ndarray) -> tuple:
    """What :func:`_affine_predictors` fits, as a :class:`TileFits` to offer the pieces to
    and the function of its :meth:`~TileFits.result` that gives the coefficients and counts
    (or None): for pieces offered as a pass reads them."""
    design = np.column_stack([np.ones(u.shape[0]), u])
    solve = np.linalg.pinv(design)  # (R + 1, K)
    families = (
        functools.partial(_logit_coefficients, design=design, solve=solve),
        functools.partial(poisson_coefficients, u=u, recovered=RECOVERED),
    )
    chosen: list = []

    def fit(values: np.ndarray) -> np.ndarray | None:
        for family in families if not chosen else ():  # the first tile: the first that fits
            if family(values) is not None:
                chosen.append(family)
                break
        return chosen[0](values) if chosen else None

    def finish(parts: list | None) -> tuple | None:
        if not parts:
            return None
        coefficients = np.concatenate(parts, axis=1)
        if chosen[0] is families[0]:
            return coefficients, None
        return coefficients[:-1], coefficients[-1]

    return TileFits(fit), finish


class TileFits:
    """``fit(values)`` of each tile of :data:`TILE_COLUMNS` observations of some draws'
    log-likelihood, offered a piece (K, n) of consecutive observations at a time, in
    order; the first :data:`PROBE` observations are fitted first, where a model of another
    family fails at once. Failed once a tile's fit is None: later pieces are not fitted."""

    def __init__(self, fit):
        self.fit, self.parts, self.failed = fit, [], False

    def offer(self, piece) -> bool:
        """Fit the tiles of ``piece``; whether every fit so far holds."""
        if self.failed:
            return False
        values = np.asarray(piece, dtype=float)
        if not self.parts and self.fit(values[:, :PROBE]) is None:
            self.failed = True
            return False
        for start in range(0, values.shape[1], TILE_COLUMNS):
            found = self.fit(values[:, start : start + TILE_COLUMNS])
            if found is None:
                self.failed = True
                return False
            self.parts.append(found)
        return True

    def fed(self, pieces) -> list | None:
        """:meth:`result` after offering ``pieces`` in turn (read no further than the
        first that fails)."""
        for piece in pieces:
            if not self.offer(piece):
                break
        return self.result()

    def result(self) -> list | None:
        """The tiles' fits in order, or None where one failed."""
        return None if self.failed else self.parts


#: Observations of the first piece tested before the rest (:func:`_affine_logits`): a
#: normal regression's log-likelihood fails there at once, not after a whole piece
#: (0.2 s of a 4.4 s audit at N = 10^4).
PROBE = 64

#: Observations fitted at a time (:class:`TileFits`): a tile's temporaries (the
#: :data:`RECOVERY_DRAWS` draws of 512 observations) stay in cache: the normal
#: regression's recovery took 0.15 s for a whole piece of 10^4 observations, 0.04 s by tiles.
TILE_COLUMNS = 512


def _logit_coefficients(values: np.ndarray, *, design: np.ndarray, solve: np.ndarray):
    """The coefficients (R + 1, n) of ``logit(exp(values))`` (K, n) on ``design`` (K, R + 1;
    ``solve`` its pseudo-inverse), or None where a value is not finite or not below 0 or
    some observation's logit is not affine to :data:`RECOVERED`."""
    if not np.all(np.isfinite(values)) or np.any(values >= 0):
        return None
    eta = values - np.log(-np.expm1(values))  # logit(exp(l))
    coef = solve @ eta
    left = eta - design @ coef
    spread = eta - eta.mean(axis=0)
    residual = np.einsum("sn,sn->n", left, left)
    if np.any(residual > RECOVERED * np.einsum("sn,sn->n", spread, spread)):
        return None
    return coef


def _expit(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` in the precision of ``x`` (SciPy's ``expit`` took three times
    as long on 12 million values; single precision takes a fifth of double's)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _log_expit(x: np.ndarray) -> np.ndarray:
    """``log expit(x)``, stable at both ends: ``min(x, 0) - log(1 + exp(-|x|))``, in the
    precision of ``x`` and written over it (``log``, not ``log1p``: 1.5 times faster;
    ``min(x, 0)`` as ``(x - |x|) / 2``, the same to the bit and a third of the time; in
    place, the importance sample's sums took a quarter less)."""
    a = np.abs(x)
    low = np.subtract(x, a, out=x)
    low *= 0.5  # min(x, 0), exactly
    np.negative(a, out=a)
    np.exp(a, out=a)
    a += 1
    np.log(a, out=a)
    low -= a
    return low


def _log_lik_gradient(u: np.ndarray, observations: tuple, dtype=np.float32):
    """The summed log-likelihood's gradient (S, R) at the whitened draws ``u`` (S, R) of
    the ``observations`` (offsets (n,), slopes (R, n) and their family, :func:`_kept`), a
    chunk of them at a time, in ``dtype``: single precision for Stein's
    estimate, whose Monte Carlo error is a few percent; double to read a prior from the
    score."""
    offsets, slopes, family = observations
    gradient = np.zeros_like(u)

    def part(chunk: slice) -> np.ndarray:
        eta = (offsets[chunk] + u @ slopes[:, chunk]).astype(dtype)  # float32's exp: 5x faster
        return family.score(eta, chunk) @ slopes[:, chunk].T.astype(dtype)

    for summed in map_ordered(part, obs_chunks(offsets.size, u.shape[0], in_cache=True)):
        gradient += summed  # in the chunks' order: the same on any number of threads
    return gradient


def _known_prior(u, gradient, score) -> tuple | None:
    """The prior's precision (R, R) and gradient at ``u = 0`` (R,) from the log posterior's
    ``score`` in ``u`` (S, R) less the log-likelihood's ``gradient``, where that difference
    is affine in ``u`` to :data:`RECOVERED` (a normal prior; 0 for a flat one); else None."""
    prior = score - gradient
    design = np.column_stack([np.ones(u.shape[0]), u])
    coef = np.linalg.lstsq(design, prior, rcond=None)[0]  # (R + 1, R)
    left = prior - design @ coef
    scale = max(float(np.sum(score**2)), 1e-300)
    if np.sum(left**2) > RECOVERED * scale:
        return None
    precision = -0.5 * (coef[1:] + coef[1:].T)
    return precision, coef[0]


class Affine(NamedTuple):
    """A searched quantity in a recovered model's whitened parameters ``u``: ``a + c . u``,
    or with ``log`` its exponential (a positive quantity whose logarithm is affine: a
    normal regression's residual sd, whose model holds its logarithm). Built by
    :func:`affine_in`."""

    a: float
    c: np.ndarray
    log: bool = False

    def at(self, u: np.ndarray) -> np.ndarray:
        """Its values (M,) at the draws ``u`` (M, R)."""
        f = self.a + u @ self.c
        return np.exp(f) if self.log else f

    def tangent(self, u: np.ndarray) -> Affine:
        """The affine quantity of its first order at ``u`` (R,): itself where affine."""
        if not self.log:
            return self
        value = float(np.exp(self.a + self.c @ u))
        return Affine(value - value * float(self.c @ u), value * self.c)


def affine_in(model, f: np.ndarray, theta: np.ndarray, u=None, log: bool | None = None):
    """The quantity of draws ``f`` (S,) as an :class:`Affine` function of a recovered
    model's parameters, to round-off (``theta`` (S, P): the draws the model was recovered
    from; ``u``: :func:`whitened_draws` of them, when already computed); with ``log``, or
    else the exponential of one where ``f`` is positive (default: the model's
    ``log_quantities``, true where its removals are importance samples:
    :class:`~bayesij.array.amip_normal.NormalModel`). None where it is neither."""
    log = model.log_quantities if log is None else log
    u = whitened_draws(model, theta) if u is None else u
    design = np.column_stack([np.ones(u.shape[0]), u])
    found = _affine_fit(design, f)
    if found is None and log and np.all(f > 0):
        found = _affine_fit(design, np.log(f))
        return None if found is None else Affine(*found, log=True)
    return None if found is None else Affine(*found)


def _affine_fit(design: np.ndarray, f: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(a, c)`` with ``f = a + c . u`` to round-off (``design``: ones and ``u``, (S, 1 +
    R)); None where the fit leaves more than :data:`RECOVERED` of ``f``'s spread."""
    coef = np.linalg.lstsq(design, f, rcond=None)[0]
    spread = float(np.sum((f - f.mean()) ** 2))
    if spread == 0 or np.sum((f - design @ coef) ** 2) > RECOVERED * spread:
        return None
    return float(coef[0]), coef[1:]


def whitened_draws(model, theta: np.ndarray) -> np.ndarray:
    """The draws ``theta`` (S, P) in a recovered model's whitened parameters (S, R)."""
    return np.linalg.lstsq(model.basis, (theta - model.mean).T, rcond=None)[0].T


def _prior_precision(u: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stein's estimate of a normal prior's precision ``E[g u'] + I`` (R, R) from whitened
    draws ``u`` (S, R) and the log-likelihood's gradient ``g`` there, and the same on each
    of :data:`PRIOR_BATCHES` batches of consecutive draws (B, R, R)."""
    eye = np.eye(u.shape[1])

    def estimate(part: slice) -> np.ndarray:
        a = gradient[part].T @ u[part] / u[part].shape[0] + eye
        return 0.5 * (a + a.T)

    n = u.shape[0]
    batches = np.array(
        [
            estimate(slice(i * n // PRIOR_BATCHES, (i + 1) * n // PRIOR_BATCHES))
            for i in range(PRIOR_BATCHES)
        ]
    )
    return estimate(slice(None)), batches


def removal(model: LogisticModel, dropped: np.ndarray, quantity: Affine, sign: int, z: float):
    """The metric mean ``+ sign z sd`` of the quantity ``a + c . u`` (``quantity``:
    :func:`affine_in`) without the observations ``dropped`` (indices), and its
    sensitivity to the prior's estimate (:class:`Removal`); None where the posterior
    without them has no mode (the rest of the data and the prior do not hold the
    parameters). The quantity is affine (the Laplace approximation's mean and sd are of
    ``c . u``).

    The sensitivity gives the metric's standard error through the prior by batch means
    and the delta method (:attr:`Removal.band`): its derivative toward each batch's
    estimate, at the mode (the implicit function theorem; a batch's own estimate may be
    far enough off to leave no mode)."""
    a, c = quantity.a, quantity.c
    offsets, slopes, family = kept = _kept(model, dropped)
    found = _laplace_without(model, dropped, kept)
    if found is None:
        return None
    mode, cov = found
    spread = float(c @ cov @ c)
    mid = float(a + c @ mode + sign * z * np.sqrt(spread))
    toward = model.batches - model.precision  # (B, R, R)
    if not len(toward):
        return Removal(mid, np.zeros(0))
    # The implicit function theorem at the mode u*: moving the precision by D moves the
    # mode by -cov D u*, and the inverse covariance by D and by the likelihood's third
    # derivative along that move.
    v = cov @ c
    third = family.third(offsets + mode @ slopes) * (v @ slopes) ** 2  # (n,)
    moved = -np.einsum("ij,bjk,k->bi", cov, toward, mode)  # (B, R)
    grown = np.einsum("i,bij,j->b", v, toward, v) + moved @ (slopes @ third)
    return Removal(mid, moved @ c - sign * z * grown / (2 * np.sqrt(spread)))


def _kept(model: LogisticModel, dropped) -> tuple:
    """The offsets (n,), slopes (R, n) and family (:class:`Logistic` or :class:`Poisson`
    of their counts) of the observations outside ``dropped``."""
    keep = np.ones(model.offsets.size, dtype=bool)
    keep[np.asarray(dropped, dtype=int)] = False
    return model.offsets[keep], model.slopes[:, keep], model.family.kept(keep)


def _laplace_without(model: LogisticModel, dropped, kept: tuple | None = None):
    """The Laplace approximation of the posterior without ``dropped`` (:func:`_laplace`:
    the mode and covariance, or None), worked out once per set in a model that remembers
    them (``model.modes``, :func:`_recall`); ``kept``: :func:`_kept` of the set when
    already at hand (else taken only to work it out). A set's removal, its check and the
    bisections of the low end and of the smallest set ask for the same sets: on the
    logistic audit at N = 10^4, 707 approximations were 497 sets."""

    def fit():
        return _laplace(model, *(kept if kept is not None else _kept(model, dropped)))

    units = np.unique(np.asarray(dropped, dtype=int)).tobytes()
    key = hashlib.blake2b(units, digest_size=16).digest()  # the set, not its order
    return _recall(model, "modes", key, fit)


def _laplace(model: LogisticModel, offsets: np.ndarray, slopes: np.ndarray, family):
    """The mode (R,) and inverse negative Hessian (R, R) there of the posterior of the
    observations of ``offsets`` (n,), ``slopes`` (R, n) and ``family`` (:func:`_kept`),
    the model's prior (:func:`~bayesij.array.newton.laplace_mode` from the draws' mean);
    None where it finds no maximum."""
    precision, pull = model.precision, model.pull

    def log_posterior(u: np.ndarray) -> float:
        return family.log_lik(offsets + u @ slopes) - 0.5 * u @ precision @ u + u @ pull

    def derivatives(u: np.ndarray) -> tuple:
        missed, weight = family.derivatives(offsets + u @ slopes)
        gradient = slopes @ missed - precision @ u + pull
        return gradient, -(slopes * weight) @ slopes.T - precision

    return laplace_mode(log_posterior, derivatives, np.zeros(slopes.shape[0]))


def model_ranking(model: LogisticModel, quantity: Affine, goal, k_max: int) -> np.ndarray:
    """The units (K,), at most ``k_max``, that move the goal's metric toward its target in
    the recovered ``model``, largest first: each unit's first-order change of the metric
    ``mean + sign z sd`` of the quantity ``a + c . u`` (``quantity``: :func:`affine_in`)
    at the Laplace approximation of the full data's posterior, free of the draws' Monte
    Carlo error (empty where that posterior has no mode).

    Dropping unit ``n`` moves the mode by ``-Sigma grad l_n`` (the implicit function
    theorem; ``Sigma`` the inverse negative Hessian), so the mean of ``c . u`` by
    ``-(c Sigma s_n) expit(-eta_n)``; it takes ``expit(eta_n) expit(-eta_n) s_n s_n'``
    from the precision, so the variance grows by that times ``(c Sigma s_n)^2`` and the
    sd by that over twice the sd (the Hessian's change with the mode, a third
    derivative, left out: it moves the sd by less than the terms kept do for a set of a
    few units). The linear AMIP of the model [1]_: the ranking of the draws' influences
    without their Monte Carlo error, which on a 944-observation election study put a
    third of each set elsewhere.

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999.
    """
    return top_positive(goal.direction * first_order(model, quantity, goal), k_max)


def first_order(model: LogisticModel, quantity: Affine, goal, dropped=()) -> np.ndarray:
    """Each unit's first-order change (N,) of the goal's metric at the Laplace
    approximation of the posterior without ``dropped`` (default: the full data's;
    :func:`model_ranking`); zeros where it has no mode."""
    found = _laplace_without(model, dropped)
    if found is None:
        return np.zeros(model.offsets.size)
    mode, cov = found
    v = cov @ quantity.c
    lever = v @ model.slopes  # (N,) c Sigma s_n
    score, weight = model.family.derivatives(model.offsets + mode @ model.slopes)
    change = -lever * score
    if goal.sign:
        change = change + goal.sign * goal.z * weight * lever**2 / (2 * np.sqrt(v @ quantity.c))
    return change


def importance_sample(model: LogisticModel, dropped, seed: int = 0) -> tuple | None:
    """Draws ``u`` (M, R) and normalised weights (M,) of the posterior without
    ``dropped`` by importance sampling from a multivariate t (7 degrees of freedom) at its
    Laplace approximation (the prior at its estimate), and the weights' Pareto k-hat;
    None where there is no mode. Any quantity's moments: :func:`sampled_moments`."""
    offsets, slopes, family = kept = _kept(model, dropped)
    found = _laplace_without(model, dropped, kept)
    if found is None:
        return None
    mode, cov = found
    u, proposal = t_proposal(mode, cov, CHECK_DRAWS, seed)
    target = u @ model.pull - 0.5 * np.einsum("si,ij,sj->s", u, model.precision, u)

    def summed(chunk: slice) -> np.ndarray:  # the chunk's log-likelihood at each draw
        eta = u @ slopes[:, chunk]
        eta += offsets[chunk]
        return family.summed(eta, chunk)

    for part in map_ordered(summed, obs_chunks(offsets.size, CHECK_DRAWS, in_cache=True)):
        target += part  # in the chunks' order: the same sums on any number of threads
    log_w = target - proposal
    w = np.exp(log_w - log_w.max())
    return u, w / w.sum(), _ratios_khat(w)


def t_proposal(mode: np.ndarray, cov: np.ndarray, n_draws: int, seed: int) -> tuple:
    """Draws ``u`` (M, R) of a multivariate t (7 degrees of freedom) at ``mode`` with
    scale ``1.2 cov``, and their log density up to a constant (M,): the importance
    sampling proposal at a Laplace approximation."""
    normal, radius, log_density = _standard_t(n_draws, mode.size, seed)
    u = mode + radius * normal @ np.linalg.cholesky(1.2 * cov).T
    return u, log_density


@functools.cache
def _standard_t(n_draws: int, r: int, seed: int, nu: float = 7.0) -> tuple:
    """:func:`t_proposal`'s standard draws, the same for every proposal of a seed: normal
    (M, R), the radius (M, 1) and the log density up to a constant (M,) (read-only)."""
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal((n_draws, r))
    radius = np.sqrt(nu / rng.chisquare(nu, n_draws))[:, None]
    log_density = -0.5 * (nu + r) * np.log1p(np.sum((radius * normal) ** 2, axis=1) / nu)
    for array in (normal, radius, log_density):
        array.flags.writeable = False
    return normal, radius, log_density


def _ratios_khat(ratios: np.ndarray) -> float:
    """The Pareto k-hat of independent importance ``ratios`` (M,) (not of their logs)."""
    return float(pareto_khat_columns(ratios[:, None], khat_tail_length(ratios.size, 1.0))[0])


def sampled_moments(sample: tuple, quantity: Affine) -> tuple[float, float, float]:
    """The quantity's (:func:`affine_in`) mean, sd and the mean's Monte Carlo standard
    error under an :func:`importance_sample`."""
    u, w, _ = sample
    f = quantity.at(u)
    mean = float(w @ f)
    return mean, float(np.sqrt(w @ (f - mean) ** 2)), float(np.sqrt(np.sum(w**2 * (f - mean) ** 2)))


class SmallestRemoval(NamedTuple):
    """The smallest prefix of a set whose removal reaches a goal (:func:`smallest_removal`):
    its size, the change's band (low, high) and the quantity's mean and sd without it
    (the importance-sampling check's)."""

    size: int
    band: tuple[float, float]
    after: tuple[float, float]


def smallest_removal(model, order, quantity: Affine, goal, f, low: float = 0.0, below=np.inf):
    """The smallest prefix of the units ``order`` whose removal in ``model`` reaches the
    ``goal`` (:class:`~bayesij.array.amip.Goal`) past the full-data metric's Monte Carlo
    error, or None.

    The change of each prefix is the Laplace change give or take the prior's error
    (:func:`removal`); the prefix is found by bisection above ``low`` (prefixes grow the
    change), then checked by importance sampling (:func:`importance_sample`, its k-hat
    below PSIS's threshold for :data:`CHECK_DRAWS` draws): the band is widened by the
    check's departure from the Laplace change and :data:`~bayesij.array.amip.MC_MARGIN`
    of its Monte Carlo errors, and where the widened band falls short the bisection goes
    on with that spread. None where the whole set's removal falls short, a removal has no
    mode, the check's k-hat passes the threshold or the checked band falls short.

    Parameters
    ----------
    model : LogisticModel or NormalModel
        The regression recovered from the draws (:mod:`bayesij.array.amip_normal`; its
        ``removal`` and ``importance_sample``); its rows are the units ``order`` indexes.
    order : ndarray of int, shape (K,)
        The set's units in the order they joined it.
    quantity : tuple
        The searched quantity as an affine function of the parameters (:func:`affine_in`).
    goal : Goal
        The target's metric, direction and what is needed of the change.
    f : ndarray of shape (n_chains, n_draws)
        The quantity's draws (the full data's posterior, against which the check
        measures).
    low : float, default 0.0
        The size interval's low end: no smaller prefix is tried.
    below : float, default inf
        None unless the smallest prefix is smaller than this (a set another order found),
        which the Laplace change's bisection tells before the importance-sampling check
        where it does not (the check may only grow the prefix).

    Returns
    -------
    SmallestRemoval or None

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999.
    """
    prefixes = LaplacePrefixes(model, order, quantity, goal, f)
    return prefixes.settled(prefixes.first_reaching(low), below)


class LaplacePrefixes:
    """The removals of the prefixes of one order in a recovered model, each worked out
    once: the two steps of :func:`smallest_removal` apart, so that a caller comparing
    orders (:func:`bayesij.stats.amip._by_removal`) checks by importance sampling only
    the orders whose Laplace prefix may beat the smallest set found so far (a check only
    grows the prefix)."""

    def __init__(self, model, order, quantity: Affine, goal, f):
        self.model, self.order, self.quantity, self.goal = model, order, quantity, goal
        self.mcse = metric_mcse(f, goal)  # the full data's metric's: the start's error
        self.start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
        self.drawn = _drawn_moments(f)
        self.changes: dict[int, np.ndarray | None] = {}

    def laplace(self, size: int) -> np.ndarray | None:
        """The Laplace change's low end, value and high end (3,) of the first ``size``."""
        if size not in self.changes:
            after = self.model.removal(
                self.order[:size], self.quantity, self.goal.sign, self.goal.z
            )
            self.changes[size] = None if after is None else np.array(after.change_from(self.start))
        return self.changes[size]

    def checked(self, size: int):
        """The band of the first ``size``, widened by the importance-sampling check, and
        the quantity's moments without them (:func:`_checked_band`); None where the check
        cannot be drawn or its k-hat passes the threshold."""
        moved, sample = self.laplace(size), self.model.importance_sample(self.order[:size])
        if moved is None or sample is None or sample[2] > pareto_k_threshold(sample[1].size):
            return None
        moments = sampled_moments(sample, self.quantity)
        return _checked_band(moved, moments, self.drawn, self.goal, _paired(self.model))

    def reaches(self, size: int, spread: float) -> bool:
        """Whether the Laplace band of the first ``size``, widened by ``spread``, reaches."""
        moved = self.laplace(size)
        return moved is not None and not _short(
            (moved.min() - spread, moved.max() + spread), self.goal, self.mcse
        )

    def smallest(self, miss: int, spread: float) -> int:
        """The smallest prefix above ``miss`` that :meth:`reaches` (prefixes grow the
        change: bisection)."""
        return first_holding(lambda size: self.reaches(size, spread), miss, self.order.size)

    def first_reaching(self, low: float = 0.0) -> int | None:
        """The smallest prefix, none below the size ``low``, whose Laplace band reaches
        (no check yet); None where the whole order's falls short or has no mode."""
        if self.start is None or not self.reaches(self.order.size, 0.0):
            return None
        return self.smallest(max(0, math.ceil(low) - 1), 0.0)

    def settled(self, hit: int | None, below=np.inf) -> SmallestRemoval | None:
        """:func:`smallest_removal` from the prefix :meth:`first_reaching` found: checked,
        bisected again with the check's spread where the checked band falls short; None
        where it is not below ``below`` or the check fails."""
        if hit is None or hit >= below:
            return None
        band, moved = self.checked(hit), self.laplace(hit)  # a band: a Laplace change
        if band is not None and moved is not None and _short(band[0], self.goal, self.mcse):
            spread = 0.5 * (band[0][1] - band[0][0]) - 0.5 * np.ptp(moved)  # widened as checked
            hit = self.smallest(hit, spread)
            band = self.checked(hit)
        if band is None or _short(band[0], self.goal, self.mcse) or hit >= below:
            return None
        return SmallestRemoval(hit, band[0], band[1])


def checked_removal(model, dropped, quantity: Affine, goal, f) -> SmallestRemoval | None:
    """The removal of the whole set ``dropped`` in ``model`` as :func:`smallest_removal`
    checks a prefix: the Laplace change give or take the prior's error, widened by the
    importance-sampling check against the draws ``f``; None where a removal has no mode or
    the check's k-hat passes PSIS's threshold."""
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
    after = model.removal(dropped, quantity, goal.sign, goal.z)
    sample = model.importance_sample(dropped)
    if start is None or after is None or sample is None:
        return None
    if sample[2] > pareto_k_threshold(sample[1].size):
        return None
    moved = np.array(after.change_from(start))
    moments = sampled_moments(sample, quantity)
    band, moments = _checked_band(moved, moments, _drawn_moments(f), goal, _paired(model))
    return SmallestRemoval(len(dropped), band, moments)


def smallest_settled(model, orders: list, quantity: Affine, goal, f, low: float = 0.0):
    """Of several ``orders`` of units (each (K,)), the one whose checked smallest removal
    in the recovered ``model`` (:func:`smallest_removal`, none below the size ``low``) is
    the smallest sure set, the first order's of equal ones, and that removal; None where
    none reaches. (Whether it settles how few,
    :func:`~bayesij.array.amip_noise.size_settled`, is the caller's to say: where it does
    not it is still a sure upper bound.) The orders are checked by importance sampling in
    the order of their Laplace prefixes (:class:`LaplacePrefixes`), and one whose Laplace
    prefix cannot beat the best so far is not checked, since a check only grows the
    prefix: on the logistic audit at N = 10^4, 8 of 24 samples were such."""
    found = [LaplacePrefixes(model, order, quantity, goal, f) for order in orders]
    hits = [p.first_reaching(low) for p in found]  # past an order's end: its whole
    best = None  # (size, index, settled)
    for k in sorted(
        (k for k, hit in enumerate(hits) if hit is not None), key=lambda k: (hits[k], k)
    ):
        if best is not None and (hits[k], k) > best[:2]:
            continue  # its set would be larger, or as large and another order's first
        below = np.inf if best is None else best[0] + (k < best[1])
        settled = found[k].settled(hits[k], below)
        if settled is not None:
            best = settled.size, k, settled
    return None if best is None else (orders[best[1]], best[2])


def laplace_far_short(model, dropped, quantity: Affine, goal, mcse: float) -> bool:
    """Whether the removal of ``dropped`` in the recovered ``model`` falls short of the goal
    at the optimistic end of its Laplace band, before any check
    (:func:`~bayesij.array.amip.far_short`, with the full data's metric's Monte Carlo error
    ``mcse``; False where a removal has no mode): the check (:func:`checked_removal`) only
    widens the band, so a set that is not far short here is not far short checked."""
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
    after = model.removal(dropped, quantity, goal.sign, goal.z)
    if start is None or after is None:
        return False
    optimistic = max(after.change_from(start), key=lambda end: goal.direction * end)
    return far_short(goal, optimistic, mcse)


def model_greedy(model, quantity: Affine, goal, k_max: int, pace: int = 16) -> np.ndarray:
    """The greedy order (K,), at most ``k_max`` units, of a recovered ``model``: each
    step takes the units of largest first-order gain toward the goal at the posterior
    without those taken so far (:meth:`first_order`), ``1 + taken // pace`` of them, until
    no unit moves the metric that way. Its prefixes are the model's iterated AMIP sets
    (the estimating-equation AMIP re-ranked after each drop): on a wells-like logistic
    regression (N = 3020) the low end along the full data's ranking alone was 229 where
    the iterated AMIP's exact refits reach the distance coefficient's sign with 217."""
    taken = np.zeros(0, dtype=int)
    while taken.size < k_max:
        gain = goal.direction * model.first_order(quantity, goal, taken)
        gain[taken] = -np.inf
        step = top_positive(gain, min(1 + taken.size // pace, k_max - taken.size))
        if not step.size:
            break
        taken = np.concatenate([taken, step])
    return taken


#: How many of the model's ranking's first units are also evaluated dropped alone
#: (:func:`model_low`), as the influences' low end does with the second-order model.
ALONE = 16


def model_low(model, order, quantity: Affine, goal, f, singles: int = ALONE) -> float:
    """The low end of the smallest set's size in a recovered ``model`` (a
    :class:`LogisticModel` or :class:`~bayesij.array.amip_normal.NormalModel`): the
    smallest prefix of ``order`` (the model's ranking, :func:`model_ranking`, or its greedy
    order, :func:`model_greedy`) whose removal reaches the goal's need at the optimistic
    end of its band (through the prior, widened as :func:`smallest_removal` widens it by
    the importance-sampling check at that prefix against the draws ``f``), or fewer units
    in another order: the first ``singles`` units each counted by its own removal alone
    (a high-leverage unit moves the metric several times its first order), the others by
    their first-order change, the largest first. ``inf`` where neither reaches within
    ``order``.

    The influences' low end (:func:`bayesij.array.amip_noise.linear_answer`) takes the
    optimistic end of the band between the first and the second order, which on a normal
    regression of a long-tailed count (N = 20,190) put it at 116 where the exact refits
    need 264; the model's removal has no such band."""
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)
    if start is None or not len(order):
        return float("inf")

    def best(dropped) -> float:  # the optimistic end of the change, in the goal's direction
        after = model.removal(dropped, quantity, goal.sign, goal.z)
        if after is None:
            return float("inf")
        low, _, high = after.change_from(start)
        return max(goal.direction * low, goal.direction * high)

    @functools.cache
    def best_prefix(size: int) -> float:  # bisections with and without the spread share these
        return best(order[:size])

    def smallest(spread: float) -> float:  # the smallest prefix reaching, by bisection
        if best_prefix(len(order)) + spread < goal.need:
            return float("inf")
        return float(
            first_holding(lambda size: best_prefix(size) + spread >= goal.need, 0, len(order))
        )

    spread = _check_spread(
        model, order[: int(min(smallest(0.0), len(order)))], quantity, goal, f, start
    )
    prefix = smallest(spread)
    if _paired(model):  # the draws reweighted: a prefix is known only while k-hat holds
        prefix = min(prefix, _first_unknown(model, order, prefix))
    gains = goal.direction * model.first_order(quantity, goal)[order]
    j = min(singles, gains.size)
    gains[:j] = [best(order[i : i + 1]) for i in range(j)]
    reach = np.cumsum(np.sort(gains)[::-1]) + spread >= goal.need
    alone = float(np.argmax(reach) + 1) if reach.any() else float("inf")
    return min(prefix, alone)


def _first_unknown(model, order, size: float) -> float:
    """The smallest prefix of ``order``, at most ``size`` units, whose importance sample in
    a ``model`` that reweights the draws has a Pareto k-hat past PSIS's threshold (its
    removal, and every larger prefix's, is then not known: a low end may not rest on it);
    ``size`` where that prefix's k-hat holds (k-hat grows along a set's prefixes: the first
    crossing by bisection). On a varying-intercept model of 12 groups of 20 the k-hat of
    the greedy order's prefixes passed 0.7 at 10 observations, and the reweighted draws
    put the low end at 21 where the exact refits reach with 19."""

    def unknown(k: int) -> bool:
        sample = model.importance_sample(order[:k])
        return sample is None or sample[2] > pareto_k_threshold(sample[1].size)

    hit = int(min(size, len(order)))
    if hit < 1 or not unknown(hit):
        return size
    return float(first_holding(unknown, 0, hit))


def first_holding(holds, miss: int, hit: int) -> int:
    """The smallest size in ``(miss, hit]`` at which ``holds`` (a test of a prefix's size
    that, once true, stays true as the prefix grows) is true, by bisection, given that it
    holds at ``hit`` and not at ``miss``; ``hit`` where the two are adjacent."""
    while hit - miss > 1:
        middle = (hit + miss) // 2
        miss, hit = (miss, middle) if holds(middle) else (middle, hit)
    return hit


def _check_spread(model, dropped, quantity: Affine, goal, f, start: Removal) -> float:
    """How far the importance-sampling check at ``dropped`` widens the removal's band on
    each side (:func:`_checked_band`); 0 where it cannot be drawn."""
    after = model.removal(dropped, quantity, goal.sign, goal.z)
    sample = model.importance_sample(dropped)
    if after is None or sample is None:
        return 0.0
    moved = np.array(after.change_from(start))
    moments = sampled_moments(sample, quantity)
    band = _checked_band(moved, moments, _drawn_moments(f), goal, _paired(model))[0]
    return float(0.5 * (band[1] - band[0]) - 0.5 * np.ptp(moved))


def _drawn_moments(f) -> tuple[float, float, float]:
    """The draws' ``f`` mean, sd and the mean's Monte Carlo standard error: what a check's
    sampled moments are measured against (:func:`_checked_band`'s ``before``)."""
    draws = np.asarray(f, dtype=float)
    return float(draws.mean()), float(draws.std()), mean_mcse(draws)


def _checked_band(moved: np.ndarray, after: tuple, before: tuple, goal, paired=False) -> tuple:
    """The change's band: the Laplace change give or take the prior's error (``moved``: its
    low end, value and high end, :meth:`Removal.change_from`), widened by the
    importance-sampling check's departure from the Laplace change and
    :data:`~bayesij.array.amip.MC_MARGIN` of its Monte Carlo errors (``after``: the
    quantity's sampled mean, sd and the mean's error without the set; ``before``: the same
    of the draws); and the quantity's mean and sd without the set (the check's). With
    ``paired``, the check reweights the draws themselves
    (:class:`~bayesij.array.amip_hierarchy.HierarchyModel`): the band already holds the
    change's Monte Carlo error, paired over the same draws (their autocorrelation
    counted), which the two errors of independent samples would count again."""
    (m1, s1, e1), (m0, s0, e0) = after, before
    checked = (m1 - m0) + goal.sign * goal.z * (s1 - s0)
    spread = abs(checked - moved[1]) + (0.0 if paired else MC_MARGIN * math.hypot(e1, e0))
    return (float(moved.min() - spread), float(moved.max() + spread)), (m1, s1)


def _paired(model) -> bool:
    """Whether a model's removals reweight the draws themselves (its band the change's
    Monte Carlo error): :func:`_checked_band`'s ``paired``."""
    return bool(getattr(model, "reweights_the_draws", False))


def _short(band: tuple, goal, mcse: float) -> bool:
    """Whether the pessimistic end of a change's band does not reach the goal past the
    full-data metric's Monte Carlo error ``mcse`` (:meth:`~bayesij.array.amip.Goal.
    reached_by`, the one rule)."""
    pessimistic = min(band, key=lambda end: goal.direction * end)
    return not goal.reached_by(pessimistic, mcse)
