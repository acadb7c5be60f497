"""Sphinx configuration of ltdask's documentation (built by ``tests/test_docs.py``)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the _ext helpers below

from _ext import write_generated  # noqa: E402

import ltdask  # noqa: E402

project = "ltdask"
author = "the ltdask developers"
copyright = "2026, the ltdask developers"
release = ltdask.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
]

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

html_theme = "pydata_sphinx_theme"
html_title = "ltdask"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = ["_static"]

autosummary_generate = True
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# the notebooks are executed in the build: a broken notebook fails it
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_merge_streams = True

# the notebooks live in notebooks/ at the top of the repository (the test suite runs them
# there too); the build copies them in
NOTEBOOKS = HERE.parent / "notebooks"
(HERE / "notebooks").mkdir(exist_ok=True)
for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
    shutil.copyfile(notebook, HERE / "notebooks" / notebook.name)

write_generated(HERE / "_generated")
