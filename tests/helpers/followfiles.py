"""Files written while ltdask follows them (writer threads: raw appends, HDF5 with SWMR),
and the check that a test leaves no thread or open file behind.

Nothing here calls ltdask: the frames written are the references.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np


def _open_files() -> set[tuple[str, str]]:
    """``(fd, path)`` of the files this process has open. Sockets, pipes and event fds
    are left out: a dask.distributed client (a session fixture) opens and keeps
    connections whenever it likes, and zarr's event loop holds its own."""
    files = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # (closed meanwhile)
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            files.add((fd, target))
    return files


@contextlib.contextmanager
def no_leaks():
    """Fails if the block leaves an ltdask thread (receiver, watchdog) or a test writer
    running, or a file open (waits up to 5 s for threads that are ending). The pools of
    dask's threaded scheduler and zarr's event loop stay for the process."""
    threads, files = set(threading.enumerate()), _open_files()
    yield
    deadline = time.monotonic() + 5
    while True:
        left = [
            t
            for t in threading.enumerate()
            if t not in threads and t.is_alive() and t.name.startswith(("ltdask", "test"))
        ]
        opened = _open_files() - files
        if (not left and not opened) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left and not opened, f"left behind: threads {left}, open files {opened}"


class Writer(threading.Thread):
    """A thread that writes in steps, with a pause between them; `stop_after` steps end it
    early (a detector that stops). Joined by the ``with`` block's end."""

    def __init__(self, steps: int, pause: float, stop_after: int | None, delay: float) -> None:
        super().__init__(name="test writer", daemon=True)
        self.steps, self.pause, self.stop_after, self.delay = steps, pause, stop_after, delay
        self.error: BaseException | None = None
        self.done_steps = 0

    def run(self) -> None:
        try:
            time.sleep(self.delay)
            self.begin()
            for step in range(self.steps):
                if self.stop_after is not None and step >= self.stop_after:
                    break
                self.step(step)
                self.done_steps += 1
                time.sleep(self.pause)
        except BaseException as e:  # reported by __exit__
            self.error = e
        finally:
            self.end()

    def begin(self) -> None:
        pass

    def step(self, step: int) -> None:
        raise NotImplementedError

    def end(self) -> None:
        pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.join(10)
        assert not self.is_alive()
        if self.error is not None and exc[0] is None:
            raise self.error


class RawAppender(Writer):
    """Appends `data` (bytes) to `path` in pieces of `piece` bytes, which need not be whole
    frames (a reader then sees part of a frame)."""

    def __init__(self, path, data: bytes, piece: int, pause=0.002, stop_after=None, delay=0.0):
        super().__init__(-(-len(data) // piece), pause, stop_after, delay)
        self.path, self.data, self.piece = path, data, piece
        self.file = None

    def begin(self) -> None:
        self.file = open(self.path, "ab")  # noqa: SIM115  (closed in end)

    def step(self, step: int) -> None:
        assert self.file is not None
        self.file.write(self.data[step * self.piece : (step + 1) * self.piece])
        self.file.flush()

    def end(self) -> None:
        if self.file is not None:
            self.file.close()


class SwmrAppender(Writer):
    """Writes `frames` (``(rows, *rest)``) to a new HDF5 dataset ``/entry/data`` with SWMR,
    `rows_per_step` along the first axis at a time; `maxshape` None: unlimited first axis.
    The file and the empty dataset exist when the object is made."""

    def __init__(
        self, path, frames, rows_per_step=1, fixed_max=False, pause=0.002, stop_after=None
    ):
        import h5py

        rows = frames.shape[0]
        super().__init__(-(-rows // rows_per_step), pause, stop_after, 0.0)
        self.frames, self.rows_per_step = frames, rows_per_step
        self.file = h5py.File(path, "w", libver="latest")
        self.dset = self.file.create_dataset(
            "entry/data",
            shape=(0, *frames.shape[1:]),
            maxshape=(rows if fixed_max else None, *frames.shape[1:]),
            chunks=(1, *frames.shape[1:]),
            dtype=frames.dtype,
        )
        self.file.swmr_mode = True

    def step(self, step: int) -> None:
        from h5py._objects import phil

        lo = step * self.rows_per_step
        hi = min(len(self.frames), lo + self.rows_per_step)
        # In one process the reader shares the writer's open file and sees a new extent
        # at once, before its rows are written (another process sees what the writer
        # flushed): h5py's lock, which every h5py call takes, makes the step one.
        with phil:
            self.dset.resize(hi, axis=0)
            self.dset[lo:hi] = self.frames[lo:hi]
            self.dset.flush()

    def __exit__(self, *exc) -> None:
        # closed after the reader: in one process HDF5 shares the open file between the
        # writer and the reader, and closing the writer's closes the reader's objects
        try:
            super().__exit__(*exc)
        finally:
            self.file.close()


def frames_u16(n: int, sig=(6, 5), seed: int = 34) -> np.ndarray:
    """`n` random uint16 frames."""
    return np.random.default_rng(seed).integers(0, 4000, (n, *sig)).astype(np.uint16)
