"""Zero-variance control variates for influence scores against exact mathematics: the
flat-prior normal regression, whose psi for a coefficient's mean is ``e_n [(X^T X)^-1 x_n]_k``
exactly, and Stein's identity for the control functions."""

import numpy as np
import pytest
from ols_amip import heavy_tailed_experiment

from bayesij.array.control_variates import (
    stein_basis,
    zero_variance_influence,
    zero_variance_mean,
)
from bayesij.array.influence import influence_scores
from bayesij.refit import FlatPriorRegressionBackend


def _fit(seed: int, n: int = 2000):
    X, y = heavy_tailed_experiment(n, seed=0)
    backend = FlatPriorRegressionBackend(X, y, draws=4000, chains=4, seed=seed)
    post, score, theta = backend.fit_with_gradient(np.ones(n))
    q = post.quantities.values
    unscaled = np.linalg.inv(X.T @ X)
    residual = y - X @ (unscaled @ X.T @ y)
    exact = residual * (X @ unscaled[:, 1])  # Cov_post(beta_2, l_n)
    return q[..., 1:2], post.log_lik.values, score, theta, exact


def test_the_control_functions_have_mean_zero():
    rng = np.random.default_rng(0)
    theta = rng.normal([1.0, -2.0], [0.5, 2.0], size=(200_000, 2))
    score = -(theta - [1.0, -2.0]) / np.array([0.5, 2.0]) ** 2
    basis = stein_basis(score, theta, 2)
    assert basis.shape == (200_000, 2 + 3)
    standard_error = basis.std(axis=0) / np.sqrt(basis.shape[0])
    assert np.all(np.abs(basis.mean(axis=0)) < 4 * standard_error)
    np.testing.assert_array_equal(stein_basis(score, None, 1), score)
    cubic = stein_basis(score[:50_000], theta[:50_000], 3)
    assert cubic.shape == (50_000, 9)  # C(2 + 3, 3) - 1 monomials
    standard_error = cubic.std(axis=0) / np.sqrt(cubic.shape[0])
    assert np.all(np.abs(cubic.mean(axis=0)) < 4 * standard_error)


@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_second_degree_control_variates_cut_the_error_of_psi_many_fold():
    f, log_lik, score, theta, exact = _fit(1)
    plain = influence_scores(f, log_lik).psi[0]
    first = zero_variance_influence(f, log_lik, score).psi[0]
    second = zero_variance_influence(f, log_lik, score, theta)
    rmse = {
        k: np.sqrt(np.mean((v - exact) ** 2))
        for k, v in {"plain": plain, "first": first, "second": second.psi[0]}.items()
    }
    assert rmse["second"] < rmse["plain"] / 10, rmse
    third = zero_variance_influence(f, log_lik, score, theta, degree=3).psi[0]
    assert np.sqrt(np.mean((third - exact) ** 2)) < rmse["plain"] / 1000  # 27,000 times here
    assert rmse["first"] < 1.2 * rmse["plain"]  # never much worse


@pytest.mark.slow  # a Monte Carlo study: the full suite runs it
def test_the_mcse_is_the_spread_over_independent_draws():
    estimates, reported = [], []
    for seed in range(12):
        f, log_lik, score, theta, exact = _fit(10 + seed, n=500)
        result = zero_variance_influence(f, log_lik, score, theta)
        estimates.append(result.psi[0])
        reported.append(result.mcse[0])
    typical = np.sqrt(np.mean(np.square(reported), axis=0))
    ratio = np.median(np.std(estimates, axis=0, ddof=1) / typical)
    assert 0.6 < ratio < 1.6, ratio


