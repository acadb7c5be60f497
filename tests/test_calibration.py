"""Physical calibrations: `ltdask.io.calibration.axes`, `DataSet.calibrate`, and the
coordinates `to_xarray` gives calibrated dims."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.formatfiles import FORMAT_PARAMS

import ltdask
from ltdask import DataSetError
from ltdask.io.calibration import Axis, axes
from ltdask.udf import SumSigUDF, SumUDF


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, [Axis(), Axis()]),
        (0.5, [Axis(0.5), Axis(0.5)]),
        ((0.5, "nm"), [Axis(0.5, 0, "nm")] * 2),
        ((0.5, -3, "nm"), [Axis(0.5, -3, "nm")] * 2),
        ({"scale": 2, "units": "mrad"}, [Axis(2, 0, "mrad")] * 2),
        ([(1, "nm"), {"origin": 4}], [Axis(1, 0, "nm"), Axis(1, 4, "")]),
        ([2, 3], [Axis(2), Axis(3)]),
        (Axis(7, 1, "um"), [Axis(7, 1, "um")] * 2),
    ],
)
def test_axes_forms(value, expected):
    assert list(axes(value, 2, "cal")) == expected


@pytest.mark.parametrize(
    "value, message",
    [
        ([1, 2, 3], "3 calibrations for 2 dims"),
        ({"scale": 1, "unit": "nm"}, "unknown calibration keys \\['unit'\\]"),
        ((0, "nm"), "scale=0"),
        ((np.nan, "nm"), "must be finite"),
        (("a", "nm"), "is not a number"),
        ("nm", "expected an ltdask.io.calibration.Axis"),
    ],
)
def test_axes_errors(value, message):
    with pytest.raises(ltdask.DataSetError, match=message):
        axes(value, 2, "cal")


def test_to_xarray_coordinates_in_units():
    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    ds = ltdask.from_array(data).calibrate(
        nav=[(2.0, 10.0, "nm"), (0.5, "nm")], sig=(0.25, -0.5, "mrad")
    )
    arr = ds.to_xarray()
    np.testing.assert_allclose(arr["scan_y"].values, [10.0, 12.0])
    np.testing.assert_allclose(arr["scan_x"].values, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(arr["det_x"].values, -0.5 + 0.25 * np.arange(5))
    assert arr["scan_y"].attrs["units"] == "nm"
    assert arr["det_y"].attrs["units"] == "mrad"
    np.testing.assert_array_equal(arr.values, data)
    # selecting by physical coordinate picks the frame at that index
    np.testing.assert_array_equal(arr.sel(scan_y=12.0, scan_x=0.5).values, data[1, 1])


def test_uncalibrated_dims_have_no_coordinates():
    ds = ltdask.from_array(np.zeros((2, 3, 4, 5), np.float32)).calibrate(sig=(0.1, "mrad"))
    arr = ds.to_xarray()
    assert "scan_y" not in arr.coords and "det_y" in arr.coords
    assert ds.nav_calibration == (Axis(), Axis())


def test_dataarray_coordinates_win_over_calibration():
    xr = pytest.importorskip("xarray")
    data = xr.DataArray(
        np.zeros((2, 3, 4, 5)),
        dims=("y", "x", "ky", "kx"),
        coords={"y": [5.0, 6.0]},
    )
    ds = ltdask.from_array(data).calibrate(nav=(1.0, "nm"))
    arr = ds.to_xarray()
    np.testing.assert_array_equal(arr["y"].values, [5.0, 6.0])
    np.testing.assert_array_equal(arr["x"].values, [0.0, 1.0, 2.0])


def test_calibration_checked_against_dims():
    ds = ltdask.from_array(np.zeros((2, 3, 4, 5), np.float32))
    with pytest.raises(ltdask.DataSetError, match="sig_calibration: 3 calibrations for 2 dims"):
        ds.calibrate(sig=[1, 2, 3])


@pytest.mark.parametrize("fmt", FORMAT_PARAMS)
def test_every_opener_takes_calibrations(tmp_path, fmt):
    """``nav_calibration=``/``sig_calibration=`` on each format's opener (and
    ``ltdask.open``) reach ``to_xarray()`` and UDF results as coordinates with units, over
    what the file says."""
    data = fmt.data()
    target, kwargs = fmt.write_to(tmp_path, data)
    cal = {"nav_calibration": (0.5, 1.0, "nm"), "sig_calibration": [(2.0, "mrad"), (3.0, "mrad")]}
    openers = [lambda: fmt.opener(target, **kwargs, **cal)]
    if not fmt.in_memory:
        openers.append(lambda: ltdask.open(target, **kwargs, **cal))
    for open_ds in openers:
        ds = open_ds()
        ny, nx = ds.sig_shape
        xa = ds.to_xarray()
        y, x = ds.dims[-2:]
        np.testing.assert_allclose(xa[x].values, 3.0 * np.arange(nx))
        assert xa[y].attrs["units"] == "mrad"
        first = ds.dims[0]
        np.testing.assert_allclose(xa[first].values, 1.0 + 0.5 * np.arange(ds.nav_shape[0]))
        assert xa[first].attrs["units"] == "nm"
        total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
        assert total["intensity"][y].attrs["units"] == "mrad"
        np.testing.assert_allclose(total["intensity"][y].values, 2.0 * np.arange(ny))
        assert per_frame["intensity"][first].attrs["units"] == "nm"


def test_calibration_keywords_checked():
    with pytest.raises(DataSetError, match="nav_calibration"):
        ltdask.from_array(np.zeros((2, 3, 4, 5)), nav_calibration=[(1, "nm")] * 3)


def test_xarray_engine_takes_calibrations(tmp_path):
    import xarray as xr

    path = tmp_path / "scan.npy"
    np.save(path, np.zeros((2, 3, 4, 5), np.float32))
    xds = xr.open_dataset(
        path, engine="ltdask", nav_calibration=(0.5, "nm"), sig_calibration=(2, "mrad")
    )
    assert xds["scan_x"].attrs["units"] == "nm" and xds["det_y"].attrs["units"] == "mrad"
    np.testing.assert_allclose(xds["det_x"].values, 2.0 * np.arange(5))
    np.testing.assert_allclose(xds["scan_y"].values, 0.5 * np.arange(2))


def test_calibration_overflowing_coordinates_refused_on_calibrate():
    # scale = origin = 1e308 gave inf coordinates; the largest that fit stay accepted
    ds = ltdask.from_array(np.zeros((2, 3, 4, 4), np.float32))
    with pytest.raises(DataSetError, match=r"nav_calibration\[1\]: scale=1e\+308, origin=0"):
        ds.calibrate(nav=(1e308, "nm"))
    assert not any(a.calibrated for a in ds.nav_calibration)  # (nothing set)
    fits = np.finfo(np.float64).max / 2
    ds.calibrate(nav=(fits, "nm"))
    coords = ds.to_xarray().coords["scan_x"].values
    np.testing.assert_array_equal(coords, [0.0, fits, 2 * fits])
    assert np.isfinite(coords).all()
