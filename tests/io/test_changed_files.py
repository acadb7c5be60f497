"""A file that changes after its dataset was opened is refused where it is read, never read
with the old layout (issue 11, item 5).

Every file format is written by its own writer, opened, read once (so the memory maps are
kept), rewritten with other data and read again on the sync and threads schedulers: the
read raises "PATH changed since it was opened ...; open it again", and opening it again
reads the new data (checked against numpy).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dask
import h5py
import numpy as np
import pytest
from dask.base import tokenize
from helpers.formatfiles import FILE_FORMAT_PARAMS, make_data, write_hdf5, write_npy

import ltdask
from ltdask import DataSetError
from ltdask.io.checks import signature_of
from ltdask.io.fileset import File, FileSet
from ltdask.io.maps import MAPS, keeping_maps, map_file
from ltdask.udf import SumSigUDF

CHANGED = r"changed since it was opened \(.*\); open it again"


@pytest.fixture(autouse=True)
def _keep_maps():
    """Maps kept as for a second UDF run: a changed file must not be read through them."""
    MAPS.clear()
    with dask.config.set({"ltdask.map-cache-bytes": "1GiB"}), keeping_maps():
        yield
    MAPS.clear()


def _files(target: Path) -> list[Path]:
    folder = target if target.is_dir() else target.parent
    return [p for p in folder.rglob("*") if p.is_file()]


def rewrite(fmt, target: Path, data) -> None:
    """Write `data` where `fmt` wrote the scan at `target`, by the format's own writer, and
    date the files a second later (as a later write would be on a file system with coarse
    timestamps)."""
    folder = target.parent
    if target.is_dir():  # zarr refuses to create an array over an existing one
        shutil.rmtree(target)
    fmt.write_to(folder, data)
    for path in _files(target):
        mtime = path.stat().st_mtime_ns + 10**9
        os.utime(path, ns=(mtime, mtime))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
@pytest.mark.parametrize("fmt", FILE_FORMAT_PARAMS)
def test_rewritten_file_is_refused(tmp_path, fmt, scheduler):
    target, kwargs = fmt.write_to(tmp_path, fmt.data())
    ds = fmt.opener(target, **kwargs)
    old_token = tokenize(ds)
    with dask.config.set(scheduler=scheduler):
        np.testing.assert_array_equal(ds.to_dask().compute(), fmt.data())
        new = fmt.data(seed=1)
        rewrite(fmt, target, new)
        assert tokenize(ds) == old_token  # the dataset still describes the opened version
        with pytest.raises(DataSetError, match=CHANGED):
            ds.to_dask().compute()
        with pytest.raises(DataSetError, match=CHANGED):
            ds.to_dask(dtype="float64").compute()
        with pytest.raises(DataSetError, match=CHANGED):
            SumSigUDF().compute(ds)
        again = fmt.opener(target, **kwargs)
        assert tokenize(again) != old_token  # new graph keys, not the old results
        np.testing.assert_array_equal(again.to_dask().compute(), new)
        res = SumSigUDF().compute(again)
    expected = new.astype(np.float64).sum(axis=(2, 3))
    np.testing.assert_allclose(res["intensity"].values, expected, rtol=1e-6)


def test_changed_file_on_every_scheduler(scheduler, tmp_path):
    """The error comes back from worker processes and distributed workers too."""
    path = tmp_path / "scan.raw"
    data = np.arange(6 * 5 * 4, dtype=np.uint16).reshape(6, 5, 4)
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(6,), sig_shape=(5, 4), dtype="uint16")
    np.testing.assert_array_equal(ds.to_dask().compute(), data)
    data[::-1].astype(np.float32).tofile(path)
    with pytest.raises(DataSetError, match=r"scan.raw' changed since it was opened \(its size"):
        ds.to_dask().compute()
    with pytest.raises(DataSetError, match=r"scan.raw' changed since it was opened \(its size"):
        SumSigUDF().compute(ds)


def test_npy_replaced_by_float32_is_not_read_as_uint16(tmp_path):
    """The issue's case: same shape, another dtype (was read as uint16 garbage)."""
    data = make_data("<u2")
    path, _ = write_npy(tmp_path, data)
    ds = ltdask.open_npy(path)
    np.save(path, data.astype(np.float32))
    with pytest.raises(DataSetError, match=r"scan.npy' changed since it was opened \(its size"):
        ds.to_dask().compute(scheduler="sync")
    np.testing.assert_array_equal(ltdask.open_npy(path).to_dask().compute(), data)


@pytest.mark.parametrize(
    "create",
    [
        pytest.param({}, id="contiguous-mapped"),
        pytest.param(dict(chunks=(2, 3, 4, 6), compression="gzip"), id="gzip-h5py"),
    ],
)
def test_hdf5_rewritten_by_h5py_is_not_another_datasets_bytes(tmp_path, create):
    """The issue's case: h5py rewrote the file with another dataset first (was read as
    that dataset's bytes, 6.4e31 per frame)."""
    data = make_data("<f4")
    path, kwargs = write_hdf5(tmp_path, data, **create)
    ds = ltdask.open_hdf5(path, **kwargs)
    with h5py.File(path, "w") as f:
        f.create_dataset("first", data=np.full(1000, 7e31))
        f.create_dataset("entry/data", data=data + 1, **create)
    with pytest.raises(DataSetError, match=r"scan.h5' changed since it was opened"):
        ds.to_dask().compute(scheduler="sync")
    with pytest.raises(DataSetError, match=r"scan.h5' changed since it was opened"):
        SumSigUDF().compute(ds)
    np.testing.assert_array_equal(ltdask.open_hdf5(path, **kwargs).to_dask().compute(), data + 1)


