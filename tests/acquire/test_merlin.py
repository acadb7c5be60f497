"""Merlin live (``ltdask.acquire.merlin``) against the package's simulator: every MIB mode
gives the results of the same UDFs on ``ltdask.open_mib`` of the file, bit for bit (and
the sums those of numpy on the counts written); the simulator's faults give partial results
with the right positions invalid; arming and triggering through the control port; partial
results of ``ltdask.iter``; no thread or socket left behind."""

from __future__ import annotations

import re
import socket
import warnings

import numpy as np
import pytest
from helpers.merlinstreams import (
    MODES,
    NAV,
    assert_same_results,
    nothing_left_behind,
    udfs,
    write_scan,
)
from helpers.mibfiles import header_bytes, make_counts, write_hdr, write_mib

import ltdask
from ltdask.acquire import FrameStore, MerlinControl, merlin, mpx
from ltdask.acquire.mpx import frame_indices
from ltdask.acquire.simulate import merlin as simulated
from ltdask.acquire.simulate.merlin import MerlinSimulator
from ltdask.exceptions import MissingFramesWarning
from ltdask.io.formats.mib.headers import parse_mib_header
from ltdask.udf import SumSigUDF, SumUDF


def _offline(hdr):
    ds = ltdask.open_mib(str(hdr))
    return ds, ltdask.compute(ds, udfs(ds.sig_shape))


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_equals_the_file(tmp_path, mode):
    hdr, counts = write_scan(tmp_path, mode)
    ds, expected = _offline(hdr)
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0) as sim:
            with merlin("127.0.0.1", sim.port, frames_per_partition=5) as acq:
                assert (acq.nav_shape, acq.sig_shape, acq.dtype) == (NAV, ds.sig_shape, ds.dtype)
                got = ltdask.compute(acq, udfs(acq.sig_shape))
    assert_same_results(got, expected)
    # and against numpy on the counts written
    f64 = counts.astype(np.float64)
    np.testing.assert_array_equal(got[0]["intensity"].values, f64.sum(axis=0))
    np.testing.assert_array_equal(got[1]["intensity"].values, f64.sum(axis=(1, 2)).reshape(NAV))


def test_frames_in_order_are_received_where_they_are_stored(tmp_path, monkeypatch):
    # one copy of each frame, from the socket into the store's rows (the first frame, read
    # with the header, is put from its message)
    copied = []
    store_frames = FrameStore._store

    def spy(self, p, index, frames, used=None):
        buf = self._buffers.get(p)
        copied.append(buf is None or not np.shares_memory(buf, frames))
        store_frames(self, p, index, frames, used)

    monkeypatch.setattr(FrameStore, "_store", spy)
    hdr, counts = write_scan(tmp_path, "raw12-quad")
    with MerlinSimulator(hdr, port=0) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=5) as acq:
            (total,) = ltdask.compute(acq, [SumUDF()])
    assert copied[0] and len(copied) > 1 and not any(copied[1:])
    np.testing.assert_array_equal(total["intensity"].values, counts.sum(axis=0, dtype=np.int64))


@pytest.mark.parametrize("faults", [{}, {"reorder": True, "drop": [4]}], ids=["in-order", "faults"])
def test_large_frames_repeated_arrive_as_the_file_holds_them(tmp_path, faults):
    # frames of 64 KiB and more go out as views of the file (the repeats' sequence numbers
    # in buffers of their own) and come in straight into the store (in order) or copied
    # where they belong (reordered, a gap)
    counts = make_counts(np.random.default_rng(3), 6, (128, 256), 12) % 16  # (float32 sums exact)
    write_mib(tmp_path / "scan.mib", counts, depth=12, raw=True)
    write_hdr(tmp_path / "scan.hdr", 6, per_trigger=3, depth=12)
    with MerlinSimulator(tmp_path / "scan.hdr", port=0, repeat=2, **faults) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=4) as acq:
            assert acq.nav_shape == (4, 3)
            with warnings.catch_warnings(record=True):
                total, per_frame = ltdask.compute(acq, [SumUDF(), SumSigUDF()])
    sums = np.tile(counts.sum(axis=(1, 2), dtype=np.int64), 2).astype(np.float64)
    arrived = np.arange(12) != (4 if faults else -1)
    np.testing.assert_array_equal(per_frame["intensity"].values.ravel()[arrived], sums[arrived])
    np.testing.assert_array_equal(per_frame["intensity_valid"].values.ravel(), arrived)
    expected = counts.sum(axis=0, dtype=np.int64) * 2 - (counts[4] if faults else 0)
    np.testing.assert_array_equal(total["intensity"].values, expected)


