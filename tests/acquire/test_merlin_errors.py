"""Merlin live streams that go wrong: refused connections, malformed MPX prefixes and
headers (named by their byte offset), frames of the wrong size, a second acquisition on the
connection, a connection dropped mid-scan; the control client's responses."""

from __future__ import annotations

import contextlib
import socket
import time

import numpy as np
import pytest
from helpers.merlinstreams import (
    ByteServer,
    frame_bytes,
    mpx,
    nothing_left_behind,
    write_scan,
)

import ltdask
from ltdask.acquire import AcquisitionError, MerlinControl, merlin
from ltdask.exceptions import MissingFramesWarning
from ltdask.udf import SumSigUDF


@pytest.fixture
def stream(tmp_path):
    """``(hdr message, frame bodies, per-frame sums)`` of a 24-frame raw 12-bit scan."""
    hdr, counts = write_scan(tmp_path, "raw12")
    frames = frame_bytes(tmp_path / "scan.mib", len(counts))
    return mpx(hdr.read_bytes()), frames, counts.astype(np.float64).sum(axis=(1, 2))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_connection_names_the_address():
    port = _free_port()
    with nothing_left_behind():
        with pytest.raises(AcquisitionError, match=f"127.0.0.1:{port}: connection refused"):
            merlin("127.0.0.1", port)


@pytest.mark.parametrize(
    "data, match",
    [
        pytest.param(
            b"HELLO,0000000013,GET,IMAGEX,0",
            "malformed MPX message at byte 0 of the stream: found b'HELLO,",
            id="prefix",
        ),
        pytest.param(b"MPX,00000000x3,HDR,", "malformed MPX message at byte 0", id="length"),
        pytest.param(mpx(b"XYZ,\r\nEnd"), "the stream starts with a b'XYZ' message", id="no-hdr"),
        pytest.param(
            mpx(b"HDR,\r\nFrames in Acquisition (Number):\tmany\r\nEnd\t"),
            "'many' in",
            id="hdr-field",
        ),
    ],
)
def test_malformed_start(data, match):
    with nothing_left_behind():
        with ByteServer(data, linger=2) as server:
            with pytest.raises(AcquisitionError, match=match):
                merlin("127.0.0.1", server.port, timeout=1)


def test_malformed_frame_header(stream):
    hdr, frames, _ = stream
    bad = frames[0].replace(b"R64", b"R65", 1)
    with ByteServer(hdr + mpx(bad), linger=2) as server:
        with pytest.raises(AcquisitionError, match="field 6 .pixel type. is 'R65'"):
            merlin("127.0.0.1", server.port, timeout=1)


def test_first_frame_longer_than_its_header_says(stream):
    hdr, frames, _ = stream
    with ByteServer(hdr + mpx(frames[0] + b"\0" * 8), linger=2) as server:
        at = len(hdr)
        with pytest.raises(
            AcquisitionError,
            match=f"frame at byte {at} has {len(frames[0]) + 8} bytes, but its header describes "
            f"{len(frames[0])}",
        ):
            merlin("127.0.0.1", server.port, timeout=1)


def _run(data: bytes, **options):
    with nothing_left_behind():
        with ByteServer(data, linger=options.pop("linger", 0)) as server:
            with merlin("127.0.0.1", server.port, frames_per_partition=4, **options) as acq:
                (res,) = ltdask.compute(acq, [SumSigUDF()])
    return res


def _arrived_as(res, sums, arrived: int):
    valid = res["intensity_valid"].values.reshape(-1)
    np.testing.assert_array_equal(valid, np.arange(len(sums)) < arrived)
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1)[:arrived], sums[:arrived])


class _PiecesServer(ByteServer):
    """Serves `pieces` with a pause after each (a client reads each in one go), then keeps
    the connection open until the client hangs up."""

    def __init__(self, pieces: list[bytes], pause: float = 0.2):
        self.pieces, self.pause = pieces, pause
        super().__init__(b"", linger=2)

    def _serve(self):
        conn = self._accept()
        if conn is None:
            return
        with conn:
            for piece in self.pieces:
                conn.sendall(piece)
                time.sleep(self.pause)
            conn.settimeout(self.linger)
            with contextlib.suppress(OSError):
                while conn.recv(4096):
                    pass


def test_a_read_that_ends_inside_a_frame_after_frames_out_of_order(stream):
    # frames 2 and 4 come in one read with the first half of frame 3; the store's rows of
    # frames 2, 3 and 4 were lent for the read: frame 4 is copied into its row, where the
    # first half of frame 3 had arrived (kept first), then frame 3's second half comes
    hdr, frames, sums = stream
    m = [mpx(f) for f in frames]
    half = len(m[2]) // 2
    pieces = [hdr + m[0], m[1] + m[3] + m[2][:half], m[2][half:] + b"".join(m[4:])]
    with nothing_left_behind():
        with _PiecesServer(pieces) as server:
            with merlin("127.0.0.1", server.port, frames_per_partition=6) as acq:
                (res,) = ltdask.compute(acq, [SumSigUDF()])
            assert acq.store.duplicates == 0
    _arrived_as(res, sums, len(sums))


def test_malformed_prefix_mid_stream_names_its_offset(stream):
    hdr, frames, sums = stream
    data = hdr + b"".join(mpx(f) for f in frames[:5]) + b"MXP" + mpx(frames[5])[3:]
    at = len(hdr) + 5 * (15 + len(frames[0]))
    with pytest.warns(
        MissingFramesWarning,
        match=f"broke off after 5 of 24 frames .*malformed MPX message at byte {at}",
    ):
        res = _run(data, linger=1)
    _arrived_as(res, sums, 5)


