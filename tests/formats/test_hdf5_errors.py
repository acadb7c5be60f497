"""open_hdf5 on bad input: files that are not HDF5, damaged or truncated ones, keys that
name no dataset, shapes and dtypes the scan cannot have, filters that are not installed."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers.badinput import HUGE, expect, scan_data, write_hdf5

from ltdask import DataSetError, open_hdf5


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


def test_missing_filter_names_file_dataset_filter_and_extra(request, tmp_path, monkeypatch):
    """A dataset compressed with a filter this HDF5 does not have: refused at open time with
    the file, the dataset, the filter and the extra that installs it."""
    path = write_hdf5(tmp_path, data=dict(data=scan_data(), chunks=(1, 6, 8, 8), compression="lzf"))
    lzf = h5py.h5z.FILTER_LZF
    available = h5py.h5z.filter_avail
    monkeypatch.setattr(h5py.h5z, "filter_avail", lambda code: code != lzf and available(code))
    message = (
        r"dataset '/data' is compressed with the HDF5 filter 'lzf' \(id 32000\), which is not "
        r"available here; pip install ltdask\[hdf5\]"
    )
    expect(request, DataSetError, message, open_hdf5, path, "data", names=path)
