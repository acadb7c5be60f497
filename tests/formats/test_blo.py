"""NanoMEGAS ``.blo``: frames and calibrations against RosettaSciIO's reader (8-bit files; it
misreads 16-bit ones) and the numpy frames the test-side writer wrote
(``tests/helpers/blofiles.py``). LiberTEM 0.16's decoded frames of 8- and 16-bit files are
checked in ``tests/reference``."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from helpers.blofiles import blo_frames, write_blo

import ltdask
from ltdask.cli import main as cli
from ltdask.udf import SumSigUDF, SumUDF


def rsciio_read(path):
    try:
        import skimage  # noqa: F401
    except ImportError:
        # rsciio.blockfile imports scikit-image for its writer's intensity scaling only;
        # its reader does not use it
        sys.modules["skimage"] = types.ModuleType("skimage")
    from rsciio.blockfile import file_reader

    return file_reader(str(path))[0]


@pytest.mark.parametrize(
    ("nav", "edge", "pad"),
    [((3, 5), 9, None), ((1, 7), 16, 12), ((4, 1), 3, 0), ((2, 2), 1, 7)],
    ids=["3x5-9px", "1x7-16px-pad12", "4x1-3px-nopad", "2x2-1px-pad7"],
)
def test_u8_equals_rsciio(tmp_path, nav, edge, pad):
    frames = blo_frames(int(np.prod(nav)), edge, seed=edge)
    path = write_blo(tmp_path / "scan.blo", frames, nav, pad=pad, step=(1.25, 3.5), sdp=400)
    ds = ltdask.open_blo(path)
    assert ds.nav_shape == nav and ds.sig_shape == (edge, edge) and ds.dtype == np.uint8
    data = ds.to_dask().compute()
    np.testing.assert_array_equal(data.reshape(-1, edge, edge), frames)
    theirs = rsciio_read(path)
    np.testing.assert_array_equal(data.reshape(theirs["data"].shape), theirs["data"])
    axes = {a["name"]: a for a in theirs["axes"]}
    ours = dict(zip(("y", "x", "dy", "dx"), ds.nav_calibration + ds.sig_calibration, strict=True))
    for name, axis in axes.items():
        assert ours[name].scale == pytest.approx(axis["scale"], rel=1e-12), name
        assert ours[name].units == axis["units"], name


def test_u16(tmp_path):
    frames = blo_frames(6, 5, bits=16, seed=1)
    ds = ltdask.open(write_blo(tmp_path / "scan.blo", frames, (2, 3), bits=16))
    assert type(ds).__name__ == "BloDataSet" and ds.dtype == np.uint16
    assert ds.metadata["bit_depth"] == 16
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(6, 5, 5), frames)


def test_udfs_skip_the_record_headers(tmp_path):
    frames = blo_frames(12, 7, seed=2)
    ds = ltdask.open_blo(write_blo(tmp_path / "scan.blo", frames, (3, 4)))
    sums, sig_sums = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_array_equal(sums["intensity"].values, frames.sum(axis=0))
    np.testing.assert_array_equal(
        sig_sums["intensity"].values, frames.sum(axis=(1, 2)).reshape(3, 4)
    )


@pytest.mark.parametrize("cut", [0, 20], ids=["whole-records", "partial-record"])
def test_truncated_acquisition(tmp_path, cut):
    """Fewer records than NY x NX (and part of another): the missing positions read as zeros,
    as RosettaSciIO pads them, and are invalid."""
    frames = blo_frames(12, 6, seed=3)
    path = write_blo(tmp_path / "scan.blo", frames, (3, 4), records=8 + (cut > 0), cut_bytes=cut)
    with pytest.warns(ltdask.MissingFramesWarning) as caught:
        ds = ltdask.open_blo(path)
    if cut:
        assert any("ends inside frame 8" in str(w.message) for w in caught)
    assert ds.nav_shape == (3, 4) and ds.image_count == 8
    data = ds.to_dask().compute()
    np.testing.assert_array_equal(data.reshape(12, 6, 6)[:8], frames[:8])
    assert not data.reshape(12, -1)[8:].any()
    with pytest.warns(UserWarning, match="zero padding"):
        theirs = rsciio_read(path)
    np.testing.assert_array_equal(data, theirs["data"])
    res = SumSigUDF().compute(ds)
    assert res["intensity_valid"].values.ravel().tolist() == [True] * 8 + [False] * 4


def test_sync_offset_and_sig_shape(tmp_path):
    frames = blo_frames(6, 4, seed=4)
    path = write_blo(tmp_path / "scan.blo", frames, (2, 3))
    ds = ltdask.open_blo(path, sync_offset=1, sig_shape=(2, 8))
    data = ds.to_dask().compute().reshape(6, 16)
    np.testing.assert_array_equal(data[:5], frames[1:].reshape(5, 16))
    assert not data[5].any()


def test_virtual_bright_field_and_metadata(tmp_path):
    frames = blo_frames(6, 4, seed=5)
    ds = ltdask.open_blo(write_blo(tmp_path / "scan.blo", frames, (2, 3)))
    vbf = frames.reshape(6, -1).mean(axis=1).astype(np.uint8).reshape(2, 3)
    np.testing.assert_array_equal(ds.virtual_bright_field(), vbf)
    md = ds.metadata
    assert md["beam_energy_kV"] == 200.0 and md["scan_rotation_deg"] == 12.5
    assert md["acquisition_time"] == "2015-12-01T15:36:00"
    assert md["note"] == "Precession angle : 0.6 / Scan speed : 20 ms"


def test_xarray_and_info(tmp_path):
    frames = blo_frames(6, 4, seed=6)
    path = write_blo(tmp_path / "scan.blo", frames, (2, 3), step=(2.0, 4.0))
    ds = xr.open_dataset(path)  # the suffix is the ltdask engine's
    np.testing.assert_array_equal(ds["data"].values.reshape(6, 4, 4), frames)
    xa = ltdask.open_blo(path).to_xarray()
    np.testing.assert_allclose(xa["scan_x"].values, [0.0, 4.0, 8.0])
    assert xa["scan_x"].attrs["units"] == "nm" and xa["det_x"].attrs["units"] == "cm"
    out = CliRunner().invoke(cli, ["info", str(path)])
    assert out.exit_code == 0, out.output
    assert "blo" in out.output and "Precession angle" in out.output
