"""Partitions of runs on a distributed cluster (`ltdask.io.partition.for_run`), with a
stand-in for the Client: what it reads of the cluster is its workers' threads and memory
limits (a real cluster runs in ``tests/test_cluster.py``)."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import ltdask
from ltdask.io.partition import for_run
from ltdask.runtime import schedulers, settings
from ltdask.runtime.schedulers import RunTarget

#: frames of 16 x 16 float32 (1 KiB each): 128 MiB default partitions hold 131072 of them
SIG = (16, 16)
FRAME = 16 * 16 * 4


class FakeClient:
    def __init__(self, workers):
        self.workers = workers

    def scheduler_info(self):
        return {"workers": {f"tcp://w{i}": w for i, w in enumerate(self.workers)}}


def on_cluster(monkeypatch, *workers):
    monkeypatch.setattr(schedulers, "cluster_client", lambda: FakeClient(list(workers)))


def auto_sizes(monkeypatch, dataset=256 * FRAME, runs=2048 * FRAME) -> None:
    """``ltdask.partition-bytes`` ``auto`` at test sizes: datasets' own partitions of
    `dataset` bytes, runs' (threads and cluster) of `runs`."""
    sizes = {"dataset": dataset, "views": dataset, "threads": runs, "cluster": runs}
    monkeypatch.setattr(settings, "AUTO_PARTITION_BYTES", sizes)


#: at least one partition (the default: one per core)
ONE = {"ltdask.min-partitions": 1}


@pytest.fixture
def scan(monkeypatch):
    """A lazily zero scan of 64 x 64 frames in 16 partitions of 4 scan rows each (under
    ``auto`` sizes of 256 frames for datasets, 2048 frames for runs)."""
    auto_sizes(monkeypatch)
    with dask.config.set(ONE):
        ds = ltdask.from_array(np.zeros((64, 64, *SIG), np.float32))
        assert len(ds.get_partitions()) == 16
    return ds


def partitions(ds) -> int:
    return len(ds.get_partitions())


def planned(ds):
    return for_run(ds, RunTarget.resolve())


def test_local_runs_keep_the_partitions_by_default(monkeypatch, scan):
    """Run partitions of 2048 frames, but no more partitions than two per thread of a
    scheduler with 8 threads: the scan's 16 stay."""
    with dask.config.set(ONE, scheduler="threads", num_workers=8):
        assert planned(scan) is scan


def test_runs_staged_to_a_gpu_take_one_partition_per_thread(monkeypatch, scan):
    """A run whose tiles go to a GPU: one partition per thread (4 of 1024 frames on 4
    threads), where a CPU run takes two (8 of 512)."""
    with dask.config.set(ONE, scheduler="threads", num_workers=4):
        target = RunTarget.resolve()
        on_gpu, on_cpu = for_run(scan, target, device=True), for_run(scan, target)
    assert (partitions(on_gpu), partitions(on_cpu)) == (4, 8)
    assert {p.num_frames for p in on_gpu.get_partitions()} == {1024}


@pytest.mark.parametrize("scheduler", [None, "threads", "threading"])
def test_threaded_runs_take_larger_partitions(monkeypatch, scheduler):
    """At least two per thread, of at most the run size, and at most an eighth of a
    thread's share of the RAM; results as numpy's."""
    auto_sizes(monkeypatch)
    data = np.arange(64 * 64, dtype=np.float32).reshape(64, 64, 1, 1) * np.ones(SIG, np.float32)
    with dask.config.set(ONE):
        ds = ltdask.from_array(data)
        assert partitions(ds) == 16
        with dask.config.set(scheduler=scheduler, num_workers=2):
            coarse = planned(ds)
            assert partitions(coarse) == 4  # 2 threads: at least 4 (not the 2 of 2048 frames)
            with dask.config.set(num_workers=1):
                assert partitions(planned(ds)) == 2  # 1 thread: 2048 frames each
            monkeypatch.setattr(settings, "total_memory", lambda: 2 * 8 * 1024 * FRAME)
            assert partitions(planned(ds)) == 4  # 8 MiB of RAM per thread: 1024 frames
            monkeypatch.setattr(settings, "total_memory", lambda: 2 * 8 * 512 * FRAME)
            assert partitions(planned(ds)) == 8
            res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, data.sum(axis=(2, 3)))


