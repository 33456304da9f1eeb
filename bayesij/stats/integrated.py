"""The groups' log-likelihoods with their own effects integrated out, from the model's density.

A hierarchy's log-likelihood summed over a group's observations is conditional on that
group's own effect: leave-one-group-out PSIS over it reweights draws in which the effect was
fitted to the group, and k-hat is high for most groups. With the model at hand
(:class:`bayesij.refit.PyMCDensity`), the effect is integrated out of each group's term
(adaptive Gauss-Hermite quadrature at every draw): PSIS over those terms estimates the same
``log p(y_g | y_-g)`` with the group's effect drawn from its population, the IJ over them
approximates the cluster bootstrap (Merkle, Furr & Rabe-Hesketh 2019).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import gammaln

from bayesij.array.checks import as_float_array, check_positive_int, fail
from bayesij.array.hierarchy import integrate_effect_vectors, intercept_group_log_lik
from bayesij.array.recovered_glmm import effect_prior, recover_glmm, recovered_group_log_lik
from bayesij.data.fit import read
from bayesij.data.inference_data import in_observation_order
from bayesij.data.source import refuse_whole_matrix
from bayesij.data.structure import dim_levels
from bayesij.stats.loo import LooResult, loo_methods, with_log_jacobian

__all__ = ["GlmDensity", "GlmSlope", "group_terms", "integrated_terms", "loo_integrated"]


def loo_integrated(
    data,
    density,
    *,
    groups=None,
    var_name=None,
    method: str = "psis",
    convention=None,
    save_psis: bool = False,
    log_jacobian=None,
) -> LooResult:
    """Leave-one-group-out over a hierarchy's integrated group terms: each group's own
    effect integrated out of its term, so that the elpd judges the model for a *new* group
    (Merkle et al. 2019), where :func:`bayesij.loo` over the summed conditional terms judges
    new observations of the same groups.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or xarray
        The fit, as :func:`bayesij.loo` reads it.
    density : refit.PyMCDensity, refit.PyStanDensity or GlmDensity
        The fitted model's density (its ``group_log_lik``), or a :class:`GlmDensity`
        declaring the family and the saved linear predictor: each group's term is
        integrated by adaptive Gauss-Hermite quadrature at every draw
        (:meth:`~bayesij.refit.PyMCDensity.group_log_lik`).
    groups : array_like, mapping or str, optional
        The groups left out; default the fit's own grouping (its group index).
    var_name, method, convention, save_psis, log_jacobian
        As :func:`bayesij.loo`.

    Returns
    -------
    LooResult
        Over the groups; the pointwise table adds ``pareto_k_conditional``, the k-hat over
        the summed conditional terms, and ``integrated`` names the variable integrated out.
        On an epilepsy-shaped Poisson GLMM k-hat > 0.7 went from 49 of 59 patients to none.

    Raises
    ------
    ValueError
        Naming ``density``: a fit whose units are its observations (no group to
        integrate), or a density integrating none of the fit's group effects; naming
        ``data``: a lazy log-likelihood (the groups' terms are summed from the matrix in
        memory, as :func:`bayesij.loo` with ``groups=`` sums them).

    References
    ----------
    .. [1] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of
       latent variable models: conditional versus marginal likelihoods. Psychometrika
       84(3), 802-829.

    Examples
    --------
    A normal hierarchy (5 schools x 4 pupils) saved with its linear predictor, its family
    declared (:class:`GlmDensity`):

    >>> import numpy as np, xarray as xr, bayesij
    >>> rng = np.random.default_rng(0)
    >>> codes, y = np.repeat(np.arange(5), 4), rng.normal(size=20)
    >>> mu, u = rng.normal(0, 0.1, (2, 300)), rng.normal(0, 0.8, (2, 300, 5))
    >>> eta = mu[..., None] + u[..., codes]
    >>> draws = lambda value: (("chain", "draw"), np.full((2, 300), value))
    >>> tree = xr.DataTree.from_dict({
    ...     "posterior": xr.Dataset({"mu": (("chain", "draw"), mu), "tau": draws(0.8),
    ...         "sigma": draws(1.0), "u": (("chain", "draw", "school"), u),
    ...         "eta": (("chain", "draw", "obs"), eta)}),
    ...     "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"),
    ...         -0.5 * (y - eta) ** 2 - 0.5 * np.log(2 * np.pi))}),
    ...     "observed_data": xr.Dataset({"y": ("obs", y)}),
    ...     "constant_data": xr.Dataset({"school_idx": ("obs", codes)}),
    ... })
    >>> density = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma")
    >>> result = bayesij.loo_integrated(tree, density)
    >>> result.integrated, result.n_units, "pareto_k_conditional" in result.pointwise
    ('u', 5, True)
    """
    fit = read(data, var_name=var_name)  # read once, handed on as the Fit
    if fit.lazy:  # a group's terms summed, as loo(groups=) sums them: the matrix in memory
        refuse_whole_matrix({"data": "loo_integrated"})
    if groups is None:  # a density integrates groups: the fit's own grouping
        groups = fit.units.name if fit.units.grouped else None
    fit = read(fit, groups=groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditional = loo_methods(fit, (method,), convention=convention)[method]
    terms, variable = group_terms(fit, density, conditional.pointwise.index)
    result = loo_methods(terms, (method,), convention=convention, save_psis=save_psis)[method]
    pointwise = result.pointwise.set_axis(conditional.pointwise.index)
    pointwise["pareto_k_conditional"] = conditional.pointwise["pareto_k"].to_numpy()
    found = replace(result, pointwise=pointwise, members=conditional.members, integrated=variable)
    return with_log_jacobian(found, log_jacobian)


def integrated_terms(fit, density):
    """Each unit's log-likelihood with its own effects integrated out, by ``density``'s
    ``group_log_lik(data, variable)``, over the fit's unit effects
    (``fit.structure.unit_effects``): all of them jointly (an intercept and a slope), less
    each one the density refuses (a ``ValueError`` naming ``variable`` and the refused
    name), else the first it integrates alone.

    Returns
    -------
    (xarray.DataArray of shape (chain, draw, unit), str), or (None, None) when ``density``
    has no ``group_log_lik`` or refuses every effect; the str names the effects integrated
    (``"z_a, z_s"``); any other error of the integration is raised as it is.
    """
    integrate = getattr(density, "group_log_lik", None)
    if not callable(integrate):
        return None, None
    declared = getattr(density, "declared", None)  # a GlmDensity names its effects
    remaining = list(declared) if declared else list(fit.structure.unit_effects)
    alone = False
    while remaining:
        variable = remaining[0] if alone or len(remaining) == 1 else tuple(remaining)
        try:
            return integrate(fit, variable), ", ".join(np.atleast_1d(variable))
        except ValueError as error:
            reason = str(error)
            if not reason.startswith("variable:"):
                raise  # not a refusal of this variable (a log-likelihood that is not finite)
        refused = [v for v in remaining if f"'{v}'" in reason.partition(";")[0]]
        if isinstance(variable, tuple) and len(refused) == 1:
            remaining.remove(refused[0])  # integrate the others jointly
        elif isinstance(variable, tuple):
            alone = True  # the density takes one variable at a time
        else:
            remaining.pop(0)
    return None, None


def group_codes(fit) -> tuple[list, np.ndarray]:
    """The levels of a grouped fit's group dim (as str) and each observation's code among
    them (n_obs,)."""
    levels = [str(v) for v in dim_levels(fit.content, fit.units.dim)]
    where = {label: k for k, label in enumerate(levels)}
    return levels, np.array([where[str(label)] for label in fit.units.labels])


def recovered_terms(fit):
    """Each unit's log-likelihood with its own effect integrated out of the normal,
    Poisson or logistic GLMM recovered from the draws alone
    (:func:`~bayesij.array.recovered_glmm.recover_glmm`): for a fit in memory whose units
    are the levels of a group dim over which the unit effects run
    (``fit.structure.unit_effects``: each tried in turn, the first recovered taken; a
    non-centred ``z`` and its deterministic ``a = mu + tau z`` are one effect), the prior of
    that effect recognised by Stein's identity
    (:func:`~bayesij.array.recovered_glmm.effect_prior`). An observation that moves with
    another effect of its group (a varying slope) is not recovered.

    Returns
    -------
    (xarray.DataArray of shape (chain, draw, G), str), or (None, None) where no such model
    is recovered; the str says what was integrated, under which prior.
    """
    effects = fit.structure.unit_effects
    if not effects or fit.lazy or fit.units.dim is None or not fit.units.grouped:
        return None, None
    levels, codes = group_codes(fit)
    present, codes = np.unique(codes, return_inverse=True)  # the levels observed: the units
    quantities, names = fit.posterior_draws(list(fit.structure.global_vars))
    source = fit.log_lik_source(groups=False)
    if not names or source.n_units != codes.size:
        return None, None
    n_chains, n_draws = quantities.shape[:2]
    quantities = quantities.reshape(n_chains * n_draws, -1)
    log_lik = source.matrix().reshape(n_chains * n_draws, -1)
    for name in effects:
        effect, _ = fit.posterior_draws([name])
        if effect.shape[2] != len(levels):
            continue
        effect = effect[..., present].reshape(n_chains * n_draws, -1)
        model = recover_glmm(log_lik, codes, quantities, effect)
        prior = None if model is None else effect_prior(model, quantities)
        if prior is None:
            continue
        terms = recovered_group_log_lik(model, prior[0], prior[1])
        dim = fit.units.dim
        found = xr.DataArray(
            terms.reshape(n_chains, n_draws, -1),
            dims=("chain", "draw", dim),
            coords={dim: [levels[k] for k in present]},
        )
        return found, _recovered_words(model, prior[2], name, names)
    return None, None


def _recovered_words(model, columns: tuple, effect: str, names: list) -> str:
    """What :func:`recovered_terms` integrated, in words: ``"z ~ N(0, 1), entering as sd_u
    * z, of the Poisson GLMM recovered from the draws"``."""
    j, k = columns
    mean = "0" if j is None else names[j]
    sd = "1" if k is None else f"{names[k]}^2"
    entering = effect if model.multiplied_by is None else f"{names[model.multiplied_by]} * {effect}"
    family = {"poisson": "Poisson GLMM", "bernoulli": "logistic GLMM"}.get(model.family)
    if family is None and model.sd_column is None:
        family = "normal hierarchy (residual sd fixed in the model)"
    elif family is None:
        family = f"normal hierarchy (residual sd {names[model.sd_column]})"
    return (
        f"{effect} ~ N({mean}, {sd}), entering as {entering}, of the {family} "
        "recovered from the draws"
    )


