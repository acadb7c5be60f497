"""Merlin streams for the tests of ``ltdask.acquire.merlin``: scans written in each MIB mode,
a server of hand-made bytes (for malformed streams), and a check that a test leaves no
thread or socket behind."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

import numpy as np

import ltdask
from helpers.mibfiles import make_counts, write_hdr, write_mib
from ltdask.udf import ApplyMasksUDF, CoMUDF, SumSigUDF, SumUDF

NAV = (4, 6)

#: id -> (counter depth, raw, quad, gap, signal shape)
MODES = {
    "U08": (6, False, False, 0, (16, 32)),
    "U16": (12, False, False, 0, (16, 32)),
    "U32": (24, False, False, 0, (16, 32)),
    "raw1": (1, True, False, 0, (16, 32)),
    "raw6": (6, True, False, 0, (16, 32)),
    "raw12": (12, True, False, 0, (16, 32)),
    "raw24": (24, True, False, 0, (16, 32)),
    "raw12-quad": (12, True, True, 0, (16, 32)),
    "raw6-quad-gaps": (6, True, True, 2, (34, 66)),
    "U16-quad": (12, False, True, 0, (16, 32)),
}


def write_scan(folder, mode: str = "raw12", nav=NAV, seed: int = 34, scan_header=False):
    """A scan of `mode` as ``folder/scan.mib`` + ``scan.hdr`` (frames per trigger = the
    scan row); ``(hdr path, counts (frames, *sig))``."""
    depth, raw, quad, gap, sig = MODES[mode]
    counts = make_counts(np.random.default_rng(seed), int(np.prod(nav)), sig, depth, gap)
    write_mib(folder / "scan.mib", counts, depth=depth, raw=raw, quad=quad, gap=gap)
    write_hdr(
        folder / "scan.hdr",
        len(counts),
        per_trigger=nav[-1],
        depth=depth,
        scan=nav if scan_header else None,
    )
    return folder / "scan.hdr", counts


def udfs(sig_shape):
    """Sum, CoM (inside a radius) and a ring together, as at the microscope."""
    cy, cx = (sig_shape[0] - 1) / 2, (sig_shape[1] - 1) / 2
    r = min(sig_shape) / 2

    def ring():
        return ltdask.masks.ring(cx, cy, sig_shape[1], sig_shape[0], r, r / 3)

    return [
        SumUDF(),
        SumSigUDF(),
        CoMUDF.with_params(cy=cy, cx=cx, r=r),
        ApplyMasksUDF([ring]),
    ]


#: CoM results computed from the neighbours of a position (which may be missing)
FROM_NEIGHBOURS = ("divergence", "curl")


def assert_same_results(got, expected, valid=None):
    """Every variable of each result equal (bit for bit), at the `valid` positions of
    nav-shaped ones where given (then leaving out those that depend on the neighbours)."""
    for g, e in zip(got, expected, strict=True):
        for name in e.data_vars:
            if valid is not None and name in FROM_NEIGHBOURS:
                continue
            a, b = g[name].values, e[name].values
            if valid is not None and a.shape[: valid.ndim] == valid.shape:
                a, b = a[valid], b[valid]
            np.testing.assert_array_equal(a, b, err_msg=name)


def frame_bytes(mib_path, count: int) -> list[bytes]:
    """The `count` frames of a ``.mib`` file, each its header and pixels."""
    with open(mib_path, "rb") as f:
        data = f.read()
    stride = len(data) // count
    return [data[i : i + stride] for i in range(0, len(data), stride)]


def mpx(body: bytes) -> bytes:
    return b"MPX,%010d," % (len(body) + 1) + body


class ByteServer:
    """Serves `data` (bytes) to the first client on 127.0.0.1, then closes the connection
    (``linger``: keeps it open that many seconds first, or until the client closes it)."""

    def __init__(self, data: bytes, linger: float = 0.0):
        self.data, self.linger = data, linger
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self._listener.settimeout(5)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="test byte server")
        self._thread.start()

    def _accept(self) -> socket.socket | None:
        """The client's connection, with a 5 s timeout; None where the listener closed."""
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return None
        conn.settimeout(5)
        return conn

    def _serve(self):
        conn = self._accept()
        if conn is None:
            return
        with conn:
            conn.sendall(self.data)
            if self.linger:  # (until the client hangs up, at most `linger` s)
                conn.settimeout(self.linger)
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass

    def close(self):
        self._listener.close()
        self._thread.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def nothing_left_behind():
    """Assert that the block leaves no thread (of its own; dask's pool aside) and no open
    file descriptor (sockets, files) behind."""
    before_threads = set(threading.enumerate())
    before_fds = _open_fds()
    yield
    deadline = time.monotonic() + 5
    while True:
        left = [
            t
            for t in threading.enumerate()
            if t not in before_threads and not t.name.startswith("ThreadPoolExecutor")
        ]
        fds = _open_fds()
        if (not left and fds <= before_fds) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert left == []
    assert fds <= before_fds, os.listdir("/proc/self/fd")
