"""Influence scores with zero-variance control variates: ``psi = Cov_post(f, l_n)``
estimated with far less Monte Carlo noise where the log-likelihood is heavy-tailed across
draws, from the gradient of the log posterior at each draw.

For a posterior ``pi`` on unconstrained parameters ``theta`` (dimension ``P``) with score
``s = grad log pi``, Stein's identity gives functions of the draws with known mean zero:
``Delta P + grad P . s`` for any polynomial ``P``: ``s_j`` (degree 1),
``theta_i s_j + theta_j s_i + 2 delta_ij`` (degree 2), and so on up to degree 3.
The covariance is the mean of ``h_s = (f_s - fbar)(l_sn - lbar_n) S / (S - 1)``; regressing
``h`` on those functions ``Z`` and subtracting the fitted part, whose true mean is zero,
leaves ``psi_cv = mean(h) - mean(Z) B``. Where ``h`` is (nearly) a low-order polynomial
times the score, as for an outlier's log-likelihood under a normal model (``l_n`` varies
with ``1 / sigma^2`` times a squared residual), the variance falls by orders of magnitude;
elsewhere it does not grow beyond the cost of fitting ``B`` (``M`` columns from ``S`` draws).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from bayesij.array.blocks import draw_blocks
from bayesij.array.checks import as_draws_matrix, check_finite, check_same_draws, fail
from bayesij.array.influence import InfluenceScores, prepare_draws
from bayesij.array.numeric import map_chunks, obs_chunks, read_columns

__all__ = [
    "stein_basis",
    "zero_variance_influence",
    "zero_variance_mean",
    "zero_variance_means",
    "DEGREES",
]

DEGREES = (1, 2, 3)


def stein_basis(score: np.ndarray, theta: np.ndarray | None, degree: int) -> np.ndarray:
    """The zero-mean control functions of :mod:`this module <bayesij.array.control_variates>`,
    (S, M): ``Delta P + grad P . s`` for every monomial ``P`` of the (centred)
    unconstrained parameters of degree 1 to ``degree`` (degree 1: the score itself).

    Parameters
    ----------
    score : ndarray of shape (S, P)
        ``grad log pi`` at each draw (unconstrained parameters, Jacobian included).
    theta : ndarray of shape (S, P) or None
        The unconstrained draws; needed for degree 2 and 3.
    degree : {1, 2, 3}
        ``M = C(P + degree, degree) - 1`` functions.
    """
    if degree == 1:
        return score
    if theta is None:
        raise fail(
            "unconstrained", f"None with degree {degree}", "the unconstrained draws for degree 2+"
        )
    centred = theta - theta.mean(axis=0)  # a shift maps monomials to combinations of others
    n_params = score.shape[1]
    unit = np.eye(n_params, dtype=int)
    columns = []
    for d in range(1, degree + 1):
        for combination in itertools.combinations_with_replacement(range(n_params), d):
            power = np.bincount(combination, minlength=n_params)
            value = _monomial(centred, power - unit, power)  # (S, P): dP / dtheta_j
            laplacian = sum(
                power[j] * (power[j] - 1) * _monomial_one(centred, power - 2 * unit[j])
                for j in range(n_params)
                if power[j] >= 2
            )
            columns.append(laplacian + np.sum(value * score, axis=1))
    return np.column_stack(columns)


def _monomial_one(theta: np.ndarray, power: np.ndarray) -> np.ndarray:
    """``prod_j theta_j^power_j`` per draw (S,)."""
    return np.prod(theta**power, axis=1)


def _monomial(theta: np.ndarray, powers: np.ndarray, power: np.ndarray) -> np.ndarray:
    """The gradient of ``theta^power``: column ``j`` is ``power_j theta^(power - e_j)``."""
    out = np.zeros(theta.shape)
    for j in np.flatnonzero(power):
        out[:, j] = power[j] * _monomial_one(theta, powers[j])
    return out


def zero_variance_influence(
    quantities,
    log_lik,
    grad_log_posterior,
    unconstrained=None,
    *,
    degree: int | None = None,
    chain_ids=None,
    n_blocks: int = 50,
    keep_blocks: bool = False,
    blocks_of=None,
) -> InfluenceScores:
    """Influence scores ``Cov_post(f_k, l_n)`` with zero-variance control variates.

    Parameters
    ----------
    quantities : array_like of shape (n_draws, K) or (n_chains, n_draws, K)
    log_lik : array_like of shape (n_draws, N) or (n_chains, n_draws, N)
        Finite (an observation impossible under some draw has no finite influence).
    grad_log_posterior : array_like of shape (n_draws, P) or (n_chains, n_draws, P)
        Gradient of the log posterior density in the unconstrained parameters at each draw
        (``grad_log_prob`` of PyStan / BridgeStan with the Jacobian, PyMC's ``dlogp``).
    unconstrained : array_like of the shape of ``grad_log_posterior``, optional
        The unconstrained parameter draws: with them the second-degree control functions
        are used too.
    degree : {1, 2, 3}, optional
        Default: with ``unconstrained``, the highest degree whose ``C(P + d, d) - 1``
        functions are at most a twentieth of the draws (3 for a 3-parameter regression
        and 4000 draws), else 1. Degree 3 matters for interval ends: the influence of the
        sd involves ``(f - mean)^2`` (77 times less error than degree 2 on the tests'
        field experiment).
    chain_ids, n_blocks, keep_blocks, blocks_of
        As :func:`bayesij.array.influence.influence_scores` (batch means of the residuals
        ``h - Z B`` give the MCSE; their block sums are ``block_sums``).

    Returns
    -------
    InfluenceScores
        ``psi`` and ``mcse``, each (K, N).

    References
    ----------
    .. [1] Mira, A., Solgi, R. and Imparato, D. (2013). Zero variance Markov chain Monte
       Carlo for Bayesian estimators. Statistics and Computing 23(5), 653-662.
    .. [2] South, L. F., Oates, C. J., Mira, A. and Drovandi, C. (2022). Regularized zero-
       variance control variates. Bayesian Analysis 18(3).
    .. [3] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466 (psi).
    """
    f, l, chains = prepare_draws(quantities, log_lik, chain_ids)
    grad, _ = as_draws_matrix(grad_log_posterior, "grad_log_posterior", chain_ids)
    check_same_draws(f, grad, ("quantities", "grad_log_posterior"))
    check_finite(grad, "grad_log_posterior")
    theta = None
    if unconstrained is not None:
        theta, _ = as_draws_matrix(unconstrained, "unconstrained", chain_ids)
        check_finite(theta, "unconstrained")
        if theta.shape != grad.shape:
            raise fail(
                "unconstrained",
                f"shape {theta.shape}",
                f"one value per draw and parameter of grad_log_posterior, {grad.shape}",
            )
    degree = _degree(degree, grad.shape, theta is not None)
    if not np.all(np.isfinite(l)):
        raise fail("log_lik", "-inf values", "a finite log-likelihood for control variates")
    basis = stein_basis(grad, theta, degree)
    rows = None if not keep_blocks else np.arange(f.shape[1]) if blocks_of is None else blocks_of
    return _cv_scores(f, l, basis, draw_blocks(chains, n_blocks), rows)


def _degree(degree, shape, have_theta: bool) -> int:
    n_draws, n_params = shape
    size = {d: math.comb(n_params + d, d) - 1 for d in DEGREES}
    if degree is None:
        fitting = [d for d in DEGREES if d == 1 or (have_theta and size[d] * 20 <= n_draws)]
        return max(fitting)
    if degree not in DEGREES:
        raise fail("degree", repr(degree), f"one of {DEGREES}")
    if degree > 1 and not have_theta:
        raise fail(
            "degree", f"{degree} without unconstrained draws", "unconstrained= for degree 2+"
        )
    if size[degree] >= n_draws // 2:
        raise fail(
            "grad_log_posterior",
            f"{n_params} parameters for {n_draws} draws at degree {degree}",
            "far fewer control functions than draws (a lower degree, or more draws)",
        )
    return degree


def _cv_scores(f, l, basis, blocks, blocks_of=None) -> InfluenceScores:
    """psi_cv, cross-fitted: the draws fall in two folds (alternate blocks), each fold's
    terms ``h - Z B`` use the coefficients ``B`` fitted on the other fold, so that every
    term has mean ``psi`` whatever the fit, and their batch means give an honest MCSE (an
    in-sample fit with many heavy-tailed control functions understates it several-fold).
    ``blocks_of``: the quantities whose terms' block sums are kept (None: none).

    Only the terms' block sums are needed (their total is ``S psi``), and each is linear in
    the log-likelihood columns: with ``h_k = ft_k (l - m)`` (``ft`` the centred quantities,
    ``m`` the columns' control-variate means), a fold's coefficients are
    ``B = P (ft_k h) = (P ft_k) l - (P ft_k 1) m`` (``P``, the pseudo-inverse of the other
    fold's centred functions, sends constants to 0) and a block's sum is
    ``ft_k[block] . (l - m) - Z[block].sum() B``. So a chunk of columns costs two matrix
    products, the terms themselves are never formed, and the result is the same to
    round-off."""
    n_draws, n_quantities = f.shape
    fold = np.zeros(n_draws, dtype=int)
    for b, rows in enumerate(blocks):
        fold[rows] = b % 2
    scale = basis.std(axis=0)
    scale[scale == 0] = 1.0
    scaled = basis / scale
    # Centre at control-variate means too: once the covariance's own noise is removed, the
    # error of plain sample means, (fbar - mu)(lbar - mu_l), would be what is left. The
    # control-variate mean of columns v is (1/S - w) @ v (the projector sends 1 to 0).
    mean_weights = 1.0 / n_draws - scaled.mean(axis=0) @ np.linalg.pinv(
        scaled - scaled.mean(axis=0)
    )
    centred_f = f - mean_weights @ f
    sides = []
    for side in (0, 1):
        train = np.flatnonzero(fold != side)
        projector = np.linalg.pinv(scaled[train] - scaled[train].mean(axis=0))  # (M, S_train)
        gains = (projector[None] * centred_f[train].T[:, None, :]).reshape(-1, train.size)
        sides.append((train, gains, gains.sum(axis=1)))  # (K M, S_train), (K M,)
    z_sums = np.stack([scaled[rows].sum(axis=0) for rows in blocks])  # (B, M)
    n_functions = scaled.shape[1]
    block_f = [centred_f[rows].T for rows in blocks]  # (K, rows) each
    f_sums = np.stack([part.sum(axis=1) for part in block_f])  # (B, K)
    side_of = np.arange(len(blocks)) % 2
    sizes = np.array([rows.size for rows in blocks], dtype=float)
    psi = np.empty((n_quantities, l.shape[1]))
    mcse = np.empty_like(psi)
    keep = None if blocks_of is None else [int(k) for k in blocks_of]
    kept = None if keep is None else np.empty((len(blocks), len(keep), l.shape[1]))

    def work(chunk: slice) -> None:
        columns = read_columns(l, chunk)
        m = mean_weights @ columns  # (n,)
        sums = np.stack([part @ columns[rows] for part, rows in zip(block_f, blocks, strict=True)])
        sums -= f_sums[:, :, None] * m  # (B, K, n)
        for side, (train, gains, gain_sums) in enumerate(sides):
            coef = gains @ columns[train] - np.outer(gain_sums, m)  # (K M, n)
            coef = coef.reshape(n_quantities, n_functions, -1)
            held = side_of == side
            sums[held] -= np.einsum("bm,kmn->bkn", z_sums[held], coef)
        psi[:, chunk] = sums.sum(axis=0) / n_draws
        means = sums / sizes[:, None, None]
        spread = np.sum(sizes[:, None, None] * (means - psi[:, chunk]) ** 2, axis=0)
        mcse[:, chunk] = np.sqrt(spread / (len(blocks) - 1) / n_draws)
        if kept is not None:
            kept[:, :, chunk] = sums[:, keep]

    map_chunks(work, obs_chunks(l.shape[1], (3 + n_quantities) * n_draws))
    return InfluenceScores(psi, mcse, kept)


def zero_variance_mean(
    values, grad_log_posterior, unconstrained=None, *, degree=None
) -> tuple[float, float]:
    """``E_post[g]`` with zero-variance control variates, and its Monte Carlo SE.

    Parameters
    ----------
    values : array_like of shape (S,) or (n_chains, n_draws)
        ``g`` at each draw.
    grad_log_posterior, unconstrained, degree
        As :func:`zero_variance_influence` (draws flattened the same way).

    Returns
    -------
    (float, float)
        ``mean(g) - mean(Z) B`` and ``sd(g - Z B) / sqrt(S)`` (independent draws).
    """
    g = np.asarray(values, dtype=float).reshape(-1, 1)
    means, mcse = zero_variance_means(g, grad_log_posterior, unconstrained, degree=degree)
    return float(means[0]), float(mcse[0])


def zero_variance_means(
    columns, grad_log_posterior, unconstrained=None, *, degree=None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`zero_variance_mean` of each column of ``columns`` (S, K), the draws flattened
    as ``grad_log_posterior``'s: one set of control functions and one least-squares fit for all.

    Returns
    -------
    (ndarray, ndarray)
        The means and their Monte Carlo SEs, each (K,).
    """
    g = np.asarray(columns, dtype=float)
    grad = np.asarray(grad_log_posterior, dtype=float).reshape(g.shape[0], -1)
    theta = (
        None if unconstrained is None else np.asarray(unconstrained, float).reshape(g.shape[0], -1)
    )
    basis = stein_basis(grad, theta, _degree(degree, grad.shape, theta is not None))
    centred = basis - basis.mean(axis=0)
    coef = np.linalg.lstsq(centred, g - g.mean(axis=0), rcond=None)[0]  # (M, K)
    residual = g - centred @ coef
    means = g.mean(axis=0) - basis.mean(axis=0) @ coef
    return means, residual.std(axis=0, ddof=1) / np.sqrt(g.shape[0])
