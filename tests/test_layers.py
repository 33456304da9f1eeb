"""The layers of DESIGN.md section 2: imports point downward, the array layer stays light."""

import ast
import subprocess
import sys
from pathlib import Path

import bayesij

PACKAGE = Path(bayesij.__file__).parent


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return set(result.stdout.split())


def test_array_layer_loads_neither_xarray_nor_pandas():
    loaded = _loaded_after("import bayesij.array")
    assert "numpy" in loaded
    assert not {"xarray", "pandas", "arviz", "stan", "cmdstanpy"} & loaded


def test_importing_bayesij_is_cheap():
    loaded = _loaded_after("import bayesij")
    assert not {"numpy", "xarray", "arviz", "stan", "cmdstanpy"} & loaded
    loaded = _loaded_after("import bayesij; bayesij.ij_covariance")
    assert not {"arviz", "stan", "cmdstanpy", "matplotlib"} & loaded


def _imports(path: Path, module_level: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in (tree.body if module_level else ast.walk(tree)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_array_layer_imports_only_numpy_scipy_and_itself():
    allowed = {"numpy", "scipy", "bayesij", "__future__"} | set(sys.stdlib_module_names)
    for path in (PACKAGE / "array").glob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in allowed, (path.name, name)
            if top == "bayesij":
                assert name.startswith(("bayesij.array", "bayesij._checks")), (path.name, name)


def test_only_adapters_import_arviz_cmdstanpy_or_pystan():
    allowed = {"adapters", "cli.py", "demo.py"}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).parts[0]
        heavy = {n.split(".")[0] for n in _imports(path)} & {"arviz", "cmdstanpy", "stan"}
        assert not heavy or relative in allowed, (path, heavy)


def test_public_api_resolves():
    for name in bayesij.__all__:
        assert getattr(bayesij, name) is not None


def test_labelled_layer_does_not_import_the_refit_layer_at_module_level():
    # AmipResult.verify calls bayesij.refit lazily, the one call upward.
    for path in PACKAGE.glob("*.py"):
        if path.name in ("cli.py", "demo.py"):
            continue
        upward = {n for n in _imports(path, module_level=True) if n.startswith("bayesij.refit")}
        assert not upward, (path.name, upward)
    for path in (PACKAGE / "refit").glob("*.py"):
        assert not {n for n in _imports(path) if n.startswith("bayesij.cli")}, path.name
