"""Junk before a Merlin acquisition's header (some Merlin software versions send it):
``drain=True`` reads it away before arming, and the frames are those of ``open_mib`` bit for
bit; without it, an error names the byte offset and the fix. The simulator's ``garbage``."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from helpers.cli import invoke
from helpers.merlinstreams import NAV, assert_same_results, nothing_left_behind, udfs, write_scan

import ltdask
from ltdask.acquire import AcquisitionError, merlin
from ltdask.acquire.mpx import drain
from ltdask.acquire.simulate.merlin import MerlinSimulator

#: the simulator's junk: 21 KiB, as LiberTEM-live's simulator sends
JUNK_BYTES = 21 * 1024


@pytest.mark.parametrize("mode", ["raw1", "raw12", "U16"])
def test_drain_reads_the_junk_away_and_the_frames_equal_the_file(tmp_path, mode):
    hdr, counts = write_scan(tmp_path, mode, scan_header=True)
    ds = ltdask.open_mib(str(hdr))
    expected = ltdask.compute(ds, udfs(ds.sig_shape))
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, control_port=0, wait_trigger=True, garbage=True) as sim:
            for _ in range(2):  # (the next client gets its junk as it connects, too)
                with merlin(
                    "127.0.0.1",
                    sim.port,
                    control_port=sim.control_port,
                    arm=True,
                    soft_trigger=True,
                    drain=True,
                    frames_per_partition=5,
                ) as acq:
                    assert acq.nav_shape == NAV
                    got = ltdask.compute(acq, udfs(acq.sig_shape))
                assert_same_results(got, expected)
    f64 = counts.astype(np.float64)
    np.testing.assert_array_equal(got[1]["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))


def test_junk_without_drain_names_the_offset_and_the_fix(tmp_path):
    hdr, _ = write_scan(tmp_path, "raw12")
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, control_port=0, wait_trigger=True, garbage=True) as sim:
            with pytest.raises(
                AcquisitionError,
                match="malformed MPX message at byte 0 of the stream: found b'GARBAGE,GARBAGE'"
                ".*junk before the acquisition header.*drain=True",
            ):
                merlin("127.0.0.1", sim.port, control_port=sim.control_port, arm=True, timeout=2)


def test_drain_counts_what_it_discards():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"\xff" * JUNK_BYTES)
        assert drain(b, time.monotonic() + 5, "test") == JUNK_BYTES
        # quiet now: nothing more, and the socket is back to its polling timeout
        assert drain(b, time.monotonic() + 5, "test") == 0
        assert b.gettimeout() == pytest.approx(0.2)


def test_drain_of_a_port_that_never_falls_quiet_is_an_error():
    a, b = socket.socketpair()
    stop = threading.Event()

    def chatter():
        while not stop.is_set():
            a.sendall(b"x" * 100)
            time.sleep(0.02)

    sender = threading.Thread(target=chatter)
    sender.start()
    try:
        with pytest.raises(AcquisitionError, match="not quiet for 0.1 s within the timeout"):
            drain(b, time.monotonic() + 0.5, "test")
    finally:
        stop.set()
        sender.join()
        a.close()
        b.close()


def test_drain_of_a_closed_connection_is_an_error():
    a, b = socket.socketpair()
    with b:
        a.sendall(b"junk")
        a.close()
        with pytest.raises(AcquisitionError, match="closed while draining, after 4 bytes"):
            drain(b, time.monotonic() + 5, "test")


def test_garbage_needs_a_trigger_to_wait_for(tmp_path):
    hdr, _ = write_scan(tmp_path, "raw12")
    with pytest.raises(ValueError, match="garbage=True needs wait_trigger=True"):
        MerlinSimulator(hdr, port=0, garbage=True)
    result = invoke(
        ["simulate", "merlin", hdr, "--port", "0", "--max-seconds", "1", "--garbage"], tmp_path
    )
    assert result.exit_code != 0
    assert "--garbage" in result.output and "needs --control-port" in result.output


def test_the_simulator_sees_whether_a_client_left_without_waiting():
    """The data port's check between acquisitions must not wait for the connection's
    timeout (a socket with a timeout polls that long, MSG_DONTWAIT or not): the client
    that comes next is served at once (0.7 s per armed acquisition before)."""
    from ltdask.acquire.simulate.merlin import _closed

    a, b = socket.socketpair()
    b.settimeout(30)
    answers: list = []
    checker = threading.Thread(target=lambda: answers.append(_closed(b, wait=False)))
    try:
        checker.start()
        checker.join(5)
        assert not checker.is_alive() and answers == [False]
        a.sendall(b"x")
        assert _closed(b, wait=False) is False  # (data waiting is not a close)
        a.close()
        b.recv(1)
        assert _closed(b, wait=False) is True
    finally:
        a.close()
        checker.join()
        b.close()
