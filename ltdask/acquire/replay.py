"""Frames in memory replayed as an acquisition, at a frame rate, with a detector's faults.

For trying a live pipeline without a detector (and for tests): `ReplaySource` hands the
frames of an array to the acquisition as a detector stream would, in order, paced to a
frame rate, and can drop, duplicate and reorder frames, break off or stall.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError


class ReplaySource(Source):
    """The frames of `frames` (``(n, *sig)``, in scan order) as a stream.

    Parameters
    ----------
    frames
        The frames to send.
    rate
        Frames per second (None: as fast as they are taken).
    batch
        Frames handed over at once.
    drop, duplicate
        Indices of frames never sent / sent twice.
    swap
        Pairs of indices sent in each other's place (out of order).
    cut_after
        Break off (raise `AcquisitionError`) after this many frames were sent.
    stall_after
        Stop sending (and wait until the acquisition is closed) after this many frames.
    nav_shape
        The scan shape the source announces (else only the frame count).
    """

    def __init__(
        self,
        frames,
        rate: float | None = None,
        batch: int = 16,
        drop: Iterable[int] = (),
        duplicate: Iterable[int] = (),
        swap: Iterable[tuple[int, int]] = (),
        cut_after: int | None = None,
        stall_after: int | None = None,
        nav_shape=None,
        name: str = "replay",
    ) -> None:
        self.frames = np.asarray(frames)
        self.rate = rate
        self.batch = max(1, int(batch))
        self.drop = {int(i) for i in drop}
        self.duplicate = {int(i) for i in duplicate}
        self.swap = [(int(a), int(b)) for a, b in swap]
        self.cut_after = cut_after
        self.stall_after = stall_after
        self.nav_shape = None if nav_shape is None else tuple(nav_shape)
        self.name = name

    def open(self, timeout: float) -> Header:
        return Header(
            sig_shape=self.frames.shape[1:],
            dtype=self.frames.dtype,
            num_frames=len(self.frames),
            nav_shape=self.nav_shape,
        )

    def _order(self) -> list[int]:
        order = [i for i in range(len(self.frames)) if i not in self.drop]
        at = {i: k for k, i in enumerate(order)}
        for a, b in self.swap:
            if a in at and b in at:
                order[at[a]], order[at[b]] = b, a
        out = []
        for i in order:
            out.append(i)
            if i in self.duplicate:
                out.append(i)
        return out

    def receive(self, sink: Sink) -> None:
        order = self._order()
        t0 = time.monotonic()
        sent = 0
        while sent < len(order):
            if sink.cancelled:
                return
            if self.stall_after is not None and sent >= self.stall_after:
                while not sink.cancelled:
                    time.sleep(0.01)
                return
            if self.cut_after is not None and sent >= self.cut_after:
                raise AcquisitionError(f"{self.name}: the stream broke off after {sent} frames")
            # a run of consecutive indices, at most `batch`, in one hand-over
            n = 1
            limit = min(self.batch, len(order) - sent)
            if self.cut_after is not None:
                limit = min(limit, self.cut_after - sent)
            if self.stall_after is not None:
                limit = min(limit, self.stall_after - sent)
            while n < limit and order[sent + n] == order[sent] + n:
                n += 1
            if self.rate:
                wait = t0 + (sent + n) / self.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            first = order[sent]
            sink.put(first, self.frames[first : first + n])
            sent += n
