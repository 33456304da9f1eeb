"""Backends: refit a model under an observation-weight vector.

``backend.fit(weights)`` returns a :class:`bayesij.Posterior` of the model fitted with the
log-likelihood of observation ``n`` multiplied by ``weights[n]``: 0 deletes the observation,
integer counts give a bootstrap replicate, all ones is the ordinary fit. A refit that cannot
be trusted raises :class:`RefitFailed` with the reason; campaigns record it.

Every backend is a plain picklable object (process pools and Dask workers receive a copy)
and seeds each refit from its own seed and the weights, so repeating a refit repeats it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.fit import is_fit, read
from bayesij.data.posterior import Posterior
from bayesij.refit.conjugate import ConjugateNormal, FlatPriorRegression
from bayesij.refit.stan import model_code
from bayesij.refit.stan_density import PyStanDensity

__all__ = [
    "Backend",
    "RefitFailed",
    "ConjugateNormalBackend",
    "FlatPriorRegressionBackend",
    "CallableBackend",
    "OnceEach",
    "PyStanBackend",
    "CmdStanPyBackend",
    "refit_seed",
]


def _draw_layout(draws, chains, seed) -> tuple[int, int, int]:
    """Checked ``(draws, chains, seed)`` of a closed-form backend's independent draws."""
    if draws % chains or draws < 2 * chains:
        raise fail(
            "draws",
            f"{draws} draws in {chains} chains",
            "a multiple of chains with at least 2 draws per chain",
        )
    return int(draws), int(chains), int(seed)


class RefitFailed(RuntimeError):
    """A refit finished but cannot be used (too many divergent transitions, say).

    Examples
    --------
    >>> from bayesij import refit
    >>> try:
    ...     raise refit.RefitFailed("12 % divergent transitions")
    ... except refit.RefitFailed as error:  # a campaign records it as the refit's failure
    ...     print(error)
    12 % divergent transitions
    """


def refit_seed(seed: int, weights: np.ndarray) -> int:
    """A 31-bit seed from the backend's seed and the weight vector (stable across runs)."""
    digest = hashlib.sha256(np.ascontiguousarray(weights, dtype=float).tobytes())
    digest.update(str(int(seed)).encode())
    return int.from_bytes(digest.digest()[:4], "little") % (2**31 - 1)


def content_digest(*parts) -> str:
    """A short hash of arrays, numbers, strings and dicts/lists of them (for reprs that tell
    two backends apart: a campaign store refuses records of a different backend)."""
    digest = hashlib.sha256()
    for part in parts:
        text = json.dumps(part, sort_keys=True, default=lambda a: np.asarray(a).tolist())
        digest.update(text.encode())
    return digest.hexdigest()[:12]


class Backend:
    """Interface of a refit backend: ``n_obs`` and ``fit(weights) -> Posterior``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> class Exact(refit.Backend):  # any model refitted under observation weights
    ...     n_obs = 30
    ...     def fit(self, weights):
    ...         return backend.fit(self.checked_weights(weights))
    >>> Exact().fit(np.r_[np.zeros(5), np.ones(25)]).n_obs  # the log-likelihood of all 30
    30
    """

    n_obs: int | None = None

    def fit(self, weights: np.ndarray) -> Posterior:  # pragma: no cover - interface
        raise NotImplementedError

    def checked_weights(self, weights) -> np.ndarray:
        """``weights`` as a float vector of non-negative finite values of the right length."""
        values = np.asarray(weights, dtype=float)
        if values.ndim != 1 or (self.n_obs is not None and values.size != self.n_obs):
            raise fail(
                "weights", f"shape {values.shape}", f"a vector of {self.n_obs} observation weights"
            )
        if not np.all(np.isfinite(values) & (values >= 0)):
            raise fail("weights", "negative or non-finite values", "finite weights >= 0")
        return values


