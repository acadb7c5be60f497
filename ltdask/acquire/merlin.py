"""Quantum Detectors Merlin, live: the data port over TCP, and ``.mib`` files being written.

`MerlinSource` connects to the Merlin's data port (optionally arming it through the
control port, `MerlinControl`), reads the ``HDR`` acquisition header and the first frame
(which tell the frame count, the scan and the frame layout), then hands the frames over by
their sequence numbers; they travel as their ``.mib`` bytes, decoded in the partition tasks
(:class:`ltdask.acquire.mpx.MibFrames`). `merlin` opens it as an acquisition.
"""

from __future__ import annotations

import contextlib
import socket
import time

import numpy as np

from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.mpx import (
    CONTROL_PORT,
    DATA_PORT,
    POLL,
    PREFIX_BYTES,
    AcquisitionHeader,
    MerlinControl,
    MibFrames,
    connect,
    drain,
    frame_indices,
    in_order,
    mpx_prefix,
    parse_prefix,
    recv_exactly,
    sequence_numbers,
)
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.io.decode import Decoder
from ltdask.io.fileset import File, FileSet

#: bytes the receiver reads from the socket at most at once
BATCH_BYTES = 4 * 2**20
#: buffers one ``recvmsg_into`` fills at most (Linux's IOV_MAX)
IOV_MAX = 1024
#: frames received whole are handed to the store once this many bytes of them are in, or
#: `HAND_SECONDS` after the first of them came (or at the end of a batch, or a pause)
HAND_BYTES = 2 * 2**20
HAND_SECONDS = 0.02
#: a socket read returns once this many bytes are in (``SO_RCVLOWAT``), not with each
#: segment: fewer reads, each with its Python around it
LOWAT_BYTES = 2**20

__all__ = ["CONTROL_PORT", "DATA_PORT", "MerlinControl", "MerlinSource", "merlin"]


