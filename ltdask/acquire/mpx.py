"""Merlin's wire format: MPX messages, the ``HDR`` acquisition header, ``MQ1`` frames.

Every message on Merlin's data and control ports is ``MPX,`` + ten decimal digits + ``,``
(a 15-byte prefix) + a body; the digits count the body plus one (the comma before it). On
the data port a body is the acquisition header (``HDR,``: the text of a ``.hdr`` file) or
one frame (``MQ1,``: the frame as a ``.mib`` file holds it, header and pixels). A frame
travels as its body's bytes (the *payload*) and is decoded in the partition tasks by the
``.mib`` reader's decoders (:class:`MibFrames`), on a buffer of payloads instead of a file.
"""

from __future__ import annotations

import dataclasses
import select
import socket
import time

import numpy as np

from ltdask.acquire.store import AcquisitionError
from ltdask.exceptions import DataSetError
from ltdask.io.decode import Decoder
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.mib.headers import (
    COUNTER_DEPTHS,
    hdr_int,
    nav_shape_from_hdr,
    parse_hdr,
    parse_mib_header,
)
from ltdask.io.formats.mib.layout import MibRawDecoder, MibRawFileSet, geometry

#: the Merlin's ports (control and data) as its software sets them by default
CONTROL_PORT, DATA_PORT = 6341, 6342
#: seconds a socket call blocks at most (a receiver checks for cancellation between)
POLL = 0.2
#: control responses' status codes
STATUS = {1: "busy", 2: "command not recognised", 3: "parameter out of range"}
#: bytes of ``MPX,0000000123,``
PREFIX_BYTES = 15
MAGIC = b"MPX,"
#: body bytes of a frame message before its sequence number's digits, and their count
SEQ_OFFSET, SEQ_DIGITS = 4, 6
#: sequence numbers count modulo this: a scan of a million frames or more (1024 x 1024)
#: wraps the 6-digit field (the simulators send ``000000`` for frame 1,000,000)
SEQ_MODULUS = 10**SEQ_DIGITS
#: seconds without a byte that end a drain of junk (LiberTEM-live's ~100 ms)
DRAIN_QUIET = 0.1
#: a frame header's size field (bytes 11-15 of the body: readable before the rest)
HEADER_SIZE_FIELD = slice(11, 16)


def mpx_prefix(body_bytes: int) -> bytes:
    """The prefix of a message whose body has `body_bytes` bytes.

    Examples
    --------
    >>> mpx_prefix(12)
    b'MPX,0000000013,'
    """
    return b"MPX,%010d," % (body_bytes + 1)


def message(body: bytes) -> bytes:
    """`body` as one MPX message (prefix and body)."""
    return mpx_prefix(len(body)) + body


def parse_prefix(prefix: bytes, offset: int, name: str, hint: str = "") -> int:
    """The body bytes a 15-byte `prefix` announces (its length field less one); an
    `AcquisitionError` naming the stream `name` and the byte `offset` where it is not one
    (`hint`, e.g. what to do about it, ends its message).

    Examples
    --------
    >>> parse_prefix(b"MPX,0000000013,", 0, "demo")
    12
    """
    digits = prefix[4:14]
    if prefix[:4] != MAGIC or prefix[14:15] != b"," or not digits.isdigit() or len(prefix) < 15:
        raise AcquisitionError(
            f"{name}: a malformed MPX message at byte {offset} of the stream: found "
            f"{bytes(prefix[:PREFIX_BYTES])!r}, expected 'MPX,' with 10 digits and a comma "
            f"(e.g. b'MPX,0000131457,'){hint}"
        )
    length = int(digits)
    if length < 1:
        raise AcquisitionError(
            f"{name}: the MPX message at byte {offset} has length {length}; expected >= 1"
        )
    return length - 1


