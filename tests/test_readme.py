"""Every Python example in the README runs as written, in order, in one namespace (as a
reader pasting them into a notebook would), on data that ships offline."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(_python_blocks()) >= 8


@pytest.mark.stan
@pytest.mark.slow
def test_every_readme_python_block_runs_in_order_in_a_jupyter_kernel(tmp_path, monkeypatch):
    """In a real kernel, as a notebook runs them: its event loop is running, which is what
    broke PyStan calls made without bayesij's Stan thread (``exec`` could not see that)."""
    pytest.importorskip("stan")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = _python_blocks()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(b) for b in blocks])
    client = nbclient.NotebookClient(
        notebook,
        timeout=1200,
        kernel_name="python3",
        allow_errors=True,  # report the failing block by number, with the rest still run
        resources={"metadata": {"path": str(tmp_path)}},  # audit.html and a store go here
    )
    client.execute()
    failures = [
        f"README python block {number}: {output['ename']}: {output['evalue']}\n{blocks[number]}"
        for number, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not failures, "\n\n".join(failures)
    assert (tmp_path / "audit.html").is_file()
