"""A set's removal from a normal linear regression, worked out from the draws: each
observation's residual recovered exactly as a function of the parameters, the prior
estimated from the draws, and the posterior without the set by importance sampling at
its Laplace approximation.

A normal observation ``l_n = -log(2 pi) / 2 - log sigma - r_n^2 / (2 sigma^2)`` with the
residual ``r_n = y_n - x_n . beta`` affine in the coefficients has
``q_n = -2 sigma^2 (l_n + log(2 pi) / 2 + log sigma) = r_n^2``: a quadratic function of
the parameters whose quadratic part has rank one. Given the draws of ``sigma`` (a
positive quantity among them), a least-squares fit of ``q_n`` on the quadratic terms of
the others leaves nothing but round-off for every observation of such a model, and its
coefficients give ``r_n = c_n + v_n . u`` (up to a sign that ``r_n^2`` does not see) in
whitened parameters ``u``. The log-likelihood of any set of observations is then known at
any parameter value through three sufficient statistics (``sum c^2``, ``sum c v``,
``sum v v'``), whatever N.

The parameters are the posterior's with ``sigma`` on the log scale (``s``), whitened; the
prior is taken as normal there (a flat prior on ``beta`` and ``log sigma``, or on
``sigma``, is a degenerate one) and estimated by Stein's identity as for the logistic
regression (:mod:`bayesij.array.amip_logistic`), with its batch-means error. The removal
of a set is computed by importance sampling from a multivariate t at the Laplace
approximation of the posterior without it, whose Pareto k-hat must pass: with the
sufficient statistics, each proposal draw costs ``O(R^2)``, not ``O(N)``.

References
----------
.. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric: when can dropping a little data make a big difference?
   arXiv:2011.14999.
.. [2] Hyvärinen, A. (2005). Estimation of non-normalized statistical models by score
   matching. Journal of Machine Learning Research 6, 695-709 (Stein's identity).
.. [3] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
   smoothed importance sampling. Journal of Machine Learning Research 25(72).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from bayesij.array.amip_logistic import (
    TILE_COLUMNS,
    Affine,
    Removal,
    TileFits,
    _known_prior,
    _pieces,
    _prior_precision,
    _ratios_khat,
    _recovery_rows,
    _whitened,
    predictor_fits,
    remembered,
    t_proposal,
)
from bayesij.array.newton import laplace_mode
from bayesij.array.numeric import obs_chunks, top_positive

__all__ = [
    "NormalModel",
    "RegressionFeed",
    "recover_normal",
    "sample_at_mode",
    "sampled_removal",
]

#: The share of ``q_n``'s variance over the draws that the rank-one quadratic may leave
#: for the observation to count as a normal one: round-off is below 1e-20 on a normal
#: regression; a Student-t or Poisson observation leaves 1e-4 or more.
RECOVERED = 1e-12

#: The share of ``q_n``'s variance the pivot column's rank-one factor may leave before it is
#: fitted again from ``q_n``'s signed root (:func:`_rank_one`): a millionth of
#: :data:`RECOVERED`, and ten thousand times a normal observation's usual round-off (below
#: 10^-22 on 99.9 % of a t(4) regression's residuals), so that few are fitted twice.
REFINED = 1e-18

#: Proposal draws of the importance sampling of a removal (each costs O(R^2)).
REMOVAL_DRAWS = 8000

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


class _Stats(NamedTuple):
    """Sufficient statistics of a set of observations: their count, ``sum c^2``,
    ``sum c v`` (R,) and ``sum v v'`` (R, R)."""

    n: float
    e0: float
    h: np.ndarray
    gram: np.ndarray


