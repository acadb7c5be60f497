"""Where the bytes of a dataset are: files, headers, and the layout of frames in them."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import math
import mmap
import os
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltdask import _config
from ltdask.exceptions import DataSetError
from ltdask.io.read_ranges import strided_read_ranges

#: what identifies one version of a file: ``(st_dev, st_ino, st_size, st_mtime_ns)``
Signature = tuple[int, int, int, int]


def signature_of(st: os.stat_result) -> Signature:
    """The `Signature` of a file's ``os.stat`` / ``os.fstat`` result."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_version(old: Signature, new: Signature) -> bool:
    """Whether the file with `new` is the version `old` was taken of: same inode, size and
    modification time. Device numbers are not compared: they are local to a machine, and
    differ between the hosts of a cluster that mount the same network file system."""
    return tuple(old[1:]) == tuple(new[1:])


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def stat_regular_file(path: str) -> os.stat_result:
    """``os.stat(path)``, or a `DataSetError` if `path` is not a regular file.

    Called before a file is opened: opening a FIFO blocks until someone writes to it, and
    reading a device such as ``/dev/zero`` never ends.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        `path` is a directory, FIFO, device or socket, or cannot be examined.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path!r} does not exist") from None
    except OSError as e:
        raise DataSetError(f"cannot examine {path!r}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataSetError(f"{path!r} is {_kind(st.st_mode)}; expected a regular file")
    return st


def describe_change(old: Signature, new: Signature, mode: int | None = None) -> str:
    """How the file `new` (of ``st_mode`` `mode`) differs from the file `old`, for messages."""
    if mode is not None and not stat.S_ISREG(mode):
        return f"it was replaced by {_kind(mode)}"
    if old[1] != new[1]:
        return "it was replaced by another file"
    if old[2] != new[2]:
        return f"its size went from {old[2]} to {new[2]} bytes"
    return "it was modified"


def changed_error(
    path: str, old: Signature, new: Signature, mode: int | None = None
) -> DataSetError:
    how = describe_change(old, new, mode)
    return DataSetError(f"{path!r} changed since it was opened ({how}); open it again")


@dataclass(frozen=True)
class File:
    """One file of a scan: frames ``first_frame .. first_frame + num_frames`` of the stream.

    `signature` identifies the version of the file that was opened (see `Signature`); a
    `FileSet` fills it in where a format leaves it out.
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
        return int(np.searchsorted(self.table[:, 0], frame, side="right") - 1)

    def straight_view(self, buffers: MappedFiles, file_idx: int) -> np.ndarray | None:
        """All frames of one file as a ``(n, *sig)`` view of its bytes, or None when the
        layout does not allow a view (packed pixels, misaligned headers)."""
        dt = self.native_dtype
        item = dt.itemsize
        f = self.files[file_idx]
        if self.bits_per_px != item * 8 or not dt.isnative and item > 1:
            return None
        if (
            (self.frame_stride % item)
            or (f.header_bytes % item)
            or (self.frame_header_bytes % item)
        ):
            return None
        raw = buffers[file_idx]
        stride_px = self.frame_stride // item
        start = f.header_bytes // item + self.frame_header_bytes // item
        frame_px = math.prod(self.sig_shape)
        n = f.num_frames
        if n == 0:
            return np.empty((0, *self.sig_shape), dtype=dt)
        # the last frame may end before a full stride (no footer after it is fine)
        nbytes = f.header_bytes + self.frame_header_bytes + (n - 1) * self.frame_stride
        flat = np.frombuffer(raw[: nbytes + self.frame_bytes], dtype=dt)
        view = np.lib.stride_tricks.as_strided(
            flat[start:], shape=(n, frame_px), strides=(stride_px * item, item), writeable=False
        )
        return view.reshape((n, *self.sig_shape))

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


