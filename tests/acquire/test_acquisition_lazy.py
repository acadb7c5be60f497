"""``ltdask.lazy`` results of an acquisition computed by dask's own ``compute``, not by
``ltdask.compute`` (which steps through the partitions in scan order): dask would take
the partition tasks in an order of its own (the last partition first, on the threaded
scheduler), so each block waits for its partition's turn (`ltdask.acquire.arrival`): a
partition is taken once its frames are there, not waited for while others are held.
That must neither lose a frame nor hang: the receiver never waits for the tasks, and the
idle timeout ends a stalled acquisition for the tasks that wait."""

from __future__ import annotations

import threading

import dask
import numpy as np
import pytest

import ltdask
from ltdask.acquire import Acquisition, ReplaySource
from ltdask.exceptions import MissingFramesWarning
from ltdask.udf import SumSigUDF, SumUDF

NAV = (8, 6)
SIG = (5, 4)


@pytest.fixture
def frames():
    rng = np.random.default_rng(341)
    return rng.integers(0, 3000, (np.prod(NAV), *SIG)).astype(np.uint16)


def _compute_in_thread(results, limit: float):
    """dask.compute of `results` in a thread, joined within `limit` s (a hang fails the
    test instead of stopping the run)."""
    out: dict = {}

    def run():
        try:
            out["value"] = dask.compute(*results)
        except BaseException as e:  # noqa: BLE001  (re-raised in the test)
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"dask.compute did not return within {limit} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_dask_compute_of_lazy_results_in_its_own_order(frames, scheduler):
    """8 partitions arriving in scan order, over about 0.5 s; two threads (or one)."""
    taken_order, waiting = [], []
    with Acquisition(
        ReplaySource(frames, rate=100, batch=2), nav_shape=NAV, frames_per_partition=6
    ) as acq:
        take = acq.store.take

        def noting(start, stop, timeout=None):
            taken_order.append(start // 6)
            # (taken once its frames are there: no task waits for a partition to come
            # while the frames of others wait in the store)
            waiting.append(bool(np.isin(np.arange(start, stop), acq.store.missing).any()))
            return take(start, stop, timeout)

        acq.store.take = noting
        total, per_frame = ltdask.lazy(acq, [SumUDF(), SumSigUDF()])
        with dask.config.set(scheduler=scheduler, num_workers=2):
            total, per_frame = _compute_in_thread([total, per_frame], limit=30)
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    assert bool(per_frame["intensity_valid"].all())
    assert sorted(taken_order) == list(range(8))
    assert not any(waiting), (taken_order, waiting)


def test_a_stalled_acquisition_ends_the_tasks_that_wait(frames):
    """The stream stalls after 20 of 48 frames: the tasks waiting for the later
    partitions (the first ones dask runs) return at the idle timeout with what arrived;
    ``acq.settle`` marks the positions that never came invalid, with the warning that
    ``ltdask.compute`` gives."""
    with Acquisition(
        ReplaySource(frames, batch=4, stall_after=20),
        nav_shape=NAV,
        frames_per_partition=6,
        idle_timeout=0.5,
    ) as acq:
        (per_frame,) = ltdask.lazy(acq, [SumSigUDF()])
        with (
            dask.config.set(scheduler="threads", num_workers=2),
            pytest.warns(MissingFramesWarning, match=r"scan index \d+\).*acq\.settle\(results\)"),
        ):
            computed = _compute_in_thread([per_frame], limit=30)
        with pytest.warns(MissingFramesWarning, match="broke off after 20 of 48 frames"):
            (per_frame,) = acq.settle(list(computed))
    arrived = np.arange(48) < 20
    np.testing.assert_array_equal(per_frame["intensity_valid"].values.reshape(-1), arrived)
    expected = frames[:20].astype(np.float64).sum(axis=(1, 2))
    np.testing.assert_array_equal(per_frame["intensity"].values.reshape(-1)[:20], expected)
