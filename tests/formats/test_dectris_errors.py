"""open_dectris on bad input: damaged masters and data files, missing or reordered data files,
chunks whose headers lie, truncation, files changed after opening; hypothesis fuzzes the
compressed chunks the task decoder parses."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers.badinput import expect, fuzz, fuzz_dir
from helpers.dectrisfiles import write_series
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ltdask
from ltdask import DataSetError, open_dectris

pytest.importorskip("hdf5plugin")

FRAMES = np.random.default_rng(0).integers(0, 100, (20, 9, 11)).astype(np.uint16)


def series(folder: Path, kind: str = "bslz4") -> Path:
    return write_series(folder, FRAMES, per_file=7, chunk_frames=3, kind=kind)


def chunks_of(path: Path) -> list:
    with h5py.File(path, "r") as f:
        dset = f["entry/data/data"]
        return [dset.id.get_chunk_info(i) for i in range(dset.id.get_num_chunks())]


def patch_chunk(path: Path, index: int, at: int, value: bytes) -> None:
    """Overwrite bytes of a stored chunk (offset `at` inside it)."""
    info = chunks_of(path)[index]
    raw = bytearray(path.read_bytes())
    raw[info.byte_offset + at : info.byte_offset + at + len(value)] = value
    path.write_bytes(bytes(raw))


def read_all(master):
    return open_dectris(master).to_dask().compute()


@pytest.mark.parametrize("kind", ["bslz4", "lz4"])
@pytest.mark.parametrize(
    "at, value, match",
    [
        (0, (2**62).to_bytes(8, "big"), r"chunk 1 .*header says 4611686018427387904 bytes"),
        (8, bytes(4), r"chunk 1 .*block size 0 in the chunk header"),
        (8, (2**31).to_bytes(4, "big"), r"chunk 1 .*block size 2147483648 .*not valid"),
        (12, (2**31).to_bytes(4, "big"), r"chunk 1 .*(does not decompress|claims 2147483648)"),
        (
            12,
            (3).to_bytes(4, "big") + bytes(3),
            r"chunk 1 .*does not decompress: an LZ4 match points before the start .*byte 17 of",
        ),
    ],
    ids=["total-huge", "block-0", "block-huge", "block-length-huge", "lz4-offset-0"],
)
def test_chunk_header_lies(request, tmp_path, kind, at, value, match):
    master = series(tmp_path, kind)
    data_file = tmp_path / "series_data_000001.h5"
    patch_chunk(data_file, 1, at, value)
    ds = open_dectris(master)  # opening reads no chunk
    expect(request, DataSetError, match, ds.to_dask().compute, names=data_file)


def test_bitshuffle_payload_garbage(request, tmp_path):
    master = series(tmp_path)
    data_file = tmp_path / "series_data_000002.h5"
    info = chunks_of(data_file)[0]
    patch_chunk(data_file, 0, 16, os.urandom(info.size - 16))
    expect(request, DataSetError, r"chunk 0 .*does not decompress", read_all, master,
           names=data_file)  # fmt: skip


@pytest.mark.parametrize("cut", ["last-chunk", "header"])
def test_truncated_data_file(request, tmp_path, cut):
    master = series(tmp_path)
    data_file = tmp_path / "series_data_000003.h5"
    raw = data_file.read_bytes()
    keep = chunks_of(data_file)[-1].byte_offset + 5 if cut == "last-chunk" else 1000
    data_file.write_bytes(raw[:keep])
    expect(request, DataSetError, r"as HDF5.*truncated", open_dectris, master, names=data_file)


@pytest.mark.parametrize(
    "damage, match",
    [
        ("garbage", r"not an HDF5 file"),
        ("truncated", r"cannot open .* as HDF5 \(truncated or damaged\?\)"),
        ("empty", r"not an HDF5 file"),
        ("no-entry-data", r"not a DECTRIS master file: it has no group /entry/data"),
        ("no-links", r"holds no data_NNNNNN links"),
        ("fifo", r"is a FIFO"),
    ],
    ids=["garbage", "truncated", "empty", "no-entry-data", "no-links", "fifo"],
)
def test_bad_master(request, tmp_path, damage, match):
    master = series(tmp_path)
    if damage == "garbage":
        master.write_bytes(b"not hdf5" * 100)
    elif damage == "truncated":
        master.write_bytes(master.read_bytes()[:1500])
    elif damage == "empty":
        master.write_bytes(b"")
    elif damage == "fifo":
        master.unlink()
        os.mkfifo(master)
    else:
        with h5py.File(master, "w") as f:
            f.create_group("entry" if damage == "no-entry-data" else "entry/data")
    expect(request, DataSetError, match, open_dectris, master, names=master)


@pytest.mark.parametrize(
    "damage, match",
    [
        ("missing", r"data_000002 links to .*series_data_000002.h5', which does not exist"),
        ("directory", r"data_000002 links to .*which is not a regular file"),
        ("not-hdf5", r"data_000002 links to .*which is not an HDF5 file"),
        ("reordered", r"image_nr_low is 15, but the files before it hold 7 frames"),
        ("no-dataset", r"/entry/data/data is no dataset; expected a dataset of shape"),
        ("2d", r"/entry/data/data is \(7, 99\); expected a dataset of shape \(frames, y, x\)"),
        ("other-shape", r"holds frames \(9, 12\) uint16, the first data file \(9, 11\) uint16"),
    ],
    ids=["missing", "directory", "not-hdf5", "reordered", "no-dataset", "2d", "other-shape"],
)
def test_bad_data_file(request, tmp_path, damage, match):
    master = series(tmp_path)
    target = tmp_path / "series_data_000002.h5"
    if damage == "missing":
        target.unlink()
    elif damage == "directory":
        target.unlink()
        target.mkdir()
    elif damage == "not-hdf5":
        target.write_bytes(b"\0" * 4096)
    elif damage == "reordered":
        shutil.copy(tmp_path / "series_data_000003.h5", target)
    else:
        with h5py.File(target, "w") as f:
            if damage == "2d":
                f["entry/data/data"] = np.zeros((7, 99), np.uint16)
            elif damage == "other-shape":
                f["entry/data/data"] = np.zeros((7, 9, 12), np.uint16)
            else:
                f.create_group("entry/data")
    names = master if damage in ("missing", "directory", "not-hdf5") else target
    expect(request, DataSetError, match, open_dectris, master, names=names)


@pytest.mark.parametrize(
    "nav_shape, match",
    [
        ((-1, 20), r"zero or negative dims"),
        ((2**40, 2**40), r"absurdly large"),
        ((0,), r"zero or negative dims"),
    ],  # fmt: skip
    ids=["negative", "huge", "zero"],
)
def test_hostile_nav_shape(request, tmp_path, nav_shape, match):
    master = series(tmp_path)
    expect(request, DataSetError, match, open_dectris, master, nav_shape=nav_shape, names=master)


def test_changed_after_open(request, tmp_path):
    master = series(tmp_path)
    ds = open_dectris(master)
    shutil.copy(tmp_path / "series_data_000003.h5", tmp_path / "series_data_000001.h5")
    expect(request, DataSetError, r"changed since it was opened", ds.to_dask().compute,
           names=tmp_path / "series_data_000001.h5")  # fmt: skip


def test_missing_filter_is_named(request, tmp_path, monkeypatch):
    master = series(tmp_path)
    monkeypatch.setattr(h5py.h5z, "filter_avail", lambda code: False)
    expect(request, DataSetError, r"filter 'bitshuffle' \(id 32008\).*pip install ltdask\[hdf5\]",
           open_dectris, master, names=tmp_path / "series_data_000001.h5")  # fmt: skip


@pytest.mark.parametrize("kind", ["bslz4", "lz4", "bszstd"])
def test_without_decompression_packages(tmp_path, monkeypatch, kind):
    """Without the `bitshuffle` and `lz4` packages, LZ4 inside bitshuffle or alone is still
    decoded in the tasks (ltdask's own kernels); Zstd inside bitshuffle is read through h5py,
    with a word on what to install."""
    import sys

    from ltdask.io.formats.dectris import chunks as dectris_chunks

    master = series(tmp_path, kind)
    for module in ("bitshuffle", "bitshuffle.ext", "lz4", "lz4.block"):
        monkeypatch.setitem(sys.modules, module, None)  # (importing them fails)
    monkeypatch.setattr(dectris_chunks, "_have", lambda module: False)
    if kind == "bszstd":
        with pytest.warns(ltdask.PerformanceWarning, match="pip install bitshuffle"):
            ds = open_dectris(master)
        assert ds.codec == "h5py"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ds = open_dectris(master)
        assert ds.codec == kind
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="threads"), FRAMES)


_FUZZ_MASTER: list[Path] = []


def _fuzz_series() -> tuple[Path, Path, bytes]:
    if not _FUZZ_MASTER:
        folder = fuzz_dir() / "dectris"
        folder.mkdir()
        _FUZZ_MASTER.append(series(folder))
    master = _FUZZ_MASTER[0]
    data_file = master.parent / "series_data_000001.h5"
    if not (master.parent / "pristine").exists():
        shutil.copy(data_file, master.parent / "pristine")
    return master, data_file, (master.parent / "pristine").read_bytes()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    chunk=st.integers(0, 2),
    at=st.integers(0, 60),
    value=st.binary(min_size=1, max_size=8),
)
def test_fuzz_chunk_bytes(chunk, at, value):
    master, data_file, pristine = _fuzz_series()
    data_file.write_bytes(pristine)
    info = chunks_of(data_file)[chunk]
    at = min(at, info.size - 1)
    patch_chunk(data_file, chunk, at, value[: info.size - at])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz("dectris-chunk", lambda: open_dectris(master).to_dask().compute())
