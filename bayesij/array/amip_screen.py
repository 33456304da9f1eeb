"""The largest influences of a reweighted AMIP step, found without reading every column.

Each greedy step of a reweighted search (:func:`bayesij.array.amip.reweighted_steps`) ranks
every unit by its influence ``phi_u = v^T l_u`` under the current weights and takes the
first few. A regular model's log-likelihood columns are close to quadratic in its
parameters over the posterior, so with ``Q`` (S, r) an orthonormal basis of a quadratic
design in the parameter draws and ``l_u = Q c_u + r_u``,

    phi_u = (Q^T v)^T c_u + v^T r_u,    |v^T r_u| <= ||v|| ||r_u||  (Cauchy-Schwarz).

The first term costs ``r`` multiplications per unit instead of ``S``; the second is bounded.
A unit whose upper bound falls below the ``m``-th largest lower bound (or below zero) cannot
be among the ``m`` largest positive gains, so only the columns of the others are read for
their exact products: the ranking is the one the full product gives (to the rounding of the
products, bounded here too). On the regressions of ``benchmarks/audit.py`` the residual is
0.01-0.2 % of a column's spread and a step of ``m`` units reads about ``1.3 m`` columns.

:class:`InfluenceScreen` reads the matrix once for the coefficients ``c_u`` and the
residual norms; :meth:`InfluenceScreen.products` gives each vector of a round a
:class:`ScreenedInfluence`, whose :meth:`~ScreenedInfluence.top` is what a search reads.

References
----------
Broderick, T., Giordano, R. & Meager, R. (2020). An automatic finite-sample robustness
metric: when can dropping a little data make a big difference? arXiv:2011.14999.
Nguyen, T. D., Giordano, R., Meager, R. & Broderick, T. (2024). Sensitivity of MCMC-based
analyses to small-data removal. arXiv:2408.07240.
"""

from __future__ import annotations

import numpy as np

from bayesij.array.amip_lockstep import influence_products
from bayesij.array.numeric import map_chunks, obs_chunks, read_columns, top_positive

__all__ = ["InfluenceScreen", "ScreenedInfluence", "screen_design", "MAX_BASIS", "MAX_SCREENED"]

#: At most this many columns in the screen's basis (the constant, the parameters, their
#: squares and, for up to 12 parameters, their products); more parameters: no screen.
MAX_BASIS = 128

#: More parameters than this cannot make a basis of :data:`MAX_BASIS` columns (the constant,
#: each parameter and its square): :func:`screen_design` refuses them before reading them.
MAX_SCREENED = (MAX_BASIS - 1) // 2

#: A unit's bound also covers the rounding of its products: this fraction of the norm of
#: its column (products of 4000 draws round to about 1e-13 of it).
ROUNDING = 1e-10

#: A unit's residual norm is found as ``sqrt(||l - lbar||^2 - ||c||^2)``; this fraction of
#: ``||l - lbar||^2`` is added under the root to cover the difference's rounding (about
#: 1e-14 of it for 4000 draws): 1e-6 of the column's spread, against residuals of 1e-4 to
#: 1e-2 of it on the benchmark regressions.
CANCELLATION = 1e-12

#: A request whose candidates to read from the matrix (those the store does not hold) are
#: more than this share of the units is answered by the full product (one pass over the
#: matrix) instead of reading their columns: a column read from a (draws, units) matrix
#: touches a cache line at every draw, and at 4000 draws gathering 2 % of the columns
#: already costs as much as the whole product (U = 10^3 to 10^5; 25 % cost 8 to 12 times
#: as much, and at N = 10^5 the audit's screen spent 3.7 s in such reads).
FULL_SHARE = 0.02