@pytest.mark.parametrize("how", ["in-place-same-size", "replaced", "truncated", "appended"])
def test_kept_map_is_not_handed_out_for_a_changed_file(tmp_path, how):
    """The map cache holds the old version's map: the check is on the file, not the map."""
    path = tmp_path / "scan.raw"
    data = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(4,), sig_shape=(5, 6), dtype="float32")
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="sync"), data)
    assert any(key[0] == str(path) for key in MAPS._maps)
    before = path.stat().st_mtime_ns
    if how == "in-place-same-size":
        (data + 1).tofile(path)
    elif how == "replaced":
        (data + 1).tofile(str(path) + ".new")
        os.replace(str(path) + ".new", path)
    elif how == "truncated":
        data[:2].tofile(path)
    else:
        with open(path, "ab") as f:
            f.write(data[:1].tobytes())
    os.utime(path, ns=(before + 10**9, before + 10**9))
    described = {
        "in-place-same-size": "it was modified",
        "replaced": "it was replaced by another file",
        "truncated": "its size went from 480 to 240 bytes",
        "appended": "its size went from 480 to 600 bytes",
    }[how]
    message = rf"scan.raw' changed since it was opened \({described}\); open it again"
    with pytest.raises(DataSetError, match=message):
        ds.to_dask().compute(scheduler="sync")
    with pytest.raises(DataSetError, match=message):
        ds.to_dask().compute(scheduler="threads")


def test_one_stat_per_file_per_task(tmp_path, monkeypatch):
    """The check costs one ``fstat`` per file a task reads, not one per tile."""
    path = tmp_path / "scan.raw"
    data = np.arange(64 * 16 * 16, dtype=np.uint16).reshape(64, 16, 16)
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(64,), sig_shape=(16, 16), dtype="uint16")
    calls = []
    real = os.fstat

    def counting(fd):
        stat = real(fd)
        if os.path.samestat(stat, os.stat(path)):  # (other threads' fstat calls: not ours)
            calls.append(fd)
        return stat

    monkeypatch.setattr(os, "fstat", counting)
    with dask.config.set({"ltdask.partition-bytes": 4096, "ltdask.tile-bytes": 512}):
        arr = ds.to_dask(dtype="float32")
        assert arr.npartitions > 1
        np.testing.assert_array_equal(arr.compute(scheduler="sync"), data)
    assert len(calls) == arr.npartitions


def test_signature_is_recorded_small_and_picklable(tmp_path):
    import pickle

    path = tmp_path / "a.raw"
    np.zeros(100, dtype=np.uint8).tofile(path)
    fs = FileSet([File(str(path), 0, 10)], (10,), "uint8")
    assert fs.files[0].signature == signature_of(os.stat(path))
    clone = pickle.loads(pickle.dumps(fs))
    assert clone.files[0].signature == fs.files[0].signature
    assert len(pickle.dumps(fs.files[0])) < 300


def test_map_file_checks_the_signature(tmp_path):
    path = tmp_path / "a.raw"
    np.zeros(100, dtype=np.uint8).tofile(path)
    signature = signature_of(os.stat(path))
    assert map_file(str(path), signature=signature).size == 100
    np.zeros(101, dtype=np.uint8).tofile(path)
    with pytest.raises(DataSetError, match=r"a.raw' changed since.*from 100 to 101 bytes"):
        map_file(str(path), signature=signature)
    assert map_file(str(path)).size == 101  # without a signature: whatever is there


def test_raw_csr_value_file_replaced(tmp_path):
    from helpers.formatfiles import write_raw_csr

    data = make_data("<f4", sparse=True)
    path, _ = write_raw_csr(tmp_path, data)
    ds = ltdask.open_raw_csr(path)
    values = tmp_path / "scan_data.raw"
    replacement = np.fromfile(values, dtype="<f4").astype("<f8")[: values.stat().st_size // 8]
    replacement.tofile(str(values) + ".new")
    os.replace(str(values) + ".new", values)  # same size, another file
    with pytest.raises(DataSetError, match=r"scan_data.raw' changed since it was opened"):
        ds.to_dask().compute(scheduler="sync")


def test_device_number_of_another_host_is_not_a_change(tmp_path):
    """Workers of a cluster see a network file system under their own device numbers: the
    same inode, size and mtime is the same file."""
    import dataclasses

    path = tmp_path / "scan.raw"
    data = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(4,), sig_shape=(5, 6), dtype="float32")
    f = ds.fileset.files[0]
    elsewhere = (f.signature[0] + 1, *f.signature[1:])
    ds.fileset.files = (dataclasses.replace(f, signature=elsewhere),)
    np.testing.assert_array_equal(ds.to_dask().compute(scheduler="sync"), data)
    np.testing.assert_array_equal(
        map_file(str(path), signature=elsewhere).view(np.float32), data.ravel()
    )
