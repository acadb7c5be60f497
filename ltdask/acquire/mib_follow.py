"""Merlin ``.mib`` files followed while they are written: frames processed as they land.

`MibFollowSource` looks at the file again and again and hands over its whole frames (the
file's size over the frame size), each checked to start with the frame header its place
says (``MQ1`` and the sequence number: a frame whose header is not written yet waits for
the next look); the frames travel as their bytes and are decoded in the partition tasks,
as a Merlin stream's (:class:`ltdask.acquire.mpx.MibFrames`). `follow_mib` opens one as an
acquisition.
"""

from __future__ import annotations

import os
import time
from io import BufferedReader

import numpy as np

from ltdask._types import PathLike
from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.merlin import BATCH_BYTES, acquisition_of
from ltdask.acquire.mpx import (
    SEQ_MODULUS,
    AcquisitionHeader,
    MibFrames,
    header_size,
    sequence_numbers,
)
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.io.decode import Decoder
from ltdask.io.fileset import File, FileSet

__all__ = ["MibFollowSource", "follow_mib"]


class MibFollowSource(Source):
    """The frames of a ``.mib`` file while it is being written.

    The frame count comes from the ``.hdr`` file next to it (or `num_frames`); the file is
    looked at again every `poll` s, and its whole frames handed over, each checked to start
    with its ``MQ1`` header and sequence number (a frame whose header is not there yet is
    taken at the next look).

    Parameters
    ----------
    path
        The ``.mib`` file (it may not exist yet when the source is made), or the ``.hdr``
        of its acquisition (``NAME.hdr``: ``NAME.mib``).
    num_frames
        The frames of the acquisition, where no ``.hdr`` says.
    poll
        Seconds between looks at the file.
    """

    def __init__(self, path: PathLike, num_frames: int | None = None, poll: float = 0.02):
        path = os.fspath(path)
        self.hdr_path: str | None = None
        if path.lower().endswith(".hdr"):  # (its acquisition: NAME.mib next to NAME.hdr)
            self.hdr_path, path = path, os.path.splitext(path)[0] + ".mib"
        self.path = path
        self.name = self.path
        self.num_frames = num_frames
        self.poll = poll
        self._file: BufferedReader | None = None

    def open(self, timeout: float) -> Header:
        from ltdask.io.formats.mib.dataset import find_hdr

        deadline = time.monotonic() + timeout
        first = b""
        hdr = None
        while True:
            hdr_path = self.hdr_path or find_hdr(self.path)
            if hdr is None and hdr_path is not None and os.path.exists(hdr_path):
                with open(hdr_path, "rb") as f:
                    hdr = AcquisitionHeader(f.read(1 << 20), hdr_path)
            if os.path.exists(self.path):
                with open(self.path, "rb") as f:
                    first = f.read(1 << 20)
                frames = self._first_frame(first, hdr.counter_depth if hdr else None)
                if frames is not None:
                    break
            if time.monotonic() > deadline:
                raise AcquisitionError(
                    f"{self.path}: no whole frame within {timeout} s (found "
                    f"{len(first)} bytes: {first[:16]!r})"
                )
            time.sleep(self.poll)
        self.frames = frames
        self.expected = (hdr.num_frames if hdr else 0) or int(self.num_frames or 0)
        if not self.expected:
            raise AcquisitionError(
                f"{self.path}: no .hdr file next to it says how many frames the acquisition "
                "has; give nav_shape"
            )
        self.first_seq = frames.header.sequence
        self._file = open(self.path, "rb")  # noqa: SIM115  (open while following)
        return Header(
            sig_shape=frames.sig_shape,
            dtype=frames.dtype,
            num_frames=self.expected,
            nav_shape=hdr.nav_shape() if hdr else None,
            payload_shape=(frames.frame_bytes,),
            payload_dtype=np.dtype(np.uint8),
            attrs=frames.describe(),
            frame_seconds=frames.header.shutter_seconds,
        )

    def _first_frame(self, data: bytes, counter_depth: int | None) -> MibFrames | None:
        """The frames' layout from the file's first frame, once it is whole."""
        size = header_size(data)
        if not data.startswith(b"MQ1,") or size is None:
            if len(data) >= 16 and data[:4] != bytes(4):
                raise AcquisitionError(
                    f"{self.path} is not a Merlin .mib file: it starts with {data[:16]!r}, "
                    "expected a frame header starting with 'MQ1,'"
                )
            return None
        if len(data) < size:
            return None
        frames = MibFrames(data, self.path, counter_depth)
        return frames if len(data) >= frames.frame_bytes else None

    def receive(self, sink: Sink) -> None:
        assert self._file is not None
        size = self.frames.frame_bytes
        batch = max(1, BATCH_BYTES // size)
        done = 0
        while done < self.expected and not sink.cancelled:
            whole = os.fstat(self._file.fileno()).st_size // size
            if whole <= done:
                time.sleep(self.poll)
                continue
            k = min(whole, self.expected) - done
            k = min(k, batch)
            records = np.empty((k, size), np.uint8)
            self._file.seek(done * size)
            got = self._file.readinto(records.data)
            k = min(k, (got or 0) // size)
            good = self._checked(records[:k], done)
            if good:
                sink.put(done, records[:good])
                done += good
            if good < k:
                time.sleep(self.poll)

    def _checked(self, records: np.ndarray, done: int) -> int:
        """How many of `records` (frames `done`...) have the header their place says; an
        error for a frame with another sequence number or no frame header."""
        expected = (self.first_seq + done + np.arange(len(records))) % SEQ_MODULUS
        for i in range(len(records)):
            seqs = sequence_numbers(records[i : i + 1], 0)
            if seqs is not None and seqs[0] == expected[i]:
                continue
            if not records[i, :4].any():  # (the header is not written yet)
                return i
            found = bytes(records[i, :11])
            raise AcquisitionError(
                f"{self.path}: frame {done + i} at byte {(done + i) * records.shape[1]} "
                f"starts with {found!r}; expected 'MQ1,{int(expected[i]):06d},' (a torn "
                "write, or frames of another size)"
            )
        return len(records)

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        return self.frames.decode(payloads)

    def fileset(self, files: list[File]) -> tuple[FileSet, Decoder]:
        return self.frames.fileset(files)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def follow_mib(path: PathLike, nav_shape=None, **acquisition_options) -> Acquisition:
    """A ``.mib`` file being written, processed as its frames are appended.

    Parameters
    ----------
    path
        The ``.mib`` file; the ``.hdr`` next to it (as `ltdask.open_mib` finds it) says how
        many frames the acquisition has, and the scan shape.
    nav_shape
        The scan's shape (needed without a ``.hdr``).
    **acquisition_options
        As for `merlin` (``idle_timeout``: seconds without a new frame after which the
        acquisition counts as broken off).

    Returns
    -------
    Acquisition

    Examples
    --------
    >>> import ltdask
    >>> with ltdask.acquire.follow_mib("/data/scan.mib") as acq:  # doctest: +SKIP
    ...     com, = ltdask.compute(acq, [ltdask.udf.CoMUDF()])
    """
    num = None if nav_shape is None else int(np.prod(nav_shape))
    return acquisition_of(MibFollowSource(path, num_frames=num), nav_shape, acquisition_options)
