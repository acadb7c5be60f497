"""CoMUDF's shifts in the units of the detector's calibration (``physical_units=True``),
against the pixel results scaled by hand; the default stays LiberTEM's pixels."""

from __future__ import annotations

import numpy as np
import pytest

import ltdask
from ltdask.udf import CoMUDF

SCALE = np.array([0.25, 0.5])  # mrad per detector pixel along y, x
ORIGIN = np.array([1.0, -2.0])
NAV_STEP = 2.0  # nm per scan step
PARAMS = dict(cy=6, cx=5, r=4.5, scan_rotation=30.0, flip_y=True)


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(3).random((5, 6, 12, 10)).astype(np.float32)


def calibrated(data, sig=None):
    if sig is None:
        sig = [(SCALE[0], ORIGIN[0], "mrad"), (SCALE[1], ORIGIN[1], "mrad")]
    return ltdask.from_array(data, sig_calibration=sig, nav_calibration=(NAV_STEP, "nm"))


def test_default_is_pixels_whatever_the_calibration(data):
    plain = CoMUDF.with_params(**PARAMS).compute(ltdask.from_array(data))
    res = CoMUDF.with_params(**PARAMS).compute(calibrated(data))
    for name in ("raw_com", "raw_shifts", "field", "magnitude", "divergence", "curl"):
        np.testing.assert_array_equal(res[name].values, plain[name].values)
        assert "units" not in res[name].attrs


def test_physical_units_scale_the_pixel_results(data):
    px = CoMUDF.with_params(**PARAMS).compute(ltdask.from_array(data))
    res = CoMUDF.with_params(**PARAMS, physical_units=True).compute(calibrated(data))
    shifts = px["raw_shifts"].values * SCALE
    np.testing.assert_allclose(res["raw_shifts"].values, shifts, rtol=1e-6)
    np.testing.assert_allclose(res["raw_com"].values, ORIGIN + px["raw_com"].values * SCALE, 1e-6)
    # scaled first, then flipped and rotated into scan coordinates (as LiberTEM rotates)
    y, x = -shifts[..., 0], shifts[..., 1]
    a = np.radians(30.0)
    fy, fx = np.cos(a) * y + np.sin(a) * x, -np.sin(a) * y + np.cos(a) * x
    np.testing.assert_allclose(res["field_y"].values, fy, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res["field_x"].values, fx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res["magnitude"].values, np.hypot(fy, fx), rtol=1e-5, atol=1e-7)
    # derivatives along the scan, per nm
    div = np.gradient(fy, NAV_STEP, axis=0) + np.gradient(fx, NAV_STEP, axis=1)
    curl = np.gradient(fy, NAV_STEP, axis=1) - np.gradient(fx, NAV_STEP, axis=0)
    np.testing.assert_allclose(res["divergence"].values, div, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res["curl"].values, curl, rtol=1e-5, atol=1e-6)
    for name in ("raw_com", "raw_shifts", "field", "field_y", "field_x", "magnitude"):
        assert res[name].attrs["units"] == "mrad", name
    assert res["divergence"].attrs["units"] == res["curl"].attrs["units"] == "mrad/nm"
    # the scan's coordinates come along, in their units
    np.testing.assert_allclose(res["scan_x"].values, NAV_STEP * np.arange(6))
    assert res["scan_x"].attrs["units"] == "nm"


def test_regression_is_fitted_to_the_physical_field(data):
    res = CoMUDF.with_params(**PARAMS, regression=0, physical_units=True).compute(calibrated(data))
    plain = CoMUDF.with_params(**PARAMS, physical_units=True).compute(calibrated(data))
    field = plain["field"].values
    np.testing.assert_allclose(res["regression"].values[0], field.mean(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(res["field"].values, field - field.mean(axis=(0, 1)), atol=1e-6)


def test_without_a_calibration_the_units_are_pixels(data):
    px = CoMUDF.with_params(**PARAMS).compute(ltdask.from_array(data))
    res = CoMUDF.with_params(**PARAMS, physical_units=True).compute(ltdask.from_array(data))
    np.testing.assert_array_equal(res["field"].values, px["field"].values)
    assert res["field"].attrs["units"] == "px"
    assert res["divergence"].attrs["units"] == "px/scan step"


def test_two_units_on_the_detector_are_refused(data):
    ds = calibrated(data, sig=[(0.1, "mrad"), (0.1, "1/nm")])
    with pytest.raises(ValueError, match=r"one unit for both dims.*\['1/nm', 'mrad'\]"):
        CoMUDF.with_params(physical_units=True).compute(ds)