class NormalModel(NamedTuple):
    """A normal linear regression recovered from its draws, in whitened parameters ``u``
    (``phi = mean + basis u``, ``phi`` the posterior's quantities with the residual sd on
    the log scale; the draws' covariance ``I`` in ``u``).

    Attributes
    ----------
    mean : ndarray of shape (P,)
    basis : ndarray of shape (P, R)
    scale : int
        The quantity that is the residual sd.
    offsets : ndarray of shape (N,)
        ``r_n(u) = offsets[n] + slopes[:, n] . u``.
    slopes : ndarray of shape (R, N)
    precision : ndarray of shape (R, R)
        The prior's estimated precision in ``u``.
    pull : ndarray of shape (R,)
        The prior's gradient at ``u = 0``.
    batches : ndarray of shape (B, R, R)
        Stein's estimate of the precision on each batch of the draws.
    samples : dict, optional
        The latest importance samples drawn in this model, by set and seed, each with
        the fields it was drawn with (:func:`~bayesij.array.amip_logistic.remembered`).
    totals : _Stats, optional
        The sufficient statistics of every observation (:func:`_stats`), from which a
        set's removal takes its own (:func:`_kept_stats`); None: worked out when asked.
    """

    mean: np.ndarray
    basis: np.ndarray
    scale: int
    offsets: np.ndarray
    slopes: np.ndarray
    precision: np.ndarray
    pull: np.ndarray
    batches: np.ndarray
    samples: dict | None = None
    totals: _Stats | None = None

    @property
    def log_quantities(self) -> bool:
        """Whether its removals take a positive quantity whose logarithm is affine (the
        residual sd; :func:`~bayesij.array.amip_logistic.affine_in`): true, they are
        importance samples and take any quantity as it is."""
        return True

    @property
    def decided_by(self) -> str:
        """How an answer decided in this model was worked out (``AmipResult.decided_by``)."""
        return (
            "importance sampling in the normal linear regression recovered from the draws (each "
            "observation's residual recovered exactly, the prior from the draws or the "
            "gradient; at the Laplace approximation, its Pareto k-hat checked)"
        )

    def parameters(self, theta: np.ndarray) -> np.ndarray:
        """The draws ``theta`` (S, P) of the posterior's quantities as the model's
        parameters (the residual sd by its logarithm): what
        :func:`~bayesij.array.amip_logistic.affine_in` reads a quantity in."""
        phi = np.array(theta, dtype=float)
        phi[:, self.scale] = np.log(phi[:, self.scale])
        return phi

    def removal(self, dropped, quantity: Affine, sign: int, z: float) -> Removal | None:
        """The metric ``mean + sign z sd`` of the quantity ``a + c . u`` without the
        observations ``dropped``, by importance sampling (:meth:`importance_sample`), and
        its derivative toward each batch's estimate of the prior (:class:`Removal`); None
        where the posterior without them has no mode."""
        toward = self.batches - self.precision
        return sampled_removal(self.importance_sample(dropped), quantity, (sign, z), toward)

    def importance_sample(self, dropped, seed: int = 0) -> tuple | None:
        """Draws ``u`` (M, R) and normalised weights (M,) of the posterior without
        ``dropped`` by importance sampling from a multivariate t (7 degrees of freedom)
        at its Laplace approximation, and the weights' Pareto k-hat; None where there is
        no mode (each set drawn once: :func:`~bayesij.array.amip_logistic.remembered`)."""
        return remembered(self, dropped, seed, NormalModel.drawn_sample)

    def drawn_sample(self, dropped, seed: int = 0) -> tuple | None:
        """:meth:`importance_sample`, drawn now."""
        stats = _kept_stats(self, dropped)
        return sample_at_mode(_laplace(self, stats), partial(_log_posterior, self, stats), seed)

    def ranking(self, quantity: Affine, goal, k_max: int) -> np.ndarray:
        """The units (K,), at most ``k_max``, that move the goal's metric toward its
        target, largest first: each unit's first-order change of the metric at the
        Laplace approximation of the full data's posterior (the mode moves by
        ``-Sigma grad l_n``, the variance by ``Sigma (-hess l_n) Sigma``): the linear
        AMIP of the recovered model [1]_, free of the draws' Monte Carlo error.

        References
        ----------
        .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic
           finite-sample robustness metric. arXiv:2011.14999.
        """
        return top_positive(goal.direction * self.first_order(quantity, goal), k_max)

    def first_order(self, quantity: Affine, goal, dropped=()) -> np.ndarray:
        """Each unit's first-order change (N,) of the goal's metric (:meth:`ranking`) at
        the posterior without ``dropped`` (default: the full data's); zeros where it has
        no mode."""
        found = _laplace(self, _kept_stats(self, np.asarray(dropped, dtype=int)))
        if found is None:
            return np.zeros(self.offsets.size)
        mode, cov = found
        quantity = quantity.tangent(mode)  # a residual sd: its first order at the mode
        b = self.basis[self.scale]
        e = np.exp(-2 * (self.mean[self.scale] + b @ mode))
        w = cov @ quantity.c
        r = self.offsets + mode @ self.slopes
        wv, wb = w @ self.slopes, float(w @ b)
        change = wb * (1 - e * r**2) + e * r * wv
        if goal.sign:
            grown = e * (wv**2 - 4 * r * wv * wb + 2 * r**2 * wb**2)
            change = change + goal.sign * goal.z * grown / (2 * np.sqrt(w @ quantity.c))
        return change


