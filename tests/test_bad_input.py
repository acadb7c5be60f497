"""Malformed input to every public opener and to UDF runs, systematically.

Every case must raise a clear, documented exception: ``ltdask.DataSetError`` (a
``ValueError``), ``FileNotFoundError``, ``ltdask.UDFError`` or ``ValueError`` (``TypeError``
for arguments of the wrong type), with the file and the offending value in the message;
never a segfault, a numba/h5py/zarr internal error or a silently wrong result. NaN and inf
in the data propagate as numpy propagates them.

At the end of the module a table of every case and what it raised is printed (pytest's
terminal, not captured). Hypothesis fuzzes the header parsers: ``.npy`` headers, Merlin
``.mib`` frame headers and ``.hdr`` files, and ``raw_csr`` TOML descriptors.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import UDF, DataSetError, UDFError
from ltdask.udf import (
    ApplyMasksUDF,
    AutoUDF,
    CoMUDF,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)


def _opener(module: str, name: str) -> Callable:
    """``ltdask.NAME`` where ltdask exports it, else from its module."""
    return getattr(ltdask, name, None) or getattr(importlib.import_module(module), name)


open_raw = ltdask.open_raw
open_npy = ltdask.open_npy
from_array = ltdask.from_array
open_hdf5 = _opener("ltdask.io.formats.hdf5", "open_hdf5")
open_zarr = _opener("ltdask.io.formats.zarr", "open_zarr")
open_raw_csr = _opener("ltdask.io.formats.raw_csr", "open_raw_csr")
open_mib = _opener("ltdask.io.formats.mib", "open_mib")
open_dataset = importlib.import_module("ltdask.io.open").open_dataset
open_any = getattr(ltdask, "open", None) or open_dataset

NAV = (4, 6)
SIG = (8, 8)
FRAMES = math.prod(NAV)
#: the documented exception types
DOCUMENTED = (DataSetError, FileNotFoundError, UDFError, ValueError, TypeError)
HUGE = 2**63
#: ``case id -> (exception type, first line of the message)``, printed at the end
TABLE: dict[str, tuple[str, str]] = {}
#: fuzz test name -> how often each outcome was seen, printed at the end
FUZZ_SEEN: dict[str, Counter] = {}
_fuzz_dirs: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def report_table(request):
    """Print every case's exception at the end of the module."""
    yield
    lines = [f"bad input: {len(TABLE)} cases and what they raise"]
    width = max((len(k) for k in TABLE), default=0)
    for case, (kind, message) in sorted(TABLE.items()):
        lines.append(f"{case:<{width}}  {kind:<18} {message[:110]}")
    for name, seen in sorted(FUZZ_SEEN.items()):
        lines.append(f"fuzz {name}: {dict(seen)}")
    _print_uncaptured(request, lines)


