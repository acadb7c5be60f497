"""open_mrc: MRC files written by ``mrcfile`` read back as the arrays written, checked
against ``mrcfile``'s and RosettaSciIO's readers of the same files (shape, data, pixel size).
"""

from __future__ import annotations

import pickle
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import dask
import mrcfile
import numpy as np
import pytest
import xarray as xr
from helpers.mrcfiles import swap_byte_order, write_de_movie, write_mrc, write_velox_like
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import MissingFramesWarning
from ltdask.io.formats.mrc import MrcDataSet, open_mrc

#: every mode mrcfile writes: (dtype, mode)
DTYPES = [
    pytest.param("int8", 0, id="mode0-int8"),
    pytest.param("int16", 1, id="mode1-int16"),
    pytest.param("float32", 2, id="mode2-float32"),
    pytest.param("complex64", 4, id="mode4-complex64"),
    pytest.param("uint16", 6, id="mode6-uint16"),
    pytest.param("float16", 12, id="mode12-float16"),
]


def make(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return np.round(rng.standard_normal(shape) * 50, 1).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 4000), size=shape).astype(dt)


def mrcfile_data(path) -> np.ndarray:
    with mrcfile.open(path, permissive=False) as mrc:
        return np.array(mrc.data)


@pytest.fixture
def small_partitions():
    with dask.config.set({"ltdask.partition-bytes": 600, "ltdask.min-partitions": 1}):
        yield


@pytest.mark.parametrize("dtype, mode", DTYPES)
def test_stack_reads_what_mrcfile_wrote(tmp_path, small_partitions, dtype, mode):
    data = make((15, 7, 11), dtype)
    path = write_mrc(tmp_path / "stack.mrc", data)
    ds = open_mrc(path, nav_shape=(3, 5))
    assert ds.header.mode == mode
    assert ds.nav_shape == (3, 5) and ds.sig_shape == (7, 11)
    assert ds.dtype == np.dtype(dtype)
    assert len(ds.get_partitions()) > 1
    truth = mrcfile_data(path)
    np.testing.assert_array_equal(truth, data)
    np.testing.assert_array_equal(ds.to_dask().compute(), data.reshape(3, 5, 7, 11))
    if dtype != "complex64":
        res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
        np.testing.assert_allclose(
            res["intensity"].values, data.astype(np.float64).sum(axis=0), rtol=1e-12
        )


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_volume_stack_gives_the_scan_shape(tmp_path, dtype):
    """mrcfile writes 4-D arrays as volume stacks (space group 401, mz = inner nav dim)."""
    data = make((3, 5, 7, 11), dtype)  # nav 3 x 5, sig 7 x 11: nothing square
    path = write_mrc(tmp_path / "scan.mrc", data)
    truth = mrcfile_data(path)
    assert truth.shape == data.shape
    ds = ltdask.open(path)
    assert isinstance(ds, MrcDataSet)
    assert ds.nav_shape == (3, 5) and ds.sig_shape == (7, 11)
    assert ds.dims == ("scan_y", "scan_x", "det_y", "det_x")
    np.testing.assert_array_equal(ds.to_dask().compute(), truth)
    # nav_shape= overrides the file's
    flat = open_mrc(path, nav_shape=(15,))
    np.testing.assert_array_equal(flat.to_dask().compute(), truth.reshape(15, 7, 11))


def test_volume_not_a_stack_is_frames(tmp_path):
    """A plain 3-D volume (mz = nz) is still a stack of nz frames of (ny, nx)."""
    data = make((6, 5, 4), "float32")
    path = write_mrc(tmp_path / "vol.mrc", data, stack=False)
    with mrcfile.open(path) as mrc:
        assert mrc.header.mz == 6 and mrc.is_volume()
    ds = open_mrc(path)
    assert ds.nav_shape == (6,) and ds.sig_shape == (5, 4)
    np.testing.assert_array_equal(ds.to_dask().compute(), data)


