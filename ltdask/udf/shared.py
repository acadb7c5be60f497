"""Shared tile statistics: reductions that several UDFs of one run need, computed once.

A tile UDF with flat tiles (``process_flat_tile``) may also declare
``SHARED_TILE_STATS``, a tuple of names from :data:`STATS`, and implement
``process_shared_stats(stats)``. When two or more UDFs of a run declare statistics and
one of them needs ``"moments"`` (its own pass would be the moments pass anyway), the
runner computes them all in one numba pass per tile and calls ``process_shared_stats``
instead of ``process_flat_tile``: Sum, SumSig and StdDev then read each tile once, not
three times (each kernel alone is bound by memory or by its arithmetic; one fused pass
is as fast as the slowest of them).

``stats.moments`` is the running ``[count, mean, m2, shift]`` of the partition's frames
so far in the current signal slice (see :func:`ltdask.udf.kernels.statistics.moments`;
the same list object for the whole partition, updated in place), so ``"pixel_sums"``
are ``mean * count``; ``stats.frame_sums`` is the current tile's sum of each frame over
the slice (float64).
"""

from __future__ import annotations

import numpy as np

from ltdask import scratch
from ltdask.udf.kernels.statistics import BLOCK, moments_frame_sums

#: statistics the runner can share
STATS = frozenset({"moments", "pixel_sums", "frame_sums"})


def moments_state(px: int, dtype=np.float64) -> list:
    """A new running ``[count, mean, m2, shift]`` of the `moments` kernel over `px` pixels
    (`mean` in `dtype`), in task scratch (`ltdask.scratch`): whoever keeps the
    statistics copies them out in ``postprocess``."""
    return [0, scratch.zeros(px, dtype), scratch.zeros(px), scratch.zeros(px)]


def moments_work() -> np.ndarray:
    """The `moments` kernel's block sums for a task (task scratch, reused from task to
    task: see the kernel on why it does not allocate them itself)."""
    return scratch.zeros(2 * BLOCK)


class TileStats:
    __slots__ = ("moments", "frame_sums")

    def __init__(self, moments, frame_sums):
        self.moments = moments
        self.frame_sums = frame_sums


class SharedStats:
    """The shared statistics of one partition task, or ``None`` from :meth:`make` when
    fewer than two UDFs would share them."""

    def __init__(self, frame_sums: bool):
        self.with_frame_sums = frame_sums
        self.states: dict[int, list] = {}
        self.work = moments_work()

    @classmethod
    def make(cls, udfs, read_dtype) -> SharedStats | None:
        if np.dtype(read_dtype).kind != "f":
            return None
        wanted = [set(getattr(u, "SHARED_TILE_STATS", ())) for u in udfs]
        if len([w for w in wanted if w]) < 2:
            return None
        union = set().union(*wanted)
        if "moments" not in union or not union <= STATS:
            return None
        return cls("frame_sums" in union)

    @staticmethod
    def wants(udf) -> bool:
        return bool(getattr(udf, "SHARED_TILE_STATS", ()))

    def compute(self, frames: np.ndarray, p0: int, p1: int, scheme_idx: int) -> TileStats:
        state = self.states.get(scheme_idx)
        if state is None:
            state = self.states[scheme_idx] = moments_state(p1 - p0)
        n = frames.shape[0]
        sums = np.zeros(n if self.with_frame_sums else 0)
        count, mean, m2, shift = state
        state[0] = moments_frame_sums(
            frames, p0, p1, count, mean, m2, shift, sums, self.with_frame_sums, self.work
        )
        return TileStats(state, sums)