def _print_uncaptured(request, lines: list[str]) -> None:
    """Write to pytest's terminal past output capture (fixture teardown is captured)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or len(lines) < 2:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line("")
        reporter.write_sep("-", lines[0])
        for line in lines[1:]:
            reporter.write_line(line)


def _message(error: BaseException) -> str:
    return "\n".join([str(error), *getattr(error, "__notes__", [])])


def _record(case: str, error: BaseException | None, note: str = "") -> None:
    if error is None:
        TABLE[case] = ("(no error)", note)
    else:
        first = _message(error).splitlines()[0] if str(error) else ""
        # pytest's temporary folders make long names: keep the file's own name
        first = re.sub(r"/[^\s']*/pytest-\d+/[^/\s']+/", ".../", first)
        TABLE[case] = (type(error).__name__, first)


def _case_id(request) -> str:
    return request.node.name.replace("test_", "", 1)


def expect(request, expected, match: str | None, fn, *args, names: str | None = None, **kwargs):
    """Call ``fn`` and check that it raises `expected` with a message matching `match` and
    naming `names` (a path), and nothing from numba, h5py or zarr internals."""
    with pytest.raises(expected) as info:
        fn(*args, **kwargs)
    error = info.value
    _record(_case_id(request), error)
    assert isinstance(error, DOCUMENTED), f"undocumented {type(error)}: {error}"
    module = type(error).__module__
    assert not module.startswith(("numba", "h5py", "zarr", "llvmlite")), (module, error)
    message = _message(error)
    if match is not None:
        assert re.search(match, message), f"{message!r} does not match {match!r}"
    if names is not None:
        assert os.path.basename(os.fspath(names).rstrip("/")) in message, (
            f"{message!r} does not name {names}"
        )
    return error


# -- files ---------------------------------------------------------------------------------------
def scan_data(dtype="<u2") -> np.ndarray:
    return np.arange(FRAMES * math.prod(SIG), dtype=np.int64).reshape(*NAV, *SIG).astype(dtype)


def write_raw(folder: Path, name="scan.raw", nbytes: int | None = None) -> Path:
    path = folder / name
    raw = scan_data().tobytes()
    path.write_bytes(raw if nbytes is None else raw[:nbytes])
    return path


def npy_bytes(header: dict | str, version=(1, 0)) -> bytes:
    """A ``.npy`` preamble with `header` (a dict or its literal text), padded as numpy does."""
    text = (header if isinstance(header, str) else repr(header)).encode("utf-8")
    magic = b"\x93NUMPY" + bytes(version)
    length_bytes = 2 if version == (1, 0) else 4
    total = len(magic) + length_bytes + len(text) + 1
    text = text + b" " * (-total % 64) + b"\n"
    length = len(text).to_bytes(length_bytes, "little")
    return magic + length + text


def write_hdf5(folder: Path, name="scan.h5", **datasets) -> Path:
    import h5py

    path = folder / name
    with h5py.File(path, "w") as f:
        for key, value in datasets.items():
            if isinstance(value, dict):
                f.create_dataset(key, **value)
            else:
                f.create_dataset(key, data=value)
    return path


def write_zarr(folder: Path, data, name="scan.zarr", **create) -> Path:
    import zarr

    path = folder / name
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, **create)
    if data.size:
        z[...] = data
    return path


def csr_files(folder: Path, data=None, **overrides) -> Path:
    """A raw_csr scan; `overrides` replace descriptor lines (value None drops the key)."""
    import scipy.sparse

    data = scan_data("<f4") if data is None else data
    csr = scipy.sparse.csr_matrix(data.reshape(FRAMES, -1))
    csr.indptr.astype("<i8").tofile(folder / "ptr.raw")
    csr.indices.astype("<i4").tofile(folder / "idx.raw")
    csr.data.astype("<f4").tofile(folder / "val.raw")
    params = {
        "filetype": '"raw_csr"',
        "nav_shape": str(list(NAV)),
        "sig_shape": str(list(SIG)),
    }
    section = {
        "indptr_file": '"ptr.raw"',
        "indptr_dtype": '"<i8"',
        "indices_file": '"idx.raw"',
        "indices_dtype": '"<i4"',
        "data_file": '"val.raw"',
        "data_dtype": '"<f4"',
    }
    for key, value in overrides.items():
        target = params if key in ("filetype", "nav_shape", "sig_shape", "sync_offset") else section
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    lines = ["[params]", *(f"{k} = {v}" for k, v in params.items()), "", "[raw_csr]"]
    lines += [f"{k} = {v}" for k, v in section.items()]
    path = folder / "scan.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def mib_header(
    seq=1,
    size=384,
    chips="01",
    width="0008",
    height="0008",
    ptype="U16",
    layout="  1x1",
    depth="12",
    raw_fields: list[str] | None = None,
) -> bytes:
    fields = raw_fields or [
        "MQ1", f"{seq:06d}", f"{size:05d}" if isinstance(size, int) else size, chips, width,
        height, ptype, layout, "01", "2024-06-14 11:31:30.060732", "0.001000", "0", "0", "0",
        "1.0E+0", "0", "0", "0", "0", "0", "MQ1A", "2024-06-14T11:31:30.060732Z",
        "1000ns", depth,
    ]  # fmt: skip
    text = ",".join(fields).encode("latin-1")
    full = size if isinstance(size, int) and size > len(text) else len(text) + 1
    return text.ljust(full, b"\x00")


def write_mib(folder: Path, frames: int = FRAMES, name="scan.mib", header=None, data_bytes=None,
              nbytes: int | None = None) -> Path:  # fmt: skip
    """A U16 Merlin file of 8 x 8 frames (``header`` replaces the frame headers)."""
    path = folder / name
    pixels = data_bytes if data_bytes is not None else math.prod(SIG) * 2
    out = bytearray()
    for i in range(frames):
        out += header if header is not None else mib_header(seq=i + 1)
        out += bytes(pixels)
    path.write_bytes(bytes(out if nbytes is None else out[:nbytes]))
    return path


def write_hdr(folder: Path, text: str, name="scan.hdr") -> Path:
    path = folder / name
    path.write_text(text)
    return path


HDR_OK = (
    "HDR,\t\nTime and Date Stamp (day, mnth, yr, hr, min, s):\t14/06/2024 11:31:30\n"
    "Chip ID:\tW529_F5,-,-,-\nFrames in Acquisition (Number):\t{frames}\n"
    "Frames per Trigger (Number):\t{per_trigger}\nCounter Depth (number):\t12\nEnd\t"
)


# -- open_raw ------------------------------------------------------------------------------------
def _raw(folder, **kw):
    path = kw.pop("path") if "path" in kw else write_raw(folder)
    args = dict(nav_shape=NAV, sig_shape=SIG, dtype="uint16")
    args.update(kw)
    return open_raw(path, **args)


RAW_CASES = [
    pytest.param(dict(path="missing.raw"), FileNotFoundError, r"missing\.raw.*does not exist",
                 id="missing-file"),
    pytest.param(dict(path="."), DataSetError, r"is a directory", id="directory"),
    pytest.param(dict(path="empty"), DataSetError, r"too small: 0 bytes", id="empty-file"),
    pytest.param(dict(path="short"), DataSetError, r"too small: 100 bytes.*one frame \(128",
                 id="shorter-than-one-frame"),
    pytest.param(dict(path="truncated"), DataSetError, r"3000 bytes.*\(56 bytes left over\)",
                 id="truncated-mid-frame"),
    pytest.param(dict(sig_shape=(9, 9)), DataSetError, r"frames of 162 bytes",
                 id="wrong-sig-shape"),
    pytest.param(dict(sig_shape=(64, 64)), DataSetError, r"too small.*8192",
                 id="sig-larger-than-file"),
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
    pytest.param(dict(file_header_bytes=4000), DataSetError, r"header \(4000 bytes\)",
                 id="file-header-beyond-file"),
    pytest.param(dict(frame_header_bytes=4096), DataSetError, r"too small.*4224",
                 id="frame-header-beyond-file"),
    pytest.param(dict(frame_footer_bytes=200), DataSetError, r"frames of 328 bytes|too small",
                 id="frame-footer-beyond-frame"),
    pytest.param(dict(file_header_bytes=-1), DataSetError, r"file_header_bytes=-1 is negative",
                 id="negative-header"),
    pytest.param(dict(frame_header_bytes=1.5), DataSetError, r"frame_header_bytes=1\.5",
                 id="fractional-header"),
    pytest.param(dict(frame_header_bytes="8"), DataSetError, r"frame_header_bytes='8'",
                 id="string-header"),
    pytest.param(dict(sync_offset=HUGE), DataSetError, r"sync_offset=9223372036854775808",
                 id="sync-offset-2**63"),
    pytest.param(dict(sync_offset=-FRAMES), DataSetError, r"sync_offset=-24 is beyond",
                 id="sync-offset-minus-all"),
    pytest.param(dict(sync_offset="3"), DataSetError, r"sync_offset='3'", id="sync-offset-str"),
    pytest.param(dict(nav_shape=(0, 6)), DataSetError, r"nav_shape=\(0, 6\) has zero",
                 id="nav-zero"),
    pytest.param(dict(sig_shape=(8, 0)), DataSetError, r"sig_shape=\(8, 0\) has zero",
                 id="sig-zero"),
    pytest.param(dict(nav_shape=None), DataSetError, r"nav_shape=None", id="nav-none"),
    pytest.param(dict(sig_shape=()), DataSetError, r"sig_shape=\(\) needs", id="sig-empty"),
    pytest.param(dict(dtype="S4"), DataSetError, r"dtype='S4'", id="dtype-bytes"),
    pytest.param(dict(dtype=object), DataSetError, r"dtype=.*object", id="dtype-object"),
    pytest.param(dict(dtype="uint17"), DataSetError, r"dtype='uint17'", id="dtype-unknown"),
    pytest.param(dict(dims=("a", "b")), DataSetError, r"dims=\('a', 'b'\)", id="dims-too-few"),
    pytest.param(dict(path=["ok", "missing-2.raw"]), FileNotFoundError, r"missing-2\.raw",
                 id="second-file-missing"),
    pytest.param(dict(path=[]), DataSetError, r"no files", id="no-files"),
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


def test_open_raw_nav_larger_than_file_is_invalid_not_wrong(tmp_path):
    """Not an error: frames missing at the end read as zeros and are invalid in results."""
    ds = _raw(tmp_path, nav_shape=(5, 6))
    res = SumSigUDF().compute(ds)
    assert not res["intensity_valid"].values[4].any()
    assert res["intensity_valid"].values[:4].all()
    np.testing.assert_array_equal(
        res["intensity"].values[:4], scan_data().astype(np.float64).sum(axis=(2, 3))
    )
    _record("open_raw[nav-larger-than-file]", None, "accepted: missing frames invalid")


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


# -- open_npy ------------------------------------------------------------------------------------
def _npy_file(folder: Path, content) -> Path:
    path = folder / "scan.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    return path


GOOD_HEADER = {"descr": "<u2", "fortran_order": False, "shape": (*NAV, *SIG)}
NPY_CASES = [
    pytest.param(None, {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param(b"", {}, DataSetError, r"not a valid \.npy", id="empty-file"),
    pytest.param(b"\x00" * 300, {}, DataSetError, r"not a valid \.npy", id="not-npy"),
    pytest.param(b"\x93NUMPY\x01\x00\xff", {}, DataSetError, r"not a valid \.npy",
                 id="truncated-preamble"),
    pytest.param(npy_bytes(GOOD_HEADER)[:40], {}, DataSetError, r"not a valid \.npy",
                 id="truncated-header"),
    pytest.param(npy_bytes("{'descr': '<u2', 'shape': (4, 6"), {}, DataSetError,
                 r"not a valid \.npy", id="garbage-header"),
    pytest.param(npy_bytes("__import__('os').system('true')"), {}, DataSetError,
                 r"not a valid \.npy", id="code-in-header"),
    pytest.param(npy_bytes(GOOD_HEADER) + b"\x00" * 100, {}, DataSetError,
                 r"truncated.*\(4, 6, 8, 8\)", id="truncated-data"),
    pytest.param(npy_bytes(GOOD_HEADER), {}, DataSetError, r"truncated", id="header-only"),
    pytest.param(npy_bytes({**GOOD_HEADER, "shape": (HUGE, 8, 8)}), {}, DataSetError,
                 r"9223372036854775808", id="shape-2**63"),
    pytest.param(npy_bytes({**GOOD_HEADER, "shape": (2**40, 2**40, 8, 8)}), {}, DataSetError,
                 r"1099511627776", id="shape-2**80-frames"),
    pytest.param(npy_bytes({**GOOD_HEADER, "shape": (-4, 6, 8, 8)}), {}, DataSetError,
                 r"not a valid \.npy|-4", id="shape-negative"),
    pytest.param(npy_bytes({**GOOD_HEADER, "descr": "<q9"}), {}, DataSetError,
                 r"not a valid \.npy|q9", id="descr-unknown"),
    pytest.param(np.zeros((0, 6, 8, 8), np.uint16), {}, DataSetError, r"\(0, 6\) has zero",
                 id="zero-frames"),
    pytest.param(np.zeros((4, 6, 0, 8), np.uint16), {}, DataSetError, r"\(0, 8\) has zero",
                 id="zero-sig"),
    pytest.param(np.zeros((4, 6, 8, 8), np.uint16).T, {}, DataSetError, r"Fortran",
                 id="fortran-order"),
    pytest.param(np.array([None] * 8).reshape(2, 2, 2), {}, DataSetError,
                 r"not a valid \.npy|object", id="object-dtype"),
    pytest.param(np.zeros((2, 3, 4), "S2"), {}, DataSetError, r"S2|not supported",
                 id="bytes-dtype"),
    pytest.param(np.zeros((2, 3, 4), "u2,f4"), {}, DataSetError, r"not supported",
                 id="structured-dtype"),
    pytest.param(np.zeros(8, np.uint16), {}, DataSetError, r"sig_dims=2 does not fit .*\(8,\)",
                 id="1d-array"),
    pytest.param(np.zeros((), np.uint16), {}, DataSetError, r"sig_dims=2 does not fit",
                 id="0d-array"),
    pytest.param(scan_data(), {"sig_dims": 4}, DataSetError, r"sig_dims=4 does not fit",
                 id="sig-dims-all"),
    pytest.param(scan_data(), {"sig_dims": 0}, DataSetError, r"sig_dims=0", id="sig-dims-0"),
    pytest.param(scan_data(), {"sig_dims": 1.5}, DataSetError, r"sig_dims=1\.5",
                 id="sig-dims-float"),
    pytest.param(scan_data(), {"sync_offset": HUGE}, DataSetError, r"sync_offset=9223",
                 id="sync-offset-2**63"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "kwargs", "expected", "match"), NPY_CASES)
def test_open_npy(request, tmp_path, content, kwargs, expected, match):
    if content is None:
        path = tmp_path / "missing.npy"
    elif isinstance(content, str) and content == "dir":
        path = tmp_path / "dir.npy"
        path.mkdir()
    else:
        path = _npy_file(tmp_path, content)
    expect(request, expected, match, open_npy, path, names=path, **kwargs)


# -- from_array ----------------------------------------------------------------------------------
ARRAY_CASES = [
    pytest.param(np.zeros(8), {}, r"sig_dims=2 does not fit an array of shape \(8,\)", id="1d"),
    pytest.param(np.zeros(()), {}, r"sig_dims=2 does not fit", id="0d"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": 3}, r"sig_dims=3", id="sig-dims-all"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": -1}, r"sig_dims=-1", id="sig-dims-negative"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": "2"}, r"sig_dims='2'", id="sig-dims-str"),
    pytest.param(np.zeros((0, 3, 4, 4)), {}, r"nav_shape=\(0, 3\) has zero", id="zero-nav"),
    pytest.param(np.zeros((2, 3, 4, 0)), {}, r"sig_shape=\(4, 0\) has zero", id="zero-sig"),
    pytest.param(np.array([None] * 8).reshape(2, 2, 2), {}, r"object", id="object-dtype"),
    pytest.param(np.zeros((2, 2, 2), "U3"), {}, r"<U3", id="str-dtype"),
    pytest.param(np.zeros((2, 2, 2), "u2,f4"), {}, r"not supported", id="structured-dtype"),
    pytest.param(da.zeros((2**40, 2**40, 64, 64), chunks=(2**39, 2**39, 64, 64)), {},
                 r"absurdly large", id="dask-2**80-frames"),
    pytest.param(np.zeros((2, 3, 4, 4)), {"dims": ("a", "a", "b", "c")}, r"distinct",
                 id="dims-repeated"),
    pytest.param(None, {}, r"sig_dims=2 does not fit", id="none"),
]  # fmt: skip


@pytest.mark.parametrize(("array", "kwargs", "match"), ARRAY_CASES)
def test_from_array(request, array, kwargs, match):
    expect(request, DataSetError, match, from_array, array, **kwargs)


# -- open_hdf5 -----------------------------------------------------------------------------------
def _h5(folder: Path, kind: str) -> tuple[Path, dict]:
    data = scan_data()
    if kind == "missing":
        return folder / "missing.h5", {}
    if kind == "dir":
        (folder / "dir.h5").mkdir()
        return folder / "dir.h5", {}
    if kind == "empty":
        (folder / "empty.h5").write_bytes(b"")
        return folder / "empty.h5", {}
    if kind == "not-hdf5":
        (folder / "scan.h5").write_bytes(data.tobytes())
        return folder / "scan.h5", {}
    if kind == "truncated-metadata":
        path = write_hdf5(folder, data=data)
        raw = path.read_bytes()
        path.write_bytes(raw[:600])
        return path, {"key": "data"}
    if kind == "truncated-data":
        path = write_hdf5(folder, data=data)
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) - 1000])
        return path, {"key": "data"}
    if kind == "damaged-chunk":
        path = write_hdf5(folder, data=dict(data=data, chunks=(1, 6, 8, 8), compression="gzip"))
        import h5py

        with h5py.File(path, "r") as f:
            info = f["data"].id.get_chunk_info(3)
        raw = bytearray(path.read_bytes())
        raw[info.byte_offset : info.byte_offset + info.size] = b"\x5a" * info.size
        path.write_bytes(bytes(raw))
        return path, {"key": "data"}
    if kind == "truncated-chunks":
        path = write_hdf5(folder, data=dict(data=data, chunks=(1, 6, 8, 8), compression="gzip"))
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 2])
        return path, {"key": "data"}
    raise ValueError(kind)


HDF5_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", {}, DataSetError, r"not an HDF5 file", id="empty-file"),
    pytest.param("not-hdf5", {}, DataSetError, r"not an HDF5 file", id="raw-bytes"),
    pytest.param("truncated-metadata", {}, DataSetError, r"truncated|damaged",
                 id="truncated-metadata"),
    pytest.param("truncated-data", {}, DataSetError, r"truncated", id="truncated-data"),
    pytest.param("truncated-chunks", {}, DataSetError, r"truncated|damaged|beyond",
                 id="truncated-compressed-chunks"),
    pytest.param("damaged-chunk", {}, DataSetError, r"cannot read .*'/data'",
                 id="damaged-compressed-chunk"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), HDF5_CASES)
def test_open_hdf5_files(request, tmp_path, kind, kwargs, expected, match):
    path, keys = _h5(tmp_path, kind)

    def open_and_read():
        ds = open_hdf5(path, **keys, **kwargs)
        ds.to_dask().sum().compute(scheduler="sync")

    expect(request, expected, match, open_and_read, names=path)


HDF5_CONTENT_CASES = [
    pytest.param({"data": scan_data()}, {"key": "nope"}, r"'nope'", id="missing-key"),
    pytest.param({"grp/data": scan_data()}, {"key": "grp"}, r"'/?grp'.*group|not a dataset",
                 id="key-is-group"),
    pytest.param({"data": np.zeros((8, 8))}, {"key": "data"}, r"\(8, 8\)", id="2d-no-nav"),
    pytest.param({"data": np.zeros((2, 3, 4), "S3")}, {"key": "data"}, r"S3|not supported",
                 id="bytes-dtype"),
    pytest.param({"data": np.zeros((2, 3, 4), "u2,f4")}, {"key": "data"}, r"not supported",
                 id="compound-dtype"),
    pytest.param({"data": np.zeros((0, 6, 8, 8), np.uint16)}, {"key": "data"},
                 r"\(0, 6\) has zero", id="zero-frames"),
    pytest.param({"data": scan_data()}, {"key": "data", "sig_dims": 0}, r"sig_dims=0",
                 id="sig-dims-0"),
    pytest.param({"data": scan_data()}, {"key": "data", "sig_dims": 4}, r"sig_dims=4|\(4, 6, 8",
                 id="sig-dims-all"),
    pytest.param({"data": scan_data()}, {"key": "data", "nav_shape": (HUGE,)},
                 r"9223372036854775808", id="nav-shape-2**63"),
    pytest.param({"data": scan_data()}, {"key": "data", "sync_offset": HUGE},
                 r"sync_offset=9223", id="sync-offset-2**63"),
    pytest.param({"a": scan_data(), "b": scan_data()}, {}, r"/a.*/b|several|key=",
                 id="ambiguous-no-key"),
]  # fmt: skip


@pytest.mark.parametrize(("datasets", "kwargs", "match"), HDF5_CONTENT_CASES)
def test_open_hdf5_content(request, tmp_path, datasets, kwargs, match):
    path = write_hdf5(tmp_path, **datasets)
    expect(request, DataSetError, match, open_hdf5, path, names=path, **kwargs)


# -- open_zarr -----------------------------------------------------------------------------------
def _zarr(folder: Path, kind: str):
    if kind == "missing":
        return folder / "missing.zarr"
    if kind == "file":
        path = folder / "file.zarr"
        path.write_bytes(b"not a store")
        return path
    if kind == "empty-dir":
        path = folder / "empty.zarr"
        path.mkdir()
        return path
    if kind == "garbage-json":
        path = folder / "bad.zarr"
        path.mkdir()
        (path / "zarr.json").write_text("{not json")
        return path
    if kind == "wrong-json":
        path = folder / "bad.zarr"
        path.mkdir()
        (path / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "array"}))
        return path
    if kind == "huge-shape":
        path = write_zarr(folder, scan_data(), name="huge.zarr")
        meta = json.loads((path / "zarr.json").read_text())
        meta["shape"] = [2**40, 2**40, 8, 8]
        (path / "zarr.json").write_text(json.dumps(meta))
        return path
    raise ValueError(kind)


ZARR_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-store"),
    pytest.param("file", {}, DataSetError, r"not a Zarr|cannot open", id="file-not-store"),
    pytest.param("empty-dir", {}, DataSetError, r"not a Zarr|cannot open|no Zarr",
                 id="empty-directory"),
    pytest.param("garbage-json", {}, DataSetError, r"cannot open|not a Zarr|JSON",
                 id="garbage-metadata"),
    pytest.param("wrong-json", {}, DataSetError, r"cannot open|not a Zarr",
                 id="incomplete-metadata"),
    pytest.param("huge-shape", {}, DataSetError, r"1099511627776|absurdly large",
                 id="shape-2**80-frames"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), ZARR_CASES)
def test_open_zarr_stores(request, tmp_path, kind, kwargs, expected, match):
    path = _zarr(tmp_path, kind)
    expect(request, expected, match, open_zarr, path, names=path, **kwargs)


ZARR_CONTENT_CASES = [
    pytest.param(np.zeros((8, 8)), {}, r"\(8, 8\)", id="2d-no-nav"),
    pytest.param(np.zeros((0, 6, 8, 8), np.uint16), {}, r"\(0, 6\) has zero", id="zero-frames"),
    pytest.param(scan_data(), {"sig_dims": 0}, r"sig_dims=0", id="sig-dims-0"),
    pytest.param(scan_data(), {"sig_dims": 4}, r"sig_dims=4|\(4, 6, 8, 8\)", id="sig-dims-all"),
    pytest.param(scan_data(), {"path": "nope"}, r"nope", id="missing-path"),
    pytest.param(scan_data(), {"sync_offset": HUGE}, r"sync_offset=9223", id="sync-2**63"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "kwargs", "match"), ZARR_CONTENT_CASES)
def test_open_zarr_content(request, tmp_path, data, kwargs, match):
    path = write_zarr(tmp_path, data)
    expected = FileNotFoundError if kwargs.get("path") == "nope" else DataSetError
    expect(request, (expected, DataSetError), match, open_zarr, path, names=path, **kwargs)


def test_open_zarr_corrupt_chunk(request, tmp_path):
    """A damaged chunk is found when it is read: a clear error naming the UDF and partition."""
    path = write_zarr(tmp_path, scan_data(), chunks=(1, 6, 8, 8))
    ds = open_zarr(path)
    chunk = next(p for p in (path / "c").rglob("*") if p.is_file())
    chunk.write_bytes(b"\x01garbage" * 3)
    expect(request, (DataSetError, ValueError, RuntimeError), r"SumUDF on partition",
           SumUDF().compute, ds)  # fmt: skip


# -- open_raw_csr --------------------------------------------------------------------------------
CSR_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"missing\.toml", id="missing-descriptor"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", {}, DataSetError, r"no \[params\]", id="empty-descriptor"),
    pytest.param("binary", {}, DataSetError, r"not valid TOML|not a TOML", id="binary"),
    pytest.param("bad-toml", {}, DataSetError, r"not valid TOML", id="not-toml"),
    pytest.param(None, {"filetype": '"raw"'}, DataSetError, r"filetype = 'raw'",
                 id="wrong-filetype"),
    pytest.param(None, {"filetype": "3"}, DataSetError, r"filetype = 3", id="filetype-int"),
    pytest.param(None, {"data_file": None}, DataSetError, r"lacks data_file",
                 id="missing-key"),
    pytest.param(None, {"data_file": '"nope.raw"'}, FileNotFoundError, r"nope\.raw",
                 id="missing-data-file"),
    pytest.param(None, {"data_file": "[1, 2]"}, DataSetError, r"data_file = \[1, 2\]",
                 id="file-name-list"),
    pytest.param(None, {"data_file": '"."'}, DataSetError, r"is a directory",
                 id="data-file-is-directory"),
    pytest.param(None, {"indptr_dtype": '"<f8"'}, DataSetError, r"indptr_dtype = '<f8'",
                 id="float-indptr"),
    pytest.param(None, {"data_dtype": '"<q9"'}, DataSetError, r"data_dtype = '<q9'",
                 id="garbage-dtype"),
    pytest.param(None, {"data_dtype": '"|O"'}, DataSetError, r"object|not supported",
                 id="object-dtype"),
    pytest.param(None, {"nav_shape": "[9223372036854775807]"}, DataSetError,
                 r"9223372036854775807", id="nav-2**63"),
    pytest.param(None, {"nav_shape": None}, DataSetError, r"no nav_shape", id="nav-missing"),
    pytest.param(None, {"nav_shape": '"4x6"'}, DataSetError, r"nav_shape='4x6'",
                 id="nav-string"),
    pytest.param("sig-override", {}, DataSetError, r"sig_shape=\(9, 9\) has 81 pixels",
                 id="sig-wrong-pixels"),
    pytest.param(None, {"sig_shape": "[0, 8]"}, DataSetError, r"has zero", id="sig-zero"),
    pytest.param(None, {"sync_offset": "1.5"}, DataSetError, r"sync_offset=1\.5",
                 id="sync-float"),
    pytest.param("truncated-values", {}, DataSetError, r"val\.raw.*not a whole number",
                 id="truncated-values"),
    pytest.param("short-values", {}, DataSetError, r"indices but .*values", id="fewer-values"),
    pytest.param("short-indptr", {}, DataSetError, r"row pointers run from 0",
                 id="indptr-last-wrong"),
    pytest.param("empty-indptr", {}, DataSetError, r"ptr\.raw.*empty", id="indptr-empty"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "lines", "expected", "match"), CSR_CASES)
def test_open_raw_csr(request, tmp_path, kind, lines, expected, match):
    path = csr_files(tmp_path, **lines) if kind is None or kind not in ("missing", "dir") else None
    names = path
    kwargs = {}
    if kind == "missing":
        path = names = tmp_path / "missing.toml"
    elif kind == "dir":
        path = names = tmp_path
    elif kind == "empty":
        path.write_text("")
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage\x00")
    elif kind == "bad-toml":
        path.write_text("[params\nfiletype = raw_csr\n")
    elif kind == "truncated-values":
        raw = (tmp_path / "val.raw").read_bytes()
        (tmp_path / "val.raw").write_bytes(raw[:-2])
        names = tmp_path / "val.raw"
    elif kind == "short-values":
        raw = (tmp_path / "val.raw").read_bytes()
        (tmp_path / "val.raw").write_bytes(raw[:-4])
    elif kind == "short-indptr":
        raw = (tmp_path / "ptr.raw").read_bytes()
        (tmp_path / "ptr.raw").write_bytes(raw[:-8])
    elif kind == "empty-indptr":
        (tmp_path / "ptr.raw").write_bytes(b"")
        names = tmp_path / "ptr.raw"
    elif kind == "sig-override":
        kwargs["sig_shape"] = (9, 9)
    elif lines.get("data_file") == '"nope.raw"':
        names = tmp_path / "nope.raw"
    elif lines.get("data_file") == '"."':
        names = tmp_path
    expect(request, expected, match, open_raw_csr, path, names=names, **kwargs)


@pytest.mark.parametrize("where", ["indices-out-of-range", "indptr-decreasing"])
def test_raw_csr_bad_content_found_when_read(request, tmp_path, where):
    """Index files that pass the open-time checks but point outside the frame or run
    backwards: an error when read, not a write outside the tile buffer."""
    path = csr_files(tmp_path)
    if where == "indices-out-of-range":
        idx = np.fromfile(tmp_path / "idx.raw", dtype="<i4")
        idx[len(idx) // 2] = 10**6
        idx.tofile(tmp_path / "idx.raw")
    else:
        ptr = np.fromfile(tmp_path / "ptr.raw", dtype="<i8")
        ptr[5] = ptr[-1]  # frames 5.. run backwards from the end
        ptr.tofile(tmp_path / "ptr.raw")
    ds = open_raw_csr(path)
    expect(request, DataSetError, r"ptr\.raw|idx\.raw|index|row pointer",
           lambda: ds.to_dask().sum().compute(scheduler="sync"))  # fmt: skip


# -- open_mib ------------------------------------------------------------------------------------
def _mib(folder: Path, kind: str):
    """``(path to open, path the message must name)``."""
    if kind == "missing":
        return folder / "missing.mib", folder / "missing.mib"
    if kind == "dir":
        (folder / "dir.mib").mkdir()
        return folder / "dir.mib", folder / "dir.mib"
    if kind == "empty":
        (folder / "scan.mib").write_bytes(b"")
        return folder / "scan.mib", folder / "scan.mib"
    if kind == "not-mib":
        path = write_raw(folder, "scan.mib")
        return path, path
    header_kinds = {
        "size-0": mib_header(size="00000"),
        "size-huge": mib_header(size="99999999999999999999"),
        "size-text": mib_header(size="abcde"),
        "width-2**63": mib_header(width="9223372036854775808"),
        "width-0": mib_header(width="0000"),
        "height-negative": mib_header(height="-008"),
        "pixel-type": mib_header(ptype="F32"),
        "layout": mib_header(layout="sideways"),
        "depth": mib_header(ptype="R64", depth="13"),
        "few-fields": mib_header(raw_fields=["MQ1", "000001", "00384", "01"]),
        "not-ascii": mib_header()[:30] + b"\xff\xfe" + mib_header()[32:],
    }
    if kind in header_kinds:
        path = write_mib(folder, frames=2, header=header_kinds[kind])
        return path, path
    if kind == "truncated":
        path = write_mib(folder, nbytes=(384 + 128) * 3 + 100)
        return path, path
    if kind == "shorter-than-frame":
        path = write_mib(folder, nbytes=300)
        return path, path
    if kind == "frame-size-lies":
        # every header says 8 x 8 U16, but the frames hold 10 x 10 pixels
        path = write_mib(folder, frames=5, data_bytes=200)
        return path, path
    if kind == "hdr-garbage":
        write_mib(folder)
        hdr = write_hdr(folder, "nothing to see\n")
        return hdr, hdr
    if kind == "hdr-bad-int":
        write_mib(folder)
        hdr = write_hdr(folder, HDR_OK.format(frames="many", per_trigger=6))
        return hdr, hdr
    if kind == "hdr-no-mib":
        hdr = write_hdr(folder, HDR_OK.format(frames=24, per_trigger=6), name="alone.hdr")
        return hdr, hdr
    if kind == "hdr-binary":
        write_mib(folder)
        hdr = folder / "scan.hdr"
        hdr.write_bytes(bytes(range(256)) * 4)
        return hdr, hdr
    raise ValueError(kind)


MIB_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", {}, DataSetError, r"not a Merlin \.mib", id="empty-file"),
    pytest.param("not-mib", {}, DataSetError, r"not a Merlin \.mib", id="raw-bytes"),
    pytest.param("size-0", {}, DataSetError, r"header size\) is 0", id="header-size-0"),
    pytest.param("size-huge", {}, DataSetError, r"header", id="header-size-huge"),
    pytest.param("size-text", {}, DataSetError, r"'abcde'", id="header-size-text"),
    pytest.param("width-2**63", {}, DataSetError, r"9223372036854775808|width",
                 id="width-2**63"),
    pytest.param("width-0", {}, DataSetError, r"width\) is '0000'", id="width-0"),
    pytest.param("height-negative", {}, DataSetError, r"height\) is '-008'",
                 id="height-negative"),
    pytest.param("pixel-type", {}, DataSetError, r"pixel type\) is 'F32'", id="pixel-type"),
    pytest.param("layout", {}, DataSetError, r"'sideways'", id="chip-layout"),
    pytest.param("depth", {}, DataSetError, r"counter depth\) is 13", id="counter-depth"),
    pytest.param("few-fields", {}, DataSetError, r"header", id="few-fields"),
    pytest.param("not-ascii", {}, DataSetError, r"not ASCII", id="header-not-ascii"),
    pytest.param("truncated", {}, DataSetError, r"truncated.*100 bytes left over",
                 id="truncated-mid-frame"),
    pytest.param("shorter-than-frame", {}, DataSetError, r"at most the 300 bytes read",
                 id="shorter-than-one-frame"),
    pytest.param("frame-size-lies", {}, DataSetError, r"truncated|frame header",
                 id="frames-larger-than-header-says"),
    pytest.param("hdr-garbage", {}, DataSetError, r"not a Merlin \.hdr", id="hdr-garbage"),
    pytest.param("hdr-bad-int", {}, DataSetError, r"'many'", id="hdr-frames-not-int"),
    pytest.param("hdr-no-mib", {}, DataSetError, r"no \.mib files", id="hdr-without-mib"),
    pytest.param("hdr-binary", {}, DataSetError, r"not a Merlin \.hdr", id="hdr-binary"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), MIB_CASES)
def test_open_mib(request, tmp_path, kind, kwargs, expected, match):
    path, names = _mib(tmp_path, kind)
    expect(request, expected, match, open_mib, path, names=names, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"nav_shape": (HUGE,)}, r"9223372036854775808", id="nav-2**63"),
        pytest.param({"nav_shape": (0,)}, r"has zero", id="nav-zero"),
        pytest.param({"sig_shape": (9, 9)}, r"sig_shape=\(9, 9\) does not fit", id="sig-wrong"),
        pytest.param({"sync_offset": -HUGE}, r"sync_offset=-9223", id="sync-minus-2**63"),
    ],
)
def test_open_mib_arguments(request, tmp_path, kwargs, match):
    path = write_mib(tmp_path)
    expect(request, DataSetError, match, open_mib, path, names=path, **kwargs)


# -- ltdask.open ---------------------------------------------------------------------------------
def _open_target(folder: Path, kind: str) -> Path:
    if kind == "missing":
        return folder / "missing.raw"
    if kind == "dir":
        return folder
    if kind == "unknown":
        path = folder / "scan.xyz"
        path.write_bytes(b"\x01\x02\x03" * 100)
        return path
    if kind in ("raw", "raw-format"):
        return write_raw(folder)
    if kind == "npy-garbage":
        path = folder / "scan.npy"
        path.write_bytes(b"garbage" * 50)
        return path
    if kind == "h5-garbage":
        path = folder / "scan.h5"
        path.write_bytes(b"garbage" * 50)
        return path
    if kind == "toml-garbage":
        path = folder / "scan.toml"
        path.write_text("[nothing]\n")
        return path
    if kind == "mib-garbage":
        path = folder / "scan.mib"
        path.write_bytes(b"garbage" * 50)
        return path
    raise ValueError(kind)


OPEN_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"directory but not a zarr store", id="directory"),
    pytest.param("unknown", {}, DataSetError, r"cannot tell the format", id="unknown-format"),
    pytest.param("raw", {}, DataSetError, r"nav_shape=, sig_shape=, dtype=", id="raw-no-shape"),
    pytest.param("raw-format", {"format": "tiff"}, DataSetError, r"format='tiff'",
                 id="unknown-format-name"),
    pytest.param("raw", dict(nav_shape=NAV, sig_shape=SIG, dtype="u2", key="x"), TypeError,
                 r"'key'", id="unknown-keyword"),
    pytest.param("npy-garbage", {}, DataSetError, r"not a valid \.npy", id="npy-garbage"),
    pytest.param("h5-garbage", {}, DataSetError, r"not an HDF5 file", id="h5-garbage"),
    pytest.param("toml-garbage", {}, DataSetError, r"no \[params\]", id="toml-garbage"),
    pytest.param("mib-garbage", {}, DataSetError, r"not a Merlin", id="mib-garbage"),
]  # fmt: skip


@pytest.mark.parametrize("opener", [open_any, open_dataset], ids=["ltdask.open", "open_dataset"])
@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), OPEN_CASES)
def test_open(request, tmp_path, opener, kind, kwargs, expected, match):
    path = _open_target(tmp_path, kind)
    names = None if expected is TypeError else path
    expect(request, expected, match, opener, path, names=names, **kwargs)


# -- FIFOs and devices: refused before a byte is read ---------------------------------------------
#: a FIFO blocked its reader forever and /dev/zero filled the memory; now an error at once
NOT_REGULAR = r"is a (FIFO \(named pipe\)|character device); expected a regular file"
RAW_KW = dict(nav_shape=NAV, sig_shape=SIG, dtype="uint16")
SPECIAL_OPENERS = [
    pytest.param(open_raw, ".raw", RAW_KW, id="open_raw"),
    pytest.param(open_npy, ".npy", {}, id="open_npy"),
    pytest.param(open_hdf5, ".h5", {}, id="open_hdf5"),
    pytest.param(open_raw_csr, ".toml", {}, id="open_raw_csr"),
    pytest.param(open_mib, ".mib", {}, id="open_mib"),
    pytest.param(open_mib, ".hdr", {}, id="open_mib-hdr"),
    pytest.param(open_zarr, ".zarr", {}, id="open_zarr"),
    pytest.param(open_any, ".npy", {}, id="ltdask.open-npy"),
    pytest.param(open_any, ".bin", {}, id="ltdask.open-sniffed"),
    pytest.param(open_any, ".bin", RAW_KW, id="ltdask.open-raw"),
    pytest.param(open_any, ".bin", {"format": "npy"}, id="ltdask.open-format"),
]


def _special(folder: Path, kind: str, suffix: str) -> Path:
    """A FIFO, or a link to a device, named like a scan; or the device itself."""
    if kind == "fifo":
        path = folder / f"scan{suffix}"
        os.mkfifo(path)
        return path
    if kind.startswith("link-"):
        path = folder / f"scan{suffix}"
        path.symlink_to("/dev/" + kind.removeprefix("link-"))
        return path
    return Path("/dev") / kind


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "zero", "null", "link-zero"])
@pytest.mark.parametrize(("opener", "suffix", "kwargs"), SPECIAL_OPENERS)
def test_fifo_and_device_refused(request, tmp_path, opener, suffix, kwargs, kind):
    path = _special(tmp_path, kind, suffix)
    expect(request, DataSetError, NOT_REGULAR, opener, path, names=path, **kwargs)


@pytest.mark.timeout(10)
def test_fifo_among_raw_files(request, tmp_path):
    fifo = tmp_path / "scan-2.raw"
    os.mkfifo(fifo)
    paths = [write_raw(tmp_path), fifo]
    expect(request, DataSetError, NOT_REGULAR, open_raw, paths, names=fifo, **RAW_KW)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("part", ["indptr", "data"])
def test_raw_csr_names_a_fifo(request, tmp_path, part):
    from formatfiles import write_raw_csr

    path, _ = write_raw_csr(tmp_path, scan_data("<f4"))
    target = tmp_path / f"scan_{part}.raw"
    target.unlink()
    os.mkfifo(target)
    expect(request, DataSetError, NOT_REGULAR, open_raw_csr, path, names=target)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("doc", ["zarr.json", ".zarray"])
@pytest.mark.parametrize("opener", [open_zarr, open_any], ids=["open_zarr", "ltdask.open"])
def test_zarr_metadata_is_a_fifo(request, tmp_path, opener, doc):
    store = tmp_path / "scan.zarr"
    store.mkdir()
    os.mkfifo(store / doc)
    expect(request, DataSetError, NOT_REGULAR, opener, store, names=store / doc)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("fmt", ["raw", "npy", "hdf5-mapped", "hdf5-gzip", "zarr"])
def test_file_replaced_by_fifo_after_open(request, tmp_path, fmt):
    """Tasks do not block on a FIFO put where the scan was: it is a changed file."""
    data = scan_data()
    if fmt == "raw":
        path = write_raw(tmp_path)
        ds = open_raw(path, **RAW_KW)
    elif fmt == "npy":
        path = tmp_path / "scan.npy"
        np.save(path, data)
        ds = open_npy(path)
    elif fmt.startswith("hdf5"):
        create = {"chunks": (2, 3, 4, 8), "compression": "gzip"} if fmt == "hdf5-gzip" else {}
        path = write_hdf5(tmp_path, data={"data": data, **create})
        ds = open_hdf5(path, "data")
    else:
        store = write_zarr(tmp_path, data, chunks=(2, 3, 4, 8))
        ds = open_zarr(store)
        path = store / "zarr.json"
    path.unlink()
    os.mkfifo(path)
    run = ds.to_dask().compute
    changed = r"changed since it was opened \(it was replaced by a FIFO \(named pipe\)\)"
    expect(request, DataSetError, changed, run, names=path)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("suffix", [".toml", ".npy", ".mib", ".h5"])
def test_xarray_engine_guess_on_fifo(request, tmp_path, suffix):
    """xarray asks every engine whether it can open a path: ltdask's guess must not read a
    FIFO, and opening it with the engine is refused."""
    import xarray as xr

    from ltdask.io.xarray_backend import LtdaskBackendEntrypoint

    path = _special(tmp_path, "fifo", suffix)
    entry = LtdaskBackendEntrypoint()
    assert entry.guess_can_open(path) == (suffix in (".npy", ".mib"))
    run = xr.open_dataset
    expect(request, DataSetError, NOT_REGULAR, run, path, engine="ltdask", names=path)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_cli_info_on_fifo_and_device(tmp_path, kind):
    from click.testing import CliRunner

    from ltdask.cli import main

    path = _special(tmp_path, kind, ".npy")
    result = CliRunner().invoke(main, ["info", str(path)])
    assert result.exit_code != 0
    assert re.search(NOT_REGULAR, result.output), result.output
    assert path.name in result.output


# -- UDF runs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_ds():
    with dask.config.set({"ltdask.partition-bytes": 6 * 64 * 4, "ltdask.min-partitions": 1}):
        ds = from_array(scan_data("<f4"))
        ds.get_partitions()
    return ds


ROI_CASES = [
    pytest.param(np.ones((6, 4), bool), r"roi of shape \(6, 4\) does not fit .*\(4, 6\)",
                 id="roi-transposed"),
    pytest.param(np.ones(23, bool), r"roi of shape \(23,\).*24", id="roi-flat-too-short"),
    pytest.param(np.ones((4, 6, 1), bool), r"roi of shape \(4, 6, 1\)", id="roi-3d"),
    pytest.param(np.full((4, 6), "a"), r"roi must be a boolean \(or numeric\) array, got dtype <U1",
                 id="roi-strings"),
    pytest.param("all", r"roi of shape \(\) does not fit", id="roi-string"),
    pytest.param(np.ones((), bool), r"roi of shape \(\)", id="roi-scalar"),
]  # fmt: skip


@pytest.mark.parametrize(("roi", "match"), ROI_CASES)
@pytest.mark.parametrize("run", ["compute", "lazy", "iter"])
def test_roi(request, small_ds, roi, match, run):
    def go():
        if run == "compute":
            return ltdask.compute(small_ds, [SumUDF(), SumSigUDF()], roi=roi)
        if run == "lazy":
            return ltdask.lazy(small_ds, [SumUDF()], roi=roi)
        return list(ltdask.iter(small_ds, [SumUDF()], roi=roi))

    expect(request, UDFError, match, go)


@pytest.mark.parametrize(
    "roi",
    [np.ones((4, 6), np.int64), np.ones((4, 6), np.float32), np.full((4, 6), np.nan)],
    ids=["roi-int", "roi-float", "roi-nan"],
)
def test_numeric_roi_cast_with_warning(small_ds, roi):
    """As LiberTEM: a numeric ROI warns and is cast to bool (NaN is True)."""
    with pytest.warns(UserWarning, match=rf"ROI dtype is {roi.dtype}, expected bool"):
        (res,) = ltdask.compute(small_ds, [SumUDF()], roi=roi)
    (full,) = ltdask.compute(small_ds, [SumUDF()], roi=roi.astype(bool))
    np.testing.assert_array_equal(res["intensity"].values, full["intensity"].values)


def _masks(shape):
    return lambda: np.ones(shape, np.float32)


UDF_CASES = [
    pytest.param(lambda: ApplyMasksUDF([_masks((7, 8))]), UDFError,
                 r"masks have shape \(7, 8\), the frames \(8, 8\)", id="masks-wrong-shape"),
    pytest.param(lambda: ApplyMasksUDF(lambda: np.ones((3, 8, 9))), UDFError,
                 r"\(8, 9\)", id="mask-stack-wrong-shape"),
    pytest.param(lambda: ApplyMasksUDF([]), UDFError, r"mask_factories is empty",
                 id="masks-empty"),
    pytest.param(lambda: ApplyMasksUDF([_masks(SIG)], mask_count=3), UDFError,
                 r"mask_count=3 but the factories give 1", id="mask-count-wrong"),
    pytest.param(lambda: ApplyMasksUDF([np.ones(SIG)]), (UDFError, TypeError),
                 r"callable|not callable", id="mask-not-callable"),
    pytest.param(lambda: ApplyMasksUDF([lambda: "mask"]), (UDFError, ValueError),
                 r"mask|shape", id="mask-factory-returns-str"),
    pytest.param(lambda: CoMUDF.with_params(r=2, ri=5), ValueError,
                 r"outer radius r=2 is smaller than inner ri=5", id="com-r-below-ri"),
    pytest.param(lambda: CoMUDF.with_params(regression=5), ValueError, r"regression.*not 5",
                 id="com-regression-5"),
    pytest.param(lambda: CoMUDF.with_params(regression=np.zeros((2, 2))), ValueError,
                 r"3×2 array", id="com-regression-shape"),
    pytest.param(lambda: CoMUDF.with_params(r=-1), (UDFError, ValueError), r"r=-1",
                 id="com-negative-radius"),
    pytest.param(lambda: SumUDF(dtype="foo"), (UDFError, TypeError, ValueError), r"foo",
                 id="sum-dtype-garbage"),
    pytest.param(lambda: StdDevUDF(dtype="foo"), (UDFError, TypeError, ValueError), r"foo",
                 id="stddev-dtype-garbage"),
    pytest.param(lambda: AutoUDF(f=None), (UDFError, TypeError), r"None|callable",
                 id="auto-f-none"),
    pytest.param(lambda: "SumUDF", UDFError, r"'SumUDF' is not an ltdask\.UDF", id="not-a-udf"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "expected", "match"), UDF_CASES)
def test_udf_parameters(request, small_ds, make, expected, match):
    expect(request, expected, match, lambda: ltdask.compute(small_ds, [make()]))


def test_com_needs_2d_nav(request):
    ds = from_array(np.zeros((24, 8, 8), np.float32))
    expect(request, ValueError, r"CoMUDF needs 2-D nav .*\(24, 8, 8\)", CoMUDF().compute, ds)


def test_map_function_raises(request, small_ds):
    def bad(frame):
        if frame[0, 0] > 1000:
            raise ArithmeticError("bad frame")
        return frame.sum()

    with pytest.raises(ArithmeticError, match="bad frame") as info:
        ltdask.map(small_ds, bad)
    assert any("ltdask: while running AutoUDF on partition" in n for n in info.value.__notes__)
    _record(_case_id(request), info.value)


def test_no_udfs(request, small_ds):
    expect(request, UDFError, r"empty list of UDFs - nothing to do!", ltdask.compute, small_ds, [])


# -- dtypes numba cannot compute with: refused at open or when the run is built ----------------
#: what every refusal lists (float16 is supported: decoded through numpy, run as float32)
SUPPORTED = r"expected one of bool, .*uint64, float16, float32, float64, complex64, complex128"
UNSUPPORTED_DTYPES = [
    pytest.param(
        np.longdouble, r"\(float128\) is not supported: extended precision", id="float128"
    ),
    pytest.param(np.clongdouble, r"\(complex256\) is not supported: extended", id="complex256"),
    pytest.param(object, r"\(object\) is not supported: not a bool, integer", id="object"),
]


# h5py stores no object arrays: nothing to open
DTYPE_WHERE = [
    pytest.param(where, *case.values, id=f"{where}-{case.id}")
    for where in ("open_raw", "open_npy", "open_hdf5", "from_array", "to_dask")
    for case in UNSUPPORTED_DTYPES
    if not (where == "open_hdf5" and case.id == "object")
]


@pytest.mark.parametrize(("where", "dtype", "match"), DTYPE_WHERE)
def test_unsupported_dtype(request, tmp_path, where, dtype, match):
    data = np.ones((*NAV, *SIG), dtype=dtype)
    names = None
    if where == "open_raw":
        run, args, names = open_raw, (write_raw(tmp_path),), "scan.raw"
        kwargs = dict(nav_shape=NAV, sig_shape=SIG, dtype=dtype)
    elif where == "open_npy":
        path = tmp_path / "scan.npy"
        np.save(path, data, allow_pickle=True)
        run, args, kwargs, names = open_npy, (path,), {}, path
    elif where == "open_hdf5":
        path = write_hdf5(tmp_path, data=data)
        run, args, kwargs, names = open_hdf5, (path, "data"), {}, path
    elif where == "from_array":
        run, args, kwargs = from_array, (data,), {}
    else:
        run, args, kwargs = from_array(scan_data()).to_dask, (), dict(dtype=dtype)
    expect(request, DataSetError, match + ".*" + SUPPORTED, run, *args, names=names, **kwargs)


def test_raw_csr_float128_values(request, tmp_path):
    path = csr_files(tmp_path, data_dtype='"<f16"')
    expect(request, DataSetError, r"\(float128\) is not supported", open_raw_csr, path, names=path)


class _Prefers(UDF):
    """A UDF whose tiles would be `dtype`: LiberTEM lets it through to numba's TypingError."""

    def __init__(self, dtype):
        super().__init__(dtype=dtype)

    def get_preferred_input_dtype(self):
        return self.params.dtype

    def get_result_buffers(self):
        return {"peak": self.buffer(kind="nav", dtype="float64")}

    def process_frame(self, frame):
        self.results.peak[:] = frame.max()


