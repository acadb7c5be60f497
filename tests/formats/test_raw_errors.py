"""open_raw on bad input: clear errors that name the file and the offending value, raised
at open time (or, for a file that changed since, when it is read)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers.badinput import (
    FRAMES,
    HUGE,
    NOT_REGULAR,
    RAW_KW,
    SIG,
    expect,
    named,
    record,
    scan_data,
    write_raw,
)

from ltdask import DataSetError, open_raw
from ltdask.udf import SumSigUDF, SumUDF

SUPPORTED = r"expected one of bool, int8, .*, complex128"


def _raw(folder, **kw):
    path = kw.pop("path") if "path" in kw else write_raw(folder)
    return open_raw(path, **{**RAW_KW, **kw})


# the scan: 4 x 6 frames of 8 x 8 uint16 pixels, 3072 bytes
RAW_CASES = [
    pytest.param(dict(path="missing.raw"), FileNotFoundError, r"missing\.raw.*does not exist",
                 id="missing-file"),
    pytest.param(dict(path="."), DataSetError, r"is a directory", id="directory"),
    pytest.param(dict(path="empty"), DataSetError, r"too small: 0 bytes", id="empty-file"),
    pytest.param(dict(path="short"), DataSetError, r"too small: 100 bytes.*one frame \(128",
                 id="shorter-than-one-frame"),
    pytest.param(dict(path="truncated"), DataSetError, r"3000 bytes.*\(56 bytes left over\)",
                 id="truncated-mid-frame"),
    pytest.param(dict(sig_shape=(9, 9)), DataSetError,
                 r"3072 bytes is not the header \(0 bytes\) plus a whole number of frames of "
                 r"162 bytes \(156 bytes left over\)", id="wrong-sig-shape"),
    pytest.param(dict(dtype="uint32", sig_shape=(5, 5)), DataSetError,
                 r"3072 bytes is not the header .* frames of 100 bytes \(72 bytes left over\)",
                 id="wrong-dtype"),
    pytest.param(dict(sig_shape=(64, 64)), DataSetError,
                 r"is too small: 3072 bytes.*one frame \(8192 bytes\)", id="sig-larger-than-file"),
    pytest.param(dict(nav_shape=(HUGE,)), DataSetError, r"nav_shape=\(9223372036854775808,\)",
                 id="nav-2**63"),
    pytest.param(dict(nav_shape=(2**31, 2**31)), DataSetError, r"absurdly large",
                 id="nav-2**62-frames"),
    pytest.param(dict(sig_shape=(2**32, 2**32)), DataSetError, r"sig_shape=.*4294967296",
                 id="sig-2**64-pixels"),
    pytest.param(dict(sig_shape=(HUGE, 1)), DataSetError, r"sig_shape=.*9223372036854775808",
                 id="sig-2**63"),
    pytest.param(dict(sig_shape=(2**40,)), DataSetError, r"too small.*2199023255552",
                 id="frame-of-2TiB"),
    pytest.param(dict(file_header_bytes=HUGE), DataSetError, r"9223372036854775808",
                 id="file-header-2**63"),
    # the message names the frame stride, header + frame + footer
    pytest.param(dict(frame_header_bytes=HUGE), DataSetError, r"one frame \(922337203685477\d+",
                 id="frame-header-2**63"),
    pytest.param(dict(frame_footer_bytes=HUGE), DataSetError, r"frames of 922337203685477\d+",
                 id="frame-footer-2**63"),
    pytest.param(dict(file_header_bytes=4000), DataSetError,
                 r"is too small: 3072 bytes.*header \(4000 bytes\)", id="file-header-beyond-file"),
    pytest.param(dict(frame_header_bytes=3), DataSetError,
                 r"3072 bytes is not the header .* frames of 131 bytes", id="frame-header-misfit"),
    pytest.param(dict(frame_header_bytes=4096), DataSetError, r"too small.*4224",
                 id="frame-header-beyond-file"),
    pytest.param(dict(frame_footer_bytes=200), DataSetError, r"frames of 328 bytes|too small",
                 id="frame-footer-beyond-frame"),
    pytest.param(dict(file_header_bytes=-1), DataSetError, r"file_header_bytes=-1 is negative",
                 id="negative-header"),
    pytest.param(dict(frame_header_bytes=-2), DataSetError, r"frame_header_bytes=-2 is negative",
                 id="negative-frame-header"),
    pytest.param(dict(frame_footer_bytes=-3), DataSetError, r"frame_footer_bytes=-3 is negative",
                 id="negative-frame-footer"),
    pytest.param(dict(frame_header_bytes=1.5), DataSetError,
                 r"frame_header_bytes=1\.5 is not an integer", id="fractional-frame-header"),
    pytest.param(dict(file_header_bytes=1.5), DataSetError,
                 r"file_header_bytes=1\.5 is not an integer", id="fractional-header"),
    pytest.param(dict(frame_header_bytes="8"), DataSetError, r"frame_header_bytes='8'",
                 id="string-header"),
    pytest.param(dict(sync_offset=HUGE), DataSetError, r"sync_offset=9223372036854775808",
                 id="sync-offset-2**63"),
    pytest.param(dict(sync_offset=FRAMES), DataSetError,
                 r"sync_offset=24 is beyond the data; expected a value in \(-24, 24\), the files "
                 r"hold 24", id="sync-offset-past-end"),
    pytest.param(dict(sync_offset=-FRAMES), DataSetError,
                 r"sync_offset=-24 is beyond the data; expected a value in \(-24, 24\)",
                 id="sync-offset-minus-all"),
    pytest.param(dict(sync_offset=1.5), DataSetError, r"sync_offset=1\.5 is not an integer",
                 id="sync-offset-float"),
    pytest.param(dict(sync_offset="3"), DataSetError, r"sync_offset='3' is not an integer",
                 id="sync-offset-str"),
    pytest.param(dict(sync_offset="x"), DataSetError, r"sync_offset='x' is not an integer",
                 id="sync-offset-word"),
    pytest.param(dict(nav_shape=(0, 6)), DataSetError, r"nav_shape=\(0, 6\) has zero",
                 id="nav-zero"),
    pytest.param(dict(nav_shape=(-4,)), DataSetError,
                 r"nav_shape=\(-4,\) has zero or negative dims", id="nav-negative"),
    pytest.param(dict(sig_shape=(8, 0)), DataSetError, r"sig_shape=\(8, 0\) has zero",
                 id="sig-zero"),
    pytest.param(dict(sig_shape=(8, -8)), DataSetError, r"sig_shape=\(8, -8\) has zero or neg",
                 id="sig-negative"),
    pytest.param(dict(nav_shape=None), DataSetError, r"nav_shape=None", id="nav-none"),
    pytest.param(dict(nav_shape=()), DataSetError, r"nav_shape=\(\) needs at least one dim",
                 id="nav-empty"),
    pytest.param(dict(sig_shape=()), DataSetError, r"sig_shape=\(\) needs", id="sig-empty"),
    pytest.param(dict(nav_shape=(2.5,)), DataSetError,
                 r"nav_shape=\(2.5,\) is not a sequence of integers", id="nav-float"),
    pytest.param(dict(sig_shape="abc"), DataSetError,
                 r"sig_shape='abc' is not a sequence of integers", id="sig-str"),
    pytest.param(dict(dtype="S4"), DataSetError, r"dtype='S4'", id="dtype-bytes"),
    pytest.param(dict(dtype="U1"), DataSetError, r"dtype='U1' \(<U1\) is not supported",
                 id="dtype-str"),
    pytest.param(dict(dtype=object), DataSetError, r"dtype=.*object.* is not supported",
                 id="dtype-object"),
    pytest.param(dict(dtype=[("a", "u1"), ("b", "u1")]), DataSetError,
                 r"dtype=.* is not supported: not a bool, integer, float or complex dtype; "
                 + SUPPORTED, id="dtype-structured"),
    pytest.param(dict(dtype="(2,)u1"), DataSetError, r"dtype='\(2,\)u1'.* is not supported",
                 id="dtype-subarray"),
    pytest.param(dict(dtype="uint17"), DataSetError, r"dtype='uint17' is not a numpy dtype",
                 id="dtype-unknown"),
    pytest.param(dict(dims=("a", "b")), DataSetError, r"dims=\('a', 'b'\) must be 4 distinct",
                 id="dims-too-few"),
    pytest.param(dict(dims=("a", "a", "b", "c")), DataSetError,
                 r"dims=\('a', 'a', 'b', 'c'\) must be 4 distinct", id="dims-repeated"),
    pytest.param(dict(path=["ok", "missing-2.raw"]), FileNotFoundError, r"missing-2\.raw",
                 id="second-file-missing"),
    pytest.param(dict(path=[]), DataSetError, r"open_raw: no files given", id="no-files"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "expected", "match"), RAW_CASES)
def test_open_raw(request, tmp_path, kwargs, expected, match):
    kwargs = dict(kwargs)
    path = kwargs.get("path")
    special = {
        "empty": lambda: write_raw(tmp_path, "empty.raw", 0),
        "short": lambda: write_raw(tmp_path, "short.raw", 100),
        "truncated": lambda: write_raw(tmp_path, "truncated.raw", 3000),
        ".": lambda: tmp_path,
    }
    if isinstance(path, list):
        kwargs["path"] = [write_raw(tmp_path) if p == "ok" else tmp_path / p for p in path]
        names = str(kwargs["path"][-1]) if path else None
    elif path in special:
        kwargs["path"] = special[path]()
        names = str(kwargs["path"])
    elif path is not None:
        kwargs["path"] = tmp_path / path
        names = str(kwargs["path"])
    else:
        names = "scan.raw"
    expect(request, expected, match, _raw, tmp_path, names=names, **kwargs)


def test_one_frame_file_sync_offset(tmp_path):
    path = tmp_path / "one.raw"
    np.zeros(SIG, dtype="<u2").tofile(path)
    for offset in (1, -1):
        with pytest.raises(DataSetError, match=rf"sync_offset={offset} is beyond the data"):
            open_raw(path, (1,), SIG, "uint16", sync_offset=offset)


def test_second_file_bad(tmp_path):
    other = tmp_path / "other.raw"
    other.write_bytes(b"\0" * 129)  # one frame and a byte
    with pytest.raises(DataSetError, match=named(other) + r".*129 bytes.*\(1 bytes left"):
        open_raw([write_raw(tmp_path), other], (25,), SIG, "uint16")


def test_nav_larger_than_file_is_invalid_not_wrong(tmp_path):
    """Not an error: frames missing at the end read as zeros and are invalid in results."""
    ds = _raw(tmp_path, nav_shape=(5, 6))
    res = SumSigUDF().compute(ds)
    assert not res["intensity_valid"].values[4].any()
    assert res["intensity_valid"].values[:4].all()
    np.testing.assert_array_equal(
        res["intensity"].values[:4], scan_data().astype(np.float64).sum(axis=(2, 3))
    )
    record("open_raw[nav-larger-than-file]", None, "accepted: missing frames invalid")


@pytest.mark.parametrize("how", ["to_dask", "udf", "float32"])
@pytest.mark.parametrize("size", [0, 1000], ids=["to-0-bytes", "to-1000-bytes"])
def test_file_truncated_after_open(request, tmp_path, how, size):
    """The file shrinks between opening and computing: an error, not a read past its end
    (which returned other memory's contents or crashed with SIGSEGV)."""
    ds = _raw(tmp_path)
    with open(ds.path, "r+b") as f:
        f.truncate(size)
    run = {
        "to_dask": lambda: ds.to_dask().sum().compute(scheduler="sync"),
        "float32": lambda: ds.to_dask(dtype="float32").sum().compute(scheduler="sync"),
        "udf": lambda: SumUDF().compute(ds),
    }[how]
    changed = rf"changed since it was opened \(its size went from \d+ to {size} bytes\)"
    expect(request, DataSetError, changed + "; open it again", run, names=ds.path)


@pytest.mark.timeout(10)
def test_fifo_among_raw_files(request, tmp_path):
    fifo = tmp_path / "scan-2.raw"
    os.mkfifo(fifo)
    paths = [write_raw(tmp_path), fifo]
    expect(request, DataSetError, NOT_REGULAR, open_raw, paths, names=fifo, **RAW_KW)
