"""Draws of a Poisson GLMM whose group effects are exact conditional posterior draws given
the global quantities (inverse CDF on a fine grid): what Stein's identity holds for, with
the prior they were drawn under, without a sampler. The global quantities' draws are any
distribution's (the identity in the effects holds conditionally on them)."""

import numpy as np
import xarray as xr
from scipy.special import gammaln


def conditional_effects(rng, log_lik_of, prior_mean, prior_sd, n_groups):
    """Each group's effect drawn from its exact conditional posterior given each draw's
    globals: ``log_lik_of(a)`` (S, G) is each group's log-likelihood at the effects ``a``
    (S, G); the prior ``N(prior_mean, prior_sd^2)`` (each (S,))."""
    grid = np.linspace(-6.0, 6.0, 801)
    n_draws = prior_mean.size
    log_post = np.stack(
        [
            log_lik_of(
                np.broadcast_to(prior_mean[:, None] + v * prior_sd[:, None], (n_draws, n_groups))
            )
            - 0.5 * v**2
            for v in grid
        ],
        axis=-1,
    )  # (S, G, grid) in the standardised effect v
    weights = np.exp(log_post - log_post.max(axis=-1, keepdims=True))
    cdf = np.cumsum(weights, axis=-1)
    cdf /= cdf[..., -1:]
    u = rng.uniform(size=(n_draws, n_groups, 1))
    v = grid[np.minimum((cdf < u).sum(axis=-1), grid.size - 1)]
    half = (grid[1] - grid[0]) / 2
    v = v + rng.uniform(-half, half, size=v.shape)  # within the grid's cell
    return prior_mean[:, None] + v * prior_sd[:, None]


def group_sums(values, codes, n_groups):
    """(S, N) summed within groups (S, G)."""
    return np.stack([values[:, codes == g].sum(axis=1) for g in range(n_groups)], axis=1)


def _design(seed, sizes: tuple, normals: list, positive: list):
    """The generator, each observation's group (``sizes``: groups, per group, draws), a
    standard normal covariate, and the globals' draws: normal ``(mean, sd)`` columns, then
    log-normal ``(median, sd of the log)`` ones, drawn in that order."""
    n_groups, per_group, n_draws = sizes
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(n_groups), per_group)
    x = rng.normal(size=codes.size)
    columns = [rng.normal(m, s, n_draws) for m, s in normals]
    columns += [np.exp(rng.normal(np.log(m), s, n_draws)) for m, s in positive]
    return rng, codes, x, np.column_stack(columns)


def poisson_glmm(seed=0, prior_sd_z=1.0, n_groups=12, per_group=5, n_draws=2000):
    """A non-centred Poisson GLMM's draws: ``eta = b0 + b1 x + sd_u z_g``, ``z`` drawn
    exactly given the globals under ``z ~ N(0, prior_sd_z^2)``.

    Returns codes (N,), x (N,), y (N,), theta (S, 3: b0, b1, sd_u), z (S, G) and the
    log-likelihood (S, N)."""
    rng, codes, x, theta = _design(
        seed, (n_groups, per_group, n_draws), [(0.4, 0.1), (0.3, 0.05)], [(0.7, 0.1)]
    )
    y = rng.poisson(np.exp(0.4 + 0.3 * x + rng.normal(0, 0.7, n_groups)[codes]))
    fixed = theta[:, [0]] + theta[:, [1]] * x  # (S, N)

    def log_lik_of(z):
        eta = fixed + theta[:, [2]] * z[:, codes]
        return group_sums(y * eta - np.exp(eta), codes, n_groups)  # less log y!: constant

    ones = np.ones(n_draws)
    z = conditional_effects(rng, log_lik_of, 0 * ones, prior_sd_z * ones, n_groups)
    eta = fixed + theta[:, [2]] * z[:, codes]
    return codes, x, y, theta, z, y * eta - np.exp(eta) - gammaln(y + 1.0)


def fixed_sd_hierarchy(seed=0, n_groups=10, per_group=4, n_draws=2000):
    """A non-centred normal hierarchy whose residual sds are fixed in the model, one per
    observation (as the eight schools' standard errors are): ``y ~ N(b0 + b1 x + sd_u z_g,
    s_n^2)``, ``z`` drawn exactly given the globals under ``N(0, 1)``.

    Returns codes (N,), x (N,), y (N,), s (N,), theta (S, 3: b0, b1, sd_u), z (S, G) and
    the log-likelihood (S, N)."""
    sizes = (n_groups, per_group, n_draws)
    rng, codes, x, theta = _design(seed, sizes, [(1.0, 0.2), (0.5, 0.1)], [(0.8, 0.15)])
    s = rng.uniform(0.5, 2.0, codes.size)
    y = 1.0 + 0.5 * x + rng.normal(0, 0.8, n_groups)[codes] + s * rng.normal(size=codes.size)
    z, log_lik = _normal_effects(rng, (codes, x, y), theta, s)
    return codes, x, y, s, theta, z, log_lik


