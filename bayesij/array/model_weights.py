"""Model weights from pointwise elpd: stacking of predictive distributions, pseudo-BMA and
pseudo-BMA+ (the Bayesian bootstrap).

All take ``lpd`` of shape (n_obs, n_models): the pointwise LOO (or K-fold, or held-out)
log predictive densities ``log p(y_n | y_-n, M_k)`` of each model on the same observations.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

__all__ = [
    "stacking_weights",
    "pseudobma_weights",
    "score_stacking_weights",
    "mixture_score",
    "hierarchical_stacking_weights",
    "log_score",
    "crps_score",
]


def stacking_weights(lpd: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """Stacking weights: ``argmax_w sum_n log sum_k w_k exp(lpd_nk)`` over the simplex.

    The objective is concave in ``w``; it is maximised by SLSQP with its gradient, on the
    densities scaled by each row's maximum (``exp`` of large negative lpd underflows
    otherwise), from equal weights.

    Parameters
    ----------
    lpd : ndarray of shape (n_obs, n_models)
    tol : float
        SLSQP's tolerance on the objective.

    Returns
    -------
    ndarray of shape (n_models,)
        Non-negative weights summing to one.

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.
    """
    n_obs, n_models = lpd.shape
    density = np.exp(lpd - lpd.max(axis=1, keepdims=True))

    def negative_score(w):
        return -np.sum(np.log(density @ w)) / n_obs

    def gradient(w):
        return -(density / (density @ w)[:, None]).sum(axis=0) / n_obs

    return _simplex_minimum(negative_score, gradient, np.full(n_models, 1.0 / n_models), tol)


def _simplex_minimum(loss, gradient, start: np.ndarray, tol: float) -> np.ndarray:
    """SLSQP's minimum of ``loss`` over the simplex from ``start``: non-negative weights
    summing to one."""
    result = minimize(
        loss,
        start,
        jac=gradient,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * start.size,
        constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0, "jac": np.ones_like}],
        options={"ftol": tol, "maxiter": 1000},
    )
    weights = np.clip(result.x, 0.0, None)
    return weights / weights.sum()


def pseudobma_weights(
    lpd: np.ndarray,
    bootstrap: bool = True,
    n_bootstrap: int = 1000,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Pseudo-BMA weights ``w_k ∝ exp(elpd_k)``, or pseudo-BMA+ with the Bayesian bootstrap.

    Without the bootstrap, ``elpd_k = sum_n lpd_nk``. With it, each of ``n_bootstrap``
    replicates draws ``alpha ~ Dirichlet(1, ..., 1)`` over the observations, takes
    ``z_k = N sum_n alpha_n lpd_nk`` and the softmax of ``z``; the weights are the mean of
    the replicates' softmaxes (which regularises towards uncertainty in the elpd
    differences).

    Parameters
    ----------
    lpd : ndarray of shape (n_obs, n_models)
    bootstrap : bool, default True
        Pseudo-BMA+ (True) or plain pseudo-BMA (False).
    n_bootstrap : int, default 1000
    rng : numpy.random.Generator, optional

    Returns
    -------
    ndarray of shape (n_models,)

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007
       (Section 3.2, pseudo-BMA and the Bayesian bootstrap).
    """
    if not bootstrap:
        return softmax(lpd.sum(axis=0))
    rng = np.random.default_rng() if rng is None else rng
    n_obs = lpd.shape[0]
    alpha = rng.dirichlet(np.ones(n_obs), size=n_bootstrap)
    z = n_obs * (alpha @ lpd)
    return np.exp(z - logsumexp(z, axis=1, keepdims=True)).mean(axis=0)


def score_stacking_weights(
    absolute: np.ndarray, spread: np.ndarray, kind: str = "crps", tol: float = 1e-12
) -> tuple[np.ndarray, float]:
    """Stacking weights that maximise the mean LOO CRPS or SCRPS of the mixture.

    For the mixture ``sum_k w_k F_k`` of predictive distributions, ``E|X - y| = w' a_n``
    and ``E|X - X'| = w' B_n w`` with ``a_nk = E|X_k - y_n|`` and ``B_nkl = E|X_k - X_l|``
    (independent draws of models k and l): the mixture's CRPS ``w' a_n - w' B_n w / 2`` is
    a convex quadratic on the simplex (``B`` is conditionally negative definite), its SCRPS
    ``-w' a_n / w' B_n w - log(w' B_n w) / 2`` is not: SLSQP from equal weights and from
    each vertex, the best kept.

    Parameters
    ----------
    absolute : ndarray of shape (n_obs, n_models)
        ``a_nk``.
    spread : ndarray of shape (n_obs, n_models, n_models)
        ``B_nkl`` (symmetric).
    kind : {"crps", "scrps"}

    Returns
    -------
    weights : ndarray of shape (n_models,)
    score : float
        The mixture's mean score at the weights (CRPS negated, SCRPS: larger is better).

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.
    .. [2] Bolin, D. and Wallin, J. (2023). Local scale invariance and robustness of proper
       scoring rules. Statistical Science 38(1), 140-159.
    """
    n_obs, n_models = absolute.shape
    if kind == "crps":
        a_mean, b_mean = absolute.mean(axis=0), spread.mean(axis=0)

        def loss(w):
            return float(w @ a_mean - 0.5 * w @ b_mean @ w)

        def gradient(w):
            return a_mean - b_mean @ w

    else:

        def loss(w):
            return -mixture_score(absolute, spread, w, kind)

        def gradient(w):
            bw = np.einsum("nkl,l->nk", spread, w)
            q = bw @ w
            l_n = absolute @ w
            terms = absolute / q[:, None] - 2.0 * (l_n / q**2)[:, None] * bw + bw / q[:, None]
            return terms.mean(axis=0)

    starts = [np.full(n_models, 1.0 / n_models), *np.eye(n_models)]
    found = [_simplex_minimum(loss, gradient, start, tol) for start in starts]
    values = [loss(weights) for weights in found]
    best = int(np.argmin(values))
    return found[best], -values[best]


