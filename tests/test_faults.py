"""Faults on a real cluster: a worker killed in the middle of a run, UDFs that raise, a worker
that runs out of memory, and Zarr writes of failing runs.

Partition tasks are pure, so the scheduler recomputes what a dead worker held or was
running, and the run completes with the same results. Failures must surface as clear errors
at the caller: which UDF, which partition, which frames.

``LTDASK_FAULT_REPEATS=5`` repeats the worker-loss test (once by default).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import time

import dask
import numpy as np
import pytest
import xarray as xr
from helpers import clusterprocs
from helpers.cluster_udfs import FailingUDF, MemoryHogUDF, SlowSumSigUDF

import ltdask
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

NAV = (8, 16)
SIG = (16, 16)
#: one scan row (16 frames) per partition: 8 partitions
PARTITIONS = {"ltdask.partition-bytes": 16 * 16 * 16 * 4, "ltdask.min-partitions": 1}
REPEATS = int(os.environ.get("LTDASK_FAULT_REPEATS", "1"))
#: scheduler: a task may see one worker die under it, not two (the worker-loss test needs
#: one retry; the out-of-memory test lowers it to none while it runs)
SCHEDULER_ENV = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"}
_names = (f"w{i}" for i in itertools.count(2))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with clusterprocs.running(
        tmp_path_factory.mktemp("faults"), scheduler_env=SCHEDULER_ENV
    ) as pair:
        yield pair


@pytest.fixture
def client(cluster):
    """The cluster with two live workers (replacing any a test killed) as the scheduler."""
    procs, client = cluster
    missing = 2 - len([n for n in procs.alive_workers() if not n.startswith("small")])
    started = [next(_names) for _ in range(missing)]
    for name in started:
        procs.start_worker(name)
    if started:
        clusterprocs.wait_for_workers(client, started)
    with dask.config.set(scheduler=client):
        yield client


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scan")
    data = np.random.default_rng(7).integers(0, 1000, size=(*NAV, *SIG), dtype=np.uint16)
    data.tofile(folder / "scan.raw")
    with dask.config.set(PARTITIONS):
        ds = ltdask.open_raw(folder / "scan.raw", nav_shape=NAV, sig_shape=SIG, dtype="uint16")
        assert len(ds.get_partitions()) == 8
    return data, ds


def sync(fn, *args, **kwargs):
    with dask.config.set(scheduler="sync"):
        return fn(*args, **kwargs)


def wait_until(predicate, timeout: float, what: str, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError(f"{what} did not happen in {timeout} s")


# -- a worker dies in the middle of a run ---------------------------------------------------------
@pytest.mark.parametrize("attempt", range(REPEATS))
def test_worker_killed_mid_run(client, cluster, scan, attempt):
    procs, _ = cluster
    data, ds = scan
    # 16 frames x 25 ms: 0.4 s per partition, 8 partitions on two single-threaded workers
    udfs = [SlowSumSigUDF(delay=0.025), SumUDF(), StdDevUDF()]
    reference = sync(ltdask.compute, ds, [SlowSumSigUDF(delay=0), SumUDF(), StdDevUDF()])
    victim = sorted(procs.alive_workers())[attempt % 2]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(ltdask.compute, ds, udfs)

        def victim_busy_after_first_partition():
            state = client.run_on_scheduler(clusterprocs.partition_task_states)
            return state["done"] >= 1 and victim in state["busy"] and state

        state = wait_until(victim_busy_after_first_partition, 60, f"{victim} busy mid-run")
        procs.kill(victim)
        results = running.result(timeout=120)

    print(f"killed {victim} with {state['done']} of 8 partitions done, busy: {state['busy']}")
    assert 1 <= state["done"] < 8, state  # killed in the middle, not after the end
    for got, want in zip(results, reference, strict=True):
        xr.testing.assert_identical(got, want)
    np.testing.assert_array_equal(results[0]["intensity"].values, data.sum(axis=(2, 3)))
    assert victim not in {
        w["name"] for w in client.scheduler_info(n_workers=-1)["workers"].values()
    }


# -- a UDF raises --------------------------------------------------------------------------------
def _failure(client_or_sync, ds, udfs):
    with dask.config.set(scheduler=client_or_sync):
        with pytest.raises(RuntimeError, match="deliberate failure at frame 53") as info:
            ltdask.compute(ds, udfs)
    return info.value


@pytest.mark.parametrize("where", ["cluster", "sync"])
def test_udf_error_names_udf_and_partition(client, scan, where):
    _, ds = scan
    target = client if where == "cluster" else "sync"
    # frame 53 is in partition 3 (frames 48:64)
    error = _failure(target, ds, [SumUDF(), FailingUDF(at=53)])
    notes = getattr(error, "__notes__", [])
    assert "ltdask: while running SumUDF, FailingUDF on partition 3 (frames 48:64)" in notes


def test_failed_zarr_write_leaves_nothing_complete(client, scan, tmp_path):
    data, ds = scan
    path = tmp_path / "out.zarr"
    udfs = [SlowSumSigUDF(delay=0.005), FailingUDF(at=100)]
    with pytest.raises(RuntimeError, match="deliberate failure at frame 100") as info:
        ltdask.to_zarr(ltdask.lazy(ds, udfs), path)
    assert "on partition 6 (frames 96:112)" in "\n".join(info.value.__notes__)
    assert not path.exists()
    # tasks that were running when the failure reached the client end soon after; whatever
    # they write goes to the hidden temporary store, which is never renamed into place
    time.sleep(1.0)
    leftovers = os.listdir(tmp_path)
    assert all(name.startswith(".out.zarr.partial-") for name in leftovers), leftovers
    assert not path.exists()
    # a later write of a good run to the same path works and is complete
    ltdask.to_zarr(SumSigUDF().lazy(ds), path)
    np.testing.assert_allclose(
        xr.open_zarr(path)["intensity"].values, data.sum(axis=(2, 3)), rtol=1e-6
    )


# -- a worker runs out of memory ----------------------------------------------------------------
def test_worker_out_of_memory_is_killed_worker(client, cluster, scan):
    """A UDF that allocates 1 GiB on a worker limited to 300 MB: the nanny kills the worker
    and the caller gets distributed's KilledWorker. (It names one of the tasks the worker
    held when it died: a partition task, a valid-mask chunk or a fused finalize task,
    whichever the scheduler reports first; the worker's log says why it died.)"""
    from distributed import KilledWorker

    procs, _ = cluster
    _, ds = scan
    # only the nanny's limit counts: the worker must not pause (its baseline with numpy,
    # numba and ltdask loaded is near 80 % of 300 MB) and then wait for memory forever
    quiet = {
        "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE": "False",
        "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "False",
        "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "False",
    }
    procs.start_worker("small", memory_limit="300MB", env=quiet)
    clusterprocs.wait_for_workers(client, ["small"])
    previous = client.run_on_scheduler(clusterprocs.set_allowed_failures, n=0)
    started = time.monotonic()
    try:
        with dask.annotate(workers=["small"], allow_other_workers=False):
            with pytest.raises(KilledWorker, match="workers died while running it") as info:
                MemoryHogUDF(nbytes=2**30).compute(ds)
        assert time.monotonic() - started < 60
        key = info.value.task
        name = key if isinstance(key, str) else key[0]
        # one of this run's tasks: ltdask's own, or a dask "finalize-" task fused from them
        assert name.startswith(("ltdask-", "finalize-")), key
        wait_until(
            lambda: "exceeded 95% memory budget" in procs.log("small"), 10, "the nanny's log"
        )
    finally:
        client.run_on_scheduler(clusterprocs.set_allowed_failures, n=previous)
        procs.kill("small")
