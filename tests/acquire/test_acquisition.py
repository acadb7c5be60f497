"""Acquisitions (``ltdask.acquire``): frames processed as they arrive, against numpy on the
frames sent; faults of the stream; the store's bound, spill and one-run rule."""

from __future__ import annotations

import threading
import time
import warnings

import dask
import numpy as np
import pytest

import ltdask
from ltdask.acquire import Acquisition, AcquisitionError, FrameStore, ReplaySource, pool
from ltdask.exceptions import DataSetError, MissingFramesWarning
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF

NAV = (5, 7)
SIG = (6, 5)


@pytest.fixture
def frames():
    rng = np.random.default_rng(34)
    return rng.integers(0, 4000, (np.prod(NAV), *SIG)).astype(np.uint16)


def _threads_alive(before: set) -> list:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t not in before and t.name.startswith("ltdask")]
        if not left:
            return []
        time.sleep(0.02)
    return left


@pytest.mark.parametrize("fpp", [1, 3, 7, 35, None], ids=lambda v: f"fpp{v}")
@pytest.mark.parametrize("rate", [None, 2000.0], ids=["fast", "paced"])
def test_results_equal_numpy_on_the_frames(frames, fpp, rate):
    before = set(threading.enumerate())
    with Acquisition(
        ReplaySource(frames, rate=rate, batch=4), nav_shape=NAV, frames_per_partition=fpp
    ) as acq:
        total, per_frame, std = ltdask.compute(acq, [SumUDF(), SumSigUDF(), StdDevUDF()])
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    np.testing.assert_allclose(std["varsum"].values / len(frames), f64.var(axis=0), rtol=1e-9)
    assert bool(per_frame["intensity_valid"].all())
    assert _threads_alive(before) == []


def test_iter_steps_mark_what_arrived(frames):
    # stalled after 10 frames until the idle timeout: the steps before it show the
    # complete partitions (rows of 7 in partitions of 5 + 2: frames 0:5 and 5:7)
    with pytest.warns(MissingFramesWarning, match="no frame for 0.5 s after 10 of 35"):
        with Acquisition(
            ReplaySource(frames, batch=1, stall_after=10),
            nav_shape=NAV,
            frames_per_partition=5,
            idle_timeout=0.5,
        ) as acq:
            steps = list(ltdask.iter(acq, [SumSigUDF()]))
    assert len(steps) >= 2
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    counts = []
    for (step,) in steps:
        valid = step["intensity_valid"].values
        counts.append(int(valid.sum()))
        np.testing.assert_array_equal(step["intensity"].values[valid], expected[valid])
    # the two complete partitions first, then the third's three frames at the end
    assert counts[0] == 7 and counts[-1] == 10 and counts == sorted(counts)


@pytest.mark.parametrize(
    "faults, missing",
    [
        pytest.param(dict(drop=[0, 5, 6, 34]), [0, 5, 6, 34], id="dropped"),
        pytest.param(dict(swap=[(3, 9), (20, 21)]), [], id="out-of-order"),
        pytest.param(dict(duplicate=[2, 30]), [], id="duplicated"),
    ],
)
def test_faults_keep_every_frame_where_it_belongs(frames, faults, missing):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Acquisition(
            ReplaySource(frames, batch=3, **faults), nav_shape=NAV, frames_per_partition=4
        ) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    valid = res["intensity_valid"].values.reshape(-1)
    assert np.flatnonzero(~valid).tolist() == missing
    expected = frames.astype(np.float64).sum(axis=(1, 2))
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1)[valid], expected[valid])
    messages = [str(w.message) for w in caught if w.category is MissingFramesWarning]
    if missing:
        assert any(
            "4 of 35 frames never arrived (frame 0, frames 5:7, frame 34)" in m for m in messages
        )
    if "duplicate" in faults:
        assert any("2 frames came twice" in m for m in messages)


def test_a_stream_that_breaks_off_gives_the_results_so_far(frames):
    with pytest.warns(
        MissingFramesWarning, match=r"broke off after 12 of 35 frames .*frames 12:35"
    ):
        with Acquisition(ReplaySource(frames, cut_after=12), nav_shape=NAV) as acq:
            total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    valid = per_frame["intensity_valid"].values.reshape(-1)
    assert valid.tolist() == [True] * 12 + [False] * 23
    # frames that never came count as zero frames in the sums over frames
    np.testing.assert_array_equal(total["intensity"].values, frames[:12].astype(np.float64).sum(0))