class AcquisitionHeader:
    """The ``HDR`` message of an acquisition (a ``.hdr`` file's text), parsed.

    Parameters
    ----------
    data
        The header's bytes (the body, ``HDR,`` and the key/value lines).
    name
        The stream or file, for messages.
    """

    def __init__(self, data: bytes, name: str) -> None:
        if not bytes(data[:4]).startswith(b"HDR"):
            raise AcquisitionError(
                f"{name}: the acquisition header starts with {bytes(data[:16])!r}; expected 'HDR,'"
            )
        try:
            self.fields = parse_hdr(bytes(data), name)
            frames = hdr_int(self.fields, "Frames in Acquisition (Number)", name)
            depth = hdr_int(self.fields, "Counter Depth (number)", name)
        except DataSetError as e:
            raise AcquisitionError(str(e)) from None
        self.name = name
        self.num_frames = frames or 0
        self.counter_depth = depth if depth in COUNTER_DEPTHS else None

    def nav_shape(self) -> tuple[int, ...] | None:
        """``(ScanY, ScanX)`` where given, else as `ltdask.open_mib` reads a ``.hdr``:
        ``(frames // frames per trigger, frames per trigger)`` or ``(frames,)``; None for a
        continuous acquisition (0 frames)."""
        if not self.num_frames:
            return None
        try:
            shape, _ = nav_shape_from_hdr(self.fields, self.name, self.num_frames)
        except DataSetError as e:
            raise AcquisitionError(str(e)) from None
        return shape


class MibFrames:
    """How a ``.mib`` frame's bytes (header + pixels) decode: the file reader's file set
    and decoder, over a buffer of frames (one row of ``frame_bytes`` each).

    Parameters
    ----------
    first
        The first bytes of a frame, its header at least (it tells the layout).
    name
        The stream or file, for messages.
    counter_depth
        The acquisition header's counter depth, for raw frames whose header has none.

    Examples
    --------
    >>> import numpy as np
    >>> head = b"MQ1,000001,00384,01,0002,0002,U16,   1x1,01,,MQ1A,,,12,".ljust(384, b"\\0")
    >>> frame = head + np.array([[1, 2], [3, 4]], ">u2").tobytes()
    >>> frames = MibFrames(frame, "demo")
    >>> frames.sig_shape, frames.dtype, frames.frame_bytes
    ((2, 2), dtype('uint16'), 392)
    >>> frames.decode(np.frombuffer(frame * 2, np.uint8).reshape(2, -1))[1].tolist()
    [[1, 2], [3, 4]]
    """

    def __init__(self, first: bytes, name: str, counter_depth: int | None = None) -> None:
        try:
            header = parse_mib_header(bytes(first[:4096]), name)
        except DataSetError as e:
            raise AcquisitionError(str(e)) from None
        if header.raw and header.counter_depth is None and counter_depth is not None:
            header = dataclasses.replace(header, counter_depth=counter_depth)
        try:
            geom = geometry(header)
        except DataSetError as e:
            raise AcquisitionError(str(e)) from None
        self.header = header
        self.geometry = geom
        self.sig_shape = geom.sig_shape
        self.dtype = geom.dtype
        self.frame_bytes = header.header_bytes + geom.data_bytes
        self.name = name

    def check_size(self, size: int, offset: int) -> None:
        """An `AcquisitionError` where a frame of `size` bytes (at byte `offset` of the
        stream) is not the size its header describes."""
        h, geom = self.header, self.geometry
        if size != self.frame_bytes:
            raise AcquisitionError(
                f"{self.name}: the frame at byte {offset} has {size} bytes, but its header "
                f"describes {self.frame_bytes} ({h.header_bytes} header + {geom.data_bytes} "
                f"pixel bytes for {h.pixel_type} {h.width} x {h.height}"
                f"{'' if h.counter_depth is None else f', {h.counter_depth}-bit'})"
            )

    def fileset(self, files: list[File]) -> tuple[FileSet, Decoder]:
        """The ``.mib`` reader's file set of `files` (whose bytes are frames of this
        layout, back to back: a buffer of payloads, or the blocks of
        `ltdask.io.block_files.partition_files`) and its decoder."""
        h, geom = self.header, self.geometry
        if h.raw:
            assert h.counter_depth is not None
            fileset: FileSet = MibRawFileSet(
                files, geom.sig_shape, geom.dtype, h.header_bytes, geom
            )
            return fileset, MibRawDecoder(geom.dtype, geom.field_bits, h.counter_depth, geom.gap)
        return FileSet(files, geom.sig_shape, geom.stored_dtype, h.header_bytes), Decoder(
            geom.stored_dtype
        )

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        """Frames ``(k, *sig_shape)`` from `payloads` (``(k, frame_bytes)`` uint8)."""
        k = len(payloads)
        flat = np.ascontiguousarray(payloads, dtype=np.uint8).reshape(-1)
        # (one buffer of k frames, as a file: a signature of its own, never looked up)
        count = max(k, 1)
        files = [File("<frames>", 0, count, 0, signature=(0, 0, count * self.frame_bytes, 0))]
        fileset, decoder = self.fileset(files)
        shape = (k, *self.sig_shape)
        out = np.zeros(shape, self.dtype) if decoder.clear_first else np.empty(shape, self.dtype)
        if k:
            slices = np.array([[(0,) * len(self.sig_shape), self.sig_shape]], dtype=np.int64)
            frames = np.arange(k, dtype=np.int64)
            _, ranges = fileset.read_ranges(frames, k, slices)
            decoder.decode([flat], ranges[0], out.reshape(-1))
        return out

    def describe(self) -> dict:
        """The frames' header fields, for the dataset's attributes."""
        h = self.header
        attrs = {"mib_pixel_type": h.pixel_type, "mib_chip_layout": h.layout, "mib_chips": h.chips}
        if h.counter_depth is not None:
            attrs["mib_counter_depth"] = h.counter_depth
        return attrs


