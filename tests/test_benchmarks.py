"""The benchmarks the README and docs/performance.md quote still run: every script imports
(its options parse), and the AMIP benchmark, whose options had drifted from the API
(``score=`` after it became ``grad_log_posterior=``), runs end to end on a small input."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    before = set(sys.modules)
    module = importlib.import_module(name)
    assert name == "common" or callable(getattr(module, "main", None))
    for loaded in set(sys.modules) - before:  # "loo", "audit"...: not left for other tests
        if str(BENCHMARKS) in str(getattr(sys.modules[loaded], "__file__", "")):
            monkeypatch.delitem(sys.modules, loaded)


@pytest.mark.slow
@pytest.mark.processes
def test_the_amip_benchmark_runs_and_its_sets_are_refit_confirmed():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "amip_noise.py"), "--sizes", "400"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sets = [line for line in done.stdout.splitlines() if "OLS-AMIP" in line]
    assert len(sets) == 3 and all("refit NO" not in line for line in sets)
    assert sum(line.count("refit yes") for line in sets) == 9