class MappedFiles:
    """Read-only memory maps of a file set's files, opened on first use (in the task)."""

    def __init__(self, fileset: FileSet):
        self._fileset = fileset
        self._maps: dict[int, np.ndarray] = {}
        self._needed: np.ndarray | None = None

    def __getitem__(self, idx: int) -> np.ndarray:
        idx = int(idx)
        buf = self._maps.get(idx)
        if buf is None:
            if self._needed is None:
                self._needed = self._fileset.bytes_needed()
            f = self._fileset.files[idx]
            buf = self._maps[idx] = map_file(f.path, int(self._needed[idx]), f.signature)
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


#: whether maps made in this context go into the `MapCache` (see `keeping_maps`)
_KEEP_MAPS: contextvars.ContextVar[bool] = contextvars.ContextVar("ltdask_keep_maps", default=False)


@contextlib.contextmanager
def keeping_maps(keep: bool = True):
    """Within the block (in this thread), files mapped by `map_file` are kept in the
    `MapCache`: UDF runs over files that an earlier run read set this."""
    token = _KEEP_MAPS.set(keep)
    try:
        yield
    finally:
        _KEEP_MAPS.reset(token)


def map_file(path: str, min_bytes: int = 0, signature: Signature | None = None) -> np.ndarray:
    """The whole file as a read-only uint8 array backed by a memory map.

    A map kept in the `MapCache` is reused; a new map is kept there inside
    `keeping_maps` (a fresh map has to fault in every page again, which costs about as
    much CPU time as summing the data). Maps are kept by `Signature`, so a changed file is
    never served from an old map.

    Raises a `DataSetError` if the file is not the version with `signature` (it changed
    since the dataset was opened), if it now has fewer than `min_bytes` bytes, or if it is
    not a regular file.
    """
    try:
        # O_NONBLOCK: a FIFO put in the file's place must not block the task (regular files
        # ignore the flag)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError as e:
        raise DataSetError(f"cannot read {path!r}: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        now = signature_of(st)
        if signature is not None and not same_version(signature, now):
            raise changed_error(path, tuple(signature), now, st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            raise DataSetError(f"{path!r} is {_kind(st.st_mode)}; expected a regular file")
        size = st.st_size
        if size < min_bytes:
            raise DataSetError(
                f"{path!r} has {size} bytes, but the dataset was opened with frames up to "
                f"byte {min_bytes}; was the file truncated or replaced since? Open it again"
            )
        if size == 0:
            return np.empty(0, dtype=np.uint8)
        key = (path, *now)
        cached = MAPS.get(key)
        if cached is not None:
            return cached
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise DataSetError(f"cannot read {path!r}: {e.strerror or e}") from e
    finally:
        os.close(fd)
    buf = np.frombuffer(mm, dtype=np.uint8)
    return MAPS.put(key, buf) if _KEEP_MAPS.get() else buf


class MapCache:
    """Memory maps of files kept for reuse, up to ``ltdask.map-cache-bytes`` of files.

    Pages a reused map has touched stay mapped, so later reads of page-cached data run at
    memory speed instead of faulting every page in again (up to twice as fast). They count
    in the process's RSS (as file-backed page cache the system can reclaim), so maps are
    only kept for files that are read again: from the second UDF run over a dataset on
    (`keeping_maps`); a scan read once leaves nothing mapped. dask.distributed judges
    workers by RSS, so ``auto`` keeps no maps in a distributed worker. Evicting a map only
    drops the reference: it goes away with its last view.
    """

    def __init__(self):
        self._maps: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            buf = self._maps.get(key)
            if buf is not None:
                self._maps.move_to_end(key)
            return buf

    def put(self, key, buf: np.ndarray) -> np.ndarray:
        limit = _config.map_cache_bytes()
        if limit <= 0 or buf.nbytes > limit:
            return buf
        with self._lock:
            buf = self._maps.setdefault(key, buf)
            total = sum(b.nbytes for b in self._maps.values())
            while total > limit and len(self._maps) > 1:
                _, old = self._maps.popitem(last=False)
                total -= old.nbytes
            return buf

    def clear(self):
        with self._lock:
            self._maps.clear()


MAPS = MapCache()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=MAPS.clear)
