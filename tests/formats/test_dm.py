"""open_dm: DM3/DM4 files written by the tests' own writer (``tests/helpers/dmfiles.py``)
read back as the arrays written; RosettaSciIO's reader of the same files is the independent
check of the writer and the reader (data, shape and calibrations).
"""

from __future__ import annotations

import pickle
import re
import shutil
import tempfile
from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr
from helpers.dmfiles import write_dm
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import DataSetError, Shape, Slice
from ltdask.io.formats.dm import DMDataSet, open_dm

VERSIONS = [pytest.param(3, id="dm3"), pytest.param(4, id="dm4")]
DTYPES = ["uint16", "float32", "int8", "uint8", "int16", "int32", "uint32", "float64"]
#: numpy order; DM's (scale, origin, units) with position (index - origin) * scale
CAL_4D = [(2.0, 1.0, "nm"), (3.0, -2.0, "nm"), (0.5, 3.0, "1/nm"), (0.25, 5.5, "1/nm")]


def make(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        return np.round(rng.standard_normal(shape) * 50, 2).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 4000), size=shape).astype(dt)


def rsciio_read(path):
    from rsciio.digitalmicrograph import file_reader

    (signal,) = file_reader(str(path))
    return signal


@pytest.fixture
def small_partitions():
    with dask.config.set({"ltdask.partition-bytes": 700, "ltdask.min-partitions": 1}):
        yield


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_4d_against_numpy_and_rosettasciio(tmp_path, small_partitions, version, dtype):
    """Nav 3 x 5, sig 7 x 11: a transposed dim anywhere would show."""
    data = make((3, 5, 7, 11), dtype)
    path = write_dm(tmp_path / f"scan.dm{version}", data, version=version, calibrations=CAL_4D)
    ds = open_dm(path)
    assert ds.nav_shape == (3, 5) and ds.sig_shape == (7, 11)
    assert ds.dtype == np.dtype(dtype)
    assert len(ds.get_partitions()) > 1
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    signal = rsciio_read(path)
    np.testing.assert_array_equal(np.asarray(signal["data"]), data)
    res = ltdask.udf.SumUDF(dtype="float64").compute(ds)
    np.testing.assert_allclose(res["intensity"].values, data.astype(np.float64).sum(axis=(0, 1)))


@pytest.mark.parametrize("version", VERSIONS)
def test_calibrations_match_rosettasciio(tmp_path, version):
    data = make((3, 5, 7, 11), "uint16")
    path = write_dm(tmp_path / f"scan.dm{version}", data, version=version, calibrations=CAL_4D)
    ds = open_dm(path)
    axes = rsciio_read(path)["axes"]
    ours = ds.nav_calibration + ds.sig_calibration
    for axis, cal, written in zip(axes, ours, CAL_4D, strict=True):
        assert cal.scale == pytest.approx(axis["scale"]) == pytest.approx(written[0])
        assert cal.origin == pytest.approx(axis["offset"])
        assert cal.origin == pytest.approx(-written[1] * written[0])
        assert cal.units == axis["units"] == written[2]
    xa = ds.to_xarray()
    np.testing.assert_allclose(xa["scan_x"].values, 3.0 * (np.arange(5) + 2.0))
    np.testing.assert_allclose(xa["det_x"].values, 0.25 * (np.arange(11) - 5.5))
    assert xa["det_y"].attrs["units"] == "1/nm"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_any_data_offset(tmp_path, version, pad):
    """The pixels start wherever the tags before them end, aligned or not."""
    data = make((2, 3, 5, 6), "float32")
    path = write_dm(tmp_path / f"scan.dm{version}", data, version=version, pad=pad)
    ds = open_dm(path)
    offsets = {ds.fileset.files[0].header_bytes % 4}
    assert len(offsets) == 1
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    np.testing.assert_array_equal(ds.to_dask(dtype="float64", chunks=(1, 2, 3, 4)).compute(), data)


@pytest.mark.parametrize("version", VERSIONS)
def test_stack_and_image(tmp_path, version):
    stack = make((6, 7, 9), "uint16")
    path = write_dm(tmp_path / f"stack.dm{version}", stack, version=version,
                    calibrations=[(1.0, 0.0, "s"), (0.1, 0.0, "nm"), (0.2, 0.0, "nm")])  # fmt: skip
    ds = open_dm(path)
    assert ds.nav_shape == (6,) and ds.sig_shape == (7, 9)
    assert ds.dims == ("frame", "det_y", "det_x")
    np.testing.assert_array_equal(ds.to_dask().compute(), stack)
    np.testing.assert_array_equal(np.asarray(rsciio_read(path)["data"]), stack)
    assert ds.nav_calibration[0].units == "s"
    # a stack that is a scan: nav_shape= reshapes it (nav calibrations no longer apply)
    scan = open_dm(path, nav_shape=(2, 3))
    np.testing.assert_array_equal(scan.to_dask().compute(), stack.reshape(2, 3, 7, 9))
    assert not any(a.calibrated for a in scan.nav_calibration)
    assert scan.sig_calibration[1].scale == pytest.approx(0.2)
    image = make((7, 9), "float32")
    one = open_dm(write_dm(tmp_path / f"image.dm{version}", image, version=version))
    assert one.nav_shape == (1,) and one.sig_shape == (7, 9)
    np.testing.assert_array_equal(one.to_dask().compute()[0], image)