def recover_normal(
    theta: np.ndarray, log_lik, scales: np.ndarray, fitted: dict | None = None, score=None
) -> NormalModel | None:
    """The :class:`NormalModel` whose observations' log-likelihood ``log_lik`` (S, N; or a
    function yielding its rows a block at a time, as
    :func:`~bayesij.array.amip_logistic.recover_glm` reads it) are at the draws
    ``theta`` (S, P), the residual sd one of the quantities that ``scales`` (P,) marks;
    or None where no such quantity makes every observation a normal one with a residual
    affine in the others (to :data:`RECOVERED`, on the recovery draws), or where some
    direction of the parameters moves no observation (a hierarchy's scale or mean: its
    prior on the effects is not a fixed normal one). ``fitted``: by scale, what the
    residuals' fit gave where the pieces were offered to it as a pass read them
    (:meth:`RegressionFeed.normal`); ``log_lik`` is then not read. ``score``: the log
    posterior's gradient at the draws and the draws it is taken in, ``(gradient,
    unconstrained)`` (S, P'): where those parameters are affine in the model's (the
    quantities, the residual sd by its logarithm) and the score less the log-likelihood's
    gradient is affine in them (a normal or flat prior that does not couple the sd and
    the coefficients), the prior is known from it, as
    :func:`~bayesij.array.amip_logistic.recover_glm` has it; else Stein's estimate."""
    theta = np.asarray(theta, dtype=float)
    for scale in _scale_candidates(theta, scales):
        given = None if fitted is None else fitted.get(scale, False)
        model = _recovered(theta, log_lik, scale, given, score)
        if model is not None:
            return model
    return None


def _recovered(theta: np.ndarray, log_lik, scale: int, fitted=None, score=None):
    phi = _log_scale(theta, scale)
    whitened = _whitened(phi)
    if whitened is None:
        return None
    mean, basis, u = whitened
    rows = _recovery_rows(theta.shape[0])
    if fitted is None:
        fitted = _residuals(u[rows], theta[rows, scale], _pieces(log_lik, rows))
    coefficients = fitted or None
    if coefficients is None:
        return None
    offsets, slopes = coefficients
    held = slopes @ slopes.T + offsets.size * np.outer(basis[scale], basis[scale])
    strengths = np.linalg.eigvalsh(held)
    if strengths[0] <= 1e-12 * strengths[-1]:
        return None  # a direction no observation holds
    totals = _stats(offsets, slopes)
    model = NormalModel(mean, basis, scale, offsets, slopes, *_no_prior(u.shape[1]))
    model = model._replace(totals=totals)
    gradient = _log_lik_gradient(model, totals, u)
    known = _prior_from_score(score, phi, (basis, u, rows), gradient)
    if known is not None:
        (precision, pull), batches = known, np.zeros((0, u.shape[1], u.shape[1]))
    else:
        (precision, batches), pull = _prior_precision(u, gradient), -gradient.mean(axis=0)
    independent = _scale_apart(basis, scale, precision, batches)
    if independent is None:
        return None
    precision, batches = independent
    return model._replace(precision=precision, pull=pull, batches=batches, samples={})


