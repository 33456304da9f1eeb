"""A release as a user installs it: the wheel and the sdist build from the checkout, the
wheel installs into a fresh virtual environment (its dependencies seen from the test
environment, so no network is needed) and runs the demo and a smoke audit there, from a
folder outside the checkout; the sdist carries the package data the wheel does."""

import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

#: Files outside Python modules that a user's install needs (the demo's Stan programs and
#: data).
PACKAGE_DATA = ("bayesij/stan_models/linear_regression.stan", "bayesij/demo_data/radon.csv")


def _run(*command, cwd=None, timeout=900) -> str:
    """Run ``command`` as a user's shell would: no PYTHONPATH pointing into a checkout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    pytest.importorskip("build", reason="the build package (pip install build) builds the sdist")
    out = tmp_path_factory.mktemp("dist")
    # With the setuptools installed here and the wheel package (no download); the pyproject's
    # floor for setuptools is for pip's isolated builds, so the check is skipped (-x).
    _run(sys.executable, "-m", "build", "-n", "-x", "--outdir", str(out), str(ROOT))
    return out


@pytest.mark.slow
def test_the_wheel_and_the_sdist_carry_the_package_and_its_data(dist):
    (wheel,) = dist.glob("bayesij-*.whl")
    (sdist,) = dist.glob("bayesij-*.tar.gz")
    import bayesij

    assert wheel.name.startswith(f"bayesij-{bayesij.__version__}-py3-none-any")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(PACKAGE_DATA) <= names and "bayesij/cli.py" in names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
    entry_points = zipfile.ZipFile(wheel).read(
        f"bayesij-{bayesij.__version__}.dist-info/entry_points.txt"
    )
    assert b"bayesij = bayesij.cli:main" in entry_points
    with tarfile.open(sdist) as archive:
        members = {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
    assert set(PACKAGE_DATA) <= members and "pyproject.toml" in members


@pytest.mark.slow
def test_the_wheel_installs_and_runs_the_demo_in_a_fresh_environment(dist, tmp_path):
    (wheel,) = dist.glob("bayesij-*.whl")
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = str(env / "bin" / "python")
    # The dependencies from this environment's site-packages (no download): a path file
    # that adds them after the new environment's own. Not system_site_packages: from a
    # virtual environment that would see the base Python's packages, not this one's.
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(purelib.strip()) / "_test_dependencies.pth").write_text(
        "\n".join(p for p in sys.path if p.endswith("-packages")) + "\n"
    )
    _run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel))
    where = _run(python, "-c", "import bayesij; print(bayesij.__file__)", cwd=tmp_path)
    assert str(env) in where  # the installed wheel, not the checkout
    with _the_demo_build_carried_to(python, tmp_path):
        out = _run(str(env / "bin" / "bayesij"), "demo", "--out", "demo.html", cwd=tmp_path)
    assert "Model audit" in out and (tmp_path / "demo.html").is_file()
    smoke = (
        "import numpy as np, bayesij; rng = np.random.default_rng(0); y = rng.normal(size=40);"
        "mu = rng.normal(y.mean(), 0.16, size=(4, 250, 1));"
        "print(bayesij.loo(-0.5 * (y - mu) ** 2).estimates().loc['elpd_loo', 'Estimate'])"
    )
    assert float(_run(python, "-c", smoke, cwd=tmp_path).split()[-1]) < 0


@contextlib.contextmanager
def _the_demo_build_carried_to(python: str, cwd: Path):
    """httpstan keys a compiled program by the Python executable too, so the new
    environment's demo would compile the program this environment has already built (a
    minute or two of the suite). This environment's build (made here, or by any other test,
    once: :func:`bayesij.refit.stan.build_model` locks it) is copied to the name the new
    environment computes for the program its installed wheel ships, and removed after:
    the demo still reads the program from the wheel (another text, another name, a build
    of its own), and httpstan's cache keeps no copy per test run."""
    import httpstan.cache
    import httpstan.models

    from bayesij.demo import demo_data
    from bayesij.refit.stan import build_model
    from bayesij.stan_models import stan_code

    code = stan_code("linear_regression")
    build_model(code, demo_data())
    ours = httpstan.cache.model_directory(httpstan.models.calculate_model_name(code))
    ask = (
        "import httpstan.models, bayesij.stan_models as s; "
        "print(httpstan.models.calculate_model_name(s.stan_code('linear_regression')))"
    )
    theirs = httpstan.cache.model_directory(_run(python, "-c", ask, cwd=cwd).split()[-1])
    assert theirs != ours  # another executable: another name
    # A copy an earlier run left (killed before its clean-up; CI's temporary folders and
    # httpstan's cache may outlive a run) is replaced, not an error.
    shutil.rmtree(theirs, ignore_errors=True)
    shutil.copytree(ours, theirs, ignore=shutil.ignore_patterns("fits"), dirs_exist_ok=True)
    try:
        yield
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
