"""Compile and sample Stan programs for refits: PyStan (works on a fresh machine) and
CmdStanPy (where CmdStan is installed). The adapters turn the fits into containers."""

from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import sys
import sysconfig

import numpy as np

from bayesij.array.checks import check_positive_int, fail
from bayesij.data.arrays import element_names
from bayesij.data.fit import read

__all__ = [
    "UnloadableStanModel",
    "build_model",
    "default_build_flags",
    "model_code",
    "sample_pystan",
    "sample_cmdstanpy",
    "stan_inits",
    "outside_event_loop",
    "private_folder",
    "write_private",
]


#: Added to the compiler flags of a PyStan build (where the user set none): the Python's own
#: flags ask for debug information (``-g``), which no user of a compiled Stan model reads;
#: without it a build takes about a quarter less time (32 s instead of 44 s for the shipped
#: logistic regression on the 2-core machine; a one-parameter program with httpstan 4.17 and
#: setuptools 84, 24 s instead of 33 s) and its library a third less disk.
BUILD_CFLAGS = "-g0"


def build_model(code: str, data: dict, random_seed: int | None = None):
    """``stan.build(code, data, random_seed)``, compiled once however many processes ask.

    The first build of a program takes half a minute to a minute; processes that ask for
    the same program at once (a campaign's workers, a test suite's) wait on a lock file
    beside httpstan's cache of that program instead of compiling it side by side into the
    same folder, and then load the one build. The build leaves out debug information
    (:data:`BUILD_CFLAGS`), in ``CFLAGS`` and ``CXXFLAGS`` where each is unset.
    """
    import stan
    from filelock import FileLock
    from httpstan.cache import model_directory
    from httpstan.models import calculate_model_name

    name = calculate_model_name(code)
    folder = model_directory(name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"), _build_flags(), _stderr_with_a_file():
        try:
            return stan.build(code, data=data, random_seed=random_seed)
        except ValueError as error:  # httpstan's plain-text 500, which PyStan reads as JSON
            unloadable = _unloadable(name)
            if unloadable is None:
                raise
            raise unloadable from error


class UnloadableStanModel(ImportError):
    """PyStan compiled the Stan program, but this Python cannot import the model
    extension httpstan built (httpstan 4.17.0 on Python 3.13: ``undefined symbol:
    _PyThreadState_UncheckedGet``, a function Python 3.13 no longer exports)."""


def _unloadable(model_name: str) -> UnloadableStanModel | None:
    """Why httpstan's build of ``model_name`` cannot be imported here, as the error
    :func:`build_model` raises; None where it can (the build failed for another reason,
    which PyStan's own error then tells). PyStan itself reports the failed import as
    ``JSONDecodeError: unexpected content after document``."""
    import httpstan
    from httpstan.models import import_services_extension_module

    try:
        import_services_extension_module(model_name)
    except KeyError:  # nothing was built: not this failure
        return None
    except ImportError as error:
        return UnloadableStanModel(
            "PyStan: found a Stan program that compiled but that this Python "
            f"({platform.python_version()}) "
            f"cannot load ({error}; httpstan {httpstan.__version__}); expected a Python whose "
            "extensions httpstan builds (3.11 or 3.12). On this Python, refit with CmdStanPy "
            "(bayesij.refit.CmdStanPyBackend) or PyMC (bayesij.refit.PyMCBackend)."
        )
    return None


@contextlib.contextmanager
def _stderr_with_a_file():
    """``sys.stderr`` a real file while PyStan builds: httpstan catches the compiler's
    messages in a temporary file only where stderr has a file descriptor, and leaves that
    file open otherwise (a ``ResourceWarning`` later, under a ``redirect_stderr`` to a
    ``StringIO``). Output that was being discarded goes to ``os.devnull``."""
    try:
        sys.stderr.fileno()
        has_file = True
    except (AttributeError, OSError, ValueError):
        has_file = False
    if has_file:
        yield
        return
    with open(os.devnull, "w", encoding="utf-8") as null:
        saved, sys.stderr = sys.stderr, null
        try:
            yield
        finally:
            sys.stderr = saved


def default_build_flags(environ=None) -> dict[str, str]:
    """The compiler flags a PyStan build gets from bayesij where ``environ`` (default
    ``os.environ``) sets none: :data:`BUILD_CFLAGS` as ``CFLAGS`` (setuptools before 72
    adds it to the Python's flags, and compiles C++ with them) and ``CXXFLAGS`` (later
    setuptools compile C++ with ``CXXFLAGS`` in place of the Python's flags, so it holds
    those too). Only the names ``environ`` lacks."""
    environ = os.environ if environ is None else environ
    flags = {
        "CFLAGS": BUILD_CFLAGS,
        "CXXFLAGS": f"{sysconfig.get_config_var('CFLAGS') or ''} {BUILD_CFLAGS}".strip(),
    }
    return {name: value for name, value in flags.items() if name not in environ}


@contextlib.contextmanager
def _build_flags():
    """:func:`default_build_flags` in ``os.environ`` while a build runs."""
    added = default_build_flags()
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _build_and_sample(code: str, data: dict, seed: int, sample_kwargs: dict, progress: bool):
    # PyStan writes "Building..." to stdout and its progress and sampler messages to stderr:
    # both go to stderr when progress is asked for, nowhere otherwise, so that a refit
    # campaign or a report on stdout is not flooded.
    sink = sys.stderr if progress else io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        model = build_model(code, data, seed)
        with _fits_not_kept(model, sample_kwargs):
            return model.sample(**sample_kwargs)


@contextlib.contextmanager
def _fits_not_kept(model, sample_kwargs: dict):
    """Remove the fits this sampling leaves in httpstan's cache. httpstan keeps every seeded
    fit on disk, forever, to return it again for the same program, data, seed and settings
    (PyStan deletes only unseeded ones); a refit campaign would leave one file per chain and
    refit there (17 MB each for a 3020-observation logistic regression), while its own
    store keeps what it needs. Only this sampling's fits go (:func:`_fit_names`): a fit that
    was cached before, and one that another sampling of the program (PyStan called
    directly, in another process) writes meanwhile, are left there; samplings of one
    program by bayesij take turns (a lock file beside the program's cache), so two of them
    never ask for the same fit at once."""
    from filelock import FileLock
    from httpstan.cache import model_directory

    names = _fit_names(model, sample_kwargs)
    folder = model_directory(model.model_name)
    with FileLock(str(folder) + ".sampling.lock"):
        before = {name for name in names if _fit_file(name).exists()}
        try:
            yield
        finally:
            for name in set(names) - before:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(_fit_file(name))


def _fit_names(model, sample_kwargs: dict) -> list[str]:
    """The names httpstan gives the fits of ``model.sample(**sample_kwargs)``, one per
    chain: PyStan's request for each chain (``stan.model.Model._create_fit``) read by
    httpstan's schema and hashed by httpstan (``httpstan.fits.calculate_fit_name``), as its
    server does. A seeded fit's name is a function of the request."""
    import json

    try:  # where a later PyStan or httpstan moves these, no fit is removed: none mistaken
        from httpstan.fits import calculate_fit_name
        from httpstan.schemas import CreateFitRequest
        from marshmallow import ValidationError
        from stan.model import DataJSONEncoder
    except ImportError:
        return []
    if model.random_seed is None:  # PyStan deletes an unseeded fit itself
        return []
    kwargs = json.loads(DataJSONEncoder().encode(sample_kwargs))
    n_chains = kwargs.pop("num_chains", 4)
    inits = kwargs.pop("init", [{} for _ in range(n_chains)])
    names = []
    for chain in range(1, n_chains + 1):
        request = {
            **kwargs,
            "function": "stan::services::sample::hmc_nuts_diag_e_adapt",
            "chain": chain,
            "data": model.data,
            "init": inits[chain - 1],
            "random_seed": model.random_seed,
        }
        try:
            arguments = CreateFitRequest().load(json.loads(json.dumps(request)))
        except ValidationError:  # a request httpstan refuses: PyStan says why, nothing cached
            return []
        names.append(calculate_fit_name(arguments.pop("function"), model.model_name, arguments))
    return names


def _fit_file(name: str):
    from httpstan.cache import fit_path

    return fit_path(name)


def sample_pystan(code: str, data: dict, seed: int, *, progress: bool = False, **sample_kwargs):
    """Build (cached by PyStan after the first compile) and sample a Stan program.

    PyStan runs its own event loop; inside a running one (a Jupyter notebook) the work
    goes to a thread of its own, so no ``nest_asyncio`` is needed. ``progress=True`` shows
    PyStan's build and sampling progress on stderr; by default it is silent.

    PyStan (httpstan) keys its build cache by the Stan program, the httpstan version, the
    platform, the Python version and the Python executable: every new virtual environment
    compiles each program once (about a minute), then reuses the build.
    """
    return outside_event_loop(_build_and_sample, code, data, seed, sample_kwargs, progress)


def outside_event_loop(function, *args):
    """``function(*args)``, in bayesij's Stan thread when this thread runs an event loop.

    PyStan (httpstan) calls ``asyncio.run`` for every build, sample, ``log_prob`` and
    ``unconstrain_pars``; inside a running loop (a Jupyter notebook) that raises, so the
    call moves to a thread without one and no ``nest_asyncio`` is needed. It is always
    the same thread: a compiled model's autodiff stack is thread-local and exists only
    in the thread that loaded the model, so a ``log_prob`` from another thread would
    crash the process.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args)
    return _stan_thread().submit(function, *args).result()


_THREAD: list = []


def _stan_thread():
    """The one worker thread that runs PyStan calls made from inside an event loop."""
    from concurrent.futures import ThreadPoolExecutor

    if not _THREAD:
        _THREAD.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="bayesij-stan"))
    return _THREAD[0]


_COMPILED: dict = {}


def private_folder(name: str = "cmdstan") -> str:
    """A per-user cache folder, ``$XDG_CACHE_HOME/bayesij/<name>`` (default ``~/.cache``),
    created with mode 0700 and checked: a real directory (not a symlink), owned by this
    user, closed to others. Stan programs and their executables live there, where no other
    user of the machine can overwrite a file or plant an executable.
    """
    import os

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "bayesij", name)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    _check_private(folder)
    return folder


def _check_private(folder: str) -> None:
    import os
    import stat

    info = os.lstat(folder)
    problem = None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        problem = "a symbolic link or not a directory"
    elif hasattr(os, "getuid") and info.st_uid != os.getuid():
        problem = f"a folder owned by another user (uid {info.st_uid})"
    elif hasattr(os, "getuid") and info.st_mode & 0o077:
        problem = f"a folder others can use (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise PermissionError(
            f"cache folder: found {folder!r} to be {problem}; expected a private folder of "
            "this user (mode 0700) for Stan programs and executables. Remove it, or set "
            "XDG_CACHE_HOME to a private folder."
        )


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (mode 0600) without following a symbolic link there;
    an unchanged file is left alone, so CmdStanPy reuses the executable built from it."""
    import os

    try:
        with open(path, encoding="utf-8") as handle:
            if not os.path.islink(path) and handle.read() == text:
                return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o600)
    except OSError as error:
        raise PermissionError(
            f"cache folder: could not write {path!r} ({error.strerror}); expected a plain "
            "file of this user (symbolic links are not followed)."
        ) from error
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def sample_cmdstanpy(code: str, data: dict, seed: int, **sample_kwargs):
    """Compile (once per process; the executable is kept in :func:`private_folder`) and
    sample a Stan program with CmdStanPy."""
    import hashlib
    import os

    import cmdstanpy

    key = hashlib.sha256(code.encode()).hexdigest()[:16]
    if key not in _COMPILED:
        path = os.path.join(private_folder(), f"model_{key}.stan")
        write_private(path, code)
        _COMPILED[key] = cmdstanpy.CmdStanModel(stan_file=path)
    return _COMPILED[key].sample(data=data, seed=seed, show_progress=False, **sample_kwargs)


