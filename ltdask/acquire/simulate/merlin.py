"""A Merlin on this machine: a recorded ``.mib`` acquisition served on its TCP ports.

`MerlinSimulator` replays the frames of a ``.mib`` set (their bytes as in the files: frame
header and pixels) on 127.0.0.1, as a Merlin's data port sends them: the acquisition header
(``HDR``, the ``.hdr`` file's text), then one ``MQ1`` message per frame, paced to a frame
rate, to one client at a time. Its control port answers ``GET``/``SET``/``CMD``;
``CMD,STARTACQUISITION`` sends the header and, with `wait_trigger`, ``CMD,SOFTTRIGGER``
the frames (else a client gets an acquisition as it connects). It stops after
`max_frames` frames or `max_seconds` s, and can drop, duplicate and reorder frames, cut
the connection or stall, as a detector (or its network) might. ``ltdask simulate merlin``
runs one from the command line.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Iterable

import numpy as np

from ltdask._types import PathLike
from ltdask.acquire.mpx import (
    POLL,
    PREFIX_BYTES,
    SEQ_DIGITS,
    SEQ_MODULUS,
    SEQ_OFFSET,
    message,
    mpx_prefix,
    parse_prefix,
)
from ltdask.acquire.simulate._wire import IOV_MAX, scaled_hdr, send_all
from ltdask.acquire.store import AcquisitionError

#: bytes of messages sent at once at most
SEND_BYTES = 4 * 2**20
#: frames of this many bytes or more go from the maps (smaller ones: a buffer each costs
#: more than copying them)
SCATTER_BYTES = 64 * 2**10
LOOPBACK = "127.0.0.1"
#: what `garbage` sends before anything else (21 KiB, as LiberTEM-live's simulator)
JUNK = b"GARBAGE," * 2688


class MerlinSimulator:
    """Serve a ``.mib`` acquisition as a Merlin would, on 127.0.0.1.

    Parameters
    ----------
    path
        The acquisition's ``.hdr`` (or a ``.mib`` of it).
    port, control_port
        The data port and the control port (0: a free port, see `port`); no control port
        when None.
    rate
        Frames per second (None: as fast as the client takes them).
    max_frames, max_seconds
        Stop after sending this many frames in all, or after this many seconds.
    drop, duplicate
        Indices (0-based) of frames never sent / sent twice.
    reorder
        Send the frames in swapped pairs (1, 0, 3, 2, ...).
    cut_after, stall_after
        Close the connection / stop sending (the connection stays open) after this many
        frames of an acquisition.
    wait_trigger
        Send the header on ``CMD,STARTACQUISITION`` and the frames on ``CMD,SOFTTRIGGER``
        (both on the control port) instead of on connection.
    repeat
        Send the file's frames this many times in one acquisition (the sequence numbers
        and the header's frame count and ``ScanY`` go on), for longer runs.
    garbage
        Send 21 KiB of junk as a client connects to the data port (as some Merlin
        software versions do; the client must drain it). Needs `wait_trigger`.

    Examples
    --------
    >>> import ltdask.acquire  # doctest: +SKIP
    >>> with MerlinSimulator("scan.hdr", port=0, rate=1000) as sim:  # doctest: +SKIP
    ...     with ltdask.acquire.merlin("127.0.0.1", sim.port) as acq:
    ...         sums, = ltdask.compute(acq, [ltdask.udf.SumUDF()])
    """

    def __init__(
        self,
        path: PathLike,
        port: int = 6342,
        control_port: int | None = None,
        rate: float | None = None,
        max_frames: int | None = None,
        max_seconds: float | None = None,
        drop: Iterable[int] = (),
        duplicate: Iterable[int] = (),
        reorder: bool = False,
        cut_after: int | None = None,
        stall_after: int | None = None,
        wait_trigger: bool = False,
        repeat: int = 1,
        garbage: bool = False,
    ) -> None:
        if garbage and not wait_trigger:
            raise ValueError("garbage=True needs wait_trigger=True (junk, then the header)")
        if wait_trigger and control_port is None:
            raise ValueError("wait_trigger=True needs a control port (control_port=0: any)")
        if rate is not None and not rate > 0:
            raise ValueError(f"rate={rate!r}: expected frames per second > 0, or None")
        if int(repeat) < 1:
            raise ValueError(f"repeat={repeat!r}: expected a count >= 1")
        self.path = os.fspath(path)
        #: what GET answers (the frames' size and depth, and what was SET)
        self.params: dict[str, str] = {}
        self._load(self.path, int(repeat))
        self.rate = rate
        self.max_frames = max_frames
        self.max_seconds = max_seconds
        self.drop = {int(i) for i in drop}
        self.duplicate = {int(i) for i in duplicate}
        self.reorder = reorder
        self.cut_after = cut_after
        self.stall_after = stall_after
        self.wait_trigger = wait_trigger
        self.garbage = garbage
        self._ports = (int(port), control_port)
        self.port = self.control_port = 0
        #: frames sent so far, in all acquisitions
        self.frames_sent = 0
        self._stop = threading.Event()
        self._armed = threading.Event()
        self._triggered = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listeners: list[socket.socket] = []

    def _load(self, path: str, repeat: int) -> None:
        from ltdask.io.formats.mib.dataset import find_hdr, open_mib

        ds = open_mib(path)
        fs = ds.fileset
        self.stride = fs.frame_stride
        self._files = [(f.path, f.num_frames) for f in fs.files]
        self._views: list = []  # (first frame, the file's frames mapped): while serving
        self._file_of: list[int] = []
        self.file_frames = sum(n for _, n in self._files)
        self.repeat = repeat
        self.num_frames = self.file_frames * repeat
        hdr_path = path if path.lower().endswith(".hdr") else find_hdr(path)
        if hdr_path is not None:
            with open(hdr_path, "rb") as f:
                hdr = f.read()
        else:
            lines = ["HDR,", f"Frames in Acquisition (Number):\t{self.file_frames}"]
            lines += [f"Frames per Trigger (Number):\t{ds.nav_shape[-1]}"]
            if ds.header.counter_depth is not None:
                lines += [f"Counter Depth (number):\t{ds.header.counter_depth}"]
            hdr = ("\r\n".join([*lines, "End\t"]) + "\r\n").encode("ascii")
        if repeat > 1:
            hdr = scaled_hdr(hdr, repeat)
        self.hdr = hdr
        h = ds.header
        sig = ds.sig_shape
        self.params |= {
            "IMAGEX": str(sig[-1]),
            "IMAGEY": str(sig[0]),
            "COUNTERDEPTH": str(h.counter_depth or 8 * ds.dtype.itemsize),
        }

    # -- running ---------------------------------------------------------------------------
    def start(self) -> MerlinSimulator:
        """Listen on the ports and serve in background threads; returns the simulator."""
        self._started = time.monotonic()
        # each file's frames as rows, and the file of each frame
        self._views, self._file_of, start = [], [], 0
        for k, (path, n) in enumerate(self._files):
            mapped = np.memmap(path, np.uint8, "r", shape=(n * self.stride,))
            self._views.append((start, mapped.reshape(n, self.stride)))
            self._file_of += [k] * n
            start += n
        data = self._listen(self._ports[0])
        self.port = data.getsockname()[1]
        self._serve(self._data_server, data, "data")
        if self._ports[1] is not None:
            control = self._listen(self._ports[1])
            self.control_port = control.getsockname()[1]
            self._serve(self._control_server, control, "control")
        return self

    def _listen(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError as e:
            sock.close()
            self.stop()
            raise AcquisitionError(f"merlin simulator: cannot listen on port {port}: {e}") from None
        sock.listen(1)
        sock.settimeout(POLL)
        self._listeners.append(sock)
        return sock

    def _serve(self, target, sock: socket.socket, what: str) -> None:
        name = f"merlin simulator {what}"
        thread = threading.Thread(
            target=self._accepting, args=(target, sock), name=name, daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _accepting(self, target, listener: socket.socket) -> None:
        """Take one client at a time until stopped."""
        while not self._stopping():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(POLL)
            try:
                target(conn)
            except (OSError, AcquisitionError):
                pass  # (the client went away, or sent what is not an MPX message)
            finally:
                conn.close()

    def _stopping(self) -> bool:
        if self._stop.is_set():
            return True
        elapsed = time.monotonic() - self._started
        over_time = self.max_seconds is not None and elapsed > self.max_seconds
        over_count = self.max_frames is not None and self.frames_sent >= self.max_frames
        if over_time or over_count:
            self._stop.set()
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop serving: close the connections and the ports, and end the threads."""
        self._stop.set()
        for thread in self._threads:
            thread.join(5.0)
        for sock in self._listeners:
            sock.close()
        self._threads, self._listeners = [], []
        self._views, self._file_of = [], []  # (the maps hold the files open)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the simulator stops by its bounds (or `stop`); whether it has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopping():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def __enter__(self) -> MerlinSimulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the data port ---------------------------------------------------------------------
    def _data_server(self, conn: socket.socket) -> None:
        if self.garbage:
            send_all(conn, [JUNK], self._stopping)
        if not self.wait_trigger:
            send_all(conn, [message(self.hdr)], self._stopping)
            self._acquisition(conn)
            self._linger(conn)
            return
        while not self._stopping():
            if not self._wait_for(self._armed, conn):
                return
            send_all(conn, [message(self.hdr)], self._stopping)
            if not self._wait_for(self._triggered, conn):
                return
            if not self._acquisition(conn):
                return

    def _wait_for(self, event: threading.Event, conn: socket.socket) -> bool:
        """Wait for `event` (and clear it); False where the client left or we stop."""
        while not self._stopping():
            if _closed(conn, wait=False):
                return False  # (the event stays for the next client)
            # (a short wait: a client that left is noticed at once, and the next one, which
            # may be draining the junk of `garbage` for 0.1 s, is served)
            if event.wait(0.01) and not _closed(conn, wait=False):
                event.clear()
                return True
        return False

    def _linger(self, conn: socket.socket) -> None:
        """Keep the connection open (as a Merlin does) until the client closes it."""
        while not self._stopping() and not _closed(conn):
            pass

    def order(self) -> list[int]:
        """The frames of one acquisition in the order they are sent (faults applied)."""
        order = [i for i in range(self.num_frames) if i not in self.drop]
        if self.reorder:
            for k in range(0, len(order) - 1, 2):
                order[k], order[k + 1] = order[k + 1], order[k]
        return [j for i in order for j in ([i, i] if i in self.duplicate else [i])]

    def _acquisition(self, conn: socket.socket) -> bool:
        """Send one acquisition's frames; False where the connection was cut."""
        order = np.array(self.order(), dtype=np.int64)
        record = PREFIX_BYTES + self.stride
        # small frames are copied into messages in one go, larger ones sent from the maps
        small = self.stride < SCATTER_BYTES
        chunk = max(1, SEND_BYTES // record if small else min(SEND_BYTES // record, IOV_MAX // 4))
        prefix = mpx_prefix(self.stride)
        wire = np.empty((chunk if small else 0, record), np.uint8)
        wire[:, :PREFIX_BYTES] = np.frombuffer(prefix, np.uint8)
        t0 = time.monotonic()
        sent = 0
        while sent < len(order):
            if self.cut_after is not None and sent >= self.cut_after:
                conn.shutdown(socket.SHUT_RDWR)
                return False
            if self.stall_after is not None and sent >= self.stall_after:
                self._linger(conn)
                return False
            n = min(chunk, len(order) - sent)
            for limit in (self.cut_after, self.stall_after):
                n = n if limit is None else min(n, limit - sent)
            if self.max_frames is not None:
                n = min(n, self.max_frames - self.frames_sent)
            if self.rate is not None:
                elapsed = time.monotonic() - t0
                due = int(elapsed * self.rate) + 1 - sent
                if due <= 0:  # (the next frame is due at sent / rate)
                    time.sleep(max(0.0, min(POLL, sent / self.rate - elapsed)))
                    continue
                n = min(n, due)
            if n <= 0 or self._stopping():
                return False
            if small:
                self._fill(wire[:n], order[sent : sent + n])
            messages = [wire[:n].data] if small else self._messages(order[sent : sent + n], prefix)
            if not send_all(conn, messages, self._stopping):
                return False
            sent += n
            self.frames_sent += n
        return True

    def _messages(self, frames: np.ndarray, prefix: bytes) -> list:
        """The messages of `frames` as buffers: prefixes, views of the maps (no copy; the
        simulator shares the machine with the receiver), the repeats' sequence numbers."""
        out: list = []
        for i in frames.tolist():
            j = i % self.file_frames
            start, view = self._views[self._file_of[j]]
            data = view[j - start].data
            out.append(prefix)
            if i < self.file_frames:
                out.append(data)
            else:
                seq = b"%0*d" % (SEQ_DIGITS, (i + 1) % SEQ_MODULUS)
                at = SEQ_OFFSET + SEQ_DIGITS
                out += [data[:SEQ_OFFSET], seq, data[at:]]
        return out

    def _fill(self, rows: np.ndarray, frames: np.ndarray) -> None:
        """The messages of `frames` (indices in the acquisition) into `rows` (after their
        prefixes): the files' bytes, with the sequence numbers of the repeats."""
        in_file = frames % self.file_frames
        pixels = rows[:, PREFIX_BYTES:]
        first = int(in_file[0])
        start, view = self._views[self._file_of[first]]
        last = first + len(frames)
        if (np.diff(in_file) == 1).all() and last <= start + len(view):
            pixels[:] = view[first - start : last - start]
        else:
            for row, i in enumerate(in_file.tolist()):
                start, view = self._views[self._file_of[i]]
                pixels[row] = view[i - start]
        repeated = frames >= self.file_frames
        if repeated.any():
            seq = (frames[repeated] + 1) % SEQ_MODULUS
            digits = seq[:, None] // 10 ** np.arange(SEQ_DIGITS - 1, -1, -1) % 10 + ord("0")
            at = PREFIX_BYTES + SEQ_OFFSET
            rows[repeated, at : at + SEQ_DIGITS] = digits

    # -- the control port ------------------------------------------------------------------
    def _control_server(self, conn: socket.socket) -> None:
        buf = b""
        while not self._stopping():
            try:
                chunk = conn.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                return
            buf += chunk
            while len(buf) >= PREFIX_BYTES:
                length = parse_prefix(buf[:PREFIX_BYTES], 0, "merlin simulator control")
                if len(buf) < PREFIX_BYTES + length:
                    break
                body = buf[PREFIX_BYTES : PREFIX_BYTES + length].decode("ascii", "replace")
                buf = buf[PREFIX_BYTES + length :]
                conn.sendall(message(self._answer(body).encode("ascii")))

    def _answer(self, body: str) -> str:
        """The response to one request: ``GET,<param>,<value>,<status>`` or
        ``SET|CMD,<param>,<status>`` (status 0: OK; 2: not recognised)."""
        kind, _, rest = body.partition(",")
        param, _, value = rest.partition(",")
        if kind == "GET":
            return f"GET,{param},{self.params.get(param, 'undef')},0"
        if kind == "SET":
            self.params[param] = value
            return f"SET,{param},0"
        if kind == "CMD":
            if param == "STARTACQUISITION":
                self._armed.set()
            elif param == "SOFTTRIGGER":
                self._triggered.set()
            return f"CMD,{param},0"
        return f"{kind},{param},2"


def _closed(conn: socket.socket, wait: bool = True) -> bool:
    """Whether the client closed the connection (waiting up to `POLL` s for it, or not)."""
    try:
        if wait:
            return conn.recv(4096) == b""
        # (a socket with a timeout polls for that long before any recv, MSG_DONTWAIT or not)
        if not select.select([conn], [], [], 0)[0]:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True
