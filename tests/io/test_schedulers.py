"""The read path on every dask scheduler: synchronous, threads, processes and distributed."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from helpers.rawfiles import expected_scan, make_frames, read_stream, write_scan

import ltdask

SIG = (6, 5)

# (stored dtype, layout, files, nav_shape, sync_offset, read dtype)
CASES = [
    pytest.param("<f4", {}, 1, (4, 6), 0, None, id="f32-straight"),
    pytest.param(
        ">u2",
        {"file_header": 7, "frame_header": 3, "frame_footer": 1},
        3,
        (5, 5),
        -3,
        None,
        id="u16-bigendian-headers-3files-sync-3",
    ),
    pytest.param("<u2", {"frame_header": 4}, 2, (4, 7), 2, "float32", id="u16-as-f32-sync+2"),
    pytest.param(">c8", {"file_header": 8}, 1, (3, 9), 0, "complex128", id="c64-bigendian"),
]


@pytest.mark.parametrize("dtype, layout, files, nav_shape, sync_offset, read_dtype", CASES)
def test_raw_on_scheduler(
    scheduler, tmp_path, dtype, layout, files, nav_shape, sync_offset, read_dtype
):
    stream = make_frames(np.random.default_rng(3), 24, SIG, dtype)
    paths = write_scan(tmp_path, stream, files=files, **layout)
    expected, _ = expected_scan(read_stream(paths, SIG, dtype, **layout), nav_shape, sync_offset)
    with dask.config.set({"ltdask.partition-bytes": 400, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(
            paths,
            nav_shape,
            SIG,
            dtype,
            file_header_bytes=layout.get("file_header", 0),
            frame_header_bytes=layout.get("frame_header", 0),
            frame_footer_bytes=layout.get("frame_footer", 0),
            sync_offset=sync_offset,
        )
        arr = ds.to_dask(dtype=read_dtype)
    assert arr.npartitions > 1
    if read_dtype is not None:
        expected = expected.astype(read_dtype)
    np.testing.assert_array_equal(arr.compute(), expected)
    # custom chunks whose nav blocks are not flat ranges, and sig chunks
    np.testing.assert_array_equal(ds.to_dask(read_dtype, chunks=(2, 3, 4, 2)).compute(), expected)


def test_npy_and_array_on_scheduler(scheduler, tmp_path):
    data = make_frames(np.random.default_rng(4), 20, SIG, "<i2").reshape(4, 5, *SIG)
    np.save(tmp_path / "scan.npy", data)
    with dask.config.set({"ltdask.partition-bytes": 400, "ltdask.min-partitions": 1}):
        from_npy = ltdask.open_npy(tmp_path / "scan.npy").to_dask(dtype="float32")
        from_array = ltdask.from_array(data).to_dask(dtype="float64")
    np.testing.assert_array_equal(from_npy.compute(), data.astype("float32"))
    np.testing.assert_array_equal(from_array.compute(), data.astype("float64"))
    # both in one graph
    total = (from_npy.sum(dtype="float64") + from_array.sum()).compute()
    assert total == 2 * data.astype("float64").sum()  # integers: exact in float64


def test_to_xarray_on_scheduler(scheduler, tmp_path):
    stream = make_frames(np.random.default_rng(5), 12, SIG, ">f4")
    paths = write_scan(tmp_path, stream)
    ds = ltdask.open_raw(paths, (3, 4), SIG, ">f4")
    xa = ds.to_xarray()
    sums = xa.astype("float64").sum(dim=("det_y", "det_x")).values
    np.testing.assert_allclose(sums, stream.astype("float64").sum((1, 2)).reshape(3, 4))


@pytest.mark.slow
def test_distributed_client_is_processes(distributed_client):
    info = distributed_client.scheduler_info()
    assert len(info["workers"]) == 2
    assert all(w["nthreads"] == 1 for w in info["workers"].values())
    import os

    pids = set(distributed_client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
