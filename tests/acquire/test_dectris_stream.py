"""DECTRIS streams (``ltdask.acquire.dectris``) from the package's simulator: results equal
the same UDFs on the file it replays (and numpy); faults; the REST API; zmq dumps; no
thread or socket left behind."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import warnings

import numpy as np
import pytest

import ltdask
from ltdask.acquire import AcquisitionError, DectrisSource, dectris
from ltdask.acquire.simulate.dectris import DectrisSimulator, spread
from ltdask.exceptions import MissingFramesWarning
from ltdask.udf import CoMUDF, SumSigUDF, SumUDF

pytest.importorskip("zmq")

NAV = (5, 7)
SIG = (12, 10)
N = NAV[0] * NAV[1]


@pytest.fixture
def frames():
    rng = np.random.default_rng(34)
    data = rng.poisson(0.5, (N, *SIG)).astype(np.uint16)
    data[:, 5:8, 4:7] += rng.integers(100, 3000, (N, 3, 3)).astype(np.uint16)
    return data


@pytest.fixture
def scan(tmp_path, frames):
    path = os.fspath(tmp_path / "scan.npy")
    np.save(path, frames.reshape(*NAV, *SIG))
    return path


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_leaks():
    """Threads and file descriptors after the test are the ones before it."""
    ltdask.compute(ltdask.from_array(np.zeros((1, 1, 2, 2), np.uint16)), [SumUDF()])
    threads, fds = set(threading.enumerate()), _fds()
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t not in threads and t.name.startswith("ltd")]
        if not left and _fds() <= fds:
            break
        time.sleep(0.05)
    assert left == []
    assert _fds() <= fds


def _offline(path):
    ds = ltdask.open(path)
    return ltdask.compute(ds, [SumUDF(), SumSigUDF(), CoMUDF()])


def _run(sim, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dectris(port=sim.port, nav_shape=NAV, **options) as acq:
            results = ltdask.compute(acq, [SumUDF(), SumSigUDF(), CoMUDF()])
    return results, [str(w.message) for w in caught if w.category is MissingFramesWarning]


@pytest.mark.parametrize("compression", ["bslz4", "lz4", "none"])
@pytest.mark.parametrize("fpp", [None, 4], ids=lambda v: f"fpp{v}")
def test_results_equal_the_same_udfs_on_the_file(scan, frames, compression, fpp, no_leaks):
    with DectrisSimulator(scan, compression=compression) as sim:
        (total, per_frame, com), messages = _run(sim, frames_per_partition=fpp)
    ref_total, ref_per_frame, ref_com = _offline(scan)
    assert messages == []
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    np.testing.assert_array_equal(total["intensity"].values, ref_total["intensity"].values)
    for name in ("field_x", "field_y", "magnitude"):
        np.testing.assert_allclose(com[name].values, ref_com[name].values, rtol=1e-12)
    assert bool(per_frame["intensity_valid"].all())


@pytest.mark.parametrize(
    "faults, missing, warned",
    [
        pytest.param(dict(drop=[0, 6, 34]), [0, 6, 34], "3 of 35 frames never arrived", id="drop"),
        pytest.param(dict(duplicate=[3, 20]), [], "2 frames came twice", id="duplicate"),
        pytest.param(dict(reorder=True), [], None, id="reorder"),
    ],
)
def test_faults_keep_every_frame_where_it_belongs(scan, frames, faults, missing, warned, no_leaks):
    with DectrisSimulator(scan, **faults) as sim:
        (total, per_frame, _), messages = _run(sim, frames_per_partition=4)
    arrived = np.ones(N, bool)
    arrived[missing] = False
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64[arrived].sum(axis=0))
    valid = per_frame["intensity_valid"].values.reshape(-1)
    np.testing.assert_array_equal(valid, arrived)
    np.testing.assert_array_equal(
        per_frame["intensity"].values.reshape(-1)[arrived], f64[arrived].sum(axis=(1, 2))
    )
    if warned is None:
        assert messages == []
    else:
        assert any(warned in m for m in messages), messages


@pytest.mark.parametrize("fault", ["cut_after", "stall_after"])
def test_a_stream_that_stops_gives_the_frames_so_far(scan, frames, fault, no_leaks):
    with DectrisSimulator(scan, **{fault: 20}) as sim:
        (total, per_frame, _), messages = _run(sim, frames_per_partition=5, idle_timeout=0.5)
    np.testing.assert_array_equal(
        total["intensity"].values, frames[:20].astype(np.float64).sum(axis=0)
    )
    assert per_frame["intensity_valid"].values.reshape(-1).tolist() == [True] * 20 + [False] * 15
    assert any("broke off after 20 of 35 frames" in m and "idle_timeout" in m for m in messages)


def test_iter_gives_partial_results_as_frames_arrive(scan, frames, no_leaks):
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    with DectrisSimulator(scan, rate=150) as sim:
        with dectris(port=sim.port, nav_shape=NAV, frames_per_partition=5) as acq:
            steps = [step for (step,) in ltdask.iter(acq, [SumSigUDF()])]
    counts = []
    for step in steps:
        valid = step["intensity_valid"].values
        counts.append(int(valid.sum()))
        np.testing.assert_array_equal(step["intensity"].values[valid], expected[valid])
    assert counts == sorted(counts) and counts[0] < N and counts[-1] == N and len(steps) >= 3


def test_closing_mid_stream_stops_the_receiver(scan, no_leaks):
    with DectrisSimulator(scan, rate=50) as sim:
        acq = dectris(port=sim.port, nav_shape=NAV)
        time.sleep(0.2)
        acq.close()
        assert acq.done and not acq._receiver.is_alive()
        assert 0 < acq.store.arrived.sum() < N


def test_rest_api_arms_and_triggers(scan, frames, no_leaks):
    config = {"trigger_mode": "ints", "ntrigger": 1, "nimages": N}
    with DectrisSimulator(scan, api_port=0) as sim:
        time.sleep(0.3)
        assert sim.sent == 0 and not sim.armed.is_set()  # (waits for a client to arm it)
        assert sim.rate is None
        DectrisSource(port=sim.port, api_port=sim.api_port).set_config("frame_time", 0.0005)
        assert sim.rate == 2000  # (SIMPLON's frame_time: seconds per frame)
        with dectris(
            port=sim.port, api_port=sim.api_port, arm=True, detector_config=config, nav_shape=NAV
        ) as acq:
            assert acq.source.get_config("x_pixels_in_detector") == SIG[1]
            assert acq.source.get_config("trigger_mode") == "ints"
            time.sleep(0.2)
            assert sim.sent == 0  # (ints: the frames follow the trigger)
            acq.source.command("trigger")
            (total,) = ltdask.compute(acq, [SumUDF()])
            assert acq.header.attrs["series"] == 1
            assert acq.header.frame_seconds == 0.0005  # (partitions: a quarter second at most)
    np.testing.assert_array_equal(total["intensity"].values, frames.sum(axis=0))


def test_rest_api_errors_name_the_url(scan, no_leaks):
    with DectrisSimulator(scan, api_port=0) as sim:
        with pytest.raises(
            AcquisitionError,
            match=r"PUT http://127.0.0.1:\d+/detector/api/1.8.0/"
            r"config/x_pixels_in_detector: HTTP 400 .*read only",
        ):
            dectris(
                port=sim.port,
                api_port=sim.api_port,
                arm=True,
                detector_config={"x_pixels_in_detector": 99},
            )
        source = DectrisSource(port=sim.port, api_port=sim.api_port)
        with pytest.raises(AcquisitionError, match=r"HTTP 400 .*frame_time=-1: expected s > 0"):
            source.set_config("frame_time", -1)
        with pytest.raises(AcquisitionError, match=r"GET .*/config/pixel_size: HTTP 404"):
            source.get_config("pixel_size")
    with pytest.raises(AcquisitionError, match=r"cannot reach the REST API at http://127.0.0.1:1/"):
        dectris(port=1, api_port=1, arm=True)


def _record(out, message: bytes) -> None:
    out.write(len(message).to_bytes(8, "little", signed=True) + message)


def test_zmq_dump_replays(tmp_path, frames, no_leaks):
    """A dump as LiberTEM-live records one, written here by hand (blobs from hdf5plugin)."""
    h5py = pytest.importorskip("h5py")
    hdf5plugin = pytest.importorskip("hdf5plugin")
    with h5py.File(io.BytesIO(), "w") as f:
        dset = f.create_dataset(
            "x", data=frames, chunks=(1, *SIG), **hdf5plugin.Bitshuffle(cname="lz4")
        )
        blobs = [bytes(dset.id.read_direct_chunk((i, 0, 0))[1]) for i in range(N)]
    config = {"x_pixels_in_detector": SIG[1], "y_pixels_in_detector": SIG[0]}
    config.update(bit_depth_image=16, trigger_mode="exte", ntrigger=N, nimages=1)
    path = tmp_path / "zmqdump.dat"
    with open(path, "wb") as out:
        _record(out, b"\x00stale bytes of an earlier series")
        _record(out, json.dumps({"htype": "dheader-1.0", "series": 34}).encode())
        _record(out, json.dumps(config).encode())
        for i, blob in enumerate(blobs):
            _record(out, json.dumps({"htype": "dimage-1.0", "series": 34, "frame": i}).encode())
            desc = {"htype": "dimage_d-1.0", "shape": [SIG[1], SIG[0]], "type": "uint16"}
            desc.update(encoding="bs16-lz4<", size=len(blob))
            _record(out, json.dumps(desc).encode())
            _record(out, blob)
            _record(out, json.dumps({"htype": "dconfig-1.0"}).encode())
        _record(out, json.dumps({"htype": "dseries_end-1.0", "series": 34}).encode())
    with DectrisSimulator(os.fspath(path)) as sim:
        (total, per_frame, _), messages = _run(sim)
    assert messages == []
    np.testing.assert_array_equal(total["intensity"].values, frames.sum(axis=0))
    np.testing.assert_array_equal(
        per_frame["intensity"].values, frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    )


def test_frames_in_series_follow_the_trigger_mode():
    from ltdask.acquire.dectris import frames_in_series

    assert frames_in_series({"trigger_mode": "exte", "ntrigger": 12, "nimages": 3}) == 12
    assert frames_in_series({"trigger_mode": "inte", "ntrigger": 5}) == 5
    assert frames_in_series({"trigger_mode": "exts", "ntrigger": 2, "nimages": 6}) == 12
    assert frames_in_series({"trigger_mode": "ints", "ntrigger": 1, "nimages": 9}) == 9
    assert spread(2, 35) == [11, 23] and spread(0, 35) == []


def test_the_store_copies_only_the_used_part_of_each_payload():
    """The receiver hands slots sized for the largest blob; only each blob's bytes travel."""
    from ltdask.acquire import FrameStore

    store = FrameStore([0, 2], 4, (6,), np.uint8, memory_limit=2**20, name="slots")
    payloads = np.arange(1, 25, dtype=np.uint8).reshape(4, 6)
    store.put(0, payloads[:3], used=np.array([2, 6, 0]))
    store.put(2, payloads[2:3] + 100, used=[4])  # (a duplicate: the first one is kept)
    store.finish()
    first, _ = store.take(0, 2)
    second, arrived = store.take(2, 4)
    assert first.tolist() == [[1, 2, 0, 0, 0, 0], [7, 8, 9, 10, 11, 12]]
    assert second.tolist() == [[0] * 6, [0] * 6] and arrived.tolist() == [True, False]
    assert store.duplicates == 1
    store.recycle(first)  # (a partition's buffer, decoded: the next one may reuse it)
    store2 = FrameStore([0, 2, 4], 6, (6,), np.uint8, memory_limit=2**20, name="reuse")
    store2.put(0, payloads[:2], used=[6, 6])
    taken, _ = store2.take(0, 2)
    store2.recycle(taken)
    store2.put(3, payloads[2:3], used=[3])  # (into the reused buffer; frame 2 never comes)
    store2.finish()
    again, arrived = store2.take(2, 4)
    assert np.shares_memory(again, taken) and arrived.tolist() == [False, True]
    assert again[0].tolist() == [0] * 6 and again[1, :3].tolist() == [13, 14, 15]
    with pytest.raises(AcquisitionError, match="slots2d: used= is for payloads of one dim"):
        FrameStore([0], 1, (2, 3), np.uint8, 2**20, name="slots2d").put(0, np.ones((1, 2, 3)), [1])