class MerlinSource(Source):
    """The frames of one acquisition on a Merlin's data port.

    `open` connects, arms the detector where asked (``CMD,STARTACQUISITION`` on the control
    port, and ``CMD,SOFTTRIGGER`` with `soft_trigger`), and waits for the acquisition
    header and the first frame (the scan must have started: by the trigger of the scan
    engine, or the soft trigger). Frames go where their sequence number says: gaps are
    missing frames, duplicates are kept once. The acquisition ends at its last frame (the
    header's count, else `num_frames`), a second acquisition's header, or a broken stream.

    Parameters
    ----------
    host, port
        The data port.
    control_port
        The control port; needed for `arm`.
    arm, soft_trigger
        Start the acquisition (and trigger it) through the control port.
    num_frames
        Frames of a continuous acquisition (a header with 0 frames).
    drain
        Read and discard what the data port sends until it is quiet for 0.1 s, before
        arming: junk that some Merlin software versions send before the header.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DATA_PORT,
        control_port: int | None = None,
        arm: bool = False,
        soft_trigger: bool = False,
        num_frames: int | None = None,
        drain: bool = False,
    ) -> None:
        if (arm or soft_trigger) and control_port is None:
            raise AcquisitionError(
                f"merlin {host}:{port}: arm=True and soft_trigger=True need the control port "
                "(control_port=6341 on a Merlin)"
            )
        self.host, self.port = host, int(port)
        self.control_port = control_port
        self.arm, self.soft_trigger = arm, soft_trigger
        self.num_frames = num_frames
        self.drain = drain
        self.name = f"merlin {host}:{port}"
        self._sock: socket.socket | None = None
        self._control: MerlinControl | None = None
        self._offset = 0  # bytes of the stream read before the first record

    def open(self, timeout: float) -> Header:
        deadline = time.monotonic() + timeout
        try:
            return self._open(timeout, deadline)
        except BaseException:
            self.close()
            raise

    def _open(self, timeout: float, deadline: float) -> Header:
        self._sock = connect(self.host, self.port, timeout, "data")
        if self.drain:
            self._offset += drain(self._sock, deadline, self.name)
        if self.arm or self.soft_trigger:
            assert self.control_port is not None  # (checked in __init__)
            self._control = MerlinControl(self.host, self.control_port, timeout)
            if self.arm:
                self._control.cmd("STARTACQUISITION")
        if not self.soft_trigger:
            self._close_control()
        self.ready()  # (armed: the scan may be triggered, e.g. by a LiveContext hook)
        junk = (
            ""
            if self.drain
            else (
                "; junk before the acquisition header, as some Merlin software versions send? "
                "drain=True reads it away before arming"
            )
        )
        kind, body = self._message(deadline, " (the acquisition header: is it armed?)", junk)
        if kind != b"HDR":
            raise AcquisitionError(
                f"{self.name}: the stream starts with a {kind!r} message at byte 0; expected "
                "the acquisition header (HDR) first: connect before the acquisition starts"
            )
        hdr = AcquisitionHeader(body, self.name)
        if self.soft_trigger:
            assert self._control is not None
            self._control.cmd("SOFTTRIGGER")
        self._close_control()
        start = self._offset
        kind, first = self._message(deadline, " (the first frame: is the scan triggered?)")
        if kind != b"MQ1":
            raise AcquisitionError(
                f"{self.name}: a {kind!r} message at byte {start} after the acquisition "
                "header; expected a frame (MQ1)"
            )
        self.frames = MibFrames(first, self.name, hdr.counter_depth)
        self.frames.check_size(len(first), start)
        self._first = first
        self.expected = hdr.num_frames or int(self.num_frames or 0)
        if not self.expected:
            raise AcquisitionError(
                f"{self.name}: a continuous acquisition (0 frames in its header); give "
                "nav_shape to say how many frames to take"
            )
        return Header(
            sig_shape=self.frames.sig_shape,
            dtype=self.frames.dtype,
            num_frames=hdr.num_frames,
            nav_shape=hdr.nav_shape(),
            payload_shape=(self.frames.frame_bytes,),
            payload_dtype=np.dtype(np.uint8),
            attrs={**self.frames.describe(), "merlin_hdr": dict(hdr.fields)},
            frame_seconds=self.frames.header.shutter_seconds,
        )

    def _message(self, deadline: float, what: str = "", hint: str = "") -> tuple[bytes, bytes]:
        """The next message's type word and body (`hint` ends a malformed prefix's error)."""
        assert self._sock is not None
        prefix = recv_exactly(self._sock, PREFIX_BYTES, deadline, self.name, self._offset, what)
        length = parse_prefix(prefix, self._offset, self.name, hint)
        self._offset += PREFIX_BYTES
        body = recv_exactly(self._sock, length, deadline, self.name, self._offset)
        self._offset += length
        return body[:3], body

    def receive(self, sink: Sink) -> None:
        assert self._sock is not None
        record = PREFIX_BYTES + self.frames.frame_bytes
        self._seen = np.zeros(self.expected, dtype=bool)
        self._last_seen = False
        self._next = 0  # the frame expected next (where the next batch is received)
        self._prefix = np.frombuffer(mpx_prefix(self.frames.frame_bytes), np.uint8)
        first = np.frombuffer(self._first, np.uint8)[None]
        self._hand_over(sink, self._prefix[None], first, self._offset - record, in_place=False)
        self._lowat = 1
        try:
            self._receive(sink)
        finally:
            if self._lowat != 1 and self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
            release = getattr(sink, "release", None)
            if release is not None:
                release()

    def _receive(self, sink: Sink) -> None:
        """Frames in batches, each received straight into the rows of the store that its
        frames take if they come in order (`Sink.slots`: one ``recvmsg_into`` scatters the
        messages' prefixes aside and their bodies into place, no copy), else into a buffer
        of the source's whose frames the store copies. Frames received whole go to the
        store a few at a time (`HAND_BYTES`, `HAND_SECONDS`, the end of the batch, a pause
        or a closed connection): a socket read often ends inside the next frame, and
        handing each frame over alone cost a 12-bit frame's receipt again (45 -> 32 us of
        the receiver's CPU a 256x256 frame)."""
        assert self._sock is not None
        body = self.frames.frame_bytes
        record = PREFIX_BYTES + body
        capacity = max(1, min(IOV_MAX // 2 - 1, BATCH_BYTES // record))
        prefixes = np.empty((capacity, PREFIX_BYTES), np.uint8)
        prefix_views = [row.data for row in prefixes]
        slots = getattr(sink, "slots", None)
        bounce: np.ndarray | None = None
        carry = b""  # the bytes of a message begun in the batch before
        while not sink.cancelled and not self._seen.all():
            remaining = max(1, int(self.expected - self._seen.sum()))
            n = min(capacity, remaining)
            batch = self._next  # (the first frame of the batch's rows, if in place)
            rows = None if slots is None else slots(batch, n)
            in_place = rows is not None and len(rows) > 0
            if not in_place:
                if bounce is None:
                    bounce = np.empty((capacity, body), np.uint8)
                rows = bounce[:n]
            assert rows is not None
            n = len(rows)
            iov = [v for i in range(n) for v in (prefix_views[i], rows[i].data)]
            filled = len(carry)
            if carry:  # (at most one message, the batch's first)
                head = np.frombuffer(carry, np.uint8)
                prefixes[0, : min(filled, PREFIX_BYTES)] = head[:PREFIX_BYTES]
                rows[0, : max(0, filled - PREFIX_BYTES)] = head[PREFIX_BYTES:]
                carry = b""
            done = 0  # messages of the batch handed over
            quiet_since = None
            since = None  # when the first message not handed over came in whole
            waiting = self._sock.gettimeout()
            while filled < n * record and not sink.cancelled:
                i, at = divmod(filled, record)
                part = 2 * i + (at >= PREFIX_BYTES)
                skip = at if at < PREFIX_BYTES else at - PREFIX_BYTES
                quiet = closed = False
                # (reads of at least `LOWAT_BYTES`, or the rest of the batch; after a pause,
                # whatever came)
                low = 1 if quiet_since else max(1, min(LOWAT_BYTES, n * record - filled))
                if low != self._lowat:
                    self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, low)
                    self._lowat = low
                # (frames waiting to be handed over: a pause of `HAND_SECONDS` hands them over)
                wait = POLL if since is None else HAND_SECONDS
                if wait != waiting:
                    self._sock.settimeout(wait)
                    waiting = wait
                try:
                    got = self._sock.recvmsg_into([iov[part][skip:], *iov[part + 1 :]])[0]
                except TimeoutError:
                    quiet = True
                    quiet_since = quiet_since or time.monotonic()
                else:
                    quiet_since = None
                    closed = got == 0
                    filled += got
                k = filled // record
                # a message that is not a frame, once its type is in (the one after the
                # messages received whole)
                odd = k < n and filled - k * record >= PREFIX_BYTES + 4
                odd = odd and bool((prefixes[k] != self._prefix).any())
                if k > done:
                    now = time.monotonic()
                    since = since or now
                    # handed over together: the messages of the batch, at least
                    # `HAND_BYTES` of them, or those come in `HAND_SECONDS` (one at a time,
                    # the checks of each hand-over cost more than a big frame's receipt)
                    ready = k == n or (k - done) * record >= HAND_BYTES or quiet or closed or odd
                    if ready or now - since >= HAND_SECONDS:
                        rest = filled - k * record
                        begun = b""
                        if in_place and rest and not in_order(rows[done:k], batch + done):
                            # (frames put where they belong may overwrite the row the next
                            # message is coming into: what came of it is kept first)
                            begun = prefixes[k, : min(rest, PREFIX_BYTES)].tobytes()
                            begun += rows[k, : max(0, rest - PREFIX_BYTES)].tobytes()
                        offset = self._offset
                        handed = self._hand_over(
                            sink, prefixes[done:k], rows[done:k], offset, in_place
                        )
                        self._offset += (k - done) * record
                        if handed < k - done:
                            return  # (a new acquisition's header: this one has ended)
                        done, since = k, None
                        if in_place and self._next != batch + done:
                            carry = begun  # (the rows after these may hold frames now)
                            break
                if closed:
                    raise AcquisitionError(
                        f"{self.name}: the connection closed at byte "
                        f"{self._offset + filled - done * record} of the stream, after "
                        f"{int(self._seen.sum())} of {self.expected} frames"
                    )
                if odd and done == k:
                    head = np.concatenate([prefixes[k], rows[k, :4]])
                    self._not_a_frame(head, self._offset)
                    return
                # after the last frame, a pause ends the acquisition (the gaps stay missing)
                if quiet_since and self._last_seen and time.monotonic() - quiet_since >= POLL:
                    return

    def _hand_over(
        self, sink: Sink, prefixes: np.ndarray, bodies: np.ndarray, offset: int, in_place: bool
    ) -> int:
        """Put the messages of `prefixes` and `bodies` (as long as the first frame's, from
        byte `offset` of the stream) into `sink` by their sequence numbers; how many of them
        were frames (the one after them is a new acquisition's header; anything else
        raises). `in_place`: the bodies are the store's rows of frames ``_next ..``; frames
        that are not where they belong are copied first (puts must not overwrite rows not
        yet handed over)."""
        k = len(bodies)
        record = PREFIX_BYTES + bodies.shape[1]
        good = (prefixes == self._prefix).all(axis=1)
        frames = k if good.all() else int(np.argmin(good))
        seqs = sequence_numbers(bodies[:frames], 0)
        while seqs is None:  # (the first record that is not a frame, one by one)
            frames = next(
                i for i in range(frames) if sequence_numbers(bodies[i : i + 1], 0) is None
            )
            seqs = sequence_numbers(bodies[:frames], 0)
        index = frame_indices(seqs, self._next + np.arange(len(seqs)))
        if (index < 0).any():
            at = int(np.argmax(index < 0))
            raise AcquisitionError(
                f"{self.name}: the frame at byte {offset + at * record} has "
                f"sequence number {int(seqs[at])}; expected numbers from 1"
            )
        if in_place and frames and (index != self._next + np.arange(frames)).any():
            bodies = bodies[:frames].copy()
        cuts = (np.flatnonzero(np.diff(index) != 1) + 1).tolist()
        for a, b in zip([0, *cuts], [*cuts, frames], strict=True):
            sink.put(int(index[a]), bodies[a:b])
        self._seen[index[index < self.expected]] = True
        self._last_seen = self._last_seen or bool((index == self.expected - 1).any())
        if frames:
            self._next = max(self._next, int(index.max()) + 1)
        if frames < k:
            head = np.concatenate([prefixes[frames], bodies[frames, :11]])
            self._not_a_frame(head, offset + frames * record)
        return frames

    def _not_a_frame(self, record: np.ndarray, offset: int) -> None:
        """Say what the message at `offset` is (one not like the first frame's): a new
        acquisition's header ends this one; anything else is an error."""
        head = bytes(record[: PREFIX_BYTES + 11])
        length = parse_prefix(head[:PREFIX_BYTES], offset, self.name)
        kind = head[PREFIX_BYTES : PREFIX_BYTES + 3]
        if kind == b"HDR":
            return
        if kind == b"MQ1" and length != self.frames.frame_bytes:
            self.frames.check_size(length, offset)
        raise AcquisitionError(
            f"{self.name}: the message at byte {offset} of the stream starts with "
            f"{head!r}; expected a frame ('MQ1,' and a 6-digit sequence number)"
        )

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        return self.frames.decode(payloads)

    def fileset(self, files: list[File]) -> tuple[FileSet, Decoder]:
        return self.frames.fileset(files)

    def _close_control(self) -> None:
        """Control connections are per use (a Merlin serves one at a time): the port is
        free for whoever triggers the scan."""
        if self._control is not None:
            self._control.close()
            self._control = None

    def close(self) -> None:
        self._close_control()
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def acquisition_of(source: Source, nav_shape, options: dict) -> Acquisition:
    try:
        return Acquisition(source, nav_shape=nav_shape, **options)
    except BaseException:
        source.close()
        raise


def merlin(
    host: str = "127.0.0.1",
    port: int = DATA_PORT,
    nav_shape=None,
    control_port: int | None = None,
    arm: bool = False,
    soft_trigger: bool = False,
    drain: bool = False,
    **acquisition_options,
) -> Acquisition:
    """A Merlin acquisition from its data port, processed as it arrives.

    Parameters
    ----------
    host, port
        The Merlin's data port (its software's default: 6342).
    nav_shape
        The scan's shape; by default the acquisition header's (``ScanY``, ``ScanX``, else
        frames per trigger as scan rows, as `ltdask.open_mib` reads a ``.hdr``).
    control_port
        The control port (default of the Merlin software: 6341), for `arm`.
    arm, soft_trigger
        Send ``CMD,STARTACQUISITION`` (and ``CMD,SOFTTRIGGER``) on the control port; without
        them, the acquisition is started elsewhere (connect first).
    drain
        Read and discard what the data port sends until it is quiet for 0.1 s, before
        arming: some Merlin software versions send junk before the acquisition header
        (without `drain`, that is an error naming the byte offset). Not for a detector
        that is already sending (internal trigger): its header would go with the junk.
    **acquisition_options
        `ltdask.acquire.Acquisition`'s: ``frames_per_partition``, ``memory_limit``,
        ``timeout`` (for the header and the first frame), ``idle_timeout``, ``dims``.

    Returns
    -------
    Acquisition

    Raises
    ------
    ltdask.acquire.AcquisitionError
        The port refuses the connection, the stream is malformed (naming the byte offset),
        the frames are not as their headers say.

    Examples
    --------
    >>> import ltdask
    >>> with ltdask.acquire.merlin("127.0.0.1", 6342) as acq:  # doctest: +SKIP
    ...     sums, = ltdask.compute(acq, [ltdask.udf.SumSigUDF()])
    """
    num = None if nav_shape is None else int(np.prod(nav_shape))
    source = MerlinSource(host, port, control_port, arm, soft_trigger, num_frames=num, drain=drain)
    return acquisition_of(source, nav_shape, acquisition_options)
