"""EMPAD (XML + raw): frames, scan shapes and calibrations against RosettaSciIO's reader and
the numpy frames the test-side writer wrote (``tests/helpers/empadfiles.py``).

LiberTEM 0.16's decoded frames of more cases are checked in ``tests/reference``."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from helpers.empadfiles import empad_frames, write_empad

import ltdask
from ltdask.cli import main as cli
from ltdask.udf import SumSigUDF, SumUDF


def rsciio_read(path, **kwargs):
    from rsciio.empad import file_reader

    return file_reader(str(path), **kwargs)[0]


def in_nm(scale, units):
    import pint

    return (scale * pint.UnitRegistry()(units)).to("nm").magnitude


@pytest.mark.parametrize("nav", [(3, 5), (1, 7), (4, 1), (1, 1)], ids=["3x5", "1x7", "4x1", "1x1"])
def test_scan_equals_rsciio(tmp_path, nav):
    frames = empad_frames(int(np.prod(nav)), seed=sum(nav))
    frames[0, 5, 7] = np.nan  # EMPAD frames may hold NaN: read as they are
    xml = write_empad(tmp_path, frames, nav, fov=(6e-8, 1.1e-7), pixelsize=2.5e-11)
    ds = ltdask.open_empad(xml)
    assert ds.nav_shape == nav and ds.sig_shape == (128, 128) and ds.dtype == np.float32
    data = ds.to_dask().compute()
    theirs = rsciio_read(xml)
    np.testing.assert_array_equal(data.reshape(theirs["data"].shape), theirs["data"])
    np.testing.assert_array_equal(data.reshape(-1, 128, 128), frames)
    # calibrations: RosettaSciIO's axes (of dims longer than 1) in its units, ours in nm, 1/nm
    axes = {a["name"]: a for a in theirs["axes"]}
    ours = dict(zip(ds.dims, ds.nav_calibration + ds.sig_calibration, strict=True))
    for name, dim in (("scan_y", "scan_y"), ("scan_x", "scan_x")):
        if name in axes:
            expected = in_nm(axes[name]["scale"], axes[name]["units"])
            assert ours[dim].units == "nm"
            assert ours[dim].scale == pytest.approx(expected, rel=1e-9)
    for name, dim in (("height", "det_y"), ("width", "det_x")):
        assert ours[dim].units == axes[name]["units"] == "1/nm"
        assert ours[dim].scale == pytest.approx(axes[name]["scale"], rel=1e-12)
        assert ours[dim].origin == pytest.approx(axes[name]["offset"], rel=1e-12)


@pytest.mark.parametrize("dotted", [True, False], ids=["v0.51-dotted-tag", "nested"])
def test_scan_field_of_view_equals_rsciio(tmp_path, dotted):
    """EMPAD v0.51 writes the field of view in ``<optics.get_full_scan_field_of_view>``, one
    element whose tag name holds a dot; the scan's scale is that width over the scan's
    pixels, per dim (y, x), as RosettaSciIO reads it."""
    nav, fov = (2, 4), (6e-8, 1.6e-7)
    xml = write_empad(tmp_path, empad_frames(8, seed=2), nav, fov=fov, fov_dotted=dotted)
    ds = ltdask.open_empad(xml)
    axes = {a["name"]: a for a in rsciio_read(xml)["axes"]}
    for i, (name, cal) in enumerate(zip(("scan_y", "scan_x"), ds.nav_calibration, strict=True)):
        expected = fov[i] / nav[i] * 1e9  # metres over pixels, in nm
        assert in_nm(axes[name]["scale"], axes[name]["units"]) == pytest.approx(expected)
        assert (cal.scale, cal.units) == (pytest.approx(expected, rel=1e-12), "nm")


def test_series_equals_rsciio(tmp_path):
    frames = empad_frames(6, seed=3)
    xml = write_empad(tmp_path, frames, (6,), kind="series")
    ds = ltdask.open(xml)
    assert type(ds).__name__ == "EMPADDataSet"
    assert ds.nav_shape == (6,) and ds.dims == ("frame", "det_y", "det_x")
    np.testing.assert_array_equal(ds.to_dask().compute(), rsciio_read(xml)["data"])


def test_footer_rows_never_reach_udfs(tmp_path):
    """The writer fills the two metadata rows with 1e30: any sum that saw them would show."""
    frames = empad_frames(10, seed=4)
    ds = ltdask.open_empad(write_empad(tmp_path, frames, (2, 5)))
    sums, sig_sums = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_allclose(sums["intensity"].values, frames.sum(axis=0), rtol=1e-5, atol=1e-2)
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(2, 5)
    np.testing.assert_allclose(sig_sums["intensity"].values, expected, rtol=1e-5)


def test_open_by_raw_file(tmp_path):
    frames = empad_frames(6, seed=5)
    write_empad(tmp_path, frames, (2, 3), xml_name="acquisition.xml")
    raw = tmp_path / "scan_x3_y2.raw"
    # the descriptor next to it is found (it names this raw file)
    ds = ltdask.open_empad(raw)
    assert ds.nav_shape == (2, 3) and ds.xml_path.endswith("acquisition.xml")
    assert ds.metadata["timestamp"] == "2026-01-02T03:04:05.678"
    # with nav_shape, the raw file alone
    ds = ltdask.open(raw, format="empad", nav_shape=(3, 2))
    assert ds.nav_shape == (3, 2) and ds.xml_path is None
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(6, 128, 128), frames)


def test_search_parameters_when_acquire_does_not_fit(tmp_path):
    frames = empad_frames(6, seed=6)
    xml = write_empad(tmp_path, frames, (2, 3), acquire=(128, 128), search=(2, 3), pix=False)
    assert ltdask.open_empad(xml).nav_shape == (2, 3)


def test_sync_offset_and_missing_frames(tmp_path):
    frames = empad_frames(6, seed=7)
    xml = write_empad(tmp_path, frames, (2, 3))
    ds = ltdask.open_empad(xml, sync_offset=-2)
    data = ds.to_dask().compute().reshape(6, 128, 128)
    np.testing.assert_array_equal(data[2:], frames[:4])
    assert not data[:2].any()
    assert ds.valid_nav_mask().ravel().tolist() == [False, False, True, True, True, True]


@pytest.mark.parametrize("cut", [3000, 66559], ids=["inside-pixels", "all-but-one-byte"])
def test_partial_last_frame(tmp_path, cut):
    """An interrupted acquisition: the last frame's pixels are cut; it is left out (warned)
    and its position is invalid; the XML's scan shape stays."""
    frames = empad_frames(6, seed=8)
    xml = write_empad(tmp_path, frames, (2, 3), cut_bytes=cut)
    with pytest.warns(ltdask.MissingFramesWarning, match=r"scan_x3_y2\.raw.* ends inside frame 5"):
        ds = ltdask.open_empad(xml)
    assert ds.nav_shape == (2, 3) and ds.image_count == 5
    data = ds.to_dask().compute().reshape(6, 128, 128)
    np.testing.assert_array_equal(data[:5], frames[:5])
    assert not data[5].any()
    res = SumSigUDF().compute(ds)
    assert res["intensity_valid"].values.ravel().tolist() == [True] * 5 + [False]