def screen_design(parameters: np.ndarray) -> np.ndarray | None:
    """The quadratic design of the screen's basis: the parameter draws (S, P), centred and
    scaled, their squares, and with at most 12 parameters their products; None when that
    needs more than :data:`MAX_BASIS` columns or more than a tenth of the draws. Parameters
    constant over the draws, or not finite, are left out."""
    if parameters.shape[-1] > MAX_SCREENED:  # a posterior of per-observation values: not
        return None  # copied to find out
    flat = np.asarray(parameters, dtype=float).reshape(-1, parameters.shape[-1])
    flat = flat[:, np.isfinite(flat).all(axis=0) & (np.ptp(flat, axis=0) > 0)]
    d = (flat - flat.mean(axis=0)) / flat.std(axis=0)
    p = d.shape[1]
    if p <= 12:
        i, j = np.triu_indices(p)
    else:
        i = j = np.arange(p)
    design = np.column_stack([np.ones(d.shape[0]), d, d[:, i] * d[:, j]])
    if design.shape[1] > min(MAX_BASIS, d.shape[0] // 10):
        return None
    return design


class InfluenceScreen:
    """Every unit's coefficients on an orthonormal basis of ``design`` and the norms of what
    the basis misses, for the first ``n`` draws of each ``n`` in ``prefixes``.

    Parameters
    ----------
    matrix : ndarray of shape (n_draws, n_units)
        float64 or float32 (read a chunk of columns at a time as float64).
    design : ndarray of shape (n_draws, p)
        :func:`screen_design`.
    prefixes : sequence of int
        The vector lengths the searches will ask for (all draws; the split-draw check's
        first half).
    store : CentredColumns, optional
        Units' centred rows read before (:class:`~bayesij.array.amip_curvature.
        CentredColumns`): a held unit's exact product is its row's (contiguous) instead of
        a gather of its column. A row less its mean gives the same product: the searches'
        vectors sum to zero (``w (g* - g*_w)``, normalised weights), and what rounding
        leaves of that sum is within :data:`ROUNDING`.

    Attributes
    ----------
    basis : ndarray of shape (n_draws, r)
    coefficients : ndarray of shape (r, n_units)
    slack : dict of int to ndarray of shape (n_units,)
        ``||r_u||`` (over all draws: it bounds the norm over the first ``n``; with
        :data:`CANCELLATION`) plus :data:`ROUNDING` times the column's norm over the first
        ``n`` draws.
    exact_only : ndarray of int
        Units with a value that is not finite: their products are always computed (from
        their columns).
    """

    def __init__(self, matrix: np.ndarray, design: np.ndarray, prefixes, store=None) -> None:
        self.matrix, self.store = matrix, store
        self.basis = _centred_basis(design)
        n_units = matrix.shape[1]
        self.coefficients = np.empty((self.basis.shape[1], n_units))
        self.slack = {n: np.empty(n_units) for n in prefixes}
        finite = np.empty(n_units, dtype=bool)
        map_chunks(lambda chunk: self._read(chunk, finite), obs_chunks(n_units, 2 * len(design)))
        self.exact_only = np.flatnonzero(~finite)
        #: Whether the basis spans the whole design (no direction the draws barely span
        #: was left out): a design within the same parameters' quadratic then lies in it.
        self.complete = self.basis.shape[1] == design.shape[1]

    def _read(self, chunk: slice, finite: np.ndarray) -> None:
        """The coefficients and slacks of the units ``chunk``. The basis is the constant
        ``1 / sqrt(S)`` and columns orthogonal to it, so the residual's squared norm is the
        centred column's less its other coefficients' (no residual matrix); over the first
        ``n`` draws the whole residual's norm bounds it."""
        from bayesij.array.kernels.screen import column_moments  # compiled: numba

        columns = read_columns(self.matrix, chunk)
        total, norms = column_moments(columns, list(self.slack))
        with np.errstate(invalid="ignore"):
            coefficients = self.basis.T @ columns
            explained = np.einsum("ij,ij->j", coefficients[1:], coefficients[1:])
            residual = np.sqrt(np.maximum(total - explained, 0.0) + CANCELLATION * total)
        finite[chunk] = np.isfinite(coefficients).all(axis=0)
        self.coefficients[:, chunk] = np.where(finite[chunk], coefficients, 0.0)
        for slack, norm in zip(self.slack.values(), norms, strict=True):
            with np.errstate(invalid="ignore"):
                slack[chunk] = residual + ROUNDING * norm

    def products(self, n: int, vectors: np.ndarray) -> list:
        """A :class:`ScreenedInfluence` for each column of ``vectors`` (n, k) over the
        first ``n`` draws (``n`` one of the prefixes)."""
        approximate = (self.basis[:n].T @ vectors).T @ self.coefficients
        return [
            ScreenedInfluence(self, n, vectors[:, j], approximate[j])
            for j in range(vectors.shape[1])
        ]


class ScreenedInfluence:
    """One vector's influences ``v^T l_u`` over the first ``n`` draws: the screen's
    approximation, and exact products as a search asks for them (kept)."""

    def __init__(self, screen: InfluenceScreen, n: int, vector: np.ndarray, approximate):
        self.screen, self.n, self.vector = screen, n, vector
        self.approximate = approximate
        self.scale = float(np.linalg.norm(vector))
        self.exact = np.full(approximate.size, np.nan)
        self.known = np.zeros(approximate.size, dtype=bool)
        self._compute(screen.exact_only, finite=False)

    @property
    def bound(self) -> np.ndarray:
        """Each unit's bound on ``|phi_u - approximate_u|`` (n_units,)."""
        return self.scale * self.screen.slack[self.n]

    def top(self, direction: int, m: int, chosen) -> np.ndarray:
        """``phi`` (n_units,): exact (NaN where not finite) for every unit that could be
        among the ``m`` largest positive gains ``-direction * phi`` outside ``chosen`` and
        for the units with non-finite values; ``direction * inf`` (a gain of ``-inf``)
        elsewhere."""
        self._candidates(direction, m, chosen)
        phi = np.where(self.known, self.exact, direction * np.inf)
        # known from an earlier request or the full product, not a candidate now
        taken = np.setdiff1d(np.asarray(chosen, dtype=int), self.screen.exact_only)
        phi[taken] = direction * np.inf
        return phi

    def best(self, direction: int, m: int, chosen) -> np.ndarray:
        """The at most ``m`` units of largest positive gain ``-direction * phi`` outside
        ``chosen``, largest first, ties in index order: ``top_positive`` of the gains of
        :meth:`top`, read from the candidates alone (a unit that is not one has an exact
        gain below the ``m``-th largest, or not positive) and the units with non-finite
        values."""
        units = self._candidates(direction, m, chosen)
        always = self.screen.exact_only
        if always.size:
            units = np.union1d(units, np.setdiff1d(always, np.asarray(chosen, dtype=int)))
        return units[top_positive(-direction * self.exact[units], m)]

    def _candidates(self, direction: int, m: int, chosen) -> np.ndarray:
        """The units not in ``chosen`` (nor always exact) whose gain's upper bound reaches
        the ``m``-th largest lower bound (and 0), their exact products computed."""
        from bayesij.array.kernels.screen import screened_candidates  # compiled: numba

        excluded = np.zeros(self.approximate.size, dtype=bool)
        excluded[np.asarray(chosen, dtype=int)] = True
        excluded[self.screen.exact_only] = True
        slack = self.screen.slack[self.n]
        candidates = screened_candidates(
            self.approximate, slack, self.scale, excluded, direction, m
        )
        if candidates is None:  # a bound is NaN: NumPy's partition decides
            candidates = self._partitioned(direction, m, excluded)
        missing = candidates[~self.known[candidates]]
        if self._read_from_matrix(missing) > FULL_SHARE * self.approximate.size:
            self.exact = influence_products(self.screen.matrix[: self.n], self.vector[:, None])[0]
            self.known[:] = True
        else:
            self._compute(missing)
        return candidates

    def _read_from_matrix(self, units: np.ndarray) -> int:
        """How many of ``units`` :meth:`_compute` would read from the matrix's columns:
        those the store does not hold as rows (every one without a store)."""
        store = self.screen.store
        if store is None or store.matrix is None:
            return int(units.size)
        return int(np.count_nonzero(store.slots(units) < 0))

    def _partitioned(self, direction: int, m: int, excluded: np.ndarray) -> np.ndarray:
        """:meth:`_candidates`' units by NumPy's partition of the lower bounds."""
        gain = -direction * self.approximate
        lower, upper = gain - self.bound, gain + self.bound
        eligible = np.flatnonzero(~excluded)
        threshold = 0.0
        if 0 < m <= eligible.size:
            threshold = max(threshold, np.partition(lower[eligible], eligible.size - m)[-m])
        return eligible[upper[eligible] >= threshold]

    def _compute(self, units: np.ndarray, finite: bool = True) -> None:
        """The exact products of ``units`` (``finite``: all their values are), a few MiB of
        them at a time: from the store's centred rows where there is one
        (:meth:`~bayesij.array.amip_curvature.CentredColumns.rows_of`), else from their
        columns (NaN where a product is not finite)."""
        store = self.screen.store if finite else None
        columns = self.screen.matrix[: self.n]
        for part in obs_chunks(units.size, 8 * self.n):
            chosen = units[part]
            with np.errstate(invalid="ignore"):
                if store is not None and store.matrix is not None:
                    product = store.products(chosen, self.vector)
                else:
                    product = self.vector @ read_columns(columns, chosen)
            self.exact[chosen] = np.where(np.isfinite(product), product, np.nan)
        self.known[units] = True


def _centred_basis(design: np.ndarray) -> np.ndarray:
    """An orthonormal basis (S, r) of ``design``'s span with the constant: ``1 / sqrt(S)``
    first, then the other columns centred (orthogonal to it) and made orthonormal: by the
    eigenvectors of their Gram matrix, directions with an eigenvalue below :data:`KEPT` of
    the largest left out, then once more by the Cholesky factor of the result's Gram matrix
    (orthonormal to rounding, as the bounds assume: a fifteenth of an SVD's time)."""
    n = design.shape[0]
    rest = design[:, 1:] - design[:, 1:].mean(axis=0)
    columns = [np.full((n, 1), 1 / np.sqrt(n))]
    if rest.shape[1]:
        values, vectors = np.linalg.eigh(rest.T @ rest)
        kept = values > values[-1] * KEPT
        basis = rest @ (vectors[:, kept] / np.sqrt(values[kept]))
        factor = np.linalg.cholesky(basis.T @ basis)
        columns.append(basis @ np.linalg.inv(factor).T)
    return np.hstack(columns)


#: The screen's basis leaves out the directions of its design whose eigenvalue in the
#: centred columns' Gram matrix is below this share of the largest (singular values below
#: 1e-6 of the largest: directions the draws barely span, which it need not explain).
KEPT = 1e-12
