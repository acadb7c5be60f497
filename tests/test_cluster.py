"""UDF runs and dask reductions on a real cluster: ``dask scheduler`` and two ``dask worker``
processes started from the command line, reached over TCP on 127.0.0.1.

Everything is compared with the synchronous scheduler. Files are opened by the workers (the
datasets and graphs that travel are descriptions, a few kB), and what the partition tasks
send back are partial results, never frames.
"""

from __future__ import annotations

import logging
import math
import os
import pickle

import dask
import numpy as np
import pytest
import xarray as xr
from helpers import clusterprocs
from helpers.cluster_udfs import SlowSumSigUDF, WhereUDF
from helpers.formatfiles import FORMAT_PARAMS

import ltdask
from ltdask.io import open_zarr
from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF, SumSigUDF, SumUDF
from ltdask.udf.graph import Run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

NAV = (16, 12)
SIG = (24, 20)
#: partitions of at most 16 frames (frames count as float32: 24 * 20 * 4 bytes); they are cut
#: along whole scan rows: 16 partitions of one row (12 frames) each
PARTITIONS = {"ltdask.partition-bytes": 16 * 24 * 20 * 4, "ltdask.min-partitions": 1}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One scheduler and two single-threaded workers for the whole module."""
    with clusterprocs.running(tmp_path_factory.mktemp("cluster")) as pair:
        yield pair


@pytest.fixture
def client(cluster):
    """The cluster's client as the active dask scheduler."""
    _, client = cluster
    with dask.config.set(scheduler=client):
        yield client


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    """``(truth, raw dataset, npy dataset)``: a uint16 scan of 16 partitions, as files."""
    folder = tmp_path_factory.mktemp("scan")
    rng = np.random.default_rng(42)
    data = rng.integers(0, 4000, size=(*NAV, *SIG), dtype=np.uint16)
    data.tofile(folder / "scan.raw")
    np.save(folder / "scan.npy", data.astype(np.float32))
    with dask.config.set(PARTITIONS):
        raw = ltdask.open_raw(folder / "scan.raw", nav_shape=NAV, sig_shape=SIG, dtype="uint16")
        npy = ltdask.open_npy(folder / "scan.npy")
        assert len(raw.get_partitions()) == len(npy.get_partitions()) == 16
    return data, raw, npy


def sync(fn, *args, **kwargs):
    with dask.config.set(scheduler="sync"):
        return fn(*args, **kwargs)


def roi_for(nav, seed=3):
    roi = np.random.default_rng(seed).random(nav) < 0.4
    roi[0, 0] = False
    roi[-1, -1] = True
    return roi


# -- what travels -----------------------------------------------------------------------------
def test_datasets_pickle_small(scan):
    _, raw, npy = scan
    for ds in (raw, npy):
        size = len(pickle.dumps(ds))
        assert size < 4000, f"{ds!r} pickles to {size} bytes"
        again = pickle.loads(pickle.dumps(ds))
        assert again.shape == ds.shape and again.dtype == ds.dtype


def _graph_bytes(collections) -> tuple[int, int]:
    """``(pickled size of the whole low-level graph, largest pickled partition task)``."""
    graph = dict(dask.base.collections_to_expr(collections).__dask_graph__())
    whole = len(pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL))
    largest = max(
        len(pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
        for key, task in graph.items()
        if isinstance(key, tuple) and key[0].startswith("ltdask-udf-")
    )
    return whole, largest


def test_graph_of_a_large_scan_pickles_small(tmp_path):
    """A 2 GiB scan (a sparse file: no disk used) with a ROI and four UDFs: the graph and
    each partition task pickle small (measured: 1.3 MB in all, of which nav-sized valid
    masks and merge inputs are most; about 200 bytes per partition task, as the dataset,
    the UDFs and the ROI travel once, in the run's shared job node)."""
    path = tmp_path / "big.raw"
    nav, sig = (256, 256), (128, 128)
    nbytes = math.prod(nav) * math.prod(sig) * 2
    with open(path, "wb") as f:
        f.truncate(nbytes)
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    assert len(pickle.dumps(ds)) < 4000
    roi = roi_for(nav)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), CoMUDF.with_params(r=20)]
    results = ltdask.lazy(ds, udfs, roi=roi)
    assert len(ds.get_partitions()) >= 16
    whole, largest = _graph_bytes(results)
    assert whole < nbytes / 500, f"graph of a {nbytes} byte scan pickles to {whole} bytes"
    assert largest < 2000, f"a partition task pickles to {largest} bytes"


