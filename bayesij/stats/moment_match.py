"""Moment matching of PSIS-LOO for observations with high k-hat (R loo's
``loo_moment_match``), given the model's log density on the unconstrained scale."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Protocol

import numpy as np
from scipy.special import logsumexp

from bayesij.array.checks import as_float_array, check_flag, check_positive_int, check_real, fail
from bayesij.array.moment_match import moment_match_observation
from bayesij.array.psis import tail_length
from bayesij.data.fit import read
from bayesij.data.posterior import Posterior
from bayesij.stats.loo import LooResult
from bayesij.stats.loo import loo as compute_loo

__all__ = ["ModelDensity", "loo_moment_match"]


class ModelDensity(Protocol):
    """What moment matching needs of a model (e.g. :class:`bayesij.refit.PyStanDensity`).

    ``unconstrain(post)`` returns the draws on the unconstrained scale, shape (S, D), in the
    order of the posterior's draws; ``log_prob(upars)`` the log posterior density given all
    the data (with the Jacobian), shape (n,); ``log_lik_i(upars, i)`` the log-likelihood of
    observation ``i`` (0-based), shape (n,).
    """

    def unconstrain(self, post: Posterior) -> np.ndarray: ...

    def log_prob(self, upars: np.ndarray) -> np.ndarray: ...

    def log_lik_i(self, upars: np.ndarray, i: int) -> np.ndarray: ...


def loo_moment_match(
    data,
    model: ModelDensity,
    *,
    var_name=None,
    loo: LooResult | None = None,
    k_threshold: float | None = None,
    max_iters: int = 30,
    split: bool = True,
    cov: bool = True,
) -> LooResult:
    """PSIS-LOO with moment matching for the observations whose k-hat is too high.

    For each such observation the unconstrained draws are moved by affine maps matching
    their importance-weighted mean, marginal variances or covariance, while k-hat falls;
    the moved draws are weighted with the model's own log density (no refit).

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        The fit's draws (the parameters, on the constrained scale) and log-likelihood.
    model : ModelDensity
        The model's log density and pointwise log-likelihood at unconstrained draws.
    loo : LooResult, optional
        The PSIS-LOO of ``data`` to improve (default: computed, R loo's defaults).
    k_threshold : float, optional
        Observations above it are moment-matched (default: ``loo.k_threshold``).
    max_iters : int, default 30
        Most transformations accepted per observation.
    split : bool, default True
        The split (mixture) estimate of Paananen et al., robust to the adaptation.
    cov : bool, default True
        Also try the covariance mapping.

    Returns
    -------
    LooResult
        ``loo`` with the moment-matched observations' ``elpd_loo``, ``p_loo``,
        ``pareto_k``, ``mcse_elpd_loo`` and ``ess`` replaced, and columns
        ``moment_matched``, ``transformations`` (e.g. ``"shift,scale"``) and
        ``influence_pareto_k`` (the k-hat before matching: how influential each
        observation is, R loo's ``pareto_k_influence_values`` and arviz-stats'
        ``influence_pareto_k``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> class NormalMean:  # y_n ~ N(mu, 1), flat prior: the model's density at any draws
    ...     def __init__(self, y):
    ...         self.y = y
    ...     def unconstrain(self, post):
    ...         return post.quantities.values.reshape(-1, 1)
    ...     def log_prob(self, upars):
    ...         return -0.5 * ((self.y[None, :] - upars) ** 2).sum(axis=1)
    ...     def log_lik_i(self, upars, i):
    ...         return -0.5 * (self.y[i] - upars[:, 0]) ** 2
    >>> rng = np.random.default_rng(0)
    >>> y = np.append(rng.normal(size=19), 8.0)  # an outlier: PSIS cannot leave it out
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(20), size=(4, 250, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> matched = bayesij.loo_moment_match(post, NormalMean(y))
    >>> bool(matched.pointwise["pareto_k"].iloc[-1] < 0.7)
    True

    References
    ----------
    .. [1] Paananen, T., Piironen, J., Bürkner, P.-C. and Vehtari, A. (2021). Implicitly
       adaptive importance sampling. Statistics and Computing 31, 16.
    """
    post = read(data, var_name=var_name).in_memory("loo_moment_match", need_quantities=True)
    missing = [
        m for m in ("unconstrain", "log_prob", "log_lik_i") if not callable(getattr(model, m, None))
    ]
    if missing:
        raise fail(
            "model",
            f"a {type(model).__name__} without {', '.join(missing)}",
            "a ModelDensity: unconstrain(post), log_prob(upars), log_lik_i(upars, i) "
            "(bayesij.refit.PyStanDensity for a Stan program)",
        )
    if loo is None:
        with warnings.catch_warnings():  # the k-hats moment matching is here to improve
            warnings.simplefilter("ignore")
            loo = compute_loo(post)
    if not isinstance(loo, LooResult) or loo.method != "psis" or loo.n_units != post.n_obs:
        raise fail(
            "loo",
            repr(loo)[:80],
            f"a PSIS LooResult of the same {post.n_obs} observations (no groups)",
        )
    _check_same_fit(loo, post)
    threshold = loo.k_threshold if k_threshold is None else check_real(k_threshold, "k_threshold")
    max_iters = check_positive_int(max_iters, "max_iters")
    split, cov = check_flag(split, "split"), check_flag(cov, "cov")
    table = loo.pointwise.copy()
    table["moment_matched"], table["transformations"] = False, ""
    table["influence_pareto_k"] = table["pareto_k"]  # before matching (R loo, arviz-stats)
    high = np.flatnonzero(table["pareto_k"].to_numpy() > threshold)
    if high.size == 0:
        return replace(loo, pointwise=table, log_weights=None)
    upars = _checked(model.unconstrain(post), "model.unconstrain", (post.n_draws, None))
    _check_every_observation(model, upars, post.log_lik.values.reshape(post.n_draws, -1))
    log_prob = _density(model.log_prob, "model.log_prob")
    lp = log_prob(upars)
    matrix = post.log_lik.values.reshape(post.n_draws, post.n_obs)
    tails = tail_length(post.n_draws, table["r_eff"].to_numpy(), loo.tail_rule)
    for i in high:
        result = moment_match_observation(
            upars,
            log_prob,
            _aligned_log_lik(model, int(i), upars, matrix[:, i]),
            lp,
            matrix[:, i],
            int(tails[i]),
            k_threshold=threshold,
            max_iters=max_iters,
            split=split,
            cov=cov,
        )
        row = table.index[i]
        table.loc[row, ["elpd_loo", "pareto_k", "mcse_elpd_loo", "ess"]] = [
            result.elpd,
            result.pareto_k,
            result.mcse,
            result.ess,
        ]
        table.loc[row, "p_loo"] = table.loc[row, "lppd"] - result.elpd
        table.loc[row, "moment_matched"] = True
        table.loc[row, "transformations"] = ",".join(result.transformations)
    still = int((table["pareto_k"].to_numpy() > threshold).sum())
    if still:
        warnings.warn(
            f"{still} of {post.n_obs} observations keep a Pareto k-hat above {threshold:.2f} "
            "after moment matching: refit them (bayesij.refit.loo).",
            UserWarning,
            stacklevel=2,
        )
    return replace(loo, pointwise=table, log_weights=None)


def _check_same_fit(loo: LooResult, post) -> None:
    """Refuse a LOO result of another fit: its ``lppd`` (log mean exp of each column) must
    be this fit's (a LOO of other draws or data with as many observations passed the
    shape check and was returned, its values never matched)."""
    matrix = post.log_lik.values.reshape(post.n_draws, post.n_obs)
    lppd = logsumexp(matrix, axis=0) - np.log(post.n_draws)
    theirs = loo.pointwise["lppd"].to_numpy()
    gap = np.abs(theirs - lppd)
    if not np.all(gap <= 1e-8 * np.maximum(1.0, np.abs(lppd))):
        raise fail(
            "loo",
            f"a LooResult of another fit (its lppd differs from this fit's by up to "
            f"{np.nanmax(gap):.3g})",
            "the PSIS-LOO of data itself (bayesij.loo(data)), or None",
        )


def _check_every_observation(model, upars: np.ndarray, matrix: np.ndarray) -> None:
    """Where the model gives every observation's log-likelihood at once (``log_lik``, as
    :class:`bayesij.refit.PyMCDensity` does), check it against the fit's at two draws, up
    to a constant per observation: a model built on other data (the matched observations'
    own rows the same, another row not) moves the tilted posterior and passed the
    per-observation checks, 1.4 off the exact elpd."""
    log_lik = getattr(model, "log_lik", None)
    if not callable(log_lik) or upars.shape[0] < 2:
        return
    two = [0, upars.shape[0] - 1]
    values = _checked(log_lik(upars[two]), "model.log_lik", (2, matrix.shape[1]))
    gap = matrix[two] - values
    off = np.flatnonzero(np.ptp(gap, axis=0) > 1e-6 * (1 + np.abs(gap).max(axis=0)))
    if off.size:
        raise fail(
            "model",
            f"a log-likelihood that differs from the fit's at {off.size} observation(s) "
            f"(positions {off[:5].tolist()})",
            "the model and data of the fit (the same log-likelihood, up to a constant)",
        )


def _aligned_log_lik(model, i: int, upars: np.ndarray, draws: np.ndarray, name: str = "model"):
    """``model.log_lik_i(., i)`` shifted onto the log-likelihood draws
    (:func:`aligned_to_draws`; errors name ``name``.log_lik_i)."""
    return aligned_to_draws(
        lambda u: model.log_lik_i(u, i), upars, draws, f"{name}.log_lik_i", f"observation {i}"
    )


def aligned_to_draws(function, upars: np.ndarray, draws: np.ndarray, name: str, what: str):
    """``function`` (unconstrained draws (n, D) -> (n,)) shifted onto ``draws`` (S,), its
    values at ``upars``: a Stan program's log density drops the constants of ``~``
    statements, so the two may differ by a constant (checked on a few draws; anything more
    is an error naming ``name`` and ``what`` it is of)."""
    checked = _density(function, name)
    few = slice(0, min(8, upars.shape[0]))
    gap = draws[few] - checked(upars[few])
    if np.ptp(gap) > 1e-6 * (1 + np.abs(gap).max()):
        raise fail(
            name,
            f"values for {what} that differ from its log-likelihood draws by "
            f"{gap.min():.4g} to {gap.max():.4g}",
            "the same log-likelihood, up to a constant",
            "Check that model and data are those of the fit.",
        )
    offset = float(gap.mean())
    return lambda u: checked(u) + offset


def _density(function, name: str):
    """``function`` with its output checked: finite or -inf, one value per draw."""

    def checked(upars: np.ndarray) -> np.ndarray:
        values = _checked(function(upars), name, (upars.shape[0],))
        if np.isnan(values).any() or np.isposinf(values).any():
            raise fail(name, "NaN or +inf values", "log densities (finite or -inf)")
        return values

    return checked


def _checked(values, name: str, shape: tuple) -> np.ndarray:
    array = as_float_array(values, name)
    if array.ndim != len(shape) or any(
        s is not None and s != a for s, a in zip(shape, array.shape, strict=True)
    ):
        expected = ", ".join("D" if s is None else str(s) for s in shape)
        raise fail(name, f"shape {array.shape}", f"shape ({expected})")
    return array