#: A Stan name as PyStan and CmdStanPy fits give it: ``alpha``, ``beta[2]``, ``Omega[1,2]``.
_STAN_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)(?:\[([1-9][0-9]*(?:,[1-9][0-9]*)*)\])?$")


def stan_inits(post, n_chains: int | None = None) -> list[dict]:
    """Starting points for warm-started refits: the last draws of a Stan fit's chains, as
    the ``init`` of PyStan's ``sample`` or CmdStanPy's (one dict per chain).

    Pass them with a short warm-up to a Stan backend,
    ``refit.PyStanBackend(model, data, init=refit.stan_inits(post), num_warmup=200)``: each
    refit's chains start in the full-data posterior instead of Stan's random ``(-2, 2)``
    on the unconstrained scale. Stan still adapts its step size and metric in the warm-up.
    Quantities that are not parameters of the program (transformed parameters, generated
    quantities) are ignored by Stan; parameters the fit does not hold start at random.

    Parameters
    ----------
    post : Fit, Posterior, InferenceData or DataTree
        A fit of the program to the full data, its quantities named as Stan names them
        (``alpha``, ``beta[1]``, ``Omega[1,2]``: 1-based, every element of a container).
    n_chains : int, optional
        Chains of the refits; default: the fit's. Chain ``c`` starts at the last draw of
        the fit's chain ``c`` (more chains than the fit's take earlier draws of its chains
        in turn: every chain starts at a draw of its own).

    Returns
    -------
    list of dict
        ``{name: float or nested list}`` per chain.

    Notes
    -----
    Measured (``benchmarks/warm_refits.py``, 4 chains x 1000 draws): on eight schools and
    a wells-like logistic regression (N = 400), refits started here with 100 or 200 warm-up
    iterations agree with cold refits (1000 warm-up iterations): posterior means within
    0.09 posterior sd of them (two cold refits: within 0.06), sds within 5 %. They take
    0-25 % less time (eight schools 0.66-0.70 s against 0.77-1.06 s, the logistic
    regression 6.7-8.0 s against 7.6-8.3 s): most of a PyStan refit's time is returning
    its draws (the pointwise log-likelihood of each), not the warm-up; fewer draws
    (``num_samples``) save more.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(2, 50, 3))
    >>> post = bayesij.from_arrays(
    ...     draws, np.zeros((2, 50, 4)), quantity_names=["mu", "beta[1]", "beta[2]"]
    ... )
    >>> inits = refit.stan_inits(post)
    >>> len(inits), sorted(inits[0]), len(inits[0]["beta"])
    (2, ['beta', 'mu'], 2)
    >>> bool(inits[1]["mu"] == draws[1, -1, 0])  # chain 2 starts at its last draw
    True
    """
    draws, names = read(post, argument="post").posterior_draws()
    chains = draws.shape[0] if n_chains is None else check_positive_int(n_chains, "n_chains")
    starts = []
    for chain in range(chains):
        behind = chain // draws.shape[0]  # later rounds of the fit's chains: earlier draws
        if behind >= draws.shape[1]:
            raise fail(
                "n_chains",
                f"{chains} for a fit of {draws.shape[0]} chain(s) x {draws.shape[1]} draws",
                "at most as many chains as the fit has draws",
            )
        starts.append(draws[chain % draws.shape[0], -1 - behind])
    parameters = _stan_parameters(names)
    return [
        {name: _element_values(point, slots) for name, slots in parameters.items()}
        for point in starts
    ]