@pytest.mark.parametrize("version", VERSIONS)
def test_big_endian_values(tmp_path, version):
    """Byte order flag 0: tag values and pixels are big-endian."""
    data = make((2, 3, 4, 5), "int16")
    path = write_dm(tmp_path / f"be.dm{version}", data, version=version, byte_order=">",
                    calibrations=CAL_4D)  # fmt: skip
    ds = open_dm(path)
    assert ds.raw_dtype == np.dtype(">i2")
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    assert ds.sig_calibration[0].scale == pytest.approx(0.5)


@pytest.mark.parametrize("version", VERSIONS)
def test_largest_image_is_the_scan(tmp_path, version):
    """The thumbnail (image 0) and smaller images are left out."""
    data = make((2, 3, 6, 4), "uint16")
    extra = make((5, 6), "float32")  # 120 bytes, less than the scan's 288 pixels x 2
    path = write_dm(tmp_path / f"multi.dm{version}", data, version=version, extra_images=(extra,))
    ds = open_dm(path)
    assert ds.metadata["image_index"] == 1 and ds.metadata["name"] == "scan"
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    bigger = make((30, 30), "float32")
    path = write_dm(tmp_path / f"multi2.dm{version}", data, version=version, extra_images=(bigger,))
    ds = open_dm(path)
    assert ds.metadata["image_index"] == 2 and ds.nav_shape == (1,)
    np.testing.assert_array_equal(ds.to_dask().compute()[0], bigger)


def test_transposed_4d_refused_unless_forced(tmp_path):
    data = make((2, 3, 4, 5), "uint16")
    path = write_dm(tmp_path / "t.dm4", data, swapped=None)
    with pytest.raises(DataSetError, match=r"t\.dm4.*Data Order Swapped.*force_c_order=True"):
        open_dm(path)
    np.testing.assert_array_equal(open_dm(path, force_c_order=True).to_dask().compute(), data)
    path = write_dm(tmp_path / "f.dm4", data, swapped=False)
    with pytest.raises(DataSetError, match="transposed"):
        open_dm(path)


#: spectra as GMS stores them: (numpy-order data, Meta Data Format, Signal, calibrations)
SPECTRA = {
    "eels-spectrum-1xN": (
        np.zeros((1, 64), "float32"),
        "Spectrum",
        "EELS",
        [(1.0, 0.0, ""), (0.5, -100, "eV")],
    ),
    "cl-line-67x1336": (
        np.zeros((67, 1336), "uint16"),
        "Spectrum image",
        "CL",
        [(0.1, 0.0, "µm"), (0.3, -1000, "nm")],
    ),
    "eds-spectrum-image": (
        np.zeros((32, 3, 4), "uint32"),
        "Spectrum image",
        "X-ray",
        [(0.01, -5, "keV"), (2.0, 0.0, "nm"), (2.0, 0.0, "nm")],
    ),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", list(SPECTRA))
def test_spectra_are_refused_with_the_reason(tmp_path, version, case):
    """1-D spectra stored as 1 x N images, spectrum line scans and spectrum images are not
    stacks of 2-D frames: RosettaSciIO reads them as spectra (a signal type, one signal axis
    or a conversion to a spectrum signal); ltdask refuses them, naming the tags that say so,
    instead of opening them as frames."""
    data, kind, signal, calibrations = SPECTRA[case]
    path = write_dm(tmp_path / f"s.dm{version}", data, version=version, kind=kind,
                    signal=signal, calibrations=calibrations)  # fmt: skip
    theirs = rsciio_read(path)
    assert theirs["metadata"]["Signal"]["signal_type"] in ("EELS", "CL", "EDS_TEM")
    signal_axes = [a for a in theirs["axes"] if not a["navigate"]]
    assert len(signal_axes) == 1 or len(theirs["post_process"]) == 2  # + to_signal1D
    shape = " x ".join(str(d) for d in data.shape)
    with pytest.raises(
        DataSetError,
        match=rf"s\.dm{version}'?: the {shape} image holds spectra, not a stack of 2-D frames: "
        rf"ImageTags/Meta Data/Format is '{kind}'; ImageTags/Meta Data/Signal is '{signal}'.*"
        r"open spectra with RosettaSciIO or HyperSpy",
    ):
        open_dm(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_bool_data_is_bool(tmp_path, version):
    """DataType 14 (binary images, one byte per pixel) reads as bool, as RosettaSciIO reads
    it, not as uint8."""
    data = make((2, 3, 4, 5), "uint8", seed=7) % 3 == 0
    path = write_dm(tmp_path / f"mask.dm{version}", data, version=version)
    theirs = np.asarray(rsciio_read(path)["data"])
    assert theirs.dtype == np.bool_
    ds = open_dm(path)
    assert ds.dtype == np.bool_
    got = ds.to_dask().compute()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, theirs)
    np.testing.assert_array_equal(got, data)
    sums = ltdask.udf.SumSigUDF().compute(ds)["intensity"].values
    np.testing.assert_array_equal(sums, data.sum(axis=(2, 3)))


@pytest.mark.parametrize("version", VERSIONS)
def test_open_by_suffix_sniff_and_xarray(tmp_path, version):
    data = make((2, 3, 5, 7), "uint16")
    path = write_dm(tmp_path / f"scan.dm{version}", data, version=version, calibrations=CAL_4D)
    assert ltdask.io.detect_format(path) == "dm"
    ds = ltdask.open(path)
    assert isinstance(ds, DMDataSet)
    other = tmp_path / "scan.gatan"
    shutil.copy(path, other)
    assert ltdask.io.detect_format(other) == "dm"
    np.testing.assert_array_equal(ltdask.open(other).to_dask().compute(), data)
    xds = xr.open_dataset(path)  # .dm3/.dm4 go to ltdask without engine=
    np.testing.assert_array_equal(xds["data"].values, data)
    assert ds.metadata["format"] == f"DM{version}"
    assert ds.metadata["voltage_V"] == 300e3


@pytest.mark.parametrize("pad", [0, 1], ids=["even-offset", "odd-offset"])
def test_pickles_small_and_hands_out_views(tmp_path, pad):
    """Views of the file at any data offset (uint16 at an odd byte offset too)."""
    data = make((4, 4, 16, 16), "uint16")
    path = write_dm(tmp_path / "scan.dm4", data, pad=pad)
    ds = open_dm(path)
    assert ds.fileset.files[0].header_bytes % 2 == pad
    assert len(pickle.dumps(ds)) < 4000
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ds)).to_dask().compute(), data)
    assert ds.hands_out_views(np.uint16)
    frames = ds.read_frames(np.arange(3, 9), Slice((0, 0), Shape((16, 16), sig_dims=2)), "u2")
    assert not frames.flags.owndata and not frames.flags.writeable  # a view of the map
    np.testing.assert_array_equal(frames, data.reshape(16, 16, 16)[3:9])
    res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(2, 3)))


