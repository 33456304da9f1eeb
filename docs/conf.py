"""Sphinx configuration of bayesij's documentation site.

Build (from the repository root, in an environment with ``pip install -e ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The gallery executes the notebooks of ``notebooks/`` (copied here at build time) with the
small settings the tests use; notebook 5 needs PyMC and arviz-stats (Python >= 3.12).
"""

import os
import shutil
from pathlib import Path

import matplotlib

import bayesij

DOCS = Path(__file__).parent
ROOT = DOCS.parent

project = "bayesij"
author = "the bayesij developers"
copyright = "2026, the bayesij developers"
release = bayesij.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax served from the site itself: formulas typeset when it is read offline.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
]

# Markdown pages (MyST) and executed notebooks (myst-nb).
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["dollarmath", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "figures/make_figures.py", "**/.ipynb_checkpoints"]
templates_path = ["_templates"]

# API reference: one page per public name, from the numpydoc docstrings. The pages holding
# autosummary tables are listed here: with True, Sphinx scans the pages of the environment
# it loaded from the output folder, so a build into a folder left by an older layout of the
# site generated no page for the tables added since (every API name "stub file not found").
autosummary_generate = sorted(
    page.relative_to(DOCS).as_posix()
    for page in [*DOCS.glob("*.md"), *DOCS.glob("api/*.md"), *DOCS.glob("guide/*.md")]
    if "autosummary::" in page.read_text(encoding="utf-8")
)
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # Attributes as fields: a property documented there is not doubled
# The shape names of parameter types (n_obs, n_draws) are also attribute names of several
# classes, and the References sections number their papers without citing them inline.
suppress_warnings = ["ref.python", "ref.footnote"]

# The gallery: notebooks/ copied into docs/gallery/ and executed with the tests' settings.
GALLERY = DOCS / "gallery"
GALLERY.mkdir(exist_ok=True)
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    target = GALLERY / notebook.name
    if not target.exists() or target.read_bytes() != notebook.read_bytes():
        shutil.copyfile(notebook, target)
os.environ.setdefault("BAYESIJ_NOTEBOOK_SAMPLES", "400")
# Sphinx's own process draws nothing on screen; the notebooks' kernels (which inherit the
# environment) must keep IPython's inline backend, or their figures never reach the page.
matplotlib.use("Agg")
if os.environ.get("MPLBACKEND", "").lower() == "agg":
    del os.environ["MPLBACKEND"]
nb_execution_mode = os.environ.get("BAYESIJ_DOCS_EXECUTE", "force")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

html_theme = "pydata_sphinx_theme"
html_title = "bayesij"
html_static_path = ["_static"]
html_css_files = ["bayesij.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    # Four sections in the top bar, the rest under "More": one row at 1024 px.
    "header_links_before_dropdown": 4,
}
# Pages without children of their own: no empty "section navigation" column.
html_sidebars: dict[str, list[str]] = {
    "index": [],
    "glossary": [],
    "getting-started": [],
    "peers": [],  # the six-column table gets the page's whole width
}
