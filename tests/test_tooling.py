"""ruff (lint and format) and mypy run as part of the test command, so their configuration
cannot rot."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SOURCES = ["bayesij", "tests", "benchmarks", "examples", "docs/conf.py", "docs/figures"]


def _ruff(*args: str) -> list[str]:
    if shutil.which("ruff") is None:
        return [sys.executable, "-m", "ruff", *args]
    return ["ruff", *args]


@pytest.mark.parametrize(
    "command",
    [
        _ruff("check", *SOURCES),
        _ruff("format", "--check", *SOURCES),
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_passes(command):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_test_that_shares_no_fixture_is_in_no_worker_group(request):
    """tests/conftest.py puts the tests that share a session fixture on one worker: a
    fixture every test uses (an autouse one) would put the whole suite on one."""
    assert request.node.get_closest_marker("xdist_group") is None
