"""Merlin ``.mib`` files processed while a writer thread appends to them
(``ltdask.acquire.follow_mib``): the results equal those of ``ltdask.open_mib`` on the
finished file, whatever pieces the writer writes; torn writes wait, wrong frames fail."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from helpers.merlinstreams import (
    NAV,
    assert_same_results,
    frame_bytes,
    nothing_left_behind,
    udfs,
    write_scan,
)
from helpers.mibfiles import write_mib

import ltdask
from ltdask.acquire import AcquisitionError, follow, follow_mib
from ltdask.exceptions import MissingFramesWarning
from ltdask.udf import SumSigUDF


def _recorded(tmp_path, mode):
    """A scan written in full to ``done/`` (the reference) and its frames' bytes."""
    done = tmp_path / "done"
    done.mkdir()
    hdr, counts = write_scan(done, mode)
    return hdr, counts, frame_bytes(done / "scan.mib", len(counts))


class _Writer(threading.Thread):
    """Appends `pieces` (bytes) to `path`, one every `pause` s (flushed each time)."""

    def __init__(self, path, pieces, pause=0.005, zeros_first=False):
        super().__init__(name="test mib writer")
        self.path, self.pieces, self.pause, self.zeros_first = path, pieces, pause, zeros_first

    def run(self):
        with open(self.path, "r+b") as f:  # (not "a": pwrite would append)
            f.seek(0, os.SEEK_END)
            for piece in self.pieces:
                if self.zeros_first:  # the file grows first, its bytes come after
                    at = f.tell()
                    f.write(bytes(len(piece)))
                    f.flush()
                    time.sleep(self.pause)
                    os.pwrite(f.fileno(), piece, at)
                else:
                    f.write(piece)
                    f.flush()
                time.sleep(self.pause)


def _pieces(frames, how):
    data = b"".join(frames)
    if how == "frames":
        return frames
    if how == "halves":  # every frame in two writes: the file often ends inside one
        step = len(frames[0]) // 2 + 3
        return [data[i : i + step] for i in range(0, len(data), step)]
    return [data[i : i + 1000] for i in range(0, len(data), 1000)]


@pytest.mark.parametrize("mode", ["raw12", "U16", "raw1", "raw6-quad-gaps"])
@pytest.mark.parametrize("how", ["frames", "halves", "1000 bytes"])
def test_follow_a_file_being_written(tmp_path, mode, how):
    done_hdr, counts, frames = _recorded(tmp_path, mode)
    ds = ltdask.open_mib(str(done_hdr))
    expected = ltdask.compute(ds, udfs(ds.sig_shape))
    path = tmp_path / "scan.mib"
    (tmp_path / "scan.hdr").write_bytes(done_hdr.read_bytes())
    path.write_bytes(b"")
    with nothing_left_behind():
        writer = _Writer(path, _pieces(frames, how))
        writer.start()
        with follow_mib(path, frames_per_partition=5, idle_timeout=5) as acq:
            assert (acq.nav_shape, acq.sig_shape) == (NAV, ds.sig_shape)
            got = ltdask.compute(acq, udfs(acq.sig_shape))
        writer.join()
    assert_same_results(got, expected)
    np.testing.assert_array_equal(got[0]["intensity"].values, counts.sum(axis=0, dtype=np.float64))


def test_frames_whose_header_comes_later_wait(tmp_path):
    """A writer that makes the file longer first and writes the bytes after: a frame whose
    header is still zeros is taken at a later look."""
    done_hdr, counts, frames = _recorded(tmp_path, "raw12")
    (tmp_path / "scan.hdr").write_bytes(done_hdr.read_bytes())
    path = tmp_path / "scan.mib"
    path.write_bytes(frames[0])
    with nothing_left_behind():
        writer = _Writer(path, frames[1:], zeros_first=True)
        writer.start()
        with follow_mib(path, frames_per_partition=4) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
        writer.join()
    np.testing.assert_array_equal(
        res["intensity"].values, counts.sum(axis=(1, 2), dtype=np.float64).reshape(NAV)
    )


def test_without_hdr_the_scan_comes_from_nav_shape(tmp_path):
    done_hdr, counts, frames = _recorded(tmp_path, "U08")
    path = tmp_path / "scan.mib"
    path.write_bytes(b"".join(frames[:10]))
    with pytest.raises(AcquisitionError, match="no .hdr file next to it .* give nav_shape"):
        follow_mib(path)
    with pytest.warns(MissingFramesWarning, match="no frame for 0.3 s after 10 of 12"):
        with follow_mib(path, nav_shape=(3, 4), idle_timeout=0.3) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = counts.sum(axis=(1, 2), dtype=np.float64)[:10]
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1)[:10], expected)
    np.testing.assert_array_equal(res["intensity_valid"].values.reshape(-1), np.arange(12) < 10)


def test_a_frame_out_of_place_is_an_error(tmp_path):
    done_hdr, _, frames = _recorded(tmp_path, "raw12")
    (tmp_path / "scan.hdr").write_bytes(done_hdr.read_bytes())
    path = tmp_path / "scan.mib"
    path.write_bytes(b"".join([frames[0], frames[1], frames[5]]))
    at = 2 * len(frames[0])
    with pytest.warns(
        MissingFramesWarning,
        match=f"frame 2 at byte {at} starts with b'MQ1,000006,'; expected 'MQ1,000003,'",
    ):
        with follow_mib(path) as acq:
            ltdask.compute(acq, [SumSigUDF()])


@pytest.mark.parametrize(
    "content, match",
    [
        pytest.param(
            b"XYZ" * 10, "is not a Merlin .mib file: it starts with b'XYZXYZ", id="not-mib"
        ),
        pytest.param(b"", "no whole frame within 0.2 s .found 0 bytes", id="empty"),
    ],
)
def test_files_that_never_become_a_scan(tmp_path, content, match):
    path = tmp_path / "scan.mib"
    path.write_bytes(content)
    with nothing_left_behind():
        with pytest.raises(AcquisitionError, match=match):
            follow_mib(path, nav_shape=(2, 2), timeout=0.2)


@pytest.mark.parametrize("given", ["scan.mib", "scan.hdr"])
def test_follow_dispatches_mib_and_hdr(tmp_path, given):
    """``ltdask.acquire.follow`` takes a ``.mib`` or its ``.hdr``; raw frames without a
    counter depth in their headers take the ``.hdr``'s."""
    done_hdr, counts, _ = _recorded(tmp_path, "raw6")
    (tmp_path / "scan.hdr").write_bytes(done_hdr.read_bytes())
    write_mib(tmp_path / "scan.mib", counts, depth=6, raw=True, with_depth=False)
    with nothing_left_behind():
        with follow(tmp_path / given, frames_per_partition=5) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = counts.sum(axis=(1, 2), dtype=np.float64).reshape(NAV)
    np.testing.assert_array_equal(res["intensity"].values, expected)
