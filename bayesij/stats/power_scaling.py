"""Prior and likelihood sensitivity by power-scaling (priorsense, arviz-stats ``psense``),
with the first-order derivatives from the influence engine."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, check_finite, check_flag, check_real, fail
from bayesij.array.divergences import DENSITY_MEASURES, EMPIRICAL_MEASURES
from bayesij.array.moment_match import MatchedDraws, moment_matched_draws
from bayesij.array.power_scaling import (
    cjs_distance,
    cjs_two_sample,
    power_scaling_weights,
    power_sensitivity,
    scaling_tail,
)
from bayesij.array.psis import pareto_k_threshold
from bayesij.data.fit import read
from bayesij.data.inference_data import flatten_variables
from bayesij.data.posterior import Posterior

__all__ = [
    "psense",
    "psense_sequence",
    "power_scaled_draws",
    "PowerScaled",
    "log_prior_draws",
    "COMPONENTS",
]

#: psense's ``div_measure`` choices (priorsense 1.2's names).
DIV_MEASURES = ("cjs_dist", *DENSITY_MEASURES, *EMPIRICAL_MEASURES)

COMPONENTS = ("prior", "likelihood")

CONFLICT = "potential prior-data conflict"
WEAK_LIKELIHOOD = "potential strong prior / weak likelihood"


def psense(
    data,
    *,
    quantities=None,
    var_name=None,
    log_prior=None,
    prior_selection=None,
    alphas=(0.99, 1.01),
    threshold: float = 0.05,
    moment_match=None,
    div_measure: str = "cjs_dist",
) -> pd.DataFrame:
    """Sensitivity of each quantity to power-scaling the prior and the likelihood.

    Parameters
    ----------
    data : InferenceData, DataTree or Posterior
        Posterior draws of the quantities and the pointwise log-likelihood.
    log_prior : str, callable or array_like, optional
        The log prior density at each draw: ``None`` takes the ``log_prior`` group of an
        InferenceData / DataTree (all its variables summed); a string names a quantity of
        the posterior holding it (a Stan generated quantity such as brms' ``lprior``; it is
        left out of the results); a callable gets the :class:`Posterior` and returns it;
        an array has shape (n_chains, n_draws) or (n_chains, n_draws, k) (summed over
        ``k``).
    quantities : str or list of str, optional
    var_name : str or list of str, optional
        The log-likelihood variable(s), summed over observations for the likelihood: the
        likelihood parts to scale (priorsense's ``likelihood_selection``).
    prior_selection : str or list, optional
        The prior parts to scale (priorsense's ``prior_selection``, arviz-stats'
        ``prior_var_names``): variable names of the ``log_prior`` group, or indices of the
        last axis of a ``log_prior`` array of shape (n_chains, n_draws, k). Default all, as
        the peers. ``"top-level"``: the priors of the global parameters only
        (``bayesij.read(data).structure.top_level_priors``), as the audit scales them: in a
        hierarchical model the group-level terms (``a ~ N(mu, sigma)``, a non-centred ``z ~
        N(0, 1)``) are the model of the effects, not a prior the user chose.
    alphas : (float, float), default (0.99, 1.01)
        Powers below and above 1 of the finite differences.
    threshold : float, default 0.05
        Sensitivities at or above it count as sensitive (priorsense's default).
    moment_match : density, optional
        Where a scaling's k-hat is too high, move the draws by importance-weighted moment
        matching (Paananen et al. 2021, as priorsense's ``moment_match = TRUE``) instead of
        only warning: an object with ``log_prob(theta)`` (the unnormalised log posterior)
        and ``log_prior(theta)``, each ``(n, D) -> (n,)`` over draws of *all* the
        posterior's quantities in their order, which must then be the model's unconstrained
        parameters (``log sigma``, not ``sigma``). Its ``log_prior`` is the one scaled.
    div_measure : str, default "cjs_dist"
        How far each scaled posterior is from the posterior (priorsense's ``div_measure``):
        ``"cjs_dist"`` the cumulative Jensen-Shannon distance (priorsense's and arviz-stats'
        default); ``"js_dist"`` / ``"js_div"`` (Jensen-Shannon, bits),
        ``"hellinger_dist"``, ``"kl_dist"`` / ``"kl_div"`` (KL of the posterior from the
        scaled one) between kernel density estimates computed as R's ``density()`` does
        (priorsense's); ``"ws_dist"`` the 1-Wasserstein and ``"ks_dist"`` the
        Kolmogorov-Smirnov distance of the weighted and unweighted draws
        (:mod:`bayesij.array.divergences`). ``threshold`` is on the CJS's scale: with
        another measure, choose it for that measure.

    Returns
    -------
    pandas.DataFrame
        Indexed by quantity: ``prior`` and ``likelihood`` (the derivative of the cumulative
        Jensen-Shannon distance with respect to ``log2 alpha``, as arviz-stats ``psense``),
        ``diagnosis`` (``"potential prior-data conflict"`` when both reach ``threshold``,
        ``"potential strong prior / weak likelihood"`` when only the prior does, else
        ``"-"``), and the first-order derivatives of the posterior mean,
        ``d_mean_prior = Cov(f, log p(theta))`` and ``d_mean_likelihood = Cov(f, sum_n l_n)
        = sum_n psi_n`` (the influence scores summed), each per unit of ``alpha``; and
        ``prior_khat`` / ``likelihood_khat``, the larger Pareto k-hat of the two
        power-scalings' importance ratios (one value per component: above
        ``min(1 - 1/log10 S, 0.7)`` the scaled posterior is not reliably reached from these
        draws and a warning says so — priorsense#139).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> log_prior = -0.5 * (mu[..., 0] / 10) ** 2  # mu ~ N(0, 10): weak
    >>> table = bayesij.psense(post, log_prior=log_prior)
    >>> bool(table.loc["mu", "prior"] < 0.05 < table.loc["mu", "likelihood"])
    True

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    low, high = _alphas(alphas)
    threshold = check_real(threshold, "threshold", 0.0, low_open=True)
    if div_measure not in DIV_MEASURES:
        raise fail("div_measure", repr(div_measure), f"one of {DIV_MEASURES}")
    if div_measure != "cjs_dist" and moment_match is not None:
        raise fail("div_measure", f"{div_measure!r} with moment_match", "'cjs_dist' with it")
    inputs = _scaling_inputs(
        data,
        quantities,
        var_name,
        log_prior,
        prior_selection,
        COMPONENTS,
        "psense",
        need_all=moment_match is not None,
    )
    draws = inputs.draws
    order = np.argsort(draws, axis=0, kind="stable")  # one sort for both components
    table = pd.DataFrame(index=pd.Index(inputs.names, name="quantity"))
    khat = {}
    for name in COMPONENTS:
        table[name], khat[name] = power_sensitivity(
            draws, inputs.components[name], (low, high), order, div_measure
        )
    table["diagnosis"] = [_diagnosis(p, lik, threshold) for p, lik in table.to_numpy()]
    for name in COMPONENTS:
        table[f"d_mean_{name}"] = _covariances(draws, inputs.components[name])
    for name in COMPONENTS:
        table[f"{name}_khat"] = khat[name]
    if moment_match is not None:
        _match_unreliable(table, moment_match, inputs, (low, high))
        table["diagnosis"] = [
            _diagnosis(p, lik, threshold) for p, lik in table[["prior", "likelihood"]].to_numpy()
        ]
    _warn_about_khat(table, draws.shape[0])
    return table


def _match_unreliable(table, density, inputs, alphas) -> None:
    """Recompute the sensitivity of each component whose k-hat is too high from
    moment-matched draws (in place): the two-sample CJS of the original and moved draws."""
    limit = pareto_k_threshold(inputs.draws.shape[0])
    for name in COMPONENTS:
        if not table[f"{name}_khat"].iloc[0] > limit:
            continue
        gradients, k = [], -np.inf
        for alpha in alphas:
            matched = matched_scaling(density, inputs.all_draws, name, alpha)
            w = np.exp(matched.log_weights)
            x, y = inputs.draws, matched.draws[:, inputs.columns]
            distance = np.maximum(cjs_two_sample(x, y, w), cjs_two_sample(-x, -y, w))
            gradients.append(distance / abs(np.log2(alpha)))
            k = max(k, matched.pareto_k)
        table[name] = 0.5 * (gradients[0] + gradients[1])
        table[f"{name}_khat"] = k


def matched_scaling(density, draws: np.ndarray, component: str, alpha: float) -> MatchedDraws:
    """Moment matching of the draws (S, D) of all parameters (unconstrained) towards the
    posterior with the ``component`` power-scaled by ``alpha``."""
    for method in ("log_prob", "log_prior"):
        if not callable(getattr(density, method, None)):
            raise fail(
                "moment_match",
                f"a {type(density).__name__} without {method}(theta)",
                "a density with log_prob(theta) and log_prior(theta) over the quantities' draws",
            )

    def part(theta):
        prior = np.asarray(density.log_prior(theta), dtype=float)
        return prior if component == "prior" else density.log_prob(theta) - prior

    values = part(draws)
    check_finite(values, "moment_match")
    return moment_matched_draws(
        draws,
        lambda theta: np.asarray(density.log_prob(theta), dtype=float),
        lambda theta: -(alpha - 1.0) * part(theta),
        np.asarray(density.log_prob(draws), dtype=float),
        -(alpha - 1.0) * values,
        scaling_tail(values),
        k_threshold=pareto_k_threshold(draws.shape[0]),
    )


def _warn_about_khat(table: pd.DataFrame, n_draws: int) -> None:
    limit = pareto_k_threshold(n_draws)
    for name in COMPONENTS:
        k = float(table[f"{name}_khat"].iloc[0]) if len(table) else float("nan")
        if k > limit:
            warnings.warn(
                f"Power-scaling the {name}: Pareto k-hat {k:.2f} > {limit:.2f}; the scaled "
                "posterior is not reliably reached by reweighting these draws, so its "
                "sensitivities are unreliable (more draws, or refit with the scaled "
                f"{name}).",
                UserWarning,
                stacklevel=3,
            )


#: ``prior_selection`` naming a hierarchy's top-level priors (``Fit.structure``).
TOP_LEVEL = "top-level"


def _top_level(fit) -> list:
    """The ``log_prior`` group's top-level terms, refused where it holds none."""
    terms = list(fit.structure.top_level_priors)
    if not terms:
        raise fail(
            "prior_selection",
            f"{TOP_LEVEL!r} for a log_prior group without top-level terms",
            "names of its variables (the priors of the global parameters)",
        )
    return terms


def log_prior_draws(fit, post: Posterior, log_prior=None, selection=None) -> np.ndarray:
    """The log prior at each draw, shape (S,), from any source :func:`psense` accepts
    (``fit`` a :class:`~bayesij.data.fit.Fit`), summed over the parts ``selection`` names
    (all by default)."""
    n_draws, per_chain = post.n_draws, post.n_draws // post.n_chains
    if log_prior is None:
        group = fit.log_prior_group()
        if isinstance(selection, str) and selection == TOP_LEVEL:
            selection = _top_level(fit)
        values, _ = flatten_variables(group, _selected(list(group.data_vars), selection))
        selection = None
    elif isinstance(log_prior, str):
        if log_prior not in post.quantity_names:
            raise fail(
                "log_prior", repr(log_prior), f"a quantity of the posterior {post.quantity_names}"
            )
        values = post.select(log_prior).quantities.values
    elif callable(log_prior):
        values = log_prior(post)
    else:
        values = log_prior
    values = as_float_array(values, "log_prior")
    if values.size % n_draws or values.shape[: min(values.ndim, 2)] not in (
        (post.n_chains, per_chain),
        (n_draws,),
    ):
        raise fail(
            "log_prior",
            f"shape {values.shape}",
            f"one value per draw: ({post.n_chains}, {per_chain}[, k]) or ({n_draws},)",
        )
    parts = values.reshape(n_draws, -1)
    if selection is not None:
        parts = parts[:, _selected(list(range(parts.shape[1])), selection)]
    summed = parts.sum(axis=1)
    check_finite(summed, "log_prior")
    return summed


def _selected(available: list, selection) -> list:
    """The prior parts named by ``prior_selection`` (all when None), checked."""
    if selection is None:
        return available
    chosen = [selection] if isinstance(selection, (str, int)) else list(selection)
    unknown = [c for c in chosen if c not in available]
    if unknown or not chosen:
        raise fail(
            "prior_selection",
            repr(unknown or chosen),
            f"parts of the log prior: {available[:10]}",
        )
    return chosen


def _reliable_grid(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``grid``'s powers, as many, evenly in ``log alpha`` between its two ends each moved
    towards 1 until the scaling's k-hat is at most the threshold for these draws."""
    threshold = pareto_k_threshold(values.size)
    ends = []
    for bound in (float(grid.min()), float(grid.max())):
        near, far = 0.0, float(np.log(bound))  # log alpha: 1 is always reached
        if far == 0.0 or power_scaling_weights(values, bound)[1] <= threshold:
            ends.append(far)
            continue
        while abs(far - near) > 1e-4 * abs(far):
            middle = 0.5 * (near + far)
            if power_scaling_weights(values, float(np.exp(middle)))[1] <= threshold:
                near = middle
            else:
                far = middle
        ends.append(near)
    return np.exp(np.linspace(ends[0], ends[1], grid.size))


def _alphas(alphas) -> tuple[float, float]:
    try:
        low, high = (float(a) for a in alphas)
    except (TypeError, ValueError):
        raise fail("alphas", repr(alphas), "two powers (below 1, above 1)") from None
    if not 0 < low < 1 < high:
        raise fail("alphas", repr(alphas), "two powers with 0 < lower < 1 < upper")
    return low, high


def _diagnosis(prior: float, likelihood: float, threshold: float) -> str:
    if prior >= threshold and likelihood >= threshold:
        return CONFLICT
    if prior >= threshold:
        return WEAK_LIKELIHOOD
    return "-"


def _covariances(draws: np.ndarray, component: np.ndarray) -> np.ndarray:
    """``Cov(f, c)`` of each column with divisor ``S - 1`` (as the influence scores)."""
    centred = component - component.mean()
    return (draws - draws.mean(axis=0)).T @ centred / (draws.shape[0] - 1)


class PowerScaled(NamedTuple):
    """Draws of quantities with their importance weights under several power-scalings.

    Attributes
    ----------
    quantities : list of str
    draws : ndarray of shape (S, K)
    alphas : ndarray of shape (A,)
    weights : ndarray of shape (A, S)
        Normalised PSIS weights of each scaling.
    pareto_k : ndarray of shape (A,)
        k-hat of each scaling's ratios (-inf for alpha = 1).
    component : str
        ``"prior"`` or ``"likelihood"``.
    moved : tuple of (ndarray of shape (S, K) or None)
        Per scaling, the moment-matched draws its weights are for (None: ``draws``).
    """

    quantities: list
    draws: np.ndarray
    alphas: np.ndarray
    weights: np.ndarray
    pareto_k: np.ndarray
    component: str
    moved: tuple = ()

    def draws_at(self, i: int) -> np.ndarray:
        """The draws (S, K) that scaling ``i``'s weights apply to."""
        moved = self.moved[i] if self.moved else None
        return self.draws if moved is None else moved

    @property
    def reliable(self) -> np.ndarray:
        """Whether each scaling's k-hat is at most ``min(1 - 1/log10 S, 0.7)``."""
        return self.pareto_k <= pareto_k_threshold(self.draws.shape[0])


def power_scaled_draws(
    data,
    *,
    quantities=None,
    var_name=None,
    log_prior=None,
    prior_selection=None,
    component: str = "prior",
    alphas=None,
    moment_match=None,
    auto_alpha_range: bool = False,
) -> PowerScaled:
    """The posterior draws and their PSIS weights under power-scalings of the prior or the
    likelihood by each ``alpha`` (what :func:`psense_sequence` summarises and
    :func:`bayesij.plots.plot_psense_ecdf` draws).

    Parameters
    ----------
    data, quantities, var_name, log_prior, prior_selection
        As :func:`psense`.
    component : {"prior", "likelihood"}, default "prior"
    alphas : array_like, optional
        The powers; default priorsense's: 0.8 to 1.25 evenly in ``log alpha`` (11 values).
    moment_match : density, optional
        As :func:`psense`: scalings whose k-hat is too high are moment-matched (their
        moved draws in ``moved``).
    auto_alpha_range : bool, default False
        Narrow the powers to where the draws reach the scaled posteriors (priorsense's
        ``auto_alpha_range``): each end of ``alphas`` moves towards 1, by bisection in
        ``log alpha``, until the scaling's k-hat is at most ``min(1 - 1/log10 S, 0.7)``
        (priorsense's and posterior's ``khat_threshold``); the powers are then as many,
        evenly spaced in ``log alpha`` between the two ends.

    Returns
    -------
    PowerScaled

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> scaled = bayesij.power_scaled_draws(post, component="likelihood", alphas=[0.5, 2.0])
    >>> scaled.weights.shape  # one set of importance weights per power
    (2, 2000)

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    if component not in COMPONENTS:
        raise fail("component", repr(component), f"one of {COMPONENTS}")
    grid = np.exp(np.linspace(np.log(0.8), np.log(1.25), 11)) if alphas is None else alphas
    grid = as_float_array(grid, "alphas").reshape(-1)
    if grid.size == 0 or np.any(~np.isfinite(grid) | (grid <= 0)):
        raise fail("alphas", repr(grid.tolist()[:5]), "positive powers")
    inputs = _scaling_inputs(
        data,
        quantities,
        var_name,
        log_prior,
        prior_selection,
        (component,),
        "power-scaling sequences",
        need_all=moment_match is not None,
    )
    values = inputs.components[component]
    check_flag(auto_alpha_range, "auto_alpha_range")
    if auto_alpha_range:
        grid = _reliable_grid(values, grid)
    scaled = [power_scaling_weights(values, float(alpha)) for alpha in grid]
    weights = np.exp(np.array([log_weights for log_weights, _ in scaled]))
    k = np.array([khat for _, khat in scaled])
    moved: list = [None] * grid.size
    if moment_match is not None:
        for i in np.flatnonzero(k > pareto_k_threshold(values.size)):
            matched = matched_scaling(moment_match, inputs.all_draws, component, float(grid[i]))
            weights[i], k[i] = np.exp(matched.log_weights), matched.pareto_k
            moved[i] = matched.draws[:, inputs.columns]
    return PowerScaled(inputs.names, inputs.draws, grid, weights, k, component, tuple(moved))


class _ScalingInputs(NamedTuple):
    """What a power-scaling reads: the chosen quantities' ``draws`` (S, K) and ``names``,
    each requested component (S,) by name, and, for moment matching, the draws of all the
    quantities (S, D) with the chosen ones' ``columns`` among them."""

    names: list
    draws: np.ndarray
    components: dict
    all_draws: np.ndarray
    columns: list


def _scaling_inputs(
    data, quantities, var_name, log_prior, prior_selection, components, caller: str, need_all
) -> _ScalingInputs:
    """The draws and the log prior / summed log-likelihood of :func:`psense` and
    :func:`power_scaled_draws` (a quantity that holds the log prior is left out)."""
    fit = read(data, var_name=var_name)
    # Moment matching moves every parameter; otherwise the quantities asked for suffice.
    few = None if need_all or isinstance(log_prior, str) else quantities
    post = fit.in_memory(caller, quantities=few, need_quantities=True)
    full, values = post, {}
    if "prior" in components:
        values["prior"] = log_prior_draws(fit, post, log_prior, prior_selection)
        if isinstance(log_prior, str):
            quantities = [q for q in (quantities or post.quantity_names) if q != log_prior]
    if quantities is not None:
        post = post.select(quantities)
    names = list(post.quantity_names)
    draws = post.quantities.values.reshape(-1, len(names))
    if "likelihood" in components:
        values["likelihood"] = post.log_lik.values.reshape(draws.shape[0], -1).sum(axis=1)
        check_finite(values["likelihood"], "log_lik")
    all_draws = full.quantities.values.reshape(full.n_draws, -1)
    columns = [list(full.quantity_names).index(n) for n in names]
    return _ScalingInputs(names, draws, values, all_draws, columns)


def psense_sequence(
    data,
    *,
    quantities=None,
    var_name=None,
    log_prior=None,
    prior_selection=None,
    component: str = "prior",
    alphas=None,
    moment_match=None,
    auto_alpha_range: bool = False,
) -> pd.DataFrame:
    """The posterior of each quantity along a sequence of power-scalings of the prior or
    the likelihood (priorsense's ``powerscale_sequence``), by PSIS reweighting.

    Parameters
    ----------
    data, quantities, var_name, log_prior, prior_selection, component, alphas, moment_match
        As :func:`power_scaled_draws` (default: the prior, alpha from 0.8 to 1.25; the
        statistics of a moment-matched scaling are of its moved draws).
    auto_alpha_range : bool, default False
        As :func:`power_scaled_draws`: the powers narrowed to where every scaling is
        reliable.

    Returns
    -------
    pandas.DataFrame
        One row per (alpha, quantity): the weighted ``mean`` and ``sd``, the ``cjs``
        distance to the unscaled posterior, and ``pareto_k`` of that scaling's weights with
        ``reliable`` (k-hat at most ``min(1 - 1/log10 S, 0.7)``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> table = bayesij.psense_sequence(post, log_prior=-0.5 * (mu[..., 0] / 10) ** 2)
    >>> list(table.columns)
    ['alpha', 'quantity', 'mean', 'sd', 'cjs', 'pareto_k', 'reliable']
    >>> len(table), bool(table["reliable"].all())  # 11 powers from 0.8 to 1.25
    (11, True)

    References
    ----------
    .. [1] Kallioinen, N., Paananen, T., Bürkner, P.-C. and Vehtari, A. (2024). Detecting
       and diagnosing prior and likelihood sensitivity with power-scaling. Statistics and
       Computing 34, 57.
    """
    scaled = power_scaled_draws(
        data,
        quantities=quantities,
        var_name=var_name,
        log_prior=log_prior,
        prior_selection=prior_selection,
        component=component,
        alphas=alphas,
        moment_match=moment_match,
        auto_alpha_range=auto_alpha_range,
    )
    rows = []
    for i, (alpha, w, k, ok) in enumerate(
        zip(scaled.alphas, scaled.weights, scaled.pareto_k, scaled.reliable, strict=True)
    ):
        draws = scaled.draws_at(i)
        mean = w @ draws
        sd = np.sqrt(w @ (draws - mean) ** 2)
        if draws is scaled.draws:
            distance = cjs_distance(draws, w)
        else:
            distance = cjs_two_sample(scaled.draws, draws, w)
        for j, name in enumerate(scaled.quantities):
            rows.append((float(alpha), name, mean[j], sd[j], distance[j], k, bool(ok)))
    columns = ["alpha", "quantity", "mean", "sd", "cjs", "pareto_k", "reliable"]
    return pd.DataFrame(rows, columns=columns)