def test_one_frame(tmp_path):
    data = make((1, 9, 13), "uint16")
    path = write_mrc(tmp_path / "one.mrc", data)
    ds = open_mrc(path)
    assert ds.nav_shape == (1,) and ds.sig_shape == (9, 13)
    np.testing.assert_array_equal(ds.to_dask().compute(), data)


@pytest.mark.parametrize("dtype", ["uint16", "float32", "int8"])
def test_against_rosettasciio(tmp_path, dtype):
    """RosettaSciIO reads the same frames and the same pixel size (nm) from the header."""
    from rsciio.mrc import file_reader

    data = make((12, 7, 11), dtype)
    path = write_mrc(tmp_path / "scan.mrc", data, voxel_size=(2.5, 4.0, 1.0))
    ds = open_mrc(path, nav_shape=(3, 4))
    (signal,) = file_reader(str(path))
    theirs = np.asarray(signal["data"])
    if dtype == "int8":  # RosettaSciIO reads mode 0 as uint8; MRC2014 says signed
        assert theirs.dtype == np.uint8
        theirs = theirs.view(np.int8)
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(theirs.shape), theirs)
    axes = signal["axes"]
    for axis, ours in zip(axes[-2:], ds.sig_calibration, strict=True):
        assert ours.units == axis["units"] == "nm"
        assert ours.scale == pytest.approx(axis["scale"])
        assert ours.origin == pytest.approx(axis["offset"])
    assert ds.sig_calibration[1].scale == pytest.approx(0.25)  # x: 2.5 Å
    assert ds.sig_calibration[0].scale == pytest.approx(0.4)  # y: 4.0 Å


def test_calibrated_coordinates(tmp_path):
    data = make((4, 5, 6), "uint16")
    path = write_mrc(tmp_path / "scan.mrc", data, voxel_size=(1.5, 3.0, 1.0))
    xa = open_mrc(path).to_xarray()
    np.testing.assert_allclose(xa["det_x"].values, 0.15 * np.arange(6))
    np.testing.assert_allclose(xa["det_y"].values, 0.3 * np.arange(5))
    assert xa["det_x"].attrs["units"] == "nm"
    # no voxel size: no coordinates
    bare = open_mrc(write_mrc(tmp_path / "bare.mrc", data))
    assert not any(a.calibrated for a in bare.sig_calibration)


@pytest.mark.parametrize("dtype", ["uint16", "float32", "complex64"])
def test_big_endian(tmp_path, dtype):
    data = make((6, 5, 7), dtype)
    little = write_mrc(tmp_path / "le.mrc", data, voxel_size=(2.0, 3.0, 1.0))
    big = swap_byte_order(little, tmp_path / "be.mrc")
    truth = mrcfile_data(big)
    assert truth.dtype.byteorder == ">"
    np.testing.assert_array_equal(truth, data)
    ds = open_mrc(big)
    assert ds.raw_dtype == np.dtype(dtype).newbyteorder(">")
    assert ds.sig_calibration[1].scale == pytest.approx(0.2)
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    np.testing.assert_array_equal(ds.to_dask(dtype="complex128").compute(), data)


@pytest.mark.parametrize("order", ["<", ">"])
def test_no_machine_stamp(tmp_path, order):
    """Old files leave the stamp empty: the byte order in which the header makes sense."""
    data = make((4, 5, 6), "int16")
    path = write_mrc(tmp_path / "le.mrc", data)
    if order == ">":
        path = swap_byte_order(path, tmp_path / "be.mrc")
    raw = bytearray(path.read_bytes())
    raw[212:216] = bytes(4)
    path.write_bytes(bytes(raw))
    ds = open_mrc(path)
    assert ds.raw_dtype.byteorder in (order, "=" if order == "<" else ">")
    np.testing.assert_array_equal(ds.to_dask().compute(), data)


