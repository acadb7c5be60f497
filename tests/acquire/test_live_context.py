"""LiberTEM-live's ``LiveContext`` calls on ltdask's acquisitions (``ltdask.compat.live``),
with the memory "detector"; the detectors' own are in their test modules."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ltdask.compat import LiveContext
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture
def data():
    return np.random.default_rng(7).integers(0, 500, (4, 5, 6, 7)).astype(np.uint16)


def test_run_udf_and_run_udf_iter(data):
    ctx = LiveContext.make_with("inline")
    with ctx.make_connection("memory").open(data=data) as conn:
        aq = ctx.make_acquisition(conn=conn, frames_per_partition=3)
        total = ctx.run_udf(dataset=aq, udf=SumUDF())
        np.testing.assert_array_equal(total["intensity"].data, data.sum(axis=(0, 1)))
        aq = ctx.make_acquisition(conn=conn, nav_shape=(20,), frames_per_partition=3)
        parts = list(ctx.run_udf_iter(dataset=aq, udf=SumSigUDF()))
    # (the memory detector sends at once: the first step may hold every partition)
    assert len(parts) >= 1
    last = parts[-1].buffers[0]["intensity"]
    np.testing.assert_array_equal(last.data, data.sum(axis=(2, 3)).reshape(-1))
    assert parts[-1].damage.data.all()


def test_what_ltdask_does_not_take(data):
    ctx = LiveContext.make_with("inline")
    with pytest.raises(
        NotImplementedError,
        match="make_connection\\('asi_tpx3'\\): ltdask receives merlin, dectris, memory",
    ):
        ctx.make_connection("asi_tpx3")
    with pytest.raises(ValueError, match="open\\(data=...\\): give the array"):
        ctx.make_connection("memory").open()


def test_merlin_passive_and_active(tmp_path):
    from helpers.merlinstreams import NAV, nothing_left_behind, write_scan

    from ltdask.acquire import MerlinControl
    from ltdask.acquire.simulate.merlin import MerlinSimulator

    hdr, counts = write_scan(tmp_path, "raw12", scan_header=True)
    expected = counts.astype(np.float64).sum(axis=(1, 2)).reshape(NAV)
    ctx = LiveContext.make_with("inline")
    with nothing_left_behind():
        # passive: the simulator sends the header as the data port connects
        with MerlinSimulator(hdr, port=0) as sim:
            with ctx.make_connection("merlin").open(data_port=sim.port) as conn:
                pending = conn.wait_for_acquisition(5)
                assert pending.nav_shape == NAV
                aq = ctx.make_acquisition(conn=conn, pending_aq=pending, frames_per_partition=6)
                res = ctx.run_udf(dataset=aq, udf=SumSigUDF())
                aq.close()
        np.testing.assert_array_equal(res["intensity"].data, expected)
        # active: ltdask arms (STARTACQUISITION); the scan engine (here: a timer) triggers
        with MerlinSimulator(hdr, port=0, control_port=0, wait_trigger=True) as sim:

            def scan_engine():
                with MerlinControl("127.0.0.1", sim.control_port) as control:
                    control.cmd("SOFTTRIGGER")

            trigger = threading.Timer(0.3, scan_engine)
            trigger.start()
            with ctx.make_connection("merlin").open(
                data_port=sim.port, api_port=sim.control_port
            ) as conn:
                with ctx.make_acquisition(conn=conn, controller=object()) as aq:
                    res = ctx.run_udf(dataset=aq, udf=SumSigUDF())
            trigger.join()
        np.testing.assert_array_equal(res["intensity"].data, expected)


def test_dectris_passive_and_nothing_pending(data):
    from ltdask.acquire.simulate.dectris import DectrisSimulator

    ctx = LiveContext.make_with("inline")
    frames = data.reshape(-1, *data.shape[2:])
    with DectrisSimulator(frames, port=0) as dcu:
        with ctx.make_connection("dectris").open(data_port=dcu.port) as conn:
            pending = conn.wait_for_acquisition(5)
            with ctx.make_acquisition(conn=conn, pending_aq=pending, nav_shape=(4, 5)) as aq:
                res = ctx.run_udf(dataset=aq, udf=SumUDF())
    np.testing.assert_array_equal(res["intensity"].data, data.sum(axis=(0, 1)))
    # nobody sends: None after the timeout, as LiberTEM-live answers
    with socket_nobody_listens() as port:
        conn = ctx.make_connection("merlin").open(data_port=port)
        assert conn.wait_for_acquisition(0.3) is None


def socket_nobody_listens():
    """A listening TCP socket on 127.0.0.1 that accepts and never sends (its port)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def listening():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            yield s.getsockname()[1]

    return listening()
