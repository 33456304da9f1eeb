"""Exact refits of ``benchmarks/audit.py``'s varying-intercept model (``y ~ N(alpha[g],
sigma)``, ``alpha ~ N(mu, tau)``, flat priors) without a set of observations: its Gibbs
sampler, every conditional exact (each from the groups' weighted sums, so a sweep costs
O(groups)), which the benchmark also draws its fit with, and a refit backend on it."""

import functools
from itertools import combinations
from math import comb

import numpy as np
from ols_amip import smallest_prefix

import bayesij
from bayesij import refit


def gibbs_draws(y, group, rng, warmup: int, draws: int, weights=None, x=None) -> dict:
    """4 chains x ``draws`` of the exact Gibbs sampler after ``warmup`` sweeps, for ``y``
    (n,) in groups ``group`` (n,; codes 0..G-1, every one present), from the generator
    ``rng``: ``{"mu", "tau", "sigma"}`` of shape (4, draws) and ``"alpha"`` (4, draws, G).
    ``weights`` (n,) multiply each observation's log-likelihood (0: dropped; a group left
    without observations keeps its effect, drawn from its prior). ``x`` (n, B): predictors
    with slopes ``beta`` (flat prior; ``"beta"`` (4, draws, B) added), ``y ~ N(alpha[g] +
    x . beta, sigma)``; without them the draws are those of the model without predictors,
    to the bit."""
    if x is not None:
        return _gibbs_with_slopes(y, group, rng, (warmup, draws), weights, np.asarray(x, float))
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    n_groups, n_obs = group.max() + 1, float(w.sum())
    count = np.bincount(group, weights=w, minlength=n_groups)
    total = np.bincount(group, weights=w * y, minlength=n_groups)
    squares = float((w * y) @ y)
    mu, tau, sigma = np.full(4, y.mean()), np.ones(4), np.ones(4)
    kept = {"mu": [], "tau": [], "sigma": [], "alpha": []}
    for sweep in range(warmup + draws):
        alpha, mu, tau = _effects_and_prior(count, total, (mu, tau, sigma), rng)
        residual = squares - 2 * alpha @ total + (alpha**2) @ count
        sigma = np.sqrt(residual / 2 / rng.gamma(n_obs / 2, size=4))
        if sweep >= warmup:
            for name, value in zip(kept, (mu, tau, sigma, alpha), strict=True):
                kept[name].append(value)
    return {name: np.stack(values, axis=1) for name, values in kept.items()}


def _gibbs_with_slopes(y, group, rng, sweeps: tuple, weights, x) -> dict:
    """:func:`gibbs_draws` with predictors ``x`` (n, B): each sweep draws the effects
    given the residuals ``y - x . beta``, then ``mu``, ``tau``, the slopes given ``y -
    alpha[g]`` (``N((X'WX)^-1 X'W r, sigma^2 (X'WX)^-1)``) and ``sigma``."""
    warmup, draws = sweeps
    w = np.ones(y.size) if weights is None else np.asarray(weights, dtype=float)
    n_groups, n_obs = group.max() + 1, float(w.sum())
    count = np.bincount(group, weights=w, minlength=n_groups)
    gram = (x * w[:, None]).T @ x
    root = np.linalg.cholesky(np.linalg.inv(gram))
    mu, tau, sigma = np.full(4, y.mean()), np.ones(4), np.ones(4)
    beta = np.zeros((4, x.shape[1]))
    kept = {"mu": [], "tau": [], "sigma": [], "alpha": [], "beta": []}
    for sweep in range(warmup + draws):
        r = y - beta @ x.T  # (4, n)
        total = np.stack([np.bincount(group, weights=w * row, minlength=n_groups) for row in r])
        alpha, mu, tau = _effects_and_prior(count, total, (mu, tau, sigma), rng)
        centre = np.linalg.solve(gram, (((y - alpha[:, group]) * w) @ x).T)  # (B, 4)
        beta = centre.T + sigma[:, None] * (rng.normal(size=beta.shape) @ root.T)
        residual = y - alpha[:, group] - beta @ x.T
        sigma = np.sqrt((w * residual**2).sum(axis=1) / 2 / rng.gamma(n_obs / 2, size=4))
        if sweep >= warmup:
            for name, value in zip(kept, (mu, tau, sigma, alpha, beta), strict=True):
                kept[name].append(value)
    return {name: np.stack(values, axis=1) for name, values in kept.items()}


