"""Raw files followed while a writer thread appends to them (``ltdask.acquire.follow``):
results against numpy on the frames written; a writer that stops, a file that is missing,
cut short or replaced; the opener's dispatch and its errors; nothing left behind."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import types

import numpy as np
import pytest
from helpers.followfiles import RawAppender, frames_u16, no_leaks

import ltdask
from ltdask.acquire import AcquisitionError, RawFollowSource, follow
from ltdask.exceptions import DataSetError, MissingFramesWarning
from ltdask.udf import SumSigUDF, SumUDF

NAV = (5, 7)
SIG = (6, 5)
N = NAV[0] * NAV[1]


def _stored(frames, dtype, file_header=0, frame_header=0, frame_footer=0) -> bytes:
    """The bytes of a raw file: each frame in `dtype`, between header and footer bytes of
    0xAB / 0xCD (which must never reach the results)."""
    head = b"\xab" * frame_header
    foot = b"\xcd" * frame_footer
    body = b"".join(head + f.astype(dtype).tobytes() + foot for f in frames)
    return b"\xee" * file_header + body


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(dict(dtype="<u2"), id="u16"),
        pytest.param(
            dict(dtype=">u2", file_header=100, frame_header=12, frame_footer=4),
            id="u16-bigendian-headers",
        ),
        pytest.param(dict(dtype="<f4", frame_footer=8), id="f32-footer"),
    ],
)
def test_frames_written_while_computing_equal_numpy(tmp_path, layout):
    frames = frames_u16(N)
    path = tmp_path / "scan.raw"
    data = _stored(frames, **layout)
    keys = {
        "file_header": "file_header_bytes",
        "frame_header": "frame_header_bytes",
        "frame_footer": "frame_footer_bytes",
    }
    options = {keys[k]: v for k, v in layout.items() if k in keys}
    with no_leaks():
        path.touch()
        # pieces of 97 bytes: the reader sees frames cut in the middle
        with RawAppender(path, data, piece=97, pause=0.001) as writer:
            with follow(path, NAV, SIG, layout["dtype"], frames_per_partition=4, **options) as acq:
                total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
            assert writer.done_steps == writer.steps  # the run did not end before the writer
    f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(total["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(per_frame["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))
    assert bool(per_frame["intensity_valid"].all())


def test_iter_steps_follow_the_writer(tmp_path):
    frames = frames_u16(N)
    path = tmp_path / "scan.bin"
    path.touch()
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    counts = []
    with no_leaks():
        frame_bytes = frames[0].nbytes
        with RawAppender(path, frames.tobytes(), piece=frame_bytes, pause=0.01):
            with follow(path, NAV, SIG, np.uint16, frames_per_partition=5) as acq:
                for (step,) in ltdask.iter(acq, [SumSigUDF()]):
                    valid = step["intensity_valid"].values
                    counts.append(int(valid.sum()))
                    np.testing.assert_array_equal(step["intensity"].values[valid], expected[valid])
    assert counts[-1] == N and counts[0] < N and counts == sorted(counts)


def test_a_file_that_appears_late_is_waited_for(tmp_path):
    frames = frames_u16(6)
    path = tmp_path / "late.raw"
    with no_leaks():
        with RawAppender(path, frames.tobytes(), piece=10**6, delay=0.3):
            with follow(path, (6,), SIG, np.uint16, timeout=10) as acq:
                (res,) = ltdask.compute(acq, [SumUDF()])
    np.testing.assert_array_equal(res["intensity"].values, frames.sum(axis=0))


def test_a_missing_file_is_an_error_after_the_timeout(tmp_path):
    path = tmp_path / "never.raw"
    with no_leaks():
        t0 = time.monotonic()
        with pytest.raises(FileNotFoundError, match=r"never.raw' does not exist, .* within 0.2 s"):
            follow(path, NAV, SIG, np.uint16, timeout=0.2)
        assert time.monotonic() - t0 < 3


def test_a_writer_that_stops_ends_after_the_idle_timeout(tmp_path):
    frames = frames_u16(N)
    path = tmp_path / "scan.raw"
    path.touch()
    frame_bytes = frames[0].nbytes
    with no_leaks():
        # 12 frames and a half, then nothing more
        with RawAppender(path, frames.tobytes(), piece=frame_bytes // 2, stop_after=25):
            with pytest.warns(MissingFramesWarning, match=r"no frame for 0.3 s after 12 of 35"):
                with follow(
                    path, NAV, SIG, np.uint16, idle_timeout=0.3, frames_per_partition=5
                ) as acq:
                    total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    valid = per_frame["intensity_valid"].values.reshape(-1)
    assert valid.tolist() == [True] * 12 + [False] * 23
    np.testing.assert_array_equal(total["intensity"].values, frames[:12].astype(float).sum(0))
    np.testing.assert_array_equal(
        per_frame["intensity"].values.reshape(-1)[:12], frames[:12].astype(float).sum((1, 2))
    )


def _break_file(path, how: str, frames) -> None:
    if how == "truncated":
        os.truncate(path, frames[0].nbytes * 3)
    elif how == "replaced":
        other = path.with_suffix(".new")
        other.write_bytes(frames.tobytes())
        os.replace(other, path)
    else:
        os.unlink(path)


@pytest.mark.parametrize(
    "how, message",
    [
        ("truncated", r"shrank from 1200 to 180 bytes while it was followed"),
        ("replaced", r"was replaced by another file while it was followed \(2100 bytes\)"),
        ("removed", r"was removed while it was followed"),
    ],
)
def test_a_file_cut_short_or_replaced_breaks_the_acquisition_off(tmp_path, how, message):
    frames = frames_u16(N)
    path = tmp_path / "scan.raw"
    path.write_bytes(frames[:20].tobytes())  # 20 of 35 frames, 1200 bytes
    with no_leaks():
        with follow(path, NAV, SIG, np.uint16, frames_per_partition=5) as acq:
            while int(acq.store.arrived.sum()) < 20:
                time.sleep(0.01)
            _break_file(path, how, frames)
            with pytest.warns(MissingFramesWarning, match="broke off after 20 of 35") as caught:
                (res,) = ltdask.compute(acq, [SumSigUDF()])
    assert any(
        isinstance(w.message, MissingFramesWarning) and re.search(message, str(w.message))
        for w in caught
    ), [str(w.message) for w in caught]
    assert isinstance(acq.store.error, AcquisitionError)
    valid = res["intensity_valid"].values.reshape(-1)
    assert valid.tolist() == [True] * 20 + [False] * 15
    np.testing.assert_array_equal(
        res["intensity"].values.reshape(-1)[:20], frames[:20].astype(float).sum((1, 2))
    )


def test_frames_past_the_scan_are_not_read(tmp_path):
    frames = frames_u16(10)
    path = tmp_path / "scan.raw"
    path.write_bytes(frames.tobytes())
    with no_leaks(), follow(path, num_frames=4, sig_shape=SIG, dtype=np.uint16) as acq:
        (res,) = ltdask.compute(acq, [SumUDF()])
    assert acq.nav_shape == (4,)
    np.testing.assert_array_equal(res["intensity"].values, frames[:4].sum(axis=0))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        pytest.param(
            dict(sig_shape=SIG, dtype="u2"),
            DataSetError,
            "give nav_shape or num_frames",
            id="no-count",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), num_frames=5, sig_shape=SIG, dtype="u2"),
            DataSetError,
            r"nav_shape=\(2, 3\) has 6 frames, num_frames=5",
            id="count-disagrees",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), dtype="u2"),
            DataSetError,
            "needs sig_shape= and dtype=",
            id="no-sig",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), sig_shape=(4, 0), dtype="u2"),
            DataSetError,
            r"sig_shape=\(4, 0\) has zero or negative dims",
            id="bad-sig",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), sig_shape=SIG, dtype="f16x"),
            DataSetError,
            "dtype='f16x' is not a numpy dtype",
            id="bad-dtype",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), sig_shape=SIG, dtype="u2", frame_header_bytes=-1),
            DataSetError,
            "frame_header_bytes=-1 is negative",
            id="bad-header",
        ),
        pytest.param(
            dict(nav_shape=(2, 3), sig_shape=SIG, dtype="u2", format="tiff"),
            DataSetError,
            r"format='tiff'; expected one of raw, hdf5, mib",
            id="bad-format",
        ),
    ],
)
def test_bad_input_is_named(tmp_path, kwargs, error, match):
    path = tmp_path / "scan.raw"
    path.write_bytes(b"")
    with no_leaks(), pytest.raises(error, match=match):
        follow(path, timeout=0.1, **kwargs)


def test_the_format_comes_from_the_suffix_or_format(tmp_path):
    frames = frames_u16(4)
    path = tmp_path / "scan.detector"
    path.write_bytes(frames.tobytes())
    with pytest.raises(DataSetError, match=r"cannot tell the format from the suffix '.detector'"):
        follow(path, (4,), SIG, np.uint16)
    with no_leaks(), follow(path, (4,), SIG, np.uint16, format="raw") as acq:
        (res,) = ltdask.compute(acq, [SumUDF()])
    np.testing.assert_array_equal(res["intensity"].values, frames.sum(axis=0))


def test_mib_goes_to_the_merlin_follower(tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("ltdask.acquire.merlin")
    fake.follow_mib = lambda path, **kw: calls.append((path, kw)) or "acquisition"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ltdask.acquire.merlin", fake)
    path = str(tmp_path / "scan.mib")
    assert follow(path, nav_shape=(2, 3), idle_timeout=1) == "acquisition"
    assert calls == [(path, {"nav_shape": (2, 3), "idle_timeout": 1})]
    with pytest.raises(DataSetError, match="headers give its frames' shape and dtype"):
        follow(path, sig_shape=(4, 4))
    monkeypatch.setitem(sys.modules, "ltdask.acquire.merlin", None)  # (not importable)
    with pytest.raises(DataSetError, match=r"needs ltdask.acquire.follow_mib .*ltdask.open_mib"):
        follow(path)


def test_the_source_alone_reads_what_is_complete(tmp_path):
    frames = frames_u16(3)
    path = tmp_path / "scan.raw"
    data = _stored(frames, "<u2", file_header=7, frame_footer=3)
    path.write_bytes(data[:-3])  # the last frame without its footer
    source = RawFollowSource(
        path, SIG, "<u2", num_frames=3, file_header_bytes=7, frame_footer_bytes=3
    )
    stride = frames[0].nbytes + 3
    assert [source.complete_frames(7 + k) for k in (0, stride - 1, stride, 3 * stride - 3)] == [
        0,
        0,
        1,
        3,
    ]
    with no_leaks():
        source.open(1.0)
        got = []

        class Sink:
            cancelled = False

            def put(self, first, payloads):
                got.append((first, source.decode(np.array(payloads))))

        receiver = threading.Thread(target=source.receive, args=(Sink(),))
        receiver.start()
        receiver.join(5)
        source.close()
    assert [g[0] for g in got] == [0]
    np.testing.assert_array_equal(got[0][1], frames)


def test_every_scheduler(tmp_path, scheduler):
    frames = frames_u16(N)
    path = tmp_path / "scan.raw"
    path.write_bytes(_stored(frames, ">u2", frame_header=4))
    with follow(path, NAV, SIG, ">u2", frame_header_bytes=4, frames_per_partition=6) as acq:
        if scheduler == "processes":
            with pytest.raises(DataSetError, match="cannot be sent to another"):
                ltdask.compute(acq, [SumUDF()])
            return
        (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = frames.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    np.testing.assert_array_equal(res["intensity"].values, expected)