def sequence_numbers(records: np.ndarray, body_offset: int) -> np.ndarray | None:
    """The 1-based sequence numbers of frame records (rows of `records`, uint8, each a
    frame's body from column `body_offset`); None where a row is not an ``MQ1`` frame with
    a 6-digit sequence number."""
    body = records[:, body_offset:]
    ok = (
        (body[:, 0] == ord("M"))
        & (body[:, 1] == ord("Q"))
        & (body[:, 2] == ord("1"))
        & (body[:, 3] == ord(","))
        & (body[:, SEQ_OFFSET + SEQ_DIGITS] == ord(","))
    )
    digits = body[:, SEQ_OFFSET : SEQ_OFFSET + SEQ_DIGITS].astype(np.int64) - ord("0")
    if not ok.all() or ((digits < 0) | (digits > 9)).any():
        return None
    weights = 10 ** np.arange(SEQ_DIGITS - 1, -1, -1, dtype=np.int64)
    return digits @ weights


def frame_indices(seqs: np.ndarray, near) -> np.ndarray:
    """The 0-based scan indices of frames with sequence numbers `seqs` (`sequence_numbers`:
    1-based, modulo `SEQ_MODULUS`): of the indices a number can stand for, the one nearest
    to `near` (the index each frame would have, coming in order). Negative where a number
    stands for no frame (0 at the start of a scan)."""
    offset = (seqs - 1 - near + SEQ_MODULUS // 2) % SEQ_MODULUS - SEQ_MODULUS // 2
    return np.maximum(near + offset, -1)


def in_order(bodies: np.ndarray, first: int) -> bool:
    """Whether `bodies` are the frames ``first, first + 1, ...`` (0-based)."""
    seqs = sequence_numbers(bodies, 0)
    if seqs is None:
        return False
    return bool((seqs == (first + 1 + np.arange(len(seqs))) % SEQ_MODULUS).all())


def header_size(head: bytes) -> int | None:
    """A frame header's size field (readable from its first 16 bytes), or None."""
    field = bytes(head[HEADER_SIZE_FIELD])
    return int(field) if len(field) == 5 and field.isdigit() else None


def connect(host: str, port: int, timeout: float, what: str) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise AcquisitionError(
            f"merlin {host}:{port}: connection refused: nothing listens on the {what} port "
            f"there (is the Merlin software, or `ltdask simulate merlin`, running on port "
            f"{port}?)"
        ) from None
    except OSError as e:
        raise AcquisitionError(
            f"merlin {host}:{port}: cannot connect to the {what} port: {e}"
        ) from None
    sock.settimeout(POLL)
    return sock


def drain(sock: socket.socket, deadline: float, name: str, quiet: float = DRAIN_QUIET) -> int:
    """Read and discard what `sock` sends until it is quiet for `quiet` s: the junk that
    some Merlin software versions send on the data port before an acquisition's header
    (read before arming: the header comes after). The bytes discarded.

    Raises `AcquisitionError` where the port is not quiet by `deadline` (time.monotonic)
    or the connection closes.
    """
    buf = bytearray(2**16)
    got = 0
    sock.settimeout(quiet)
    try:
        while True:
            if time.monotonic() > deadline:
                raise AcquisitionError(
                    f"{name}: draining: the data port was not quiet for {quiet} s within the "
                    f"timeout ({got} bytes discarded); a stream of frames is no junk to drain "
                    "(drain=True is for junk before the header, before arming)"
                )
            try:
                n = sock.recv_into(buf)
            except TimeoutError:
                return got
            if n == 0:
                raise AcquisitionError(
                    f"{name}: the connection closed while draining, after {got} bytes"
                )
            got += n
    finally:
        sock.settimeout(POLL)


def recv_exactly(
    sock: socket.socket, n: int, deadline: float, name: str, offset: int, what: str = ""
):
    """`n` bytes from `sock` by `deadline` (time.monotonic), `what` they are for messages."""
    out = bytearray(n)
    view = memoryview(out)
    got = 0
    while got < n:
        if time.monotonic() > deadline:
            raise AcquisitionError(
                f"{name}: timed out waiting for {n - got} more bytes at byte {offset + got} of "
                f"the stream{what}"
            )
        try:
            k = sock.recv_into(view[got:])
        except TimeoutError:
            continue
        if k == 0:
            raise AcquisitionError(
                f"{name}: the connection closed at byte {offset + got} of the stream"
            )
        got += k
    return bytes(out)


class MerlinControl:
    """A client of the Merlin's control port: ``GET``, ``SET`` and ``CMD`` requests.

    Parameters
    ----------
    host, port
        The control port.
    timeout
        Seconds to wait for a response.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = CONTROL_PORT, timeout: float = 5.0):
        self.name = f"merlin {host}:{port}"
        self.timeout = timeout
        self._sock = connect(host, port, timeout, "control")

    def get(self, param: str) -> str:
        """The value of `param` (e.g. ``"IMAGEX"``)."""
        fields = self._request("GET", param)
        if len(fields) < 2:
            raise AcquisitionError(f"{self.name}: GET,{param} answered {fields!r}")
        self._check(fields[-1], f"GET,{param}")
        return fields[-2]

    def set(self, param: str, value) -> None:
        """Set `param` to `value` (e.g. ``set("NUMFRAMESTOACQUIRE", 1024)``)."""
        fields = self._request("SET", param, str(value))
        self._check(fields[-1] if fields else "", f"SET,{param},{value}")

    def cmd(self, command: str) -> None:
        """Run `command` (``STARTACQUISITION``, ``SOFTTRIGGER``, ``STOPACQUISITION``...)."""
        fields = self._request("CMD", command)
        self._check(fields[-1] if fields else "", f"CMD,{command}")

    def _check(self, status: str, request: str) -> None:
        if status.strip() != "0":
            meaning = STATUS.get(int(status) if status.strip().isdigit() else -1, "unknown")
            raise AcquisitionError(
                f"{self.name}: {request} failed with status {status!r} ({meaning}); expected 0 (OK)"
            )

    def _request(self, kind: str, param: str, value: str = "0") -> list[str]:
        self._sock.sendall(message(f"{kind},{param},{value}".encode("ascii")))
        deadline = time.monotonic() + self.timeout
        prefix = recv_exactly(self._sock, PREFIX_BYTES, deadline, self.name, 0)
        length = parse_prefix(prefix, 0, self.name)
        # the length should count the body and one; some servers count the body only:
        # read what is announced, then one more byte if it follows at once
        body = recv_exactly(self._sock, length, deadline, self.name, PREFIX_BYTES)
        if select.select([self._sock], [], [], 0.05)[0]:
            body += self._sock.recv(1)
        fields = body.decode("ascii", "replace").split(",")
        if fields[:2] != [kind, param]:
            raise AcquisitionError(
                f"{self.name}: {kind},{param} was answered with {body[:60]!r}; expected "
                f"'{kind},{param},...'"
            )
        return fields[2:]

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> MerlinControl:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
