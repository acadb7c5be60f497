"""Recording an acquisition while it is processed (``Acquisition(..., record=)``): the
recording holds the frames that arrived (numpy on the frames sent, zeros where one never
came) and gives the live run's results offline; a path is never replaced, and a recording
that did not complete (a failed task, a killed process) is never found under its name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import h5py
import numpy as np
import pytest
import zarr
from helpers.followfiles import no_leaks

import ltdask
from ltdask.acquire import Acquisition, AcquisitionError, ReplaySource
from ltdask.exceptions import DataSetError, MissingFramesWarning
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF

NAV = (5, 7)
SIG = (6, 5)
N = NAV[0] * NAV[1]


@pytest.fixture(autouse=True)
def zarr_started():
    """zarr's event loop (its thread, sockets and epoll), which stays for the process, is
    started before `no_leaks` counts."""
    zarr.create_array(zarr.storage.MemoryStore(), shape=(2,), dtype="u1")[...] = 1


@pytest.fixture
def frames():
    return np.random.default_rng(7).integers(0, 4000, (N, *SIG)).astype(np.uint16)


def _open(path):
    return (
        ltdask.open_zarr(path) if str(path).endswith(".zarr") else ltdask.open_hdf5(path, "/data")
    )


def _stored(path):
    """``(data, arrived, recording metadata)`` read with zarr / h5py, not ltdask."""
    if os.path.isdir(path):
        group = zarr.open_group(path, mode="r")
        info = dict(group.attrs)["ltdask"]["recording"]
        return group["data"][...], group["arrived"][...], info
    with h5py.File(path, "r") as f:
        info = json.loads(f.attrs["ltdask"])["recording"]
        assert bool(f.attrs["complete"]) == info["complete"]
        return f["data"][...], f["arrived"][...], info


@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
@pytest.mark.parametrize(
    "faults, missing",
    [
        pytest.param({}, [], id="whole"),
        pytest.param(dict(drop=[0, 5, 6, 34]), [0, 5, 6, 34], id="dropped"),
        pytest.param(dict(swap=[(3, 9)], duplicate=[2]), [], id="reordered-duplicated"),
        pytest.param(dict(cut_after=17), list(range(17, N)), id="broken-off"),
    ],
)
def test_the_recording_gives_the_live_results_offline(tmp_path, frames, suffix, faults, missing):
    path = tmp_path / f"scan{suffix}"
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()]
    with no_leaks(), warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingFramesWarning)
        with Acquisition(
            ReplaySource(frames, batch=3, **faults),
            nav_shape=NAV,
            frames_per_partition=4,
            record=path,
        ) as acq:
            live = ltdask.compute(acq, udfs)
        assert os.path.exists(path)  # published when the run has written every partition
    expected = frames.copy()
    expected[missing] = 0
    data, arrived, info = _stored(path)
    np.testing.assert_array_equal(data, expected.reshape(*NAV, *SIG))
    assert np.flatnonzero(~arrived.reshape(-1)).tolist() == missing
    assert info["complete"] is True and info["missing_frames"] == len(missing)
    assert info["nav_shape"] == list(NAV) and info["sig_shape"] == list(SIG)
    assert data.dtype == np.uint16
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # nothing beside it

    offline = ltdask.compute(_open(path), udfs)
    valid = live[1]["intensity_valid"].values
    np.testing.assert_array_equal(valid, arrived)
    np.testing.assert_array_equal(offline[0]["intensity"].values, live[0]["intensity"].values)
    np.testing.assert_array_equal(
        offline[1]["intensity"].values[valid], live[1]["intensity"].values[valid]
    )
    if not missing:  # (the offline std counts the zeros of missing frames as frames)
        # (merged in another order: the offline run cuts other partitions)
        for name in ("sum", "varsum", "num_frames"):
            np.testing.assert_allclose(offline[2][name].values, live[2][name].values, rtol=1e-12)


def test_chunks_never_cross_partitions(tmp_path, frames):
    path = tmp_path / "scan.zarr"
    with Acquisition(
        ReplaySource(frames), nav_shape=NAV, frames_per_partition=14, record=path
    ) as acq:
        ltdask.compute(acq, [SumUDF()])
        grid = acq.to_dask().chunks[:2]
    chunks = zarr.open_group(path, mode="r")["data"].chunks
    assert grid == ((2, 2, 1), (7,))
    # every partition border is a chunk border: no two tasks write one chunk
    for sizes, chunk in zip(grid, chunks[:2], strict=False):
        assert all(s % chunk == 0 for s in sizes[:-1])
    assert chunks[2:] == SIG


def test_the_hdf5_layout_is_libertems_plain_one(tmp_path, frames):
    path = tmp_path / "scan.h5"
    with Acquisition(ReplaySource(frames), nav_shape=NAV, record=path) as acq:
        ltdask.compute(acq, [SumUDF()])
    with h5py.File(path, "r") as f:
        assert f["data"].shape == (*NAV, *SIG) and f["data"].dtype == np.uint16
        assert f["data"].id.get_create_plist().get_nfilters() >= 1  # compressed
        assert f["arrived"].shape == NAV and bool(f["arrived"][...].all())


@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
def test_recording_without_a_run_writes_every_frame_at_close(tmp_path, frames, suffix):
    path = tmp_path / f"only{suffix}"
    with no_leaks():
        with Acquisition(ReplaySource(frames, rate=2000), nav_shape=NAV, record=path) as acq:
            assert acq.wait(10)
    data, arrived, info = _stored(path)
    np.testing.assert_array_equal(data, frames.reshape(*NAV, *SIG))
    assert arrived.all() and info["complete"]


@pytest.mark.parametrize("existing", ["file", "folder"])
def test_an_existing_path_is_never_replaced(tmp_path, frames, existing):
    path = tmp_path / "scan.zarr"
    if existing == "file":
        path.write_text("my notes")
    else:
        path.mkdir()
    with (
        no_leaks(),
        pytest.raises(FileExistsError, match=r"scan.zarr' already exists; a recording"),
    ):
        Acquisition(ReplaySource(frames), nav_shape=NAV, record=path)
    assert path.read_text() == "my notes" if existing == "file" else not any(path.iterdir())
    assert [p.name for p in tmp_path.iterdir()] == ["scan.zarr"]


@pytest.mark.parametrize(
    "record, match",
    [
        ("scan.tiff", r"record='scan.tiff': expected a path ending in .zarr, .h5, .hdf5"),
        (42, r"record=42: expected a path ending in"),
        ("nowhere/scan.h5", r"record='nowhere/scan.h5': the folder does not exist"),
    ],
)
def test_bad_record_targets_are_named(tmp_path, frames, record, match, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with no_leaks(), pytest.raises(DataSetError, match=match):
        Acquisition(ReplaySource(frames), nav_shape=NAV, record=record)


class FailingDecode(ReplaySource):
    """A source whose frames from 20 on cannot be decoded."""

    def decode(self, payloads):
        if (payloads == self.frames[20]).all(axis=(1, 2)).any():
            raise AcquisitionError("a frame that cannot be decoded")
        return payloads


@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
def test_a_recording_that_cannot_complete_is_not_published(tmp_path, frames, suffix):
    path = tmp_path / f"scan{suffix}"
    with no_leaks():
        with pytest.warns(MissingFramesWarning, match=r"incomplete \(1 of 10 partitions"):
            with Acquisition(
                FailingDecode(frames), nav_shape=NAV, frames_per_partition=4, record=path
            ) as acq:
                with pytest.raises(AcquisitionError, match="cannot be decoded"):
                    ltdask.compute(acq, [SumUDF()], scheduler="sync")
    assert not os.path.lexists(path)
    (left,) = [p for p in tmp_path.iterdir()]
    assert left.name.startswith(f".{path.name}.recording-{os.getpid()}-")
    data, arrived, info = _stored(left)
    assert info["complete"] is False
    # what was written is there: every partition but the one that failed (4-frame
    # partitions cut each row of 7 into 4 + 3: frame 20 is in row 2's columns 4:7)
    got = np.flatnonzero(arrived.reshape(-1))
    assert got.tolist() == [i for i in range(N) if not 18 <= i < 21]
    np.testing.assert_array_equal(data.reshape(N, *SIG)[got], frames[got])
    with pytest.raises(FileNotFoundError):
        _open(path)


KILLED = """
import sys, threading, numpy as np, ltdask
from ltdask.acquire import Acquisition, ReplaySource
frames = np.ones((35, 6, 5), np.uint16)
acq = Acquisition(ReplaySource(frames, stall_after=20, batch=1), nav_shape=(5, 7),
                  frames_per_partition=4, record=sys.argv[1], idle_timeout=None)