@pytest.mark.parametrize(
    "source, options, message",
    [
        pytest.param(
            np.zeros((4, 8, 8), np.float32),
            {},
            r"frames of float32 and shape \(4, 8, 8\): a DECTRIS stream sends 2D uint8",
            id="float-frames",
        ),
        pytest.param(
            np.zeros((4, 8, 8), np.uint16),
            {"compression": "zstd"},
            r"compression='zstd'; expected one of bslz4, lz4, none",
            id="compression",
        ),
    ],
)
def test_simulator_bad_input(source, options, message, no_leaks):
    with pytest.raises(AcquisitionError, match=message):
        DectrisSimulator(source, **options)


def test_a_file_that_is_no_zmq_dump(tmp_path):
    from ltdask.acquire.simulate.dectris import is_dump, read_dump

    path = tmp_path / "broken.dat"
    path.write_bytes((100).to_bytes(8, "little") + b'{"htype": "dheader-1.0"}')
    np.save(tmp_path / "scan.npy", np.ones((2, 2, 4, 4), np.uint16))
    assert is_dump(os.fspath(tmp_path / "scan.npy")) is False
    assert is_dump(os.fspath(path)) is False  # (its record runs past the end)
    with pytest.raises(AcquisitionError, match=r"broken.dat: a record of 100 bytes at byte 0 runs"):
        read_dump(os.fspath(path))
