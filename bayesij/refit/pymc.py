"""Refits of a PyMC model under observation weights.

The model is cloned and given one term more, ``sum_n (w_n - 1) log p(y_n | theta)`` (a
``pm.Potential`` of the observed variable's elementwise log-likelihood), so that the model's
log density holds ``w_n log p(y_n | theta)``: weight 0 deletes observation ``n``, integer
counts give a bootstrap replicate, all ones is the ordinary fit. The weights are a
``pm.Data`` variable, so every refit runs the same compiled functions.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import warnings

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.fit import read
from bayesij.data.posterior import Posterior
from bayesij.refit.backends import Backend, RefitFailed, content_digest, refit_seed

__all__ = ["PyMCBackend", "PyMCDensity"]

WEIGHTS = "bayesij_weights"


class PyMCBackend(Backend):
    """Refits a PyMC model (PyMC 5 or 6) with each observation's log-likelihood weighted.

    Parameters
    ----------
    model : pymc.Model
        The fitted model, with one observed variable (or name it with ``observed``).
    observed : str, optional
        The observed variable whose observations are weighted (default: the only one).
    var_names : list of str, optional
        Posterior variables to keep (default: all).
    seed : int, default 0
        Each refit's seed comes from it and the weights (:func:`refit_seed`): the same
        weights give the same draws.
    max_divergent : float, default 0.01
        A refit with more divergent transitions than this share of its draws fails.
    **sample_kwargs
        Passed to ``pm.sample`` (``draws``, ``tune``, ``chains``, ``target_accept``...);
        ``cores`` defaults to 1 (campaigns spread refits over processes themselves) and the
        progress bar is off.

    Examples
    --------
    Run with the PyMC tests, outside the fast loop. A normal mean with known sd, whose
    posterior without any rows is known in closed form:

    >>> import numpy as np, pymc as pm, bayesij
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=30)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 10.0)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    >>> backend = bayesij.refit.PyMCBackend(model, draws=500, chains=2, cores=1, seed=1)
    >>> without = backend.fit(np.r_[np.zeros(3), np.ones(27)])  # the first three rows out
    >>> exact = y[3:].sum() / (27 + 1 / 100)  # the closed-form posterior mean without them
    >>> draws = without.quantities.sel(quantity="mu").values
    >>> bool(abs(draws.mean() - exact) < 4 * draws.std() / np.sqrt(draws.size) + 1e-3)
    True
    >>> checked = bayesij.refit.verify(bayesij.amip(backend.fit(np.ones(30)), "mu"), backend)

    Notes
    -----
    The log-likelihood the refit reports is the unweighted one (PyMC's
    ``compute_log_likelihood``), as every backend's: approximations are compared on it.
    """

    def __init__(
        self,
        model,
        observed: str | None = None,
        var_names=None,
        *,
        seed: int = 0,
        max_divergent: float = 0.01,
        **sample_kwargs,
    ):
        self.model = model
        self.observed = _observed_name(model, observed)
        self.var_names = None if var_names is None else list(var_names)
        self.seed, self.max_divergent = int(seed), float(max_divergent)
        self.sample_kwargs = {"cores": 1, **sample_kwargs, "progressbar": False}
        self._shape = tuple(int(n) for n in _observed_values(model, self.observed).shape)
        self.n_obs = int(np.prod(self._shape))
        self._density: PyMCDensity | None = None  # group_log_lik's, compiled when asked

    def __repr__(self) -> str:
        values = _observed_values(self.model, self.observed)
        digest = content_digest(str(self.model.str_repr()), values, self.observed, self.var_names)
        return (
            f"PyMCBackend(n_obs={self.n_obs}, model_and_data={digest}, seed={self.seed}, "
            f"max_divergent={self.max_divergent:g}, sample_kwargs={self.sample_kwargs})"
        )

    def __getstate__(self) -> dict:
        """The model travels as cloudpickle bytes: a PyMC model holds ``functools.partial``
        objects that the standard pickler (loky's and Dask's for arguments) cannot send."""
        import cloudpickle

        return {**self.__dict__, "model": cloudpickle.dumps(self.model), "_density": None}

    def __setstate__(self, state: dict) -> None:
        import cloudpickle

        self.__dict__.update({**state, "model": cloudpickle.loads(state["model"])})

    def fit(self, weights) -> Posterior:
        import pymc as pm

        from bayesij.data.inference_data import from_inference_data

        w = self.checked_weights(weights)
        model = self._weighted_model(w)
        with model, _quiet_pymc():
            trace = pm.sample(random_seed=refit_seed(self.seed, w), **self.sample_kwargs)
            trace = (
                pm.compute_log_likelihood(
                    trace, var_names=[self.observed], progressbar=False, extend_inferencedata=True
                )
                or trace
            )
        divergent = np.asarray(trace["sample_stats"]["diverging"])
        if divergent.sum() > self.max_divergent * divergent.size:
            raise RefitFailed(
                f"{int(divergent.sum())} divergent transitions in {divergent.size} draws "
                f"(more than max_divergent = {self.max_divergent:g} of them)"
            )
        keep = [v for v in _posterior_names(trace) if v != WEIGHTS]
        if self.var_names is not None:
            keep = [v for v in keep if v in self.var_names]
        return from_inference_data(trace, var_name=self.observed, quantities=keep)

    def group_log_lik(self, data, variable: str, n_nodes: int = 16):
        """Each group's log-likelihood with its element of ``variable`` integrated out:
        :meth:`PyMCDensity.group_log_lik` of this backend's model (what
        :func:`bayesij.audit` reads, given this backend, for a hierarchy's units)."""
        if self._density is None:
            self._density = PyMCDensity(self.model, self.observed)
        return self._density.group_log_lik(data, variable, n_nodes)

    def _weighted_model(self, weights: np.ndarray):
        """A clone of the model whose log density weights the observed variable's terms."""
        import pymc as pm
        from pymc.model.fgraph import clone_model

        model = clone_model(self.model)
        with model:
            w = pm.Data(WEIGHTS, weights.reshape(self._shape))
            log_lik = model.logp(vars=[model[self.observed]], sum=False)[0]
            pm.Potential(f"{WEIGHTS}_term", ((w - 1.0) * log_lik).sum())
        return model


