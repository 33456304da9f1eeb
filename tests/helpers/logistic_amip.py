"""A logistic regression where the truth about influential sets is cheap: exact weighted
MLE refits by Newton's method, the estimating-equation AMIP (greedy on the first-order
influence, and iterated: re-ranked after every exact refit), and exact-in-distribution
posterior draws of the flat-prior Bayesian twin from an independence Metropolis-Hastings
sampler (a multivariate t proposal at the mode), fast enough to draw many independent sets
and to refit in the loop.

Written out here as the independent reference for bayesij.amip on a nonlinear model, where
the first-order prediction of a set's change misses by tens of per cent at 60-300 drops
(Broderick, Giordano & Meager 2020; Kuschnig, Zens & Crespo Cuaresma 2021).

Every function takes the GLM's ``family`` (default :data:`LOGISTIC`): :data:`POISSON`
gives the same references for a Poisson regression with a log link."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import expit, gammaln, log_expit

import bayesij
from bayesij import refit

NAMES = ["beta[1]", "beta[2]", "beta[3]", "beta[4]"]

#: The questions the tests and the benchmark ask: (coefficient index, target).
QUESTIONS = [
    (1, "sign"),
    (1, "significance"),
    (2, "significance"),
    (3, "sign"),
    (3, "significance"),
    (3, "sign_and_significance"),
]


class Family(NamedTuple):
    """A GLM with its canonical link: the mean and the variance (the information's
    weight) at the linear predictor, and the pointwise log-likelihood."""

    mean: Callable
    variance: Callable
    log_lik: Callable


LOGISTIC = Family(
    expit,
    lambda eta: expit(eta) * expit(-eta),
    lambda y, eta: y * log_expit(eta) + (1 - y) * log_expit(-eta),
)
POISSON = Family(np.exp, np.exp, lambda y, eta: y * eta - np.exp(eta) - gammaln(y + 1))


def counts_like(n: int = 500, seed: int = 0):
    """Overdispersed counts (negative binomial, size 2) against an intercept, a 0/1
    treatment, a normal covariate and a skewed one, for a Poisson regression that ignores
    the overdispersion (as an epilepsy-counts model without its patient effects): a few
    large counts pull the coefficients. Returns X (n, 4) and y (n,)."""
    rng = np.random.default_rng(seed)
    treated = (rng.random(n) < 0.5).astype(float)
    age = rng.normal(size=n)
    base = rng.gamma(2.0, 0.5, size=n) - 1.0
    X = np.column_stack([np.ones(n), treated, age, base])
    mean = np.exp(X @ np.array([0.8, -0.25, 0.1, 0.3]))
    y = rng.negative_binomial(2, 2 / (2 + mean)).astype(float)
    return X, y


def wells_like(n: int = 3020, seed: int = 0):
    """Simulated data in the spirit of the arsenic wells study (Gelman & Hill): whether a
    household switches wells, against an intercept, the distance to the nearest safe well
    (100 m), the arsenic level and education (years / 4). Returns X (n, 4) and y (n,)."""
    rng = np.random.default_rng(seed)
    dist100 = rng.gamma(1.5, 0.32, size=n)
    arsenic = 0.5 + rng.gamma(1.3, 0.9, size=n)
    educ4 = np.where(rng.random(n) < 0.28, 0.0, rng.integers(1, 18, size=n) / 4)
    X = np.column_stack([np.ones(n), dist100, arsenic, educ4])
    beta = np.array([-0.21, -0.90, 0.47, 0.12])
    y = (rng.random(n) < expit(X @ beta)).astype(float)
    return X, y


def mle(X, y, weights=None, start=None, family: Family = LOGISTIC):
    """The weighted MLE and the inverse of the weighted observed information (Newton,
    from 0 or, for counts, from the log of their mean)."""
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    beta = np.zeros(X.shape[1]) if start is None else np.array(start, dtype=float)
    if start is None and family is POISSON:
        beta[0] = np.log(max((w @ y) / w.sum(), 1e-3))  # the intercept's column first
    for _ in range(100):
        eta = X @ beta
        info = (X.T * (w * family.variance(eta))) @ X
        step = np.linalg.solve(info, X.T @ (w * (y - family.mean(eta))))
        beta = beta + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return beta, np.linalg.inv((X.T * (w * family.variance(X @ beta))) @ X)


def log_lik(X, y, beta, family: Family = LOGISTIC):
    """Pointwise log-likelihood at draws ``beta`` (..., p): shape (..., n)."""
    return family.log_lik(y, beta @ X.T)


def sample(X, y, weights=None, *, chains=4, draws=1000, seed=0, nu=7.0, family=LOGISTIC):
    """Draws of the flat-prior posterior under observation ``weights``: independence
    Metropolis-Hastings from a multivariate t (``nu``) at the weighted MLE with its
    covariance scaled by 1.1 (acceptance about 0.9 at n = 3000). Returns beta of shape
    (chains, draws, 4) and the gradient of the weighted log posterior there."""
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    rng = np.random.default_rng(seed)
    mode, cov = mle(X, y, w, family=family)
    chol = np.linalg.cholesky(1.1 * cov)
    p = X.shape[1]
    total = chains * (draws + 1)
    z = rng.standard_normal((total, p))
    scale = np.sqrt(nu / rng.chisquare(nu, size=total))
    proposals = mode + scale[:, None] * (z @ chol.T)
    solved = np.linalg.solve(chol, (proposals - mode).T).T
    log_q = -0.5 * (nu + p) * np.log1p(np.sum(solved**2, axis=1) / nu)
    log_target = np.concatenate(  # a block of draws at a time: (S, n) never held whole
        [log_lik(X, y, proposals[i : i + DRAW_BLOCK], family) @ w for i in _blocks(total)]
    )
    ratio = (log_target - log_q).reshape(chains, draws + 1)
    proposals = proposals.reshape(chains, draws + 1, p)
    u = np.log(rng.random((chains, draws + 1)))
    out = np.empty((chains, draws, p))
    for c in range(chains):
        current = 0  # the first proposal starts the chain (an exact draw of q, warmed up)
        for d in range(1, draws + 1):
            if u[c, d] < ratio[c, d] - ratio[c, current]:
                current = d
            out[c, d - 1] = proposals[c, current]
    flat = out.reshape(-1, p)
    gradient = np.concatenate(
        [((y - family.mean(flat[i : i + DRAW_BLOCK] @ X.T)) * w) @ X for i in _blocks(len(flat))]
    ).reshape(chains, draws, p)
    return out, gradient


#: Draws whose log-likelihood :func:`sample` holds at once: (DRAW_BLOCK, n).
DRAW_BLOCK = 500


def _blocks(n_draws: int) -> range:
    """The first draw of each block of :data:`DRAW_BLOCK` draws."""
    return range(0, n_draws, DRAW_BLOCK)


class LogisticBackend(refit.Backend):
    """Refits of the flat-prior logistic regression under observation weights (a fresh
    set of 4 x 1000 draws each, seeded by the weights)."""

    def __init__(self, X, y, *, draws=1000, chains=4, seed=0, family: Family = LOGISTIC):
        self.X, self.y, self.draws, self.chains, self.seed = X, y, draws, chains, seed
        self.n_obs, self.family = y.size, family

    def fit(self, weights):
        return self.fit_with_gradient(weights)[0]

    def fit_with_gradient(self, weights):
        w = self.checked_weights(weights)
        seed = refit.backends.refit_seed(self.seed, w)
        beta, gradient = sample(
            self.X, self.y, w, chains=self.chains, draws=self.draws, seed=seed, family=self.family
        )
        names = [f"beta[{j + 1}]" for j in range(self.X.shape[1])]
        lik = log_lik(self.X, self.y, beta, self.family)
        return bayesij.from_arrays(beta, lik, quantity_names=names), gradient, beta


def metric(X, y, weights, k: int, sign: int, z: float = 1.96, family=LOGISTIC) -> float:
    """``beta_k + sign z se_k`` at the weighted MLE (the Bayesian metric to O(1/n))."""
    beta, cov = mle(X, y, weights, family=family)
    return float(beta[k] + sign * z * np.sqrt(cov[k, k]))


def linear_effects(X, y, weights, k: int, sign: int, z: float = 1.96, family=LOGISTIC):
    """First-order change of the metric from setting each observation's weight to 0, at the
    weighted MLE: the mean through the estimating equation, the variance through the
    information's derivative (-v x x^T for each observation, v the family's variance)."""
    beta, cov = mle(X, y, weights, family=family)
    eta = X @ beta
    h = X @ cov  # (n, p): rows cov x_n
    d_beta = -h[:, k] * (y - family.mean(eta))  # dropping n: -cov x_n (y_n - mu_n)
    # d cov = cov (v x x^T) cov when dropping n, plus the change through beta (ignored:
    # second order at the MLE for the variance's leading term)
    d_var = family.variance(eta) * h[:, k] ** 2
    se = np.sqrt(cov[k, k])
    return d_beta + sign * z * d_var / (2 * se)


def _sign_for(X, y, k, target, z, family=LOGISTIC):
    mean0 = metric(X, y, None, k, 0, z, family)
    same = 1 if mean0 >= 0 else -1
    return {"sign": 0, "significance": -same, "sign_and_significance": same}[target]


def ee_amip(X, y, k: int, target: str, z=1.96, max_drop=None, iterate=True, family=LOGISTIC):
    """The estimating-equation AMIP with exact refits: rank by the first-order effect
    (re-ranked at the current weights after each exact refit when ``iterate``, every
    ``step`` drops), add the top unit, refit exactly; the first set whose refit crosses.
    Returns (positions in the order dropped, metric after) or (None, nan)."""
    n = y.size
    max_drop = max_drop or n // 10
    sign = _sign_for(X, y, k, target, z, family)
    start = metric(X, y, None, k, sign, z, family)
    direction = -1 if start > 0 else 1
    weights = np.ones(n)
    dropped = []
    while len(dropped) < max_drop:
        gain = direction * linear_effects(X, y, weights, k, sign, z, family)
        gain[weights == 0] = -np.inf
        order = np.argsort(-gain, kind="stable")
        batch = order[: (1 if iterate else max_drop)]
        for unit in batch:
            weights[unit] = 0.0
            dropped.append(int(unit))
            after = metric(X, y, weights, k, sign, z, family)
            if np.sign(after) != np.sign(start):
                return np.array(dropped), after
            if len(dropped) >= max_drop:
                break
    return None, float("nan")


def exact_prefix(X, y, order, k: int, target: str, z: float = 1.96, family=LOGISTIC):
    """The smallest prefix of ``order`` whose exact (MLE) refit crosses the target, by a
    scan (None: no prefix does)."""
    sign = _sign_for(X, y, k, target, z, family)
    start = metric(X, y, None, k, sign, z, family)
    weights = np.ones(y.size)
    for size, unit in enumerate(order, start=1):
        weights[unit] = 0.0
        if np.sign(metric(X, y, weights, k, sign, z, family)) != np.sign(start):
            return size
    return None


def crosses(X, y, ids, k: int, target: str, z: float = 1.96, family=LOGISTIC) -> bool:
    """Whether the exact refit without all of ``ids`` crosses the target."""
    sign = _sign_for(X, y, k, target, z, family)
    weights = np.ones(y.size)
    weights[np.asarray(ids, dtype=int)] = 0.0
    start = metric(X, y, None, k, sign, z, family)
    return bool(np.sign(metric(X, y, weights, k, sign, z, family)) != np.sign(start))


def posterior_crosses(X, y, ids, k: int, target: str, z=1.96, family=LOGISTIC, draws=25_000):
    """Whether the flat-prior posterior without ``ids`` crosses the target, from 4 x
    ``draws`` independence Metropolis-Hastings draws (exact in distribution), where the
    MLE's metric (:func:`crosses`, O(1/n) off the posterior's) is too close to tell: True,
    False, or None where the posterior's metric is within 3 Monte Carlo SEs (batch means)
    of 0. The full data's posterior gives the metric's sign before the drop."""
    sign = _sign_for(X, y, k, target, z, family)
    weights = np.ones(y.size)
    weights[np.asarray(ids, dtype=int)] = 0.0
    values = []
    for w in (None, weights):  # a chain at a time: a (draws, N) log-likelihood, not 4 x
        chains = [
            sample(X, y, w, chains=1, draws=draws, seed=17 + c, family=family)[0] for c in range(4)
        ]
        flat = np.concatenate(chains)[..., k].reshape(-1)
        mean, sd = flat.mean(), flat.std(ddof=1)
        g_star = flat + sign * z * (flat - mean) ** 2 / (2 * sd)  # the interval end's draws
        batches = g_star.reshape(100, -1).mean(axis=1)
        values.append((mean + sign * z * sd, batches.std(ddof=1) / np.sqrt(100)))
    (before, _), (after, mcse) = values
    if abs(after) < 3 * mcse:
        return None
    return bool(np.sign(after) != np.sign(before))


def assert_prior_known_from_the_gradient(theta, values, gradient) -> None:
    """Draws ``theta`` (S, P) of a flat-prior fit, its log-likelihood ``values`` (S, N) and
    the log posterior's score ``gradient`` (S, P): recovered with no prior, and with the
    score of a normal prior N(0, 2^2 I) on the coefficients added (``-theta / 4``), with
    that prior's precision and pull in the model's whitened parameters."""
    from bayesij.array.amip_logistic import recover_glm

    flat = recover_glm(theta, values, gradient)
    assert flat.batches.size == 0
    np.testing.assert_allclose(flat.precision, 0, atol=1e-6)
    normal = recover_glm(theta, values, gradient - theta / 4)
    want = normal.basis.T @ normal.basis / 4
    np.testing.assert_allclose(normal.precision, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(normal.pull, -normal.basis.T @ normal.mean / 4, rtol=1e-6)