class ConjugateNormalBackend(Backend):
    """Exact posteriors of a normal linear model with known noise sd (for ground truth).

    Each fit draws ``draws`` independent samples (split into ``chains`` chains) from the
    closed-form posterior under the weights; ``log_lik`` is the unweighted pointwise
    log-likelihood and the quantities are ``beta[1]``, ..., ``beta[p]``.

    Parameters
    ----------
    X : array_like of shape (n_obs, n_coef)
    y : array_like of shape (n_obs,)
    sigma : float
        Known noise standard deviation.
    prior_mean, prior_cov : array_like, optional
        Gaussian prior of ``beta``; default mean 0, covariance ``100 I``.
    draws : int, default 4000
    chains : int, default 4
    seed : int, default 0

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> post.quantity_names, post.n_draws
    (['beta[1]', 'beta[2]'], 1000)
    >>> backend.exact_means(np.ones(30)).round(2)  # no Monte Carlo error
    array([1.23, 0.12])
    """

    def __init__(
        self,
        X,
        y,
        sigma=1.0,
        prior_mean=None,
        prior_cov=None,
        *,
        draws: int = 4000,
        chains: int = 4,
        seed: int = 0,
    ):
        self.model = ConjugateNormal(X, y, sigma, prior_mean, prior_cov)
        self.draws, self.chains, self.seed = _draw_layout(draws, chains, seed)
        self.n_obs = self.model.n_obs

    def fit(self, weights) -> Posterior:
        from bayesij.data.arrays import from_arrays

        w = self.checked_weights(weights)
        rng = np.random.default_rng(refit_seed(self.seed, w))
        beta = self.model.draws(self.draws, rng, w)
        shape = (self.chains, self.draws // self.chains)
        log_lik = self.model.log_lik(beta).reshape(*shape, self.n_obs)
        names = [f"beta[{j + 1}]" for j in range(beta.shape[1])]
        return from_arrays(beta.reshape(*shape, -1), log_lik, quantity_names=names)

    def exact_means(self, weights) -> np.ndarray:
        """The exact posterior mean of ``beta`` under ``weights`` (no Monte Carlo error)."""
        return self.model.posterior(self.checked_weights(weights))[0]

    def __repr__(self) -> str:
        m = self.model
        model = content_digest(m.X, m.y, m.sigma, m.prior_mean, m.prior_cov)
        return (
            f"ConjugateNormalBackend(n_obs={self.n_obs}, model={model}, draws={self.draws}, "
            f"chains={self.chains}, seed={self.seed})"
        )


class FlatPriorRegressionBackend(Backend):
    """Exact posteriors of a normal linear regression with unknown noise sd and a flat prior
    (:class:`bayesij.refit.conjugate.FlatPriorRegression`): the Bayesian twin of an OLS
    analysis, for ground truth on heavy-tailed data.

    Each fit draws ``draws`` independent samples (in ``chains`` chains) from the closed-form
    posterior under the weights: quantities ``beta[1]``, ..., ``beta[p]`` and ``sigma``,
    the unweighted pointwise log-likelihood, and (``score``) the gradient of the log
    posterior in ``(beta, log sigma)`` at each draw.

    Parameters
    ----------
    X : array_like of shape (n_obs, n_coef)
    y : array_like of shape (n_obs,)
    draws : int, default 4000
    chains : int, default 4
    seed : int, default 0

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> flat = refit.FlatPriorRegressionBackend(X, y, draws=1000)  # sigma unknown
    >>> flat.fit(np.ones(30)).quantity_names
    ['beta[1]', 'beta[2]', 'sigma']
    """

    def __init__(self, X, y, *, draws: int = 4000, chains: int = 4, seed: int = 0):
        self.model = FlatPriorRegression(X, y)
        self.draws, self.chains, self.seed = _draw_layout(draws, chains, seed)
        self.n_obs = self.model.n_obs

    def fit(self, weights) -> Posterior:
        return self.fit_with_gradient(weights)[0]

    def fit_with_gradient(self, weights) -> tuple[Posterior, np.ndarray, np.ndarray]:
        """The posterior under ``weights``, the log posterior's gradient at its draws and
        those draws on the unconstrained scale, each (n_chains, n_draws, n_coef + 1) in the
        order ``beta[1..p], log sigma``: what :func:`bayesij.amip` and
        :func:`bayesij.influence` take as ``grad_log_posterior`` and ``unconstrained``."""
        from bayesij.data.arrays import from_arrays

        w = self.checked_weights(weights)
        rng = np.random.default_rng(refit_seed(self.seed, w))
        beta, sigma = self.model.draws(self.draws, rng, w)
        shape = (self.chains, self.draws // self.chains)
        log_lik = self.model.log_lik(beta, sigma).reshape(*shape, self.n_obs)
        names = [f"beta[{j + 1}]" for j in range(beta.shape[1])] + ["sigma"]
        quantities = np.column_stack([beta, sigma]).reshape(*shape, -1)
        gradient = self.model.grad_log_posterior(beta, sigma, w).reshape(*shape, -1)
        unconstrained = np.column_stack([beta, np.log(sigma)]).reshape(*shape, -1)
        post = from_arrays(quantities, log_lik, quantity_names=names)
        return post, gradient, unconstrained

    def __repr__(self) -> str:
        model = content_digest(self.model.X, self.model.y)
        return (
            f"FlatPriorRegressionBackend(n_obs={self.n_obs}, model={model}, "
            f"draws={self.draws}, chains={self.chains}, seed={self.seed})"
        )


class CallableBackend(Backend):
    """Any refit: ``fn(weights)`` returns a Posterior (or an ArviZ InferenceData).

    ``fn`` may be a module-level function, a lambda or a closure: worker processes and
    Dask receive it through cloudpickle.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> wrapped = refit.CallableBackend(lambda w: backend.fit(w), n_obs=30)
    >>> wrapped.fit(np.ones(30)).quantity_names
    ['beta[1]', 'beta[2]']
    """

    def __init__(self, fn: Callable, n_obs: int | None = None):
        if not callable(fn):
            raise fail("fn", f"a {type(fn).__name__}", "a callable fn(weights) -> Posterior")
        self.fn, self.n_obs = fn, n_obs

    def fit(self, weights) -> Posterior:
        return returned_posterior(self.fn(self.checked_weights(weights)), "fn")

    def __repr__(self) -> str:
        return f"CallableBackend({_callable_name(self.fn)}, digest={_callable_digest(self.fn)})"


class OnceEach:
    """A backend that refits each set of weights once: a later call with the same weights
    returns the first refit (and its gradient), so that the questions of an audit that drop
    the same set share one refit. ``fit_with_gradient`` exists exactly when the wrapped
    backend has it; every other attribute is the wrapped backend's. ``on_refit(number,
    n_dropped)``, if given, is called before each new refit (the audit's progress lines).

    Attributes
    ----------
    n_refits : int
        The distinct refits made.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> once = refit.OnceEach(refit.ConjugateNormalBackend(X, X @ [1.0, 0.5], draws=100))
    >>> w = np.r_[np.zeros(3), np.ones(27)]
    >>> once.fit(w) is once.fit(w.copy()), once.n_refits
    (True, 1)
    """

    def __init__(self, backend, on_refit=None):
        self.backend, self._fits, self.on_refit = backend, {}, on_refit
        if hasattr(backend, "fit_with_gradient"):
            self.fit_with_gradient = self._fit_with_gradient

    @property
    def n_refits(self) -> int:
        return len(self._fits)

    def fit(self, weights):
        if hasattr(self.backend, "fit_with_gradient"):
            return self._fit_with_gradient(weights)[0]
        return self._once(weights, self.backend.fit)

    def _fit_with_gradient(self, weights):
        return self._once(weights, self.backend.fit_with_gradient)

    def _once(self, weights, refit):
        values = np.ascontiguousarray(weights, dtype=float)
        key = (values.shape, values.tobytes())
        if key not in self._fits:
            if self.on_refit is not None:  # before the refit: a long one shows it started
                self.on_refit(len(self._fits) + 1, int(np.count_nonzero(values == 0)))
            self._fits[key] = refit(values)
        return self._fits[key]

    def __getattr__(self, name: str):
        if name == "backend":  # not yet set (unpickling)
            raise AttributeError(name)
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        return f"OnceEach({self.backend!r})"


def check_backend(backend, n_obs: int, whose: str) -> None:
    """A refit backend (``fit(weights)``) whose model has ``n_obs`` observations (where it
    says how many), else ``backend`` is refused by name; ``whose``: the observations it
    must refit, for the message (``"post"``, ``"the fit searched"``)."""
    if not callable(getattr(backend, "fit", None)):
        raise fail(
            "backend",
            f"a {type(backend).__name__}",
            "a refit backend with fit(weights) (bayesij.refit.*Backend)",
        )
    size = getattr(backend, "n_obs", None)
    if size is not None and size != n_obs:
        raise fail(
            "backend", f"a model of {size} observations", f"the {n_obs} observations of {whose}"
        )


def returned_posterior(result, argument: str) -> Posterior:
    """The checked container of what a user's refit callable (``argument``) returned."""
    if not is_fit(result):
        raise fail(
            argument,
            f"a callable that returned a {type(result).__name__}",
            "a callable returning a bayesij.Posterior or an InferenceData / DataTree",
        )
    return read(result, argument=argument).posterior()


def _callable_digest(fn) -> str:
    """A digest of what ``fn`` computes: its code (nested code included), defaults, the
    values its closure holds and a partial's arguments (arrays by their bytes), so that a
    campaign store refuses records of another function or other data under the same name."""
    digest = hashlib.sha256()
    _feed(digest, fn, depth=0)
    return digest.hexdigest()[:12]


def _feed(digest, value, depth: int) -> None:
    if depth > 6:
        digest.update(type(value).__name__.encode())
    elif isinstance(value, functools.partial):
        _feed(digest, value.func, depth + 1)
        for item in (*value.args, *sorted(value.keywords.items())):
            _feed(digest, item, depth + 1)
    elif inspect.ismethod(value):  # a bound method: its function and its object's data
        _feed(digest, value.__func__, depth + 1)
        for item in _held_arrays(value.__self__):
            _feed(digest, item, depth + 1)
    elif hasattr(value, "__code__"):
        _feed_code(digest, value.__code__, depth)
        for item in value.__defaults__ or ():
            _feed(digest, item, depth + 1)
        # Data it holds (closure) or reads from its module (a notebook's X): arrays, floats
        # and strings, not dicts, lists or integers, which a refit may use as its own
        # mutable state (a counter) and which would make every run a new backend.
        cells = [c.cell_contents for c in value.__closure__ or () if _has_contents(c)]
        names = getattr(value, "__globals__", {})
        read = [names[n] for n in value.__code__.co_names if n in names]
        for item in (*cells, *read):
            if isinstance(item, _DATA) and not isinstance(item, bool):
                _feed(digest, item, depth + 1)
            elif callable(getattr(item, "to_numpy", None)) and not isinstance(item, type):
                # a pandas table of data (not the class of one)
                _feed(digest, np.asarray(item.to_numpy()), depth + 1)
            elif callable(item) and hasattr(item, "__code__") and depth < 2:
                _feed(digest, item, depth + 1)  # a function it calls
            else:  # arrays held in a dict or an object (data, not counters)
                for array in _held_arrays(item):
                    _feed(digest, array, depth + 1)
    elif isinstance(value, np.ndarray):
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (tuple, list)):
        for item in value:
            _feed(digest, item, depth + 1)
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            _feed(digest, (key, value[key]), depth + 1)
    else:
        digest.update(_pickled_or_repr(value))


_DATA = (np.ndarray, float, str, tuple)


def _feed_code(digest, code, depth: int) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _feed_code(digest, const, depth + 1)
        else:
            digest.update(repr(const).encode())


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def _held_arrays(holder) -> list:
    """The arrays and tables of data a dict, or an object's attributes, hold (one level
    down, in a stable order): what a refit function may read its data from."""
    if isinstance(holder, dict):
        items = holder.items()
    elif inspect.ismodule(holder):  # a library it uses (numpy, pandas): code, not data
        return []
    elif hasattr(holder, "__dict__") and not isinstance(holder, type) and not callable(holder):
        items = vars(holder).items()
    else:
        return []
    found = []
    for key, value in sorted(items, key=lambda item: repr(item[0])):
        if isinstance(value, np.ndarray):
            found.append((repr(key), value))
        elif callable(getattr(value, "to_numpy", None)) and not isinstance(value, type):
            found.append((repr(key), np.asarray(value.to_numpy())))
    return found


def _pickled_or_repr(value) -> bytes:
    """The pickle of ``value`` (equal values, equal bytes for plain data), else its type and
    a repr without memory addresses."""
    import pickle

    try:
        return pickle.dumps(value, protocol=4)
    except Exception:
        return re.sub(r" at 0x[0-9a-fA-F]+", "", f"{type(value).__qualname__}:{value!r}").encode()


def _callable_name(fn) -> str:
    """``module.qualname`` of a function (and a partial's arguments), without the memory
    address a plain repr has: the same function has the same name in every process."""
    if isinstance(fn, functools.partial):
        arguments = [_callable_name(fn.func), *map(repr, fn.args)]
        arguments += [f"{key}={value!r}" for key, value in fn.keywords.items()]
        return f"partial({', '.join(arguments)})"
    name = getattr(fn, "__qualname__", None)
    if name is None:
        return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(fn))
    return f"{getattr(fn, '__module__', '?')}.{name}"