@pytest.mark.parametrize(
    "faults, missing, message",
    [
        pytest.param(
            dict(drop=[0, 7, 8]),
            [0, 7, 8],
            "3 of 24 frames never arrived .frame 0, frames 7:9",
            id="dropped",
        ),
        pytest.param(dict(duplicate=[3, 12]), [], "2 frames came twice", id="duplicated"),
        pytest.param(dict(reorder=True), [], None, id="reordered"),
        pytest.param(
            dict(cut_after=10),
            range(10, 24),
            "broke off after 10 of 24 frames .*connection closed",
            id="cut",
        ),
    ],
)
def test_faults(tmp_path, faults, missing, message, recwarn):
    hdr, counts = write_scan(tmp_path, "raw12")
    _, expected = _offline(hdr)
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, **faults) as sim:
            with merlin("127.0.0.1", sim.port, frames_per_partition=4) as acq:
                got = ltdask.compute(acq, udfs(acq.sig_shape))
    texts = [str(w.message) for w in recwarn if issubclass(w.category, MissingFramesWarning)]
    if message is None:
        assert texts == []
    else:
        assert any(re.search(message, t) for t in texts), texts
    valid = np.ones(len(counts), bool)
    valid[list(missing)] = False
    valid = valid.reshape(NAV)
    np.testing.assert_array_equal(got[1]["intensity_valid"].values, valid)
    assert_same_results(got[1:], expected[1:], valid=valid)
    # the sum over the frames: of those that arrived
    arrived = counts[valid.reshape(-1)].astype(np.float64).sum(axis=0)
    np.testing.assert_array_equal(got[0]["intensity"].values, arrived)


def test_stall_ends_at_the_idle_timeout(tmp_path):
    hdr, counts = write_scan(tmp_path, "raw6")
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, stall_after=9) as sim:
            with pytest.warns(MissingFramesWarning, match="no frame for 0.5 s after 9 of 24"):
                with merlin("127.0.0.1", sim.port, frames_per_partition=4, idle_timeout=0.5) as acq:
                    (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = counts.astype(np.float64).sum(axis=(1, 2))
    valid = res["intensity_valid"].values.reshape(-1)
    np.testing.assert_array_equal(valid, np.arange(24) < 9)
    np.testing.assert_array_equal(res["intensity"].values.reshape(-1)[:9], expected[:9])


def test_iter_shows_what_arrived(tmp_path):
    """Partial results while the detector is stalled after 12 frames: the two partitions
    (scan rows) that arrived are valid (and right), the rest not; the last step is the result."""
    hdr, counts = write_scan(tmp_path, "U16")
    expected = counts.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, stall_after=12) as sim:
            with pytest.warns(MissingFramesWarning, match="after 12 of 24 frames"):
                with merlin("127.0.0.1", sim.port, frames_per_partition=6, idle_timeout=1) as acq:
                    steps = [s[0] for s in ltdask.iter(acq, [SumSigUDF()])]
    arrived = (np.arange(24) < 12).reshape(NAV)
    for step in steps:
        valid = step["intensity_valid"].values
        assert not (valid & ~arrived).any()
        np.testing.assert_array_equal(step["intensity"].values[valid], expected[valid])
    # while the detector is stalled (before the idle timeout ends the acquisition) a step
    # shows what arrived: the two partitions come in one step or in two, as they complete
    assert any((step["intensity_valid"].values == arrived).all() for step in steps[:-1])
    np.testing.assert_array_equal(steps[-1]["intensity_valid"].values, arrived)


def test_arm_and_trigger_through_the_control_port(tmp_path):
    hdr, counts = write_scan(tmp_path, "raw1", scan_header=True)
    _, expected = _offline(hdr)
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, control_port=0, wait_trigger=True) as sim:
            with MerlinControl("127.0.0.1", sim.control_port) as control:
                assert (control.get("IMAGEX"), control.get("IMAGEY")) == ("32", "16")
                assert control.get("COUNTERDEPTH") == "1"
                control.set("NUMFRAMESTOACQUIRE", 24)
                assert control.get("NUMFRAMESTOACQUIRE") == "24"
            for _ in range(2):  # two acquisitions, one after the other
                with merlin(
                    "127.0.0.1",
                    sim.port,
                    control_port=sim.control_port,
                    arm=True,
                    soft_trigger=True,
                    frames_per_partition=7,
                ) as acq:
                    assert acq.nav_shape == NAV  # (ScanY, ScanX)
                    got = ltdask.compute(acq, udfs(acq.sig_shape))
                assert_same_results(got, expected)
            assert sim.frames_sent == 48


