"""The device interface of the device tile path: pinned host buffers, copies on a stream
of their own, events, and arrays on the device.

`CupyDevice` is the real one. `StandInDevice` keeps every "device" array in host memory
and executes each operation when it is asked for; it records what it was asked
(`StandInDevice.journal`), so that tests can check the order of the pipeline's copies,
events and waits. It is used where the setting ``ltdask.device.stand-in`` is true (tests
only: it stands in for a GPU that is not there, and the UDFs' CUDA backends get numpy
arrays).
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

import numpy as np


class Device(Protocol):
    """What the device tile path needs of a device."""

    #: the array backend of the arrays it makes (``"cupy"``; the stand-in's ``"numpy"``)
    backend: str
    #: the array module of its arrays (cupy; numpy for the stand-in)
    xp: Any

    def pinned(self, nbytes: int) -> np.ndarray:
        """A host buffer of `nbytes` bytes (uint8) that copies to the device can read
        asynchronously (page-locked)."""

    def empty(self, size: int, dtype) -> Any:
        """A flat device array."""

    def copy_stream(self) -> Any:
        """A stream for copies, other than the one the computations run on."""

    def compute_stream(self) -> Any:
        """The stream the UDFs' computations run on (the current one)."""

    def copy_async(self, dst, src: np.ndarray, stream) -> None:
        """Copy the pinned host array `src` to the device array `dst` (same shape and
        dtype) on `stream`, without waiting for it."""

    def record(self, stream) -> Any:
        """An event that completes once what `stream` was given so far has run."""

    def wait(self, stream, event) -> None:
        """Make `stream` wait for `event` before what it is given next (no host wait)."""

    def synchronize(self, event) -> None:
        """Wait here, on the host, for `event`."""

    def asarray(self, arr: np.ndarray) -> Any:
        """`arr` copied to the device (masks, dark frames: once per partition)."""


class CupyDevice:
    """The CUDA device of this process, through CuPy (workers of a GPU cluster see one
    device: ``CUDA_VISIBLE_DEVICES`` names it)."""

    backend = "cupy"

    def __init__(self) -> None:
        import cupy

        self.xp = cupy

    def pinned(self, nbytes: int) -> np.ndarray:
        memory = self.xp.cuda.alloc_pinned_memory(max(1, nbytes))
        return np.frombuffer(memory, np.uint8, nbytes)  # (keeps `memory` alive)

    def empty(self, size: int, dtype):
        return self.xp.empty(size, dtype=dtype)

    def copy_stream(self):
        return self.xp.cuda.Stream(non_blocking=True)

    def compute_stream(self):
        return self.xp.cuda.get_current_stream()

    def copy_async(self, dst, src: np.ndarray, stream) -> None:
        dst.set(src, stream=stream)

    def record(self, stream):
        event = self.xp.cuda.Event(disable_timing=True)
        event.record(stream)
        return event

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def synchronize(self, event) -> None:
        event.synchronize()

    def asarray(self, arr: np.ndarray):
        return self.xp.asarray(arr)


class StandInDevice:
    """A device in host memory that does each operation when asked (see the module's
    docstring); `journal` lists them: ``("copy", buffer id)``, ``("record", stream,
    event)``, ``("wait", stream, event)``, ``("sync", event)``."""

    backend = "numpy"
    xp = np

    #: what the stand-ins of this process staged, per tile: (where: the address of the
    #: `distributed` worker that ran it, else ``"local"``; frames)
    staged: list[tuple[str, int]] = []

    def __init__(self) -> None:
        self.journal: list[tuple] = []
        self._events = 0

    def pinned(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def empty(self, size: int, dtype) -> np.ndarray:
        # (NaN where a float buffer was never written: a read of it shows)
        if np.dtype(dtype).kind == "f":
            return np.full(size, np.nan, dtype)
        return np.empty(size, dtype)

    def copy_stream(self) -> str:
        return "copy"

    def compute_stream(self) -> str:
        return "compute"

    def copy_async(self, dst, src: np.ndarray, stream) -> None:
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise ValueError(f"copy of {src.shape} {src.dtype} to {dst.shape} {dst.dtype}")
        np.copyto(dst, src)
        base = dst.base if dst.base is not None else dst
        self.journal.append(("copy", id(base)))
        StandInDevice.staged.append((_where(), src.shape[0]))

    def record(self, stream) -> int:
        self._events += 1
        self.journal.append(("record", stream, self._events))
        return self._events

    def wait(self, stream, event) -> None:
        self.journal.append(("wait", stream, event))

    def synchronize(self, event) -> None:
        self.journal.append(("sync", event))

    def asarray(self, arr: np.ndarray) -> np.ndarray:
        return np.array(arr)


def _where() -> str:
    if "distributed" in sys.modules:
        from distributed import get_worker

        try:
            return str(get_worker().address)
        except ValueError:  # (not in a worker)
            pass
    return "local"


def stand_in() -> bool:
    """Whether the setting ``ltdask.device.stand-in`` puts `StandInDevice` in the place of
    a GPU (tests without one)."""
    import dask

    return bool(dask.config.get("ltdask.device.stand-in", False))


def current_device() -> CupyDevice | StandInDevice:
    """The device of this process for a partition's tiles."""
    return StandInDevice() if stand_in() else CupyDevice()