def mixture_score(absolute: np.ndarray, spread: np.ndarray, weights, kind: str) -> float:
    """The mean LOO CRPS (negated) or SCRPS of the mixture with ``weights`` (K,), from
    ``a_nk = E|X_k - y_n|`` (n, K) and ``B_nkl = E|X_k - X_l|`` (n, K, K) as in
    :func:`score_stacking_weights`: larger is better."""
    w = np.asarray(weights, dtype=float)
    distance = absolute @ w
    q = np.einsum("k,nkl,l->n", w, spread, w)
    if kind == "crps":
        return float(np.mean(0.5 * q - distance))
    return float(np.mean(-distance / q - 0.5 * np.log(q)))


def log_score(lpd: np.ndarray):
    """The mixture's pointwise log score ``log sum_k w_nk exp(lpd_nk)`` as a function of the
    weights (N, K), with its gradient in them: for :func:`hierarchical_stacking_weights`."""
    top = lpd.max(axis=1, keepdims=True)
    density = np.exp(lpd - top)

    def score(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mixture = np.sum(w * density, axis=1, keepdims=True)
        return (np.log(mixture) + top)[:, 0], density / mixture

    return score


def crps_score(absolute: np.ndarray, spread: np.ndarray):
    """The mixture's pointwise CRPS, negated, ``-(w_n' a_n - w_n' B_n w_n / 2)``, as a
    function of the weights (N, K), with its gradient ``B_n w_n - a_n`` (``a``, ``B`` as
    :func:`score_stacking_weights`)."""

    def score(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bw = np.einsum("nkl,nl->nk", spread, w)
        return -(np.sum(w * absolute, axis=1) - 0.5 * np.sum(w * bw, axis=1)), bw - absolute

    return score


def hierarchical_stacking_weights(
    score, n_models: int, design: np.ndarray, prior_scale: float, intercept_scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacking weights that vary with the observations' inputs: ``w_n = softmax(a_n)``,
    ``a_nk = mu_k + design_n . beta_k`` (model K the reference, ``a_nK = 0``), at the
    maximum of the mixture's summed pointwise score ``sum_n s_n(w_n)`` (:func:`log_score`,
    :func:`crps_score`) less the normal priors' penalties ``|beta|^2 / (2 prior_scale^2) +
    |mu|^2 / (2 intercept_scale^2)``: each input's effect on the weights pooled towards
    none (a group indicator: each group's weights towards the common ones).

    Parameters
    ----------
    score : callable
        ``score(w)`` for weights (n_obs, n_models): each observation's score and its
        gradient in ``w``, (n_obs,) and (n_obs, n_models).
    n_models : int
    design : ndarray of shape (n_obs, n_inputs)
        The inputs (standardised covariates, group indicators).
    prior_scale, intercept_scale : float
        Sds of the normal priors of ``beta`` and ``mu`` (logit scale).

    Returns
    -------
    weights : ndarray of shape (n_obs, n_models)
    mu : ndarray of shape (n_models - 1,)
    beta : ndarray of shape (n_models - 1, n_inputs)

    References
    ----------
    .. [1] Yao, Y., Pirš, G., Vehtari, A. and Gelman, A. (2022). Bayesian hierarchical
       stacking: some models are (somewhere) useful. Bayesian Analysis 17(4), 1043-1071.
    """
    n_obs, n_inputs = design.shape
    free = n_models - 1
    scaled = design * prior_scale  # beta = prior_scale * b: the penalty |b|^2 / 2, well posed

    def unpack(theta):
        return theta[:free], theta[free:].reshape(free, n_inputs)

    def weights_of(theta):
        mu, b = unpack(theta)
        return softmax(np.column_stack([mu + scaled @ b.T, np.zeros(n_obs)]), axis=1)

    def loss_and_gradient(theta):
        mu, b = unpack(theta)
        w = weights_of(theta)
        values, d_w = score(w)
        d_logits = (w * (d_w - np.sum(w * d_w, axis=1, keepdims=True)))[:, :free]
        loss = -np.sum(values) + 0.5 * np.sum(b**2) + 0.5 * np.sum(mu**2) / intercept_scale**2
        grad_mu = -d_logits.sum(axis=0) + mu / intercept_scale**2
        grad_b = -d_logits.T @ scaled + b
        return loss, np.concatenate([grad_mu, grad_b.ravel()])

    found = minimize(
        loss_and_gradient,
        np.zeros(free * (1 + n_inputs)),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000},
    )
    mu, b = unpack(found.x)
    return weights_of(found.x), mu, prior_scale * b