class PyMCDensity:
    """A PyMC model's log density at posterior draws: the log posterior's gradient for
    :func:`bayesij.amip`, :func:`bayesij.influence` and :func:`bayesij.audit` (zero-variance
    control variates), and the ``ModelDensity`` of :func:`bayesij.loo_moment_match`.

    Parameters
    ----------
    model : pymc.Model
        The fitted model (PyMC 5 or 6); its free variables must be continuous.
    observed : str, optional
        The observed variable whose observations moment matching leaves out (default: the
        only one); its elementwise log-likelihood, flattened in C order, is the fit's
        ``log_likelihood`` variable as ``pm.compute_log_likelihood`` stores it.

    Notes
    -----
    The draws of each free variable (the posterior group, on the constrained scale) are
    mapped to PyMC's unconstrained value variables by the model's own transforms; the model's
    log density (with the Jacobian of those transforms), its gradient (``dlogp``) and the
    observed variable's elementwise log-likelihood are compiled once and evaluated there,
    one call per draw. Moment matching's affine maps act on the concatenated value
    variables, in the order of ``model.free_RVs``.

    Examples
    --------
    Run with the PyMC tests, outside the fast loop. For a normal mean with known sd the
    gradient of the log posterior is known in closed form:

    >>> import numpy as np, pymc as pm, bayesij
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=30)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 10.0)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     idata = pm.sample(300, chains=2, cores=1, random_seed=1, progressbar=False)
    ...     idata = pm.compute_log_likelihood(idata, progressbar=False)
    >>> density = bayesij.refit.PyMCDensity(model)
    >>> gradient, upars = density.grad_log_posterior(idata)  # (chains, draws, 1) each
    >>> closed_form = (y.sum() - y.size * upars) - upars / 100  # d/dmu of log p(mu | y)
    >>> bool(np.allclose(gradient, closed_form))
    True
    >>> report = bayesij.audit(idata, grad_log_posterior=density, settings={"method": "linear"})
    >>> matched = bayesij.loo_moment_match(idata, density)  # where k-hat is high
    """

    def __init__(self, model, observed: str | None = None):
        import pymc as pm

        if not isinstance(model, pm.Model):
            raise fail("model", f"a {type(model).__name__}", "a pymc.Model")
        discrete = [rv.name for rv in model.free_RVs if rv.type.dtype.startswith(("int", "bool"))]
        if discrete:
            raise fail(
                "model",
                f"discrete free variables {discrete}",
                "continuous free variables only (a gradient needs them)",
            )
        if observed is not None:
            _observed_name(model, observed)  # checked now, used by log_lik_i
        self.model, self.observed = model, observed
        self._compiled = None
        self._pointwise = None
        self._last: tuple | None = None
        self._last_log_lik: tuple | None = None

    def _functions(self):
        """The forward transforms (constrained -> unconstrained), the gradient and the log
        density, compiled once, with the free variables' constrained and unconstrained
        shapes."""
        if self._compiled is None:
            import pytensor
            from pytensor.graph.replace import clone_replace

            free = list(self.model.free_RVs)
            inputs = [rv.type() for rv in free]
            outputs = []
            for rv, value in zip(free, inputs, strict=True):
                transform = self.model.rvs_to_transforms.get(rv)
                outputs.append(
                    value if transform is None else transform.forward(value, *rv.owner.inputs)
                )
            outputs = clone_replace(outputs, replace=dict(zip(free, inputs, strict=True)))
            forward = pytensor.function(inputs, outputs, on_unused_input="ignore")
            values = [self.model.rvs_to_values[rv].name for rv in free]
            gradient = self.model.compile_dlogp(vars=free, jacobian=True)
            log_density = self.model.compile_logp(jacobian=True)  # every term, observed too
            shapes = self.model.eval_rv_shapes()
            constrained = [tuple(int(n) for n in shapes[rv.name]) for rv in free]
            unconstrained = [tuple(int(n) for n in shapes[name]) for name in values]
            self._compiled = (
                free,
                forward,
                values,
                gradient,
                log_density,
                constrained,
                unconstrained,
            )
        return self._compiled

    def _constrained_draws(self, data) -> list[np.ndarray]:
        """Each free variable's draws, (S, *shape), from any fit :func:`bayesij.read` takes
        (an InferenceData / DataTree's posterior group, a Posterior's quantities named as
        ArviZ labels them, ``z_a[General Motors]``), elements in C order."""
        free, *_, constrained, _ = self._functions()
        fit = read(data)
        names = [rv.name for rv in free]
        variables = list(fit.variable_sizes())
        missing = [name for name in names if name not in variables]
        if missing:
            raise fail(
                "data",
                f"a posterior without {missing} (it has {variables})",
                "draws of every free variable of the model",
            )
        arrays = []
        for name, shape in zip(names, constrained, strict=True):
            values, _ = fit.posterior_draws([name])
            arrays.append(values.reshape(-1, *shape))
        return arrays

    def unconstrain(self, data) -> np.ndarray:
        """The draws of the model's free variables on the unconstrained scale, (S, D), D the
        total size of the value variables (their order: ``model.free_RVs``)."""
        forward = self._functions()[1]
        flat = self._constrained_draws(data)
        rows = [forward(*[a[s] for a in flat]) for s in range(flat[0].shape[0])]
        return np.asarray([np.concatenate([np.ravel(v) for v in row]) for row in rows])

    def _points(self, upars: np.ndarray):
        """Each row of ``upars`` (n, D) as a point: value variable name -> array."""
        _, _, values, _, _, _, shapes = self._functions()
        upars = np.asarray(upars, dtype=float)
        sizes = [int(np.prod(shape)) for shape in shapes]
        if upars.ndim != 2 or upars.shape[1] != sum(sizes):
            raise fail(
                "upars",
                f"an array of shape {upars.shape}",
                f"(n, {sum(sizes)}): the model's value variables {values} concatenated",
            )
        edges = np.cumsum([0, *sizes])
        for row in upars:
            yield {
                name: row[a:b].reshape(shape)
                for name, shape, a, b in zip(values, shapes, edges[:-1], edges[1:], strict=True)
            }

    def grad_log_posterior(self, data) -> tuple[np.ndarray, np.ndarray]:
        """The log posterior's gradient (with the Jacobian) at each draw of ``data``'s
        posterior group and the draws on the unconstrained scale, each (n_chains, n_draws,
        P), P the total size of the free variables.

        Parameters
        ----------
        data : Fit, Posterior, InferenceData or DataTree
            The fit (with draws of every free variable of the model: an InferenceData's
            ``posterior`` group, or the Posterior of :class:`PyMCBackend`); the audit and
            :func:`bayesij.amip` pass the :class:`~bayesij.data.fit.Fit` they read.
        """
        free, _, _, gradient, *_ = self._functions()
        first, _ = read(data).posterior_draws([free[0].name])  # (n_chains, n_draws, ...)
        upars = self.unconstrain(data)
        scores = [gradient(point) for point in self._points(upars)]
        shape = (first.shape[0], first.shape[1], -1)
        return np.asarray(scores).reshape(shape), upars.reshape(shape)

    def log_prob(self, upars: np.ndarray) -> np.ndarray:
        """Log posterior density (with the Jacobian) at unconstrained draws (n, D), (n,)."""
        upars = np.asarray(upars, dtype=float)
        key = hashlib.sha256(upars.tobytes()).hexdigest()
        if self._last is None or self._last[0] != key:  # moment matching asks twice
            log_density = self._functions()[4]
            self._last = (key, np.array([log_density(p) for p in self._points(upars)]))
        return self._last[1]

    def log_lik_i(self, upars: np.ndarray, i: int) -> np.ndarray:
        """``log p(y_i | theta)`` at unconstrained draws (n, D), (n,): element ``i`` of the
        observed variable's elementwise log-likelihood, flattened in C order."""
        return self.log_lik(upars)[:, int(i)]

    def log_lik(self, upars: np.ndarray) -> np.ndarray:
        """Every observation's ``log p(y_n | theta)`` at unconstrained draws (n, D), (n, N):
        what :func:`bayesij.loo_moment_match` checks against the fit's log-likelihood (a
        model built on other data is refused there)."""
        if self._pointwise is None:
            rv = self.model[_observed_name(self.model, self.observed)]
            elementwise = self.model.logp(vars=[rv], sum=False)[0].flatten()
            self._pointwise = self.model.compile_fn(elementwise, on_unused_input="ignore")
        upars = np.asarray(upars, dtype=float)
        key = hashlib.sha256(upars.tobytes()).hexdigest()
        if self._last_log_lik is None or self._last_log_lik[0] != key:  # asked per term
            rows = [np.asarray(self._pointwise(point)) for point in self._points(upars)]
            values = np.asarray(rows, dtype=float)
            values.flags.writeable = False  # shared by the calls that ask again
            self._last_log_lik = (key, values)
        return self._last_log_lik[1]

    def log_lik_set(self, upars: np.ndarray, units) -> np.ndarray:
        """``sum_{i in units} log p(y_i | theta)`` at unconstrained draws (n, D), (n,): one
        pass of the elementwise log-likelihood per draw whatever the set's size."""
        return self.log_lik(upars)[:, np.asarray(units, dtype=int)].sum(axis=1)

    def group_log_lik(self, data, variable: str, n_nodes: int = 16):
        """Each group's log-likelihood with its own effect integrated out, at each draw:
        ``log ∫ prod_{n in g} p(y_n | theta, a) p(a | theta) da`` over the element ``a`` of
        the group-effect variable ``variable`` that the group's observations depend on
        (adaptive Gauss-Hermite quadrature, :func:`bayesij.array.hierarchy.integrate_effects`;
        the prior ``p(a | theta)`` is the model's own, at each draw's hyperparameters).

        These are the terms with which a hierarchy is judged for a *new* group
        (Merkle, Furr & Rabe-Hesketh 2019): pass them to :func:`bayesij.loo` (leave one
        group out) or as :func:`bayesij.audit`'s ``marginal_log_lik`` (the IJ over groups,
        which approximates :func:`bayesij.refit.cluster_bootstrap`).

        Parameters
        ----------
        data : Fit, InferenceData or DataTree
            The fit (its ``posterior`` group holds every free variable of the model); the
            audit and :func:`bayesij.loo` pass the :class:`~bayesij.data.fit.Fit` they read.
        variable : str or sequence of str
            A free vector variable of the model, one unbounded element per group (a normal
            intercept, centred ``u ~ N(0, sigma_u)`` or non-centred ``z ~ N(0, 1)`` with
            ``u = sigma_u * z``), a matrix of one row of effects per group (``z`` of dims
            (group, effect) scaled by a Cholesky factor, or ``pm.MvNormal``), or several
            such variables (``("z_intercept", "z_slope")``): a random slope is an effect
            like an intercept, and several effects per group are integrated jointly
            (:func:`bayesij.array.hierarchy.integrate_effect_vectors`). Which observations
            belong to which group is read from the model (the observed log-likelihood's
            Jacobian in the variables): each observation must depend on one group's effects.
        n_nodes : int, default 16
            Quadrature nodes per effect, group and draw (``n_nodes ** d`` for ``d`` effects
            per group).

        Returns
        -------
        xarray.DataArray of shape (n_chains, n_draws, G)
            Dims ``chain``, ``draw`` and the variable's own dim (with its coordinate when the
            posterior has one).

        References
        ----------
        .. [1] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of
           latent variable models: conditional versus marginal likelihoods.
           Psychometrika 84(3), 802-829.
        .. [2] Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature.
           Biometrika 81(3), 624-629.
        """
        import xarray as xr

        from bayesij.array.hierarchy import integrate_effect_vectors

        names = [variable] if isinstance(variable, str) else list(variable)
        found = [self._group_variable(name) for name in names]  # (rv, value name, shape)
        size = _common_groups(found, names)
        terms, jacobian = self._group_functions([rv for rv, *_ in found])
        points = list(self._points(self.unconstrain(data)))
        codes = _effect_of_each_observation(jacobian, points, names, size)
        fit = read(data)
        draws = [fit.posterior_draws([name])[0] for name in names]
        widths = [int(np.prod(shape[1:])) for *_, shape in found]
        edges = np.cumsum([0, *widths])
        shape = (*draws[0].shape[:2], size, edges[-1])

        def joint(a: np.ndarray) -> np.ndarray:
            flat = a.reshape(-1, size, edges[-1])
            out = np.empty(flat.shape[:2])
            for row, point in enumerate(points):
                moved = {
                    value: flat[row, :, start:stop].reshape(effect_shape)
                    for (_, value, effect_shape), start, stop in zip(
                        found, edges[:-1], edges[1:], strict=True
                    )
                }
                obs, *priors = terms({**point, **moved})
                out[row] = np.bincount(codes, weights=np.ravel(obs), minlength=size) + sum(
                    np.reshape(prior, (size, -1)).sum(axis=1) for prior in priors
                )
            return out.reshape(a.shape[:-1])

        spread = np.concatenate(
            [
                np.std(d.reshape(-1, size, w), axis=(0, 1))
                for d, w in zip(draws, widths, strict=True)
            ]
        )
        integrated = integrate_effect_vectors(
            joint, shape, np.where(spread > 0, spread, 1.0), n_nodes
        )
        dim, levels = _effect_dim(fit, names[0], size)
        return xr.DataArray(integrated, dims=("chain", "draw", dim), coords={dim: levels})

    def _group_variable(self, variable: str) -> tuple:
        """The free variable ``variable``, its value variable's name and its shape; refused
        unless it is untransformed, a vector or a matrix of one row per group."""
        free, _, values, *_, shapes = self._functions()
        names = [rv.name for rv in free]
        if variable not in names:
            raise fail("variable", repr(variable), f"a free variable of the model ({names})")
        index = names.index(variable)
        rv = free[index]
        if self.model.rvs_to_transforms.get(rv) is not None or len(shapes[index]) not in (1, 2):
            raise fail(
                "variable",
                f"{variable!r} of shape {shapes[index]}"
                + (", transformed" if self.model.rvs_to_transforms.get(rv) else ""),
                "an unbounded vector of group effects (one element per group) or a matrix of "
                "one row per group",
            )
        return rv, values[index], tuple(int(n) for n in shapes[index])

    def _group_functions(self, rvs: list):
        """Compiled at a point: the observed variable's elementwise log-likelihood and each
        group-effect variable's elementwise prior log density; and the first's Jacobians in
        each of them."""
        import pytensor.gradient

        observed = self.model[_observed_name(self.model, self.observed)]
        elementwise = self.model.logp(vars=[observed], sum=False)[0].flatten()
        priors = [self.model.logp(vars=[rv], sum=False)[0] for rv in rvs]
        inputs = self.model.value_vars  # each point holds them all, used or not
        terms = self.model.compile_fn(
            [elementwise, *priors], inputs=inputs, on_unused_input="ignore"
        )
        jacobians = [
            pytensor.gradient.jacobian(elementwise, self.model.rvs_to_values[rv]) for rv in rvs
        ]
        return terms, self.model.compile_fn(jacobians, inputs=inputs, on_unused_input="ignore")


