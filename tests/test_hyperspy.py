"""`ltdask.to_hyperspy` / ``ds.to_hyperspy()``: HyperSpy signals of datasets and results with
their calibrated axes, in HyperSpy's axis order, checked against numpy on the same data.

HyperSpy holds the data in numpy order (navigation dims first) and lists axes reversed (x
before y) in its axes manager: ``s.inav[x, y]`` is ``data[y, x]``. The tests need HyperSpy
(the ``hyperspy`` extra, in ``test``) and skip without it, except the one that checks the
error naming the extra.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import ltdask
from ltdask.udf import ApplyMasksUDF, CoMUDF, SumSigUDF, SumUDF

NAV = (3, 4)
SIG = (5, 6)
NAV_CAL = [(0.5, "nm"), (0.25, 1.0, "nm")]
SIG_CAL = [(0.125, -0.25, "mrad"), (0.0625, "1/nm")]
#: per dim of (scan_y, scan_x, det_y, det_x): (scale, offset, units)
EXPECTED = {
    "scan_y": (0.5, 0.0, "nm"),
    "scan_x": (0.25, 1.0, "nm"),
    "det_y": (0.125, -0.25, "mrad"),
    "det_x": (0.0625, 0.0, "1/nm"),
}


@pytest.fixture
def hs():
    return pytest.importorskip("hyperspy.api", reason="hyperspy is not installed")


@pytest.fixture
def data():
    return np.random.default_rng(36).random(NAV + SIG, dtype=np.float32)


@pytest.fixture
def ds(data):
    return ltdask.from_array(data, nav_calibration=NAV_CAL, sig_calibration=SIG_CAL)


def axis_facts(axis):
    return (axis.scale, axis.offset, axis.units)


def same_axis(axis, expected) -> bool:
    """Scale and offset to rounding, units exactly (pytest's approx refuses strings)."""
    scale, offset, units = axis_facts(axis)
    return (scale, offset) == pytest.approx(expected[:2], rel=1e-12) and units == expected[2]


def test_dataset_axes_match_calibrations(hs, ds):
    s = ds.to_hyperspy()
    assert isinstance(s, hs.signals.Signal2D) and s._lazy
    am = s.axes_manager
    # HyperSpy's order: x before y in each group
    assert [a.name for a in am.navigation_axes] == ["scan_x", "scan_y"]
    assert [a.name for a in am.signal_axes] == ["det_x", "det_y"]
    assert am.navigation_shape == NAV[::-1] and am.signal_shape == SIG[::-1]
    for axis in am.navigation_axes + am.signal_axes:
        assert axis_facts(axis) == EXPECTED[axis.name], axis.name
    # in array order, as the data is
    order = ["scan_y", "scan_x", "det_y", "det_x"]
    assert [am[name].index_in_array for name in order] == [0, 1, 2, 3]


def test_dataset_data_is_the_dask_array(hs, ds, data):
    s = ds.to_hyperspy()
    assert isinstance(s.data, da.Array)
    expected = ds.to_dask().compute()
    np.testing.assert_array_equal(s.data.compute(), expected)
    np.testing.assert_array_equal(expected, data)
    # s.inav[x, y].isig[kx, ky] is data[y, x, ky, kx]
    assert s.inav[3, 1].isig[4, 2].data.compute().item() == data[1, 3, 2, 4]
    # calibrated (float) indices land on the same pixel: scan_x = 1.0 + 0.25 * 3,
    # scan_y = 0.5 * 1, det_x = 0.0625 * 4, det_y = -0.25 + 0.125 * 2
    assert s.inav[1.75, 0.5].isig[0.25, 0.0].data.compute().item() == data[1, 3, 2, 4]
    s.compute()
    assert not s._lazy
    np.testing.assert_array_equal(s.data, data)


def test_dataset_positions_without_frames_are_marked(hs, data):
    ds = ltdask.from_array(data, sync_offset=-2)  # the first two positions have no frame
    s = ds.to_hyperspy()
    expected = np.ones(NAV, bool)
    expected[0, :2] = False
    valid = s.metadata.ltdask.valid
    np.testing.assert_array_equal(valid.data, expected)
    assert [a.name for a in valid.axes_manager.signal_axes] == ["scan_x", "scan_y"]
    frames = s.data.compute()
    assert not frames[0, :2].any()
    np.testing.assert_array_equal(frames.reshape(-1, *SIG)[2:], data.reshape(-1, *SIG)[:-2])


def test_dataset_keywords_reach_to_dask(hs, tmp_path):
    raw = np.arange(2 * 3 * 4 * 4, dtype=np.uint16).reshape(2, 3, 4, 4)
    path = tmp_path / "scan.raw"
    raw.tofile(path)
    ds = ltdask.open_raw(
        path, nav_shape=(2, 3), sig_shape=(4, 4), dtype="uint16", nav_calibration=(2.0, "um")
    )
    s = ds.to_hyperspy(dtype="float32", chunks=(1, 3, 4, 4))
    assert s.data.dtype == np.float32 and s.data.chunks == ((1, 1), (3,), (4,), (4,))
    np.testing.assert_array_equal(s.data.compute(), raw.astype(np.float32))
    assert s.metadata.General.title == "scan.raw"
    assert [a.units for a in s.axes_manager.navigation_axes] == ["um", "um"]


def test_uncalibrated_and_one_dimensional_scan(hs):
    data = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)
    s = ltdask.from_array(data).to_hyperspy()
    am = s.axes_manager
    assert [am[name].index_in_array for name in ("frame", "det_y", "det_x")] == [0, 1, 2]
    assert am.navigation_shape == (5,) and am.signal_shape == (3, 4)
    for axis in am.navigation_axes + am.signal_axes:
        assert (axis.scale, axis.offset, str(axis.units)) == (1.0, 0.0, "<undefined>")
    np.testing.assert_array_equal(s.data.compute(), data)