threading.Thread(target=ltdask.compute, args=(acq, [ltdask.udf.SumUDF()]), daemon=True).start()
while int(acq.store.arrived.sum()) < 20:
    pass
print("recording", flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
def test_a_killed_recording_is_never_mistaken_for_complete(tmp_path, suffix):
    path = tmp_path / f"scan{suffix}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "recording"
        time.sleep(0.5)  # (the first partitions' tasks write)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()  # type: ignore[union-attr]
    assert not os.path.lexists(path)
    with pytest.raises(FileNotFoundError):
        ltdask.open(path)
    (left,) = list(tmp_path.iterdir())
    assert left.name.startswith(f".{path.name}.recording-{proc.pid}-")
    try:
        info = _stored(left)[2]
    except OSError:  # (an HDF5 file whose writer was killed may not open at all)
        assert suffix == ".h5"
    else:
        assert info["complete"] is False


def test_every_scheduler_records(tmp_path, frames, scheduler):
    """Threads and sync write in their tasks, a cluster's feeder before it scatters."""
    path = tmp_path / "scan.h5"
    with Acquisition(
        ReplaySource(frames, drop=[8]), nav_shape=NAV, frames_per_partition=6, record=path
    ) as acq:
        if scheduler == "processes":
            with pytest.raises(DataSetError, match="cannot be sent to another"):
                ltdask.compute(acq, [SumUDF()])
            return
        with pytest.warns(MissingFramesWarning, match="frame 8"):
            ltdask.compute(acq, [SumUDF()])
        assert os.path.exists(path)
    expected = frames.copy()
    expected[8] = 0
    data, arrived, info = _stored(path)
    np.testing.assert_array_equal(data.reshape(expected.shape), expected)
    assert np.flatnonzero(~arrived.reshape(-1)).tolist() == [8] and info["complete"]


def test_iterated_runs_record_every_step(tmp_path, frames):
    path = tmp_path / "scan.zarr"
    with Acquisition(
        ReplaySource(frames, rate=700, batch=1), nav_shape=NAV, frames_per_partition=5, record=path
    ) as acq:
        steps = list(ltdask.iter(acq, [SumSigUDF()]))
    assert len(steps) >= 2
    data, arrived, info = _stored(path)
    np.testing.assert_array_equal(data, frames.reshape(*NAV, *SIG))
    assert arrived.all() and info["complete"]


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "no-renameat2"])
@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
def test_a_path_taken_while_recording_is_left_alone(
    tmp_path, frames, suffix, renameat2, monkeypatch
):
    if not renameat2:  # (file systems without it: a hard link, or a checked rename)
        monkeypatch.setattr("ltdask.store._replace._renameat2", lambda *a: False)
    path = tmp_path / f"scan{suffix}"
    with Acquisition(ReplaySource(frames), nav_shape=NAV, record=path) as acq:
        ltdask.compute(acq, [SumUDF()])
    assert _stored(path)[2]["complete"]
    path = tmp_path / f"again{suffix}"
    with Acquisition(ReplaySource(frames), nav_shape=NAV, record=path) as acq:
        path.write_text("written by someone else meanwhile")
        with pytest.warns(MissingFramesWarning, match="the path was taken while recording"):
            ltdask.compute(acq, [SumUDF()])
    assert path.read_text() == "written by someone else meanwhile"
    (left,) = [p for p in tmp_path.iterdir() if p.name.startswith(".again")]
    data, arrived, info = _stored(left)
    np.testing.assert_array_equal(data, frames.reshape(*NAV, *SIG))
    assert arrived.all() and info["complete"]


