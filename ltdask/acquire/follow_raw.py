"""A raw file being appended to, frame by frame, as an acquisition's source.

Its size is polled; the complete frames (``(size - file header) // frame stride``) are read
with plain file reads (a memory map would not see the file grow) and handed over in scan
order, until the scan's frame count (or the acquisition's ``idle_timeout``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.acquire._files import BATCH_BYTES, POLL_S, FollowedFile, frame_count, wait_for_file
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.exceptions import DataSetError
from ltdask.io.checks import check_bytes, check_dtype, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.fileset import File, FileSet


class RawFollowSource(Source):
    """A raw file being appended to, frame by frame (see `follow`).

    Parameters
    ----------
    path
        The file (it may appear only after the acquisition is made: `Acquisition`'s
        ``timeout`` is how long to wait for it).
    sig_shape, dtype
        One frame's shape, and its pixels' dtype as stored (``">u2"`` for big-endian).
    nav_shape, num_frames
        The scan's shape, or its frame count (one of them).
    file_header_bytes, frame_header_bytes, frame_footer_bytes
        Bytes before the first frame, and before and after each frame's pixels (as
        `ltdask.open_raw` takes them).
    poll_interval
        Seconds between two looks at the file's size.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> from ltdask.acquire import Acquisition, RawFollowSource
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> np.arange(6 * 4 * 4, dtype=np.uint16).reshape(6, 4, 4).tofile(path)
    >>> source = RawFollowSource(path, (4, 4), np.uint16, nav_shape=(2, 3))
    >>> with Acquisition(source) as acq:
    ...     (res,) = ltdask.compute(acq, [ltdask.udf.SumUDF()])
    >>> int(res["intensity"].values.sum())
    4560
    """

    def __init__(
        self,
        path: PathLike,
        sig_shape: Sequence[int],
        dtype,
        nav_shape: Sequence[int] | None = None,
        num_frames: int | None = None,
        file_header_bytes: int = 0,
        frame_header_bytes: int = 0,
        frame_footer_bytes: int = 0,
        poll_interval: float = POLL_S,
    ) -> None:
        self.path = self.name = os.fspath(path)
        where = repr(self.path)
        self.sig_shape = check_shape(sig_shape, "sig_shape", where)
        self.stored = check_dtype(dtype, where)
        self.nav_shape, count = frame_count(nav_shape, num_frames, where)
        if count is None:
            raise DataSetError(
                f"{where}: a raw file says nothing of its scan; give nav_shape or num_frames"
            )
        self.num_frames = count
        self.file_header = check_bytes(file_header_bytes, "file_header_bytes", where)
        self.frame_header = check_bytes(frame_header_bytes, "frame_header_bytes", where)
        self.frame_footer = check_bytes(frame_footer_bytes, "frame_footer_bytes", where)
        self.frame_bytes = math.prod(self.sig_shape) * self.stored.itemsize
        self.stride = self.frame_header + self.frame_bytes + self.frame_footer
        # frames with headers or in a foreign byte order travel as bytes, decoded in tasks
        self.as_bytes = self.stride != self.frame_bytes or not self.stored.isnative
        self.poll_interval = float(poll_interval)
        self._fd: int | None = None
        self._followed: FollowedFile | None = None

    def open(self, timeout: float) -> Header:
        wait_for_file(self.path, timeout)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._followed = FollowedFile(self.path, os.fstat(self._fd))
        return Header(
            sig_shape=self.sig_shape,
            dtype=self.stored.newbyteorder("="),
            num_frames=self.num_frames,
            nav_shape=self.nav_shape,
            payload_shape=(self.stride,) if self.as_bytes else None,
            payload_dtype=np.dtype(np.uint8) if self.as_bytes else None,
            attrs={
                "format": "raw",
                "path": self.path,
                "dtype": self.stored.str,
                "file_header_bytes": self.file_header,
                "frame_header_bytes": self.frame_header,
                "frame_footer_bytes": self.frame_footer,
            },
        )

    def complete_frames(self, size: int) -> int:
        """Frames complete in a file of `size` bytes (the last frame may lack its footer)."""
        n, rest = divmod(max(0, size - self.file_header), self.stride)
        if n + 1 == self.num_frames and rest >= self.stride - self.frame_footer:
            n += 1
        return min(n, self.num_frames)

    def receive(self, sink: Sink) -> None:
        assert self._fd is not None and self._followed is not None
        per = max(1, min(self.num_frames, BATCH_BYTES // self.stride))
        if self.as_bytes:
            buf = np.empty((per, self.stride), np.uint8)
        else:
            buf = np.empty((per, *self.sig_shape), self.stored)
        done = 0
        while done < self.num_frames:
            if sink.cancelled:
                return
            ready = self.complete_frames(self._followed.stat().st_size)
            if ready <= done:
                time.sleep(self.poll_interval)
                continue
            while done < ready and not sink.cancelled:
                n = min(per, ready - done)
                self._read(done, buf[:n])
                sink.put(done, buf[:n])
                done += n

    def _read(self, first: int, out: np.ndarray) -> None:
        """Frames ``first, ...`` into `out`, with plain reads (the last frame's footer may
        be missing: zeros)."""
        assert self._fd is not None
        view = out.data.cast("B")
        offset = self.file_header + first * self.stride
        got = 0
        while got < len(view):
            n = os.preadv(self._fd, [view[got:]], offset + got)
            if n == 0:
                break
            got += n
        missing = len(view) - got
        if missing and not (first + len(out) == self.num_frames and missing <= self.frame_footer):
            raise AcquisitionError(
                f"{self.path!r}: frames {first}:{first + len(out)} end past the file's "
                f"{offset + got} bytes (truncated while it was read)"
            )
        view[got:] = bytes(missing)

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        if not self.as_bytes:
            return payloads
        pixels = payloads[:, self.frame_header : self.frame_header + self.frame_bytes]
        frames = np.ascontiguousarray(pixels).view(self.stored)
        return frames.reshape((-1, *self.sig_shape)).astype(self.stored.newbyteorder("="))

    def fileset(self, files: list[File]) -> tuple[FileSet, Decoder] | None:
        if not self.as_bytes:
            return None
        fileset = FileSet(files, self.sig_shape, self.stored, self.frame_header, self.frame_footer)
        return fileset, Decoder(self.stored)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
