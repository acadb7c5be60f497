"""DECTRIS streams that break the protocol, sent by hand on a zmq PUSH socket: errors that
name what is wrong, the frames before them kept; and ``ltdask simulate dectris`` run as a
command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import ltdask
from ltdask.acquire import AcquisitionError, dectris
from ltdask.acquire.simulate.dectris import spread
from ltdask.exceptions import MissingFramesWarning
from ltdask.udf import SumSigUDF, SumUDF

zmq = pytest.importorskip("zmq")
from test_dectris_stream import _fds, no_leaks  # noqa: E402, F401  (the shared fixture)

pytestmark = pytest.mark.usefixtures("no_leaks")

SIG = (6, 5)
N = 12
CONFIG = {
    "x_pixels_in_detector": SIG[1],
    "y_pixels_in_detector": SIG[0],
    "bit_depth_image": 16,
    "trigger_mode": "exte",
    "ntrigger": N,
    "nimages": 1,
}


def _frame(i: int) -> np.ndarray:
    return np.full(SIG, i + 1, np.uint16)


def _image(i: int, series: int = 1, **desc) -> list[bytes]:
    blob = desc.pop("blob", _frame(i).tobytes())
    d = {"htype": "dimage_d-1.0", "shape": [SIG[1], SIG[0]], "type": "uint16"}
    d.update(encoding="<", size=len(blob))
    d.update(desc)
    head = {"htype": "dimage-1.0", "series": series, "frame": i}
    return [json.dumps(head).encode(), json.dumps(d).encode(), blob, b"{}"]


def _header(series: int = 1, config=None) -> list[bytes]:
    head = {"htype": "dheader-1.0", "series": series, "header_detail": "basic"}
    return [json.dumps(head).encode(), json.dumps(config or CONFIG).encode()]


class _Stream:
    """A PUSH socket on 127.0.0.1 sending `messages` from a thread once a peer connects."""

    def __init__(self, messages: list[list[bytes]]) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PUSH)
        self.socket.setsockopt(zmq.SNDTIMEO, 5000)
        self.socket.setsockopt(zmq.LINGER, 2000)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.thread = threading.Thread(target=self._send, args=(messages,), name="ltd-test-push")
        self.thread.start()

    def _send(self, messages) -> None:
        for parts in messages:
            self.socket.send_multipart(parts)

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc) -> None:
        self.thread.join(10)
        self.socket.close()
        self.context.term()


def _run(messages, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _Stream(messages) as stream:
            with dectris(port=stream.port, idle_timeout=3, **options) as acq:
                (total, per_frame) = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    return total, per_frame, [str(w.message) for w in caught if w.category is MissingFramesWarning]


BROKEN = [
    pytest.param(_image(3, series=2), r"image 3 of series 2 in series 1 \(series mismatch\)",
                 id="series-mismatch"),
    pytest.param(_image(N), r"frame id 12 out of range: the series has 12 frames \(0 .. 11\)",
                 id="frame-out-of-range"),
    pytest.param(_image(3, shape=[6, 5]), r"frame 3 has shape \[6, 5\] and type uint16, "
                 r"expected \[5, 6\] \(\[x, y\]\) and uint16", id="wrong-shape"),
    pytest.param(_image(3, type="uint32"), r"frame 3 has shape \[5, 6\] and type uint32",
                 id="wrong-type"),
    pytest.param(_image(3, size=7), r"frame 3's blob has 60 bytes, its header says size 7",
                 id="size-mismatch"),
    pytest.param(_image(3, encoding="zstd<"), r"encoding 'zstd<' for uint16 frames",
                 id="unknown-encoding"),
    pytest.param(_image(3, blob=bytes(200), encoding="lz4<"), r"frame 3's blob of 200 bytes is "
                 "larger than any encoding", id="blob-too-large"),
    pytest.param([b"\x89 not json"], r"a message part of 10 bytes that is not JSON where an "
                 r"image or the series' end was expected \(after 3 frames\)", id="not-json"),
    pytest.param(_header(series=2), r"a new series \(2\) began after 3 of the 12 frames of "
                 "series 1", id="new-series"),
]  # fmt: skip


@pytest.mark.parametrize("bad, message", BROKEN)
def test_broken_messages_end_the_acquisition_saying_what(bad, message):
    messages = [_header(), *(_image(i) for i in range(3)), bad, *(_image(i) for i in range(3, N))]
    total, per_frame, warned = _run(messages, nav_shape=(3, 4), frames_per_partition=3)
    np.testing.assert_array_equal(total["intensity"].values, np.full(SIG, 1 + 2 + 3))
    assert per_frame["intensity_valid"].values.reshape(-1).tolist() == [True] * 3 + [False] * 9
    assert len(warned) == 1
    assert "broke off after 3 of 12 frames" in warned[0]
    assert __import__("re").search(message, warned[0]), warned[0]


def _laid_out(i: int, layout: str) -> list[bytes]:
    """Image `i` with its JSON parts in one of the layouts a stream may use."""
    blob = _frame(i).tobytes()
    head = {"htype": "dimage-1.0", "series": 1, "frame": i, "hash": "%032x" % (i * 7919)}
    desc = {"htype": "dimage_d-1.0", "shape": [SIG[1], SIG[0]], "type": "uint16"}
    desc.update(encoding="<", size=len(blob))
    if layout == "keys-reversed":
        head, desc = dict(reversed(head.items())), dict(reversed(desc.items()))
    options = {"compact": {"separators": (",", ":")}, "indented": {"indent": 1}}
    dumps = [json.dumps(part, **options.get(layout, {})).encode() for part in (head, desc)]
    return [*dumps, blob, b"{}"]


@pytest.mark.parametrize("layout", ["compact", "python-json", "indented", "keys-reversed"])
def test_image_parts_in_any_json_layout(layout):
    """The simulator's layout (and a DCU's, compact) is read without json.loads, the others
    with it: the same frames either way."""
    total, per_frame, warned = _run([_header(), *(_laid_out(i, layout) for i in range(N))])
    assert warned == []
    expected = np.stack([_frame(i) for i in range(N)])
    np.testing.assert_array_equal(total["intensity"].values, expected.sum(axis=0))
    sums = per_frame["intensity"].values.reshape(-1)
    np.testing.assert_array_equal(sums, expected.reshape(N, -1).sum(axis=1))


def test_a_series_end_before_every_frame_leaves_gaps():
    end = [json.dumps({"htype": "dseries_end-1.0", "series": 1}).encode()]
    messages = [_header(), *(_image(i) for i in (0, 1, 2, 5, 7)), end]
    total, per_frame, warned = _run(messages)
    valid = per_frame["intensity_valid"].values
    assert np.flatnonzero(valid).tolist() == [0, 1, 2, 5, 7]
    np.testing.assert_array_equal(total["intensity"].values, np.full(SIG, 1 + 2 + 3 + 6 + 8))
    assert warned and "7 of 12 frames never arrived" in warned[0]


def test_header_detail_all_parts_are_skipped():
    """With header_detail "all" the flat field, pixel mask and count-rate table (a JSON part
    and its array each) follow the configuration."""
    detail = [
        [json.dumps({"htype": name, "shape": [5, 6], "type": "float32"}).encode(), bytes(120)]
        for name in ("dflatfield-1.0", "dpixelmask-1.0", "dcountrate_table-1.0")
    ]
    messages = [_header(), *detail, *(_image(i) for i in range(N))]
    total, _, warned = _run(messages)
    assert warned == []
    np.testing.assert_array_equal(total["intensity"].values, np.full(SIG, N * (N + 1) // 2))


def test_stale_messages_before_the_header_are_skipped():
    messages = [_image(4, series=0), [b"junk"], _header(), *(_image(i) for i in range(N))]
    total, _, warned = _run(messages)
    assert warned == []
    np.testing.assert_array_equal(total["intensity"].values, np.full(SIG, N * (N + 1) // 2))


def test_a_malformed_blob_fails_the_run_naming_the_frame():
    blob = bytes(4) + b"\xff" * 20  # (12-byte header of zeros, then a block length past the end)
    messages = [_header(), *(_image(i) for i in range(2)), _image(2, encoding="bs16-lz4<",
                blob=blob), *(_image(i) for i in range(3, N))]  # fmt: skip
    with _Stream(messages) as stream:
        with dectris(port=stream.port, frames_per_partition=4) as acq:
            with pytest.raises(AcquisitionError, match=r"frame 2: .*\(byte \d+ of its 24-byte"):
                ltdask.compute(acq, [SumUDF()])


@pytest.mark.parametrize(
    "config, message",
    [
        pytest.param({**CONFIG, "bit_depth_image": 12}, "bit_depth_image=12; expected 8, 16 or",
                     id="bit-depth"),
        pytest.param({"ntrigger": 3}, "the detector configuration lacks 'x_pixels_in_detector'",
                     id="no-size"),
    ],
)  # fmt: skip
def test_bad_series_headers(config, message):
    with _Stream([_header(config=config)]) as stream:
        with pytest.raises(AcquisitionError, match=message):
            dectris(port=stream.port)


def test_no_header_within_the_timeout():
    with _Stream([]) as stream:
        with pytest.raises(AcquisitionError, match=r"no series header \(dheader-1.0\) within 0.3"):
            dectris(port=stream.port, timeout=0.3)


def _command(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-m", "ltdask.cli", "simulate", "dectris", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_the_command_streams_a_file_with_dropped_frames(tmp_path):
    frames = np.random.default_rng(5).poisson(3.0, (4, 5, *SIG)).astype(np.uint16)
    path = os.fspath(tmp_path / "scan.npy")
    np.save(path, frames)
    proc = _command(path, "--drop", "2", "--compression", "lz4")
    try:
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with dectris(port=port, nav_shape=(4, 5), idle_timeout=5) as acq:
                (per_frame,) = ltdask.compute(acq, [SumSigUDF()])
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    missing = spread(2, 20)
    valid = per_frame["intensity_valid"].values.reshape(-1)
    assert np.flatnonzero(~valid).tolist() == missing == [6, 13]
    sums = frames.reshape(20, -1).sum(axis=1)
    np.testing.assert_array_equal(per_frame["intensity"].values.reshape(-1)[valid], sums[valid])
    assert "sent 18 frames" in err


@pytest.mark.slow
def test_the_command_stops_cleanly_on_ctrl_c(tmp_path):
    path = os.fspath(tmp_path / "scan.npy")
    np.save(path, np.ones((2, 2, *SIG), np.uint16))
    proc = _command(path, "--api-port", "0")
    try:
        assert proc.stdout.readline().startswith("tcp://127.0.0.1:")
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in err and "sent 0 frames" in err


def test_the_fd_count_helper_sees_sockets():
    before = _fds()
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    assert _fds() > before
    sock.close()
    context.term()
    assert _fds() == before
