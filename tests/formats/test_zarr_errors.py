"""open_zarr on bad input: what is not a store, damaged metadata, paths that name no array,
shapes the scan cannot have, damaged chunks and metadata documents that are FIFOs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers.badinput import HUGE, NOT_REGULAR, expect, scan_data, write_zarr

import ltdask
from ltdask import DataSetError, open_zarr
from ltdask.udf import SumUDF


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


@pytest.mark.timeout(10)
@pytest.mark.parametrize("doc", ["zarr.json", ".zarray"])
@pytest.mark.parametrize("opener", [open_zarr, ltdask.open], ids=["open_zarr", "ltdask.open"])
def test_zarr_metadata_is_a_fifo(request, tmp_path, opener, doc):
    store = tmp_path / "scan.zarr"
    store.mkdir()
    os.mkfifo(store / doc)
    expect(request, DataSetError, NOT_REGULAR, opener, store, names=store / doc)
