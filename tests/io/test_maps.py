"""Memory maps kept for reuse: the same map while the file is unchanged, a new one after."""

from __future__ import annotations

import mmap
import os

import dask
import numpy as np
import pytest

import ltdask
from ltdask.io.maps import MAPS, keeping_maps, map_file


@pytest.fixture(autouse=True)
def _cache_on():
    with dask.config.set({"ltdask.map-cache-bytes": "1GiB"}), keeping_maps():
        yield
    MAPS.clear()


def test_kept_only_when_asked(tmp_path):
    path = str(tmp_path / "o.raw")
    np.zeros(64, dtype=np.uint8).tofile(path)
    with keeping_maps(False):
        assert map_file(path) is not map_file(path)
    kept = map_file(path)
    with keeping_maps(False):
        assert map_file(path) is kept  # a kept map is used by everyone


@pytest.mark.parametrize("setting", ["default", 0])
def test_second_udf_run_keeps_maps(tmp_path, setting):
    """A scan read once leaves nothing mapped (RSS stays flat); from the second UDF run
    over the same files on, their maps are kept (no page faults), unless turned off."""
    path = tmp_path / "scan.raw"
    data = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)
    data.tofile(path)
    MAPS.clear()
    value = (
        ltdask.runtime.settings.DEFAULTS["ltdask"]["map-cache-bytes"] if setting == "default" else 0
    )
    config = {"ltdask.map-cache-bytes": value, "scheduler": "sync"}
    with keeping_maps(False), dask.config.set(config):
        for run in range(3):
            ds = ltdask.open_raw(path, nav_shape=(6,), sig_shape=(5, 4), dtype="float32")
            res = ltdask.udf.SumUDF().compute(ds)
            np.testing.assert_array_equal(res["intensity"].values, data.sum(axis=0))
            kept = any(key[0] == str(path) for key in MAPS._maps)
            assert kept == (run > 0 and setting == "default")


def test_maps_are_reused_until_the_file_changes(tmp_path):
    path = str(tmp_path / "a.raw")
    np.arange(100, dtype=np.uint8).tofile(path)
    first = map_file(path)
    assert map_file(path) is first
    np.arange(100, 200, dtype=np.uint8).tofile(path + ".new")
    os.replace(path + ".new", path)  # a new file under the old name
    second = map_file(path)
    assert second is not first
    np.testing.assert_array_equal(second, np.arange(100, 200))
    np.testing.assert_array_equal(first, np.arange(100))  # old views stay valid


def test_no_reuse_when_disabled(tmp_path):
    path = str(tmp_path / "b.raw")
    np.zeros(64, dtype=np.uint8).tofile(path)
    with dask.config.set({"ltdask.map-cache-bytes": 0}):
        assert map_file(path) is not map_file(path)
    with dask.config.set({"ltdask.map-cache-bytes": 10}):  # larger than the limit
        assert map_file(path) is not map_file(path)


def test_cache_is_bounded(tmp_path):
    paths = []
    for i in range(4):
        paths.append(str(tmp_path / f"{i}.raw"))
        np.full(1000, i, dtype=np.uint8).tofile(paths[-1])
    MAPS.clear()
    with dask.config.set({"ltdask.map-cache-bytes": 2500}):
        maps = [map_file(p) for p in paths]
        assert map_file(paths[-1]) is maps[-1]
        assert map_file(paths[0]) is not maps[0]  # evicted, the oldest
        assert len(MAPS._maps) <= 2


def test_truncated_after_open_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "scan.raw"
    data = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(4,), sig_shape=(5, 6), dtype="float32")
    np.testing.assert_array_equal(ds.to_dask().compute(), data)  # now mapped and kept
    with open(path, "r+b") as f:
        f.truncate(2 * 5 * 6 * 4)
    changed = r"scan.raw' changed since it was opened \(its size went from 480 to 240 bytes\)"
    with pytest.raises(ltdask.DataSetError, match=changed + "; open it again"):
        ds.to_dask().compute()


MIB = 2**20
needs_rss = pytest.mark.skipif(
    ltdask.runtime.settings.resident_bytes() is None or not hasattr(mmap, "MADV_DONTNEED"),
    reason="needs /proc/self/statm and madvise(MADV_DONTNEED)",
)