@pytest.mark.parametrize("suffix", [".zarr", ".h5"])
def test_the_recording_keeps_the_dims(tmp_path, frames, suffix):
    path = tmp_path / f"scan{suffix}"
    dims = ("y", "x", "ky", "kx")
    with Acquisition(ReplaySource(frames), nav_shape=NAV, dims=dims, record=path) as acq:
        (live,) = ltdask.compute(acq, [SumSigUDF()])
    (offline,) = ltdask.compute(_open(path), [SumSigUDF()])
    assert _open(path).dims == dims
    assert offline["intensity"].dims == live["intensity"].dims == ("y", "x")
    np.testing.assert_array_equal(offline["intensity"].values, live["intensity"].values)


def test_hdf5_without_hdf5plugin_is_gzip(tmp_path, frames, monkeypatch):
    import importlib

    module = importlib.import_module("ltdask.io.formats.hdf5.dataset")
    monkeypatch.setattr(module, "register_filters", lambda: False)
    path = tmp_path / "scan.h5"
    with Acquisition(ReplaySource(frames), nav_shape=NAV, record=path) as acq:
        ltdask.compute(acq, [SumUDF()])
    with h5py.File(path, "r") as f:
        assert f["data"].compression == "gzip"
        np.testing.assert_array_equal(f["data"][...], frames.reshape(*NAV, *SIG))