def _prior_from_score(score, phi: np.ndarray, whitened: tuple, gradient: np.ndarray):
    """The prior's precision (R, R) and gradient at ``u = 0`` (R,) from the log
    posterior's ``score`` (``(gradient, unconstrained)``, (S, P')), moved into ``u`` by the
    chain rule through the affine map from the model's ``phi`` (S, P) to those parameters
    that fits the draws best, where the prior's gradient is then affine in ``u``
    (:func:`~bayesij.array.amip_logistic._known_prior`, on the recovery draws ``rows``);
    None without a score or where it is not (as where the parameters are not affine in
    ``phi``: the sd itself, whose score the map moves wrongly, tested). ``whitened``: the
    basis (P, R), the draws ``u`` (S, R) and the recovery rows; ``gradient``: the
    log-likelihood's (S, R)."""
    if score is None:
        return None
    basis, u, rows = whitened
    values, unconstrained = (np.asarray(a, dtype=float)[rows] for a in score)
    design = np.column_stack([np.ones(rows.size), phi[rows]])
    coef = np.linalg.lstsq(design, unconstrained, rcond=None)[0]  # theta = b + phi A
    in_u = values @ coef[1:].T @ basis  # d/dphi = A d/dtheta, d/du = basis' d/dphi
    return _known_prior(u[rows], gradient[rows], in_u)


#: The coupling of the residual sd and the coefficients, relative to the largest entry of
#: a prior's precision known from the gradient, taken as its round-off.
KNOWN_ROUNDING = 1e-8

#: How many batch-means standard errors a coupling of the residual sd and the coefficients
#: in the prior's estimate may reach before the prior is taken to couple them (and the
#: model is not recovered).
COUPLING_Z = 5.0


def _scale_apart(basis: np.ndarray, scale: int, precision: np.ndarray, batches: np.ndarray):
    """The prior's precision (R, R) and its batches' (B, R, R) with no coupling of the
    residual sd and the other parameters: what Stein's estimate puts there is the draws'
    Monte Carlo error, magnified wherever a set moves the sd by many posterior sds (the
    largest residuals' removal), unless it passes :data:`COUPLING_Z` standard errors (a
    prior that scales the coefficients by the sd: None, not recovered); a prior known from
    the gradient (no batches) may couple them by its round-off alone
    (:data:`KNOWN_ROUNDING`).

    On the RAND Health Insurance Experiment's fit (N = 20,190), one set of 4000 exact
    draws held a correlation of 0.059 between a coefficient and ``1 / sigma^2`` (3.7 Monte
    Carlo errors); read as the prior's, it moved that coefficient by 0.07 (70 errors of its
    mean) when the 46 largest residuals were dropped."""
    if basis.shape[0] != basis.shape[1]:
        return precision, batches
    # in the parameters (phi = mean + basis u): P_phi = W' P W, W = basis^-1
    inverse = np.linalg.inv(basis)
    full = inverse.T @ precision @ inverse
    parts = np.einsum("ki,bkl,lj->bij", inverse, batches, inverse)
    others = np.arange(basis.shape[0]) != scale
    if len(parts):  # Stein's estimate: its batch-means errors
        error = np.std(parts[:, scale, others], axis=0, ddof=1) / np.sqrt(len(parts))
        tolerance = COUPLING_Z * error
    else:  # a prior known from the gradient: its round-off
        tolerance = KNOWN_ROUNDING * max(1.0, float(np.abs(full).max()))
    if np.any(np.abs(full[scale, others]) > tolerance):
        return None
    full[scale, others] = full[others, scale] = 0.0
    parts[:, scale, others] = parts[:, others, scale] = 0.0
    back = np.einsum("ki,bkl,lj->bij", basis, parts, basis)
    return basis.T @ full @ basis, back


