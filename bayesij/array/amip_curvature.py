"""The second-order prediction of an influential set's change: a quadratic model of each
unit's log-likelihood in the parameters, fitted across the posterior draws, and the Newton
step it implies when the set is dropped.

The first-order (influence) prediction of dropping a set ``S`` changes the parameters by
``c = -Cov(theta, L_S)``, ``L_S`` the set's summed log-likelihood at each draw. It misses
how much of the posterior's precision the set holds: on a logistic regression, dropping
100-300 of 3020 observations chosen to move a coefficient moves it 25-60 % further than
first order predicts, because the rest of the data pin it less. Fitting, across the draws,
``l_u(theta) ~ c_u + b_u' d + d' A_u d / 2`` (``d = theta - mean``) for each unit of the
set by least squares, a normal posterior tilted by ``exp(-L_S)`` is normal with precision
``Sigma^-1 + A_S`` (``A_S = sum A_u``): the mean moves by ``(I + Sigma A_S)^-1 c`` and the
covariance becomes ``(I + Sigma A_S)^-1 Sigma`` — the Newton step of the reweighted
problem, which sums the Taylor series of the weights under the quadratic model. On that
regression this second-order change was within 3-15 % of an exact refit where the first
order was 25-45 % short. It is not a bound: a normal posterior is assumed over a shift of
many posterior sds, and on a heavy-tailed regression whose outliers set the scale it
overshoots by 60 % where the first order is right. The answers therefore use the band
between the two (:func:`bayesij.array.amip_noise.nonlinear_band`), widened beyond the
second-order prediction by how far the set's log-likelihood departs from its quadratic
over the shift (its cubic terms); for a conditionally normal set, whose Newton step of a
coefficient's mean is exact, the band is around the second order
(:data:`GAUSSIAN_SHARE`), and an interval end's sd after the drop, and the residual sd's
own mean, are worked out with the coefficients integrated out given the residual sd and
its inverse gamma reweighted (:func:`_normal_drop`, :func:`_normal_scale_drop`).

The parameters are the fit's quantities when there are few of them (at most
:data:`MAX_PARAMETERS`, or :data:`MAX_MODEL_PARAMETERS` where the draws hold the
designs), else the searched quantity and those most correlated with it:
the cross terms carry much of the effect on a regression (the quantity alone gave a ratio
of 1.36 where the exact one was 1.82).

References
----------
.. [1] Giordano, R., Jordan, M. I. and Broderick, T. (2019). A higher-order Swiss army
   infinitesimal jackknife. arXiv:1907.12116.
.. [2] Kuschnig, N., Zens, G. and Crespo Cuaresma, J. (2021). Hidden in plain sight:
   influential sets in linear regression. CESifo Working Paper 9296.
.. [3] Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A. and Rubin, D. B.
   (2013). Bayesian Data Analysis, 3rd ed., section 14.2 (the normal regression's
   conjugate posterior: :func:`_normal_drop`).
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import numpy as np

from bayesij.array.amip_noise import first_order_factors
from bayesij.array.numeric import TILE, map_chunks, map_ordered, threads

__all__ = [
    "Curvature",
    "Changes",
    "SetCurvature",
    "CentredColumns",
    "MAX_PARAMETERS",
    "MAX_MODEL_PARAMETERS",
    "MAX_COLUMNS",
    "centre_into",
    "BREAKDOWN",
    "CUBIC_SCALE",
    "MIN_EXPLAINED",
    "GAUSSIAN_EXACT",
    "GAUSSIAN_SHARE",
    "curvature_of",
    "on_model_scale",
    "curvatures_of",
]

#: Up to this many quantities, the quadratic model is fitted in all of them (a design of
#: ``P + P (P + 1) / 2`` columns: 44 for 8) whatever the draws; beyond, in as many as
#: :data:`MAX_MODEL_PARAMETERS` allows.
MAX_PARAMETERS = 8

#: A model (of a mean or of an interval end) is fitted in all the quantities up to this
#: many, where the draws hold its quadratic and cubic designs (four draws per column: 454
#: columns for 12, 968 for 16); past that, or with fewer draws, in as many as they hold
#: (never fewer than :data:`MAX_PARAMETERS`): the searched quantity, the scales (a mean's
#: model) and the most correlated others. An observation's log-likelihood moves with
#: every coefficient of its regression, and a quadratic in eight of eleven quantities
#: left up to a third of an outlier's unexplained (below :data:`MIN_EXPLAINED`): the band
#: at that size opened to -inf to inf and the smallest set's size interval fell to 1, so
#: a refit-confirmed set of 5 read "undetermined". On ``benchmarks/audit.py``'s
#: regression (ten coefficients and sigma, t(4) noise; eleven data sets, 231 questions,
#: exact refits) the draws decide 155 instead of 125 with the means' models in all
#: quantities (stop 95), and 209 with the interval ends' too (stop 96: their sd after a
#: normal set worked out where the draws do not measure the variance's growth,
#: :meth:`Curvature._normal_removal`), none refuted.
MAX_MODEL_PARAMETERS = 16

#: The second-order prediction is not trusted for a set that holds more than this share of
#: the posterior precision in some direction (an eigenvalue of ``I + Sigma A_S`` below
#: ``1 - BREAKDOWN``): the change is then unbounded as far as the draws can tell.
BREAKDOWN = 0.75

#: A departure of the set's log-likelihood from its quadratic
#: (:meth:`Curvature._cubic_share`) of this much or more widens the band beyond the
#: second-order prediction by the whole second-order term (the gap between the orders);
#: less, proportionally less (a log-likelihood quadratic in the parameters: not at all).
#: The departure was 0.002-0.4 on a logistic regression's sets of 25-302 of 3020, where
#: the exact change lay up to 7 % of the second-order term beyond the second-order
#: prediction; for units with a cubic log-likelihood under a normal posterior (exact by
#: quadrature) 35-85 % at a departure of 0.004-0.02, and 110 % at 0.05 (a band short by
#: 1.3 % of the change). Half the term left the first of these outside; one and a half
#: turned the field experiment's refit-confirmed sign set (24, minimal 23) into an upper
#: bound.
CUBIC_SCALE = 0.01

#: The quadratic model is used only where it explains at least this share of the set's
#: log-likelihood's variance over the draws (about 1 for a regression's observations in
#: the coefficients); below it — a hierarchy's groups, whose log-likelihood moves with
#: their own effects, not with the global quantities the model is fitted in (0.001 on a
#: normal hierarchy) — the linearisation error is unbounded as far as the draws can
#: tell, and only a refit decides.
MIN_EXPLAINED = 0.9

#: A parameter is stepped with the scales held only when its draws show no dependence of
#: its mean on them at this level (a robust Wald test; a regression's coefficients, whose
#: posterior mean does not depend on the residual sd, pass it but for one time in a
#: thousand, independent draws).
MEAN_FREE_LEVEL = 0.001

#: The growth of a parameter's variance with a scale's logarithm (:func:`_elasticity`) is
#: used only where the draws measure it to this standard error or better.
ELASTICITY_ERROR = 0.5

#: Prefix sizes at which the departure from the quadratic is computed.
CUBIC_GRID = 24

#: A set's log-likelihood is conditionally normal (:meth:`Curvature._gaussian`) when the
#: normal family's design (quadratic in the other parameters, times ``1 / s^2`` for each
#: scale ``s``) leaves less than this share of its variance over the draws: about 1e-23 on
#: normal regressions (round-off), 1e-6 to 1e-3 on a logistic regression's sets.
GAUSSIAN_EXACT = 1e-9

#: Where the set's log-likelihood is conditionally normal and the metric is a
#: coefficient's posterior mean (or an interval end worked out by :func:`_normal_drop`),
#: the band is the second-order
#: prediction give or take this share of the gap between the orders (elsewhere it reaches
#: back to the first-order prediction, and beyond the second by the cubic share): the
#: second-order step of the coefficients with the scales held is then the exact Newton
#: step of a normal posterior, off by its own Monte Carlo error and the scale's step. On
#: normal regressions (kidiq- and mesquite-shaped, 4000 draws, exact refits, every
#: coefficient's sign along the found sets) the exact change lay 67-138 % of the way from
#: the first-order prediction to the second.
GAUSSIAN_SHARE = 0.5


class Curvature(NamedTuple):
    """Draws of the parameters the quadratic model is fitted in, and its design.

    Attributes
    ----------
    design : ndarray of shape (S, F)
        Centred draws ``d`` (P columns) and their centred products ``d_i d_j``, ``i <= j``.
    pairs : tuple of ndarray
        The ``(i, j)`` of each product column.
    cov : ndarray of shape (P, P)
        The draws' covariance ``Sigma`` (divisor S).
    column : int
        The searched quantity's column.
    fit : ndarray of shape (F, S)
        The design's pseudo-inverse: a unit's least-squares coefficients from its
        log-likelihood at the draws (computed once, used for every set).
    cubic_post : ndarray of shape (C, C) or None
        With the last ``C`` columns of ``share_map`` (``Z``, the draws' cubic monomials of
        :func:`_triples` less their quadratic part, each scaled to unit length), the factor
        of their pseudo-inverse :attr:`cubic` ``= (Z @ cubic_post).T`` (``pinv(Z'Z)`` over
        the scales); None when the draws are too few for them (fewer than four times the
        columns of both designs).
    terms_map : ndarray of shape (P + F - P, S)
        The centred draws' rows ``design[:, :P].T`` over the rows ``fit[P:]``: a unit's
        covariance with the parameters and its quadratic's coefficients in one product.
    share_map : ndarray of shape (S, F + C)
        ``fit.T`` (``fit`` is a view of it) and ``Z`` side by side: a prefix's quadratic
        coefficients, and its cubic ones before ``cubic_post``, in one product.
    gram : ndarray of shape (F, F)
        ``design.T @ design``: the squared length of a fitted quadratic from its
        coefficients.
    scales : ndarray of bool, shape (P,) or None
        The parameters that are scales, modelled on the log scale (:func:`curvatures_of`'s
        ``scales``); None when there are none.
    elasticity : ndarray of shape (P, P) or None
        ``elasticity[e, j]``: how a parameter's posterior variance grows with scale ``j``'s
        logarithm across the draws, ``d log E[(theta_e - mean)^2 | log s_j] / d log s_j``
        (2 for a normal regression's coefficients in its residual sd, 0 for a quantity
        the scale does not spread).
    gaussian_basis : ndarray of shape (S, R) or None
        An orthonormal basis of the normal family's design over the draws
        (:func:`_gaussian_basis`): a set's log-likelihood in its span is that of normal
        observations with these scales as their sd, or of known sd without scales
        (:meth:`_gaussian`); None when every parameter is a scale.
    mean_free : ndarray of bool, shape (P,) or None
        The parameters whose mean does not move with the scales across the draws (no
        dependence of ``theta_e`` on the log-scales and their squares detectable at
        :data:`MEAN_FREE_LEVEL`): a regression's coefficients (their posterior mean is the
        least-squares fit whatever the residual sd), not a hierarchy's mean (weighted by
        its groups' sd). Only they are stepped with the scales held.
    normal_scale : tuple or None
        For a scale searched itself (modelled as it is) whose model's other parameters are
        normal given it as a regression's coefficients are (:func:`_the_normal_scale` of
        the model with it on the log scale): ``(form, mean)``, that model's
        :attr:`normal_form` and the scale's mean, from which its mean after a normal
        set's drop is worked out (:func:`_normal_scale_drop`); else None.
    normal_form : _NormalForm or None
        With one scale among the parameters (on the log scale), the others' normal form
        given it (:func:`_normal_form`), worked out once for every set's
        :func:`_normal_fit`; else None.
    plain_influences : bool
        Whether the searches' first order is the draws' plain covariances (no control
        variates). Only then is an interval end's sd after a normal set worked out where
        the draws do not measure its variance's growth with the scale
        (:meth:`_normal_removal`), its first order of the variance that covariance
        (:func:`_variance_influence`). With control variates the held step stands: on
        the heavy-tailed field experiments the normal form's band, widened for the
        unmeasured growth, made significance sets of 15 where the OLS AMIP's is 7, and
        unwidened it put the smallest set at most 49 where the exact one is 87.
    """

    design: np.ndarray
    pairs: tuple
    cov: np.ndarray
    column: int
    fit: np.ndarray
    cubic_post: np.ndarray | None
    terms_map: np.ndarray
    share_map: np.ndarray
    gram: np.ndarray
    scales: np.ndarray | None = None
    elasticity: np.ndarray | None = None
    mean_free: np.ndarray | None = None
    gaussian_basis: np.ndarray | None = None
    normal_scale: tuple | None = None
    normal_form: _NormalForm | None = None
    plain_influences: bool = True

    @property
    def n_parameters(self) -> int:
        return self.cov.shape[0]

    @property
    def cubic(self) -> np.ndarray | None:
        """The pseudo-inverse (C, S) of the draws' cubic monomials less their quadratic
        part (computed when asked for: the searches use its factors); None when the draws
        are too few for them."""
        if self.cubic_post is None:
            return None
        return (self.share_map[:, self.design.shape[1] :] @ self.cubic_post).T

    def unit_terms(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's first-order change of the parameters ``-Cov(theta, l_u)`` (K, P) and
        the Hessian ``A_u`` (K, P, P) of its fitted quadratic, from its log-likelihood at
        the draws ``columns`` (S, K) (non-finite values count as 0, as the first-order
        change does)."""
        first, quad = self._coefficients(_centred(columns))
        return first, self._hessians(quad)

    def _coefficients(self, centred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's first-order change (K, P) and its quadratic's coefficients (K, F2),
        from the centred columns (S, K) (:func:`_centred`; a transposed view of
        :class:`CentredColumns`' rows)."""
        p = self.n_parameters
        both = (self.terms_map @ centred).T  # least squares: the design's pseudo-inverse
        return both[:, :p] / -centred.shape[0], both[:, p:]

    def _hessians(self, quad: np.ndarray) -> np.ndarray:
        """The Hessians ``A_u`` (K, P, P) of the quadratics with coefficients ``quad``."""
        p = self.n_parameters
        hessian = np.zeros((quad.shape[0], p, p))
        i, j = self.pairs
        hessian[:, i, j] += quad
        hessian[:, j, i] += quad  # the diagonal twice: 2 gamma_ii, off-diagonal gamma_ij
        return hessian

    def changes(self, columns: np.ndarray, sign: int, z: float) -> Changes:
        """The metric ``mean + sign z sd`` of the searched quantity after dropping each
        prefix of the units whose log-likelihood is ``columns`` (S, K), in that order, to
        first and to second order under the quadratic model, and how far the second may be
        off (:class:`Changes`)."""
        centred = _centred(columns)
        first, quad = self._coefficients(centred)
        grid = _cubic_grid(centred.shape[1])
        sums = np.add.reduceat(centred, np.concatenate([[0], grid[:-1]]), axis=1)
        return self._changes(first, self._hessians(quad), grid, np.cumsum(sums.T, axis=0), sign, z)

    def changes_along(
        self, store: CentredColumns, units: np.ndarray, sign: int, z: float
    ) -> Changes:
        """:meth:`changes` of the units ``units`` of ``store`` (each unit's terms computed
        once per model, kept by the store)."""
        first, hessians = store.terms(self, units)
        grid = _cubic_grid(units.size)
        return self._changes(first, hessians, grid, store.prefix_sums(units, grid), sign, z)

    def changes_each(
        self, store: CentredColumns, units: np.ndarray, sign: int, z: float
    ) -> Changes:
        """The :class:`Changes` of dropping each of ``units`` of ``store`` alone (K,), not
        of their prefixes: where a unit's removal moves the metric more than its first
        order says (a high-leverage observation, whose removal a Newton step scales by
        about ``1 / (1 - h)``), it may reach a target alone that its rank in the first
        order puts out of reach."""
        first, hessians = store.terms(self, units)
        each = np.arange(1, units.size + 1)  # every "prefix" one unit: no interpolation
        return self._changes(first, hessians, each, store.rows_of(units), sign, z, alone=True)

    def _changes(
        self, first_terms, hessians, grid, sums, sign: int, z: float, alone: bool = False
    ) -> Changes:
        """:meth:`changes` from the units' terms and the centred log-likelihood summed over
        the prefixes of the sizes ``grid`` (G, S); ``alone``: of each unit alone (``grid``
        every size, ``sums`` each unit's row)."""
        c = first_terms if alone else np.cumsum(first_terms, axis=0)  # (K, P)
        a = hessians if alone else np.cumsum(hessians, axis=0)  # (K, P, P)
        e, sigma = self.column, self.cov
        sd = np.sqrt(sigma[e, e])
        d_var_first = -(np.matmul(sigma, a)[:, e] @ sigma[:, e])  # -(Sigma A Sigma)_ee
        first = c[:, e] + sign * z * (np.sqrt(np.maximum(sd**2 + d_var_first, 0.0)) - sd)
        holding = self._held(e)
        if holding is not None:  # the two blocks' steps apart
            a, sigma = _scales_held(a, holding[0]), _scales_held(sigma, holding[0])
        sigma_a = np.matmul(sigma, a)  # Sigma A_k
        # I + Sigma A has the eigenvalues of the symmetric I + R A R (R = Sigma^1/2)
        root = _symmetric_root(sigma)
        step = np.eye(self.n_parameters) + sigma_a
        tilted = np.eye(self.n_parameters) + root @ a @ root
        ok = _above_breakdown(tilted)
        smallest = np.linalg.eigvalsh(tilted[grid - 1])[:, 0]  # where the cubic share is
        safe = np.where(ok[:, None, None], step, np.eye(self.n_parameters))
        # (I + Sigma A)^-1 c and column e of (I + Sigma A)^-1 Sigma, in one solve
        sides = np.stack([c, np.broadcast_to(sigma[:, e], c.shape)], axis=-1)
        solved = np.linalg.solve(safe, sides)
        shift, var = solved[..., 0], solved[:, e, 1]  # (K, P), (K,)
        if holding is not None:  # the variance given the scales, spread by their change
            scales, kappa = holding
            var = var * np.exp(shift[:, scales] @ kappa[scales])
        second = shift[:, e] + sign * z * (np.sqrt(np.maximum(var, 0.0)) - sd)
        # An interval end of a coefficient normal given one residual sd: its sd after the
        # drop worked out where the set is normal observations (_normal_drop).
        removal = self._normal_removal(grid, sums, alone) if holding is not None and sign else None
        unknown_growth: float | np.ndarray = 0.0  # the band's widening for it
        if removal is not None:
            sd_after, exact_sd, off_by = removal
            second = np.where(exact_sd, shift[:, e] + sign * z * (sd_after - sd), second)
            if off_by.any():  # the growth not measured: the first order the influences'
                unknown_growth = np.where(exact_sd, z * off_by, 0.0)
                d_var_first = _variance_influence(self.design[:, e], grid, sums, c.shape[0])
                moved = np.sqrt(np.maximum(sd**2 + d_var_first, 0.0)) - sd
                first = np.where(exact_sd, c[:, e] + sign * z * moved, first)
        scale = self._scale_removal(grid, sums, alone) if sign == 0 else None
        if scale is not None:  # the scale's own mean after a normal set: worked out
            second = np.where(scale[1], scale[0], second)
            ok = ok | scale[1]
        runaway = np.copysign(np.inf, np.where(first == 0, 1.0, first))
        second = np.where(ok, second, runaway)
        cubic, explained = self._cubic_share(grid, sums, shift, smallest, root)
        held = explained >= MIN_EXPLAINED
        weight = np.where(held, np.minimum(1.0, cubic / CUBIC_SCALE), np.inf)
        # A conditionally normal set: the band is the second-order prediction give or take
        # GAUSSIAN_SHARE of the gap between the orders (its cubic share is the scale's,
        # which the coefficients' step holds).
        exact_step = holding is not None or self.scales is None  # held, or no scale at all
        gaussian = self._gaussian(grid, sums, exact_step and (sign == 0 or removal is not None))
        if sign and removal is not None:
            gaussian &= removal[1]
        weight = np.where(gaussian, np.minimum(weight, GAUSSIAN_SHARE), weight)
        if scale is not None:  # the quadratic's cubic share does not bear on that removal
            gaussian |= scale[1]
            weight = np.where(scale[1], GAUSSIAN_SHARE, weight)
        with np.errstate(invalid="ignore"):
            beyond = weight * np.abs(second - first) + unknown_growth
        # Past the breakdown: inf where the quadratic explains the set (the change runs
        # away in the first order's direction), NaN where it does not (no side is known).
        past = np.where(held, np.inf, np.nan)
        near = np.where(gaussian, GAUSSIAN_SHARE, 0.0)
        return Changes(first, second, weight, cubic, np.where(ok, beyond, past), near)

    def _gaussian(self, grid, sums, held: bool) -> np.ndarray:
        """Whether each prefix's log-likelihood (K,) is that of normal observations whose
        sd are the held scales (its share of variance outside :attr:`gaussian_basis` below
        :data:`GAUSSIAN_EXACT`, at the first size of ``grid`` that holds the prefix): the
        Newton step of the other parameters' means is then exact for a normal posterior.
        Without scales, whether it is quadratic in the parameters (a normal likelihood of
        known sd). False unless ``held``: a step of a posterior mean that holds the scales,
        or of a model without them, or an interval end whose sd :meth:`_normal_removal`
        works out (its own Newton step is not exact: on a mesquite-shaped fit a
        significance set's second-order change was 2.5 times the exact one)."""
        k = int(grid[-1])
        if not held or self.gaussian_basis is None:
            return np.zeros(k, dtype=bool)
        inside = sums @ self.gaussian_basis  # (G, R); the basis is orthonormal
        totals = np.einsum("gs,gs->g", sums, sums)
        left = totals - np.einsum("gr,gr->g", inside, inside)  # the residual's length^2
        exact = (left <= GAUSSIAN_EXACT * totals) | (totals == 0)
        at = np.searchsorted(grid, np.arange(1, k + 1))  # the first grid size >= each size
        return exact[at]

    def _normal_removal(self, grid, sums, alone: bool = False) -> tuple | None:
        """The searched coefficient's posterior sd after dropping each prefix, where that
        is exact, and how far it may be off (each (K,)), for a model whose coefficients are
        normal given one scale ``s`` with covariance ``s^2 V`` (:func:`_the_normal_scale`;
        where the draws do not measure the growth of the variance with ``s^2``, a scale
        known to a few percent, and the influences are plain (:attr:`plain_influences`),
        the sd is worked out with the regression's growth, 2, and may be off by its
        distance from the sd had the variance not grown at all) and prefixes whose
        log-likelihood is that of normal observations of sd ``s`` (fitted across the
        draws at the sizes ``grid`` from their centred sums ``sums`` (G, S), interpolated
        between: :func:`_normal_drop`); None for another model."""
        j = _the_normal_scale(self, unmeasured=self.plain_influences)
        if j is None or j == self.column or self.normal_form is None:
            return None
        others = np.flatnonzero(np.arange(self.n_parameters) != j)
        e = int(np.flatnonzero(others == self.column)[0])
        scaled, ok, still = _normal_drop(self.normal_form, sums, e)
        sizes = np.arange(1, int(grid[-1]) + 1)
        at = np.searchsorted(grid, sizes)
        exact = _exact_at(ok, at, alone)
        ratio = np.interp(sizes, np.concatenate([[0], grid]), scaled / scaled[0])
        sd = np.sqrt(self.cov[self.column, self.column])  # from the draws' sd
        spread = np.zeros(sizes.size)
        if _the_normal_scale(self) is None:  # the growth not measured: 2 or none
            unmoved = np.interp(sizes, np.concatenate([[0], grid]), np.r_[1.0, still / scaled[0]])
            spread = sd * np.abs(ratio - unmoved)
        return sd * ratio, exact, spread

    def _scale_removal(self, grid, sums, alone: bool = False) -> tuple | None:
        """The searched scale's mean's change after dropping each prefix (K,), and where
        that is exact (K,), for a scale whose model's other parameters are normal given it
        (:attr:`normal_scale`) and prefixes whose log-likelihood is that of normal
        observations of sd ``s`` (fitted across the draws at the sizes ``grid`` from
        their centred sums ``sums`` (G, S), interpolated between:
        :func:`_normal_scale_drop`); None for another model."""
        if self.normal_scale is None:
            return None
        form, mean = self.normal_scale
        ratio, ok = _normal_scale_drop(form, sums)
        sizes = np.arange(1, int(grid[-1]) + 1)
        at = np.searchsorted(grid, sizes)
        exact = _exact_at(ok, at, alone)
        ratio = np.interp(sizes, np.concatenate([[0], grid]), np.concatenate([[1.0], ratio]))
        return mean * (ratio - 1.0), exact

    def _held(self, e: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The scales (P,) and parameter ``e``'s variance elasticities in them (P,) when its
        step holds them (:attr:`mean_free`, not itself a scale); None for the joint step."""
        scales, kappa, free = self.scales, self.elasticity, self.mean_free
        if scales is None or kappa is None or free is None or scales[e] or not free[e]:
            return None
        return scales, kappa[e]

    def _cubic_share(self, grid, sums, shift, smallest, root) -> tuple[np.ndarray, np.ndarray]:
        """How far each prefix's summed log-likelihood departs from its quadratic over the
        predicted shift (K,): the cubic terms left after the quadratic fit (all of them,
        fitted across the draws) change the Hessian by ``H3(shift)`` at the shift's end,
        half that on average along the way; in whitened coordinates and relative to the
        tilted precision there (the smallest eigenvalue of ``I + Sigma A``, ``smallest``
        (G,), at the sizes ``grid``), ``||Sigma^1/2 H3 Sigma^1/2|| / 2 / lambda_min``
        (``lambda_min`` at least
        ``1 - BREAKDOWN``). Exactly 0 where the
        log-likelihood is quadratic in the parameters (a normal linear model with known
        scale). Computed at the prefix sizes ``grid`` (:func:`_cubic_grid`), from the
        centred log-likelihood summed over each of those prefixes (``sums``, (G, S)),
        interpolated between. Also the share of the set's log-likelihood's variance over the
        draws that the quadratic explains (K,), from the same fits. ``root``:
        ``Sigma^1/2``."""
        k = shift.shape[0]
        if self.cubic_post is None:
            return np.full(k, np.inf), np.ones(k)
        cubic, explained = self._prefix_fits(sums)
        change = _cubic_hessian(cubic, shift[grid - 1], self.n_parameters)
        white = root @ change @ root  # (G, P, P)
        lowest = np.maximum(smallest, 1 - BREAKDOWN)
        shares = 0.5 * np.max(np.abs(np.linalg.eigvalsh(white)), axis=1) / lowest
        sizes = np.arange(1, k + 1)
        return np.interp(sizes, grid, shares), np.interp(sizes, grid, explained)

    def _prefix_fits(self, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The cubic coefficients (G, C) of what the quadratic leaves of each prefix's
        centred log-likelihood ``sums`` (G, S), and the share of its variance over the
        draws that the quadratic explains (G,; 1 for a prefix constant over the draws).
        Both from one product: the cubic pseudo-inverse's rows are orthogonal to the
        design, so the residual has the prefix's own cubic coefficients, and its squared
        length is the prefix's less its projection's (``c' Z'Z c``)."""
        n_quadratic = self.gram.shape[0]
        both = sums @ self.share_map  # (G, F + C)
        quadratic, cubic = both[:, :n_quadratic], both[:, n_quadratic:] @ self.cubic_post
        totals = np.einsum("gs,gs->g", sums, sums)
        fitted = np.einsum("gi,ij,gj->g", quadratic, self.gram, quadratic)
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = np.where(totals > 0, np.minimum(fitted / totals, 1.0), 1.0)
        return cubic, explained

    def ratios(self, columns: np.ndarray, sign: int, z: float) -> np.ndarray:
        """The second-order prediction relative to the first after each prefix, and the
        band's widening beyond it relative to the first (2, K; :meth:`Changes.factors`):
        what carries a first-order prediction (of
        any estimator: plain, control variates, the block bootstrap's replicates) into the
        band of :func:`bayesij.array.amip_noise.nonlinear_band`; ``(1, 0)`` where the
        first-order change is 0, ``inf`` past the breakdown."""
        return self.changes(columns, sign, z).factors()


def _scales_held(a: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Matrices ``a`` (..., P, P) (the Hessians, the covariance) without the cross terms
    between the scales and the other parameters: the Newton step of the others with the
    scales held, and of the scales with the others held. On a normal regression the one
    joint step overshoots the coefficients' exact change by 20-120 % (a set of outliers
    moves the residual sd far, and the cross terms carry that move into the coefficients),
    where the posterior mean of the coefficients does not depend on the residual sd at
    all; held, within 9 % of the exact refit on the benchmarks' normal regressions."""
    out = a.copy()
    cross = scales[:, None] != scales[None, :]
    out[..., cross] = 0.0
    return out


def _variance_influence(centred: np.ndarray, grid, sums: np.ndarray, k: int) -> np.ndarray:
    """The first-order change of a parameter's posterior variance after dropping each
    prefix (K,): ``-Cov((theta - mean)^2, l_S)`` over the draws, the influence that the
    searches' first order reads (:func:`bayesij.array.amip.metric_influence`), from the
    parameter's centred draws ``centred`` (S,) and the prefixes' centred log-likelihood
    ``sums`` (G, S) at the sizes ``grid``, interpolated between. The quadratic's own
    ``-(Sigma A Sigma)_ee`` misses the variance's growth with a residual sd that an
    outlier moves where the draws do not measure that growth (a scale known to a few
    percent): on a t(4) regression a set of three outliers read about 0 there, against
    the influences' -0.0053 and the exact refit's -0.0016 for the sd, so the second
    order's ratio to the first was applied to a first order 1.8 times its own. (Where the
    growth is measured the quadratic's stands: a covariance with heavy-tailed outliers
    is noisy, and with control variates the searches' influences are not the plain
    covariance.)"""
    square = centred**2
    at_grid = -(sums @ (square - square.mean())) / square.size
    sizes = np.arange(1, k + 1)
    return np.interp(sizes, np.concatenate([[0], grid]), np.concatenate([[0.0], at_grid]))


def _normal_drop(form: _NormalForm, sums: np.ndarray, e: int) -> tuple:
    """Coefficient ``e``'s posterior sd before and after dropping each of the sets whose
    centred log-likelihood over the draws is ``sums`` (G, S), for coefficients normal
    given a scale ``s`` with covariance ``s^2 V`` and sets of normal observations of sd
    ``s`` (:func:`_normal_fit` of ``form``). Returns ``(sd, ok)``: ``sqrt(E[s^2]
    V'_ee)`` with ``E[s^2]`` after the drop (G + 1,; the sd before the drop first), and
    whether the set fits the form,
    ``I - V^1/2 M V^1/2`` is short of :data:`BREAKDOWN` and the reweighted inverse gamma
    has a mean (G,); and the sd after the drop had the variance not grown with ``s^2``
    (G,)."""
    squares, a, c, after, v, ok = _normal_fit(form, sums)
    spread, fits = _inverse_gamma_after(squares, a, c)
    ok &= fits
    before = squares.mean()
    scaled = np.sqrt(np.where(ok, spread, before) * after[:, e, e])
    unmoved = np.sqrt(before * after[:, e, e])  # had the variance not grown with s^2
    return np.concatenate([np.sqrt([before * v[e, e]]), scaled]), ok, unmoved


def _normal_scale_drop(form: _NormalForm, sums: np.ndarray) -> tuple:
    """The scale's posterior mean after dropping each of the sets whose centred
    log-likelihood over the draws is ``sums`` (G, S), over its mean before (G,), for the
    model of :func:`_normal_drop` (``form``):
    ``E[s] = sqrt(beta) Gamma(alpha - 1/2) / Gamma(alpha)`` under ``s^2 ~ InvGamma(alpha,
    beta)``, before and after the reweighting (:func:`_inverse_gamma_after`; exact for a
    normal regression's residual sd under a flat or conjugate prior). Also whether each
    is worked out so (G,); the ratio is 1 where not."""
    from scipy.special import gammaln

    squares, a, c, _, _, ok = _normal_fit(form, sums)
    alpha, beta, shaped = _inverse_gamma_of(squares)
    alpha_after, beta_after = alpha + a / 2.0, beta - c / 2.0
    ok &= (alpha_after > 2.0) & (beta_after > 0.0) & shaped
    with np.errstate(divide="ignore", invalid="ignore"):
        after = gammaln(alpha_after - 0.5) - gammaln(alpha_after)
        log_ratio = 0.5 * np.log(beta_after / beta) + after - gammaln(alpha - 0.5) + gammaln(alpha)
    return np.where(ok, np.exp(np.where(ok, log_ratio, 0.0)), 1.0), ok


class _NormalForm(NamedTuple):
    """What :func:`_normal_fit` needs of the draws, worked out once per model
    (:func:`_normal_form`): coefficients ``u`` (S, p, centred) normal given a scale ``s``
    (``t`` (S,): the centred ``log s``) with covariance ``s^2 V``.

    Attributes
    ----------
    squares : ndarray of shape (S,)
        ``s^2`` up to a constant factor.
    design : ndarray of shape (S, F)
        The centred columns ``log s``, ``1 / s^2``, ``u / s^2`` and ``u_i u_j / s^2``
        (``i <= j``), ``F = 2 + p + p (p + 1) / 2``.
    fit : ndarray of shape (F, S)
        The design's pseudo-inverse: a set's least-squares coefficients on it.
    v : ndarray of shape (p, p)
        ``V = E[u u' / s^2]``.
    """

    squares: np.ndarray
    design: np.ndarray
    fit: np.ndarray
    v: np.ndarray


def _normal_form(u: np.ndarray, t: np.ndarray) -> _NormalForm:
    """The :class:`_NormalForm` of coefficients ``u`` (S, p) given the scale whose centred
    logarithm is ``t`` (S,); its pseudo-inverse is computed once for all the sets (a
    least-squares solve per call was a tenth of a 10^4-observation audit)."""
    inverse = np.exp(-2.0 * (t - t.max()))  # 1 / s^2 up to a constant factor
    i, j = np.triu_indices(u.shape[1])
    design = np.column_stack(
        [t, inverse, u * inverse[:, None], u[:, i] * u[:, j] * inverse[:, None]]
    )
    design -= design.mean(axis=0)
    v = (u * inverse[:, None]).T @ u / u.shape[0]  # E[u u' / s^2]
    return _NormalForm(1.0 / inverse, design, _pseudo_inverse(design), v)


def _normal_fit(form: _NormalForm, sums: np.ndarray) -> tuple:
    """Each set's log-likelihood fitted as ``a log s - (r + 2 h'u + u'Mu) / (2 s^2)``
    across the draws (least squares; exact for a normal regression's observations), for
    the model ``form`` (:func:`_normal_form`). Dropping a set, the coefficients given ``s``
    stay normal, of covariance ``s^2 V'``, ``V' = (V^-1 - M)^-1``, and ``s^2``'s posterior
    is reweighted by ``s^-a exp(c / (2 s^2))``, ``c = r + h'V'h`` (the coefficients
    integrated out in closed form). Returns ``s^2`` up to a constant factor (S,), ``a``
    and ``c`` (G,), ``V'`` (G, p, p), ``V`` (p, p) and whether the set fits the form and
    ``I - V^1/2 M V^1/2`` is short of :data:`BREAKDOWN` (G,)."""
    v = form.v
    p = v.shape[0]
    i, j = np.triu_indices(p)
    coef = form.fit @ sums.T  # (F, G)
    hessian = np.zeros((sums.shape[0], p, p))
    hessian[:, i, j] = hessian[:, j, i] = -coef[2 + p :].T
    hessian[:, np.arange(p), np.arange(p)] *= 2.0  # a square's coefficient is -M_aa / 2
    root = _symmetric_root(v)
    ok = _above_breakdown(np.eye(p) - root @ hessian @ root)
    precision = np.linalg.inv(v)
    after = np.linalg.inv(np.where(ok[:, None, None], precision - hessian, precision))
    h = -coef[2 : 2 + p].T  # (G, p)
    c = -2.0 * coef[1] + np.einsum("gi,gij,gj->g", h, after, h)
    ok &= _explained_exactly(form.design, coef, sums)
    return form.squares, coef[0], c, after, v, ok


def _inverse_gamma_after(squares: np.ndarray, a: np.ndarray, c: np.ndarray) -> tuple:
    """The mean of a squared scale ``s^2`` after its draws ``squares`` (S,) are reweighted
    by ``s^-a exp(c / (2 s^2))`` (``a``, ``c``: (G,)), with its posterior taken as the
    inverse gamma of the draws' mean and variance (:func:`_inverse_gamma_of`):
    ``InvGamma(alpha, beta)`` becomes ``InvGamma(alpha + a / 2, beta - c / 2)`` (exact for
    a regression's residual variance under a flat or conjugate prior). Also whether that
    inverse gamma has a mean (G,) and the draws follow one."""
    alpha, beta, shaped = _inverse_gamma_of(squares)
    alpha_after, beta_after = alpha + a / 2.0, beta - c / 2.0
    fits = (alpha_after > 2.0) & (beta_after > 0.0) & shaped
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(fits, beta_after / (alpha_after - 1.0), np.nan), fits


def _inverse_gamma_of(squares: np.ndarray) -> tuple:
    """``alpha`` and ``beta`` of the inverse gamma with the mean and variance of the draws
    ``squares`` (S,) of a squared scale, and whether the draws follow one (their log's
    skewness within two standard errors of its own)."""
    from scipy.special import polygamma

    mean, var = squares.mean(), squares.var()
    alpha = mean**2 / var + 2.0
    beta = mean * (alpha - 1.0)
    logs = np.log(squares)
    centred = logs - logs.mean()
    skew = np.mean(centred**3) / np.mean(centred**2) ** 1.5
    expected = -polygamma(2, alpha) / polygamma(1, alpha) ** 1.5  # of log s^2, sign flipped
    return alpha, beta, abs(skew - expected) <= 2.0 * np.sqrt(6.0 / squares.size)


def _explained_exactly(design: np.ndarray, coef: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Whether each of ``sums`` (G, S) is its least-squares fit ``coef`` (F, G) on the
    centred ``design`` (S, F; :attr:`_NormalForm.design`, centred once for every set) to
    :data:`GAUSSIAN_EXACT` of its variance (G,)."""
    residual = sums - (design @ coef).T
    totals = np.einsum("gs,gs->g", sums, sums)
    left = np.einsum("gs,gs->g", residual, residual)
    return (left <= GAUSSIAN_EXACT * totals) | (totals == 0)


def _above_breakdown(tilted: np.ndarray) -> np.ndarray:
    """Whether the smallest eigenvalue of each symmetric matrix (K, P, P) exceeds ``1 -
    BREAKDOWN`` (K,): the matrices less that are factorised by Cholesky in one batch (the
    usual case: all positive definite), else their eigenvalues decide."""
    shifted = tilted - (1 - BREAKDOWN) * np.eye(tilted.shape[-1])
    if np.isfinite(shifted).all():
        try:
            np.linalg.cholesky(shifted)
            return np.ones(len(tilted), dtype=bool)
        except np.linalg.LinAlgError:
            pass
    return np.linalg.eigvalsh(tilted)[:, 0] > 1 - BREAKDOWN


def _exact_at(ok: np.ndarray, at: np.ndarray, alone: bool) -> np.ndarray:
    """Where a worked-out removal holds at each size (K,) from where it holds at the grid's
    sizes ``ok`` (G,): between two grid sizes where it holds at both (``at``: the first
    grid size at or above each size); ``alone``, each size its own unit, where it holds."""
    return ok[at] if alone else ok[at] & ok[np.maximum(at - 1, 0)]


@functools.lru_cache(maxsize=64)
def _cubic_grid(k: int) -> np.ndarray:
    """The prefix sizes (at most :data:`CUBIC_GRID`, geometric from 1 to ``k``) at which
    :meth:`Curvature._cubic_share` is computed (read-only, kept)."""
    grid = np.unique(np.geomspace(1, k, min(k, CUBIC_GRID)).round().astype(int))
    grid.flags.writeable = False
    return grid


def _centred(columns: np.ndarray) -> np.ndarray:
    """Log-likelihood columns (S, K) less their means over the draws, non-finite values
    counting as 0 (as the first-order change counts them)."""
    values = np.where(np.isfinite(columns), columns, 0.0)
    values -= values.mean(axis=0)
    return values


class Changes(NamedTuple):
    """A set's predicted change after each prefix (each (K,)).

    Attributes
    ----------
    first, second : ndarray
        To first order, and to second under the quadratic model (``+-inf`` past
        :data:`BREAKDOWN`).
    weight : ndarray
        How much the linearisation error counts, in [0, 1]: how far the log-likelihood
        departs from its quadratic along the shift (``cubic``) over :data:`CUBIC_SCALE`, at
        most 1 (:func:`bayesij.array.amip_noise.nonlinear_band`); ``inf`` where the
        quadratic explains less than :data:`MIN_EXPLAINED` of the set's log-likelihood.
    cubic : ndarray
        That departure (:meth:`Curvature._cubic_share`).
    near : ndarray
        Where the band's end on the first order's side sits, as a share of the way from
        the first-order prediction to the second: :data:`GAUSSIAN_SHARE` where the set's
        log-likelihood is conditionally normal (:meth:`Curvature._gaussian`), else 0.
    beyond : ndarray
        How far the band reaches beyond the second-order prediction (away from the first):
        ``weight |second - first|``; past the breakdown ``inf`` where the quadratic
        explains the set (the change runs away in the first order's direction) and NaN
        where it does not.
        The side of the first-order prediction is not widened: a unit whose
        log-likelihood departs from its quadratic by a cubic term alone (no second-order
        term, so both orders agree) can change the mean about 1 % less than they say.
    """

    first: np.ndarray
    second: np.ndarray
    weight: np.ndarray
    cubic: np.ndarray
    beyond: np.ndarray
    near: np.ndarray

    def factors(self) -> np.ndarray:
        """The second-order prediction over the first, the widening beyond it over the
        first's size, and how far the band's other end sits from the first-order
        prediction towards the second (:attr:`near`) (3, K); ``(1, 0, 0)`` where the
        first-order change is 0; the ratio ``inf`` past the breakdown; the widening
        ``inf`` where the quadratic explains too little or past a breakdown it explains,
        NaN past one it does not."""
        first = self.first
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(first != 0, self.second / first, 1.0)
            share = np.where(first != 0, self.beyond / np.abs(first), 0.0)
        # inf past the breakdown (ratio); the widening's inf (explained) or NaN (not) kept
        ratio = np.where(np.isfinite(self.second), ratio, np.inf)
        share = np.where(np.isfinite(self.beyond), share, self.beyond)
        return np.stack([ratio, share, np.where(first != 0, self.near, 0.0)])

    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """Where the change lies (:func:`bayesij.array.amip_noise.nonlinear_band`)."""
        from bayesij.array.amip_noise import nonlinear_band

        return nonlinear_band(self.first, self.factors())


def _symmetric_root(cov: np.ndarray) -> np.ndarray:
    """``cov^1/2`` (symmetric; eigenvalues below 0 taken as 0)."""
    values, vectors = np.linalg.eigh(cov)
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def _cubic_hessian(gamma, point, p: int) -> np.ndarray:
    """The Hessians (G, P, P) at ``point`` (G, P) of ``sum gamma_t d_i d_j d_k`` over the
    triples ``t = (i, j, k)`` of :func:`_triples`, one per row of ``gamma`` (G, C): each
    monomial's second derivatives, linear in the point (one product with
    :func:`_second_derivatives`)."""
    g, c = gamma.shape
    linear = (gamma[:, :, None] * point[:, None, :]).reshape(g, c * p)
    return (linear @ _second_derivatives(p)).reshape(g, p, p)


def _triples(p: int) -> list[tuple[int, int, int]]:
    """The index triples ``(i, j, k)``, ``i <= j <= k < p``, of the cubic monomials, in the
    order of :attr:`Curvature.cubic`'s rows."""
    return [(i, j, k) for i in range(p) for j in range(i, p) for k in range(j, p)]


@functools.lru_cache(maxsize=16)
def _second_derivatives(p: int) -> np.ndarray:
    """``D`` (C P, P P) with ``H_ab = sum_tk gamma_t x_k D[(t, k), (a, b)]`` the Hessian of
    ``sum_t gamma_t d_i d_j d_k`` (the :func:`_triples` of ``p`` parameters) at ``x``:
    ``d^2 (d_i d_j d_k) / (d_a d_b)`` is the sum, over the ordered ways to pick ``a`` and
    ``b`` from the monomial's three factors, of the third factor's value."""
    triples = _triples(p)
    out = np.zeros((len(triples), p, p, p))
    for t, factors in enumerate(triples):
        for first, second, third in _ORDERED_PICKS:
            out[t, factors[third], factors[first], factors[second]] += 1.0
    out.setflags(write=False)
    return out.reshape(len(triples) * p, p * p)


#: The ordered ways to pick two of a monomial's three factors, and the one left.
_ORDERED_PICKS = [(a, b, 3 - a - b) for a in range(3) for b in range(3) if a != b]


def curvature_of(
    quantities: np.ndarray, index: int, scales=None, with_scales: bool = False
) -> Curvature | None:
    """The quadratic model's design for the searched quantity ``index`` of ``quantities``
    (n_chains, n_draws, Q): in all the quantities up to ``MAX_MODEL_PARAMETERS`` where
    the draws hold the designs, else in the searched one and as many of the most
    correlated with it across the draws as they hold (the cross terms act through the
    posterior correlations; :func:`_parameters_of`); quantities constant over the draws
    are left out; ``with_scales`` (a mean's model): the scales first.
    None when too few draws for the design (fewer than four times its columns)."""
    return curvatures_of(quantities, [index], scales, [with_scales])[0]


def curvatures_of(
    quantities: np.ndarray, indices, scales=None, with_scales=None
) -> list[Curvature | None]:
    """:func:`curvature_of` of each of the quantities ``indices``: one model for those
    fitted in the same parameters (all of them where the draws hold their designs), its
    design computed once and its :attr:`Curvature.column` each quantity's. ``scales`` (bool, (Q,),
    optional): the quantities that are scales (a residual sd, a group sd), modelled by
    their logarithm, held in the Newton step of the others (:func:`_scales_held`) and
    spreading their variance as they do across the draws (:attr:`Curvature.elasticity`).
    ``with_scales`` (bool per index, optional: a mean's model): where the model cannot
    take every quantity, take the scales first, whatever their correlation with the
    quantity (:func:`_parameters_of`); an index may come twice, with and without."""
    flat = np.asarray(quantities, dtype=float).reshape(-1, quantities.shape[-1])
    keep = np.flatnonzero(np.ptp(flat, axis=0) > 0)
    positive = np.all(flat > 0, axis=0)
    is_scale = np.zeros(flat.shape[1], dtype=bool) if scales is None else np.asarray(scales)
    is_scale = is_scale & positive
    forced = [False] * len(indices) if with_scales is None else list(with_scales)
    # A scale searched itself is modelled as it is (its change is asked on its own scale):
    # its design takes no logarithm and holds nothing.
    fitted_in = [
        (tuple(_parameters_of(flat, keep, i, is_scale if f else None).tolist()), not is_scale[i])
        if i in keep
        else None
        for i, f in zip(indices, forced, strict=True)
    ]
    # A searched scale's mean after a normal set is worked out in the model with it on
    # the log scale (_with_normal_scale): that design too.
    fitted = [design for design in fitted_in if design is not None]
    logged = [(columns, True) for columns, logs in fitted if not logs]
    designs = list(dict.fromkeys([*fitted, *logged]))

    def build(design: tuple) -> Curvature | None:
        columns, logs = design
        return _curvature(flat[:, columns], is_scale[list(columns)] if logs else None)

    # Each design on a thread (NumPy releases the GIL in its products and factorisations;
    # BLAS at one thread each), a single one with BLAS as it is.
    built = map_ordered(build, designs) if len(designs) > 1 else map(build, designs)
    models = dict(zip(designs, built, strict=True))
    out: list[Curvature | None] = []
    for index, design in zip(indices, fitted_in, strict=True):
        model = models[design] if design is not None else None
        if model is not None and design is not None:
            columns, logs = design
            model = model._replace(column=columns.index(index))
            if not logs:  # a scale searched itself
                model = _with_normal_scale(model, models[(columns, True)], flat[:, index])
        out.append(model)
    return out


def _the_normal_scale(model: Curvature, unmeasured: bool = False) -> int | None:
    """The column of ``model``'s one scale when every other parameter is normal given it as
    a regression's coefficients are: their means free of it (:attr:`Curvature.mean_free`)
    and their variances growing as its square (:attr:`Curvature.elasticity` within
    :data:`ELASTICITY_ERROR` of 2: where the draws do not measure the growth, a scale known
    to a few percent, a covariance that does not grow is as likely and the sd after a drop
    that moves the scale far is not known); None otherwise. With ``unmeasured``, a growth
    the draws do not measure passes too: for the scale's own mean after a drop, whether
    the covariance grows changes only how the coefficients' part of the set's likelihood
    (``h'V'h`` beside the residuals' ``r``, :func:`_normal_fit`) varies with the scale (on
    a kidiq-shaped regression, N = 434, the change after dropping the 1-60 largest
    residuals was within 1 % of the exact refit's)."""
    scales, kappa, free = model.scales, model.elasticity, model.mean_free
    if scales is None or kappa is None or free is None or scales.sum() != 1 or not free.all():
        return None
    j = int(np.flatnonzero(scales)[0])
    growth = kappa[~scales, j]
    if not np.all((np.abs(growth - 2.0) <= ELASTICITY_ERROR) | (unmeasured & (growth == 0.0))):
        return None
    return j


def _with_normal_scale(model: Curvature, held: Curvature | None, draws: np.ndarray):
    """A searched scale's ``model`` with :attr:`Curvature.normal_scale` taken from the
    model of the same parameters with it on the log scale (``held``), where the others are
    normal given it; ``draws`` (S,): the scale's."""
    if held is None or _the_normal_scale(held, unmeasured=True) != model.column:
        return model
    return model._replace(normal_scale=(held.normal_form, float(draws.mean())))


def _parameters_of(
    flat: np.ndarray, keep: np.ndarray, index: int, scales: np.ndarray | None = None
) -> np.ndarray:
    """The columns of ``flat`` (S, Q) the model of quantity ``index`` is fitted in: all
    of ``keep`` (the non-constant ones) as far as :func:`_model_size` allows (up to
    :data:`MAX_MODEL_PARAMETERS` where the draws hold the designs), else ``index``, the
    scales (with ``scales``, bool (Q,): a mean's model) and those most correlated with
    ``index``, that many in all."""
    if keep.size <= MAX_PARAMETERS:
        return keep
    size = _model_size(flat.shape[0], keep.size)
    if keep.size <= size:
        return keep
    others = keep[keep != index]
    strength = np.nan_to_num(np.abs(np.corrcoef(flat[:, others].T, flat[:, index])[-1, :-1]))
    if scales is not None:  # first, whatever their correlation
        strength = np.where(scales[others], np.inf, strength)
    picked = others[np.argsort(-strength, kind="stable")]
    return np.sort(np.concatenate([[index], picked[: size - 1]]))


def _model_size(n_draws: int, n_quantities: int) -> int:
    """How many quantities a model is fitted in: the most, up to
    :data:`MAX_MODEL_PARAMETERS` and ``n_quantities``, whose quadratic and cubic designs
    ``n_draws`` hold (:func:`_draws_hold`); never fewer than :data:`MAX_PARAMETERS`."""
    p = min(n_quantities, MAX_MODEL_PARAMETERS)
    while p > MAX_PARAMETERS and not _draws_hold(n_draws, p):
        p -= 1
    return p


def _draws_hold(n_draws: int, p: int) -> bool:
    """Whether ``n_draws`` hold the quadratic and cubic designs in ``p`` quantities: four
    draws per column (``p + p (p + 1) / 2`` and :func:`_triples`)."""
    return n_draws >= 4 * (p + p * (p + 1) // 2 + len(_triples(p)))


def on_model_scale(theta: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Parameter draws (..., P) as the second-order models take them: the positive scales
    among ``scales`` (bool, (P,)) by their logarithm where other parameters are beside
    them (a scale alone, or searched itself, is modelled as it is)."""
    positive = np.all(theta.reshape(-1, theta.shape[-1]) > 0, axis=0)
    mask = np.asarray(scales, dtype=bool) & positive
    if not mask.any() or mask.all():
        return theta
    return np.where(mask, np.log(np.where(mask, theta, 1.0)), theta)


def _curvature(theta: np.ndarray, scales: np.ndarray | None = None) -> Curvature | None:
    """The model in the parameters' draws ``theta`` (S, P), its column 0 (None: too few
    draws for the design); ``scales`` (P,) the positive columns modelled by their
    logarithm."""
    mask = np.zeros(theta.shape[1], dtype=bool) if scales is None else np.asarray(scales)
    held = bool(np.any(mask)) and not bool(np.all(mask))
    theta = on_model_scale(theta, mask)
    d = theta - theta.mean(axis=0)
    p = d.shape[1]
    i, j = np.triu_indices(p)
    products = d[:, i] * d[:, j]
    design = np.column_stack([d, products - products.mean(axis=0)])
    if d.shape[0] < 4 * design.shape[1]:
        return None
    cov = d.T @ d / d.shape[0]
    fit = _pseudo_inverse(design)
    cubic = _cubic_design(design, fit, p)
    unit, post = (None, None) if cubic is None else cubic
    share_map = np.hstack([fit.T] + ([] if unit is None else [unit]))
    fit = share_map[:, : design.shape[1]].T
    terms_map = np.vstack([d.T, fit[p:]])
    gram = design.T @ design
    model = Curvature(design, (i, j), cov, 0, fit, post, terms_map, share_map, gram)
    if not np.any(mask):  # no scale: a normal likelihood of known sd is quadratic
        return model._replace(gaussian_basis=_gaussian_basis(d, mask))
    if not held:
        return model
    return model._replace(
        scales=mask,
        elasticity=_elasticity(d, mask),
        mean_free=_mean_free(d, mask),
        gaussian_basis=_gaussian_basis(d, mask),
        normal_form=_normal_form(d[:, ~mask], d[:, mask][:, 0]) if mask.sum() == 1 else None,
    )


def _gaussian_basis(d: np.ndarray, scales: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis (S, R) of the normal family's design over the centred draws
    ``d`` (S, P; the scales' columns their centred logarithms): the other parameters and
    their products, each scale's logarithm and ``u_j = 1 / s_j^2`` (up to a constant),
    and the products of ``u_j`` with the others' terms. The log-likelihood of normal
    observations with sd ``s_j``, ``-log s_j - (y - x'beta)^2 u_j / 2``, lies in its span
    whatever ``y`` and ``x``. None when the draws are too few (fewer than four times its
    columns)."""
    other = d[:, ~scales]
    i, j = np.triu_indices(other.shape[1])
    quadratic = np.column_stack([other, other[:, i] * other[:, j]])
    columns = [quadratic]
    for log_scale in d[:, scales].T:
        u = np.exp(-2.0 * (log_scale - log_scale.max()))
        columns += [log_scale[:, None], u[:, None], quadratic * u[:, None]]
    design = np.column_stack(columns)
    if d.shape[0] < 4 * design.shape[1]:
        return None
    design = design - design.mean(axis=0)  # the sums it tests are centred
    scale = np.sqrt(np.einsum("ij,ij->j", design, design))
    scale[scale == 0] = 1.0
    return _orthonormal_span(design / scale)


def _orthonormal_span(columns: np.ndarray) -> np.ndarray:
    """An orthonormal basis (S, R) of the span of ``columns`` (S, F; unit length), the
    directions they barely span left out (singular values below 3e-8 of the largest, as
    :func:`_pseudo_inverse`): from the Gram matrix's eigenvectors, then once more by its
    Cholesky factor, which brings the basis back to orthonormal to rounding (CholeskyQR2).
    An eighth of an SVD's time for 4000 draws and 72 columns (the audit builds one per
    model)."""
    values, vectors = np.linalg.eigh(columns.T @ columns)
    keep = values > (3e-8) ** 2 * values[-1]
    basis = columns @ (vectors[:, keep] / np.sqrt(values[keep]))
    factor = np.linalg.cholesky(basis.T @ basis)  # near the identity: its inverse is safe
    return basis @ np.linalg.inv(factor).T


def _mean_free(d: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """(P,): whether each centred parameter ``d[:, e]`` shows no dependence of its mean on
    the centred log-scales and their squares across the draws: the Wald test of that
    regression with heteroscedasticity-robust (HC0) errors (a coefficient's spread grows
    with the residual sd while its mean does not move) above :data:`MEAN_FREE_LEVEL`;
    True for the scales themselves."""
    from scipy.special import chdtrc  # scipy.stats' chi2.sf, without importing scipy.stats

    logs = d[:, scales]
    design = np.column_stack([logs, logs**2 - (logs**2).mean(axis=0)])
    inverse = np.linalg.pinv(design.T @ design)
    coef = inverse @ (design.T @ d)  # (k, P)
    residual = d - design @ coef
    free = np.ones(d.shape[1], dtype=bool)
    for e in np.flatnonzero(~scales):
        meat = (design * residual[:, e : e + 1] ** 2).T @ design
        cov = inverse @ meat @ inverse
        statistic = float(coef[:, e] @ np.linalg.pinv(cov) @ coef[:, e])
        free[e] = chdtrc(design.shape[1], max(statistic, 0.0)) > MEAN_FREE_LEVEL
    return free


def _elasticity(d: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``(P, P)``: the least-squares slope of each centred parameter's square ``d_e^2`` on
    the centred log-scales ``d[:, scales]`` across the draws, over its mean: the growth of
    its variance with each scale's logarithm (0 in the columns of non-scales)."""
    squares = d**2
    variance = squares.mean(axis=0)
    logs = d[:, scales]
    slopes, *_ = np.linalg.lstsq(logs, squares - variance, rcond=None)  # (J, P)
    residual = squares - variance - logs @ slopes
    spread = np.sqrt(np.outer(np.diag(np.linalg.pinv(logs.T @ logs)), residual.var(axis=0)))
    out = np.zeros((d.shape[1], d.shape[1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(variance > 0, slopes / variance, 0.0)
        error = np.where(variance > 0, spread / variance, np.inf)
    out[:, scales] = np.where(error <= ELASTICITY_ERROR, kappa, 0.0).T
    return out


def _pseudo_inverse(design: np.ndarray) -> np.ndarray:
    """The pseudo-inverse of a tall design (S, F), as ``pinv(Z'Z) Z'`` of its columns scaled
    to unit length (``Z``), unscaled: the same matrix as ``np.linalg.pinv(design)`` for a
    design of full rank (to 1e-13 on these designs), six times faster for 4000 draws, and
    directions the draws barely span (singular values below 3e-8 of the largest, after
    scaling) are left out where ``pinv`` would keep them."""
    unit, post = _pseudo_inverse_factors(design)
    return post.T @ unit.T


def _pseudo_inverse_factors(design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pseudo_inverse` ``= (unit @ post).T`` as its factors: the design's columns
    scaled to unit length (S, F) and ``pinv(unit' unit)`` over the scales (F, F)."""
    scale = np.sqrt(np.einsum("ij,ij->j", design, design))
    scale[scale == 0] = 1.0
    unit = design / scale
    return unit, np.linalg.pinv(unit.T @ unit, hermitian=True) / scale


def _cubic_design(design: np.ndarray, fit: np.ndarray, p: int) -> tuple | None:
    """The pseudo-inverse of the draws' cubic monomials ``d_i d_j d_k`` (:func:`_triples`)
    with the quadratic design's part removed (``fit``: the design's pseudo-inverse), as its
    factors (:func:`_pseudo_inverse_factors`: the searches need only products with it);
    None when the draws are too few (fewer than four times the columns of both)."""
    d = design[:, :p]
    triples = _triples(p)
    if not _draws_hold(d.shape[0], p):
        return None
    i, j, k = (np.array(index) for index in zip(*triples, strict=True))
    cubes = d[:, i] * d[:, j] * d[:, k]
    rest = cubes - design @ (fit @ cubes)
    return _pseudo_inverse_factors(rest)


#: At most this many units along a set get the second-order model (their columns are read
#: for it): past them the ratio is held at its last value and the band is unbounded.
MAX_COLUMNS = 4096


class CentredColumns:
    """Units' log-likelihood less its mean over the draws (non-finite values counting as
    0), one contiguous row per unit, shared by every question's :class:`SetCurvature`: the
    units the searches will ask for are read once, and each unit's terms of a quadratic
    model are computed once per model.

    A search asks for up to :data:`MAX_COLUMNS` units at a time, several times per
    question; gathering them as columns of a (draws, units) matrix reads most of the
    matrix each time (4096 of 50,000 columns touch most of its cache lines). Read once for
    the units of every question's ranking, as rows, a later request is a contiguous copy.

    Parameters
    ----------
    n_draws : int
    matrix : ndarray of shape (S, U), optional
        The log-likelihood of every unit (flattened draws; float32 is read a tile of draws
        at a time): the units ``units`` are read from it up front, any other unit when
        asked for.
    columns : dict, optional
        Without ``matrix``: ``{unit: (S,) column}``, the only units there are (a unit not
        there ends the model's reach, :meth:`reach`).
    units : array of int, optional
        With ``matrix``: the units to read up front; with ``rows``: the units they are of
        (sorted, unique).
    rows : ndarray of shape (K, S), optional
        Without ``matrix`` and ``columns``: the log-likelihood of ``units``, one float64
        row each, read by the caller; centred in place and held (no copy: a lazy
        audit's tens of thousands of rows). With ``finite``: already centred
        (:func:`centre_into`), float64 or float32.
    finite : ndarray of bool, shape (K,), optional
        With ``rows``: whether each unit was finite at every draw (the rows centred).

    Attributes
    ----------
    held : ndarray of int, shape (K,)
        The units held, sorted.
    rows : ndarray of shape (K, S)
        Their centred rows.
    finite : ndarray of bool, shape (K,)
        Whether each held unit's log-likelihood was finite at every draw.
    """

    def __init__(self, n_draws: int, matrix=None, columns=None, units=None, rows=None, finite=None):
        self.n_draws, self.matrix = int(n_draws), matrix
        if matrix is not None:
            self.held = np.unique(np.asarray(units if units is not None else [], dtype=int))
            self.rows = _read_rows(matrix, self.held, threaded=True)
            self.finite = _centre_rows(self.rows, threaded=True)
        elif rows is not None:
            self.held = np.asarray(units, dtype=int)
            if self.held.shape != rows.shape[:1] or np.any(np.diff(self.held) <= 0):
                raise ValueError("units: expected the sorted, distinct units of the rows")
            self.rows = rows
            self.finite = _centre_rows(self.rows) if finite is None else finite
        else:
            columns = columns or {}
            self.held = np.array(sorted(int(u) for u in columns), dtype=int)
            self.rows = np.empty((self.held.size, self.n_draws))
            for row, unit in zip(self.rows, self.held, strict=True):
                row[:] = np.asarray(columns[int(unit)], dtype=float).reshape(-1)
            self.finite = _centre_rows(self.rows)
        self._terms: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._screen: tuple | None = None  # screened_by: the basis and the coefficients
        self._maps: dict[int, np.ndarray | None] = {}  # each model's map on its basis

    def screened_by(self, screen) -> bool:
        """Take the units' coefficients on an :class:`~bayesij.array.amip_screen.
        InfluenceScreen`'s orthonormal basis, when the screen read the same matrix over the
        same draws and its basis spans its whole design: a model whose design lies in that
        span then gets a unit's terms from them (:meth:`terms`; the quadratic designs of
        the fit's parameters, the screen's own design), a small product instead of one with
        the unit's row. Returns whether it took them."""
        same = (
            self.matrix is not None
            and screen.matrix.shape == self.matrix.shape
            and screen.matrix.strides == self.matrix.strides
            and screen.matrix.dtype == self.matrix.dtype
            and _address(screen.matrix) == _address(self.matrix)
        )
        if same and screen.complete and screen.basis.shape[0] == self.n_draws:
            # its arrays, not the screen: the screen holds the store (no reference cycle
            # keeping the rows alive past the audit until a garbage collection)
            self._screen = (screen.basis, screen.coefficients)
        return self._screen is not None

    def slots(self, units: np.ndarray) -> np.ndarray:
        """Each unit's row (-1 where not held)."""
        units = np.asarray(units, dtype=int)
        if not self.held.size:
            return np.full(units.shape, -1)
        at = np.minimum(np.searchsorted(self.held, units), self.held.size - 1)
        return np.where(self.held[at] == units, at, -1)

    def reach(self, units: np.ndarray) -> int:
        """How many of ``units``, from the first, can be read: all with a matrix, else up
        to the first unit not held."""
        if self.matrix is not None:
            return int(np.asarray(units).size)
        missing = np.flatnonzero(self.slots(units) < 0)
        return int(missing[0]) if missing.size else int(np.asarray(units).size)

    def rows_of(self, units: np.ndarray) -> np.ndarray:
        """The centred rows of ``units`` (K, S): held ones copied, the others read."""
        slots = self.slots(units)
        held = slots >= 0
        if held.all():
            return np.asarray(self.rows[slots], dtype=float)
        out = np.empty((slots.size, self.n_draws))
        out[held] = self.rows[slots[held]]
        out[~held] = _centred_rows(self.matrix, np.asarray(units, dtype=int)[~held])
        return out

    def prefix_sums(self, units: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """The centred rows of ``units`` summed over the first ``sizes[g]`` of them (G, S);
        ``sizes`` increasing."""
        slots = self._in_place(units[: sizes[-1]] if len(sizes) else units[:0])
        if slots is not None:
            from bayesij.array.kernels.rows import held_prefix_sums  # compiled: numba

            return held_prefix_sums(self.rows, slots, sizes)
        out = np.empty((len(sizes), self.n_draws))
        summed, done = np.zeros(self.n_draws), 0
        for g, size in enumerate(sizes):
            summed = summed + self.rows_of(units[done:size]).sum(axis=0)
            out[g], done = summed, size
        return out

    def set_sum(self, units: np.ndarray, finite: bool = False) -> np.ndarray | None:
        """The centred rows of ``units`` summed (S,): a set's log-likelihood at each draw
        up to a constant (non-finite values as 0), the held rows in place (no rows
        copied), the columns of units not held (a reported set's tail beyond the rankings
        the store read) gathered from the matrix. None unless the rows can be read in
        place, some unit is held and the others have a matrix to be read from; with
        ``finite``, None unless every unit is finite at every draw."""
        units = np.asarray(units, dtype=int)
        slots = self.slots(units)
        held = slots >= 0
        if not (self._readable() and held.any()):
            return None
        if finite and not self.finite[slots[held]].all():
            return None
        rest: float | np.ndarray = 0.0
        if not held.all():
            if self.matrix is None:
                return None
            columns = np.asarray(self.matrix[:, units[~held]], dtype=float)
            finite_columns = np.isfinite(columns)
            if finite and not finite_columns.all():
                return None
            rest = np.where(finite_columns, columns, 0.0).sum(axis=1)
        from bayesij.array.kernels.rows import held_prefix_sums  # compiled: numba

        return held_prefix_sums(self.rows, slots[held], np.array([held.sum()]))[0] + rest

    def products(self, units: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """``rows_of(units)[:, :n] @ vector`` (K,) over the first ``n = vector.size``
        draws: held rows read in place, the others read from the matrix."""
        slots = self.slots(units)
        held = slots >= 0
        if not (self._readable() and held.any() and np.isfinite(vector).all()):
            return self.rows_of(units)[:, : vector.size] @ vector
        from bayesij.array.kernels.rows import held_products  # compiled: numba

        out = np.empty(slots.size)
        out[held] = held_products(self.rows, slots[held], vector)
        if not held.all():
            others = np.asarray(units, dtype=int)[~held]
            out[~held] = _centred_rows(self.matrix, others)[:, : vector.size] @ vector
        return out

    def influence_mcse(self, units, weights, weighted) -> tuple | None:
        """The Monte Carlo error of each held unit's weighted influence over the first
        ``n = weights.size`` draws (:func:`bayesij.array.amip.weighted_influence_mcse`)
        from rows read in place: the errors (K,) and which of ``units`` are held (K,; the
        errors of the others left for the caller to compute from their columns). None
        unless some unit is held, the rows can be read in place and the weights are
        finite."""
        slots = self.slots(units)
        held = slots >= 0
        if not (self._readable() and held.any()):
            return None
        if not (np.isfinite(weights).all() and np.isfinite(weighted).all()):
            return None
        from bayesij.array.kernels.rows import held_influence_mcse  # compiled: numba

        out = np.full(slots.size, np.nan)
        out[held] = held_influence_mcse(self.rows, slots[held], weights, weighted)
        return out, held

    def _in_place(self, units: np.ndarray) -> np.ndarray | None:
        """The rows of ``units`` when every one is held and the rows can be read where they
        lie by the compiled kernels (:mod:`bayesij.array.kernels.rows`), else None."""
        slots = self.slots(units)
        return slots if self._readable() and slots.size and (slots >= 0).all() else None

    def _readable(self) -> bool:
        """Whether the compiled kernels can read the rows where they lie (C-contiguous
        float64 or float32; a caller's ``rows`` may be neither)."""
        return self.rows.flags.c_contiguous and self.rows.dtype in (np.float64, np.float32)

    def terms(self, curvature: Curvature, units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Curvature.unit_terms` of ``units``: a held unit's computed once per model
        and kept."""
        slots = self.slots(units)
        held = slots >= 0
        with self._lock:
            first_all, quad_all, done, lock = self._kept_terms(curvature)
        with lock:  # questions of one quantity share its terms from their threads
            new = np.unique(slots[held][~done[slots[held]]])
            if new.size:
                first_all[new], quad_all[new] = self._held_terms(curvature, new)
                done[new] = True
        first = np.empty((slots.size, curvature.n_parameters))
        quad = np.empty((slots.size, quad_all.shape[1]))
        first[held], quad[held] = first_all[slots[held]], quad_all[slots[held]]
        if not held.all():
            rows = _centred_rows(self.matrix, np.asarray(units, dtype=int)[~held])
            first[~held], quad[~held] = curvature._coefficients(rows.T)
        return first, curvature._hessians(quad)

    def _kept_terms(self, curvature: Curvature) -> tuple:
        """The arrays keeping ``curvature``'s terms of the held units, which are done, and
        the lock of the model (two models' terms are computed at once, one model's once)."""
        key = id(curvature.fit)  # models differing only in their column share terms
        if key not in self._terms:
            p = curvature.n_parameters
            n = self.held.size
            empty = (np.empty((n, p)), np.empty((n, curvature.fit.shape[0] - p)))
            self._terms[key] = (curvature, *empty, np.zeros(n, dtype=bool), threading.Lock())
        return self._terms[key][1:]

    def _held_terms(self, curvature: Curvature, slots: np.ndarray) -> tuple:
        """:meth:`Curvature._coefficients` of the held rows ``slots``: from the screen's
        coefficients where the model's design lies in its basis's span and the unit's
        column was finite (its row and column then differ by a constant, which the basis's
        first column holds), else from the rows."""
        mapped = self._screen_map(curvature)
        if mapped is None or self._screen is None:
            return self._row_terms(curvature, slots)
        units = self.held[slots]
        p = curvature.n_parameters
        first = np.empty((slots.size, p))
        quad = np.empty((slots.size, mapped.shape[0] - p))
        direct = ~self.finite[slots]  # the screen's exact_only: its coefficients are 0
        both = (mapped @ self._screen[1][:, units[~direct]]).T
        first[~direct], quad[~direct] = both[:, :p] / -self.n_draws, both[:, p:]
        if direct.any():
            first[direct], quad[direct] = self._row_terms(curvature, slots[direct])
        return first, quad

    def _row_terms(self, curvature: Curvature, slots: np.ndarray) -> tuple:
        """:meth:`Curvature._coefficients` of the held rows ``slots``, read as float64
        :data:`UNIT_TILE` rows at a time: a float64 copy of every row asked at once was,
        at N = 4 10^5 (float32 rows of a lazy source), 188 MiB beside the 180 MiB of
        rows, the lazy audit's largest array after the pass."""
        first = np.empty((slots.size, curvature.n_parameters))
        quad = np.empty((slots.size, curvature.terms_map.shape[0] - curvature.n_parameters))
        for start in range(0, slots.size, UNIT_TILE):
            part = slice(start, start + UNIT_TILE)
            rows = np.asarray(self.rows[slots[part]], dtype=float)
            first[part], quad[part] = curvature._coefficients(rows.T)
        return first, quad

    def _screen_map(self, curvature: Curvature) -> np.ndarray | None:
        """The model's terms map on the screen's basis (T, r), or None without a screen or
        where the model's design is not within the basis's span (its squared length outside
        above 1e-13 of a column's: the model fitted in quantities the screen is not)."""
        if self._screen is None:
            return None
        key = id(curvature.fit)
        if key in self._maps:
            return self._maps[key]
        basis = self._screen[0]
        design = curvature.design
        inside = basis.T @ design
        with np.errstate(divide="ignore", invalid="ignore"):
            outside = 1 - np.einsum("rf,rf->f", inside, inside) / np.einsum(
                "sf,sf->f", design, design
            )
        mapped = curvature.terms_map @ basis if (outside < 1e-13).all() else None
        self._maps[key] = mapped
        return mapped


def _address(array: np.ndarray) -> int:
    """Where an array's first element lies in memory (two views of the same data agree)."""
    return array.__array_interface__["data"][0]


def _centred_rows(matrix: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Columns ``units`` of ``matrix`` (S, U) as centred float64 rows (K, S)
    (:func:`_read_rows`, :func:`_centre_rows`)."""
    out = _read_rows(matrix, units)
    _centre_rows(out)
    return out


#: Units per tile of :func:`_read_rows` (with ``TILE`` draws: 1 MiB of float64).
UNIT_TILE = 512


def _read_rows(matrix: np.ndarray, units: np.ndarray, threaded: bool = False) -> np.ndarray:
    """Columns ``units`` of ``matrix`` (S, U) as float64 rows (K, S), read a tile of
    ``TILE`` draws by ``UNIT_TILE`` units at a time (never a float64 copy of more than a
    tile of a float32 matrix); ``threaded``: the tiles shared among
    :func:`~bayesij.array.numeric.map_chunks`' threads (NumPy's gathers release the GIL).
    A tile's gather (1 MiB) is transposed in cache: gathering a tile of draws for every
    unit at once (40 MB for the 19,542 ranked units of N = 10^5) and transposing that took
    0.47-0.55 s, the tiles 0.38-0.40 s (the same values; memory already mapped)."""
    units = np.asarray(units, dtype=int)
    out = np.empty((units.size, matrix.shape[0]))

    def read(tiles: slice) -> None:
        for start in range(tiles.start, tiles.stop, TILE):
            stop = min(start + TILE, tiles.stop)
            tile = matrix[start:stop]
            for first in range(0, units.size, UNIT_TILE):
                last = first + UNIT_TILE
                out[first:last, start:stop] = tile[:, units[first:last]].T

    if units.size:
        n_draws = matrix.shape[0]
        parts = threads() if threaded else 1
        step = -(-n_draws // (parts * TILE)) * TILE  # whole tiles per thread
        map_chunks(read, [slice(a, min(a + step, n_draws)) for a in range(0, n_draws, step)])
    return out


def centre_into(
    rows: np.ndarray, slots: np.ndarray, columns: np.ndarray, which: np.ndarray | None = None
) -> np.ndarray:
    """Write ``columns`` (S, k), some units' log-likelihood, into ``rows[slots]`` as
    :class:`CentredColumns` holds them (non-finite values as 0, less each one's mean over
    the draws, worked out in float64 whatever ``rows``' precision; :data:`UNIT_TILE` units
    at a time, so that the float64 copy stays small beside a whole read's columns).
    ``which`` (k,): the units to write of ``columns`` (..., b; a block, its units last),
    gathered a tile at a time (the block never copied whole). Returns whether each was
    finite at every draw (k,)."""
    finite = np.empty(len(slots), dtype=bool)
    for first in range(0, len(slots), UNIT_TILE):
        part = slice(first, first + UNIT_TILE)
        if which is None:
            centred = np.array(np.asarray(columns[:, part], dtype=float).T, order="C")  # as held
        else:  # gathered as rows: one copy
            tile = np.moveaxis(columns, -1, 0)[which[part]]
            centred = np.asarray(tile.reshape(tile.shape[0], -1), dtype=float)
        finite[part] = _centre_rows(centred)
        rows[slots[part]] = centred
    return finite


def _centre_rows(rows: np.ndarray, threaded: bool = False) -> np.ndarray:
    """Rows (K, S) in place: non-finite values as 0, less each row's mean. Returns which
    rows were finite throughout (K,); ``threaded``: blocks of rows on
    :func:`~bayesij.array.numeric.map_chunks`' threads."""
    finite = np.empty(rows.shape[0], dtype=bool)

    def centre(part: slice) -> None:
        block = rows[part]
        bad = ~np.isfinite(block)
        block[bad] = 0.0
        block -= block.mean(axis=1, keepdims=True)
        finite[part] = ~bad.any(axis=1)

    parts = threads() if threaded else 1
    step = max(1, -(-rows.shape[0] // parts))
    map_chunks(centre, [slice(a, a + step) for a in range(0, rows.shape[0], step)])
    return finite


#: How many of its latest answers a :class:`SetCurvature` keeps (the ranking's, the
#: reported set's and the ranking's prefix a search may report are each asked for again).
RECENT = 4


class SetCurvature:
    """A goal's second-order ratios along any set of units
    (:meth:`Curvature.ratios`), reading the units' log-likelihood from a matrix in memory
    or from columns read beforehand: what :func:`bayesij.array.amip_noise.linear_answer`
    takes as ``nonlinearity``.

    Parameters
    ----------
    curvature : Curvature
    sign : int
        The metric ``mean + sign z sd`` (0: the mean).
    z : float
    matrix : ndarray of shape (S, U), optional
        The log-likelihood of every unit (flattened draws; float32 is read a set at a time).
    columns : dict, optional
        Without ``matrix``: ``{unit: (S,) column}`` of the units a search may ask for; a
        unit not there ends the model's reach (as past :data:`MAX_COLUMNS`).
    store : CentredColumns, optional
        In place of ``matrix`` and ``columns``: the units' centred rows shared with other
        questions (and their terms, with those of the same ``curvature``).
    """

    def __init__(
        self, curvature: Curvature, sign: int, z: float, matrix=None, columns=None, store=None
    ):
        self.curvature, self.sign, self.z = curvature, int(sign), float(z)
        n_draws = curvature.design.shape[0]
        self.store = store or CentredColumns(n_draws, matrix=matrix, columns=columns)
        self._recent: dict[bytes, np.ndarray] = {}

    def __call__(self, units: np.ndarray) -> np.ndarray:
        units = np.asarray(units, dtype=int)
        key = units.tobytes()
        if key not in self._recent:  # the ranking and a set are each asked for again
            if len(self._recent) >= RECENT:
                del self._recent[next(iter(self._recent))]
            self._recent[key] = self._ratios(units)
        return self._recent[key].copy()

    def each_alone(self, units: np.ndarray) -> np.ndarray:
        """The band's factors (3, K) of dropping each of ``units`` alone
        (:meth:`Curvature.changes_each`); ``(1, 0, 0)`` (the first order) for a unit past
        the store's reach."""
        units = np.asarray(units, dtype=int)
        out = first_order_factors(units.size)
        reach = self.store.reach(units[:MAX_COLUMNS])
        if reach:
            each = self.curvature.changes_each(self.store, units[:reach], self.sign, self.z)
            out[:, :reach] = each.factors()
        return out

    def _ratios(self, units: np.ndarray) -> np.ndarray:
        reach = self.store.reach(units[:MAX_COLUMNS])
        out = np.empty((3, units.size))
        if reach == 0:
            out[0], out[1], out[2] = 1.0, np.inf, 0.0
            return out
        along = self.curvature.changes_along(self.store, units[:reach], self.sign, self.z)
        out[:, :reach] = along.factors()
        out[0, reach:], out[1, reach:], out[2, reach:] = out[0, reach - 1], np.inf, 0.0
        return out