def test_a_stalled_stream_ends_after_the_idle_timeout(frames):
    t0 = time.monotonic()
    with pytest.warns(MissingFramesWarning, match=r"no frame for 0.3 s after 10 of 35"):
        with Acquisition(
            ReplaySource(frames, stall_after=10, batch=1), nav_shape=NAV, idle_timeout=0.3
        ) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    assert time.monotonic() - t0 < 5
    assert int(res["intensity_valid"].values.sum()) == 10


def test_frames_are_processed_by_one_run(frames):
    with Acquisition(ReplaySource(frames), nav_shape=NAV) as acq:
        ltdask.compute(acq, [SumUDF()])
        with pytest.raises(AcquisitionError, match="processed before: an acquisition's frames"):
            ltdask.compute(acq, [SumUDF()])


def test_an_acquisition_does_not_travel_to_other_processes(frames):
    import pickle

    with Acquisition(ReplaySource(frames), nav_shape=NAV) as acq:
        with pytest.raises(DataSetError, match="run it on the threaded or the synchronous"):
            pickle.dumps(acq.to_dask())


def test_nav_shape_is_needed_where_the_source_has_no_count():
    class Endless(ReplaySource):
        def open(self, timeout):
            return ltdask.acquire.Header(sig_shape=(4, 4), dtype=np.uint8)

    with pytest.raises(DataSetError, match="continuous acquisition\\); give nav_shape"):
        Acquisition(Endless(np.zeros((1, 4, 4), np.uint8)))
    with pytest.raises(DataSetError, match="frames_per_partition=0"):
        Acquisition(ReplaySource(np.zeros((4, 4, 4), np.uint8)), frames_per_partition=0)


def test_the_sync_scheduler_and_a_one_frame_scan(frames):
    with dask.config.set(scheduler="sync"):
        with Acquisition(ReplaySource(frames[:1]), nav_shape=(1,)) as acq:
            (res,) = ltdask.compute(acq, [SumUDF()])
    np.testing.assert_array_equal(res["intensity"].values, frames[0])


def test_store_spills_past_its_memory_bound_and_loses_nothing(tmp_path):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 255, (40, 16), dtype=np.uint8)
    starts = list(range(0, 40, 8))
    store = FrameStore(
        starts, 40, (16,), np.uint8, memory_limit=8 * 16 * 2, spill_dir=str(tmp_path)
    )
    for i in range(40):
        store.put(i, data[i : i + 1])
    assert store.peak_memory <= 8 * 16 * 2 and store.spilled_frames == 24
    store.finish()
    got = np.concatenate([store.take(s, s + 8)[0] for s in starts])
    np.testing.assert_array_equal(got, data)
    assert store.memory == 0


def test_store_take_waits_for_its_frames():
    store = FrameStore([0, 4], 8, (2,), np.int32, memory_limit=2**20)
    out = {}
    taker = threading.Thread(target=lambda: out.update(r=store.take(4, 8)))
    taker.start()
    store.put(4, np.ones((3, 2), np.int32))
    time.sleep(0.05)
    assert taker.is_alive()  # one frame is still missing
    store.put(7, np.full((1, 2), 7, np.int32))
    taker.join(2)
    frames, arrived = out["r"]
    assert frames[:, 0].tolist() == [1, 1, 1, 7] and arrived.all()
    with pytest.raises(AcquisitionError, match="did not arrive within 0.01 s"):
        store.take(0, 4, timeout=0.01)
    with pytest.raises(AcquisitionError, match="not one of its partitions"):
        store.take(1, 4)