class _StanBackend(Backend):
    """What the PyStan and CmdStanPy backends share: data, names, divergence check."""

    def __init__(
        self,
        model: str,
        data: dict,
        weights: str = "weights",
        log_lik: str = "log_lik",
        quantities=None,
        *,
        seed: int = 0,
        max_divergent: float = 0.01,
        **sample_kwargs,
    ):
        if not isinstance(data, dict):
            raise fail("data", f"a {type(data).__name__}", "a dict of Stan data")
        self.code = model_code(model)
        self.data = {key: value for key, value in data.items() if key != weights}
        self.weights_name, self.log_lik, self.quantities = weights, log_lik, quantities
        self.seed, self.max_divergent = int(seed), float(max_divergent)
        self.sample_kwargs = sample_kwargs
        self.n_obs = len(data[weights]) if weights in data else None

    def __repr__(self) -> str:
        digest = content_digest(
            self.code, self.data, self.weights_name, self.log_lik, self.quantities
        )
        return (
            f"{type(self).__name__}(n_obs={self.n_obs}, model_and_data={digest}, "
            f"seed={self.seed}, max_divergent={self.max_divergent:g}, "
            f"sample_kwargs={_short_values(self.sample_kwargs)})"
        )

    def _check_divergences(self, n_divergent: int, n_draws: int) -> None:
        if n_divergent > self.max_divergent * n_draws:
            raise RefitFailed(
                f"{n_divergent} divergent transitions in {n_draws} draws "
                f"(more than max_divergent = {self.max_divergent:g} of them)"
            )

    def _data(self, weights) -> dict:
        return {**self.data, self.weights_name: self.checked_weights(weights)}

    def prior_shift(self, weights, post, n_points: int = 8) -> float | None:
        """How far a refit's model strays from the fit's outside the likelihood: the
        change of the program's log density less its weighted log-likelihood
        (:meth:`PyStanDensity.prior_terms`) between the data with ``weights`` and with all
        weights 1, at ``n_points`` of the refit's draws, as its range over them (a change
        that is the same at every parameter value, such as the likelihood's constants a
        weighted program drops, changes no model); or, if larger, the largest change of an
        observation's ``log_lik`` at the same draws (predictors centred on the kept rows
        move the likelihood, not the prior). 0 (to rounding) unless the program's
        priors or transformed data read the weights (a prior centred on the kept data's
        mean, predictors centred on the kept rows: the refit is then of another model, as
        brms#1931 found for K-fold). None when the refit's draws lack some parameter (a
        backend keeping only some ``quantities``)."""
        if self.n_obs is None:
            return None
        full = PyStanDensity(self.code, self._data(np.ones(self.n_obs)), self.weights_name)
        changed = PyStanDensity(self.code, self._data(weights), self.weights_name)
        draws = read(post, argument="post").posterior()
        points = np.linspace(0, draws.n_draws - 1, min(n_points, draws.n_draws)).astype(int)
        try:
            upars = full.unconstrain(draws, rows=points)  # only the draws compared
        except ValueError:
            return None
        prior_changed, terms_changed = changed.prior_terms(upars, self.log_lik)
        prior_full, terms_full = full.prior_terms(upars, self.log_lik)
        gap = prior_changed - prior_full
        moved = float(np.max(np.abs(terms_changed - terms_full)))  # a likelihood recentred
        return max(float(np.max(gap) - np.min(gap)), moved)

    def group_log_lik(self, data, variable: str, n_nodes: int = 16):
        """Each group's log-likelihood with its element of ``variable`` integrated out:
        :meth:`PyStanDensity.group_log_lik` of this backend's program and data (what
        :func:`bayesij.audit` reads, given this backend, for a hierarchy's units; PyStan
        evaluates the program, also for :class:`CmdStanPyBackend`)."""
        if self.n_obs is None:
            raise fail("backend", "Stan data without its weights", "the weights in the data")
        density = PyStanDensity(self.code, self._data(np.ones(self.n_obs)), self.weights_name)
        return density.group_log_lik(data, variable, n_nodes, self.log_lik)