@pytest.mark.parametrize(
    ("dtype", "match"),
    [
        pytest.param(object, r"cannot be read as object \(not a bool", id="object"),
        pytest.param(np.longdouble, r"cannot be read as float128 \(extended", id="float128"),
        pytest.param(np.clongdouble, r"cannot be read as complex256", id="complex256"),
    ],
)
@pytest.mark.parametrize("how", ["compute", "lazy", "with-sum"])
def test_udf_preferred_dtype_refused_at_run_start(request, small_ds, how, dtype, match):
    udf = _Prefers(dtype)
    run = {
        "compute": lambda: udf.compute(small_ds),
        "lazy": lambda: udf.lazy(small_ds),  # refused when built, not when computed
        "with-sum": lambda: ltdask.compute(small_ds, [SumUDF(), udf]),
    }[how]
    message = match + r".*get_preferred_input_dtype\(\); return one of bool, .*complex128"
    expect(request, UDFError, message, run)


# -- NaN and inf propagate like numpy --------------------------------------------------------------
@pytest.fixture(scope="module")
def nan_data():
    data = scan_data("<f4") / 100
    data[0, 1, 2, 3] = np.nan
    data[1, 2] = np.inf
    data[2, 3, 4, 5] = -np.inf
    data[3, 4, 5, 6] = np.inf  # with -inf elsewhere: inf - inf in sums over nav is fine
    return data