def test_info_prints_the_metadata(tmp_path):
    from click.testing import CliRunner

    from ltdask.cli import main

    path = write_dm(tmp_path / "scan.dm4", make((3, 5, 7, 11), "uint16"), calibrations=CAL_4D)
    result = CliRunner().invoke(main, ["info", str(path)])
    assert result.exit_code == 0, result.output
    assert re.search(r"format +dm\n", result.output)
    assert "signal_format" in result.output and "Diffraction image" in result.output
    assert "scan_x: 3 nm" in result.output and "det_x: 0.25 1/nm" in result.output


def test_xarray_engine_carries_the_calibrations(tmp_path):
    data = make((3, 5, 7, 11), "uint16")
    path = write_dm(tmp_path / "scan.dm4", data, calibrations=CAL_4D)
    xds = xr.open_dataset(path, engine="ltdask")
    np.testing.assert_allclose(xds["det_x"].values, 0.25 * (np.arange(11) - 5.5), rtol=1e-6)
    assert xds["scan_y"].attrs["units"] == "nm" and xds["det_y"].attrs["units"] == "1/nm"
    xr.testing.assert_identical(
        xds["data"].coords.to_dataset(), open_dm(path).to_xarray().coords.to_dataset()
    )


def test_udf_results_carry_the_calibrations(tmp_path):
    data = make((3, 5, 7, 11), "uint16")
    ds = open_dm(write_dm(tmp_path / "scan.dm4", data, calibrations=CAL_4D))
    total, sumsig = ltdask.compute(ds, [ltdask.udf.SumUDF(), ltdask.udf.SumSigUDF()])
    np.testing.assert_allclose(total["det_x"].values, 0.25 * (np.arange(11) - 5.5), rtol=1e-6)
    assert total["det_y"].attrs["units"] == "1/nm" and "scan_x" not in total.coords
    np.testing.assert_allclose(sumsig["scan_x"].values, 3.0 * (np.arange(5) + 2.0), rtol=1e-6)
    assert sumsig["scan_y"].attrs["units"] == "nm" and "det_x" not in sumsig.coords


@given(
    st.sampled_from([3, 4]),
    st.lists(st.integers(1, 6), min_size=2, max_size=4),
    st.sampled_from(["uint16", "float32", "int8", "uint32"]),
    st.integers(0, 3),
    st.sampled_from(["<", ">"]),
)
def test_any_shape_reads_back(version, shape, dtype, pad, order):
    """Whatever the dims, dtype, byte order and data offset: the array written."""
    data = make(tuple(shape), dtype, seed=len(shape))
    folder = Path(tempfile.mkdtemp(prefix="ltdask-dm-"))
    try:
        path = write_dm(folder / f"s.dm{version}", data, version=version, pad=pad, byte_order=order)
        ds = open_dm(path)
        expected = data.reshape((1, *shape)) if len(shape) == 2 else data
        assert tuple(ds.shape) == expected.shape
        np.testing.assert_array_equal(ds.to_dask().compute(scheduler="sync"), expected)
    finally:
        shutil.rmtree(folder)