def test_cut_footer_keeps_the_frame(tmp_path):
    frames = empad_frames(4, seed=9)
    ds = ltdask.open_empad(write_empad(tmp_path, frames, (2, 2), cut_bytes=1000))
    assert ds.image_count == 4
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(4, 128, 128), frames)


def test_xarray_engine_and_coordinates(tmp_path):
    frames = empad_frames(6, seed=10)
    xml = write_empad(tmp_path, frames, (2, 3), fov=(8e-8, 1.2e-7), pixelsize=2.5e-11)
    ds = xr.open_dataset(xml, engine="ltdask")
    assert ds["data"].shape == (2, 3, 128, 128)
    np.testing.assert_array_equal(ds["data"].values.reshape(6, 128, 128), frames)
    assert xr.backends.plugins.guess_engine(str(xml)) == "ltdask"
    xa = ltdask.open_empad(xml).to_xarray()
    assert xa["scan_x"].attrs["units"] == "nm"
    np.testing.assert_allclose(xa["scan_x"].values, np.arange(3) * 40.0)
    np.testing.assert_allclose(xa["scan_y"].values, np.arange(2) * 40.0)
    np.testing.assert_allclose(xa["det_x"].values, (np.arange(128) - 64) * 0.025)
    assert xa["det_x"].attrs["units"] == "1/nm"


def test_info_shows_metadata_and_calibration(tmp_path):
    xml = write_empad(tmp_path, empad_frames(2, seed=11), (1, 2), pixelsize=2.5e-11)
    out = CliRunner().invoke(cli, ["info", str(xml)])
    assert out.exit_code == 0, out.output
    assert "empad" in out.output and "EMPADDataSet" in out.output
    assert "exposure_time" in out.output and "300000.0" in out.output