def test_dataset_coordinates_that_are_not_even(hs):
    positions = np.array([0.0, 1.0, 3.0, 7.0])
    array = xr.DataArray(
        np.zeros((4, 2, 2), np.float32),
        dims=("time", "det_y", "det_x"),
        coords={"time": ("time", positions, {"units": "s"})},
    )
    s = ltdask.from_array(array).to_hyperspy()
    axis = s.axes_manager["time"]
    assert not axis.is_uniform and axis.units == "s"
    np.testing.assert_array_equal(axis.axis, positions)


def test_virtual_image_is_an_image_of_the_scan(hs, ds, data):
    roi = np.zeros(NAV, bool)
    roi[1:, 1:] = True
    result = SumSigUDF().compute(ds, roi=roi)
    s = ltdask.to_hyperspy(result)
    assert isinstance(s, hs.signals.Signal2D) and not s._lazy
    assert s.axes_manager.navigation_dimension == 0
    assert [a.name for a in s.axes_manager.signal_axes] == ["scan_x", "scan_y"]
    for axis in s.axes_manager.signal_axes:
        assert same_axis(axis, EXPECTED[axis.name])
    expected = np.where(roi, data.sum(axis=(2, 3)), np.nan)
    np.testing.assert_allclose(s.data, expected, rtol=1e-5)
    # the valid mask is kept, as a signal of the same axes
    valid = s.metadata.ltdask.valid
    np.testing.assert_array_equal(valid.data, roi)
    assert [a.name for a in valid.axes_manager.signal_axes] == ["scan_x", "scan_y"]
    assert s.metadata.General.title == "intensity" and s.metadata.ltdask.udf == "SumSigUDF"


def test_lazy_result_over_the_detector(hs, ds, data):
    lazy = SumUDF().lazy(ds)
    s = ltdask.to_hyperspy(lazy["intensity"])
    assert s._lazy and isinstance(s.data, da.Array)
    assert [a.name for a in s.axes_manager.signal_axes] == ["det_x", "det_y"]
    for axis in s.axes_manager.signal_axes:
        assert same_axis(axis, EXPECTED[axis.name])
    np.testing.assert_allclose(s.data.compute(), data.sum(axis=(0, 1)), rtol=1e-5)


def test_com_field_navigates_its_components(hs, ds):
    result = CoMUDF.with_params(cy=2.0, cx=3.0, r=2.0).compute(ds)
    field = result["field"].values  # (scan_y, scan_x, yx)
    s = ltdask.to_hyperspy(result, "field")
    assert [a.name for a in s.axes_manager.navigation_axes] == ["yx"]
    assert s.axes_manager.signal_shape == NAV[::-1]
    np.testing.assert_array_equal(s.inav[1].data, field[..., 1])
    # the scan navigating, the two components the signal (pyxem's BeamShift layout)
    t = ltdask.to_hyperspy(result["field"], signal_dims=["yx"])
    assert isinstance(t, hs.signals.Signal1D)
    assert t.axes_manager.navigation_shape == NAV[::-1]
    np.testing.assert_array_equal(t.inav[3, 2].data, field[2, 3])


