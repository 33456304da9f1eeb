"""A Stan program's log density through PyStan, evaluated at given parameter values: the
gradient for control variates, single observations' log-likelihoods for moment matching,
and each group's log-likelihood with its own effect integrated out (leave-one-group-out and
the IJ over new groups)."""

from __future__ import annotations

import contextlib
import hashlib
import io

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.arrays import element_names
from bayesij.data.fit import read
from bayesij.data.posterior import Posterior
from bayesij.refit.stan import build_model, model_code, outside_event_loop

__all__ = ["PyStanDensity"]


class PyStanDensity:
    """A Stan program's log density through PyStan: for :func:`bayesij.loo_moment_match`,
    the gradient's control variates, and each group's term with its effect integrated out
    (:meth:`group_log_lik`, for :func:`bayesij.loo_integrated`).

    Parameters
    ----------
    model : str
        Stan code, a ``.stan`` path or a shipped model's name, as :class:`PyStanBackend`.
    data : dict
        The data of the fit; its ``weights`` vector multiplies the pointwise log-likelihood,
        which gives ``log p(y_i | theta)`` as the difference of two log densities (all
        weights 1, and weight 0 for ``i``), so no Stan code beyond the weighted model is
        needed.
    weights : str, default "weights"

    Notes
    -----
    The compiled model's ``log_prob``, gradient and ``transform_inits`` are called directly
    (in the thread that loaded the model), not through httpstan's HTTP API, which costs a
    request per draw and function.

    Examples
    --------
    Run with the Stan tests, outside the fast loop (it compiles a Stan program the first
    time):

    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> from bayesij.stan_models import example_data
    >>> data = example_data("linear_regression", n=20)
    >>> backend = refit.PyStanBackend("linear_regression", data, num_chains=2, num_samples=200)
    >>> post = backend.fit(np.ones(20))
    >>> density = refit.PyStanDensity("linear_regression", data)
    >>> gradient, upars = density.grad_log_posterior(post)  # alpha, beta[1], beta[2], sigma
    >>> gradient.shape, upars.shape  # (chains, draws, unconstrained parameters)
    ((2, 200, 4), (2, 200, 4))
    >>> matched = bayesij.loo_moment_match(post, density)  # where k-hat is high
    """

    def __init__(self, model: str, data: dict, weights: str = "weights"):
        if not isinstance(data, dict):
            raise fail("data", f"a {type(data).__name__}", "a dict of Stan data")
        if weights not in data:
            raise fail("weights", repr(weights), f"a weight vector in data ({sorted(data)})")
        self.code, self.data, self.weights = model_code(model), data, weights
        self._models: dict = {}
        self._last: tuple | None = None

    def _model(self, dropped: int | tuple | str | None = None):
        """The program built on the data with observation ``dropped``'s weight 0 (a tuple:
        those observations'; every weight 0 for ``"all"``: the prior alone; none for
        ``None``), built once each."""
        if dropped not in self._models:
            weights = np.array(self.data[self.weights], dtype=float)
            if dropped is not None:
                at = list(dropped) if isinstance(dropped, tuple) else dropped
                weights[slice(None) if dropped == "all" else at] = 0.0
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                self._models[dropped] = outside_event_loop(
                    build_model, self.code, {**self.data, self.weights: weights}
                )
        return self._models[dropped]

    def unconstrain(self, post: Posterior, rows=None) -> np.ndarray:
        """The draws of the program's parameters on the unconstrained scale, (S, D); only
        the flat draws at positions ``rows`` (chains one after another) when given, (len(rows),
        D): one call of Stan per draw transformed."""
        return outside_event_loop(self._unconstrain, post, rows)

    def _unconstrain(self, post: Posterior, rows=None) -> np.ndarray:
        model = self._model()
        flat = post.quantities.values.reshape(post.n_draws, -1)
        flat = flat if rows is None else flat[np.asarray(rows, dtype=int)]
        column = {name: j for j, name in enumerate(post.quantity_names)}
        fields = []
        for name, dims in zip(model.param_names, model.dims, strict=True):
            names = element_names(name, tuple(dims))
            if all(n in column for n in names):
                fields.append((name, tuple(dims), [column[n] for n in names]))
        rows = []
        services = _services(model)
        for draw in flat:
            values = {
                name: draw[cols].reshape(dims).tolist() if dims else float(draw[cols[0]])
                for name, dims, cols in fields
            }
            try:
                if services is None:
                    rows.append(model.unconstrain_pars(values))
                else:
                    rows.append(services.transform_inits(model.data, values))
            except Exception as error:  # a parameter the posterior lacks
                raise fail(
                    "post",
                    f"draws of {sorted(v for v, _, _ in fields)} ({type(error).__name__}: {error})",
                    "draws of every parameter of the Stan program",
                ) from None
        return np.asarray(rows, dtype=float)

    def grad_log_posterior(self, post: Posterior) -> tuple[np.ndarray, np.ndarray]:
        """The log posterior's gradient (with the Jacobian) at each draw of ``post`` and the
        draws on the unconstrained scale, each (n_chains, n_draws, P): the
        ``grad_log_posterior`` and
        ``unconstrained`` of :func:`bayesij.influence` and :func:`bayesij.amip`
        (zero-variance control variates). One ``grad_log_prob`` per draw. ``post`` may be
        anything :func:`bayesij.read` reads (with every parameter's draws): the audit and
        :func:`bayesij.amip` pass the :class:`~bayesij.data.fit.Fit` they read."""
        post = read(post, argument="post").posterior()
        upars = self.unconstrain(post)
        grads = outside_event_loop(_log_prob_grads, self._model(), upars)
        shape = (post.n_chains, post.n_draws // post.n_chains, upars.shape[1])
        return grads.reshape(shape), upars.reshape(shape)

    def log_prob(self, upars: np.ndarray) -> np.ndarray:
        """Log posterior density (with the Jacobian) at unconstrained draws, (n,)."""
        upars = np.asarray(upars, dtype=float)
        key = hashlib.sha256(upars.tobytes()).hexdigest()
        if self._last is None or self._last[0] != key:  # moment matching asks twice
            self._last = (key, outside_event_loop(_log_probs, self._model(), upars))
        return self._last[1]

    def log_lik_i(self, upars: np.ndarray, i: int) -> np.ndarray:
        """``log p(y_i | theta)`` at unconstrained draws, (n,): the drop of the log density
        when observation ``i``'s weight goes from 1 to 0 (the Jacobians cancel)."""
        dropped = outside_event_loop(_log_probs, self._model(int(i)), np.asarray(upars, float))
        return self.log_prob(upars) - dropped

    def log_lik_set(self, upars: np.ndarray, units) -> np.ndarray:
        """``sum_{i in units} log p(y_i | theta)`` at unconstrained draws, (n,): the drop of
        the log density when those observations' weights go to 0, one program built for
        the set (two calls of Stan per draw whatever its size, where summing
        :meth:`log_lik_i` takes one per observation and draw)."""
        key = tuple(sorted(int(i) for i in units))
        dropped = outside_event_loop(_log_probs, self._model(key), np.asarray(upars, float))
        return self.log_prob(upars) - dropped

    def prior_terms(self, upars: np.ndarray, log_lik: str = "log_lik") -> tuple:
        """Everything in the program's log density but the weighted log-likelihood, at
        unconstrained draws (n,): ``log_prob(theta) - sum_n w_n log p(y_n | theta)`` with
        this density's weights and the program's generated ``log_lik`` (the priors, the
        Jacobian, and whatever the program's data make of them: a prior centred on the
        kept data's mean shows here); and that ``log_lik`` itself (n, N).

        Returns
        -------
        (ndarray of shape (n,), ndarray of shape (n, N))
        """
        return outside_event_loop(self._prior_terms, np.asarray(upars, dtype=float), log_lik)

    def _prior_terms(self, upars: np.ndarray, log_lik: str) -> tuple:
        model = self._model()
        services, columns = _log_lik_columns(model, log_lik)
        terms = np.array([_log_lik_at(services, model, columns, u) for u in upars])
        weights = np.asarray(self.data[self.weights], dtype=float)
        return self.log_prob(upars) - terms @ weights, terms

    def group_log_lik(self, data, variable: str, n_nodes: int = 16, log_lik: str = "log_lik"):
        """Each group's log-likelihood with its own effect integrated out, at each draw:
        ``log ∫ prod_{n in g} p(y_n | theta, a) p(a | theta) da`` over the element ``a`` of
        the program's group-effect vector ``variable`` that the group's observations
        depend on (adaptive Gauss-Hermite quadrature,
        :func:`bayesij.array.hierarchy.integrate_effects`).

        The observations' log-likelihoods are the program's generated quantity ``log_lik``
        recomputed at each quadrature node (Stan's ``write_array``); which observations
        belong to which element is read from it (each must depend on exactly one); the
        prior ``p(a | theta)`` is the program's own at each draw, read from the gradient
        of its log density with every weight 0: it must be normal (a centred
        ``u ~ normal(mu, tau)`` or a non-centred ``z ~ std_normal()``), else the variable
        is refused. As :meth:`bayesij.refit.PyMCDensity.group_log_lik`, these terms give
        :func:`bayesij.loo_integrated`'s leave-one-group-out over new groups and the
        IJ over groups that approximates :func:`bayesij.refit.cluster_bootstrap`.

        Parameters
        ----------
        data : Fit, Posterior, InferenceData or DataTree
            The fit, with draws of every parameter of the program.
        variable : str or sequence of str
            An unconstrained vector parameter of the program, one element per group (an
            intercept, or a slope), or several (``("z_a", "z_s")``: an intercept and a slope
            per group, integrated jointly on a rotated grid,
            :func:`bayesij.array.hierarchy.integrate_effect_vectors`) with independent
            normal priors.
        n_nodes : int, default 16
            Quadrature nodes per effect, group and draw (``n_nodes ** d`` for ``d``
            effects per group).
        log_lik : str, default "log_lik"
            The generated quantity holding the pointwise log-likelihood.

        Returns
        -------
        xarray.DataArray of shape (n_chains, n_draws, G)
            Dims ``chain``, ``draw`` and ``{variable}_dim_0``, labelled by Stan's 1-based
            indices of ``variable`` (as :func:`bayesij.from_pystan` names its elements).

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
        post = read(data, argument="data").posterior()
        upars = self.unconstrain(post)
        terms = outside_event_loop(_GroupTerms, self, upars, names, log_lik)
        shape = (post.n_chains, post.n_draws // post.n_chains, *terms.positions.shape)
        spread = np.std(upars[:, terms.positions], axis=(0, 1))
        integrated = outside_event_loop(
            integrate_effect_vectors,
            lambda a: terms.joint(a.reshape(-1, *shape[2:])).reshape(shape[:3]),
            shape,
            np.where(spread > 0, spread, 1.0),
            n_nodes,
        )
        dim = f"{names[0]}_dim_0"
        levels = [str(j + 1) for j in range(shape[2])]
        return xr.DataArray(integrated, dims=("chain", "draw", dim), coords={dim: levels})


class _GroupTerms:
    """A Stan program's group terms at each draw as functions of the group effects
    ``a`` (S, G, d): the sum of each group's observations' log-likelihoods plus its effects'
    normal prior log density (see :meth:`PyStanDensity.group_log_lik`)."""

    def __init__(self, density: PyStanDensity, upars: np.ndarray, names: list, log_lik: str):
        self.upars, self.model = upars, density._model()
        self.services, self.log_lik_columns = _log_lik_columns(self.model, log_lik)
        columns = [_effect_positions(self.model, self.services, upars[0], v) for v in names]
        if len({c.size for c in columns}) != 1:
            sizes = {v: c.size for v, c in zip(names, columns, strict=True)}
            raise fail("variable", f"vectors of {sizes} elements", "one element per group each")
        self.positions = np.stack(columns, axis=1)  # (G, d)
        self.size = self.positions.shape[0]
        self.codes = self._codes(names)
        self.prior_mean, self.prior_sd = _normal_prior(
            density._model("all"), upars, self.positions, names
        )

    def _log_lik(self, u: np.ndarray) -> np.ndarray:
        return _log_lik_at(self.services, self.model, self.log_lik_columns, u)

    def _codes(self, names: list) -> np.ndarray:
        """The group each observation's log-likelihood depends on, found by moving each
        group's effects in turn at the first draw."""
        base = self._log_lik(self.upars[0])
        moved = np.zeros((self.size, base.size), dtype=bool)
        for j, positions in enumerate(self.positions):
            u = self.upars[0].copy()
            u[positions] += 0.5
            moved[j] = self._log_lik(u) != base
        counts = moved.sum(axis=0)
        if np.any(counts != 1):
            n = int(np.argmax(counts != 1))
            label = names[0] if len(names) == 1 else names
            raise fail(
                "variable",
                f"{label!r}, on {int(counts[n])} of whose groups observation {n + 1}'s "
                "log-likelihood depends",
                "group effects each observation depends on exactly one group of",
            )
        return np.argmax(moved, axis=0)

    def joint(self, a: np.ndarray) -> np.ndarray:
        """Each group's log-likelihood plus its effects' prior log density at ``a``
        (S, G, d), (S, G)."""
        out = np.empty(a.shape[:2])
        for s, u in enumerate(self.upars):
            u = u.copy()
            u[self.positions] = a[s]
            out[s] = np.bincount(self.codes, weights=self._log_lik(u), minlength=self.size)
        z = (a - self.prior_mean) / self.prior_sd
        return out - np.sum(0.5 * z**2 + np.log(np.sqrt(2 * np.pi) * self.prior_sd), axis=-1)


def _log_lik_columns(model, log_lik: str) -> tuple:
    """The compiled model's services and where its generated ``log_lik`` sits in
    ``write_array``'s output; refused without either."""
    services = _services(model)
    if services is None:
        raise fail("density", "an httpstan without its compiled services", "httpstan 4.x")
    names = services.constrained_param_names(model.data)
    columns = [k for k, name in enumerate(names) if name.split(".")[0] == log_lik]
    if not columns:
        raise fail("log_lik", repr(log_lik), "a generated quantity of the Stan program")
    return services, np.asarray(columns)


def _log_lik_at(services, model, columns: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The program's pointwise ``log_lik`` at one unconstrained draws vector ``u``, (N,)."""
    return np.asarray(services.write_array(model.data, u.tolist(), True, True))[columns]


def _effect_positions(model, services, u0: np.ndarray, variable: str) -> np.ndarray:
    """Where each element of the vector parameter ``variable`` sits among the program's
    unconstrained parameters (moving unconstrained parameter ``k`` by ``d`` at ``u0``
    moves that element alone, by ``d``); refused unless ``variable`` is a vector
    parameter without constraint."""
    dims = dict(zip(model.param_names, model.dims, strict=True))
    names = services.constrained_param_names(model.data)
    base = np.asarray(services.write_array(model.data, u0.tolist(), False, False))
    parameters = dict.fromkeys(name.split(".")[0] for name in names[: base.size])
    columns = [k for k, name in enumerate(names) if name.split(".")[0] == variable]
    if variable not in parameters or len(dims[variable]) != 1 or dims[variable][0] < 2:
        vectors = [name for name in parameters if len(dims[name]) == 1 and dims[name][0] > 1]
        raise fail(
            "variable",
            repr(variable),
            f"a vector in the Stan program's parameters block, one element per group ({vectors})",
        )
    moves = np.empty((u0.size, base.size))
    for k in range(u0.size):
        u = u0.copy()
        u[k] += 0.5
        moves[k] = np.asarray(services.write_array(model.data, u.tolist(), False, False)) - base
    moved = moves[:, columns]
    positions = np.argmax(np.abs(moved), axis=0)
    alone = np.count_nonzero(moves[positions], axis=1) == 1
    if not (np.all(alone) and np.allclose(moved[positions, range(len(columns))], 0.5, rtol=1e-12)):
        raise fail(
            "variable",
            f"{variable!r}, a vector with a constraint (not its own unconstrained value)",
            "an unconstrained vector of group effects (one element per group)",
        )
    return positions


def _normal_prior(prior_model, upars: np.ndarray, positions: np.ndarray, names: list) -> tuple:
    """The mean and sd of each group effect's prior at each draw, (S, G, d) each, from the
    gradient of the program's log density with every weight 0 at the effects ``a`` and
    with each variable's moved by +1 and -1: a normal prior's is ``-(a - mean) / sd^2``,
    linear in ``a`` and, for independent effects, unmoved by the other variables; refused
    otherwise (a prior that is not normal, or correlated effects)."""

    def gradient(variable: int | None, shift: float) -> np.ndarray:
        moved = upars.copy()
        if variable is not None:
            moved[:, positions[:, variable]] += shift
        return _log_prob_grads(prior_model, moved)[:, positions]  # (S, G, d)

    base = gradient(None, 0.0)
    precision = np.empty_like(base)
    for k, name in enumerate(names):
        up, down = gradient(k, 1.0) - base, gradient(k, -1.0) - base
        precision[..., k] = -up[..., k]
        others = np.delete(up, k, axis=-1)
        if np.any(precision[..., k] <= 0) or not np.allclose(
            down[..., k], precision[..., k], rtol=1e-6, atol=1e-10
        ):
            raise fail(
                "variable",
                f"{name!r}, whose prior given the other parameters is not normal",
                "group effects with a normal prior (centred or non-centred)",
            )
        if not np.allclose(others, 0.0, atol=1e-8 * np.max(np.abs(precision[..., k]))):
            raise fail(
                "variable",
                f"{name!r}, whose prior is correlated with the other effects' {names}",
                "group effects with independent normal priors (non-centred: z ~ std_normal())",
            )
    a = upars[:, positions]
    return a + base / precision, 1.0 / np.sqrt(precision)


def _log_prob_grads(model, upars: np.ndarray) -> np.ndarray:
    """A PyStan model's log density gradient (with the Jacobian) at each unconstrained
    draw, (n, P): the compiled model's own function, called in this thread (the one that
    loaded it), not one HTTP request per draw through httpstan (about 100 times slower)."""
    services = _services(model)
    if services is None:
        return np.array([model.grad_log_prob(u.tolist()) for u in upars], dtype=float)
    return np.array(
        [services.log_prob_grad(model.data, u.tolist(), True) for u in upars], dtype=float
    )


def _services(model):
    """httpstan's compiled extension module of a PyStan model, or None if unavailable."""
    try:
        import httpstan.models

        return httpstan.models.import_services_extension_module(model.model_name)
    except Exception:  # an httpstan without this layout: the public (slower) API
        return None


def _log_probs(model, upars: np.ndarray) -> np.ndarray:
    """A PyStan model's log density (with the Jacobian) at each unconstrained draw (the
    compiled function, as :func:`_log_prob_grads`)."""
    services = _services(model)
    if services is None:
        return np.array([model.log_prob(u.tolist()) for u in upars])
    return np.array([services.log_prob(model.data, u.tolist(), True) for u in upars])