def group_terms(fit, density, index: pd.Index):
    """The integrated terms of the groups ``index`` of ``fit`` (a
    :class:`~bayesij.data.fit.Fit` whose units are groups: a LOO result's units), labelled
    by them, and the variable integrated out (:func:`integrated_terms`); refused, naming
    ``density``, for a fit whose units are its observations or an effect none integrates.

    Returns
    -------
    (xarray.DataArray of shape (chain, draw, len(index)), str)
    """
    if not fit.units.grouped:
        raise fail(
            "density",
            "a fit whose units are its observations (no group effect to integrate)",
            "a grouped fit: groups= or a group index saved in the fit",
        )
    terms, variable = integrated_terms(fit, density)
    if terms is None:
        raise fail(
            "density",
            f"{type(density).__name__} integrating none of the unit effects "
            f"{list(fit.structure.unit_effects)}",
            "a density with group_log_lik (refit.PyMCDensity, refit.PyStanDensity) and a free "
            "vector variable of one unbounded element per group",
        )
    values = fit.unit_columns(terms, list(index))
    name = index.name or "unit"
    return xr.DataArray(values, dims=("chain", "draw", name), coords={name: index}), variable


#: The families of :class:`GlmDensity` and their canonical links' log-likelihoods of ``y``
#: at the linear predictor ``eta`` (``extra``: the normal's sd, the binomial's trials).
FAMILIES = ("normal", "poisson", "bernoulli", "binomial")


