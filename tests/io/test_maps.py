"""Memory maps kept for reuse: the same map while the file is unchanged, a new one after."""

from __future__ import annotations

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
    value = ltdask._config.DEFAULTS["ltdask"]["map-cache-bytes"] if setting == "default" else 0
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
