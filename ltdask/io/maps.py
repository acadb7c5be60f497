"""The process-wide cache of memory maps: files mapped by `map_file` are kept for reuse
(up to ``ltdask.map-cache-bytes``) while `keeping_maps` is on, keyed by the version of the
file (its `Signature`), so a changed file is never served from an old map."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import mmap
import os
import stat
import threading

import numpy as np

from ltdask import _config
from ltdask.exceptions import DataSetError
from ltdask.io.checks import Signature, changed_error, file_kind, same_version, signature_of

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
            raise changed_error(path, signature, now, st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            raise DataSetError(f"{path!r} is {file_kind(st.st_mode)}; expected a regular file")
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