def test_velox_like_extended_header(tmp_path):
    """FEI2 records (Velox reserves 1024 of them): data starts at 1024 + nsymbt."""
    from rsciio.mrc import file_reader

    data = make((6, 8, 10), "uint16")
    path = write_velox_like(tmp_path / "velox.mrc", data)
    ds = open_mrc(path, nav_shape=(2, 3))
    assert ds.fileset.files[0].header_bytes == 1024 + 1024 * 888
    np.testing.assert_array_equal(ds.to_dask().compute(), data.reshape(2, 3, 8, 10))
    np.testing.assert_array_equal(mrcfile_data(path), data)
    (signal,) = file_reader(str(path))
    np.testing.assert_array_equal(signal["data"], data)
    meta = ds.metadata
    assert meta["extended_header_type"] == "FEI2"
    assert meta["camera"] == "EMPAD" and meta["application"] == "Velox"
    assert meta["pixel_size_xy"] == pytest.approx((5.68e-9, 5.68e-9))
    assert ds.sig_calibration[1].scale == pytest.approx(5.68, rel=1e-6)


def test_open_by_suffix_sniff_and_xarray(tmp_path):
    data = make((2, 3, 5, 7), "uint16")
    path = write_mrc(tmp_path / "scan.mrc", data, voxel_size=(1.0, 2.0, 1.0))
    assert ltdask.io.detect_format(path) == "mrc"
    other = tmp_path / "scan.frames"  # no suffix claims it: 'MAP' at byte 208 does
    shutil.copy(path, other)
    assert ltdask.io.detect_format(other) == "mrc"
    np.testing.assert_array_equal(ltdask.open(other).to_dask().compute(), data)
    xds = xr.open_dataset(path, engine="ltdask")
    np.testing.assert_array_equal(xds["data"].values, data)
    xds = xr.open_dataset(path)  # .mrc goes to ltdask without engine=
    assert xds["data"].shape == data.shape


def test_sync_offset_and_longer_nav(tmp_path):
    data = make((10, 4, 6), "float32")
    path = write_mrc(tmp_path / "scan.mrc", data)
    ds = open_mrc(path, nav_shape=(2, 4), sync_offset=2)
    np.testing.assert_array_equal(ds.to_dask().compute(), data[2:].reshape(2, 4, 4, 6))
    with pytest.warns(MissingFramesWarning):
        longer = open_mrc(path, nav_shape=(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingFramesWarning)
        got = longer.to_dask().compute()
    np.testing.assert_array_equal(got[:2].reshape(8, 4, 6), data[:8])
    np.testing.assert_array_equal(got.reshape(12, 4, 6)[10:], 0)


def test_pickles_small_and_hands_out_views(tmp_path):
    data = make((8, 16, 16), "uint16")
    path = write_mrc(tmp_path / "scan.mrc", data)
    ds = open_mrc(path, nav_shape=(2, 4))
    assert len(pickle.dumps(ds)) < 4000
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again.to_dask().compute(), data.reshape(2, 4, 16, 16))
    assert ds.hands_out_views(np.uint16)  # zero copy: mapped straight
    assert dask.base.tokenize(ds) == dask.base.tokenize(open_mrc(path, nav_shape=(2, 4)))


def test_info_prints_the_metadata(tmp_path):
    from click.testing import CliRunner

    from ltdask.cli import main

    path = write_velox_like(tmp_path / "velox.mrc", make((6, 8, 10), "uint16"))
    result = CliRunner().invoke(main, ["info", str(path), "--nav-shape", "2,3"])
    assert result.exit_code == 0, result.output
    assert re.search(r"nav shape +\(2, 3\)", result.output)
    assert "camera" in result.output and "EMPAD" in result.output
    assert "det_x: 5.68 nm" in result.output


