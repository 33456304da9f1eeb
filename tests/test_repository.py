"""The repository root holds only what the project keeps there: an unexpected file (a
campaign store written by a stray script, a scratch file) fails the test suite."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

EXPECTED = {
    ".ci",
    ".gitignore",
    "README.md",
    "pyproject.toml",
    "bayesij",
    "benchmarks",
    "docs",
    "examples",
    "notebooks",
    "tests",
}


def _git(*args: str) -> list[str]:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip("not a git checkout")
    return [line for line in result.stdout.splitlines() if line]


def test_no_unexpected_file_at_the_repository_root():
    tracked = {path.split("/", 1)[0] for path in _git("ls-files")}
    untracked = {
        path.split("/", 1)[0].rstrip("/")
        for path in _git("ls-files", "--others", "--exclude-standard", "--directory")
    }
    unexpected = (tracked | untracked) - EXPECTED
    assert not unexpected, f"unexpected at the repository root: {sorted(unexpected)}"
