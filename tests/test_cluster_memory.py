"""Memory maps in ``distributed`` workers with a memory limit (issue 20): workers keep the
maps of scans that UDF runs read again, as many pages as ``ltdask.worker-map-fraction`` of
their limit allows, and give pages back (least recently used map first) so that their RSS
-- what distributed's spill, pause and restart thresholds measure, and where mapped file
pages count -- stays below those thresholds, however large the scan."""

from __future__ import annotations

import logging

import dask
import numpy as np
import pytest
from helpers.worker_memory import memory_state

import ltdask
from ltdask.udf import SumUDF

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: bytes per worker: a worker that has loaded ltdask's kernels holds about 250 MB itself
LIMIT = 600 * 10**6
#: a uint16 scan of twice that: 1.2 GB, 64 MiB partitions
NAV, SIG = (96, 96), (256, 256)


def _client(limit: int):
    """Two single-threaded worker processes with a memory limit of `limit` each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=limit,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        state = client.run(memory_state)
        if any(s["peak"] is None for s in state.values()):
            pytest.skip("needs /proc to read the workers' peak RSS")
        yield client


@pytest.fixture(scope="module")
def tight_client():
    """Workers with a memory limit of `LIMIT`: twice that is a scan larger than the limit."""
    yield from _client(LIMIT)


@pytest.fixture(scope="module")
def roomy_client():
    """Workers whose map budget holds a small scan whatever the worker holds itself (a
    worker that compiles ltdask's kernels with an empty numba cache, as in CI, holds more
    than half of `LIMIT`, so the tight workers' budget keeps no pages at all)."""
    yield from _client(4 * LIMIT)


def write_scan(path, nav, sig) -> np.ndarray:
    """A uint16 scan written one scan row at a time; returns its exact sum over nav."""
    pixels = np.arange(np.prod(sig), dtype=np.uint16) % 251
    total = np.zeros(pixels.size, dtype=np.int64)
    with open(path, "wb") as f:
        for row in range(nav[0]):
            frame = pixels + np.uint16(7 * row)
            np.ascontiguousarray(np.broadcast_to(frame, (nav[1], pixels.size))).tofile(f)
            total += nav[1] * frame.astype(np.int64)
    return total.reshape(sig)


def test_tight_memory_limit_survives_many_runs(tight_client, tmp_path):
    """50 runs over a scan twice the workers' memory limit: the workers keep their maps,
    their RSS never reaches distributed's spill threshold (70 % of the limit; without the
    trimming, kept maps get them restarted in the second run), none is restarted, and the
    results stay right."""
    client = tight_client
    path = tmp_path / "scan.raw"
    expected = write_scan(path, NAV, SIG)
    assert path.stat().st_size >= 2 * LIMIT
    ds = ltdask.open_raw(path, nav_shape=NAV, sig_shape=SIG, dtype="uint16")
    before = client.run(memory_state)
    with dask.config.set(scheduler=client):
        for _ in range(50):
            result = SumUDF().compute(ds)
    after = client.run(memory_state)
    np.testing.assert_array_equal(result["intensity"].values, expected)
    assert {w: s["pid"] for w, s in after.items()} == {w: s["pid"] for w, s in before.items()}
    assert not client.get_events("worker-restart-memory")
    spill = dask.config.get("distributed.worker.memory.spill")
    for state in after.values():
        assert state["limit"] == LIMIT
        assert state["peak"] < spill * LIMIT, state
        assert str(path) in state["maps"], state  # kept: the workers ran with maps


def test_maps_that_fit_are_reused_across_runs(roomy_client, tmp_path):
    """A scan that fits the workers' budget: from the second run on, each worker keeps its
    map -- the same map, run after run, its pages resident between runs."""
    client = roomy_client
    path = tmp_path / "small.raw"
    nav, sig = (16, 16), (128, 128)
    expected = write_scan(path, nav, sig)  # 8 MiB
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    with dask.config.set({"ltdask.partition-bytes": 2**20}):  # 16 partitions, for both workers
        ds.get_partitions()
    maps = []
    with dask.config.set(scheduler=client):
        for run in range(5):
            result = SumUDF().compute(ds)
            if run == 0:
                assert all(str(path) not in s["maps"] for s in client.run(memory_state).values())
            else:
                maps.append({w: s["maps"][str(path)] for w, s in client.run(memory_state).items()})
    np.testing.assert_array_equal(result["intensity"].values, expected)
    addresses = [{w: address for w, (address, _) in m.items()} for m in maps]
    assert all(a == addresses[0] for a in addresses)
    for worker, (_, resident) in maps[-1].items():
        assert resident > 0, worker