def _stan_parameters(names: list) -> dict:
    """Each Stan name's shape (``()`` for a scalar) and the columns of its elements in
    row-major order (:func:`~bayesij.data.arrays.element_names`, as Stan orders them)."""
    columns, shapes = {}, {}
    for column, label in enumerate(names):
        match = _STAN_NAME.match(str(label))
        if match is None:
            raise fail(
                "post",
                f"the quantity {label!r}",
                "Stan's names (alpha, beta[1], Omega[1,2]: 1-based indices), as PyStan "
                "and CmdStanPy fits name them",
                "select the program's parameters with post.select([...]) first.",
            )
        name, index = match.groups()
        where = () if index is None else tuple(int(i) for i in index.split(","))
        seen = shapes.setdefault(name, where)
        if len(seen) != len(where):
            ranks = sorted((len(seen), len(where)))
            raise fail(
                "post", f"{name!r} with {ranks[0]} and {ranks[1]} indices", "one shape per name"
            )
        shapes[name] = tuple(max(a, b) for a, b in zip(seen, where, strict=True))
        columns[str(label)] = column
    fields = {}
    for name, shape in shapes.items():
        elements = element_names(name, shape)
        missing = [e for e in elements if e not in columns]
        if missing:
            raise fail(
                "post",
                f"no {missing[0]!r} among the elements of {name!r} (shape {shape})",
                "every element of each parameter the fit holds",
            )
        fields[name] = (shape, [columns[e] for e in elements])
    return fields


def _element_values(point: np.ndarray, field: tuple):
    """One draw's value of a Stan name: a float, or a nested list of its shape."""
    shape, columns = field
    return point[columns].reshape(shape).tolist() if shape else float(point[columns[0]])


def model_code(model: str) -> str:
    """Stan code from code, a shipped model name or a path to a .stan file."""
    from bayesij.stan_models import available, stan_code

    if not isinstance(model, str):
        raise fail("model", f"a {type(model).__name__}", "Stan code, a .stan path or a name")
    if model in available():
        return stan_code(model)
    if model.endswith(".stan") and os.path.exists(model):
        with open(model) as handle:
            return handle.read()
    if "{" not in model:  # not a name, not a file, and no Stan blocks
        raise fail(
            "model",
            repr(model[:60]),
            f"Stan code, a .stan file or one of the shipped models {available()}",
        )
    return model
