"""The frames of an acquisition between the receiver thread and the partition tasks.

The receiver `put`s frames by their scan index; a partition task `take`s its range when
every frame of it has arrived (or the acquisition has ended: frames that never came are
zeros, and `missing` says which). Frames live in one buffer per partition, in memory up to
the store's bound and then in a scratch file, so that a compute that falls behind the
detector costs disk, never a dropped frame; a buffer is let go when its partition is
taken. A frame is taken once: an acquisition is processed by one run (record it with
``record=`` to process it again).
"""

from __future__ import annotations

import bisect
import mmap
import os
import tempfile
import threading
import time
from collections.abc import Sequence

import numpy as np

from ltdask.acquire import pool
from ltdask.exceptions import DataSetError


class AcquisitionError(DataSetError):
    """A stream or growing file that broke off or sent what its header did not announce."""


class FrameStore:
    """Frames ``0 .. num_frames`` of one acquisition, in buffers per partition.

    Parameters
    ----------
    starts
        The first frame of each partition, ascending from 0 (the last ends at
        `num_frames`).
    num_frames
        The frames of the scan.
    payload_shape, payload_dtype
        One frame as the source stores it.
    memory_limit
        Bytes of partition buffers held in memory; further buffers go to a scratch file
        in `spill_dir` (default: the system's temporary directory).
    name
        The acquisition's name, for messages.

    Examples
    --------
    >>> import numpy as np
    >>> store = FrameStore([0, 2], 4, (3,), np.uint8, memory_limit=2**20, name="demo")
    >>> store.put(0, np.ones((3, 3), np.uint8))
    >>> store.finish()
    >>> frames, arrived = store.take(2, 4)
    >>> frames.tolist(), arrived.tolist()
    ([[1, 1, 1], [0, 0, 0]], [True, False])
    """

    def __init__(
        self,
        starts: Sequence[int],
        num_frames: int,
        payload_shape: tuple[int, ...],
        payload_dtype,
        memory_limit: int,
        name: str = "acquisition",
        spill_dir: str | None = None,
    ) -> None:
        self.starts = [int(s) for s in starts]
        self.stops = [*self.starts[1:], int(num_frames)]
        self.num_frames = int(num_frames)
        self.payload_shape = tuple(payload_shape)
        self.payload_dtype = np.dtype(payload_dtype)
        self.frame_bytes = int(np.prod(self.payload_shape)) * self.payload_dtype.itemsize
        self.memory_limit = int(memory_limit)
        self.name = name
        self.spill_dir = spill_dir
        self._cond = threading.Condition()
        self._buffers: dict[int, np.ndarray] = {}
        self._spilled: set[int] = set()
        self.arrived = np.zeros(self.num_frames, dtype=bool)
        self._taken = np.zeros(len(self.starts), dtype=bool)
        #: frames arrived per partition (a list: the receiver adds to it per frame)
        self._count = [0] * len(self.starts)
        self._last = 0  # the partition of the last frame put
        #: the partition whose rows the source receives into (`slots`), if any
        self._lent: int | None = None
        #: bytes of partition buffers in memory now, and the most there were at once
        self.memory = 0
        self.peak_memory = 0
        #: frames that went to the scratch file, duplicates and frames past the scan
        self.spilled_frames = 0
        self.duplicates = 0
        self.overflow = 0
        #: frames of partitions processed already (they came after the acquisition ended)
        self.late = 0
        #: frames arrived so far (each counted once)
        self.received = 0
        self.ended = False
        self.error: BaseException | None = None
        self._cancelled = threading.Event()
        #: time.monotonic() of the first frame's arrival (None before)
        self.first_arrival: float | None = None

    # -- the receiver's side -------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def put(self, first: int, payloads: np.ndarray, used=None) -> None:
        """Store frames ``first, first + 1, ...`` (see `ltdask.acquire.source.Sink`)."""
        if used is not None and len(self.payload_shape) != 1:
            raise AcquisitionError(f"{self.name}: used= is for payloads of one dimension")
        if payloads.shape[1:] != self.payload_shape:
            payloads = np.asarray(payloads).reshape((-1, *self.payload_shape))
        k = len(payloads)
        index, done = int(first), 0
        if index < 0:
            raise AcquisitionError(f"{self.name}: a frame index of {index}: expected >= 0")
        with self._cond:
            if self.first_arrival is None and k:
                self.first_arrival = time.monotonic()
            while done < k:
                if index >= self.num_frames:
                    self.overflow += k - done
                    break
                p = self._partition(index)
                n = min(k - done, self.stops[p] - index)
                if self._taken[p]:  # (its task has run: a copy, or a frame after the end)
                    twice = int(self.arrived[index : index + n].sum())
                    self.duplicates += twice
                    self.late += n - twice
                else:
                    part = None if used is None else used[done : done + n]
                    self._store(p, index, payloads[done : done + n], part)
                index += n
                done += n

    def slots(self, first: int, count: int) -> np.ndarray | None:
        """Rows of the store's buffer for frames ``first ..`` (at most `count`, up to the
        first that has arrived and the end of its partition), for the source to receive
        into and `put` where they are (no copy); None where frame `first` has arrived, is
        past the scan or its partition was taken. Until the source calls `release` (or
        asks for other rows), a `take` of that partition at the acquisition's end waits
        for it: the source may be writing there."""
        with self._cond:
            if not 0 <= first < self.num_frames or self.arrived[first]:
                return None
            p = self._partition(first)
            if self._taken[p]:
                return None
            stop = min(self.stops[p], first + max(1, int(count)))
            came = np.flatnonzero(self.arrived[first:stop])
            stop = first + int(came[0]) if came.size else stop
            buf = self._buffer(p)
            self._lent = p
            self._cond.notify_all()
            local = first - self.starts[p]
            return buf[local : local + stop - first]

    def release(self) -> None:
        """The source no longer writes into the rows of `slots`."""
        with self._cond:
            self._lent = None
            self._cond.notify_all()

    def _partition(self, index: int) -> int:
        """The partition of frame `index` (the lock is held)."""
        p = self._last
        if not self.starts[p] <= index < self.stops[p]:
            p = self._last = bisect.bisect_right(self.starts, index) - 1
        return p

    def _store(self, p: int, index: int, frames: np.ndarray, used=None) -> None:
        """Frames ``index ..`` of partition `p` into its buffer (the lock is held); of
        each only its `used` leading elements where given."""
        buf = self._buffers.get(p)
        if buf is None:
            buf = self._buffer(p, sparse=used is not None)
        local = index - self.starts[p]
        n = len(frames)
        if used is not None:
            new = ~self.arrived[index : index + n]
            fresh = int(new.sum())
            self.duplicates += n - fresh
            for i in np.flatnonzero(new):
                u = int(used[i])
                buf[local + i, :u] = frames[i, :u]
            self.arrived[index : index + n] = True
        elif n == 1:  # (the common case of a detector stream: one frame at a time, fast)
            if self.arrived[index]:
                self.duplicates += 1
                return
            if not _same_memory(buf[local : local + 1], frames):
                buf[local] = frames[0]
            self.arrived[index] = True
            fresh = 1
        else:
            seen = self.arrived[index : index + n]
            new = ~seen
            fresh = int(new.sum())
            self.duplicates += n - fresh
            if fresh == n:
                if not _same_memory(buf[local : local + n], frames):
                    buf[local : local + n] = frames
            else:  # a duplicate keeps the frame that came first
                buf[local : local + n][new] = frames[new]
            seen[:] = True
        self._count[p] += fresh
        self.received += fresh
        if self._count[p] == self.stops[p] - self.starts[p]:
            self._cond.notify_all()

    def finish(self, error: BaseException | None = None) -> None:
        """The acquisition's end (with the error that ended it, if any): tasks waiting for
        frames that never came get zeros."""
        with self._cond:
            self.ended = True
            if error is not None and self.error is None:
                self.error = error
            self._cond.notify_all()

    def cancel(self) -> None:
        """Ask the receiver to stop (`cancelled`), and end the acquisition."""
        self._cancelled.set()
        self.finish()

    def _buffer(self, p: int, sparse: bool = False) -> np.ndarray:
        buf = self._buffers.get(p)
        if buf is None:
            shape = (self.stops[p] - self.starts[p], *self.payload_shape)
            nbytes = shape[0] * self.frame_bytes
            if self.memory + nbytes > self.memory_limit and self.memory > 0:
                buf = self._spill(shape)
                self._spilled.add(p)
                self.spilled_frames += shape[0]
            else:
                buf = self._reused(shape, sparse)
                self.memory += nbytes
                self.peak_memory = max(self.peak_memory, self.memory)
            self._buffers[p] = buf
        return buf

    def _reused(self, shape, sparse: bool = False) -> np.ndarray:
        """A buffer given back (`recycle`) of `shape`, by this store or an earlier one
        (:mod:`ltdask.acquire.pool`), else a new one: a new one's pages are faulted in as
        the frames are written, about 10 us a frame of 8 KiB. `sparse`
        (payloads of which only a leading part is written): a new one is an anonymous
        memory map, whose pages cost only where written (numpy asks for 2 MiB huge pages
        for large arrays, which the kernel zeroes whole on the first write to each)."""
        buf = pool.take(shape, self.payload_dtype)
        if buf is not None:
            return buf
        if sparse:
            pages = mmap.mmap(-1, max(1, int(np.prod(shape)) * self.payload_dtype.itemsize))
            return np.frombuffer(pages, self.payload_dtype, int(np.prod(shape))).reshape(shape)
        return np.zeros(shape, dtype=self.payload_dtype)

    def recycle(self, payloads: np.ndarray) -> None:
        """Give back a buffer that `take` returned, once nothing uses it any more (its
        frames decoded into other memory), for the partitions to come (of this
        acquisition and the next ones: :mod:`ltdask.acquire.pool`)."""
        base = payloads.base
        if isinstance(base, np.ndarray) and base.base is not None:
            base = base.base  # (a sparse buffer: a view of the array over its memory map)
        own = base is None or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))
        if type(payloads) is np.ndarray and own and payloads.flags.writeable:
            pool.give(payloads)

    def _spill(self, shape) -> np.ndarray:
        """A zeroed buffer in a scratch file (gone from the directory at once: it lives as
        long as the mapping)."""
        with tempfile.TemporaryFile(dir=self.spill_dir, prefix="ltdask-acquire-") as f:
            nbytes = max(1, int(np.prod(shape)) * self.payload_dtype.itemsize)
            os.ftruncate(f.fileno(), nbytes)
            return np.memmap(f, dtype=self.payload_dtype, mode="r+", shape=shape)

    # -- the tasks' side -----------------------------------------------------------------
    def take(self, start: int, stop: int, timeout: float | None = None):
        """Frames ``start .. stop`` (one partition) once all have arrived or the
        acquisition has ended: ``(payloads, arrived)``, zeros where a frame did not come.
        Raises `AcquisitionError` where the partition was taken before, or where
        `timeout` s pass first."""
        p = bisect.bisect_right(self.starts, int(start)) - 1
        if p < 0 or self.starts[p] != start or self.stops[p] != stop:
            raise AcquisitionError(
                f"{self.name}: frames {start}:{stop} are not one of its partitions"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._taken[p]:
                raise AcquisitionError(
                    f"{self.name}: frames {start}:{stop} were processed before: an "
                    "acquisition's frames are processed by one run (run all UDFs "
                    "together, or record them with record= and open the recording)"
                )
            while self._count[p] < stop - start and not self.ended:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise AcquisitionError(
                        f"{self.name}: frames {start}:{stop} did not arrive within {timeout} s"
                    )
                self._cond.wait(timeout=left)
            while self._lent == p and self._count[p] < stop - start:
                self._cond.wait()  # (the source is receiving into it: it stops within 0.2 s)
            self._taken[p] = True
            buf = self._buffers.pop(p, None)
            if buf is None:  # (not one frame of it came)
                buf = np.zeros((stop - start, *self.payload_shape), self.payload_dtype)
            else:
                if self._count[p] != stop - start:  # (a reused buffer: no stale frames)
                    buf[~self.arrived[start:stop]] = 0
                if p in self._spilled:
                    self._spilled.discard(p)
                    buf = np.array(buf)  # (its file goes with the mapping)
                else:
                    self.memory -= len(buf) * self.frame_bytes
            return buf, self.arrived[start:stop].copy()

    def ready(self, first: int, want: int = 1, patience: float = 0.0) -> int:
        """How many partitions from `first` on have all their frames (all of them once
        the acquisition has ended); waits until at least one has, then up to `patience`
        seconds more for `want` of them."""
        with self._cond:
            while not self.ended and self._count[first] < self.stops[first] - self.starts[first]:
                self._cond.wait()
            deadline = time.monotonic() + patience
            while True:
                if self.ended:
                    return len(self.starts) - first
                complete = self._complete_from(first)
                left = deadline - time.monotonic()
                if complete >= want or left <= 0:
                    return complete
                self._cond.wait(left)

    def _complete_from(self, first: int) -> int:
        """The partitions from `first` on that have all their frames, up to the first that
        has not (the lock held)."""
        p = first
        while p < len(self.starts) and self._count[p] == self.stops[p] - self.starts[p]:
            p += 1
        return p - first

    @property
    def missing(self) -> np.ndarray:
        """Indices of the frames that have not arrived."""
        with self._cond:
            return np.flatnonzero(~self.arrived)

    def __reduce__(self):
        raise DataSetError(
            f"{self.name}: an acquisition's frames arrive in this process and cannot be "
            "sent to another: run it on the threaded or the synchronous scheduler "
            "(scheduler='threads'), or record it (record=) and process the recording on "
            "the cluster"
        )


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `b` is `a` (the same bytes, laid out alike): frames put where they were
    received (`FrameStore.slots`)."""
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
    )