def test_runs_on_a_cluster_take_no_extra_round_trips(client, scan):
    """A computed run sends only the partition tasks and those that take from them (a
    merge; SumSigUDF's nav result out of each partition): a small job travels inside the
    partition tasks (no job node to compute and copy first), and the cheap rest (picks,
    reshapes, joining chunks) runs in the client on what comes back; a large job (a
    nav-sized ROI above `JOB_INLINE_BYTES`) keeps its node. Results as numpy's."""
    from distributed import get_task_stream

    from ltdask.udf.graph import JOB_INLINE_BYTES

    data, raw, _ = scan
    with get_task_stream(client) as stream:
        total, per_frame = ltdask.compute(raw, [SumUDF(), SumSigUDF()])
    kinds = {str(t["key"][0] if isinstance(t["key"], tuple) else t["key"]) for t in stream.data}
    kinds = {k.rsplit("-", 1)[0] for k in kinds}
    assert kinds == {"ltdask-udf", "ltdask-merge-all-0", "ltdask-nav-intensity-1"}, kinds
    np.testing.assert_allclose(total["intensity"], data.sum(axis=(0, 1), dtype=np.float64))
    np.testing.assert_allclose(per_frame["intensity"], data.sum(axis=(2, 3), dtype=np.float64))

    big = ltdask.from_array(np.ones((300, 300, 2, 2), np.uint8))
    roi = np.random.default_rng(0).random(big.nav_shape) < 0.5
    assert roi.size > JOB_INLINE_BYTES  # (the ROI travels as a byte per position)
    graph = dict(Run(big, [SumUDF()], roi).graph.partition_results.__dask_graph__())
    assert sum(str(k).startswith("ltdask-job-") for k in graph) == 1
    (res,) = ltdask.compute(big, [SumUDF()], roi=roi)
    np.testing.assert_array_equal(res["intensity"], np.full((2, 2), roi.sum()))


def test_workers_freeze_their_objects_after_a_partition_task(client, scan):
    """``ltdask.worker-gc-freeze`` (on by default): every worker that ran a partition task
    has frozen the garbage collector's objects once (see `ltdask.runtime.worker_gc`)."""
    import gc

    _, raw, _ = scan
    SumUDF().compute(raw)
    ran = client.run(lambda: __import__("ltdask.runtime.worker_gc").runtime.worker_gc._FROZEN_IN)
    counts = client.run(gc.get_freeze_count)
    assert ran and all(pids for pids in ran.values())
    assert all(counts[w] > 10_000 for w in ran), counts