def _short_values(options: dict) -> dict:
    """``options`` with each long value (starting points of every parameter, an inverse
    metric) as its digest: a backend's repr, which a campaign's plan records, stays a line
    and still tells two backends apart."""
    return {
        key: value if len(repr(value)) <= 80 else f"<digest {content_digest(value)}>"
        for key, value in options.items()
    }


class PyStanBackend(_StanBackend):
    """Refits with PyStan 3 (installs from PyPI; compiles with the system compiler).

    Parameters
    ----------
    model : str
        Stan code, a path to a ``.stan`` file, or the name of a shipped model
        (``bayesij.stan_models.available()``). The program must take the weights as data
        and multiply each observation's log-likelihood by them.
    data : dict
        The Stan data; its ``weights`` entry (if any) is replaced at each refit.
    weights : str, default "weights"
        Name of the weight vector in the data block.
    log_lik : str, default "log_lik"
        Generated quantity with the pointwise log-likelihood.
    quantities : str or list of str, optional
        Quantities to keep (default: all but ``log_lik``).
    seed : int, default 0
    max_divergent : float, default 0.01
        A refit with more divergent transitions than this fraction of its draws fails.
    **sample_kwargs
        Passed to ``model.sample`` (``num_chains``, ``num_samples``, ``num_warmup``, ...);
        ``progress=True`` shows PyStan's build and sampling progress on stderr (silent by
        default: a campaign of hundreds of refits would print thousands of lines).

    Notes
    -----
    PyStan compiles a program once and caches the build on disk; later refits only load it.
    The cache key includes the Python executable, so each new virtual environment compiles
    once more. httpstan would also keep every seeded fit there, forever (one file per chain
    and refit: 17 MB each for a 3020-observation logistic regression); bayesij removes the
    fits its samplings leave, since a campaign's store keeps what it needs.
    Refits run one after another in the calling process (``process_pool_safe = False``):
    PyStan already runs the chains of each refit in parallel processes, and its sampler
    hangs when started from a process-pool worker. To spread refits over machines use
    :class:`CmdStanPyBackend` on Dask.

    Examples
    --------
    Compiling a Stan program takes a minute (not run by the doctests;
    ``tests/refit/test_stan.py`` runs it):

    >>> from bayesij import refit
    >>> data = {"N": 30, "K": 1, "X": x[:, None], "y": y, "weights": w}  # doctest: +SKIP
    >>> backend = refit.PyStanBackend(  # doctest: +SKIP
    ...     "linear_regression", data, quantities=["beta"]
    ... )
    >>> refit.verify(bayesij.amip(post, "beta[1]", "sign"), backend)  # doctest: +SKIP
    """

    process_pool_safe = False

    def fit(self, weights) -> Posterior:
        from bayesij.adapters.pystan import from_pystan
        from bayesij.refit.stan import sample_pystan

        data = self._data(weights)
        fit = sample_pystan(
            self.code, data, refit_seed(self.seed, data[self.weights_name]), **self.sample_kwargs
        )
        divergent = np.asarray(fit["divergent__"])
        self._check_divergences(int(divergent.sum()), divergent.size)
        return from_pystan(fit, log_lik=self.log_lik, quantities=self.quantities)


class CmdStanPyBackend(_StanBackend):
    """Refits with CmdStanPy (needs CmdStan installed); same arguments as PyStanBackend.

    ``sample_kwargs`` go to ``CmdStanModel.sample`` (``chains``, ``iter_sampling``, ...).
    The program is compiled once per process.

    Examples
    --------
    CmdStan must be installed to sample (not run by the doctests):

    >>> from bayesij import refit
    >>> backend = refit.CmdStanPyBackend("linear_regression", data)  # doctest: +SKIP
    >>> report = refit.loo(post, backend, points="auto")  # doctest: +SKIP
    """

    def fit(self, weights) -> Posterior:
        from bayesij.adapters.cmdstan import from_cmdstanpy
        from bayesij.refit.stan import sample_cmdstanpy

        data = self._data(weights)
        fit = sample_cmdstanpy(
            self.code, data, refit_seed(self.seed, data[self.weights_name]), **self.sample_kwargs
        )
        n_divergent = int(np.sum(fit.divergences)) if fit.divergences is not None else 0
        self._check_divergences(n_divergent, fit.draws().shape[0] * fit.chains)
        return from_cmdstanpy(fit, log_lik=self.log_lik, quantities=self.quantities)