@pytest.mark.parametrize("scheduler", ["sync", "synchronous", "processes"])
def test_other_local_schedulers_keep_the_partitions(monkeypatch, scheduler):
    auto_sizes(monkeypatch)
    with dask.config.set(ONE):
        ds = ltdask.from_array(np.zeros((64, 64, *SIG), np.float32))
        with dask.config.set(scheduler=scheduler, num_workers=2):
            assert planned(ds) is ds


def test_a_size_given_is_every_partition_size(monkeypatch):
    """``ltdask.partition-bytes`` set to a size: datasets and runs alike take it (a run
    keeps the dataset's partitions, already of that size)."""
    auto_sizes(monkeypatch)
    with dask.config.set({**ONE, "ltdask.partition-bytes": 512 * FRAME}):
        ds = ltdask.from_array(np.zeros((64, 64, *SIG), np.float32))
        assert partitions(ds) == 8
        with dask.config.set(scheduler="threads", num_workers=1):
            assert planned(ds) is ds


def test_larger_partitions_at_least_two_per_thread(monkeypatch, scan):
    on_cluster(monkeypatch, {"nthreads": 1}, {"nthreads": 1})
    with dask.config.set(ONE):
        coarse = planned(scan)
        assert partitions(coarse) == 4  # 2 threads: at least 4 (not the 2 of 2048 frames)
        on_cluster(monkeypatch, {"nthreads": 1})
        assert partitions(planned(scan)) == 2  # 1 thread: 2048 frames each
        on_cluster(monkeypatch, {"nthreads": 8})
        assert planned(scan) is scan  # 16 threads' worth: no fewer partitions
    np.testing.assert_array_equal(
        ltdask.udf.SumUDF().compute(coarse)["intensity"].values, np.zeros(SIG)
    )


def test_memory_limit_caps_the_partitions(monkeypatch, scan):
    """A thread's share of its worker's memory limit, an eighth of it per partition."""
    with dask.config.set(ONE):
        on_cluster(monkeypatch, {"nthreads": 1, "memory_limit": 8 * 1024 * FRAME})
        assert partitions(planned(scan)) == 4  # 1024 frames each
        on_cluster(monkeypatch, {"nthreads": 2, "memory_limit": 8 * 1024 * FRAME})
        assert partitions(planned(scan)) == 8  # 512 each: 4 MiB per thread


def test_unknown_clusters_and_other_settings_keep_the_partitions(monkeypatch, scan):
    """No workers listed (an asynchronous client's cache): nothing known, nothing changed;
    partitions made under other settings than the run's (set when the dataset was
    opened) stay."""
    on_cluster(monkeypatch)
    with dask.config.set(ONE):
        assert planned(scan) is scan
    on_cluster(monkeypatch, {"nthreads": 1})
    with dask.config.set({"ltdask.min-partitions": 64}):
        assert planned(scan) is scan  # (64 partitions now: not the scan's grid)
    with dask.config.set({**ONE, "ltdask.partition-bytes": 2048 * FRAME}):
        assert planned(scan) is scan  # (a size now: not the scan's grid)


def test_cluster_workers_asks_the_scheduler_once_a_second(monkeypatch):
    """Planning a run reads the workers (partition sizes, GPU workers): one round trip to
    the scheduler for calls within `WORKERS_TTL`, a fresh one after it or for another
    client."""
    calls = []

    class Counting(FakeClient):
        def scheduler_info(self):
            calls.append(self)
            return super().scheduler_info()

    one, two = Counting([{"nthreads": 2}]), Counting([{"nthreads": 3}, {"nthreads": 1}])
    assert [w["nthreads"] for w in schedulers.cluster_workers(one)] == [2]
    assert [w["nthreads"] for w in schedulers.cluster_workers(one)] == [2]
    assert calls == [one]
    assert [w["nthreads"] for w in schedulers.cluster_workers(two)] == [3, 1]
    assert calls == [one, two]
    monkeypatch.setattr(schedulers, "WORKERS_TTL", 0.0)
    one.workers = [{"nthreads": 5}]
    assert [w["nthreads"] for w in schedulers.cluster_workers(one)] == [5]
    assert calls == [one, two, one]


