"""Where an acquisition's frames come from: a detector stream or a file still being written.

A `Source` announces what it will send (`Header`) and then hands frames to a `Sink` (the
acquisition's frame store) from the acquisition's receiver thread, by their index in the
scan. It knows nothing of partitions, UDFs or schedulers: those are the acquisition's
(`ltdask.acquire.dataset`). A frame travels as the source's *payload* (raw bytes as the
detector sends them, for sources whose decoding is worth doing in parallel, in the
partition tasks) or already decoded; `Source.decode` turns a block of payloads into frames.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ltdask.io.decode import Decoder
    from ltdask.io.fileset import File, FileSet


@dataclass(frozen=True)
class Header:
    """What a source announces before its frames.

    Parameters
    ----------
    sig_shape
        The shape of one decoded frame.
    dtype
        The dtype of decoded frames.
    num_frames
        The frames the acquisition will have (the detector's count, a file header's or the
        scan's); 0 where the source does not know it (the user's ``nav_shape`` must then).
    nav_shape
        The scan's shape where the source knows it (e.g. Merlin's ``ScanX``/``ScanY``),
        else None (the user's ``nav_shape``, else ``(num_frames,)``).
    payload_shape, payload_dtype
        One frame as the source stores it (e.g. ``(frame_bytes,)`` of uint8 for raw
        bytes); by default the decoded frame.
    attrs
        Metadata kept with the dataset (e.g. the detector's header fields).
    frame_seconds
        The detector's time per frame where the source announces it (a Merlin frame's
        shutter time, DECTRIS' ``frame_time``), else None (also where what it announces is
        not a positive number): partitions then hold at most a fraction of a second of
        frames, so that partial results come often at any rate.
    """

    sig_shape: tuple[int, ...]
    dtype: np.dtype
    num_frames: int = 0
    nav_shape: tuple[int, ...] | None = None
    payload_shape: tuple[int, ...] | None = None
    payload_dtype: np.dtype | None = None
    attrs: dict = field(default_factory=dict)
    frame_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sig_shape", tuple(int(s) for s in self.sig_shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.payload_shape is None:
            object.__setattr__(self, "payload_shape", self.sig_shape)
        else:
            object.__setattr__(self, "payload_shape", tuple(int(s) for s in self.payload_shape))
        payload_dtype = self.dtype if self.payload_dtype is None else self.payload_dtype
        object.__setattr__(self, "payload_dtype", np.dtype(payload_dtype))
        t = self.frame_seconds
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 < t < math.inf:
            t = None
        object.__setattr__(self, "frame_seconds", None if t is None else float(t))

    @property
    def payload_bytes(self) -> int:
        """Bytes of one frame's payload."""
        assert self.payload_dtype is not None and self.payload_shape is not None
        return math.prod(self.payload_shape) * self.payload_dtype.itemsize


class Sink(Protocol):
    """What a source's `Source.receive` hands frames to (the acquisition's frame store)."""

    def put(self, first: int, payloads: np.ndarray, used=None) -> None:
        """Frames ``first, first + 1, ...`` (0-based scan order), one payload each along
        the first axis of `payloads`; the sink copies them (not rows of its own `slots`:
        they are where they belong). `used` (for payloads of one dimension): how many
        leading elements of each payload hold data (e.g. a compressed frame in a slot
        sized for the largest); only those are copied, what follows them is undefined
        (the decoding must not read it)."""

    def slots(self, first: int, count: int) -> np.ndarray | None:
        """Rows for frames ``first ..`` (at most `count`) in the sink's own memory, for a
        source that receives frames in place and then `put`s those rows (no copy); None
        where it has none for them (the source then puts copies). A source that uses it
        calls `release` when it no longer writes there."""

    def release(self) -> None:
        """The rows of `slots` are no longer written to."""

    @property
    def cancelled(self) -> bool:
        """Whether the acquisition was closed: `Source.receive` returns soon after."""


class Source(abc.ABC):
    """A detector stream or a growing file: the frames of one acquisition.

    Subclasses implement `open` (connect, arm where asked, read up to the header) and
    `receive` (hand every frame to the sink, return at the acquisition's end); `decode`
    where the payload is not the decoded frame; `close` to release sockets and files. An
    `open` that waits for frames (e.g. for the first one, whose header tells the layout)
    calls `ready` once it is connected and armed, before it waits.
    """

    #: how the source is named in messages, e.g. ``"merlin 127.0.0.1:6342"``
    name: str = "source"
    #: called once (without arguments) when the source is ready for the scan's frames:
    #: connected, and armed where it arms; where a scan is triggered (LiberTEM-live's
    #: ``Hooks.on_ready_for_data``). See `ready`.
    on_ready: Callable[[], None] | None = None

    def ready(self) -> None:
        """Call `on_ready` if it was not called yet: from an `open` that waits for frames
        (before it waits), else by whoever opened the source, after `open`."""
        hook, self.on_ready = self.on_ready, None
        if hook is not None:
            hook()

    @abc.abstractmethod
    def open(self, timeout: float) -> Header:
        """Connect and wait (at most `timeout` s) for the acquisition's header."""

    @abc.abstractmethod
    def receive(self, sink: Sink) -> None:
        """Hand the acquisition's frames to `sink` (from the receiver thread) until its
        end; check ``sink.cancelled`` at least every 0.2 s and return when it is set.
        Raise on a broken stream: the frames handed so far stay valid."""

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        """Frames ``(k, *sig_shape)`` of the header's dtype from `payloads` (``(k,
        *payload_shape)``); runs in the partition tasks. By default the payloads are the
        frames."""
        return payloads

    def fileset(self, files: list[File]) -> tuple[FileSet, Decoder] | None:
        """Where payloads are a file format's records of frames: the format's file set of
        `files` (each of whose bytes are payloads back to back) and its decoder, through
        which runs read the payloads tile by tile as they read such files
        (`ltdask.io.block_files`); None (the default): they are decoded whole (`decode`)."""
        return None

    def close(self) -> None:  # noqa: B027  (most sources have something to close)
        """Release the source's sockets and files (the receiver thread has stopped)."""