def touched_map(path, nbytes: int) -> np.ndarray:
    """`path` written with `nbytes` bytes, mapped, kept, and every page of it read."""
    pattern = np.arange(nbytes // 8, dtype=np.uint64)
    pattern.tofile(path)
    buf = map_file(str(path))
    assert buf.view(np.uint64)[:: 4096 // 8].sum() == pattern[:: 4096 // 8].sum()
    return buf


@needs_rss
def test_evicted_maps_give_their_pages_back(tmp_path):
    """A map evicted from the cache leaves the RSS at once, though a view of it is still
    in use (which reads on, faulting its pages in again)."""
    MAPS.clear()
    with dask.config.set({"ltdask.map-cache-bytes": 40 * MIB}):
        first = touched_map(tmp_path / "a.raw", 32 * MIB)
        before = ltdask.runtime.settings.resident_bytes()
        second = touched_map(tmp_path / "b.raw", 32 * MIB)  # evicts the first
        after = ltdask.runtime.settings.resident_bytes()
    assert [key[0] for key in MAPS._maps] == [str(tmp_path / "b.raw")]
    assert after - before < 8 * MIB  # the second's 32 MiB came, the first's went
    np.testing.assert_array_equal(
        first.view(np.uint64)[-3:], [4 * MIB - 3, 4 * MIB - 2, 4 * MIB - 1]
    )
    assert second.nbytes == 32 * MIB


@needs_rss
def test_trim_keeps_a_worker_within_its_budget(tmp_path, monkeypatch):
    """In a worker with a memory limit (here: its budget made up), kept maps give pages back
    from their start until the RSS is within the budget; they stay kept and read the same,
    and the end of the map stays resident for the next run."""
    MAPS.clear()
    with dask.config.set({"ltdask.map-cache-bytes": "1GiB"}):
        buf = touched_map(tmp_path / "scan.raw", 96 * MIB)
    rss = ltdask.runtime.settings.resident_bytes()
    budget = rss - 40 * MIB
    monkeypatch.setattr(ltdask.runtime.settings, "worker_map_budget", lambda: budget)
    MAPS.trim()
    after = ltdask.runtime.settings.resident_bytes()
    assert after <= budget
    # released 32 MiB at a time: two such pieces were enough; the last third stayed
    assert after > rss - 72 * MIB
    assert map_file(str(tmp_path / "scan.raw")) is buf
    np.testing.assert_array_equal(buf.view(np.uint64)[:4], [0, 1, 2, 3])


@needs_rss
def test_trim_is_a_no_op_outside_workers(tmp_path):
    MAPS.clear()
    touched_map(tmp_path / "scan.raw", 16 * MIB)
    rss = ltdask.runtime.settings.resident_bytes()
    MAPS.trim()  # no worker: no budget
    assert ltdask.runtime.settings.resident_bytes() > rss - 8 * MIB


def _vm_flags(address: int) -> set[str]:
    """The kernel's VmFlags of the mapping of this process that holds `address`."""
    flags, inside = set(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and ":" not in first:
                lo, hi = (int(v, 16) for v in first.split("-"))
                inside = lo <= address < hi
            elif inside and first == "VmFlags:":
                flags = set(line.split()[1:])
    return flags


THP = "/sys/kernel/mm/transparent_hugepage/enabled"


@pytest.mark.skipif(
    not os.path.exists(THP) or "[never]" in open(THP).read(),
    reason="needs Linux with transparent huge pages",
)
def test_maps_of_large_files_ask_for_huge_pages(tmp_path):
    """Maps of files of 2 MiB or more carry ``MADV_HUGEPAGE`` (VmFlags ``hg``): page-cached
    large folios map 2 MiB per fault, and pages read from disk through the map are cached
    that way; smaller files are left as they are."""
    big, small = tmp_path / "big.raw", tmp_path / "small.raw"
    np.zeros(3 * 2**20, np.uint8).tofile(big)
    np.zeros(2**20, np.uint8).tofile(small)
    with keeping_maps(False):
        large, little = map_file(str(big)), map_file(str(small))
        assert "hg" in _vm_flags(large.ctypes.data)
        assert "hg" not in _vm_flags(little.ctypes.data)
        assert int(large.sum()) == 0