def _no_prior(r: int) -> tuple:
    return np.zeros((r, r)), np.zeros(r), np.zeros((0, r, r))


def _residuals(u: np.ndarray, sigma: np.ndarray, pieces) -> tuple | None:
    """The residuals' offsets (N,) and slopes (R, N) from some draws (``u`` (K, R), the
    residual sd ``sigma`` (K,) there, ``pieces`` their log-likelihood (K, n) a block of
    observations at a time), or None where some observation's ``q`` is not a rank-one
    quadratic of ``u`` to :data:`RECOVERED`: read no further than the first such piece."""
    fits, finish = residual_fits(u, sigma)
    return finish(fits.fed(pieces))


def residual_fits(u: np.ndarray, sigma: np.ndarray) -> tuple:
    """What :func:`_residuals` fits, as a :class:`~bayesij.array.amip_logistic.TileFits` to
    offer the pieces to and the function of its result that gives the offsets and slopes
    (or None): for pieces offered as a pass reads them."""
    r = u.shape[1]
    upper = np.triu_indices(r)
    design = np.column_stack([np.ones(u.shape[0]), u, u[:, upper[0]] * u[:, upper[1]]])
    if 2 * design.shape[1] > design.shape[0]:  # too many parameters for the draws to tell
        return TileFits(lambda values: None), lambda parts: None  # a quadratic apart
    solve = np.linalg.pinv(design)
    affine = np.linalg.pinv(design[:, : 1 + r])
    fit = partial(_rank_one, u, sigma, solve=solve, upper=upper, affine=affine)

    def finish(parts: list | None) -> tuple | None:
        if not parts:
            return None
        return (
            np.concatenate([c for c, _ in parts]),
            np.concatenate([v for _, v in parts], axis=1),
        )

    return TileFits(fit), finish


def _scale_candidates(theta: np.ndarray, scales: np.ndarray) -> list[int]:
    """The quantities ``scales`` (P,) marks that are positive at every draw of ``theta``
    (S, P): the residual sds :func:`recover_normal` tries, in order."""
    marked = np.flatnonzero(np.asarray(scales, dtype=bool))
    return [int(j) for j in marked if np.all(theta[:, j] > 0)]


def _log_scale(theta: np.ndarray, scale: int) -> np.ndarray:
    """The draws ``theta`` (S, P) with the residual sd ``scale`` on the log scale."""
    phi = np.array(theta)
    phi[:, scale] = np.log(phi[:, scale])
    return phi


#: Tiles of observations (:data:`~bayesij.array.amip_logistic.TILE_COLUMNS` each) a
#: :class:`RegressionFeed` copies the recovery draws' rows of at a time: 4 MiB of them.
PIECE_TILES = 4


