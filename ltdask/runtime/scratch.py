"""Scratch arrays of a partition task, recycled by the thread that runs the next one.

Per-pixel state that lives only while a partition is processed (running means and sums
of squares, integer accumulators: a few arrays of a frame's size each) and the buffer that
tiles are decoded into would otherwise be new memory for every partition: fresh pages,
each faulted in and zeroed by the kernel when first written, worst in a distributed
worker, whose nanny sets ``MALLOC_TRIM_THRESHOLD_`` (so glibc maps every block of 128 KiB
or more afresh); what that cost is in docs/performance.md. :func:`zeros` and
:func:`empty` hand out arrays that the same thread's previous task gave back; the runner
wraps each partition task in :func:`task`, which takes back every array handed out inside
it.

Only code that keeps nothing it got here past its task (its ``postprocess`` copies the
state into the result buffers; tiles are valid only while they are processed) may use it:
ltdask's own UDFs, the shared tile statistics (:mod:`ltdask.udf.shared`), the decode and
correction buffers of the read path.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: bytes of free arrays a thread keeps for its next task; more are let go
KEEP_BYTES = 64 * 2**20

_local = threading.local()


class _Pool:
    __slots__ = ("free", "lent", "depth")

    def __init__(self) -> None:
        self.free: dict[tuple, list[np.ndarray]] = {}
        self.lent: list[np.ndarray] = []
        self.depth = 0


def _pool() -> _Pool:
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = _Pool()
    return pool


def zeros(n: int, dtype=np.float64) -> np.ndarray:
    """``np.zeros(n, dtype)``, from the arrays this thread's earlier tasks gave back
    where there is one (inside :func:`task`; a new array outside it)."""
    return _lend(n, dtype, np.zeros, zero=True)


def empty(n: int, dtype=np.float64) -> np.ndarray:
    """``np.empty(n, dtype)`` (whatever an earlier task left in it), as :func:`zeros`."""
    return _lend(n, dtype, np.empty, zero=False)


def _lend(n: int, dtype, make, zero: bool) -> np.ndarray:
    pool = _pool()
    dtype = np.dtype(dtype)
    if not pool.depth:
        return make(n, dtype)
    free = pool.free.get((n, dtype))
    if free:
        arr = free.pop()
        if zero:
            arr.fill(0)
    else:
        arr = make(n, dtype)
    pool.lent.append(arr)
    return arr


@contextmanager
def task() -> Iterator[None]:
    """Take back, at the end, every array :func:`zeros` and :func:`empty` hand out inside
    (nested: the outermost one takes them back)."""
    pool = _pool()
    pool.depth += 1
    try:
        yield
    finally:
        pool.depth -= 1
        if not pool.depth:
            kept = sum(a.nbytes for free in pool.free.values() for a in free)
            for arr in pool.lent:
                if kept + arr.nbytes <= KEEP_BYTES:
                    pool.free.setdefault((arr.size, arr.dtype), []).append(arr)
                    kept += arr.nbytes
            pool.lent.clear()


__all__ = ["KEEP_BYTES", "empty", "task", "zeros"]