def _effects_and_prior(count, total, state: tuple, rng) -> tuple:
    """One sweep's draws of the effects (4, G) given the groups' weighted counts and sums
    (of the residuals, with predictors) and the current ``(mu, tau, sigma)`` of the 4
    chains, then of ``mu`` and ``tau`` given the effects: ``(alpha, mu, tau)``."""
    mu, tau, sigma = state
    n_groups = count.size
    precision = count / sigma[:, None] ** 2 + 1 / tau[:, None] ** 2
    mean = (total / sigma[:, None] ** 2 + (mu / tau**2)[:, None]) / precision
    alpha = mean + rng.normal(size=mean.shape) / np.sqrt(precision)
    mu = alpha.mean(axis=1) + tau / np.sqrt(n_groups) * rng.normal(size=4)
    spread = ((alpha - mu[:, None]) ** 2).sum(axis=1)
    tau = np.sqrt(spread / 2 / rng.gamma((n_groups - 1) / 2, size=4))
    return alpha, mu, tau


def posterior_means(y, group, seed: int = 5, warmup: int = 300, draws: int = 5000) -> dict:
    """Posterior means of ``mu``, ``tau`` and ``sigma`` given ``y`` (n,) in groups
    ``group`` (n,; the levels present are renumbered), from 4 chains of the exact Gibbs
    sampler, run long enough that they are known to about 0.002."""
    _, group = np.unique(group, return_inverse=True)
    found = gibbs_draws(y, group, np.random.default_rng(seed), warmup, draws)
    return {name: float(np.mean(found[name])) for name in ("mu", "tau", "sigma")}