class RegressionFeed:
    """The fits of :func:`~bayesij.array.amip_logistic.recover_glm` and
    :func:`recover_normal` made from the blocks of a lazy log-likelihood offered as a pass
    reads them, so that the models need no read of their own: the recovery draws' rows of
    each block, cut into tiles as those functions cut a block they read (the same tiles,
    so the same fits to the bit as reading the same blocks; a matrix read whole is tiled
    from its first observation, so to round-off).

    Parameters
    ----------
    theta : ndarray of shape (S, P)
        The draws :func:`~bayesij.array.amip_logistic.recover_glm` is given.
    quantities : ndarray of shape (S, Q)
        The draws :func:`recover_normal` is given, and ``scales`` (Q,) its scales.
    """

    def __init__(self, theta: np.ndarray, quantities: np.ndarray, scales: np.ndarray):
        self.rows = _recovery_rows(theta.shape[0])
        whitened = _whitened(np.asarray(theta, dtype=float))
        self._glm = None if whitened is None else predictor_fits(whitened[2][self.rows])
        quantities = np.asarray(quantities, dtype=float)
        self._normal = {}
        for scale in _scale_candidates(quantities, scales):
            found = _whitened(_log_scale(quantities, scale))
            if found is not None:
                u, sigma = found[2][self.rows], quantities[self.rows, scale]
                self._normal[scale] = residual_fits(u, sigma)

    def _fits(self) -> list:
        return [f for f, _ in ([self._glm] if self._glm else []) + list(self._normal.values())]

    def offer(self, block: np.ndarray) -> None:
        """Fit a block (n_chains, n_draws, b) of consecutive observations, in order."""
        live = [fits for fits in self._fits() if not fits.failed]
        if not live:
            return
        chains, draws = np.divmod(self.rows, block.shape[1])
        for chunk in obs_chunks(block.shape[2], self.rows.size):  # as row_pieces cuts them
            # in pieces of whole tiles (the same tiles, a smaller copy of the rows)
            for start in range(chunk.start, chunk.stop, PIECE_TILES * TILE_COLUMNS):
                stop = min(start + PIECE_TILES * TILE_COLUMNS, chunk.stop)
                piece = block[chains, draws, start:stop]
                for fits in live:
                    fits.offer(piece)

    def glm(self):
        """:func:`~bayesij.array.amip_logistic.recover_glm`'s ``fitted``."""
        if self._glm is None:
            return False
        fits, finish = self._glm
        return finish(fits.result()) or False

    def normal(self) -> dict:
        """:func:`recover_normal`'s ``fitted``."""
        return {s: finish(fits.result()) or False for s, (fits, finish) in self._normal.items()}


def _rank_one(u, sigma, values, *, solve, upper, affine) -> tuple | None:
    """The residuals' offsets (n,) and slopes (R, n) of a block of observations' values
    (K, n) at the draws ``u`` (K, R), or None (:func:`_residuals`).

    The rank-one factor is read off the quadratic's pivot column. That carries the small
    quadratic's relative round-off into ``c^2`` through ``c = v'b / 2v'v``: 10^-16 of
    ``q``'s spread left over on a residual 3000 sds out, 10^-8 at 10^5 sds, 10^-12 at 30
    sds under NumPy 2.5's BLAS, past :data:`RECOVERED`. So where more than
    :data:`REFINED` is left and the residual keeps one sign at every draw (an outlier's
    does: ``|c|`` far above ``|u'v|``), it is fitted again as the signed root of ``q``,
    affine in ``u`` (``affine``: the pseudo-inverse of ``[1, u]``), to round-off."""
    r = u.shape[1]
    if not np.all(np.isfinite(values)):
        return None
    q = -2 * sigma[:, None] ** 2 * (values + _HALF_LOG_2PI + np.log(sigma)[:, None])
    coef = solve @ q  # (F, n)
    quad = np.zeros((q.shape[1], r, r))
    quad[:, upper[0], upper[1]] = coef[1 + r :].T
    quad = 0.5 * (quad + np.swapaxes(quad, 1, 2))  # off-diagonal terms counted twice
    top = np.argmax(np.diagonal(quad, axis1=1, axis2=2), axis=1)
    pivot = quad[np.arange(top.size), top, top]
    if np.any(pivot <= 0):
        return None
    v = quad[np.arange(top.size), :, top] / np.sqrt(pivot)[:, None]  # (n, R)
    c = np.einsum("ni,in->n", v, coef[1 : 1 + r]) / (2 * np.einsum("ni,ni->n", v, v))
    spread = q - q.mean(axis=0)
    total = np.einsum("kn,kn->n", spread, spread)
    left = _left_over(q, c, v, u)
    loose = np.flatnonzero(left > REFINED * total)
    if loose.size:  # c and v are this tile's own arrays: set in place
        c[loose], v[loose] = _signed_root(u, q[:, loose], c[loose], v[loose], affine)
        left[loose] = _left_over(q[:, loose], c[loose], v[loose], u)
    if np.any(left > RECOVERED * total):
        return None
    return c, v.T


