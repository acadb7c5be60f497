"""open_mrc on bad input: headers that are not MRC, unsupported modes, hostile sizes
(negative, zero, larger than the file, overflowing), truncated files; hypothesis fuzzes
the header fields."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers.badinput import HUGE, expect, fuzz, fuzz_file
from hypothesis import given
from hypothesis import strategies as st

from ltdask import DataSetError
from ltdask.io.formats.mrc import open_mrc

FRAMES, NY, NX = 4, 5, 6


def header(**fields) -> bytearray:
    """A valid little-endian header of a (4, 5, 6) uint16 image stack; `fields` replace
    int32 fields by name."""
    values = dict(nx=NX, ny=NY, nz=FRAMES, mode=6, mx=NX, my=NY, mz=1, ispg=0, nsymbt=0)
    values.update(fields)
    raw = bytearray(1024)
    struct.pack_into("<4i", raw, 0, values["nx"], values["ny"], values["nz"], values["mode"])
    struct.pack_into("<3i", raw, 28, values["mx"], values["my"], values["mz"])
    struct.pack_into("<3f", raw, 40, 10.0, 10.0, 1.0)
    struct.pack_into("<2i", raw, 88, values["ispg"], values["nsymbt"])
    raw[208:216] = b"MAP DD\0\0"
    return raw


def write(folder: Path, head: bytes, data_bytes: int | None = None, name="scan.mrc") -> Path:
    path = folder / name
    n = FRAMES * NY * NX * 2 if data_bytes is None else data_bytes
    path.write_bytes(bytes(head) + bytes(n))
    return path


def _case(folder: Path, kind: str) -> Path:
    if kind == "missing":
        return folder / "missing.mrc"
    if kind == "dir":
        (folder / "dir.mrc").mkdir()
        return folder / "dir.mrc"
    if kind == "empty":
        return write(folder, b"", 0)
    if kind == "short-header":
        return write(folder, header()[:600], 0)
    if kind == "not-mrc":
        return write(folder, np.arange(512, dtype="<u2").tobytes(), 0)
    if kind == "truncated":
        return write(folder, header(), FRAMES * NY * NX * 2 - 7)
    if kind == "nsymbt-beyond-file":
        return write(folder, header(nsymbt=10**6))
    if kind == "nsymbt-negative":
        return write(folder, header(nsymbt=-1024))
    kinds = {
        "nx-negative": dict(nx=-6),
        "ny-zero": dict(ny=0),
        "nz-negative": dict(nz=-4),
        "huge-dims": dict(nx=2**31 - 1, ny=2**31 - 1, nz=2**31 - 1),
        "mode-3": dict(mode=3),
        "mode-101": dict(mode=101),
        "mode-99": dict(mode=99),
        "volume-stack-mz-0": dict(ispg=401, mz=0),
        "volume-stack-mz-3": dict(ispg=401, mz=3),
    }
    return write(folder, header(**kinds[kind]))


MRC_CASES = [
    pytest.param("missing", FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", DataSetError, r"not an MRC file: 0 bytes", id="empty-file"),
    pytest.param("short-header", DataSetError, r"shorter than the 1024-byte", id="short-header"),
    pytest.param("not-mrc", DataSetError, r"not an MRC file: no 'MAP '", id="not-mrc"),
    pytest.param("truncated", DataSetError, r"truncated.*need 1264 bytes, the file has 1257",
                 id="truncated-data"),
    pytest.param("nsymbt-beyond-file", DataSetError, r"truncated or its header is wrong",
                 id="nsymbt-beyond-file"),
    pytest.param("nsymbt-negative", DataSetError, r"nsymbt\) is -1024", id="nsymbt-negative"),
    pytest.param("nx-negative", DataSetError, r"nx=-6", id="nx-negative"),
    pytest.param("ny-zero", DataSetError, r"ny=0", id="ny-zero"),
    pytest.param("nz-negative", DataSetError, r"nz=-4", id="nz-negative"),
    pytest.param("huge-dims", DataSetError, r"truncated or its header is wrong",
                 id="dims-2**31-1"),
    pytest.param("mode-3", DataSetError, r"mode 3 \(complex int16\) is not supported",
                 id="mode-3"),
    pytest.param("mode-101", DataSetError, r"mode 101 \(packed 4-bit\)", id="mode-101"),
    pytest.param("mode-99", DataSetError, r"mode 99 is not supported", id="mode-99"),
    pytest.param("volume-stack-mz-3", DataSetError, r"nz=4 .*mz=3.*pass nav_shape=",
                 id="volume-stack-mz-not-dividing"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "expected", "match"), MRC_CASES)
def test_open_mrc(request, tmp_path, kind, expected, match):
    path = _case(tmp_path, kind)
    expect(request, expected, match, open_mrc, path, names=path)


def test_volume_stack_mz_0_is_a_flat_stack(tmp_path):
    ds = open_mrc(_case(tmp_path, "volume-stack-mz-0"))
    assert ds.nav_shape == (FRAMES,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"nav_shape": (HUGE,)}, r"9223372036854775808", id="nav-2**63"),
        pytest.param({"nav_shape": (0, 4)}, r"has zero", id="nav-zero"),
        pytest.param({"nav_shape": (-1,)}, r"negative", id="nav-negative"),
        pytest.param({"sync_offset": 4}, r"sync_offset=4 is beyond", id="sync-beyond"),
    ],
)
def test_open_mrc_arguments(request, tmp_path, kwargs, match):
    path = write(tmp_path, header())
    expect(request, DataSetError, match, open_mrc, path, names=path, **kwargs)


def test_wrong_machine_stamp_is_overruled(tmp_path):
    """A big-endian stamp on a header that only makes sense little-endian (as mrcfile's
    permissive mode reads it)."""
    raw = header()
    raw[212:214] = b"\x11\x11"
    path = tmp_path / "scan.mrc"
    data = np.arange(FRAMES * NY * NX, dtype="<u2")
    path.write_bytes(bytes(raw) + data.tobytes())
    ds = open_mrc(path)
    assert ds.nav_shape == (FRAMES,) and ds.sig_shape == (NY, NX)
    np.testing.assert_array_equal(ds.to_dask().compute().ravel(), data)


def test_file_truncated_after_opening(tmp_path):
    path = write(tmp_path, header())
    ds = open_mrc(path)
    path.write_bytes(path.read_bytes()[:1100])
    with pytest.raises(DataSetError, match=r"changed since it was opened"):
        ds.to_dask().compute()


# -- fuzzing -----------------------------------------------------------------------------------
_FIELDS = st.sampled_from([0, 4, 8, 12, 28, 32, 36, 88, 92])  # nx ny nz mode mx my mz ispg nsymbt
_VALUES = st.sampled_from([0, 1, -1, 2, 3, 6, 401, 1024, 2**31 - 1, -(2**31)]) | st.integers(
    -(2**31), 2**31 - 1
)


@given(st.lists(st.tuples(_FIELDS, _VALUES), max_size=4), st.sampled_from([b"DD", b"\x11\x11",
       b"\0\0"]), st.integers(0, 400))  # fmt: skip
def test_fuzz_mrc_header(changes, stamp, data_bytes):
    raw = header()
    for offset, value in changes:
        struct.pack_into("<i", raw, offset, value)
    raw[212:214] = stamp
    path = fuzz_file("fuzz.mrc", bytes(raw) + bytes(data_bytes))
    ds = fuzz("mrc-header", open_mrc, path)
    if ds is not None:
        assert ds.fileset.bytes_needed()[0] <= path.stat().st_size
        fuzz("mrc-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


@given(st.binary(max_size=1200))
def test_fuzz_mrc_random_bytes(content):
    path = fuzz_file("fuzzb.mrc", content)
    fuzz("mrc-bytes", open_mrc, path)