def test_partition_tasks_return_partials_not_frames(client, tmp_path):
    """Each partition task's result, as a worker sends it, is a small fraction of the
    partition's data: partial buffers, never frames."""
    nav, sig = (32, 64), (32, 32)
    data = np.random.default_rng(1).integers(0, 1000, size=(*nav, *sig), dtype=np.uint16)
    data.tofile(tmp_path / "scan.raw")
    # partitions of 256 frames (512 kB of uint16 data each): 8 of them
    with dask.config.set({"ltdask.partition-bytes": 256 * 32 * 32 * 4, "ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(tmp_path / "scan.raw", nav_shape=nav, sig_shape=sig, dtype="uint16")
        assert len(ds.get_partitions()) == 8
    run = Run(ds, [SumUDF(), SumSigUDF(), StdDevUDF()])
    futures = client.compute(list(run.partition_results.to_delayed().ravel()))
    try:
        cells = client.gather(futures)
    finally:
        client.cancel(futures)
    frame_bytes = math.prod(sig) * 2
    for p, cell in zip(run.partitions, cells, strict=True):
        assert isinstance(cell[0], list) and len(cell[0]) == 3  # one partial per UDF
        sent = len(pickle.dumps(cell, protocol=pickle.HIGHEST_PROTOCOL))
        # SumUDF: one float32 frame, SumSigUDF: a float32 per frame, StdDevUDF: a few
        # float64 frames of moments; measured: about 30 kB
        assert sent < p.num_frames * frame_bytes / 10, (sent, p.num_frames * frame_bytes)
    results = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_allclose(results[0]["intensity"].values, data.sum(axis=(0, 1)), rtol=1e-6)


def test_runs_in_a_loop_get_keys_of_their_own(client, scan, caplog):
    """Runs of the same UDFs back to back: each with keys of its own (the last run's are
    still being released), so the client never gathers a key before it is computed again
    ("Couldn't gather ... rescheduling": 3-10 in 60 runs with shared keys)."""
    from ltdask.udf.plan import plan_run

    data, raw, _ = scan
    assert len({plan_run(raw, [SumUDF()]).token for _ in range(2)}) == 2
    assert len({sync(plan_run, raw, [SumUDF()]).token for _ in range(2)}) == 1  # (not here)
    with caplog.at_level(logging.WARNING, logger="distributed.client"):
        for _ in range(20):
            (total,) = ltdask.compute(raw, [SumUDF()])
            np.testing.assert_allclose(total["intensity"].values, data.sum(axis=(0, 1)))
    assert "Couldn't gather" not in caplog.text


# -- results agree with the synchronous scheduler ------------------------------------------------
def test_to_dask_reductions(client, scan):
    data, raw, npy = scan
    for ds, truth in ((raw, data), (npy, data.astype(np.float32))):
        arr = ds.to_dask()
        out = dask.compute(
            arr.sum(dtype=np.float64),
            arr.mean(axis=(0, 1)),
            arr.max(axis=(2, 3)),
            arr[::3, 1:7].sum(axis=(0, 1), dtype=np.int64),
            scheduler=client,
        )
        expected = (
            truth.sum(dtype=np.float64),
            truth.mean(axis=(0, 1)),
            truth.max(axis=(2, 3)),
            truth[::3, 1:7].sum(axis=(0, 1), dtype=np.int64),
        )
        for got, want in zip(out, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        assert float(ds.to_xarray().sum().compute(scheduler=client)) == float(truth.sum())


def test_multi_udf_run(client, scan):
    _, raw, _ = scan
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()]
    on_cluster = ltdask.compute(raw, udfs)
    reference = sync(ltdask.compute, raw, udfs)
    for got, want in zip(on_cluster, reference, strict=True):
        xr.testing.assert_identical(got, want)


def test_single_udfs(client, scan):
    data, raw, npy = scan
    masks = ApplyMasksUDF(
        mask_factories=[
            lambda: ltdask.masks.circular(12, 10, 20, 24, 6),
            lambda: ltdask.masks.ring(12, 10, 20, 24, 8, 4),
        ]
    )
    for ds in (raw, npy):
        for udf in (SumSigUDF(), CoMUDF.with_params(cy=12, cx=10, r=8), masks):
            xr.testing.assert_identical(udf.compute(ds), sync(udf.compute, ds))
    np.testing.assert_allclose(
        SumSigUDF().compute(raw)["intensity"].values, data.sum(axis=(2, 3)), rtol=1e-6
    )


def test_roi_runs(client, scan):
    data, raw, npy = scan
    roi = roi_for(NAV)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()]
    for ds in (raw, npy):
        on_cluster = ltdask.compute(ds, udfs, roi=roi)
        for got, want in zip(on_cluster, sync(ltdask.compute, ds, udfs, roi=roi), strict=True):
            xr.testing.assert_identical(got, want)
    total, per_frame, _ = on_cluster
    np.testing.assert_allclose(total["intensity"].values, data[roi].sum(axis=0), rtol=1e-6)
    assert np.isnan(per_frame["intensity"].values[~roi]).all()
    assert (per_frame["intensity_valid"].values == roi).all()


def test_work_is_spread_over_both_workers(client, cluster, scan):
    """The partition tasks run in the worker processes (which open the files), on both."""
    _, raw, _ = scan
    pids = WhereUDF().compute(raw)["pid"].values
    worker_pids = set(client.run(os.getpid).values())
    assert len(worker_pids) == 2
    assert set(np.unique(pids)) == worker_pids
    assert os.getpid() not in worker_pids


@pytest.mark.parametrize("fmt", FORMAT_PARAMS)
def test_every_format_on_the_cluster(client, fmt, tmp_path):
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        ds, _ = fmt.open(tmp_path)
        ds.get_partitions()
    udfs = [SumUDF(), SumSigUDF()]
    for got, want in zip(ltdask.compute(ds, udfs), sync(ltdask.compute, ds, udfs), strict=True):
        xr.testing.assert_identical(got, want)
    np.testing.assert_array_equal(
        ds.to_dask().compute(scheduler=client), sync(ds.to_dask().compute)
    )


def test_to_zarr_on_the_cluster(client, scan, tmp_path):
    _, raw, _ = scan
    roi = roi_for(NAV, seed=5)
    udfs = [SumUDF(), SumSigUDF(), SlowSumSigUDF(delay=0)]
    path = tmp_path / "results.zarr"
    ltdask.to_zarr(ltdask.lazy(raw, udfs, roi=roi), path)
    reference = sync(ltdask.compute, raw, udfs, roi=roi)
    for group, want in zip(("SumUDF", "SumSigUDF", "SlowSumSigUDF"), reference, strict=True):
        with xr.open_zarr(path, group=group) as got:
            xr.testing.assert_equal(got.compute(), want)
    assert os.listdir(tmp_path) == ["results.zarr"]
    # and the dataset itself, converted on the workers
    converted = tmp_path / "scan.zarr"
    raw.to_zarr(converted)
    back = open_zarr(converted)
    np.testing.assert_array_equal(
        back.to_dask().compute(scheduler=client), sync(raw.to_dask().compute)
    )


def _auto_sizes(monkeypatch, runs: int, threads: int | None = None) -> None:
    """``ltdask.partition-bytes`` ``auto`` with datasets' own partitions of one scan row
    (as `PARTITIONS`) and runs' of `runs` bytes on a cluster (`threads` on threads)."""
    from ltdask.runtime import settings

    row = PARTITIONS["ltdask.partition-bytes"]
    sizes = {"dataset": row, "views": row, "cluster": runs, "threads": threads or runs}
    monkeypatch.setattr(settings, "AUTO_PARTITION_BYTES", sizes)


def test_cluster_runs_take_larger_partitions(client, scan, monkeypatch):
    """On a cluster a run cuts the scan into the cluster's partition size (fewer tasks),
    at least two per worker thread; the synchronous scheduler keeps the dataset's 16, and
    so does a run where ``ltdask.partition-bytes`` is that size. Same results."""
    data, raw, _ = scan
    _auto_sizes(monkeypatch, runs=8 * PARTITIONS["ltdask.partition-bytes"])
    with dask.config.set({"ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(raw.path, nav_shape=NAV, sig_shape=SIG, dtype="uint16")
        assert len(ds.get_partitions()) == 16
        text = str(ltdask.explain(ds, [SumUDF()]))
        assert " in 4 partition(s)" in text, text  # 2 workers x 1 thread: at least 4
        with dask.config.set({"ltdask.min-partitions": 6}):  # (2 scan rows each)
            ds6 = ltdask.open_raw(raw.path, nav_shape=NAV, sig_shape=SIG, dtype="uint16")
            assert " in 8 partition(s)" in str(ltdask.explain(ds6, [SumUDF()]))
        (total,) = ltdask.compute(ds, [SumUDF()])
        assert " in 16 partition(s)" in str(sync(ltdask.explain, ds, [SumUDF()]))
    np.testing.assert_array_equal(total["intensity"].values, data.sum(axis=(0, 1)))
    with dask.config.set(PARTITIONS):  # (a size: that size in runs too)
        assert " in 16 partition(s)" in str(ltdask.explain(raw, [SumUDF()]))


def _partition_tasks(result) -> int:
    """The partition tasks in the graph of a lazy result."""
    keys = result["intensity"].data.__dask_graph__().keys()
    return sum(1 for k in keys if isinstance(k, tuple) and k[0].startswith("ltdask-udf-"))


def test_lazy_results_compute_on_another_scheduler(client, scan, monkeypatch):
    """A lazy result keeps the partitions chosen where ``lazy`` was called: planned for
    the threaded scheduler and computed on the cluster, planned for the cluster and
    computed on threads, or planned for another scheduler with ``scheduler=`` -- the same
    values in every case."""
    data, raw, _ = scan
    truth = data.astype(np.float64).sum(axis=(0, 1))
    frame = PARTITIONS["ltdask.partition-bytes"] // 16
    # 16 partitions of one scan row (12 frames) as opened; runs on threads of 2 rows each
    # (8 partitions), on the cluster of 4 rows each (4 partitions)
    _auto_sizes(monkeypatch, runs=48 * frame, threads=24 * frame)
    with dask.config.set({"ltdask.min-partitions": 1}):
        ds = ltdask.open_raw(raw.path, nav_shape=NAV, sig_shape=SIG, dtype="uint16")
        with dask.config.set(scheduler="threads", num_workers=1):
            (on_threads,) = ltdask.lazy(ds, [SumUDF()])
            (for_cluster,) = ltdask.lazy(ds, [SumUDF()], scheduler=client)
            (for_sync,) = ltdask.lazy(ds, [SumUDF()], scheduler="sync")
        (on_cluster,) = ltdask.lazy(ds, [SumUDF()])  # the client is the active scheduler
        (for_threads,) = ltdask.lazy(ds, [SumUDF()], scheduler="threads")
        assert " in 4 partition(s)" in str(ltdask.explain(ds, [SumUDF()]))
        with dask.config.set(num_workers=1):
            text = str(ltdask.explain(ds, [SumUDF()], scheduler="threads"))
            assert " in 8 partition(s)" in text, text
    counts = [_partition_tasks(r) for r in (on_threads, for_cluster, for_sync, on_cluster)]
    assert counts == [8, 4, 16, 4]
    assert _partition_tasks(for_threads) >= 8  # (2 threads or more here: 2 per thread)
    for result in (on_threads, for_cluster, for_sync, on_cluster, for_threads):
        np.testing.assert_array_equal(result["intensity"].compute().values, truth)  # cluster
        np.testing.assert_array_equal(sync(result["intensity"].compute).values, truth)
        with dask.config.set(scheduler="threads"):
            np.testing.assert_array_equal(result["intensity"].compute().values, truth)