def _nan_udfs():
    return [
        SumUDF(),
        SumSigUDF(),
        StdDevUDF(),
        ApplyMasksUDF([lambda: np.ones(SIG, np.float32), lambda: np.eye(8, dtype=np.float32)]),
        PickUDF(),
    ]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("source", ["memory", "raw"])
def test_nan_and_inf_propagate(tmp_path, nan_data, source):
    if source == "memory":
        ds = from_array(nan_data)
    else:
        nan_data.tofile(tmp_path / "nan.raw")
        ds = open_raw(tmp_path / "nan.raw", nav_shape=NAV, sig_shape=SIG, dtype="float32")

    data64 = nan_data.astype(np.float64)
    with np.errstate(invalid="ignore"):
        total, per_frame, std, masks, pick = ltdask.compute(ds, _nan_udfs())
        expected_std = data64.reshape(FRAMES, *SIG).std(axis=0)
        expected_var = data64.reshape(FRAMES, *SIG).var(axis=0)

    def same(actual, expected, rtol=1e-5):
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(actual), np.isposinf(expected))
        np.testing.assert_array_equal(np.isneginf(actual), np.isneginf(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol)

    same(total["intensity"].values, data64.sum(axis=(0, 1)))
    same(per_frame["intensity"].values, data64.sum(axis=(2, 3)))
    same(std["var"].values, expected_var)
    same(std["std"].values, expected_std)
    with np.errstate(invalid="ignore"):  # 0 * inf is NaN, in numpy as in the UDF
        stack = np.stack([np.ones(SIG), np.eye(8)]).reshape(2, -1)
        expected_masks = (data64.reshape(FRAMES, -1) @ stack.T).reshape(*NAV, 2)
    same(masks["intensity"].values, expected_masks)
    same(pick["intensity"].values.reshape(nan_data.shape), nan_data, rtol=0)
    same(ds.to_dask().sum(axis=(0, 1)).compute(scheduler="sync"), data64.sum(axis=(0, 1)))
    _record("nan-inf-propagate[" + source + "]", None, "sums, std, masks, pick: like numpy")


def test_inf_in_frames_cut_into_tiles(tmp_path):
    """NaN and inf in frames cut into several signal slices: per-frame sums as numpy's."""
    data = np.ones((2, 3, 128, 128), np.float32)
    data[0, 1, 3, 5] = np.inf
    data[1, 2, 100, 5] = -np.inf
    data[1, 0, 7, 7] = np.nan
    data.tofile(tmp_path / "big.raw")
    ds = open_raw(tmp_path / "big.raw", nav_shape=(2, 3), sig_shape=(128, 128), dtype="float32")
    with dask.config.set({"ltdask.tile-bytes": 4 * 128 * 32}):
        run = ltdask.udf.graph.Run(ds, [SumSigUDF()])
        assert len(run.scheme) > 1  # frames are cut into signal slices
        res = SumSigUDF().compute(ds)["intensity"].values
    np.testing.assert_array_equal(res, data.astype(np.float64).sum(axis=(2, 3)))
    _record("inf-in-sliced-tiles", None, "SumSigUDF: inf stays inf over signal slices")


def test_nan_in_com(nan_data):
    """CoM of a frame with NaN is NaN (numpy: NaN weights make NaN moments); others finite."""
    data = np.abs(scan_data("<f4")) + 1
    data[0, 1, 2, 3] = np.nan
    res = CoMUDF.with_params(cy=4, cx=4).compute(from_array(data))
    com = res["raw_com"].values
    assert np.isnan(com[0, 1]).all()
    assert np.isfinite(np.delete(com.reshape(FRAMES, 2), 1, axis=0)).all()
    _record("nan-in-com", None, "NaN frame -> NaN centre, others finite")


# -- fuzzing the header parsers ------------------------------------------------------------------


def fuzz_dir() -> Path:
    """One folder for the fuzz tests' files (function-scoped tmp_path does not fit
    hypothesis), removed at the end of the module."""
    if not _fuzz_dirs:
        _fuzz_dirs.append(Path(tempfile.mkdtemp(prefix="ltdask-fuzz-")))
    return _fuzz_dirs[0]


@pytest.fixture(scope="module", autouse=True)
def fuzz_cleanup():
    yield
    import shutil

    for folder in _fuzz_dirs:
        shutil.rmtree(folder, ignore_errors=True)


def _fuzz(name: str, fn, *args, **kwargs):
    """Call fn; only documented exceptions may come out. Counts what happened."""
    seen = FUZZ_SEEN.setdefault(name, Counter())
    try:
        result = fn(*args, **kwargs)
    except (DataSetError, FileNotFoundError) as e:
        seen[type(e).__name__] += 1
        return None
    seen["opened"] += 1
    return result


def _write(name: str, content: bytes) -> Path:
    path = fuzz_dir() / name
    path.write_bytes(content)
    return path


@given(st.binary(max_size=400), st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 1), (9, 9)]))
def test_fuzz_npy_random_bytes_after_magic(rest, version):
    path = _write("fuzz.npy", b"\x93NUMPY" + bytes(version) + rest)
    ds = _fuzz("npy-bytes", open_npy, path)
    if ds is not None:
        _fuzz("npy-bytes-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


_py_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4).map(tuple) | st.lists(children, max_size=4),
    max_leaves=8,
)
_descr = st.sampled_from(["<u2", ">f4", "|u1", "<c8", "|b1", "<f8", "|O", "<U3", "S2", "V8",
                          "<u2x", "", "float32", "<M8[s]"]) | st.text(max_size=5)  # fmt: skip