def test_a_later_frame_of_another_size(stream):
    hdr, frames, sums = stream
    data = hdr + b"".join(mpx(f) for f in frames[:3]) + mpx(frames[3][:-8]) + mpx(frames[4])
    at = len(hdr) + 3 * (15 + len(frames[0]))
    with pytest.warns(
        MissingFramesWarning,
        match=f"frame at byte {at} has {len(frames[0]) - 8} bytes, but its header describes",
    ):
        res = _run(data, linger=1)
    _arrived_as(res, sums, 3)


def test_garbage_in_a_frame_where_its_sequence_number_belongs(stream):
    hdr, frames, sums = stream
    bad = b"MQ1,00x004" + frames[3][10:]
    data = hdr + b"".join(mpx(f) for f in frames[:3]) + mpx(bad)
    at = len(hdr) + 3 * (15 + len(frames[0]))
    with pytest.warns(MissingFramesWarning, match=f"message at byte {at} .* starts with b'MPX,"):
        res = _run(data, linger=1)
    _arrived_as(res, sums, 3)


def test_a_second_acquisition_ends_the_first(stream):
    hdr, frames, sums = stream
    data = hdr + b"".join(mpx(f) for f in frames[:7]) + hdr + b"".join(mpx(f) for f in frames)
    with pytest.warns(MissingFramesWarning, match="17 of 24 frames never arrived .frames 7:24"):
        res = _run(data, linger=1)
    _arrived_as(res, sums, 7)


def test_a_second_header_shorter_than_a_frame_after_a_gap(stream):
    """A header that arrives whole and alone (shorter than a frame) ends it as well."""
    hdr, frames, sums = stream
    data = hdr + b"".join(mpx(f) for f in frames[:7]) + hdr
    with pytest.warns(MissingFramesWarning, match="17 of 24 frames never arrived"):
        res = _run(data, linger=1)
    _arrived_as(res, sums, 7)


def test_connection_dropped_mid_scan_keeps_what_arrived(stream):
    hdr, frames, sums = stream
    data = hdr + b"".join(mpx(f) for f in frames[:9]) + mpx(frames[9])[:100]
    at = len(hdr) + 9 * (15 + len(frames[0])) + 100
    with pytest.warns(
        MissingFramesWarning,
        match=f"broke off after 9 of 24 frames .*connection closed at byte {at} of the stream, "
        "after 9 of 24 frames",
    ):
        res = _run(data)
    _arrived_as(res, sums, 9)


def test_sequence_number_zero(stream):
    hdr, frames, _ = stream
    data = hdr + mpx(frames[0]) + mpx(b"MQ1,000000" + frames[1][10:])
    with pytest.warns(MissingFramesWarning, match="has sequence number 0; expected numbers from 1"):
        _run(data, linger=1)


def test_arming_needs_the_control_port():
    with pytest.raises(AcquisitionError, match="arm=True and soft_trigger=True need the control"):
        merlin("127.0.0.1", 6342, arm=True)


class _ControlServer(ByteServer):
    """Answers each request with the responses given, in order (one per request)."""

    def __init__(self, responses):
        self.responses = list(responses)
        super().__init__(b"")

    def _serve(self):
        conn = self._accept()
        if conn is None:
            return
        with conn:
            for response in self.responses:
                conn.recv(4096)
                conn.sendall(response)


@pytest.mark.parametrize(
    "extra", [1, 0], ids=["length=body+1", "length=body (LiberTEM-live's simulator)"]
)
def test_control_reads_responses_by_length(extra):
    body = b"GET,IMAGEX,256,0"
    response = b"MPX,%010d," % (len(body) + extra) + body
    with nothing_left_behind():
        with _ControlServer([response, response]) as server:
            with MerlinControl("127.0.0.1", server.port) as control:
                assert control.get("IMAGEX") == "256"
                assert control.get("IMAGEX") == "256"  # (nothing left over in between)


@pytest.mark.parametrize(
    "response, match",
    [
        pytest.param(mpx(b"CMD,STARTACQUISITION,1"), "status '1' .busy.", id="busy"),
        pytest.param(mpx(b"CMD,STARTACQUISITION,2"), "status '2' .command not recog", id="unknown"),
        pytest.param(mpx(b"SET,STARTACQUISITION,0"), "answered with b'SET,START", id="other"),
    ],
)
def test_control_errors(response, match):
    with nothing_left_behind():
        with _ControlServer([response]) as server:
            with MerlinControl("127.0.0.1", server.port) as control:
                with pytest.raises(AcquisitionError, match=match):
                    control.cmd("STARTACQUISITION")


def test_no_first_frame_within_the_timeout(stream):
    hdr, _, _ = stream
    with nothing_left_behind():
        with ByteServer(hdr, linger=2) as server:
            with pytest.raises(
                AcquisitionError,
                match=f"timed out .* at byte {len(hdr)} .*the first frame: is the scan triggered",
            ):
                merlin("127.0.0.1", server.port, timeout=0.5)


def test_a_continuous_acquisition_takes_nav_shape_frames(stream):
    _, frames, sums = stream
    hdr = mpx(b"HDR,\r\nFrames in Acquisition (Number):\t0\r\nCounter Depth (number):\t12\r\nEnd\t")
    data = hdr + b"".join(mpx(f) for f in frames)
    with ByteServer(data, linger=2) as server:
        with pytest.raises(AcquisitionError, match="a continuous acquisition .* give nav_shape"):
            merlin("127.0.0.1", server.port, timeout=1)
    with nothing_left_behind():
        with ByteServer(data, linger=1) as server:
            with merlin("127.0.0.1", server.port, nav_shape=(2, 5)) as acq:
                (res,) = ltdask.compute(acq, [SumSigUDF()])
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1), sums[:10])
    assert bool(res["intensity_valid"].all())
