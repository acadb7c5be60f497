"""The process-wide cache of memory maps: files mapped by `map_file` are kept for reuse
(up to ``ltdask.map-cache-bytes``) while `keeping_maps` is on, keyed by the version of the
file (its `Signature`), so a changed file is never served from an old map. In a
``distributed`` worker with a memory limit, kept maps give their pages back whenever the
worker's RSS is above ``ltdask.worker-map-fraction`` of that limit (`MapCache.trim`)."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import mmap
import os
import stat
import threading

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.checks import Signature, changed_error, file_kind, same_version, signature_of
from ltdask.runtime import settings

#: whether maps made in this context go into the `MapCache` (see `keeping_maps`)
_KEEP_MAPS: contextvars.ContextVar[bool] = contextvars.ContextVar("ltdask_keep_maps", default=False)


@contextlib.contextmanager
def keeping_maps(keep: bool = True):
    """Within the block (in this thread), files mapped by `map_file` are kept in the
    `MapCache`: UDF runs over files that an earlier run read set this. Leaving it, a
    worker's kept maps are trimmed to its budget (`MapCache.trim`)."""
    token = _KEEP_MAPS.set(keep)
    try:
        yield
    finally:
        _KEEP_MAPS.reset(token)
        MAPS.trim()


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
            # the task about to read it starts from a worker's budget
            MAPS.trim()
            return cached
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        _advise_huge_pages(mm)
    except OSError as e:
        raise DataSetError(f"cannot read {path!r}: {e.strerror or e}") from e
    finally:
        os.close(fd)
    buf = np.frombuffer(mm, dtype=np.uint8)
    if not _KEEP_MAPS.get():
        return buf
    buf = MAPS.put(key, buf, mm)
    MAPS.trim()
    return buf


#: how much of a map `MapCache.trim` gives back at a time (a multiple of 2 MiB: whole
#: huge pages)
RELEASE_BYTES = 32 * 2**20


class MapCache:
    """Memory maps of files kept for reuse, up to ``ltdask.map-cache-bytes`` of files.

    Pages a reused map has touched stay mapped, so later reads of page-cached data run at
    memory speed instead of faulting every page in again (up to twice as fast). They count
    in the process's RSS (as file-backed page cache the system can reclaim), so maps are
    only kept for files that are read again: from the second UDF run over a dataset on
    (`keeping_maps`); a scan read once leaves nothing mapped. An evicted map gives its
    pages back at once (``MADV_DONTNEED``; views of it in use stay valid and fault their
    pages in again), and is unmapped with its last view.

    dask.distributed judges a worker by its RSS (spill, pause and restart thresholds), so
    in a worker with a memory limit the maps are bounded by what they hold resident, not
    by file size: `trim` keeps the worker's RSS at ``ltdask.worker-map-fraction`` of its
    limit.
    """

    def __init__(self):
        #: key -> (the map as a uint8 array, its mmap)
        self._maps: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            entry = self._maps.get(key)
            if entry is None:
                return None
            self._maps.move_to_end(key)
            return entry[0]

    def put(self, key, buf: np.ndarray, mm: mmap.mmap | None = None) -> np.ndarray:
        limit = settings.map_cache_bytes()
        if limit <= 0 or buf.nbytes > limit:
            return buf
        with self._lock:
            buf = self._maps.setdefault(key, (buf, mm))[0]
            self._maps.move_to_end(key)
            total = sum(b.nbytes for b, _ in self._maps.values())
            while total > limit and len(self._maps) > 1:
                _, (old, old_mm) = self._maps.popitem(last=False)
                _release(old_mm, 0, old.nbytes)
                total -= old.nbytes
            return buf

    def trim(self) -> None:
        """In a ``distributed`` worker with a memory limit: give back pages of kept maps
        until the process's RSS is within ``settings.worker_map_budget`` -- the least
        recently used map first, each from its start, `RELEASE_BYTES` at a time. The maps
        stay kept (their pages fault in again when read). Releasing from the start keeps
        the end of a map resident, so scans over more than the budget still find that
        share of their pages mapped run after run (a least-recently-used order of pages
        would find none); a cheap no-op elsewhere.
        """
        if not self._maps:
            return
        budget = settings.worker_map_budget()
        if budget is None:
            return
        with self._lock:
            rss = settings.resident_bytes()
            if rss is None or rss <= budget:
                return
            for buf, mm in self._maps.values():
                for start in range(0, buf.nbytes, RELEASE_BYTES):
                    _release(mm, start, min(RELEASE_BYTES, buf.nbytes - start))
                    rss = settings.resident_bytes()
                    if rss is None or rss <= budget:
                        return

    def clear(self):
        with self._lock:
            self._maps.clear()


def _advise_huge_pages(mm: mmap.mmap) -> None:
    """Ask the kernel to back the map with 2 MiB pages where it can (``MADV_HUGEPAGE``).

    A page-cached file held in large folios -- as a file written with ``write()`` or read
    from disk is, on filesystems with large-folio support (XFS; ext4 from Linux 6.16) --
    is then mapped 2 MiB per page fault instead of 4-64 KiB: touching 2 GiB costs about
    10 ms of kernel time instead of about 200 ms. It also makes the pages this map reads
    from disk enter the page cache as 2 MiB folios, so later first passes (in any process,
    and in every ``distributed`` worker that keeps no maps) find them so. Kernels without
    the advice, or with transparent huge pages off, ignore it.
    """
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or len(mm) < 2 * 2**20:
        return
    try:
        mm.madvise(advice)
    except (OSError, ValueError):
        pass


def _release(mm: mmap.mmap | None, start: int, length: int) -> None:
    """Unmap the pages of ``mm[start:start + length]`` from this process (its RSS falls at
    once); the data stays in the page cache and the map stays valid."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if mm is None or dontneed is None or length <= 0:
        return
    try:
        mm.madvise(dontneed, start, length)
    except (OSError, ValueError):
        pass


MAPS = MapCache()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=MAPS.clear)