def test_arguments_are_checked():
    f, log_lik, score, theta, _ = _fit(2, n=200)
    with pytest.raises(
        ValueError, match=r"^grad_log_posterior: found 40 draws while quantities has 4000"
    ):
        zero_variance_influence(f, log_lik, score[:, :10])
    with pytest.raises(ValueError, match=r"^degree: found 4; expected one of"):
        zero_variance_influence(f, log_lik, score, theta, degree=4)
    with pytest.raises(ValueError, match=r"^degree: found 2 without unconstrained draws"):
        zero_variance_influence(f, log_lik, score, degree=2)
    with pytest.raises(ValueError, match=r"^unconstrained: found shape"):
        zero_variance_influence(f, log_lik, score, theta[..., :2])
    bad = log_lik.copy()
    bad[0, 0, 0] = -np.inf
    with pytest.raises(ValueError, match=r"^log_lik: found -inf values"):
        zero_variance_influence(f, bad, score)


def test_the_zero_variance_mean_of_a_coefficient_is_nearly_exact():
    f, _, score, theta, _ = _fit(3, n=500)
    X, y = heavy_tailed_experiment(500, seed=0)
    exact = np.linalg.lstsq(X, y, rcond=None)[0][1]  # flat prior: the posterior mean is OLS
    mean, mcse = zero_variance_mean(f[..., 0], score, theta)
    plain_se = f.std() / np.sqrt(f.size)
    assert abs(mean - exact) < 3 * mcse + 1e-12
    assert mcse < plain_se / 100  # the score is linear in beta: the mean is all but exact


def _cross_fitted_terms(f, l, basis, blocks):
    """The estimator as its docstring defines it, term by term: ``h = (f - m_f)(l - m_l)``
    with control-variate means ``m``, each fold's ``h - Z B`` with ``B`` the least-squares
    fit of the other fold's ``h`` on its centred (standardised) functions."""
    z = basis / basis.std(axis=0)
    zc = z - z.mean(axis=0)

    def cv_mean(v):
        coef = np.linalg.lstsq(zc, v - v.mean(axis=0), rcond=None)[0]
        return v.mean(axis=0) - z.mean(axis=0) @ coef

    fold = np.zeros(f.shape[0], dtype=int)
    for b, rows in enumerate(blocks):
        fold[rows] = b % 2
    h = (f - cv_mean(f))[:, :, None] * (l - cv_mean(l))[:, None, :]  # (S, K, N)
    terms = np.empty_like(h)
    for side in (0, 1):
        train, held = fold != side, fold == side
        ztrain = z[train] - z[train].mean(axis=0)
        for k in range(f.shape[1]):
            target = h[train, k] - h[train, k].mean(axis=0)
            coef = np.linalg.lstsq(ztrain, target, rcond=None)[0]
            terms[held, k] = h[held, k] - z[held] @ coef
    return np.stack([terms[rows].sum(axis=0) for rows in blocks])  # (B, K, N)


def test_psi_its_mcse_and_block_sums_are_the_cross_fitted_terms_computed_one_by_one():
    # The matrix-product form (the terms never formed) against the terms themselves, on a
    # fit with two quantities and unequal chains; the MCSE is the batch means' over blocks.
    from bayesij.array.blocks import draw_blocks

    q, log_lik, score, theta, _ = _fit(3, n=60)
    rng = np.random.default_rng(1)
    f = np.concatenate([q, q**2 + rng.normal(size=q.shape)], axis=-1).reshape(4000, 2)
    l, g, t = log_lik.reshape(4000, -1), score.reshape(4000, -1), theta.reshape(4000, -1)
    chains = np.repeat(np.arange(3), [1500, 1500, 1000])
    result = zero_variance_influence(
        f, l, g, t, degree=2, chain_ids=chains, n_blocks=12, keep_blocks=True, blocks_of=[1]
    )
    blocks = draw_blocks(chains, 12)
    sums = _cross_fitted_terms(f, l, stein_basis(g, t, 2), blocks)
    sizes = np.array([rows.size for rows in blocks], dtype=float)[:, None, None]
    psi = sums.sum(axis=0) / 4000
    mcse = np.sqrt(np.sum(sizes * (sums / sizes - psi) ** 2, axis=0) / (len(blocks) - 1) / 4000)
    np.testing.assert_allclose(result.psi, psi, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.mcse, mcse, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.block_sums, sums[:, [1]], rtol=1e-9, atol=1e-10)