def simulate(n_groups: int = 24, per_group: int = 10, seed: int = 3):
    """A varying-intercept data set with t(4) noise (heavier tails than the model's normal
    errors): group effects ``0.4 + 0.5 N(0, 1)``. Returns y (n,) and each one's group (n,)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_groups), per_group)
    y = (0.4 + 0.5 * rng.normal(size=n_groups))[group] + rng.standard_t(4, size=group.size)
    return y, group


class GibbsHierarchyBackend(refit.Backend):
    """Refits of the varying-intercept model under observation weights: ``chains`` x
    ``draws`` of the exact Gibbs sampler after ``warmup`` sweeps, seeded by the weights.
    Quantities ``mu``, ``tau``, ``sigma`` and ``alpha[g]``; the unweighted pointwise
    log-likelihood of every observation."""

    def __init__(self, y, group, *, draws: int = 1000, warmup: int = 300, seed: int = 0):
        self.y, self.group = np.asarray(y, dtype=float), np.asarray(group, dtype=int)
        self.draws, self.warmup, self.seed = int(draws), int(warmup), int(seed)
        self.n_obs = self.y.size

    def fit(self, weights):
        w = self.checked_weights(weights)
        rng = np.random.default_rng(refit.backends.refit_seed(self.seed, w))
        found = gibbs_draws(self.y, self.group, rng, self.warmup, self.draws, w)
        names = ["mu", "tau", "sigma"] + [f"alpha[{g}]" for g in range(found["alpha"].shape[2])]
        quantities = np.concatenate(
            [np.stack([found[k] for k in ("mu", "tau", "sigma")], axis=-1), found["alpha"]],
            axis=-1,
        )
        mean = found["alpha"][..., self.group]
        sigma = found["sigma"][..., None]
        log_lik = -0.5 * ((self.y - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
        return bayesij.from_arrays(quantities, log_lik, quantity_names=names)

    def __repr__(self) -> str:
        return f"GibbsHierarchyBackend(n_obs={self.n_obs}, seed={self.seed})"


class HierarchyDensity:
    """The varying-intercept model's log density on the unconstrained scale
    ``(mu, log tau, log sigma, alpha[0..G-1])`` (flat priors on mu, tau and sigma, so the
    Jacobian adds ``log tau + log sigma``), for moment matching
    (``unconstrain``, ``log_prob``, ``log_lik_i``) and the influences' control variates
    (``grad_log_posterior``, analytic), as a model density passed to ``bayesij.amip`` or
    ``bayesij.audit`` would be."""

    def __init__(self, y, group):
        self.y, self.group = np.asarray(y, dtype=float), np.asarray(group, dtype=int)
        self.n_groups = int(self.group.max()) + 1

    def unconstrain(self, post):
        """Draws (S, 3 + G) from a posterior of :class:`GibbsHierarchyBackend`'s
        quantities."""
        q = post.quantities.values.reshape(-1, 3 + self.n_groups)
        return np.column_stack([q[:, 0], np.log(q[:, 1]), np.log(q[:, 2]), q[:, 3:]])

    def log_prob(self, u):
        mu, log_tau, log_sigma, alpha = u[:, 0], u[:, 1], u[:, 2], u[:, 3:]
        tau, sigma = np.exp(log_tau)[:, None], np.exp(log_sigma)[:, None]
        prior = (-0.5 * ((alpha - mu[:, None]) / tau) ** 2).sum(1) - self.n_groups * log_tau
        residual = (self.y - alpha[:, self.group]) / sigma
        lik = (-0.5 * residual**2).sum(1) - self.y.size * log_sigma
        return prior + lik + log_tau + log_sigma

    def log_lik_i(self, u, i):
        sigma = np.exp(u[:, 2])
        return -0.5 * ((self.y[i] - u[:, 3 + self.group[i]]) / sigma) ** 2 - u[:, 2]

    def grad_log_posterior(self, fit):
        post = fit.in_memory("the test", need_quantities=True)
        u = self.unconstrain(post)
        mu, alpha = u[:, 0], u[:, 3:]
        tau2, sigma2 = np.exp(2 * u[:, 1]), np.exp(2 * u[:, 2])
        spread, residual = alpha - mu[:, None], self.y - alpha[:, self.group]
        sums = np.stack([np.bincount(self.group, row, self.n_groups) for row in residual])
        gradient = np.column_stack(
            [
                spread.sum(1) / tau2,
                (spread**2).sum(1) / tau2 - self.n_groups + 1,
                (residual**2).sum(1) / sigma2 - self.y.size + 1,
                -spread / tau2[:, None] + sums / sigma2[:, None],
            ]
        )
        shape = post.quantities.shape[:2] + (u.shape[1],)
        return gradient.reshape(shape), u.reshape(shape)


def metric_after(
    y, group, dropped, quantity: str, sign: int, z: float = 1.96, seed: int = 5, x=None
) -> float:
    """``mean + sign z sd`` of ``quantity`` (``mu``, ``tau``, ``sigma``, or with predictors
    ``x`` (n, B) a slope ``beta[k]``, k from 1) without the observations ``dropped``, from
    4 x 5000 draws of the exact Gibbs sampler (known to about 0.002): the reference an
    answer's set is checked against."""
    weights = np.ones(y.size)
    weights[np.asarray(dropped, dtype=int)] = 0.0
    found = gibbs_draws(y, group, np.random.default_rng(seed), 300, 5000, weights, x=x)
    if quantity.startswith("beta["):
        draws = found["beta"][..., int(quantity[5:-1]) - 1]
    else:
        draws = found[quantity]
    return float(draws.mean() + sign * z * draws.std())