def test_mask_stack_and_custom_dim_names(hs, data):
    ds = ltdask.from_array(data, dims=("y", "x", "ky", "kx"), nav_calibration=(3.0, "nm"))
    ones = np.ones(SIG, np.float32)
    result = ApplyMasksUDF([lambda: ones, lambda: 2 * ones]).compute(ds)
    s = ltdask.to_hyperspy(result)
    # the dims the result's dataset had (its attrs), not the default names, say what is the scan
    assert [a.name for a in s.axes_manager.navigation_axes] == ["mask"]
    assert [a.name for a in s.axes_manager.signal_axes] == ["x", "y"]
    assert [a.scale for a in s.axes_manager.signal_axes] == [3.0, 3.0]
    np.testing.assert_allclose(s.inav[1].data, 2 * data.sum(axis=(2, 3)), rtol=1e-5)


def test_bad_arguments(hs, ds):
    result = CoMUDF.with_params(cy=2.0, cx=3.0, r=2.0).compute(ds)
    with pytest.raises(ValueError, match=r"has the variables \['raw_com'.*name one"):
        ltdask.to_hyperspy(result)
    with pytest.raises(ValueError, match=r"name='nope'; the result has the variables"):
        ltdask.to_hyperspy(result, "nope")
    with pytest.raises(ValueError, match=r"signal_dims=\('det_y',\); expected distinct dims"):
        ltdask.to_hyperspy(result["field"], signal_dims="det_y")
    with pytest.raises(TypeError, match=r"got a ndarray; expected an ltdask DataSet"):
        ltdask.to_hyperspy(np.zeros((2, 2)))
    with pytest.raises(TypeError, match=r"dtype=, chunks= and corrections= apply to datasets"):
        ltdask.to_hyperspy(result["field"], dtype="float64")
    with pytest.raises(TypeError, match=r"name='field' picks a variable of a result"):
        ds.to_hyperspy("field")
    with pytest.raises(ValueError, match=r"name='x' but the DataArray is 'field'"):
        ltdask.to_hyperspy(result["field"], "x")


def test_missing_hyperspy_names_the_extra(monkeypatch, ds):
    # None in sys.modules makes the import fail as if HyperSpy were not installed
    monkeypatch.setitem(sys.modules, "hyperspy", None)
    monkeypatch.setitem(sys.modules, "hyperspy.api", None)
    with pytest.raises(ImportError, match=r'pip install "ltdask\[hyperspy\]"'):
        ds.to_hyperspy()
    with pytest.raises(ImportError, match=r"needs HyperSpy"):
        ltdask.to_hyperspy(xr.Dataset({"a": ("x", np.zeros(2))}))


def test_import_ltdask_does_not_import_hyperspy():
    code = "import sys, ltdask; ltdask.to_hyperspy; print('hyperspy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_diffraction_signal_where_pyxem_is_installed(hs, monkeypatch, ds, data):
    from helpers import fake_pyxem
    from hyperspy.extensions import ALL_EXTENSIONS

    for name, spec in fake_pyxem.SIGNALS.items():
        monkeypatch.setitem(ALL_EXTENSIONS["signals"], name, spec)
    s = ds.to_hyperspy()
    assert type(s) is fake_pyxem.LazyDiffraction2D
    assert s.metadata.Signal.signal_type == "diffraction"
    assert s.axes_manager.signal_axes[0].name == "det_x"
    np.testing.assert_array_equal(s.data.compute(), data)
    frame = ltdask.to_hyperspy(SumUDF().compute(ds))
    assert type(frame) is fake_pyxem.Diffraction2D
    # an image of the scan is not a diffraction pattern
    image = ltdask.to_hyperspy(SumSigUDF().compute(ds))
    assert type(image) is hs.signals.Signal2D


def test_result_round_trip_through_zarr(hs, ds, data, tmp_path):
    ltdask.to_zarr(SumSigUDF().lazy(ds), tmp_path / "res.zarr")
    stored = xr.open_zarr(tmp_path / "res.zarr")
    s = ltdask.to_hyperspy(stored)
    assert s._lazy and [a.name for a in s.axes_manager.signal_axes] == ["scan_x", "scan_y"]
    for axis in s.axes_manager.signal_axes:
        assert same_axis(axis, EXPECTED[axis.name])
    np.testing.assert_allclose(s.data.compute(), data.sum(axis=(2, 3)), rtol=1e-5)


def test_the_docs_round_trip_runs(hs, tmp_path, monkeypatch):
    """The example of docs/coming-from-hyperspy.md (its asserts check it against numpy)."""
    page = Path(__file__).resolve().parent.parent / "docs" / "coming-from-hyperspy.md"
    blocks = re.findall(r"^```python\n(.*?)^```$", page.read_text(), re.MULTILINE | re.DOTALL)
    assert blocks and any("to_hyperspy" in b for b in blocks)
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(page), "exec"), {})