def test_repeat_goes_on_counting(tmp_path):
    """The simulator's repeats: the file's frames again, with later sequence numbers."""
    hdr, counts = write_scan(tmp_path, "raw12")
    with MerlinSimulator(hdr, port=0, repeat=3) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=8) as acq:
            assert acq.nav_shape == (12, 6)
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = np.tile(counts.astype(np.float64).sum(axis=(1, 2)), 3).reshape(12, 6)
    np.testing.assert_array_equal(res["intensity"].values, expected)
    assert bool(res["intensity_valid"].all())


def test_sequence_numbers_count_modulo_a_million():
    """The 6-digit field wraps in scans of a million frames or more (1024 x 1024): each
    number stands for the frame nearest to where the stream is."""
    seqs = np.array([999_999, 0, 1, 2, 999_998])
    assert frame_indices(seqs, 999_997).tolist() == [
        999_998,
        999_999,
        1_000_000,
        1_000_001,
        999_997,
    ]
    assert frame_indices(np.array([1, 3, 2, 0]), 0).tolist() == [0, 2, 1, -1]
    assert frame_indices(np.array([5]), 2_000_003).tolist() == [2_000_004]


def test_a_wrapped_sequence_number_goes_on_counting(tmp_path, monkeypatch):
    """A stream whose sequence numbers wrap (here modulo 10, as the simulator and the
    receiver are told) fills the scan in order, not position 0 again."""
    for module in (mpx, simulated):
        monkeypatch.setattr(module, "SEQ_MODULUS", 10)
    hdr, counts = write_scan(tmp_path, "raw12")
    with MerlinSimulator(hdr, port=0, repeat=3) as sim:
        with merlin("127.0.0.1", sim.port, frames_per_partition=8) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
    expected = np.tile(counts.astype(np.float64).sum(axis=(1, 2)), 3).reshape(12, 6)
    np.testing.assert_array_equal(res["intensity"].values, expected)
    assert bool(res["intensity_valid"].all())


@pytest.mark.parametrize("shutter, per_partition", [(0.05, 5), (0.02, 12), (0.001, 40)])
def test_partitions_hold_a_quarter_second_of_frames(tmp_path, shutter, per_partition):
    """Frames whose headers say how long each takes (the shutter time) come in partitions
    of at most a quarter second of them, so that partial results come four times a second
    however slow the detector was set; fast frames: the bytes' rule (here all 40 frames)."""
    counts = make_counts(np.random.default_rng(5), 40, (16, 16), 12)
    write_mib(tmp_path / "scan.mib", counts, depth=12, raw=True, shutter=shutter)
    write_hdr(tmp_path / "scan.hdr", 40, per_trigger=40, depth=12)
    with MerlinSimulator(tmp_path / "scan.hdr", port=0) as sim:
        with merlin("127.0.0.1", sim.port) as acq:
            assert acq.header.frame_seconds == shutter
            (res,) = ltdask.compute(acq, [SumSigUDF()])
            sizes = acq.nav_chunks[-1]  # (the scan: one row of 40)
    assert sizes[0] == per_partition == max(sizes) and sum(sizes) == 40
    np.testing.assert_array_equal(
        res["intensity"].values.reshape(-1), counts.astype(np.float64).sum(axis=(1, 2))
    )


@pytest.mark.parametrize(
    "field, seconds", [("0.000500", 0.0005), ("0.000000", None), ("n/a", None)]
)
def test_the_shutter_time_of_a_frame_header(field, seconds):
    head = header_bytes(
        1, size=384, chips=1, width=16, height=16, pixel_type="R64", layout="1x1", depth=12
    )
    head = head.replace(b"0.001000", field.encode().ljust(8, b" "))
    assert parse_mib_header(head, "demo").shutter_seconds == seconds


def test_the_simulator_stops_at_its_bounds(tmp_path):
    hdr, _ = write_scan(tmp_path, "raw12")
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, max_frames=10) as sim:
            with pytest.warns(MissingFramesWarning, match="after 10 of 24 frames"):
                with merlin("127.0.0.1", sim.port, idle_timeout=2) as acq:
                    ltdask.compute(acq, [SumSigUDF()])
            assert sim.wait(5) and sim.frames_sent == 10
        with MerlinSimulator(hdr, port=0, max_seconds=0.2) as sim:
            assert sim.wait(5)


def test_the_control_port_survives_a_malformed_request(tmp_path):
    hdr, _ = write_scan(tmp_path, "raw12")
    with nothing_left_behind():
        with MerlinSimulator(hdr, port=0, control_port=0) as sim:
            with socket.create_connection(("127.0.0.1", sim.control_port), timeout=5) as s:
                s.sendall(b"HELLO, MERLIN, HELLO")
                assert s.recv(100) == b""  # (it closes that connection)
            with MerlinControl("127.0.0.1", sim.control_port) as control:
                assert control.get("IMAGEX") == "32"
