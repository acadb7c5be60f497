"""Every notebook in ``notebooks/`` runs from top to bottom without an error, in a fresh
kernel of this Python, in an empty working folder."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
#: seconds a single cell may take
CELL_TIMEOUT = 120

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory) -> KernelSpecManager:
    """Kernel specs holding one ``python3`` kernel that runs *this* interpreter, so that a
    ``python3`` kernel installed for another Python is never picked up."""
    kernels = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(kernels / "python3")
    specs = KernelSpecManager()
    specs.kernel_dirs = [str(kernels)]
    specs.ensure_native_kernel = False
    assert (
        Path(specs.get_kernel_spec("python3").argv[0]).resolve() == Path(sys.executable).resolve()
    )
    return specs


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, kernel_specs):
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=kernel_specs)
    client = NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(tmp_path)}},  # the kernel's working folder
    )
    # raises CellExecutionError, with the cell and its traceback, on the first error
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