def test_runs_of_large_frames_hold_more_of_them(monkeypatch):
    """Frames of 1 MiB or more (as float32): run partitions of at least `RUN_MIN_FRAMES`
    frames even below the run size (their per-pixel state and results are frame-sized),
    still at least two per thread and within the memory cap."""
    from ltdask.io.partition import RUN_MIN_FRAMES

    sig = (512, 512)  # 1 MiB as float32
    n = 4 * RUN_MIN_FRAMES + 3
    data = np.zeros((n, *sig), np.uint16)
    data[:, 0, 0] = np.arange(n)
    auto_sizes(monkeypatch, dataset=16 * 2**20, runs=32 * 2**20)
    with dask.config.set(ONE):
        ds = ltdask.from_array(data)
        assert max(p.num_frames for p in ds.get_partitions()) < RUN_MIN_FRAMES
        with dask.config.set(scheduler="threads", num_workers=2):
            frames = [p.num_frames for p in planned(ds).get_partitions()]
            assert min(frames[:-1]) >= RUN_MIN_FRAMES and sum(frames) == n
            with dask.config.set(num_workers=1):
                frames = [p.num_frames for p in planned(ds).get_partitions()]
                assert min(frames[:-1]) >= RUN_MIN_FRAMES and len(frames) >= 2
            monkeypatch.setattr(settings, "total_memory", lambda: 2 * 8 * 40 * 2**20)
            frames = [p.num_frames for p in planned(ds).get_partitions()]
            assert max(frames) <= 40  # the memory cap: 40 MiB per thread's eighth
            res = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, np.arange(n))


def test_planning_changes_no_global_setting(monkeypatch):
    """Cutting a dataset finer for one run (`with_min_partitions`, as ``ltdask.iter`` does)
    reads no setting that it changed: while the finer grid is made, the process's
    settings are the user's (planning once set ``ltdask.min-partitions`` for the whole
    process meanwhile, so a dataset another thread opened then got the run's grid)."""
    from ltdask.io import dataset as dataset_module
    from ltdask.io.partition import with_min_partitions

    seen = []
    real = dataset_module.nav_grid

    def spy(*args, **kwargs):
        seen.append(dask.config.get("ltdask.min-partitions"))
        return real(*args, **kwargs)

    data = np.zeros((32, 32, *SIG), np.float32)
    with dask.config.set({"ltdask.partition-bytes": 128 * FRAME, "ltdask.min-partitions": 1}):
        base = ltdask.from_array(data)
        assert len(base.get_partitions()) == 8
        monkeypatch.setattr(dataset_module, "nav_grid", spy)
        assert len(with_min_partitions(base, 1024).get_partitions()) == 1024
    assert seen and set(seen) == {1}


@pytest.mark.parametrize(
    "scheduler, kind", [("threads", "threads"), ("sync", "local"), ("processes", "local")]
)
def test_runs_are_planned_for_the_scheduler_given(monkeypatch, scan, scheduler, kind):
    """``scheduler=`` plans a run for that scheduler whatever is active: the threaded one
    takes larger partitions (two per thread at least), the others keep the dataset's."""
    from ltdask.udf import SumUDF

    target = RunTarget.resolve(scheduler)
    assert target.kind == kind and not target.on_cluster
    auto_sizes(monkeypatch, runs=1024 * FRAME)
    with dask.config.set(ONE, num_workers=2):
        with dask.config.set(scheduler="sync"):  # active: keeps 16
            text = str(ltdask.explain(scan, [SumUDF()], scheduler=scheduler))
            (res,) = ltdask.lazy(scan, [SumUDF()], scheduler=scheduler)
    expected = 4 if kind == "threads" else 16  # 1024 frames each, 4096 in all
    assert f" in {expected} partition(s)" in text, text
    graph = res["intensity"].data.__dask_graph__()
    tasks = [k for k in graph.keys() if isinstance(k, tuple) and k[0].startswith("ltdask-udf")]
    assert len(tasks) == expected
    np.testing.assert_array_equal(res["intensity"].values, np.zeros(SIG, np.float32))


@pytest.mark.parametrize("bad", ["thread", "gpu", 3])
def test_unknown_schedulers_are_refused(scan, bad):
    from ltdask.udf import SumUDF

    with pytest.raises(ValueError, match=rf"scheduler={bad!r}: expected"):
        ltdask.lazy(scan, [SumUDF()], scheduler=bad)


def test_distributed_without_a_client_is_refused(scan):
    from ltdask.udf import SumUDF

    with pytest.raises(ValueError, match="no distributed.Client is running"):
        ltdask.explain(scan, [SumUDF()], scheduler="distributed")