def _family_log_lik(family: str, y, eta, extra):
    if family == "normal":
        return -0.5 * ((y - eta) / extra) ** 2 - np.log(np.sqrt(2 * np.pi) * extra)
    if family == "poisson":
        return y * eta - np.exp(eta) - gammaln(y + 1.0)
    if family == "bernoulli":
        return y * eta - np.logaddexp(0.0, eta)
    choose = gammaln(extra + 1.0) - gammaln(y + 1.0) - gammaln(extra - y + 1.0)
    return choose + y * eta - extra * np.logaddexp(0.0, eta)


@dataclass(frozen=True)
class GlmSlope:
    """A varying slope of a :class:`GlmDensity`: the predictor holds
    ``multiplier * effect[g] * covariate[n]``, the slopes ``N(mean, sd^2)`` independently of
    the intercepts.

    Parameters
    ----------
    effect : str
        Posterior variable of one element per group (over the fit's group dim).
    sd : str
        Posterior scalar: the slopes' sd.
    covariate : str
        A ``constant_data`` variable of one value per observation: what the slope
        multiplies.
    multiplier : str, optional
        Posterior scalar multiplying ``effect`` (a non-centred ``sd * z``); default 1.
    mean : str, optional
        Posterior scalar: the slopes' population mean when it is inside ``effect``
        (centred); default 0.

    Examples
    --------
    >>> import bayesij
    >>> bayesij.GlmSlope("v", "tau_v", "x").covariate
    'x'
    """

    effect: str
    sd: str
    covariate: str
    multiplier: str | None = None
    mean: str | None = None

    def __post_init__(self):
        for name in ("effect", "sd", "covariate"):
            if not isinstance(getattr(self, name), str):
                raise fail(name, repr(getattr(self, name)), "a variable's name")
        for name in ("multiplier", "mean"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise fail(name, repr(value), "a variable's name or None")


@dataclass(frozen=True)
class GlmDensity:
    """A generalised linear mixed model declared by its family and the variables it saved:
    what :func:`loo_integrated` and :func:`integrated_terms` need to integrate
    each group's random intercept out of a fit saved without its model (a Stan fit with its
    linear predictor in ``generated quantities``, a PyMC fit with ``eta`` as a
    ``Deterministic``).

    Parameters
    ----------
    family : {"normal", "poisson", "bernoulli", "binomial"}
        With the canonical link (identity, log, logit).
    linear_predictor : str
        Posterior variable of one element per observation (in the log-likelihood's order):
        the linear predictor, the group's intercept included.
    effect : str
        Posterior variable of one element per group (over the fit's group dim): the
        intercepts, entering the predictor as ``multiplier * effect[g]``.
    sd : str
        Posterior scalar: the intercepts' sd on the predictor's scale.
    multiplier : str, optional
        Posterior scalar multiplying ``effect`` (a non-centred ``sd * z``); default 1.
    mean : str, optional
        Posterior scalar: the intercepts' population mean when it is inside ``effect``
        (centred ``u ~ N(mu, sd)`` with ``eta = u[g] + ...``); default 0.
    sigma : str, optional
        The normal family's residual sd (posterior scalar); required for it.
    trials : str, optional
        The binomial family's numbers of trials (a ``constant_data`` variable, one per
        observation); required for it.
    observed : str, optional
        The ``observed_data`` variable (default: the log-likelihood's name).
    slope : GlmSlope, optional
        A varying slope of each group, integrated out jointly with the intercept (on a
        rotated two-dimensional grid, :func:`bayesij.array.hierarchy.integrate_effect_vectors`).

    Notes
    -----
    Each group's term is ``log ∫ prod_{n in g} p(y_n | eta_n - m u_g + mean + a) N(a | 0,
    sd^2) da`` at each draw, by adaptive Gauss-Hermite quadrature
    (:func:`bayesij.array.hierarchy.intercept_group_log_lik`): for a normal likelihood it is
    the closed form (tested to 1e-8), and for a Poisson GLMM it equals
    :meth:`bayesij.refit.PyMCDensity.group_log_lik` of the same model.

    References
    ----------
    .. [1] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of
       latent variable models: conditional versus marginal likelihoods. Psychometrika
       84(3), 802-829.

    Examples
    --------
    A normal hierarchy saved with its linear predictor ``eta``, its intercepts ``u`` of sd
    ``tau`` (:func:`loo_integrated` integrates them out of each group's term, a whole
    example there):

    >>> import bayesij
    >>> density = bayesij.GlmDensity("normal", "eta", "u", "tau", sigma="sigma")
    >>> density.declared
    ('u',)
    """

    family: str
    linear_predictor: str
    effect: str
    sd: str
    multiplier: str | None = None
    mean: str | None = None
    sigma: str | None = None
    trials: str | None = None
    observed: str | None = None
    slope: GlmSlope | None = None

    def __post_init__(self):
        if self.slope is not None and not isinstance(self.slope, GlmSlope):
            raise fail("slope", f"a {type(self.slope).__name__}", "a bayesij.GlmSlope or None")
        if self.family not in FAMILIES:
            raise fail("family", repr(self.family), f"one of {FAMILIES}")
        for name in ("linear_predictor", "effect", "sd"):
            if not isinstance(getattr(self, name), str):
                raise fail(name, repr(getattr(self, name)), "a posterior variable's name")
        for name in ("multiplier", "mean", "sigma", "trials", "observed"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise fail(name, repr(value), "a variable's name or None")
        if self.family == "normal" and self.sigma is None:
            raise fail(
                "sigma", "None for the normal family", "the residual sd's posterior variable"
            )
        if self.family == "binomial" and self.trials is None:
            raise fail(
                "trials", "None for the binomial family", "a constant_data variable of trials"
            )

    @property
    def declared(self) -> tuple:
        """The effects integrated out: the intercepts, and the slopes when declared."""
        return (self.effect,) if self.slope is None else (self.effect, self.slope.effect)

    def group_log_lik(self, data, variable=None, n_nodes: int = 16):
        """Each group's log-likelihood with its effects integrated out, at each draw
        (``variable``: the declared ``effect``, the intercept alone, the slope staying
        conditional; :attr:`declared`, or None: all of them; another is refused with a
        ``ValueError``, as :meth:`bayesij.refit.PyMCDensity.group_log_lik` refuses a
        variable it cannot integrate).

        Returns
        -------
        xarray.DataArray of shape (chain, draw, G)
            Over the fit's group dim, labelled by its levels.
        """
        if isinstance(variable, list):
            variable = tuple(variable)
        if variable is not None and variable not in (self.effect, self.declared):
            raise fail("variable", repr(variable), f"the declared effects {self.declared!r}")
        joint = self.slope is not None and variable != self.effect
        n_nodes = check_positive_int(n_nodes, "n_nodes")
        fit = read(data)
        if not fit.units.grouped or fit.units.dim is None:
            raise fail(
                "data",
                "a fit without a group dim over its units",
                "a grouped fit whose index runs over the effect's posterior dim",
            )
        levels, codes = group_codes(fit)
        base, y, extra = self._pieces(fit, codes, len(levels))
        if joint:
            terms = self._joint_terms(fit, base, y, extra, codes, n_nodes)
        else:
            terms = intercept_group_log_lik(
                lambda a: _family_log_lik(self.family, y, base + a, extra),
                codes,
                self._scalar(fit, self.sd),
                n_nodes,
            )
        dim = fit.units.dim
        return xr.DataArray(terms, dims=("chain", "draw", dim), coords={dim: levels})

    def _pieces(self, fit, codes: np.ndarray, n_groups: int):
        """The predictor less each observation's group intercept plus the population mean
        (n_chains, n_draws, n_obs), the observed values (n_obs,) and the family's extra."""
        eta, _ = fit.posterior_draws([self.linear_predictor])
        effect, _ = fit.posterior_draws([self.effect])
        if eta.shape[2] != codes.size or effect.shape[2] != n_groups:
            raise fail(
                "density",
                f"{self.linear_predictor!r} of {eta.shape[2]} elements and {self.effect!r} "
                f"of {effect.shape[2]}",
                f"one per observation ({codes.size}) and one per group ({n_groups})",
            )
        multiplier = 1.0 if self.multiplier is None else self._scalar(fit, self.multiplier)
        mean = 0.0 if self.mean is None else self._scalar(fit, self.mean)
        base = eta - np.asarray(multiplier)[..., None] * effect[..., codes]
        base = base + np.asarray(mean)[..., None]
        name = self.observed or next(iter(fit.group("log_likelihood").data_vars))
        y = self._by_observation(fit, "observed_data", name, "observed")
        extra = None
        if self.family == "normal":
            extra = self._scalar(fit, self.sigma)[..., None]
        elif self.family == "binomial":
            extra = self._by_observation(fit, "constant_data", self.trials, "trials")
        return base, y, extra

    def _joint_terms(self, fit, base, y, extra, codes: np.ndarray, n_nodes: int) -> np.ndarray:
        """The intercept and the slope of each group integrated out jointly: ``base`` (the
        predictor less the intercept) also loses the slope's term, and each group's
        ``(a, b) ~ N(0, sd_a^2) x N(0, sd_b^2)`` enters as ``a + b x_n``."""
        slope, x = self.slope, self._covariate(fit, codes.size)
        v, _ = fit.posterior_draws([slope.effect])
        n_groups = int(codes.max()) + 1
        if v.shape[2] != n_groups:
            raise fail(
                "slope",
                f"{slope.effect!r} of {v.shape[2]} elements",
                f"one per group ({n_groups})",
            )
        multiplier = 1.0 if slope.multiplier is None else self._scalar(fit, slope.multiplier)
        mean = 0.0 if slope.mean is None else self._scalar(fit, slope.mean)
        shift = np.asarray(multiplier)[..., None] * v - np.asarray(mean)[..., None]
        base = base - shift[..., codes] * x
        sd = np.stack([self._scalar(fit, self.sd), self._scalar(fit, slope.sd)], axis=-1)
        sd = sd[..., None, :]  # (n_chains, n_draws, 1, 2)
        members = np.zeros((codes.size, n_groups))
        members[np.arange(codes.size), codes] = 1.0

        def joint(a: np.ndarray) -> np.ndarray:
            eta = base + a[..., codes, 0] + a[..., codes, 1] * x
            prior = -0.5 * (a / sd) ** 2 - np.log(np.sqrt(2 * np.pi) * sd)
            return _family_log_lik(self.family, y, eta, extra) @ members + prior.sum(axis=-1)

        return integrate_effect_vectors(joint, (*base.shape[:2], n_groups, 2), sd, n_nodes)

    def _covariate(self, fit, n_obs: int) -> np.ndarray:
        """The slope's covariate, one value per observation."""
        name = self.slope.covariate
        if "constant_data" not in fit.groups_of_input or name not in fit.group("constant_data"):
            raise fail(
                "slope",
                f"a covariate {name!r} the fit does not save",
                "a constant_data variable of one value per observation",
            )
        x = self._by_observation(fit, "constant_data", name, "slope")
        if x.size != n_obs:
            raise fail("slope", f"a covariate of {x.size} values", f"one per observation ({n_obs})")
        return x

    def _by_observation(self, fit, group: str, name: str, argument: str) -> np.ndarray:
        """A variable over the observations, flattened in the log-likelihood's order
        (whichever order its dims were stored in)."""
        log_lik = fit.group("log_likelihood")
        own = self.observed if self.observed in log_lik.data_vars else None
        reference = log_lik[own or next(iter(log_lik.data_vars))]
        variable = in_observation_order(fit.group(group)[name], reference, argument)
        return as_float_array(variable.values, argument).ravel()

    def _scalar(self, fit, name: str) -> np.ndarray:
        """A posterior scalar's draws (n_chains, n_draws)."""
        draws, _ = fit.posterior_draws([name])
        if draws.shape[2] != 1:
            raise fail("density", f"{name!r} of {draws.shape[2]} elements", "a scalar")
        return draws[..., 0]
