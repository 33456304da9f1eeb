"""The layers of docs/architecture.md: every import, lazy ones included, points downward; the
array layer stays light; each estimator has one name on every floor and in the tests."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import bayesij
from layers import LAYERS, layer_of

PACKAGE = Path(bayesij.__file__).parent
TESTS = Path(__file__).parent

_layer_of = layer_of


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (functions, methods, branches)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "bayesij":  # from bayesij import refit, plots ...
                found += [
                    (node.lineno, f"bayesij.{alias.name}")
                    for alias in node.names
                    if alias.name in LAYERS
                ]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "import_module":
            argument = node.args[0] if node.args else None
            if isinstance(argument, ast.Constant):
                found.append((node.lineno, argument.value))
    return found


def _module_name(path: Path) -> str:
    return ".".join(("bayesij", *path.relative_to(PACKAGE).with_suffix("").parts))


def _package_files():
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE
    )


def test_every_part_of_the_package_has_a_layer():
    parts = {
        p.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for p in PACKAGE.rglob("*.py")
        if p.parent != PACKAGE or p.name != "__init__.py"
    }
    assert parts == set(LAYERS)


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: _module_name(p))
def test_imports_point_downward(path):
    own = _layer_of(_module_name(path))
    upward = [
        (line, name)
        for line, name in _imports(path)
        if name.startswith("bayesij.") and _layer_of(name) > own
    ]
    assert not upward, f"{_module_name(path)} imports a higher layer: {upward}"


def test_the_walker_sees_lazy_imports(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "def f():\n    from bayesij.refit import verify\n"
        "    import bayesij.report.audit\n"
        "class C:\n    def g(self):\n        from bayesij import refit\n"
    )
    names = {name for _, name in _imports(source)}
    assert {"bayesij.refit", "bayesij.report.audit"} <= names


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: _module_name(p))
def test_no_private_module_is_imported_from_another_folder(path):
    """A module whose name starts with an underscore is its folder's own: what other layers
    use is public in its layer (``array/numeric.py``), not reached into."""
    folder = _module_name(path).rsplit(".", 1)[0]
    foreign = [
        (line, name)
        for line, name in _imports(path)
        if name.startswith("bayesij.")
        and name.rsplit(".", 1)[-1].startswith("_")
        and name.rsplit(".", 1)[0] != folder
    ]
    assert not foreign, f"{_module_name(path)} imports another folder's private module: {foreign}"


def test_every_public_name_comes_from_a_layer():
    # bayesij/__init__.py loads every layer lazily by name; it is the door, not a layer.
    for name, module in bayesij._PUBLIC.items():
        assert module.startswith("bayesij.") and _layer_of(module) is not None, name


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_array_layer_loads_neither_xarray_nor_pandas():
    loaded = _loaded_after("import bayesij.array")
    assert "numpy" in loaded
    assert not {"xarray", "pandas", "arviz", "stan", "cmdstanpy"} & loaded


@pytest.mark.processes  # starts a fresh interpreter
def test_importing_bayesij_is_cheap():
    loaded = _loaded_after("import bayesij")
    assert not {"numpy", "xarray", "arviz", "stan", "cmdstanpy"} & loaded
    loaded = _loaded_after("import bayesij; bayesij.ij_covariance")
    assert not {"arviz", "stan", "cmdstanpy", "matplotlib"} & loaded


_AUDIT_OF_ARRAYS = (
    "import numpy as np, bayesij; rng = np.random.default_rng(0); "
    "b = rng.normal(1.0, 0.1, size=(4, 500, 1)); y = rng.standard_t(4, size=60); "
    "bayesij.audit(bayesij.from_arrays(b, -0.5 * (y - b) ** 2, quantity_names=['b']))"
)


@pytest.mark.processes  # starts a fresh interpreter
def test_an_audit_comparing_nothing_loads_neither_scipy_stats_nor_optimize():
    # 70 MiB of an audit's memory: scipy.stats (normal quantiles, chi-square tails and
    # ranks, done with scipy.special and NumPy) and scipy.optimize (the stacking weights
    # of a comparison, imported only when compare_with is given).
    loaded = _loaded_after(_AUDIT_OF_ARRAYS)
    assert "bayesij.stats.amip" in loaded and "scipy.special" in loaded
    assert not {"scipy.stats", "scipy.optimize", "matplotlib", "arviz"} & loaded


def test_array_layer_imports_only_numpy_scipy_and_itself():
    # numba compiles the per-observation kernels (array/kernels/), loaded on first use;
    # threadpoolctl keeps BLAS to one thread inside the chunk threads (array/numeric.py).
    allowed = {"numpy", "scipy", "numba", "threadpoolctl", "bayesij", "__future__"}
    allowed |= set(sys.stdlib_module_names)
    for path in (PACKAGE / "array").glob("*.py"):
        for _, name in _imports(path):
            top = name.split(".")[0]
            assert top in allowed, (path.name, name)
            if top == "bayesij":
                assert name.startswith("bayesij.array"), (path.name, name)


def test_only_adapters_and_refit_import_arviz_cmdstanpy_or_pystan():
    allowed = {"adapters", "refit"}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).parts[0]
        heavy = {n.split(".")[0] for _, n in _imports(path)} & {"arviz", "cmdstanpy", "stan"}
        assert not heavy or relative in allowed, (path, heavy)


def test_public_api_resolves():
    for name in bayesij.__all__:
        assert getattr(bayesij, name) is not None
    assert bayesij.refit.verify is not None  # subpackages load on first use


ESTIMATORS = [
    "loo",
    "kfold",
    "holdout",
    "lfo",
    "waic",
    "dic",
    "influence",
    "jackknife",
    "linearity",
    "amip",
]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_each_estimator_has_one_name_on_every_floor(name):
    assert (PACKAGE / "array" / f"{name}.py").is_file()
    assert (TESTS / "array" / f"test_{name}.py").is_file() or (
        TESTS / "stats" / f"test_{name}.py"
    ).is_file()
    if name != "kfold":  # K-fold is labelled by the refit layer (bayesij.refit.kfold)
        assert (PACKAGE / "stats" / f"{name}.py").is_file()
        assert name in {m.rsplit(".", 1)[1] for m in bayesij._PUBLIC.values()}


#: Modules whose mirror file does not exist yet, with the test file that exercises them
#: today (through the public functions built on them). The list only shrinks: a new module
#: without ``tests/<floor>/test_<module>.py`` fails :func:`test_tests_mirror_the_package`.
NOT_YET_MIRRORED: dict[str, str] = {}  # empty: every module has its mirror


def test_tests_mirror_the_package():
    """Every module ``bayesij/<floor>/<name>.py`` has ``tests/<floor>/test_<name>.py`` (a
    file, not just a folder), or is listed in ``NOT_YET_MIRRORED`` with the test file that
    covers it; a listed module that gains its mirror must leave the list."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(PACKAGE)
        mirror = TESTS / relative.parent / f"test_{path.stem.lstrip('_')}.py"
        key = relative.as_posix()
        if key in NOT_YET_MIRRORED:
            assert not mirror.is_file(), f"{key} is mirrored now: remove it from the list"
            assert (TESTS / NOT_YET_MIRRORED[key]).is_file(), key
        else:
            assert mirror.is_file(), f"{key} has no test file {mirror.relative_to(TESTS)}"


