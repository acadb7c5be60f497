"""``ltdask.plot``: the figures' axes, scale bars and pixels, checked against the dataset's
calibration and the data, computed here by hand."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure
from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

import ltdask
from ltdask.udf import ApplyMasksUDF, CoMUDF, SumSigUDF
from ltdask.views import plot

NAV = (6, 8)
SIG = (10, 12)
#: nav: 2.5 nm a step from 100 nm (y) and 40 nm (x); detector: 0.5 and 0.25 mrad a pixel
NAV_CAL = [(2.5, 100.0, "nm"), (2.5, 40.0, "nm")]
SIG_CAL = [(0.5, -2.5, "mrad"), (0.25, -1.5, "mrad")]


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(5).random(NAV + SIG).astype(np.float32)


@pytest.fixture(scope="module")
def ds(data):
    return ltdask.from_array(data, nav_calibration=NAV_CAL, sig_calibration=SIG_CAL)


def new_axes():
    return Figure().add_subplot()


def size_bars(ax):
    return [a for a in ax.artists if isinstance(a, AnchoredSizeBar)]


def test_virtual_image_axes_in_nanometres(ds, data):
    res = SumSigUDF().compute(ds)
    ax = plot.virtual_image(res, ax=new_axes())
    # pixel centres at 40 + 2.5 * i: the image spans half a step beyond the first and last
    assert ax.get_xlim() == pytest.approx((40 - 1.25, 40 + 2.5 * 7 + 1.25))
    assert ax.get_ylim() == pytest.approx((100 + 2.5 * 5 + 1.25, 100 - 1.25))  # row 0 on top
    assert ax.get_xlabel() == "scan_x (nm)" and ax.get_ylabel() == "scan_y (nm)"
    np.testing.assert_allclose(ax.images[0].get_array(), data.sum(axis=(2, 3)), rtol=1e-5)
    # scale bar: a round length near a fifth of the 20 nm width
    (bar,) = size_bars(ax)
    assert bar.txt_label.get_text() == "2 nm"
    (rect,) = bar.size_bar.get_children()
    assert rect.get_width() == pytest.approx(2.0)
    # colour bar: a second axes with the image's range
    assert len(ax.figure.axes) == 2
    assert ax.get_title() == "intensity"


def test_virtual_image_of_one_detector_of_several(ds, data):
    masks = [lambda: np.ones(SIG, np.float32), lambda: np.eye(*SIG, dtype=np.float32)]
    res = ApplyMasksUDF(masks).compute(ds)
    with pytest.raises(ValueError, match=r"choose one image, e\.g\. \.isel\(mask=0\)"):
        plot.virtual_image(res, ax=new_axes())
    ax = plot.virtual_image(res["intensity"].isel(mask=1), ax=new_axes(), title="eye")
    expected = (data * np.eye(*SIG)).sum(axis=(2, 3))
    np.testing.assert_allclose(ax.images[0].get_array(), expected, rtol=1e-5)
    assert ax.get_xlabel() == "scan_x (nm)" and ax.get_title() == "eye"


def test_uncalibrated_results_count_pixels(data):
    res = SumSigUDF().compute(ltdask.from_array(data))
    ax = plot.virtual_image(res["intensity"], ax=new_axes())
    assert ax.get_xlim() == pytest.approx((-0.5, 7.5))
    assert ax.get_xlabel() == "scan_x"
    assert size_bars(ax) == []  # no units, no scale bar
    ax = plot.virtual_image(np.arange(6.0).reshape(2, 3), ax=new_axes(), colour_bar=False)
    assert ax.get_ylim() == pytest.approx((1.5, -0.5)) and len(ax.figure.axes) == 1


def test_frame_on_the_detector_axes(ds, data):
    ax = plot.frame(ds, (4, 3), ax=new_axes())
    np.testing.assert_array_equal(ax.images[0].get_array(), data[4, 3])
    assert ax.get_xlim() == pytest.approx((-1.5 - 0.125, -1.5 + 0.25 * 11 + 0.125))
    assert ax.get_ylim() == pytest.approx((-2.5 + 0.5 * 9 + 0.25, -2.5 - 0.25))
    assert ax.get_xlabel() == "det_x (mrad)" and ax.get_ylabel() == "det_y (mrad)"
    assert ax.get_title() == "frame (4, 3)"
    # the same frame by its flat position, from the lazy DataArray, from numpy
    flat = 4 * NAV[1] + 3
    for source in (ds, ds.to_xarray(), data):
        shown = plot.frame(source, flat, ax=new_axes()).images[0].get_array()
        np.testing.assert_array_equal(shown, data[4, 3])
    assert plot.frame(ds.to_xarray(), (4, 3), ax=new_axes()).get_xlabel() == "det_x (mrad)"


def test_frame_log_scale(data):
    frame = np.zeros((1, 1, 4, 4), np.float32)
    frame[0, 0, 1, 2] = 100.0
    frame[0, 0, 3, 3] = 0.5
    ax = plot.frame(frame, 0, ax=new_axes(), log=True)
    norm = ax.images[0].norm
    assert (norm.vmin, norm.vmax) == (0.5, 100.0)
    assert ax.images[0].get_array().min() == 0.5  # zeros show as the smallest value


def test_com_field_colours_and_wheel():
    # a hand-made field: +x, -x (half length), +y (down in the image), NaN
    fy = np.array([[0.0, 0.0], [2.0, np.nan]])
    fx = np.array([[2.0, -1.0], [0.0, np.nan]])
    coords = {d: (d, [0.0, 3.0], {"units": "nm"}) for d in ("scan_y", "scan_x")}
    res = xr.Dataset(
        {
            "field_y": (("scan_y", "scan_x"), fy, {"units": "mrad"}),
            "field_x": (("scan_y", "scan_x"), fx, {"units": "mrad"}),
        },
        coords=coords,
    )
    ax = plot.com_field(res, ax=new_axes(), vmax=2.0)
    rgb = ax.images[0].get_array()
    np.testing.assert_allclose(rgb[0, 0], [1, 0, 0])  # +x: red, full length
    np.testing.assert_allclose(rgb[0, 1], [0, 0.5, 0.5])  # -x: cyan, half length
    np.testing.assert_allclose(rgb[1, 0], [0.5, 1, 0])  # +y: a quarter turn, yellow-green
    np.testing.assert_allclose(rgb[1, 1], [0, 0, 0])  # no field: black
    assert ax.get_xlim() == pytest.approx((-1.5, 4.5)) and ax.get_xlabel() == "scan_x (nm)"
    (wheel,) = ax.child_axes
    assert wheel.get_title() == "2 mrad"
    disk = wheel.images[0].get_array()
    middle = disk.shape[0] // 2
    np.testing.assert_allclose(disk[middle, -1, :3], [1, 0, 0])  # right: +x, red
    np.testing.assert_allclose(disk[-1, middle, :3], [0.5, 1, 0])  # bottom: +y
    assert disk[0, 0, 3] == 0  # outside the wheel: transparent


def test_com_field_of_a_com_run_in_physical_units(ds):
    res = CoMUDF.with_params(physical_units=True).compute(ds)
    ax = plot.com_field(res, ax=new_axes())
    length = np.hypot(res["field_y"].values, res["field_x"].values)
    vmax = np.percentile(length, 99)
    assert ax.child_axes[0].get_title() == f"{vmax:.3g} mrad"
    expected = plot.field_colours(res["field_y"].values, res["field_x"].values, vmax=vmax)
    np.testing.assert_allclose(ax.images[0].get_array(), expected)
    assert ax.get_ylabel() == "scan_y (nm)"
    # the field as one variable with (y, x) last gives the same picture
    same = plot.com_field(res["field"], ax=new_axes(), vmax=vmax).images[0].get_array()
    np.testing.assert_allclose(same, expected)


def test_new_figure_with_pyplot(ds):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    ax = plot.virtual_image(SumSigUDF().compute(ds))
    assert ax.figure.number not in before
    plt.close(ax.figure)


def test_without_matplotlib_the_error_says_how_to_install(monkeypatch, ds):
    res = SumSigUDF().compute(ds)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install matplotlib"):
        plot.virtual_image(res)