@pytest.mark.parametrize("run", ["compute", "iter"])
def test_missing_frames_are_told_once(frames, run):
    """A run in steps (on a copy of the acquisition without turns) says once which frames
    never came: the run's own warning, not the hint for ``ltdask.lazy`` results that the
    partition tasks give where no run asked."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Acquisition(
            ReplaySource(frames, drop=[3, 4]),
            nav_shape=NAV,
            frames_per_partition=5,
            idle_timeout=0.5,
        ) as acq:
            if run == "compute":
                ltdask.compute(acq, [SumSigUDF()])
            else:
                list(ltdask.iter(acq, [SumSigUDF()]))
    told = [str(w.message) for w in caught if issubclass(w.category, MissingFramesWarning)]
    assert len(told) == 1 and "2 of 35 frames never arrived (frames 3:5)" in told[0], told


def test_store_ready_waits_a_while_for_more_partitions():
    """`ready(first, want, patience)`: at least one complete partition, then up to
    `patience` s for `want` of them (a live step gathers work for every thread)."""
    store = FrameStore([0, 2, 4, 6], 8, (3,), np.uint8, memory_limit=2**20)
    store.put(0, np.ones((2, 3), np.uint8))
    assert store.ready(0) == 1  # (no patience: what is there)
    t0 = time.monotonic()
    assert store.ready(0, want=3, patience=0.1) == 1  # none came: after the patience
    assert 0.09 <= time.monotonic() - t0 < 1
    putter = threading.Timer(0.05, lambda: store.put(2, np.ones((4, 3), np.uint8)))
    putter.start()
    t0 = time.monotonic()
    assert store.ready(0, want=3, patience=5) == 3  # as soon as they came
    assert time.monotonic() - t0 < 2
    store.put(6, np.ones((1, 3), np.uint8))  # partition 3 in part: not complete
    assert store.ready(1, want=4, patience=0.01) == 2
    store.finish()
    assert store.ready(0, want=4, patience=5) == 4  # ended: all of them, at once


def test_store_lends_rows_to_receive_into():
    store = FrameStore([0, 4, 8], 12, (3,), np.uint8, memory_limit=2**20)
    store.put(2, np.full((1, 3), 2, np.uint8))
    rows = store.slots(0, 10)
    assert rows.shape == (2, 3)  # up to frame 2, which has arrived
    rows[:] = [[7, 7, 7], [8, 8, 8]]
    store.put(0, rows)  # where they were received: no copy
    assert store.slots(2, 1) is None and store.slots(12, 1) is None
    rows = store.slots(3, 4)
    assert rows.shape == (1, 3)  # the partition 0:4 ends at frame 4
    rows[0] = 3  # received in part, never put
    store.finish()
    out = {}
    taker = threading.Thread(target=lambda: out.update(r=store.take(0, 4)))
    taker.start()
    time.sleep(0.05)
    assert taker.is_alive()  # the source may still be writing there
    store.release()
    taker.join(2)
    frames, arrived = out["r"]
    assert frames[:, 0].tolist() == [7, 8, 2, 0] and arrived.tolist() == [True, True, True, False]
    assert store.slots(1, 1) is None  # its partition was taken


def test_lazy_results_go_to_zarr(frames, tmp_path):
    with Acquisition(ReplaySource(frames, rate=3000), nav_shape=NAV, frames_per_partition=6) as acq:
        (lazy,) = ltdask.lazy(acq, [SumSigUDF()])
        ltdask.to_zarr(lazy, tmp_path / "out.zarr")
    import xarray as xr

    stored = xr.open_zarr(tmp_path / "out.zarr")
    np.testing.assert_array_equal(
        stored["intensity"].values, frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    )


def test_every_scheduler(frames, scheduler):
    """Threads and sync read the store in their tasks; a cluster's workers get each
    partition from the feeder; process pools cannot reach the frames (a clear error)."""
    with Acquisition(
        ReplaySource(frames, rate=3000, drop=[8]), nav_shape=NAV, frames_per_partition=6
    ) as acq:
        if scheduler == "processes":
            with pytest.raises(DataSetError, match="cannot be sent to another"):
                ltdask.compute(acq, [SumUDF()])
            return
        with pytest.warns(MissingFramesWarning, match="frame 8"):
            total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0) - f64[8])
    valid = per_frame["intensity_valid"].values.reshape(-1)
    assert np.flatnonzero(~valid).tolist() == [8]
    np.testing.assert_array_equal(
        per_frame["intensity"].values.reshape(-1)[valid], f64.sum(axis=(1, 2))[valid]
    )


def test_iter_steps_follow_the_frames_as_they_arrive(frames):
    """Each step takes the partitions complete when it starts: the first comes while the
    detector still sends, and a step never waits for more than it needs."""
    with Acquisition(ReplaySource(frames), nav_shape=NAV, frames_per_partition=5) as acq:
        list(ltdask.iter(acq, [SumSigUDF()]))  # (compiled and planned once: warm)
    seen = []
    with Acquisition(
        ReplaySource(frames, rate=50, batch=1), nav_shape=NAV, frames_per_partition=5
    ) as acq:
        for (step,) in ltdask.iter(acq, [SumSigUDF()]):
            seen.append(
                (acq.done, int(step["intensity_valid"].values.sum()), int(acq.store.arrived.sum()))
            )
    assert seen[0][0] is False and seen[0][1] < np.prod(NAV)
    assert seen[-1][1] == np.prod(NAV)
    # every step shows all the complete partitions it had (never fewer than arrived - 2
    # partitions' worth: the one being filled and one that completed during the step)
    for _, valid, arrived in seen[:-1]:
        assert arrived - valid < 2 * 5 + 5


@pytest.mark.parametrize("tiles", [False, True], ids=["frames", "payloads"])
def test_steps_wait_for_each_partition_once(frames, tiles, monkeypatch):
    """A run in steps (`ltdask.compute`) asks the store once per step which partitions
    are complete: the steps' blocks have no turns (`arrival_blocks`), whose chain would
    make each step wait for every partition before its own again (quadratic in the
    partitions). Both kinds of blocks: frames decoded whole, and payloads read as files."""
    if not tiles:  # (no file format for the payloads: the frames are decoded whole)
        monkeypatch.setattr("ltdask.acquire.blocks.files_of", lambda acq, turns=True: None)
    with Acquisition(
        ReplaySource(frames, rate=100, batch=1), nav_shape=NAV, frames_per_partition=1
    ) as acq:
        ready, calls = acq.store.ready, []
        acq.store.ready = lambda first, *args: calls.append(first) or ready(first, *args)
        total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    # (ready(0) also answers whether the dataset is live; the steps ask for the first
    # partition not yet taken: each once, where a chain of turns asks again at each step)
    steps = [first for first in calls if first]
    assert len(steps) >= 2, calls
    assert steps == sorted(set(steps)), calls


def test_corrections_roi_and_backends_as_on_the_same_frames_in_memory(frames):
    from ltdask.udf import CoMUDF

    rng = np.random.default_rng(5)
    excluded = np.zeros(SIG, bool)
    excluded[0, 0] = excluded[3, 2] = True
    cs = ltdask.CorrectionSet(
        dark=rng.random(SIG) * 10, gain=1 + rng.random(SIG), excluded_pixels=excluded
    )
    roi = rng.random(NAV) > 0.4
    udfs = [SumUDF(), SumSigUDF(), CoMUDF.with_params(cy=2.5, cx=2, r=2)]
    offline = ltdask.compute(
        ltdask.from_array(frames.reshape(*NAV, *SIG)), udfs, roi=roi, corrections=cs
    )
    with Acquisition(ReplaySource(frames, rate=2000), nav_shape=NAV, frames_per_partition=4) as acq:
        live = ltdask.compute(acq, udfs, roi=roi, corrections=cs, backends=("numpy",))
    for a, b in zip(live, offline, strict=True):
        for name in b.data_vars:
            # (float32 sums: the partitions differ, so does the order of the additions)
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-6, atol=1e-9)


def test_the_live_view_plots_an_acquisition(frames):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltdask.views.viz import MPLLive2DPlot

    updates = []

    class Counting(MPLLive2DPlot):
        def update(self, damage, force=False):
            super().update(damage, force)
            updates.append(int(np.asarray(damage).sum()))

    try:
        with Acquisition(
            ReplaySource(frames, rate=200, batch=1), nav_shape=NAV, frames_per_partition=5
        ) as acq:
            (res,) = ltdask.live(acq, [SumSigUDF()], plot_class=Counting, min_delta=0)
    finally:
        plt.close("all")
    np.testing.assert_array_equal(
        res["intensity"].values, frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    )
    assert updates[-1] == np.prod(NAV) and len(updates) >= 2


def test_store_reuses_buffers_given_back_without_stale_frames():
    store = FrameStore([0, 4, 8], 12, (3,), np.uint8, memory_limit=2**20)
    store.put(0, np.full((4, 3), 9, np.uint8))
    first, _ = store.take(0, 4)
    store.recycle(first)
    store.put(5, np.full((2, 3), 5, np.uint8))  # partition 4:8 gets the buffer back
    store.finish()
    frames, arrived = store.take(4, 8)
    assert np.shares_memory(frames, first)
    assert frames[:, 0].tolist() == [0, 5, 5, 0] and arrived.tolist() == [False, True, True, False]
    assert store.memory == 0


def test_a_later_acquisition_reuses_the_buffers_of_an_earlier_one():
    pool.clear()
    earlier = FrameStore([0, 4], 8, (3,), np.uint8, memory_limit=2**20, name="earlier")
    earlier.put(0, np.full((4, 3), 9, np.uint8))
    buf, _ = earlier.take(0, 4)
    earlier.recycle(buf)
    assert pool.held() == buf.nbytes
    later = FrameStore([0, 4], 8, (3,), np.uint8, memory_limit=2**20, name="later")
    later.put(1, np.full((1, 3), 7, np.uint8))
    later.finish()
    frames, arrived = later.take(0, 4)
    assert np.shares_memory(frames, buf) and pool.held() == 0
    assert frames[:, 0].tolist() == [0, 7, 0, 0] and arrived.tolist() == [False, True, False, False]
    other = FrameStore([0, 4], 8, (3,), np.uint16, memory_limit=2**20, name="other dtype")
    later.recycle(frames)
    other.put(0, np.ones((4, 3), np.uint16))
    taken, _ = other.take(0, 4)
    assert not np.shares_memory(taken, frames) and pool.held() == frames.nbytes
    pool.clear()


def test_the_pool_keeps_its_bound_and_lets_the_oldest_go():
    pool.clear()
    with dask.config.set({"ltdask.acquire-memory": 8 * 1000}):  # (the pool: an eighth)
        assert pool.kept_bytes() == 1000
        buffers = [np.full(400, i, np.uint8) for i in range(4)]
        for b in buffers:
            pool.give(b)
        pool.give(buffers[3])  # (twice: kept once)
        assert pool.held() == 800  # (the two oldest went)
        assert pool.take((400,), np.uint8) is buffers[3]
        assert pool.take((400,), np.uint8) is buffers[2]
        assert pool.take((400,), np.uint8) is None
        pool.give(np.zeros(2000, np.uint8))  # (larger than the bound: not kept)
        assert pool.held() == 0


class Lockstep(ReplaySource):
    """Sends the next partition's frames only once the previous partition was taken: a
    run that waits for a later partition first would never get it."""

    def __init__(self, frames, per_partition: int) -> None:
        super().__init__(frames)
        self.per_partition = per_partition

    def receive(self, sink) -> None:
        for start in range(0, len(self.frames), self.per_partition):
            if start:
                while not sink._taken[start // self.per_partition - 1]:
                    if sink.cancelled:
                        return
                    time.sleep(0.001)
            sink.put(start, self.frames[start : start + self.per_partition])


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_compute_takes_the_partitions_in_the_order_they_arrive(frames, scheduler):
    with Acquisition(
        Lockstep(frames, 7), nav_shape=NAV, frames_per_partition=7, idle_timeout=5
    ) as acq:
        (res,) = ltdask.compute(acq, [SumSigUDF()], scheduler=scheduler)
    assert bool(res["intensity_valid"].all())
    np.testing.assert_array_equal(
        res["intensity"].values, frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    )


@pytest.mark.slow
def test_a_long_live_run_holds_no_partial_per_partition():
    """Partitions are merged as they finish: a sum's partial (a frame of float64 per
    partition, 400 of them: 12.8 MB) is not kept until the end."""
    import tracemalloc

    frames = np.random.default_rng(3).integers(0, 200, (400, 64, 64)).astype(np.uint8)
    expected = frames.astype(np.float64).sum(axis=0)
    with Acquisition(ReplaySource(frames[:8]), nav_shape=(8,), frames_per_partition=1) as acq:
        list(ltdask.iter(acq, [SumUDF()]))  # (warm: kernels and planning)
    tracemalloc.start()
    try:
        with Acquisition(
            ReplaySource(frames, batch=8), nav_shape=(20, 20), frames_per_partition=1
        ) as acq:
            *_, (total,) = ltdask.iter(acq, [SumUDF()])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(total["intensity"].values, expected)
    assert peak < 8e6, peak


def test_store_counts_a_copy_after_its_partition_as_a_duplicate():
    store = FrameStore([0, 2], 4, (1,), np.uint8, memory_limit=2**10)
    store.put(0, np.ones((2, 1), np.uint8))
    store.take(0, 2)
    store.put(1, np.ones((1, 1), np.uint8))  # a copy of frame 1, after its partition ran
    store.finish()
    store.take(2, 4)
    store.put(3, np.ones((1, 1), np.uint8))  # frame 3, after the end
    store.put(9, np.ones((1, 1), np.uint8))  # past the scan
    assert (store.duplicates, store.late, store.overflow) == (1, 1, 1)
