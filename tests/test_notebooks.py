"""Every notebook in notebooks/ runs from top to bottom with small settings (its own cells
assert what it demonstrates)."""

from pathlib import Path

import pytest
from pystan_loads import skip_unless_pystan_loads

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


#: Notebooks that need a package outside the core dependencies: notebook 5 samples PyMC
#: (and compares with arviz-stats under ArviZ 1.x, with ArviZ 0.23's loo otherwise).
NEEDS = {"5_pymc_audit": ("pymc",)}

#: Notebooks that fit with PyStan (skipped where it cannot load its builds).
PYSTAN = {"1_regression_audit"}


def test_there_are_five_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["1_", "2_", "3_", "4_", "5_"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch, tmp_path):
    for module in NEEDS.get(path.stem, ()):
        pytest.importorskip(module, reason="CI runs it in the Python 3.12 environment")
    if path.stem in PYSTAN:
        skip_unless_pystan_loads()
    monkeypatch.setenv("BAYESIJ_NOTEBOOK_SAMPLES", "400")
    # The kernel's own inline backend, as the documentation site runs it: figures are
    # outputs of their cells (an inherited MPLBACKEND=Agg left the gallery without one).
    monkeypatch.delenv("MPLBACKEND", raising=False)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    drawn = [c for c in notebook.cells if "image/png" in str(c.get("outputs", []))]
    assert drawn, "a gallery notebook without a figure"
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    for cell in notebook.cells:  # every cell that draws shows its figure
        if cell.cell_type == "code" and ("plots.plot_" in cell.source or "plt." in cell.source):
            images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
            assert images, f"no figure shown by: {cell.source[:80]!r}"
