import os
import sys
from pathlib import Path

import numpy as np
import pytest

# Helper modules shared by the tests (closed-form models, CmdStan CSV writer, refit
# helpers) live in tests/helpers; reference data and the scripts that made them in
# tests/reference. Neither holds tests, so pytest does not collect them.
sys.path.insert(0, str(Path(__file__).parent / "helpers"))
collect_ignore = ["helpers", "reference"]

from pystan_loads import skip_unless_pystan_loads  # noqa: E402
from stan_header import add_header, precompile  # noqa: E402

from conjugate import ConjugateNormal, heteroskedastic_regression  # noqa: E402

# PyStan builds each Stan program with Python's CFLAGS, which hold -g: debug information that
# nobody reads here takes 11 s of a 64 s build (and 17 MB of its 46 MB) on the 2-core
# machine. The suite's builds leave it out (-g0 last in CFLAGS, or CXXFLAGS for setuptools
# 72 and later); sampling is the same code. And each includes Stan's model header
# precompiled: half of a build is parsing it, and a new environment builds 13 programs
# (tests/helpers/stan_header.py). Set before any worker or subprocess starts.
add_header(os.environ)


def pytest_collection_finish(session):
    """The precompiled Stan header made (once, whichever worker asks first) before this
    worker's first test, where the tests it collected build Stan programs. (A hook, not
    an autouse session fixture: every test would use that fixture, and
    :func:`_shared_fixture_group` would put them all on one worker.)"""
    if any(item.get_closest_marker("stan") for item in session.items):
        precompile(os.environ)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A fixture's PyStan build that this Python cannot load skips (:func:`_loadable`)."""
    return (yield from _loadable())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test's PyStan build that this Python cannot load skips (:func:`_loadable`)."""
    return (yield from _loadable())


def _loadable():
    """The test phase, skipped with the reason where a PyStan build raised
    :class:`~bayesij.refit.stan.UnloadableStanModel` (httpstan 4.17.0 on Python 3.13: the
    programs compile, their modules do not import): an environment without a working
    PyStan, as one without CmdStan skips its tests. Every other error still fails. (These
    hooks see the tests under tests/; the doctests of bayesij/ that build with PyStan ask
    first, :func:`_where_pystan_loads`, as do the tests that reach PyStan in another
    process, tests/helpers/pystan_loads.py.)"""
    from bayesij.refit.stan import UnloadableStanModel

    try:
        return (yield)
    except UnloadableStanModel as error:
        pytest.skip(f"PyStan cannot load its builds on this Python: {error}")


@pytest.fixture(autouse=True)
def _restore_the_environment():
    """Undo changes to os.environ: a dask.distributed LocalCluster leaves PYTHONHASHSEED,
    OMP_NUM_THREADS and more in the parent's environment, and a PyStan refit in a notebook
    kernel started later (which inherits PYTHONHASHSEED) then loses its sampler processes."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def rng():
    return np.random.default_rng(20261120)


@pytest.fixture(scope="session")
def misspecified_regression():
    """N = 1000 regression with x-dependent noise, fitted with noise sd 1 (misspecified)."""
    X, y = heteroskedastic_regression(1000, np.random.default_rng(7))
    return ConjugateNormal(X, y, sigma=1.0)


def _linear_regression_data(n=30, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = 0.5 + X @ np.array([1.0, -0.5]) + rng.normal(size=n)
    return {"N": n, "K": 2, "X": X, "y": y, "weights": np.ones(n)}


@pytest.fixture(scope="session")
def pystan_fit():
    """A real PyStan fit of stan_models/linear_regression.stan (compiled once, cached)."""
    pytest.importorskip("stan")
    from bayesij.refit.stan import build_model
    from bayesij.stan_models import stan_code

    data = _linear_regression_data()
    model = build_model(stan_code("linear_regression"), data=data, random_seed=1)
    return model.sample(num_chains=3, num_samples=200, num_warmup=300), data


#: Test files outside the fast loop, by what they need (``pytest -m "not (...)"``): the
#: notebooks and the README's examples run whole documents, tooling runs ruff and mypy,
#: the CLI tests start the command, PyMC's models compile with PyTensor, the campaign
#: tests start process pools and Dask clusters and kill workers, and the kernel-cache
#: tests compile the kernels afresh in new interpreters.
MARKED_FILES = {
    "test_notebooks.py": "notebook",
    "test_readme.py": "notebook",
    "test_tooling.py": "tooling",
    "test_cli.py": "cli",
    "test_panel_audit.py": "pymc",
    "test_radon.py": "pymc",
    "test_pymc.py": "pymc",
    "test_pymc_groups.py": "pymc",
    "test_campaign.py": "processes",
    "test_store.py": "processes",
    "test_first_use.py": "processes",
    "test_cache.py": "processes",
    "test_pure_python.py": "processes",
    "test_r_interface.py": "processes",
    "test_packaging.py": "processes",
}


#: Doctests outside the fast loop: their examples compile a Stan program or sample PyMC.
MARKED_DOCTESTS = {
    "bayesij.adapters.pystan.from_pystan": ("stan", "slow"),
    "bayesij.refit.stan_density.PyStanDensity": ("stan", "slow"),
    "bayesij.refit.pymc.PyMCBackend": ("pymc", "slow"),
    "bayesij.refit.pymc.PyMCDensity": ("pymc", "slow"),
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups off the markers
def pytest_collection_modifyitems(config, items):
    """Mark the tests of the files in ``MARKED_FILES`` and the doctests in
    ``MARKED_DOCTESTS`` (the fast loop leaves them out), and keep the tests that share a
    fixture made once for many (:func:`_shared_fixture_group`) on one pytest-xdist worker
    (``--dist loadgroup``): the fixture (a PyMC or Stan fit of half a minute) is then made
    once, not once per worker; and run the long tests first (:data:`LONG_MARKERS`).
    Stan programs are compiled once whichever worker asks first
    (:func:`bayesij.refit.stan.build_model` locks the build)."""
    for item in items:
        markers = MARKED_DOCTESTS.get(item.name, ())
        if "stan" in markers:  # outside tests/: this folder's runtest hooks do not see it
            item.runtest = _where_pystan_loads(item.runtest)
        marker = MARKED_FILES.get(item.path.name)
        for name in (*markers, *([marker] if marker else [])):
            item.add_marker(getattr(pytest.mark, name))
        group = _shared_fixture_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    # The long tests first: pytest-xdist hands out tests in this order, so the last minutes
    # are short tests on every worker, not one long test on one while the other waits.
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in LONG_MARKERS))


def _where_pystan_loads(run):
    """A doctest's ``runtest`` that first skips where PyStan cannot load its builds (the
    example builds with PyStan itself, whose error is PyStan's JSONDecodeError, not
    bayesij's :class:`~bayesij.refit.stan.UnloadableStanModel`)."""

    def runtest():
        skip_unless_pystan_loads()
        return run()

    return runtest


#: Markers of the tests that take seconds to minutes (a compiler, a sampler, a kernel).
LONG_MARKERS = ("slow", "stan", "pymc", "notebook", "processes")


def _shared_fixture_group(item) -> str | None:
    """The worker group of a test that uses a fixture made once for many tests: the
    session fixture's name (the PyStan fit), else the file of a module fixture."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    scopes = {  # the suite's own fixtures (pytest's tmp_path_factory is session-scoped too)
        name: defs[-1].scope for name, defs in definitions.items() if defs and defs[-1].baseid
    }
    session = sorted(name for name, scope in scopes.items() if scope == "session")
    if session:
        return session[0]
    return str(item.path) if "module" in scopes.values() else None
