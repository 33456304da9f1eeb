"""The repository root holds only what the project keeps there: an unexpected file (a
campaign store written by a stray script, a scratch file) fails the test suite."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

EXPECTED = {
    ".ci",
    ".gitignore",
    "LICENSE",
    "R",
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


def _cited_works() -> set[tuple[str, str]]:
    """(first author, year) of every entry of a References section in the package's
    docstrings."""
    import ast
    import re

    cited = set()
    for path in (ROOT / "bayesij").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef):
                continue
            doc = ast.get_docstring(node) or ""
            if "References" not in doc:
                continue
            section = doc.split("References", 1)[1].split("Examples")[0]
            for entry in re.split(r"\n(?=\S)", section):
                entry = re.sub(r"^\.\. \[\d+\]\s*", "", entry.strip())
                author = re.match(r"([A-Z][\w\-']+)", entry)
                year = re.search(r"\((\d{4})\)", entry)
                if author and year:
                    cited.add((author.group(1), year.group(1)))
    return cited


def test_every_work_a_docstring_cites_is_on_the_references_page():
    import re
    import unicodedata

    def plain(text):  # Künsch and Kuensch alike
        text = text.replace("ü", "ue").replace("ö", "oe").replace("ä", "ae")
        return unicodedata.normalize("NFKD", text)

    page = plain((ROOT / "docs" / "references.md").read_text(encoding="utf-8"))
    cited = _cited_works()
    assert len(cited) > 40  # the extraction works
    entry = r"[^\n]*(\n  [^\n]*)*?"  # an entry's first line and its indented continuation
    missing = sorted(
        (author, year)
        for author, year in cited
        if not re.search(rf"^- {re.escape(plain(author))}\b{entry}\({year}\)", page, re.M)
    )
    assert missing == [], f"add these to docs/references.md: {missing}"
