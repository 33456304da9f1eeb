"""ruff and mypy run as part of the test command, so their configuration cannot rot."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "bayesij", "tests", "benchmarks"], [sys.executable, "-m", "mypy"]],
    ids=["ruff", "mypy"],
)
def test_tool_passes(command):
    if command[0] == "ruff" and shutil.which("ruff") is None:
        command = [sys.executable, "-m", "ruff", *command[1:]]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
