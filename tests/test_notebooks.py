"""The notebooks in ``notebooks/`` are stored valid and without outputs. They are executed,
top to bottom in a fresh kernel of this Python, by the documentation build
(``tests/test_docs.py``): a cell that raises fails it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
pytestmark = pytest.mark.slow


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert {"01-quickstart.ipynb", "02-writing-udfs.ipynb", "03-distributed.ipynb"} <= set(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
