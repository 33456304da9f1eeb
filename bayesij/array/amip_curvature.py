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
over the shift (its cubic terms).

The parameters are the fit's quantities when there are few of them (at most
:data:`MAX_PARAMETERS`), else the searched quantity and those most correlated with it: the
cross terms carry much of the effect on a regression (the quantity alone gave a ratio of
1.36 where the exact one was 1.82).

References
----------
.. [1] Giordano, R., Jordan, M. I. and Broderick, T. (2019). A higher-order Swiss army
   infinitesimal jackknife. arXiv:1907.12116.
.. [2] Kuschnig, N., Zens, G. and Crespo Cuaresma, J. (2021). Hidden in plain sight:
   influential sets in linear regression. CESifo Working Paper 9296.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "Curvature",
    "Changes",
    "SetCurvature",
    "MAX_PARAMETERS",
    "MAX_COLUMNS",
    "BREAKDOWN",
    "CUBIC_SCALE",
    "MIN_EXPLAINED",
    "curvature_of",
]

#: Up to this many quantities, the quadratic model is fitted in all of them (a design of
#: ``P + P (P + 1) / 2`` columns: 44 for 8); beyond, in the searched quantity alone.
MAX_PARAMETERS = 8

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

#: Prefix sizes at which the departure from the quadratic is computed.
CUBIC_GRID = 24


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
    cubic : tuple or None
        The draws' cubic monomials less their quadratic part (S, C), their index triples
        and that matrix's pseudo-inverse (C, S); None when the draws are too few for them
        (fewer than four times the columns of both designs).
    """

    design: np.ndarray
    pairs: tuple
    cov: np.ndarray
    column: int
    fit: np.ndarray
    cubic: tuple | None

    @property
    def n_parameters(self) -> int:
        return self.cov.shape[0]

    def unit_terms(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's first-order change of the parameters ``-Cov(theta, l_u)`` (K, P) and
        the Hessian ``A_u`` (K, P, P) of its fitted quadratic, from its log-likelihood at
        the draws ``columns`` (S, K) (non-finite values count as 0, as the first-order
        change does)."""
        return self._terms(_centred(columns))

    def _terms(self, centred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`unit_terms` from the centred columns (:func:`_centred`)."""
        p = self.n_parameters
        first = -(self.design[:, :p].T @ centred).T / centred.shape[0]
        coef = self.fit @ centred  # (F, K): least squares, the design's pseudo-inverse
        hessian = np.zeros((centred.shape[1], p, p))
        i, j = self.pairs
        quad = coef[p:].T  # (K, F2)
        hessian[:, i, j] += quad
        hessian[:, j, i] += quad  # the diagonal twice: 2 gamma_ii, off-diagonal gamma_ij
        return first, hessian

    def changes(self, columns: np.ndarray, sign: int, z: float) -> Changes:
        """The metric ``mean + sign z sd`` of the searched quantity after dropping each
        prefix of the units whose log-likelihood is ``columns`` (S, K), in that order, to
        first and to second order under the quadratic model, and how far the second may be
        off (:class:`Changes`)."""
        centred = _centred(columns)  # read once for the terms and the cubic share
        first_terms, hessians = self._terms(centred)
        c = np.cumsum(first_terms, axis=0)  # (K, P)
        a = np.cumsum(hessians, axis=0)  # (K, P, P)
        e, sigma = self.column, self.cov
        sd = np.sqrt(sigma[e, e])
        sigma_a = np.einsum("ij,kjl->kil", sigma, a)  # Sigma A_k
        d_var_first = -np.einsum("kil,l->ki", sigma_a, sigma[:, e])[:, e]  # -(Sigma A Sigma)_ee
        first = c[:, e] + sign * z * (np.sqrt(np.maximum(sd**2 + d_var_first, 0.0)) - sd)
        step = np.eye(self.n_parameters) + sigma_a
        smallest = np.min(np.linalg.eigvals(step).real, axis=1)
        ok = smallest > 1 - BREAKDOWN
        safe = np.where(ok[:, None, None], step, np.eye(self.n_parameters))
        shift = np.linalg.solve(safe, c[..., None])[..., 0]  # (K, P)
        var = np.linalg.solve(safe, np.broadcast_to(sigma, safe.shape))[:, e, e]
        second = shift[:, e] + sign * z * (np.sqrt(np.maximum(var, 0.0)) - sd)
        runaway = np.copysign(np.inf, np.where(first == 0, 1.0, first))
        second = np.where(ok, second, runaway)
        cubic, explained = self._cubic_share(centred, shift, a)
        weight = np.where(explained >= MIN_EXPLAINED, np.minimum(1.0, cubic / CUBIC_SCALE), np.inf)
        with np.errstate(invalid="ignore"):
            beyond = weight * np.abs(second - first)
        return Changes(first, second, weight, cubic, np.where(ok, beyond, np.inf))

    def _cubic_share(self, centred, shift, hessians) -> tuple[np.ndarray, np.ndarray]:
        """How far each prefix's summed log-likelihood departs from its quadratic over the
        predicted shift (K,): the cubic terms left after the quadratic fit (all of them,
        fitted across the draws) change the Hessian by ``H3(shift)`` at the shift's end,
        half that on average along the way; in whitened coordinates and relative to the
        tilted precision there (the smallest eigenvalue of ``I + Sigma A``),
        ``||Sigma^1/2 H3 Sigma^1/2|| / 2 / lambda_min`` (``lambda_min`` at least
        ``1 - BREAKDOWN``). Exactly 0 where the
        log-likelihood is quadratic in the parameters (a normal linear model with known
        scale). Computed on a geometric grid of at most :data:`CUBIC_GRID` prefix sizes,
        interpolated between. Also the share of the set's log-likelihood's variance over the
        draws that the quadratic explains (K,), from the same fits. ``centred``: the
        columns as :func:`_centred` makes them."""
        if self.cubic is None:
            return np.full(centred.shape[1], np.inf), np.ones(centred.shape[1])
        _, triples, solve = self.cubic  # solve (C, S): the cubic coefficients of a residual
        fit = self.fit
        root = _symmetric_root(self.cov)
        k = centred.shape[1]
        grid = np.unique(np.geomspace(1, k, min(k, CUBIC_GRID)).round().astype(int))
        shares, explained = np.zeros(grid.size), np.ones(grid.size)
        summed = np.zeros(centred.shape[0])
        done = 0
        for g_index, size in enumerate(grid):
            summed += centred[:, done:size].sum(axis=1)
            done = size
            left = summed - self.design @ (fit @ summed)
            total = float(summed @ summed)
            explained[g_index] = 1 - float(left @ left) / total if total > 0 else 1.0
            gamma = solve @ left
            change = _cubic_hessian(gamma, triples, shift[size - 1], self.n_parameters)
            white = root @ change @ root
            step = np.eye(self.n_parameters) + root @ hessians[size - 1] @ root
            smallest = max(float(np.min(np.linalg.eigvalsh(step))), 1 - BREAKDOWN)
            shares[g_index] = 0.5 * float(np.max(np.abs(np.linalg.eigvalsh(white)))) / smallest
        sizes = np.arange(1, k + 1)
        return np.interp(sizes, grid, shares), np.interp(sizes, grid, explained)

    def ratios(self, columns: np.ndarray, sign: int, z: float) -> np.ndarray:
        """The second-order prediction relative to the first after each prefix, and the
        band's widening beyond it relative to the first (2, K; :meth:`Changes.factors`):
        what carries a first-order prediction (of
        any estimator: plain, control variates, the block bootstrap's replicates) into the
        band of :func:`bayesij.array.amip_noise.nonlinear_band`; ``(1, 0)`` where the
        first-order change is 0, ``inf`` past the breakdown."""
        return self.changes(columns, sign, z).factors()


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
    beyond : ndarray
        How far the band reaches beyond the second-order prediction (away from the first):
        ``weight |second - first|``; ``inf`` past the breakdown.
        The side of the first-order prediction is not widened: a unit whose
        log-likelihood departs from its quadratic by a cubic term alone (no second-order
        term, so both orders agree) can change the mean about 1 % less than they say.
    """

    first: np.ndarray
    second: np.ndarray
    weight: np.ndarray
    cubic: np.ndarray
    beyond: np.ndarray

    def factors(self) -> np.ndarray:
        """The second-order prediction over the first, and the widening beyond it over
        the first's size (2, K); ``(1, 0)`` where the first-order change is 0, ``inf``
        past the breakdown or where the quadratic explains too little."""
        first = self.first
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(first != 0, self.second / first, 1.0)
            share = np.where(first != 0, self.beyond / np.abs(first), 0.0)
        finite = np.isfinite(self.second) & np.isfinite(self.beyond)
        return np.stack([np.where(finite, ratio, np.inf), np.where(finite, share, np.inf)])

    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """Where the change lies (:func:`bayesij.array.amip_noise.nonlinear_band`)."""
        from bayesij.array.amip_noise import nonlinear_band

        return nonlinear_band(self.first, self.factors())


def _symmetric_root(cov: np.ndarray) -> np.ndarray:
    """``cov^1/2`` (symmetric; eigenvalues below 0 taken as 0)."""
    values, vectors = np.linalg.eigh(cov)
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def _cubic_hessian(gamma, triples, point, p: int) -> np.ndarray:
    """The Hessian at ``point`` (P,) of ``sum gamma_t d_i d_j d_k`` over the triples
    ``t = (i, j, k)``: each monomial's second derivatives, linear in the point."""
    hessian = np.zeros((p, p))
    factors = np.asarray(triples).T  # (3, C)
    # d^2 (d_i d_j d_k) / (d_a d_b) = sum over the ways to pick a and b from the three
    # factors of the third factor's value
    for first, second, third in _ORDERED_PICKS:
        np.add.at(hessian, (factors[first], factors[second]), gamma * point[factors[third]])
    return hessian


#: The ordered ways to pick two of a monomial's three factors, and the one left.
_ORDERED_PICKS = [(a, b, 3 - a - b) for a in range(3) for b in range(3) if a != b]


def curvature_of(quantities: np.ndarray, index: int) -> Curvature | None:
    """The quadratic model's design for the searched quantity ``index`` of ``quantities``
    (n_chains, n_draws, Q): in all the quantities when ``Q <= MAX_PARAMETERS``, else in
    the searched one and the ``MAX_PARAMETERS - 1`` most correlated with it across the
    draws (the cross terms act through the posterior correlations); quantities constant
    over the draws are left out. None when too few draws for the design (fewer than four
    times its columns)."""
    flat = np.asarray(quantities, dtype=float).reshape(-1, quantities.shape[-1])
    keep = np.flatnonzero(np.ptp(flat, axis=0) > 0)
    if index not in keep:
        return None
    if keep.size > MAX_PARAMETERS:  # the quantity and those most correlated with it
        others = keep[keep != index]
        strength = np.abs(np.corrcoef(flat[:, others].T, flat[:, index])[-1, :-1])
        picked = others[np.argsort(-np.nan_to_num(strength), kind="stable")]
        keep = np.sort(np.concatenate([[index], picked[: MAX_PARAMETERS - 1]]))
    theta = flat[:, keep]
    d = theta - theta.mean(axis=0)
    p = d.shape[1]
    i, j = np.triu_indices(p)
    products = d[:, i] * d[:, j]
    design = np.column_stack([d, products - products.mean(axis=0)])
    if flat.shape[0] < 4 * design.shape[1]:
        return None
    cov = d.T @ d / d.shape[0]
    column = int(np.flatnonzero(keep == index)[0])
    return Curvature(design, (i, j), cov, column, np.linalg.pinv(design), _cubic_design(design, p))


def _cubic_design(design: np.ndarray, p: int) -> tuple | None:
    """The draws' cubic monomials ``d_i d_j d_k`` (``i <= j <= k``) with the quadratic
    design's part removed (S, C), their index triples and that matrix's pseudo-inverse;
    None when the draws are too few (fewer than four times the columns of both)."""
    d = design[:, :p]
    triples = [(i, j, k) for i in range(p) for j in range(i, p) for k in range(j, p)]
    if d.shape[0] < 4 * (design.shape[1] + len(triples)):
        return None
    cubes = np.stack([d[:, i] * d[:, j] * d[:, k] for i, j, k in triples], axis=1)
    rest = cubes - design @ np.linalg.lstsq(design, cubes, rcond=None)[0]
    return rest, triples, np.linalg.pinv(rest)


#: At most this many units along a set get the second-order model (their columns are read
#: for it): past them the ratio is held at its last value and the band is unbounded.
MAX_COLUMNS = 4096


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
    """

    def __init__(self, curvature: Curvature, sign: int, z: float, matrix=None, columns=None):
        self.curvature, self.sign, self.z = curvature, int(sign), float(z)
        self.matrix, self.columns = matrix, columns or {}
        self._last: tuple[bytes, np.ndarray] | None = None

    def __call__(self, units: np.ndarray) -> np.ndarray:
        units = np.asarray(units, dtype=int)
        key = units.tobytes()
        if self._last is not None and self._last[0] == key:  # the ranking asked again
            return self._last[1].copy()
        out = self._ratios(units)
        self._last = (key, out)
        return out.copy()

    def _ratios(self, units: np.ndarray) -> np.ndarray:
        reach = min(units.size, MAX_COLUMNS)
        if self.matrix is None:
            known = np.array([int(u) in self.columns for u in units[:reach]], dtype=bool)
            reach = int(np.argmin(known)) if not known.all() else reach
        out = np.empty((2, units.size))
        if reach == 0:
            out[0], out[1] = 1.0, np.inf
            return out
        out[:, :reach] = self.curvature.ratios(self._read(units[:reach]), self.sign, self.z)
        out[0, reach:], out[1, reach:] = out[0, reach - 1], np.inf
        return out

    def _read(self, units: np.ndarray) -> np.ndarray:
        if self.matrix is not None:
            return np.asarray(self.matrix[:, units], dtype=float)
        return np.stack([np.asarray(self.columns[int(u)], dtype=float) for u in units], axis=1)
