"""open_emd on bad input: files that are not Velox files, damaged or hostile frame JSON,
truncated files, unknown series names; hypothesis fuzzes the JSON."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers.badinput import expect, fuzz, fuzz_dir, record
from helpers.emdfiles import METADATA_ROWS, frame_metadata, write_emd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ltdask
from ltdask import DataSetError, open_emd

FRAMES = np.arange(12 * 4 * 5, dtype=np.uint16).reshape(12, 4, 5)


def set_json(path: Path, raw: bytes) -> None:
    """Replace every frame's metadata column of the stack by `raw` (NUL padded)."""
    with h5py.File(path, "a") as f:
        for name in f["Data/Image"]:
            meta = f[f"Data/Image/{name}/Metadata"]
            column = np.zeros(METADATA_ROWS, np.uint8)
            column[: len(raw)] = np.frombuffer(raw, np.uint8)
            meta[...] = np.repeat(column[:, None], meta.shape[1], axis=1)


@pytest.mark.parametrize(
    "damage, match",
    [
        ("garbage", r"not an HDF5 file"),
        ("empty", r"not an HDF5 file"),
        ("truncated", r"cannot open .* as HDF5 \(truncated or damaged\?\)"),
        ("no-data", r"not a Velox EMD file: it has no /Data group"),
        ("no-series", r"no frame stack; pass dataset=.*holds no image series"),
        ("2d-data", r"holds no image series"),
        ("json-garbage", r"metadata of /Data/Image/\w+ is not valid JSON"),
        ("json-not-utf8", r"metadata of /Data/Image/\w+ is not valid JSON"),
        ("fifo", r"is a FIFO"),
    ],
    ids=[
        "garbage",
        "empty",
        "truncated",
        "no-data",
        "no-series",
        "2d-data",
        "json-garbage",
        "json-not-utf8",
        "fifo",
    ],  # fmt: skip
)
def test_bad_file(request, tmp_path, damage, match):
    path = write_emd(tmp_path / "scan.emd", FRAMES, scan=(3, 4))
    if damage == "garbage":
        path.write_bytes(b"velox?" * 200)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:4000])
    elif damage == "fifo":
        path.unlink()
        import os

        os.mkfifo(path)
    elif damage in ("no-data", "no-series", "2d-data"):
        with h5py.File(path, "w") as f:
            f["Version"] = json.dumps({"version": "11"})
            if damage == "no-series":
                f.create_group("Data/Image")
            if damage == "2d-data":
                f["Data/Image/abc/Data"] = np.zeros((4, 5), np.uint16)
    elif damage == "json-garbage":
        set_json(path, b'{"BinaryResult": {"Detector": ')
    elif damage == "json-not-utf8":
        set_json(path, b'{"a": "\xff\xfe"}')
    expect(request, DataSetError, match, open_emd, path, names=path)


def test_unknown_dataset_name(request, tmp_path):
    path = write_emd(tmp_path / "scan.emd", FRAMES, scan=(3, 4), extra_image=True)
    expect(request, DataSetError, r"dataset='Ceta2' names no series; image series: .*\(Ceta, 12 "
           r"frames of \(4, 5\) uint16\)", open_emd, path, dataset="Ceta2", names=path)  # fmt: skip


@pytest.mark.parametrize(
    "scan",
    [
        {"width": "-4", "height": "-3"},
        {"width": "1e300", "height": "2"},
        {"width": "four", "height": "3"},
        {"width": 4},
        "3x4",
        None,
    ],  # fmt: skip
    ids=["negative", "huge", "text", "no-height", "not-a-dict", "null"],
)
def test_hostile_scan_size_gives_a_1d_scan(request, tmp_path, scan):
    meta = frame_metadata(FRAMES, scan=(3, 4))
    meta["Scan"]["ScanSize"] = scan
    path = write_emd(tmp_path / "scan.emd", FRAMES)
    set_json(path, json.dumps(meta).encode())
    ds = open_emd(path)
    assert ds.nav_shape == (12,)
    np.testing.assert_array_equal(ds.to_dask().compute(), FRAMES)
    record(request.node.name.replace("test_", ""), None, "nav (12,): ScanSize ignored")


@pytest.mark.parametrize(
    "size",
    [
        {"width": "nan", "height": "1"},
        {"width": "0", "height": "0"},
        {"width": "abc", "height": "1"},
        [1, 2],
        {"width": "inf", "height": "1e400"},
    ],  # fmt: skip
    ids=["nan", "zero", "text", "list", "inf"],
)
def test_hostile_pixel_size_leaves_no_calibration(request, tmp_path, size):
    meta = frame_metadata(FRAMES, scan=(3, 4))
    meta["BinaryResult"]["PixelSize"] = size
    path = write_emd(tmp_path / "scan.emd", FRAMES)
    set_json(path, json.dumps(meta).encode())
    ds = open_emd(path)
    assert not any(a.calibrated for a in ds.sig_calibration)
    record(request.node.name.replace("test_", ""), None, "opened without a calibration")


def test_hostile_nav_shape(request, tmp_path):
    path = write_emd(tmp_path / "scan.emd", FRAMES, scan=(3, 4))
    expect(request, DataSetError, r"zero or negative dims", open_emd, path, nav_shape=(-3, 4),
           names=path)  # fmt: skip


def test_changed_after_open(request, tmp_path):
    path = write_emd(tmp_path / "scan.emd", FRAMES, scan=(3, 4))
    ds = open_emd(path)
    write_emd(tmp_path / "other.emd", FRAMES[:6])
    shutil.copy(tmp_path / "other.emd", path)
    expect(request, DataSetError, r"changed since it was opened", ds.to_dask().compute,
           names=path)  # fmt: skip


def test_not_velox_emd_through_open_is_hdf5_error(request, tmp_path):
    path = tmp_path / "scan.emd"
    path.write_bytes(b"\0" * 100)
    assert ltdask.io.detect_format(path) == "hdf5"
    expect(request, DataSetError, r"not an HDF5 file", ltdask.open, path, names=path)


_FUZZ: list[Path] = []


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(cut=st.integers(0, 900), junk=st.binary(max_size=12))
def test_fuzz_frame_json(cut, junk):
    if not _FUZZ:
        _FUZZ.append(write_emd(fuzz_dir() / "fuzz.emd", FRAMES, scan=(3, 4)))
    path = _FUZZ[0]
    text = json.dumps(frame_metadata(FRAMES, scan=(3, 4))).encode()
    set_json(path, text[:cut] + junk + text[cut + len(junk) :])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz("velox-json", lambda: open_emd(path).to_dask().compute())
