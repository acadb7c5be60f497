"""open_npy on bad input: malformed, truncated and hostile ``.npy`` files give clear
errors naming the file; hypothesis fuzzes the header parser."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.badinput import FRAMES, HUGE, NAV, SIG, expect, fuzz, fuzz_file, scan_data
from hypothesis import given
from hypothesis import strategies as st

from ltdask import DataSetError, open_npy


def npy_bytes(header: dict | str, version=(1, 0)) -> bytes:
    """A ``.npy`` preamble with `header` (a dict or its literal text), padded as numpy does."""
    text = (header if isinstance(header, str) else repr(header)).encode("utf-8")
    magic = b"\x93NUMPY" + bytes(version)
    length_bytes = 2 if version == (1, 0) else 4
    total = len(magic) + length_bytes + len(text) + 1
    text = text + b" " * (-total % 64) + b"\n"
    length = len(text).to_bytes(length_bytes, "little")
    return magic + length + text


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
                 r"is truncated: its header says \(4, 6, 8, 8\) uint16 \(\d+ bytes with the "
                 r"header\), the file has \d+", id="truncated-data"),
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
    pytest.param(np.zeros((4, 6, 8, 8), np.uint16).T, {}, DataSetError, r"Fortran-ordered",
                 id="fortran-order"),
    pytest.param(np.array([None] * 8).reshape(2, 2, 2), {}, DataSetError,
                 r"not a valid \.npy|object", id="object-dtype"),
    pytest.param(np.zeros((2, 3, 4), "S2"), {}, DataSetError, r"S2|not supported",
                 id="bytes-dtype"),
    pytest.param(np.zeros((2, 3, 4), "u2,f4"), {}, DataSetError, r"not supported",
                 id="structured-dtype"),
    pytest.param(np.zeros(8, np.uint16), {}, DataSetError,
                 r"sig_dims=2 does not fit .*\(8,\); a scan needs a nav dim and a sig dim, "
                 r"the array has 1", id="1d-array"),
    pytest.param(np.zeros((), np.uint16), {}, DataSetError,
                 r"does not fit .*the array has 0 dims", id="0d-array"),
    pytest.param(scan_data(), {"sig_dims": 4}, DataSetError,
                 r"sig_dims=4 does not fit the array shape \(4, 6, 8, 8\); expected 1 to 3",
                 id="sig-dims-all"),
    pytest.param(scan_data(), {"sig_dims": 0}, DataSetError, r"sig_dims=0", id="sig-dims-0"),
    pytest.param(scan_data(), {"sig_dims": 1.5}, DataSetError, r"sig_dims=1\.5",
                 id="sig-dims-float"),
    pytest.param(scan_data(), {"sig_dims": -1}, DataSetError, r"sig_dims=-1 does not fit",
                 id="sig-dims-negative"),
    pytest.param(scan_data(), {"sync_offset": FRAMES}, DataSetError,
                 r": sync_offset=24 is beyond", id="sync-offset-past-end"),
    pytest.param(scan_data(), {"sync_offset": HUGE}, DataSetError, r"sync_offset=9223",
                 id="sync-offset-2**63"),
    pytest.param(scan_data(), {"sig_shape": (7, 7)}, DataSetError,
                 r"sig_shape=\(7, 7\) \(49 values a frame\) does not divide the array of shape "
                 r"\(4, 6, 8, 8\) \(1536 values\) into whole frames", id="sig-shape-not-dividing"),
    pytest.param(scan_data(), {"sig_shape": (8, 0)}, DataSetError,
                 r"sig_shape=\(8, 0\) has zero", id="sig-shape-zero"),
    pytest.param(scan_data(), {"sig_shape": "8x8"}, DataSetError,
                 r"sig_shape='8x8' is not a sequence of integers", id="sig-shape-text"),
    pytest.param(scan_data(), {"nav_shape": (4, 0)}, DataSetError,
                 r"nav_shape=\(4, 0\) has zero", id="nav-shape-zero"),
    pytest.param(scan_data(), {"nav_shape": (2.5, 4)}, DataSetError,
                 r"nav_shape=\(2\.5, 4\) is not a sequence of integers", id="nav-shape-float"),
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


# -- fuzzing the header parser ---------------------------------------------------------------
@given(st.binary(max_size=400), st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 1), (9, 9)]))
def test_fuzz_npy_random_bytes_after_magic(rest, version):
    path = fuzz_file("fuzz.npy", b"\x93NUMPY" + bytes(version) + rest)
    ds = fuzz("npy-bytes", open_npy, path)
    if ds is not None:
        fuzz("npy-bytes-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


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
    path = fuzz_file("fuzz-dict.npy", npy_bytes(repr(header), version) + bytes(data_bytes))
    ds = fuzz("npy-header", open_npy, path)
    if ds is not None:
        fuzz("npy-header-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))