def _left_over(q: np.ndarray, c: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``sum_k (q - (c + u'v)^2)^2`` (n,) over the draws ``u`` (K, R), of ``q`` (K, n)."""
    fitted = u @ v.T
    fitted += c
    np.square(fitted, out=fitted)
    np.subtract(q, fitted, out=fitted)
    return np.einsum("kn,kn->n", fitted, fitted)


def _signed_root(u, q, c, v, affine) -> tuple:
    """``c`` (m,) and ``v`` (m, R) fitted again as ``sign(s) sqrt(q) = c + u'v`` (q: (K, m)
    at the draws ``u`` (K, R)) where the residual ``s = c + u'v`` keeps one sign at every
    draw; elsewhere as given (``c`` and ``v`` are set in place: the caller's copies)."""
    residual = c[None, :] + u @ v.T
    one_sign = (residual.min(axis=0) > 0) | (residual.max(axis=0) < 0)
    root = np.copysign(np.sqrt(np.maximum(q[:, one_sign], 0.0)), residual[:, one_sign])
    fitted = affine @ root  # (1 + R, m)
    c[one_sign], v[one_sign] = fitted[0], fitted[1:].T
    return c, v


def sample_at_mode(found: tuple | None, log_posterior, seed: int) -> tuple | None:
    """Draws ``u`` (M, R) from a multivariate t (:data:`REMOVAL_DRAWS` of them) at a
    Laplace approximation ``found`` (the mode and the covariance; None: None), their
    normalised importance weights toward ``log_posterior`` (a function of ``u``, up to a
    constant) and the weights' Pareto k-hat."""
    if found is None:
        return None
    mode, cov = found
    u, proposal = t_proposal(mode, cov, REMOVAL_DRAWS, seed)
    log_w = log_posterior(u) - proposal
    w = np.exp(log_w - log_w.max())
    return u, w / w.sum(), _ratios_khat(w)


def sampled_removal(sample: tuple | None, quantity: Affine, metric: tuple, toward):
    """The metric ``mean + sign z sd`` (``metric``: ``(sign, z)``) of the quantity under an
    importance sample (``u`` (M, R), normalised weights (M,) and k-hat; None: None) drawn
    under a prior of estimated precision, and its derivative toward each batch's estimate
    (``toward``: the batches' precisions less the estimate, (B, R, R); none: empty), as a
    :class:`~bayesij.array.amip_logistic.Removal`."""
    if sample is None:
        return None
    u, w, _ = sample
    f = quantity.at(u)
    sign, z = metric
    mean = float(w @ f)
    sd = float(np.sqrt(max(float(w @ (f - mean) ** 2), 0.0)))
    mid = mean + sign * z * sd
    if not len(toward):
        return Removal(mid, np.zeros(0))
    # d/de E_w[g] under the prior's precision moved by e D: -Cov_w(g, u'Du) / 2, that
    # is -tr(D A) / 2 with A = sum_s w_s (g_s - E_w g) u_s u_s' (R, R), the same
    # for every batch's D
    moved_mean = -0.5 * np.einsum("bij,ij->b", toward, _weighted_outer(u, w * (f - mean)))
    square = w * (f**2 - w @ f**2)
    moved_square = -0.5 * np.einsum("bij,ij->b", toward, _weighted_outer(u, square))
    moved_sd = (moved_square - 2 * mean * moved_mean) / (2 * sd) if sd > 0 else 0.0
    return Removal(mid, moved_mean + sign * z * moved_sd)


def _kept_stats(model: NormalModel, dropped) -> _Stats:
    """The sufficient statistics of the observations not in ``dropped``: every
    observation's (:attr:`NormalModel.totals`) less those of the dropped ones (each once),
    a product over the set instead of a copy of the kept observations' slopes (on the
    t(4) audit at N = 10^5, 269 removals took 4.8 s that way)."""
    totals = model.totals if model.totals is not None else _stats(model.offsets, model.slopes)
    dropped = np.unique(np.asarray(dropped, dtype=int))
    if not dropped.size:
        return totals
    gone = _stats(model.offsets[dropped], model.slopes[:, dropped])
    return _Stats(
        totals.n - gone.n, totals.e0 - gone.e0, totals.h - gone.h, totals.gram - gone.gram
    )


def _stats(offsets: np.ndarray, slopes: np.ndarray) -> _Stats:
    """The sufficient statistics of the observations of ``offsets`` (n,) and ``slopes``
    (R, n), each row of the slopes contiguous (BLAS then sums in one order, whatever the
    slopes' layout)."""
    c, v = np.ascontiguousarray(offsets), np.ascontiguousarray(slopes)
    return _Stats(float(c.size), float(c @ c), v @ c, v @ v.T)


def _weighted_outer(u: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``sum_s a_s u_s u_s'`` (R, R) of draws ``u`` (M, R) and weights ``a`` (M,)."""
    return (u * a[:, None]).T @ u


def _scale_terms(model: NormalModel, stats: _Stats, u: np.ndarray):
    """At each of ``u`` (M, R): ``s`` (M,), ``exp(-2 s)`` (M,), ``sum r v`` (M, R) and
    ``sum r^2`` (M,) of the observations of ``stats``."""
    s = model.mean[model.scale] + u @ model.basis[model.scale]
    rv = stats.h + u @ stats.gram
    squares = stats.e0 + u @ stats.h + np.einsum("mi,mi->m", u, rv)
    return s, np.exp(-2 * s), rv, squares


def _log_posterior(model: NormalModel, stats: _Stats, u: np.ndarray) -> np.ndarray:
    """The log posterior (up to a constant) of the observations of ``stats`` at ``u``
    (M, R), the prior at its estimate."""
    s, e, _, squares = _scale_terms(model, stats, u)
    prior = u @ model.pull - 0.5 * np.einsum("mi,mi->m", u @ model.precision, u)
    return prior - stats.n * (s + _HALF_LOG_2PI) - 0.5 * e * squares


def _log_lik_gradient(model: NormalModel, stats: _Stats, u: np.ndarray) -> np.ndarray:
    """The summed log-likelihood's gradient (M, R) at ``u`` (M, R)."""
    _, e, rv, squares = _scale_terms(model, stats, u)
    b = model.basis[model.scale]
    return -stats.n * b - e[:, None] * rv + (e * squares)[:, None] * b


def _laplace(model: NormalModel, stats: _Stats):
    """The mode (R,) and inverse negative Hessian there (R, R) of the posterior of the
    observations of ``stats`` (:func:`~bayesij.array.newton.laplace_mode` from the draws'
    mean ``u = 0``); None where it finds no maximum. A set whose removal moves the
    coefficients several posterior sds leaves the log posterior not concave at ``u = 0``
    (the residuals at the full data's coefficients, correlated with the slopes, make the
    Hessian in the coefficients and the log sd indefinite): on the Grunfeld investment
    regression (N = 220) the removal of 22 firm-years that make capital's coefficient
    insignificant had no mode by Newton's method alone."""
    return laplace_mode(
        lambda u: _log_posterior(model, stats, u[None, :])[0],
        lambda u: _derivatives(model, stats, u),
        np.zeros(model.basis[model.scale].size),
    )


def _derivatives(model: NormalModel, stats: _Stats, u: np.ndarray) -> tuple:
    """The log posterior's gradient (R,) and Hessian (R, R) at ``u`` (R,)."""
    b = model.basis[model.scale]
    _, e, rv, squares = _scale_terms(model, stats, u[None, :])
    e, rv, squares = float(e[0]), rv[0], float(squares[0])
    gradient = model.pull - model.precision @ u - stats.n * b - e * rv + e * squares * b
    cross = np.outer(rv, b)
    hessian = -model.precision - e * stats.gram - 2 * e * squares * np.outer(b, b)
    return gradient, hessian + 2 * e * (cross + cross.T)
