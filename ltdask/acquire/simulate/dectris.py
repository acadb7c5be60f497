"""A DECTRIS detector on 127.0.0.1: a recorded scan streamed as SIMPLON stream v1 over zmq.

`DectrisSimulator` replays the frames of any scan ``ltdask.open`` reads (or an array),
encoded as the detector would (``bslz4``, ``lz4`` or ``none``), or a "zmq dump" as
LiberTEM-live records one (records of an int64 little-endian length and a message's
bytes), on a zmq PUSH socket bound to 127.0.0.1: the series header (``dheader-1.0`` and
the detector configuration), one four-part message per frame, ``dseries_end-1.0``. It is
bounded (frames, seconds, zmq's send high-water mark), paced to a frame rate, and has the
faults of a real stream: dropped, duplicated and reordered frames, a cut stream, a stall.
With ``api_port`` it serves the SIMPLON REST API (`ltdask.acquire.simulate._simplon`):
the series starts when a client arms it, as a detector control unit's does.
``ltdask simulate dectris FILE`` is the same on the command line.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import Any

from ltdask.acquire.dectris import _zmq, frames_in_series
from ltdask.acquire.simulate._dectris_series import _CODES, is_dump, load, read_dump
from ltdask.acquire.store import AcquisitionError


def fault_order(
    count: int,
    drop: Iterable[int] = (),
    duplicate: Iterable[int] = (),
    reorder: bool = False,
) -> list[int]:
    """The frame numbers in the order they are sent: without `drop`, `duplicate` twice,
    and with `reorder` each pair (0, 1), (2, 3)... swapped."""
    dropped = set(drop)
    twice = set(duplicate)
    order = [i for i in range(count) if i not in dropped]
    if reorder:
        for k in range(0, len(order) - 1, 2):
            order[k], order[k + 1] = order[k + 1], order[k]
    out = []
    for i in order:
        out.append(i)
        if i in twice:
            out.append(i)
    return out


def spread(n: int, count: int) -> list[int]:
    """`n` frame numbers spread evenly over `count` frames (the CLI's ``--drop N``)."""
    return sorted({count * (k + 1) // (n + 1) for k in range(max(0, n))} - {count})


class DectrisSimulator:
    """A DECTRIS detector control unit's stream on 127.0.0.1 (a context manager).

    Parameters
    ----------
    source
        The frames: a path (a scan ``ltdask.open`` reads, or a zmq dump), an ltdask
        dataset, or an array ``(..., y, x)`` of uint8/16/32.
    port, api_port
        The stream's port (0: one the system picks; see `port`) and the REST API's (None:
        no REST API, the series starts at once; 0: a free port).
    rate
        Frames per second (None: as fast as the receiver takes them).
    max_frames
        Frames of a series (the source's frames repeated as needed; default: the source's
        count, or the REST API's ``ntrigger``/``nimages`` when a client set them).
    max_seconds
        The simulator stops sending after this long (None: never).
    compression
        ``bslz4``, ``lz4`` or ``none`` (a zmq dump is sent as recorded).
    drop, duplicate, reorder
        Frame numbers not sent / sent twice; whether neighbouring pairs are swapped.
    cut_after, stall_after
        Close the stream (no series end) / stop sending (keeping the stream open) after
        this many frames.
    series
        The first series number.
    send_hwm
        Messages zmq queues for the receiver at most (it then waits: no frame is lost).
    """

    def __init__(
        self,
        source,
        port: int = 0,
        api_port: int | None = None,
        rate: float | None = None,
        max_frames: int | None = None,
        max_seconds: float | None = None,
        compression: str = "bslz4",
        drop: Iterable[int] = (),
        duplicate: Iterable[int] = (),
        reorder: bool = False,
        cut_after: int | None = None,
        stall_after: int | None = None,
        series: int = 1,
        send_hwm: int = 1024,
    ) -> None:
        self.frames = load(source, compression)
        if not self.frames.images:
            raise AcquisitionError(f"{source!r}: no frames to send")
        self.config = dict(self.frames.config)
        if max_frames is not None:
            self.config.update(trigger_mode="exte", ntrigger=int(max_frames), nimages=1)
        self.rate = rate
        self.max_seconds = max_seconds
        self.drop, self.duplicate, self.reorder = list(drop), list(duplicate), reorder
        self.cut_after, self.stall_after = cut_after, stall_after
        self.series = int(series)
        self.send_hwm = int(send_hwm)
        self._port, self._api_port = int(port), api_port
        self._stop = threading.Event()
        self.armed = threading.Event()
        self.triggered = threading.Event()
        #: image messages sent (all series), and series sent to their end
        self.sent = 0
        self.series_done = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._threads: list[threading.Thread] = []
        self._context: Any = None
        self._socket: Any = None
        self._api: Any = None

    # -- life --------------------------------------------------------------------------------
    def start(self) -> DectrisSimulator:
        """Bind the stream (and the REST API) and start sending (or waiting to be armed)."""
        zmq = _zmq()
        self._context = zmq.Context()
        sock = self._context.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, self.send_hwm)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(f"tcp://127.0.0.1:{self._port}")
        self._socket = sock
        self.port = int(sock.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
        self.api_port = None
        if self._api_port is not None:
            from ltdask.acquire.simulate._simplon import serve

            self._api, thread = serve(self, self._api_port)
            self.api_port = self._api.server_address[1]
            self._threads.append(thread)
        else:
            self.armed.set()
            self.triggered.set()
        sender = threading.Thread(target=self._run, name="ltdask dectris simulator", daemon=True)
        sender.start()
        self._threads.append(sender)
        return self

    def stop(self, linger: float = 0.0) -> None:
        """Stop sending, close the stream (after at most `linger` s for the messages still
        queued) and the REST API, join the threads."""
        self._stop.set()
        if self._api is not None:
            self._api.shutdown()
            self._api.server_close()
        for thread in self._threads:
            thread.join(5.0)
        self._threads = []
        if self._socket is not None:
            self._socket.close(linger=int(linger * 1000))
            self._socket = None
        if self._context is not None:
            self._context.term()
            self._context = None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the simulator has nothing more to send; whether it came to that."""
        return self.done.wait(timeout)

    def __enter__(self) -> DectrisSimulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- sending ---------------------------------------------------------------------------
    def num_frames(self) -> int:
        """Frames of the next series (from the configuration, REST puts included)."""
        return frames_in_series(self.config)

    def _send(self, parts: list, deadline: float | None) -> bool:
        """Send one message, waiting while the receiver is behind; False when stopped."""
        zmq = _zmq()
        assert self._socket is not None
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                return False
            try:
                self._socket.send_multipart(parts, flags=zmq.NOBLOCK, copy=True)
                return True
            except zmq.Again:
                self._socket.poll(100, zmq.POLLOUT)
        return False

    def _run(self) -> None:
        deadline = None if self.max_seconds is None else time.monotonic() + self.max_seconds
        try:
            while not self._stop.is_set():
                while not self.armed.wait(0.1):
                    if self._stop.is_set() or (deadline and time.monotonic() > deadline):
                        return
                more = self._series(deadline)
                self.armed.clear()
                self.triggered.clear()
                if not more or self._api is None:
                    return
                self.series += 1
        except BaseException as e:  # noqa: BLE001  (kept for the tests and the CLI)
            self.error = e
        finally:
            self.done.set()

    def _series(self, deadline: float | None) -> bool:
        """Send one series; whether the stream is still open after it."""
        config = dict(self.config)
        head = {"htype": "dheader-1.0", "series": self.series, "header_detail": "basic"}
        if not self._send([json.dumps(head).encode(), json.dumps(config).encode()], deadline):
            return False
        while not self.triggered.wait(0.1):
            if self._stop.is_set() or not self.armed.is_set():
                return not self._stop.is_set()
        count = frames_in_series(config)
        images = self.frames.images
        t0, sent = time.monotonic(), 0
        for index in fault_order(count, self.drop, self.duplicate, self.reorder):
            if self.cut_after is not None and sent >= self.cut_after:
                assert self._socket is not None
                self._socket.close(linger=2000)  # (what is queued still goes out)
                self._socket = None
                return False
            if self.stall_after is not None and sent >= self.stall_after:
                self._stop.wait(None if deadline is None else deadline - time.monotonic())
                return False
            if self.rate:
                ahead = t0 + sent / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            desc, blob, dconfig = images[index % len(images)]
            image = (
                f'{{"htype": "dimage-1.0", "series": {self.series}, "frame": {index}, '
                f'"hash": "{self.frames.hashes[index % len(images)]}"}}'
            )
            if not self._send([image.encode(), desc, blob, dconfig], deadline):
                return False
            sent += 1
            self.sent += 1
        end = {"htype": "dseries_end-1.0", "series": self.series}
        if not self._send([json.dumps(end).encode()], deadline):
            return False
        self.series_done += 1
        return True


__all__ = ["DectrisSimulator", "fault_order", "is_dump", "load", "read_dump", "spread"]


def _command():
    """The ``ltdask simulate dectris`` click command (made on first use of the CLI)."""
    import click

    @click.command("dectris")
    @click.argument("path", type=click.Path(exists=True, dir_okay=True))
    @click.option("--port", default=9999, show_default=True, help="zmq stream port (0: free)")
    @click.option("--api-port", type=int, default=None, help="SIMPLON REST port (0: free)")
    @click.option("--rate", type=float, default=None, help="frames per second (default: max)")
    @click.option("--max-frames", type=int, default=None, help="frames of the series")
    @click.option("--max-seconds", type=float, default=600.0, show_default=True)
    @click.option(
        "--compression", type=click.Choice(list(_CODES)), default="bslz4", show_default=True
    )
    @click.option("--drop", type=int, default=0, help="drop N frames, spread over the scan")
    @click.option("--duplicate", type=int, default=0, help="send N frames twice")
    @click.option("--reorder", is_flag=True, help="swap neighbouring frames pairwise")
    @click.option("--cut-after", type=int, default=None, help="close the stream after N")
    @click.option("--stall-after", type=int, default=None, help="stop sending after N")
    def dectris(path, port, api_port, rate, max_frames, max_seconds, compression, **faults):
        """Stream PATH (a scan ltdask.open reads, or a zmq dump) as a DECTRIS detector
        (SIMPLON stream v1) on 127.0.0.1 until it is sent, --max-seconds pass, or Ctrl-C."""
        frames = load(path, compression)
        count = max_frames or frames_in_series(frames.config)
        sim = DectrisSimulator(
            frames,
            port=port,
            api_port=api_port,
            rate=rate,
            max_frames=max_frames,
            max_seconds=max_seconds,
            compression=compression,
            drop=spread(faults["drop"], count),
            duplicate=spread(faults["duplicate"], count),
            reorder=faults["reorder"],
            cut_after=faults["cut_after"],
            stall_after=faults["stall_after"],
        )
        sim.start()
        try:
            click.echo(f"tcp://127.0.0.1:{sim.port}", nl=True)
            if sim.api_port is not None:
                click.echo(f"http://127.0.0.1:{sim.api_port}/detector/api/1.8.0/")
            click.echo(f"streaming {count} frames of {path} ({compression})", err=True)
            while not sim.wait(0.2):
                pass
            if sim.error is not None:
                raise click.ClickException(f"the simulator failed: {sim.error}")
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
        finally:  # (a series sent to its end still goes out to a receiver that is behind)
            sim.stop(linger=10.0 if sim.series_done else 0.0)
        click.echo(f"sent {sim.sent} frames", err=True)

    return dectris


command = _command()
