"""Bad input: clear errors that name the file and the offending value, raised at open time."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ltdask
from ltdask import DataSetError

SIG = (5, 7)


def named(path) -> str:
    """A regex for `path` as messages show it, with or without quotes."""
    return "'?" + re.escape(str(path)) + "'?"


@pytest.fixture
def raw_path(tmp_path):
    """Four uint16 frames of 5 x 7 pixels (280 bytes)."""
    path = tmp_path / "scan.raw"
    np.arange(4 * 5 * 7, dtype="<u2").tofile(path)
    return str(path)


def test_data_set_error_is_value_error():
    assert issubclass(DataSetError, ValueError)
    assert issubclass(DataSetError, ltdask.LtdaskError)


RAW_ERRORS = [
    pytest.param(
        {"sig_shape": (50, 50)},
        r"is too small: 280 bytes.*one frame \(5000 bytes\)",
        id="file-smaller-than-one-frame",
    ),
    pytest.param(
        {"file_header_bytes": 300},
        r"is too small: 280 bytes.*header \(300 bytes\)",
        id="header-larger-than-file",
    ),
    pytest.param(
        {"sig_shape": (5, 6)},
        r"280 bytes is not the header \(0 bytes\) plus a whole number of frames of 60 bytes "
        r"\(40 bytes left over\)",
        id="sig-shape-mismatch",
    ),
    pytest.param(
        {"dtype": "uint32", "sig_shape": (3, 7)},
        r"280 bytes is not the header .* frames of 84 bytes \(28 bytes left over\)",
        id="dtype-mismatch",
    ),
    pytest.param(
        {"frame_header_bytes": 3},
        r"280 bytes is not the header .* frames of 73 bytes",
        id="frame-header-mismatch",
    ),
    pytest.param(
        {"nav_shape": (-4,)}, r"nav_shape=\(-4,\) has zero or negative dims", id="nav-neg"
    ),
    pytest.param({"nav_shape": (2, 0)}, r"nav_shape=\(2, 0\) has zero or negative", id="nav-zero"),
    pytest.param({"sig_shape": (0, 7)}, r"sig_shape=\(0, 7\) has zero or negative", id="sig-zero"),
    pytest.param({"sig_shape": (5, -7)}, r"sig_shape=\(5, -7\) has zero or negative", id="sig-neg"),
    pytest.param({"nav_shape": ()}, r"nav_shape=\(\) needs at least one dim", id="nav-empty"),
    pytest.param(
        {"nav_shape": (2.5,)}, r"nav_shape=\(2.5,\) is not a sequence of integers", id="nav-float"
    ),
    pytest.param(
        {"sig_shape": "abc"}, r"sig_shape='abc' is not a sequence of integers", id="sig-str"
    ),
    pytest.param({"dtype": "foo"}, r"dtype='foo' is not a numpy dtype", id="dtype-unknown"),
    pytest.param(
        {"dtype": [("a", "u1"), ("b", "u1")]},
        r"dtype=.* is not supported: not a bool, integer, float or complex dtype; expected one of "
        r"bool, int8, .*, complex128",
        id="dtype-structured",
    ),
    pytest.param({"dtype": object}, r"dtype=.*object.* is not supported", id="dtype-object"),
    pytest.param({"dtype": "U1"}, r"dtype='U1' \(<U1\) is not supported", id="dtype-str"),
    pytest.param({"dtype": "(2,)u1"}, r"dtype='\(2,\)u1'.* is not supported", id="dtype-subarray"),
    pytest.param(
        {"sync_offset": 4},
        r"sync_offset=4 is beyond the data; expected a value in \(-4, 4\), the files hold 4",
        id="sync-offset-past-end",
    ),
    pytest.param(
        {"sync_offset": -4},
        r"sync_offset=-4 is beyond the data; expected a value in \(-4, 4\)",
        id="sync-offset-before-start",
    ),
    pytest.param({"sync_offset": 1.5}, r"sync_offset=1.5 is not an integer", id="sync-float"),
    pytest.param({"sync_offset": "x"}, r"sync_offset='x' is not an integer", id="sync-str"),
    pytest.param({"file_header_bytes": -1}, r"file_header_bytes=-1 is negative", id="header-neg"),
    pytest.param({"frame_header_bytes": -2}, r"frame_header_bytes=-2 is negative", id="fh-neg"),
    pytest.param({"frame_footer_bytes": -3}, r"frame_footer_bytes=-3 is negative", id="ff-neg"),
    pytest.param(
        {"file_header_bytes": 1.5}, r"file_header_bytes=1.5 is not an integer", id="header-float"
    ),
    pytest.param(
        {"dims": ("a", "b")}, r"dims=\('a', 'b'\) must be 3 distinct names", id="dims-too-few"
    ),
    pytest.param(
        {"dims": ("a", "a", "b")}, r"dims=\('a', 'a', 'b'\) must be 3 distinct", id="dims-repeated"
    ),
]


@pytest.mark.parametrize("kwargs, message", RAW_ERRORS)
def test_open_raw_errors(raw_path, kwargs, message):
    args = {"nav_shape": (4,), "sig_shape": SIG, "dtype": "uint16", **kwargs}
    with pytest.raises(DataSetError, match=named(raw_path)) as info:
        ltdask.open_raw(raw_path, **args)
    assert re.search(message, str(info.value)), str(info.value)


def test_one_frame_file_sync_offset(tmp_path):
    path = tmp_path / "one.raw"
    np.zeros(SIG, dtype="<u2").tofile(path)
    for offset in (1, -1):
        with pytest.raises(DataSetError, match=rf"sync_offset={offset} is beyond the data"):
            ltdask.open_raw(path, (1,), SIG, "uint16", sync_offset=offset)


def test_second_file_bad(tmp_path, raw_path):
    other = tmp_path / "other.raw"
    other.write_bytes(b"\0" * 71)
    with pytest.raises(DataSetError, match=named(other) + r".*71 bytes.*\(1 bytes left"):
        ltdask.open_raw([raw_path, other], (5,), SIG, "uint16")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.raw"
    path.write_bytes(b"")
    with pytest.raises(DataSetError, match=named(path) + r".* is too small: 0 bytes"):
        ltdask.open_raw(path, (4,), SIG, "uint16")


def test_no_files():
    with pytest.raises(DataSetError, match="open_raw: no files given"):
        ltdask.open_raw([], (4,), SIG, "uint16")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.raw"
    with pytest.raises(FileNotFoundError, match=named(path) + " does not exist"):
        ltdask.open_raw(path, (4,), SIG, "uint16")


def test_missing_second_file(tmp_path, raw_path):
    path = tmp_path / "nope.raw"
    with pytest.raises(FileNotFoundError, match=named(path)):
        ltdask.open_raw([raw_path, path], (4,), SIG, "uint16")


def test_directory(tmp_path):
    with pytest.raises(DataSetError, match=named(tmp_path) + ".* is a directory"):
        ltdask.open_raw(tmp_path, (4,), SIG, "uint16")


def test_complex_read_as_real(tmp_path):
    path = tmp_path / "complex.raw"
    np.zeros((4, *SIG), dtype="<c8").tofile(path)
    ds = ltdask.open_raw(path, (4,), SIG, "complex64")
    message = named(path) + r": cannot read complex data \(complex64\) as float32"
    with pytest.raises(DataSetError, match=message):
        ds.to_dask(dtype="float32")
    with pytest.raises(DataSetError, match=message):
        ds.to_xarray(dtype="float32")
    with pytest.raises(DataSetError, match=r"as int16"):
        ds.to_dask(dtype="int16")


def test_to_dask_bad_dtype(raw_path):
    ds = ltdask.open_raw(raw_path, (4,), SIG, "uint16")
    with pytest.raises(DataSetError, match=named(raw_path) + ".*dtype='foo' is not a numpy"):
        ds.to_dask(dtype="foo")
    with pytest.raises(DataSetError, match="is not supported"):
        ds.to_dask(dtype="U3")


# --- .npy ----------------------------------------------------------------------------------------


@pytest.fixture
def npy_path(tmp_path):
    path = tmp_path / "scan.npy"
    np.save(path, np.arange(3 * 4 * 5, dtype="<f4").reshape(3, 4, 5))
    return str(path)


def test_npy_truncated(tmp_path, npy_path):
    data = open(npy_path, "rb").read()
    path = tmp_path / "truncated.npy"
    path.write_bytes(data[:-10])
    message = (
        named(path) + r" is truncated: its header says \(3, 4, 5\) float32 "
        r"\(\d+ bytes with the header\), the file has \d+"
    )
    with pytest.raises(DataSetError, match=message):
        ltdask.open_npy(path)


def test_npy_truncated_header(tmp_path, npy_path):
    data = open(npy_path, "rb").read()
    path = tmp_path / "truncated.npy"
    path.write_bytes(data[:30])
    with pytest.raises(DataSetError, match=named(path) + " is not a valid .npy file"):
        ltdask.open_npy(path)


def test_npy_not_npy(raw_path):
    with pytest.raises(DataSetError, match=named(raw_path) + " is not a valid .npy file"):
        ltdask.open_npy(raw_path)


def test_npy_fortran(tmp_path):
    path = tmp_path / "fortran.npy"
    np.save(path, np.asfortranarray(np.zeros((3, 4, 5))))
    with pytest.raises(DataSetError, match=named(path) + ".* Fortran-ordered"):
        ltdask.open_npy(path)


def test_npy_object(tmp_path):
    path = tmp_path / "object.npy"
    np.save(path, np.array([[1, "a"], [2, "b"]], dtype=object), allow_pickle=True)
    with pytest.raises(DataSetError, match=named(path) + ".* is not supported"):
        ltdask.open_npy(path, sig_dims=1)


@pytest.mark.parametrize("sig_dims", [0, 3, -1, 1.5])
def test_npy_sig_dims(npy_path, sig_dims):
    message = re.escape(f"{npy_path!r}: sig_dims={sig_dims!r} does not fit the array shape")
    with pytest.raises(DataSetError, match=message):
        ltdask.open_npy(npy_path, sig_dims=sig_dims)


def test_npy_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npy"):
        ltdask.open_npy(tmp_path / "nope.npy")


def test_npy_directory(tmp_path):
    with pytest.raises(DataSetError, match="is a directory"):
        ltdask.open_npy(tmp_path)


def test_npy_sync_offset(npy_path):
    with pytest.raises(DataSetError, match=named(npy_path) + ": sync_offset=3 is beyond"):
        ltdask.open_npy(npy_path, sig_dims=2, sync_offset=3)


# --- from_array ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "array, sig_dims, message",
    [
        pytest.param(np.zeros((3, 4)), 2, r"sig_dims=2 does not fit .* \(3, 4\)", id="no-nav"),
        pytest.param(np.zeros((3, 4)), 0, r"sig_dims=0 does not fit", id="no-sig"),
        pytest.param(np.zeros(3), 1, r"sig_dims=1 does not fit", id="1d"),
        pytest.param(np.zeros((0, 4)), 1, r"nav_shape=\(0,\) has zero", id="empty-nav"),
        pytest.param(np.zeros((3, 4), dtype=object), 1, "is not supported", id="object"),
        pytest.param(np.zeros((3, 4), dtype="U2"), 1, "is not supported", id="str"),
    ],
)
def test_from_array_errors(array, sig_dims, message):
    with pytest.raises(DataSetError, match=message):
        ltdask.from_array(array, sig_dims=sig_dims)


def test_from_array_complex_as_real():
    ds = ltdask.from_array(np.zeros((2, 3, 4), dtype=np.complex128), sig_dims=1)
    with pytest.raises(DataSetError, match=r"cannot read complex data \(complex128\) as float64"):
        ds.to_dask(dtype="float64")
