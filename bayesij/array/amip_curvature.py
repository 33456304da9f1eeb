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
order was 25-45 % short; what it misses (each unit's curvature changing along the way) is
left to :func:`bayesij.array.amip_noise.nonlinear_band`.

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
    "curvature_of",
]

#: Up to this many quantities, the quadratic model is fitted in all of them (a design of
#: ``P + P (P + 1) / 2`` columns: 44 for 8); beyond, in the searched quantity alone.
MAX_PARAMETERS = 8

#: The second-order prediction is not trusted for a set that holds more than this share of
#: the posterior precision in some direction (an eigenvalue of ``I + Sigma A_S`` below
#: ``1 - BREAKDOWN``): the change is then unbounded as far as the draws can tell.
BREAKDOWN = 0.75

#: A departure from the quadratic (:meth:`Curvature._cubic_share`) of this much or more
#: leaves the second-order change uncertain by half the second-order term; less, by
#: proportionally less (a log-likelihood quadratic in the parameters: not at all). On a
#: logistic regression the exact change lay within 0.37 of the second-order term of the
#: second-order change at 50-302 drops of 3020, where the departure was 0.004-0.34.
CUBIC_SCALE = 0.01

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
    index : int
        The searched quantity's column.
    """

    design: np.ndarray
    pairs: tuple
    cov: np.ndarray
    index: int

    @property
    def n_parameters(self) -> int:
        return self.cov.shape[0]

    def unit_terms(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's first-order change of the parameters ``-Cov(theta, l_u)`` (K, P) and
        the Hessian ``A_u`` (K, P, P) of its fitted quadratic, from its log-likelihood at
        the draws ``columns`` (S, K) (non-finite values count as 0, as the first-order
        change does)."""
        values = np.where(np.isfinite(columns), columns, 0.0)
        p = self.n_parameters
        centred = values - values.mean(axis=0)
        first = -(self.design[:, :p].T @ centred).T / values.shape[0]
        coef = np.linalg.lstsq(self.design, centred, rcond=None)[0]  # (F, K)
        hessian = np.zeros((values.shape[1], p, p))
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
        first_terms, hessians = self.unit_terms(columns)
        c = np.cumsum(first_terms, axis=0)  # (K, P)
        a = np.cumsum(hessians, axis=0)  # (K, P, P)
        e, sigma = self.index, self.cov
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
        cubic = self._cubic_share(columns, shift, a)
        with np.errstate(invalid="ignore"):
            width = 0.5 * np.abs(second - first) * np.minimum(1.0, cubic / CUBIC_SCALE)
        return Changes(first, second, np.where(ok, width, np.inf), cubic)

    def _cubic_share(self, columns, shift, hessians) -> np.ndarray:
        """How far each prefix's summed log-likelihood departs from its quadratic over the
        predicted shift (K,): along the shift's direction ``u`` in whitened coordinates
        (``t = u' Sigma^-1/2 d``, shift ``Delta``), the cubic term ``g t^3`` left after the
        quadratic fit changes the curvature by ``6 g Delta`` at the shift's end, half that
        on average along the way; relative to the tilted precision there, ``1 + u' A u``
        (whitened), ``3 |g| Delta / |1 + u' A u|``. Exactly 0 where the log-likelihood is
        quadratic in the parameters (a normal linear model with known scale), about
        0.01-0.3 for a logistic regression's sets of 50-300 of 3020. Computed on a
        geometric grid of at most :data:`CUBIC_GRID` prefix sizes, interpolated between."""
        values = np.where(np.isfinite(columns), columns, 0.0)
        centred = values - values.mean(axis=0)
        solve = np.linalg.pinv(self.design)  # (F, S)
        chol = np.linalg.cholesky(self.cov + 1e-300 * np.eye(self.n_parameters))
        whiten = np.linalg.inv(chol)
        d = self.design[:, : self.n_parameters]
        k = values.shape[1]
        grid = np.unique(np.geomspace(1, k, min(k, CUBIC_GRID)).round().astype(int))
        shares = np.zeros(grid.size)
        summed = np.zeros(values.shape[0])
        done = 0
        for g_index, size in enumerate(grid):
            summed += centred[:, done:size].sum(axis=1)
            done = size
            white = whiten @ shift[size - 1]
            delta = float(np.linalg.norm(white))
            if not np.isfinite(delta) or delta == 0:
                continue
            u = white / delta
            t = d @ whiten.T @ u
            cube = t**3
            rest = cube - self.design @ (solve @ cube)
            left = summed - self.design @ (solve @ summed)
            g = float(rest @ left / (rest @ rest)) if rest @ rest > 0 else 0.0
            curvature = 1 + float(u @ chol.T @ hessians[size - 1] @ chol @ u)
            shares[g_index] = 3 * abs(g) * delta / max(abs(curvature), 1 - BREAKDOWN)
        return np.interp(np.arange(1, k + 1), grid, shares)

    def ratios(self, columns: np.ndarray, sign: int, z: float) -> np.ndarray:
        """The second-order prediction relative to the first after each prefix, and its
        half-width relative to the first (2, K): what carries a first-order prediction (of
        any estimator: plain, control variates, the block bootstrap's replicates) to the
        band :func:`bayesij.array.amip_noise.nonlinear_band` puts it in; ``(1, 0)`` where
        the first-order change is 0, ``inf`` past the breakdown."""
        changes = self.changes(columns, sign, z)
        first = changes.first
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(first != 0, changes.second / first, 1.0)
            width = np.where(first != 0, changes.width / np.abs(first), 0.0)
        finite = np.isfinite(changes.second) & np.isfinite(width)
        return np.stack([np.where(finite, ratio, np.inf), np.where(finite, width, np.inf)])


class Changes(NamedTuple):
    """A set's predicted change after each prefix (each (K,)).

    Attributes
    ----------
    first, second : ndarray
        To first order, and to second under the quadratic model (``+-inf`` past
        :data:`BREAKDOWN`).
    width : ndarray
        How far the second-order change may be off: half the second-order term, scaled by
        how far the log-likelihood departs from its quadratic along the shift (``cubic``
        over :data:`CUBIC_SCALE`, at most 1).
    cubic : ndarray
        That departure (:meth:`Curvature._cubic_share`).
    """

    first: np.ndarray
    second: np.ndarray
    width: np.ndarray
    cubic: np.ndarray


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
    return Curvature(design, (i, j), cov, int(np.flatnonzero(keep == index)[0]))


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

    def __call__(self, units: np.ndarray) -> np.ndarray:
        units = np.asarray(units, dtype=int)
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
