"""Where the bytes of a dataset are: files, headers, and the layout of frames in them."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ltdask.io.checks import Signature, signature_of, stat_regular_file
from ltdask.io.maps import map_file
from ltdask.io.read_ranges import strided_read_ranges

__all__ = ["File", "FileBuffers", "FileSet", "MappedFiles", "with_signatures"]


@dataclass(frozen=True)
class File:
    """One file of a scan: frames ``first_frame .. first_frame + num_frames`` of the stream.

    `signature` identifies the version of the file that was opened (see `Signature`); a
    `FileSet` fills it in where a format leaves it out.

    Examples
    --------
    >>> f = File("scan_001.raw", first_frame=100, num_frames=50, header_bytes=512)
    >>> f.first_frame + f.num_frames, f.signature  # its frames end; no signature yet
    (150, None)
    """

    path: str
    first_frame: int
    num_frames: int
    header_bytes: int = 0
    signature: Signature | None = None


class FileSet:
    """Files that together hold a stream of equally sized frames.

    Parameters
    ----------
    files
        In stream order, without gaps.
    sig_shape
        Shape of one frame.
    native_dtype
        dtype of the pixels in the files (either byte order).
    frame_header_bytes, frame_footer_bytes
        Bytes before / after each frame's pixels.
    bits_per_px
        Bits of one stored pixel; ``8 * itemsize`` unless the format packs pixels.

    Each file's `Signature` is recorded here (if its `File` has none yet): tasks refuse to
    read a file that changed since, as its layout would no longer be the one described.

    Examples
    --------
    A file of 6 frames of 4 x 5 big-endian uint16 pixels, each behind an 8-byte header, after
    a 16-byte file header:

    >>> import numpy as np, tempfile, os
    >>> frames = np.arange(6 * 4 * 5, dtype=">u2").reshape(6, 4, 5)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(16) + b"".join(bytes(8) + fr.tobytes() for fr in frames))
    >>> fs = FileSet([File(path, 0, 6, header_bytes=16)], (4, 5), ">u2", frame_header_bytes=8)
    >>> fs.image_count, fs.frame_bytes, fs.frame_stride, fs.files[0].signature is not None
    (6, 40, 48, True)

    `FileDataSet` reads it (with a `Decoder` of the pixels' dtype).
    """

    def __init__(
        self,
        files: Sequence[File],
        sig_shape: Sequence[int],
        native_dtype,
        frame_header_bytes: int = 0,
        frame_footer_bytes: int = 0,
        bits_per_px: int | None = None,
    ):
        self.files = tuple(with_signatures(files))
        self.sig_shape = tuple(int(s) for s in sig_shape)
        self.native_dtype = np.dtype(native_dtype)
        self.frame_header_bytes = int(frame_header_bytes)
        self.frame_footer_bytes = int(frame_footer_bytes)
        self.bits_per_px = int(bits_per_px or self.native_dtype.itemsize * 8)
        self.table = np.array(
            [(f.first_frame, f.first_frame + f.num_frames, f.header_bytes) for f in self.files],
            dtype=np.int64,
        ).reshape(len(self.files), 3)

    @property
    def image_count(self) -> int:
        return int(self.table[-1, 1]) if len(self.files) else 0

    @property
    def frame_bytes(self) -> int:
        return (math.prod(self.sig_shape) * self.bits_per_px) // 8

    @property
    def frame_stride(self) -> int:
        return self.frame_header_bytes + self.frame_bytes + self.frame_footer_bytes

    def base_shape(self) -> tuple[int, ...] | None:
        """The signal extent every tile's must be a multiple of, where the layout of the
        stored frames asks for one (`ltdask.io.dataset.DataSet.get_base_shape`); None:
        the dataset's default (whole rows)."""
        return None

    def read_ranges(self, frames: np.ndarray, depth: int, slices: np.ndarray):
        """``(tiles, ranges)`` for `frames` (stream indices, -1 = empty slot); see
        :func:`ltdask.io.read_ranges.strided_read_ranges`."""
        return strided_read_ranges(
            np.ascontiguousarray(frames, dtype=np.int64),
            int(depth),
            slices,
            self.table,
            np.array(self.sig_shape, dtype=np.int64),
            self.bits_per_px,
            self.frame_header_bytes,
            self.frame_footer_bytes,
        )

    def file_index(self, frame: int) -> int:
        return bisect.bisect_right(self._first_frames, frame) - 1

    @functools.cached_property
    def _first_frames(self) -> list[int]:
        # (a list: `bisect` on it is 10x faster than `np.searchsorted` on the table, and
        # a partition of a Velox file asks for each of its ten runs of chunks twice)
        return self.table[:, 0].tolist()

    def _pixels_are_items(self, file_idx: int) -> bool:
        """Whether the pixels of file `file_idx` are native items of the file's dtype at
        item-aligned offsets (no packing, no byte swap, headers of whole items)."""
        dt = self.native_dtype
        item = dt.itemsize
        if self.bits_per_px != item * 8 or not dt.isnative and item > 1:
            return False
        header = self.files[file_idx].header_bytes
        return not (self.frame_stride % item or header % item or self.frame_header_bytes % item)

    def straight_view(self, buffers: FileBuffers, file_idx: int) -> np.ndarray | None:
        """All frames of one file as a ``(n, *sig)`` view of its bytes, or None when the
        layout does not allow a view (packed pixels, misaligned headers)."""
        if not self._pixels_are_items(file_idx):
            return None
        dt = self.native_dtype
        item = dt.itemsize
        f = self.files[file_idx]
        raw = buffers[file_idx]
        stride_px = self.frame_stride // item
        start = f.header_bytes // item + self.frame_header_bytes // item
        frame_px = math.prod(self.sig_shape)
        n = f.num_frames
        if n == 0:
            return np.empty((0, *self.sig_shape), dtype=dt)
        if stride_px == frame_px:  # frames back to back: a plain view (as_strided is slow)
            flat = np.frombuffer(raw, dtype=dt, count=n * frame_px, offset=start * item)
            return flat.reshape((n, *self.sig_shape))
        # the last frame may end before a full stride (no footer after it is fine)
        nbytes = f.header_bytes + self.frame_header_bytes + (n - 1) * self.frame_stride
        flat = np.frombuffer(raw[: nbytes + self.frame_bytes], dtype=dt)
        view = np.lib.stride_tricks.as_strided(
            flat[start:], shape=(n, frame_px), strides=(stride_px * item, item), writeable=False
        )
        return view.reshape((n, *self.sig_shape))

    def record_rows(self, buffers: FileBuffers, file_idx: int) -> tuple[np.ndarray, int] | None:
        """All frame records of one file as a C-contiguous ``(n, frame_stride / itemsize)``
        view (each row a frame's header, pixels and footer) and where the pixels start in a
        row; None when the layout does not allow it, or the file ends before the last
        record's footer. Frames with headers or footers between them are no C-contiguous
        ``(n, pixels)`` array, but their rows are: kernels read ``rows[:, p0:p1]``."""
        if not self._pixels_are_items(file_idx):
            return None
        dt = self.native_dtype
        item = dt.itemsize
        f = self.files[file_idx]
        raw = buffers[file_idx]
        end = f.header_bytes + f.num_frames * self.frame_stride
        if f.num_frames == 0 or raw.size < end:
            return None
        rows = np.frombuffer(raw[f.header_bytes : end], dtype=dt)
        return rows.reshape(
            f.num_frames, self.frame_stride // item
        ), self.frame_header_bytes // item

    def bytes_needed(self) -> np.ndarray:
        """The size each entry of `files` needs for its frames (a file that shrank after
        opening must not be read past its end: that reads other memory or crashes)."""
        t = self.table
        n = t[:, 1] - t[:, 0]
        last_frame_end = self.frame_header_bytes + self.frame_bytes
        needed = t[:, 2] + np.maximum(n - 1, 0) * self.frame_stride + (n > 0) * last_frame_end
        paths = [f.path for f in self.files]
        if len(set(paths)) < len(paths):  # runs in one file (HDF5 chunks): the furthest counts
            furthest: dict[str, int] = {}
            for path, end in zip(paths, needed.tolist(), strict=True):
                furthest[path] = max(furthest.get(path, 0), end)
            needed = np.array([furthest[path] for path in paths], dtype=np.int64)
        return needed

    @functools.cached_property
    def needed(self) -> np.ndarray:
        """`bytes_needed`, worked out once per file set (every task opens its files)."""
        return self.bytes_needed()

    def open(self) -> MappedFiles:
        return MappedFiles(self)

    def signatures(self) -> tuple[tuple[str, Signature | None], ...]:
        """``(path, signature)`` of every distinct file, in order (for dask tokens)."""
        return tuple({f.path: f.signature for f in self.files}.items())

    def __dask_tokenize__(self):
        return (
            "ltdask.FileSet",
            self.signatures(),
            self.table.tobytes(),
            self.sig_shape,
            self.native_dtype.str,
            self.frame_header_bytes,
            self.frame_footer_bytes,
            self.bits_per_px,
        )


class FileBuffers(Protocol):
    """The bytes of a file set's files by index, as decoders read them (`MappedFiles`)."""

    def __getitem__(self, idx: int) -> np.ndarray: ...


class MappedFiles:
    """Read-only memory maps of a file set's files, opened on first use (in the task)."""

    def __init__(self, fileset: FileSet):
        self._fileset = fileset
        self._maps: dict[int, np.ndarray] = {}

    def __getitem__(self, idx: int) -> np.ndarray:
        idx = int(idx)
        buf = self._maps.get(idx)
        if buf is None:
            f = self._fileset.files[idx]
            needed = int(self._fileset.needed[idx])
            buf = self._maps[idx] = map_file(f.path, needed, f.signature)
        return buf


def with_signatures(files: Sequence[File]) -> list[File]:
    """`files` with the current `Signature` of each file where it has none (one ``os.stat``
    per distinct path)."""
    found: dict[str, Signature] = {}
    out = []
    for f in files:
        if f.signature is None:
            sig = found.get(f.path)
            if sig is None:
                sig = found[f.path] = signature_of(stat_regular_file(f.path))
            f = dataclasses.replace(f, signature=sig)
        out.append(f)
    return out