_shape = st.lists(
    st.integers(min_value=1, max_value=5) | st.integers(min_value=-3, max_value=2**64),
    max_size=5,
).map(tuple)
DROP = object()


@given(
    st.dictionaries(
        st.sampled_from(["descr", "fortran_order", "shape", "extra"]),
        st.just(DROP) | _descr | _shape | _py_values | st.booleans(),
        max_size=2,
    ),
    st.sampled_from([192, 0, 100, 191, 193, 1000]),
    st.sampled_from([(1, 0), (2, 0), (3, 0)]),
)
def test_fuzz_npy_header_dict(changes, data_bytes, version):
    """A valid header (2 x 3 frames of 4 x 4 uint16: 192 bytes) with one or two entries
    replaced, dropped or added."""
    header = {"descr": "<u2", "fortran_order": False, "shape": (2, 3, 4, 4)}
    for key, value in changes.items():
        if value is DROP:
            header.pop(key, None)
        else:
            header[key] = value
    path = _write("fuzz-dict.npy", npy_bytes(repr(header), version) + bytes(data_bytes))
    ds = _fuzz("npy-header", open_npy, path)
    if ds is not None:
        _fuzz("npy-header-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


MIB_TOKENS = ["MQ1", "000001", "00384", "384", "01", "04", "0008", "0256", "U08", "U16", "U32",
              "U64", "R64", "U01", "1x1", "2x2", "2x2G", "Nx1", "MQ1A", "1", "6", "12", "24", "",
              "-1", "99999999999999999999", "0x10", " ", "\x00"]  # fmt: skip
_mib_token = st.sampled_from(MIB_TOKENS) | st.text(st.characters(codec="latin-1"), max_size=6)


_MIB_FIELDS = mib_header().rstrip(b"\x00").decode("latin-1").split(",")


@given(
    st.lists(st.tuples(st.integers(1, len(_MIB_FIELDS) - 1), _mib_token), max_size=3),
    st.integers(2, len(_MIB_FIELDS)),
    st.sampled_from([128, 0, 64, 127, 256, 1000]),
    st.integers(1, 3),
)
def test_fuzz_mib_frame_header(changes, keep, data_bytes, frames):
    """A valid U16 8 x 8 frame header with fields replaced and cut short."""
    fields = list(_MIB_FIELDS)
    for index, token in changes:
        fields[index] = token
    header = ",".join(fields[:keep]).encode("latin-1")
    header = header.ljust(max(len(header) + 1, 384), b"\x00")
    path = _write("fuzz.mib", (header + bytes(data_bytes)) * frames)
    hdr = fuzz_dir() / "fuzz.hdr"
    if hdr.exists():
        hdr.unlink()
    ds = _fuzz("mib-header", open_mib, path)
    if ds is not None:
        _fuzz("mib-header-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


@given(st.binary(max_size=600))
def test_fuzz_mib_random_bytes_after_magic(rest):
    path = _write("fuzzb.mib", b"MQ1," + rest)
    _fuzz("mib-bytes", open_mib, path)


HDR_KEYS = ["Frames in Acquisition (Number)", "Frames per Trigger (Number)", "ScanX", "ScanY",
            "Counter Depth (number)", "End", ""]  # fmt: skip
_line_text = st.characters(codec="latin-1", exclude_characters="\n\r")
_hdr_key = st.sampled_from(HDR_KEYS) | st.text(_line_text, max_size=12)
_hdr_value = st.integers(-5, 2**70).map(str) | st.text(
    st.characters(codec="latin-1", exclude_characters="\n\r"), max_size=10
)


@given(st.lists(st.tuples(_hdr_key, st.sampled_from(["\t", ":", ": ", "\t\t"]), _hdr_value),
                max_size=8), st.booleans())  # fmt: skip
def test_fuzz_mib_hdr(lines, with_magic):
    folder = fuzz_dir() / "hdr"
    folder.mkdir(exist_ok=True)
    if not (folder / "scan.mib").exists():
        write_mib(folder)
    text = ("HDR,\t\n" if with_magic else "") + "".join(f"{k}{s}{v}\n" for k, s, v in lines)
    hdr = folder / "scan.hdr"
    hdr.write_text(text, encoding="latin-1")
    for target in (hdr, folder / "scan.mib"):
        ds = _fuzz("mib-hdr", open_mib, target)
        if ds is not None:
            assert math.prod(ds.nav_shape) >= 1


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value > 0 else "-inf") if math.isinf(value) \
            else repr(value)  # fmt: skip
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


TOML_WORDS = ["raw_csr", "RAW_CSR", "raw", "ptr.raw", "idx.raw", "val.raw", "<i8", "<i4", "<f4",
              "|O", "S3", "float64", "..", "/", "nope.raw", ""]  # fmt: skip
_toml_scalar = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.sampled_from(TOML_WORDS)
    | st.text(max_size=6)
)
_toml_value_st = _toml_scalar | st.lists(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4
)
_params_keys = st.sampled_from(["filetype", "nav_shape", "sig_shape", "sync_offset", "x"])
_csr_keys = st.sampled_from(
    ["indptr_file", "indptr_dtype", "indices_file", "indices_dtype", "data_file", "data_dtype"]
)