def simulate_with_predictors(n_groups: int = 24, per_group: int = 10, seed: int = 2):
    """A varying-intercept data set with two predictors (one normal, one 0/1 with
    probability 0.4) and t(4) noise, ``y = alpha[g] + 0.25 x1 - 0.3 x2 + t(4)``, group
    effects ``0.4 + 0.5 N(0, 1)``. Returns y (n,), each one's group (n,) and x (n, 2)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_groups), per_group)
    x = np.column_stack([rng.normal(size=group.size), rng.random(group.size) < 0.4])
    effects = 0.4 + 0.5 * rng.normal(size=n_groups)
    y = effects[group] + x @ [0.25, -0.3] + rng.standard_t(4, size=group.size)
    return y, group, x


def posterior_with_slopes(y, group, x, seed: int, draws: int = 1000):
    """4 x ``draws`` exact Gibbs draws (200 sweeps of warm-up) of the varying-intercept
    model with predictors ``x`` (n, B), flat priors, as plain arrays: ``beta[1]``...,
    ``mu``, ``tau``, ``sigma``, ``alpha[g]``... and every observation's log-likelihood."""
    found = gibbs_draws(y, group, np.random.default_rng(seed), 200, draws, x=x)
    n_slopes = x.shape[1]
    scalars = [found["beta"][..., k] for k in range(n_slopes)]
    scalars += [found[k] for k in ("mu", "tau", "sigma")]
    quantities = np.concatenate([np.stack(scalars, axis=-1), found["alpha"]], axis=-1)
    names = [f"beta[{k + 1}]" for k in range(n_slopes)] + ["mu", "tau", "sigma"]
    names += [f"alpha[{g}]" for g in range(found["alpha"].shape[-1])]
    mean = found["alpha"][..., group] + found["beta"] @ x.T
    sigma = found["sigma"][..., None]
    log_lik = -0.5 * ((y - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    return bayesij.from_arrays(quantities, log_lik, quantity_names=names)


def held_variances_metric(y, group, weights, sign: int, z: float = 1.96) -> float:
    """``mean + sign z sd`` of ``mu`` under observation ``weights`` with ``tau`` and
    ``sigma`` held at their posterior means (:func:`held_variances`): mu's flat-prior
    posterior is each group's mean
    with variance ``tau^2 + sigma^2 / n_g``, precision-weighted (a group without data adds
    nothing). The closed form the references rank sets by."""
    tau, sigma = held_variances(y, group)
    n_groups = int(group.max()) + 1
    count = np.bincount(group, weights, minlength=n_groups)
    total = np.bincount(group, weights * y, minlength=n_groups)
    present = count > 0
    share = 1 / (tau**2 + sigma**2 / count[present])
    ybar = total[present] / count[present]
    return float((share @ ybar + sign * z * np.sqrt(share.sum())) / share.sum())


@functools.lru_cache(maxsize=8)
def _held(key: bytes, group_key: bytes) -> tuple:
    y, group = np.frombuffer(key), np.frombuffer(group_key, dtype=int)
    means = posterior_means(y, group)
    return means["tau"], means["sigma"]


def held_variances(y, group) -> tuple:
    """``tau`` and ``sigma``'s posterior means (:func:`posterior_means`, worked out once
    per data set)."""
    y = np.ascontiguousarray(y, dtype=float)
    return _held(y.tobytes(), np.ascontiguousarray(group, dtype=int).tobytes())


def greedy_reference(y, group, quantity_sign: int, flip_sign: float, limit: int, z: float = 1.96):
    """An upper bound of the smallest set of observations whose removal moves ``mu``'s
    ``mean + quantity_sign z sd`` to the sign ``flip_sign``: observations dropped greedily
    by :func:`held_variances_metric`, then the smallest prefix of that order whose exact
    refit (:func:`metric_after`) crosses, by bisection. None when the greedy set of
    ``limit`` does not cross on exact refit."""
    weights = np.ones(y.size)
    order = []
    for _ in range(limit):
        best, best_value = None, np.inf
        for n in np.flatnonzero(weights > 0):
            weights[n] = 0.0
            # smaller: further toward the flip
            value = -flip_sign * held_variances_metric(y, group, weights, quantity_sign, z)
            weights[n] = 1.0
            if value < best_value:
                best, best_value = n, value
        weights[best] = 0.0
        order.append(int(best))

    def crosses(size: int) -> bool:
        return np.sign(metric_after(y, group, order[:size], "mu", quantity_sign)) == flip_sign

    return smallest_prefix(crosses, limit)


def integrated_fit(y, group, found: dict):
    """The fit's global quantities (``mu``, ``tau``, ``sigma``) beside each group's
    log-likelihood with its own effect integrated out, ``log N(y_g | mu, sigma^2 I + tau^2
    1 1')`` at each draw (:func:`bayesij.array.hierarchy.normal_group_log_lik`): a
    Posterior whose units are the groups, as the audit's AMIP over integrated terms reads
    it. ``found``: :func:`gibbs_draws`."""
    from bayesij.array.hierarchy import normal_group_log_lik

    residuals = np.asarray(y)[None, None, :] - found["mu"][..., None]
    terms = normal_group_log_lik(residuals, group, found["tau"], found["sigma"])
    quantities = np.stack([found[k] for k in ("mu", "tau", "sigma")], axis=-1)
    return bayesij.from_arrays(quantities, terms, quantity_names=["mu", "tau", "sigma"])


class GroupGibbsBackend(refit.Backend):
    """Refits of the varying-intercept model under weights of its groups (each group's
    weight given to all its observations), answered over the groups' integrated terms
    (:func:`integrated_fit`): refits in the loop of an AMIP over groups."""

    def __init__(self, y, group, *, draws: int = 1000, warmup: int = 300, seed: int = 0):
        self.y, self.group = np.asarray(y, dtype=float), np.asarray(group, dtype=int)
        self.draws, self.warmup, self.seed = int(draws), int(warmup), int(seed)
        self.n_obs = int(self.group.max()) + 1

    def fit(self, weights):
        w = self.checked_weights(weights)
        rng = np.random.default_rng(refit.backends.refit_seed(self.seed, w))
        found = gibbs_draws(self.y, self.group, rng, self.warmup, self.draws, w[self.group])
        return integrated_fit(self.y, self.group, found)

    def __repr__(self) -> str:
        return f"GroupGibbsBackend(n_groups={self.n_obs}, seed={self.seed})"


def group_reference(y, group, quantity_sign: int, flip_sign: float, limit: int, z=1.96):
    """An upper bound of the smallest set of groups whose removal moves ``mu``'s ``mean +
    quantity_sign z sd`` to the sign ``flip_sign``: the best set of each size up to
    ``limit`` by :func:`held_variances_metric` (every set where there are at most 20,000,
    else greedily), the smallest whose exact refit (:func:`metric_after`) crosses. None
    when none does."""
    n_groups = int(group.max()) + 1

    def away(groups) -> float:  # smaller: further toward the flip
        weights = (~np.isin(group, list(groups))).astype(float)
        return -flip_sign * held_variances_metric(y, group, weights, quantity_sign, z)

    best: list = []
    for size in range(1, limit + 1):
        if comb(n_groups, size) <= 20_000:
            best = list(min(combinations(range(n_groups), size), key=away))
        else:
            rest = [g for g in range(n_groups) if g not in best]
            best = best + [min(rest, key=lambda g: away(best + [g]))]
        dropped = np.flatnonzero(np.isin(group, best))
        if np.sign(metric_after(y, group, dropped, "mu", quantity_sign)) == flip_sign:
            return size
    return None