def test_no_call_climbs_back_up_a_layer():
    """Following the log-likelihood from a public estimator down to its kernel, no function
    calls into a higher layer (no generator, reader or kernel handed down and called back),
    for a matrix in memory and a log-likelihood function alike."""
    import warnings

    import numpy as np

    from tests.helpers.walk import example, walk

    draws, log_lik = example()
    post = bayesij.from_arrays(draws, log_lik, quantity_names=["a", "b"])
    matrix = log_lik.reshape(-1, log_lik.shape[2])
    function = bayesij.loglik_function(
        lambda cols, theta: matrix[:, cols],
        np.arange(matrix.shape[1]),
        draws.reshape(-1, 2),
        n_chains=4,
        block_size=64,
        names=["a", "b"],
    )
    calls = [
        lambda d: bayesij.loo(d, method="psis"),
        lambda d: bayesij.waic(d),
        lambda d: bayesij.influence(d),
        lambda d: bayesij.ij_covariance(d, n_boot=10),
        lambda d: bayesij.linearity(d),
        lambda d: bayesij.amip(d, "b", "sign", method="linear"),
        lambda d: bayesij.loo_subsample(d, 50),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in calls:
            for data in (post, function):
                stays, climbs = walk(lambda call=call, data=data: call(data))
                assert climbs == [], climbs
        stays, climbs = walk(lambda: bayesij.loo(log_lik))
    assert stays[0] == "bayesij.stats.loo.loo" and stays[-1].startswith(
        "bayesij.array.kernels.psis"
    )
    assert len(stays) <= 10, stays
