"""The notebooks in ``notebooks/`` are stored valid and without outputs, and they teach: their
cells show results, while the checks that those results are right live here. Each notebook
runs top to bottom in a fresh kernel of this Python with the checks below appended; a cell
that raises, a failed check or a traceback on a cell's stderr (a cluster that closes badly)
fails it. The documentation build (``tests/test_docs.py``) executes them again, for the
pages."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
pytestmark = pytest.mark.slow

#: run after each notebook's last cell, in its kernel: what its results must be (numpy on the
#: data the notebook made is the reference)
CHECKS = {
    "01-quickstart": """
assert np.array_equal(central, data[..., 24:40, 24:40].sum(axis=(2, 3)))
assert np.allclose(mean_frame, data.mean(axis=(0, 1)))
assert np.allclose(bf, (data * bf_mask).sum(axis=(2, 3)))
assert np.allclose(adf, (data * adf_mask).sum(axis=(2, 3)))
assert corr_y > 0.95 and corr_x > 0.95
ref = data.astype(np.float64)
assert int(std["num_frames"][0]) == np.prod(nav_shape)
assert np.allclose(std["mean"], ref.mean(axis=(0, 1)))
assert np.allclose(std["std"], ref.std(axis=(0, 1)))
assert np.allclose(back_com["field_y"], com["field_y"], equal_nan=True)
assert np.allclose(back_vd["intensity"], vd["intensity"])
assert np.allclose(back_std["std"], std["std"])
""",
    "02-writing-udfs": """
assert np.array_equal(peaks["peak"], data.max(axis=(2, 3)))
ref_pos = np.stack(np.unravel_index(flat.argmax(axis=-1), data.shape[2:]), axis=-1)
assert np.array_equal(peaks["peak_pos"], ref_pos)
assert np.allclose(stats["total"], data.sum(axis=(0, 1)))
assert np.array_equal(stats["brightest"], data.max(axis=(0, 1)))
assert int(stats["count"][0]) == data.shape[0] * data.shape[1]
assert np.allclose(stats["mean"], data.mean(axis=(0, 1)))
for name in ("total", "brightest", "count", "mean"):
    assert np.allclose(stats_all[name], stats[name]), name
assert np.array_equal(peaks_roi["peak_valid"], roi)
assert np.array_equal(peaks_roi["peak"].values[roi], data[roi].max(axis=(1, 2)))
assert np.isnan(peaks_roi["peak"].values[~roi]).all()
assert (peaks_roi["peak_pos"].values[~roi] == 0).all()
assert int(stats_roi["count"][0]) == roi.sum()
assert np.allclose(stats_roi["mean"], data[roi].mean(axis=0))
assert np.array_equal(stats_roi["brightest"], data[roi].max(axis=0))
assert np.array_equal(peaks_2["peak"], peaks_roi["peak"], equal_nan=True)
assert np.allclose(stats_2["mean"], stats_roi["mean"])
assert np.allclose(lazy["mean"].compute(), data[roi].mean(axis=0))
""",
    "03-distributed": """
ref = data.astype(np.float64)
assert np.allclose(total["intensity"], ref.sum(axis=(0, 1)))
assert np.allclose(per_frame["intensity"], ref.sum(axis=(2, 3)))
assert np.allclose(std["std"], ref.std(axis=(0, 1)))
assert np.array_equal(maxframe["maximum"], data.max(axis=(0, 1)))
assert np.corrcoef(com["field_x"].values.ravel(), true_shifts[..., 1].ravel())[0, 1] > 0.95
assert len(workers) == 2
assert steps[-1]["intensity_valid"].all()
assert np.allclose(steps[-1]["intensity"], per_frame["intensity"])
assert fraction == sorted(fraction) and len(steps) >= 10
assert np.allclose(sums["intensity"], total["intensity"])
assert np.allclose(stds["var"], std["var"])
assert np.allclose(frames["intensity"], per_frame["intensity"])
""",
}

#: how the cells that end a notebook start
CLEAN_UP = ("tmp.cleanup()", "# the client first")


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert {"01-quickstart.ipynb", "02-writing-udfs.ipynb", "03-distributed.ipynb"} <= set(names)
    assert {p.stem for p in NOTEBOOKS} == set(CHECKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
            # checks belong in CHECKS: a notebook shows its results
            assert "assert " not in cell.source, cell.source[:60]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_its_results_hold(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    # a ``python3`` kernel of *this* interpreter (JUPYTER_PATH comes first in the search)
    write_kernel_spec(tmp_path / "jupyter" / "kernels" / "python3")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    # before the cells that clean up (the results read from files need the files)
    ends = [i for i, c in enumerate(nb.cells) if c.source.startswith(CLEAN_UP)]
    nb.cells.insert(
        ends[0] if ends else len(nb.cells), nbformat.v4.new_code_cell(CHECKS[path.stem])
    )
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("name") == "stderr":
                assert "Traceback" not in output["text"], (cell.source[:60], output["text"])