def dense_normal_terms(residuals, codes, s, tau):
    """``log N(r_g | 0, diag(s_g^2) + tau^2 11^T)`` of each group (S, G) at each draw, by a
    dense solve and log-determinant: ``residuals`` (S, N), ``s`` (N,), ``tau`` (S,)."""
    n_groups = codes.max() + 1
    out = np.empty((residuals.shape[0], n_groups))
    for g in range(n_groups):
        members = codes == g
        cov = np.diag(s[members] ** 2) + tau[:, None, None] ** 2  # (S, n, n)
        r = residuals[:, members]
        _, logdet = np.linalg.slogdet(cov)
        quadratic = np.einsum("sn,sn->s", r, np.linalg.solve(cov, r[..., None])[..., 0])
        out[:, g] = -0.5 * (members.sum() * np.log(2 * np.pi) + logdet + quadratic)
    return out


def as_tree(codes, y, theta, z, log_lik, chains=2):
    """The draws as a DataTree as PyMC saves a GLMM: ``z`` over dim ``patient``, the index
    ``patient_idx`` in ``constant_data``, the log-likelihood ``y`` over ``obs``."""
    n_draws = theta.shape[0] // chains

    def shaped(a):
        return a.reshape(chains, n_draws, *a.shape[1:])

    levels = [f"p{g}" for g in range(z.shape[1])]
    posterior = xr.Dataset(
        {
            "b0": (("chain", "draw"), shaped(theta[:, 0])),
            "b1": (("chain", "draw"), shaped(theta[:, 1])),
            "sd_u": (("chain", "draw"), shaped(theta[:, 2])),
            "z": (("chain", "draw", "patient"), shaped(z)),
        },
        coords={"patient": levels},
    )
    return xr.DataTree.from_dict(
        {
            "posterior": posterior,
            "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), shaped(log_lik))}),
            "observed_data": xr.Dataset({"y": (("obs",), y)}),
            "constant_data": xr.Dataset({"patient_idx": (("obs",), codes)}),
        }
    )


def _normal_effects(rng, data: tuple, theta, sd):
    """The effects ``z`` (S, G) of ``y ~ N(b0 + b1 x + sd_u z_g, sd^2)`` drawn exactly given
    the globals ``theta`` (S, >= 3: b0, b1, sd_u) under ``N(0, 1)``, and the log-likelihood
    (S, N) at them; ``data``: codes, x, y; ``sd``: (S, 1) draws or (N,) constants."""
    codes, x, y = data
    n_draws, n_groups = theta.shape[0], int(codes.max()) + 1
    fixed = theta[:, [0]] + theta[:, [1]] * x

    def normal_log_lik(z):
        r = (y - fixed - theta[:, [2]] * z[:, codes]) / sd
        return -0.5 * r**2 - np.log(sd) - 0.5 * np.log(2 * np.pi)

    ones = np.ones(n_draws)
    z = conditional_effects(
        rng, lambda a: group_sums(normal_log_lik(a), codes, n_groups), 0 * ones, ones, n_groups
    )
    return z, normal_log_lik(z)


def normal_hierarchy(seed=0, n_groups=10, per_group=4, n_draws=2000):
    """A non-centred normal hierarchy's draws: ``y ~ N(b0 + b1 x + sd_u z_g, sigma^2)``,
    ``z`` drawn exactly given the globals under ``N(0, 1)``.

    Returns codes (N,), x (N,), y (N,), theta (S, 4: b0, b1, sd_u, sigma), z (S, G) and
    the log-likelihood (S, N)."""
    sizes = (n_groups, per_group, n_draws)
    rng, codes, x, theta = _design(seed, sizes, [(1.0, 0.2), (0.5, 0.1)], [(0.8, 0.15), (1.0, 0.1)])
    y = 1.0 + 0.5 * x + rng.normal(0, 0.8, n_groups)[codes] + rng.normal(size=codes.size)
    z, log_lik = _normal_effects(rng, (codes, x, y), theta, theta[:, [3]])
    return codes, x, y, theta, z, log_lik