def _common_groups(found: list, names: list) -> int:
    """The number of groups (rows) the group-effect variables share; refused otherwise."""
    rows = {name: shape[0] for name, (*_, shape) in zip(names, found, strict=True)}
    if len(set(rows.values())) != 1:
        raise fail(
            "variable",
            f"group-effect variables of {rows} rows",
            "variables with one row per group each, the same groups",
        )
    return next(iter(rows.values()))


def _effect_dim(fit, variable: str, size: int) -> tuple[str, list]:
    """The group effects' dim and its levels: the posterior's own (an InferenceData or
    DataTree), else ``{variable}_dim_0`` and the first label inside the brackets of its
    elements' names (``z[p3]`` or ``z[p3, slope]`` -> ``p3``)."""
    try:
        values = fit.group("posterior")[variable]
    except (ValueError, KeyError, TypeError):
        values = None
    dims = [d for d in values.dims if d not in ("chain", "draw")] if values is not None else []
    if dims and dims[0] in values.coords:
        return dims[0], list(values.coords[dims[0]].values)
    labels = fit.posterior_draws([variable])[1]
    rows = labels[:: len(labels) // size]
    levels = [str(label).partition("[")[2].rstrip("]").split(",")[0].strip() for label in rows]
    return f"{variable}_dim_0", [
        level or str(label) for level, label in zip(levels, rows, strict=True)
    ]


def _effect_of_each_observation(jacobian, points: list, names: list, size: int) -> np.ndarray:
    """The group (row of the effect variables ``names``) each observation's log-likelihood
    depends on, from its Jacobians at two draws (a derivative that happens to be 0 at one is
    not at both)."""
    touches = 0
    for point in [points[0], points[len(points) // 2]]:
        for values in jacobian(point):
            values = np.abs(np.asarray(values))
            touches = touches + (values.reshape(*values.shape[:2], -1).sum(axis=2) > 0)
    counts = (np.asarray(touches) > 0).sum(axis=1)
    if np.ndim(touches) != 2 or np.shape(touches)[1] != size or np.any(counts != 1):
        found = "none" if np.any(counts == 0) else "several"
        label = names[0] if len(names) == 1 else names
        raise fail(
            "variable",
            f"{label!r}, of which some observations depend on {found} of the groups' effects",
            "each observation's log-likelihood depending on exactly one group's effects",
        )
    return np.argmax(np.asarray(touches) > 0, axis=1)


#: Warnings the sampler raises from its own numerics (NumPy's floating-point warnings in
#: PyMC's and PyTensor's code, e.g. "overflow encountered in dot" in the mass matrix's
#: velocity during warmup) and its own divergence / r-hat notes: they say how the chain
#: explored, which the refit judges itself by its divergences (``max_divergent``).
_SAMPLER_WARNINGS = ((RuntimeWarning, r"(pymc|pytensor)(\.|$)"), (UserWarning, r"pymc(\.|$)"))


@contextlib.contextmanager
def _quiet_pymc():
    """PyMC's INFO lines ("Initializing NUTS...") and its sampler's warnings off during a
    refit: a campaign of hundreds of refits would print thousands of them, and a warmup's
    floating-point overflow is not a failed refit; divergences are checked and reported here.
    Warnings from anywhere else (the user's model code, deprecations) pass as they are."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            for category, module in _SAMPLER_WARNINGS:
                warnings.filterwarnings("ignore", category=category, module=module)
            yield
    finally:
        logger.setLevel(level)


def _observed_name(model, observed) -> str:
    names = [v.name for v in getattr(model, "observed_RVs", None) or []]
    if not hasattr(model, "observed_RVs"):
        raise fail("model", f"a {type(model).__name__}", "a pymc.Model")
    if observed is None:
        if len(names) != 1:
            raise fail(
                "observed",
                f"None with {len(names)} observed variables {names}",
                "the name of the observed variable to weight",
            )
        return names[0]
    if observed not in names:
        raise fail("observed", repr(observed), f"one of the observed variables {names}")
    return observed


def _observed_values(model, name: str) -> np.ndarray:
    rv = model[name]
    value = model.rvs_to_values[rv]
    data = getattr(value, "data", None)
    if data is None and hasattr(value, "get_value"):
        data = value.get_value()
    if data is None:
        data = value.eval()
    return np.asarray(data)


def _posterior_names(trace) -> list[str]:
    return [str(v) for v in read(trace).group("posterior").data_vars]
