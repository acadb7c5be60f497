"""Partition buffers kept for the next partitions and the next acquisitions of the process.

A receiver writes every frame into a partition buffer. A buffer the process has not
written before costs its pages on the first write: the kernel zeroes each (on a virtual
machine that gives freed memory back to its host, it is fetched from the host again), and
that costs more than receiving the frame into it. A process at the microscope records scan
after scan, so the buffers of a partition that has been processed go to this pool, and the
next partition, of this acquisition or of a later one, takes them back, written into
before. LiberTEM-live's receivers do the same with a shared-memory pool that lives as long
as their context.

The pool keeps at most `kept_bytes` (an eighth of ``ltdask.acquire-memory``, the memory an
acquisition may hold in flight): a buffer given back beyond that lets the oldest go.
"""

from __future__ import annotations

import threading

import numpy as np

from ltdask.runtime import settings

_lock = threading.Lock()
#: the free buffers, oldest first
_free: list[np.ndarray] = []


def kept_bytes() -> int:
    """The bytes of free buffers the pool keeps."""
    return settings.acquire_memory() // 8


def take(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """A free buffer of `shape` and `dtype` (its contents those of an earlier partition),
    else None."""
    dtype = np.dtype(dtype)
    with _lock:
        for i in range(len(_free) - 1, -1, -1):  # (the last given back: warmest in cache)
            buf = _free[i]
            if buf.shape == shape and buf.dtype == dtype:
                return _free.pop(i)
    return None


def give(buf: np.ndarray) -> None:
    """Keep `buf` (no longer used) for a later `take`; the oldest buffers go beyond
    `kept_bytes`."""
    limit = kept_bytes()
    with _lock:
        if any(b is buf for b in _free):
            return  # (given back twice: two partitions must never share it)
        _free.append(buf)
        held = sum(b.nbytes for b in _free)
        while _free and held > limit:
            held -= _free.pop(0).nbytes


def held() -> int:
    """Bytes in free buffers."""
    with _lock:
        return sum(b.nbytes for b in _free)


def clear() -> None:
    """Let every free buffer go."""
    with _lock:
        _free.clear()
