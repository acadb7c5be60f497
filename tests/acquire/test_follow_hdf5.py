"""HDF5 datasets followed while a writer thread appends to them with SWMR
(``ltdask.acquire.follow``): results against numpy on the frames written; finished files;
a writer that stops; a dataset that shrinks; shapes that do not fit; nothing left behind."""

from __future__ import annotations

import time

import h5py
import numpy as np
import pytest
from helpers.followfiles import SwmrAppender, frames_u16, no_leaks

import ltdask
from ltdask.acquire import AcquisitionError, follow
from ltdask.exceptions import DataSetError, MissingFramesWarning
from ltdask.udf import SumSigUDF, SumUDF

NAV = (5, 7)
SIG = (6, 5)
N = NAV[0] * NAV[1]


@pytest.mark.parametrize(
    "stored, rows_per_step, fixed_max, nav_shape",
    [
        pytest.param(NAV, 1, False, NAV, id="4d-rows-unlimited"),
        pytest.param(NAV, 2, True, None, id="4d-maxshape-gives-the-scan"),
        pytest.param((N,), 3, False, NAV, id="3d-frames-as-scan"),
    ],
)
def test_frames_written_with_swmr_while_computing_equal_numpy(
    tmp_path, stored, rows_per_step, fixed_max, nav_shape
):
    frames = frames_u16(N)
    path = tmp_path / "scan.h5"
    with no_leaks():
        writer = SwmrAppender(
            path, frames.reshape(*stored, *SIG), rows_per_step, fixed_max, pause=0.005
        )
        with writer:
            with follow(path, nav_shape, frames_per_partition=4) as acq:
                total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
        assert writer.done_steps == writer.steps
    assert acq.nav_shape == NAV
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    assert bool(per_frame["intensity_valid"].all())


def test_iter_steps_follow_the_writer(tmp_path):
    frames = frames_u16(N)
    path = tmp_path / "scan.h5"
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    counts = []
    with no_leaks():
        with SwmrAppender(path, frames.reshape(*NAV, *SIG), pause=0.03):
            with follow(path, NAV, frames_per_partition=7) as acq:
                for (step,) in ltdask.iter(acq, [SumSigUDF()]):
                    valid = step["intensity_valid"].values
                    counts.append(int(valid.sum()))
                    np.testing.assert_array_equal(step["intensity"].values[valid], expected[valid])
    assert counts[-1] == N and counts[0] < N and counts == sorted(counts)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_finished_file_without_swmr_is_read_at_once(tmp_path, compression):
    frames = frames_u16(N).reshape(*NAV, *SIG)
    path = tmp_path / "done.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("scan/frames", data=frames, compression=compression)
        f.create_dataset("other", data=np.zeros(3))
    with no_leaks(), follow(path, idle_timeout=None) as acq:
        (res,) = ltdask.compute(acq, [SumSigUDF()])
    np.testing.assert_array_equal(res["intensity"].values, frames.astype(float).sum((2, 3)))
    assert acq.header.attrs["ds_path"] == "/scan/frames"


def test_a_finished_file_with_fewer_frames_than_the_scan_ends_at_once(tmp_path):
    frames = frames_u16(10)
    path = tmp_path / "short.h5"
    with h5py.File(path, "w") as f:
        f["data"] = frames
    t0 = time.monotonic()
    with no_leaks():
        with pytest.warns(MissingFramesWarning, match="4 of 14 frames never arrived"):
            with follow(path, nav_shape=(2, 7), idle_timeout=30) as acq:
                (res,) = ltdask.compute(acq, [SumSigUDF()])
    assert time.monotonic() - t0 < 10  # not the idle timeout: the dataset cannot grow
    assert res["intensity_valid"].values.reshape(-1).tolist() == [True] * 10 + [False] * 4


def test_a_writer_that_stops_ends_after_the_idle_timeout(tmp_path):
    frames = frames_u16(N)
    path = tmp_path / "scan.h5"
    with no_leaks():
        with SwmrAppender(path, frames.reshape(*NAV, *SIG), stop_after=2):
            with pytest.warns(MissingFramesWarning, match=r"no frame for 0.3 s after 14 of 35"):
                with follow(path, NAV, idle_timeout=0.3, frames_per_partition=7) as acq:
                    (res,) = ltdask.compute(acq, [SumSigUDF()])
    valid = res["intensity_valid"].values.reshape(-1)
    assert valid.tolist() == [True] * 14 + [False] * 21
    np.testing.assert_array_equal(
        res["intensity"].values.reshape(-1)[:14], frames[:14].astype(float).sum((1, 2))
    )