@given(
    st.lists(st.integers(1, 7), min_size=3, max_size=4),
    st.sampled_from(["uint16", "float32", "int8", "int16"]),
    st.booleans(),
)
def test_any_shape_reads_back(shape, dtype, swap):
    """Whatever the dims, dtype and byte order: the array mrcfile reads."""
    data = make(tuple(shape), dtype, seed=len(shape))
    folder = Path(tempfile.mkdtemp(prefix="ltdask-mrc-"))
    try:
        path = write_mrc(folder / "s.mrc", data)
        if swap:
            path = swap_byte_order(path, folder / "swapped.mrc")
        truth = mrcfile_data(path)
        ds = open_mrc(path)
        assert tuple(ds.shape) == data.shape  # (mrcfile reads one 2-D frame as 2-D)
        assert truth.size == data.size
        got = ds.to_dask().compute(scheduler="sync")
        np.testing.assert_array_equal(got, truth.reshape(data.shape))
    finally:
        shutil.rmtree(folder)


DE_SCAN = {
    "Scan - Enable": "Enable",
    "Scan - Type": "Raster",
    "Scan - Size X": 5,
    "Scan - Size Y": 3,
    "Image Size X (pixels)": 11,
    "Image Size Y (pixels)": 7,
    "Specimen Pixel Size X (nanometers)": 1.5,
    "Specimen Pixel Size Y (nanometers)": 2.5,
    "Camera Model": "Celeritas",
}


def test_de_movie_scan_shape_from_info(tmp_path):
    """The raster scan of ``_info.txt`` is the nav shape, as RosettaSciIO reads it."""
    from rsciio.mrc import file_reader

    frames = make((15, 7, 11), "uint16")
    path = write_de_movie(tmp_path, frames, DE_SCAN)
    ds = ltdask.open(path)
    assert ds.nav_shape == (3, 5) and ds.sig_shape == (7, 11)
    np.testing.assert_array_equal(ds.to_dask().compute(), frames.reshape(3, 5, 7, 11))
    (signal,) = file_reader(str(path))
    np.testing.assert_array_equal(np.asarray(signal["data"]), frames.reshape(3, 5, 7, 11))
    assert [a.scale for a in ds.nav_calibration] == [2.5, 1.5]
    assert ds.nav_calibration[0].units == "nm"
    assert ds.metadata["camera"] == "Celeritas" and ds.metadata["scan_type"] == "Raster"
    assert ds.metadata["de_info"].endswith("20241021_00405_info.txt")
    # nav_shape= still wins
    assert open_mrc(path, nav_shape=(15,)).nav_shape == (15,)


@pytest.mark.parametrize(
    ("changes", "frames", "nav"),
    [
        pytest.param({"Scan - ROI Enable": "Enable", "Scan - ROI Size X": 3,
                      "Scan - ROI Size Y": 2}, 6, (2, 3), id="roi"),
        pytest.param({}, 30, (2, 3, 5), id="repeated-scan"),
        pytest.param({}, 12, (3, 5), id="aborted-scan"),
        pytest.param({}, 17, (17,), id="frames-do-not-fit"),
        pytest.param({"Scan - Type": "Custom"}, 15, (15,), id="not-raster"),
        pytest.param({"Scan - Enable": "Disable"}, 15, (15,), id="no-scan"),
        pytest.param({"Scan - Size X": "many"}, 15, (15,), id="size-not-a-number"),
        pytest.param({"Scan - Size X": -5}, 15, (15,), id="size-negative"),
    ],
)  # fmt: skip
def test_de_movie_info_variants(tmp_path, changes, frames, nav):
    data = make((frames, 4, 6), "uint16")
    path = write_de_movie(tmp_path, data, {**DE_SCAN, **changes})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingFramesWarning)
        ds = open_mrc(path)
        got = ds.to_dask().compute()
    assert ds.nav_shape == nav
    np.testing.assert_array_equal(got.reshape(-1, 4, 6)[:frames], data)


def test_de_info_of_another_name_is_not_used(tmp_path):
    frames = make((15, 4, 6), "uint16")
    path = write_de_movie(tmp_path, frames, DE_SCAN, name="scan_movie.mrc")
    assert open_mrc(path).nav_shape == (15,)