@given(
    st.dictionaries(_params_keys, _toml_value_st, max_size=2),
    st.dictionaries(_csr_keys, _toml_value_st, max_size=2),
    st.booleans(),
)
def test_fuzz_raw_csr_descriptor(params, section, complete):
    folder = fuzz_dir() / "csr"
    folder.mkdir(exist_ok=True)
    if not (folder / "val.raw").exists():
        csr_files(folder)
    base = {
        "filetype": "raw_csr", "nav_shape": list(NAV), "sig_shape": list(SIG),
    } if complete else {}  # fmt: skip
    base.update(params)
    files = {
        "indptr_file": "ptr.raw", "indptr_dtype": "<i8", "indices_file": "idx.raw",
        "indices_dtype": "<i4", "data_file": "val.raw", "data_dtype": "<f4",
    } if complete else {}  # fmt: skip
    files.update(section)
    text = "[params]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in base.items())
    text += "\n[raw_csr]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in files.items())
    path = folder / "fuzz.toml"
    path.write_text(text)
    ds = _fuzz("raw-csr-toml", open_raw_csr, path)
    if ds is not None:
        _fuzz("raw-csr-toml-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


@given(st.binary(max_size=300))
def test_fuzz_raw_csr_random_bytes(content):
    path = _write("fuzzb.toml", content)
    _fuzz("raw-csr-bytes", open_raw_csr, path)
