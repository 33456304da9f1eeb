"""The README is a front page and every Python example of the documentation runs as written.

Each document (the README, then each page of ``docs/`` in the site's order) runs in order in
one namespace of its own, as a reader pasting its blocks into a fresh notebook would, on
data that ships offline. One Jupyter kernel runs them all (its namespace reset between
documents), so a page that leans on another page's names fails."""

import re
from pathlib import Path

import pytest
from pystan_loads import skip_unless_pystan_loads

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _toctree_pages(document: str = "index") -> list[str]:
    """The site's pages in the order of the toctrees, from ``docs/index.md`` down."""
    text = (DOCS / f"{document}.md").read_text(encoding="utf-8")
    folder = document.rpartition("/")[0]
    pages: list[str] = []
    for tree in re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S):
        for line in tree.splitlines():
            entry = line.strip()
            if not entry or entry.startswith(":"):
                continue
            entry = re.sub(r"^.*<(.+)>$", r"\1", entry)  # "Title <page>": the page
            page = f"{folder}/{entry}" if folder else entry
            pages.append(page)
            if (DOCS / f"{page}.md").is_file():
                pages += _toctree_pages(page)
    return pages


def _documents() -> list[Path]:
    pages = [DOCS / f"{page}.md" for page in _toctree_pages()]
    return [README, DOCS / "index.md"] + [page for page in pages if page.is_file()]


def test_the_readme_is_a_front_page_that_links_every_guide_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    linked = set(re.findall(r"\]\((docs/[^)#]+)\)", text))
    pages = {f"docs/{path.relative_to(DOCS).as_posix()}" for path in DOCS.rglob("*.md")}
    pages -= {"docs/index.md"} | {p for p in pages if p.startswith("docs/_build/")}
    assert pages <= linked, f"not linked from the README: {sorted(pages - linked)}"
    assert all((ROOT / link).is_file() for link in linked), "a README link points nowhere"


def test_every_page_of_the_site_is_in_its_table_of_contents():
    listed = set(_toctree_pages())
    markdown = {
        path.relative_to(DOCS).with_suffix("").as_posix()
        for path in DOCS.rglob("*.md")
        if "_build" not in path.parts
    }
    assert markdown - {"index"} <= listed, sorted(markdown - {"index"} - listed)
    assert all((DOCS / f"{page}.md").is_file() or page.startswith("gallery/") for page in listed)
    notebooks = {f"gallery/{p.stem}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    gallery = (DOCS / "gallery.md").read_text(encoding="utf-8")
    assert all(page in gallery for page in notebooks)


def test_the_documentation_has_python_examples():
    assert sum(len(_python_blocks(path)) for path in _documents()) >= 25


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.notebook
def test_every_python_block_of_the_documentation_runs_in_a_jupyter_kernel(tmp_path, monkeypatch):
    """In a real kernel, as a notebook runs them: its event loop is running, which is what
    broke PyStan calls made without bayesij's Stan thread (``exec`` could not see that)."""
    skip_unless_pystan_loads()
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells, origins = [], []
    for path in _documents():
        cells.append(nbformat.v4.new_code_cell("%reset -f"))
        origins.append(None)
        for number, block in enumerate(_python_blocks(path), start=1):
            cells.append(nbformat.v4.new_code_cell(block))
            origins.append((path.relative_to(ROOT).as_posix(), number, block))
    notebook = nbformat.v4.new_notebook(cells=cells)
    client = nbclient.NotebookClient(
        notebook,
        timeout=1200,
        kernel_name="python3",
        allow_errors=True,  # report every failing block by document and number
        resources={"metadata": {"path": str(tmp_path)}},  # audit.html and stores go here
    )
    client.execute()
    failures = [
        f"{origin[0]}, python block {origin[1]}: {output['ename']}: {output['evalue']}\n{origin[2]}"
        for origin, cell in zip(origins, notebook.cells, strict=True)
        for output in cell.get("outputs", [])
        if origin and output.get("output_type") == "error"
    ]
    assert not failures, "\n\n".join(failures)
    assert (tmp_path / "audit.html").is_file()


def _public_names() -> list[tuple[str, object]]:
    import bayesij
    from bayesij import refit
    from bayesij.report import plots

    return [
        (f"{module.__name__}.{name}", getattr(module, name))
        for module in (bayesij, refit, plots)
        for name in module.__all__
    ]


def test_every_public_name_is_in_the_api_reference_with_an_example_the_doctests_run():
    import inspect

    pages = [DOCS / "api.md", *sorted((DOCS / "api").glob("*.md"))]
    api = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    listed = set(re.findall(r"^   (\w+)$", api, flags=re.M))
    for qualified, value in _public_names():
        name = qualified.rpartition(".")[2]
        assert name in listed, f"{qualified} is not in docs/api.md or docs/api/"
        doc = inspect.getdoc(value) or ""
        examples = doc.partition("\nExamples\n--------\n")[2]
        assert ">>> " in examples, f"{qualified} has no Examples section with a doctest"


def test_every_page_with_an_api_table_is_one_sphinx_generates_pages_for():
    # docs/conf.py lists the pages whose autosummary tables get a page per name (Sphinx's
    # own discovery read a stale environment in CI); a table on a page outside the folders
    # it reads would leave its names without a page.
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    folders = set(re.findall(r'DOCS\.glob\("(?:(\w+)/)?\*\.md"\)', conf))
    assert {"", "api"} <= folders, folders
    for page in DOCS.rglob("*.md"):
        if "_build" in page.parts or "autosummary::" not in page.read_text(encoding="utf-8"):
            continue
        folder = page.parent.relative_to(DOCS).as_posix().replace(".", "")
        assert folder in folders, f"{page.relative_to(DOCS)}: its folder is not read by conf.py"


def test_the_readmes_peers_map_is_the_peers_page_table():
    """One table, shown twice: the README's copy may not drift from docs/peers.md."""

    def table(text: str) -> str:
        start = text.index("| feature | arviz-stats |")
        return text[start : text.index("\n\n", start)]

    readme = README.read_text(encoding="utf-8")
    assert table(readme) == table((DOCS / "peers.md").read_text(encoding="utf-8"))


def test_the_readme_s_verdict_is_what_its_example_prints(tmp_path, monkeypatch, capsys):
    """The audit's sentences the README shows under "prints" (wrapped for reading) are the
    ones its first example prints now, word for word: a change of the summary's wording
    or of its numbers shows here, not in a reader's terminal."""
    text = README.read_text(encoding="utf-8")
    example = re.search(
        r"## Audit a fit.*?```python\n(.*?)```\n\nprints\n\n```text\n(.*?)```", text, re.S
    )
    assert example, "the README's first example and what it prints"
    code, shown = example.groups()
    monkeypatch.chdir(tmp_path)  # audit.html goes here
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert " ".join(printed.split()) == " ".join(shown.split())