def test_a_dataset_that_shrinks_breaks_the_acquisition_off(tmp_path):
    frames = frames_u16(N)
    path = tmp_path / "scan.h5"
    with no_leaks():
        writer = SwmrAppender(path, frames.reshape(*NAV, *SIG), stop_after=3)
        with writer:
            with follow(path, NAV, frames_per_partition=7) as acq:
                while int(acq.store.arrived.sum()) < 21:
                    time.sleep(0.01)
                writer.join(5)
                with h5py.File(path, "r+", libver="latest") as f:
                    f["entry/data"].resize(1, axis=0)
                with pytest.warns(MissingFramesWarning, match="shrank from 3 to 1 along its"):
                    (res,) = ltdask.compute(acq, [SumSigUDF()])
    assert isinstance(acq.store.error, AcquisitionError)
    assert int(res["intensity_valid"].values.sum()) == 21


@pytest.mark.parametrize(
    "make, kwargs, match",
    [
        pytest.param(
            dict(shape=(4, 6, 5), maxshape=(None, 6, 5)),
            {},
            r"can grow without bound \(maxshape \(None, 6, 5\)\); give nav_shape",
            id="unbounded",
        ),
        pytest.param(
            dict(shape=(2, 3, 6, 5), maxshape=(None, None, 6, 5)),
            dict(nav_shape=NAV),
            "can grow along other nav axes than its first",
            id="grows-sideways",
        ),
        pytest.param(
            dict(shape=(5, 7, 6, 5)),
            dict(sig_shape=(5, 6)),
            r"has frames of \(6, 5\), not sig_shape=\(5, 6\)",
            id="sig-shape",
        ),
        pytest.param(
            dict(shape=(5, 7, 6, 5)),
            dict(dtype="float32"),
            "holds uint16, not dtype=float32",
            id="dtype",
        ),
        pytest.param(
            dict(shape=(5, 7, 6, 5)),
            dict(ds_path="/nothing"),
            r"key='/nothing' does not exist; datasets with at least 3 dims: '/data'",
            id="ds-path",
        ),
        pytest.param(
            dict(shape=(5, 7, 6, 5)),
            dict(frame_header_bytes=4),
            "an HDF5 dataset has no header bytes",
            id="header-bytes",
        ),
    ],
)
def test_datasets_that_do_not_fit_are_named(tmp_path, make, kwargs, match):
    path = tmp_path / "scan.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("data", dtype=np.uint16, chunks=(1, *make["shape"][1:]), **make)
    with no_leaks(), pytest.raises(DataSetError, match=match):
        follow(path, timeout=0.2, **kwargs)


def test_a_file_that_is_not_hdf5_or_never_comes_is_an_error(tmp_path):
    with no_leaks():
        with pytest.raises(FileNotFoundError, match=r"does not exist, and did not appear"):
            follow(tmp_path / "never.h5", timeout=0.1)
        junk = tmp_path / "junk.h5"
        junk.write_bytes(b"not hdf5" * 100)
        with pytest.raises(AcquisitionError, match=r"cannot open .*junk.h5' as HDF5 within 0.2 s"):
            follow(junk, timeout=0.2)


WRITER = """
import sys, time, h5py, numpy as np
frames = np.load(sys.argv[2])
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    d = f.create_dataset("data", shape=(0, *frames.shape[1:]), maxshape=frames.shape,
                         chunks=(1, *frames.shape[1:]), dtype=frames.dtype)
    f.swmr_mode = True
    print("ready", flush=True)
    for i in range(len(frames)):
        d.resize(i + 1, axis=0)
        d[i] = frames[i]
        d.flush()
        time.sleep(0.05)
"""


def test_a_writer_in_another_process(tmp_path):
    import subprocess
    import sys

    frames = frames_u16(N).reshape(*NAV, *SIG)
    np.save(tmp_path / "frames.npy", frames)
    path = tmp_path / "scan.h5"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(tmp_path / "frames.npy")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        with no_leaks(), follow(path, frames_per_partition=7) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    finally:
        writer.wait(30)
        writer.stdout.close()  # type: ignore[union-attr]
    assert writer.returncode == 0
    np.testing.assert_array_equal(res["intensity"].values, frames.astype(float).sum((2, 3)))
