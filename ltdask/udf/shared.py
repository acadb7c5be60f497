"""Shared tile statistics: reductions that several UDFs of one run need, computed once.

A tile UDF with flat tiles (``process_flat_tile``) may also declare
``TILE_PATHS = TilePaths(shared_stats=...)``, names from :data:`STATS`, and implement
``process_shared_stats(stats)``. When two or more UDFs of a run declare statistics and
one of them needs ``"moments"`` (its own pass would be the moments pass anyway), the
runner computes them all in one numba pass per tile and calls ``process_shared_stats``
instead of ``process_flat_tile``: Sum, SumSig and StdDev then read each tile once, not
three times (each kernel alone is bound by memory or by its arithmetic; one fused pass
is as fast as the slowest of them).

``stats.moments`` is the running ``[count, mean, m2, shift]`` of the partition's frames
so far in the current signal slice (see :func:`ltdask.kernels.statistics.moments`;
the same list object for the whole partition, updated in place), so ``"pixel_sums"``
are ``mean * count``; ``stats.frame_sums`` is the current tile's sum of each frame over
the slice (float64). On 8/16-bit integer tiles the pass is exact
(:mod:`ltdask.kernels.integer_moments`): ``stats.moments`` is an `IntegerMoments`
(`finished_moments` gives the list; its ``pixel_sums`` are the exact int64 sums) and
``stats.frame_sums`` are int64.
"""

from __future__ import annotations

import numpy as np

from ltdask.kernels.integer_moments import MAX_FRAMES, add_integer_sums, flush_integer_sums
from ltdask.kernels.statistics import BLOCK, moments_frame_sums
from ltdask.runtime import scratch
from ltdask.udf.paths.declared import SHARED_STATS, tile_paths

#: statistics the runner can share
STATS = SHARED_STATS


def moments_state(px: int, dtype=np.float64) -> list:
    """A new running ``[count, mean, m2, shift]`` of the `moments` kernel over `px` pixels
    (`mean` in `dtype`), in task scratch (`ltdask.runtime.scratch`): whoever keeps the
    statistics copies them out in ``postprocess``."""
    return [0, scratch.zeros(px, dtype), scratch.zeros(px), scratch.zeros(px)]


def moments_work() -> np.ndarray:
    """The `moments` kernel's block sums for a task (task scratch, reused from task to
    task: see the kernel on why it does not allocate them itself)."""
    return scratch.zeros(2 * BLOCK)


def integer_tiles(dtype) -> bool:
    """Whether tiles of `dtype` take the exact integer moments (`IntegerMoments`): 8- and
    16-bit integers, what detectors write."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" and dtype.itemsize <= 2


_NO_SUMS = np.zeros(0, np.int64)


class IntegerMoments:
    """Running per-pixel moments of 8/16-bit integer frames over `px` pixels: exact int64
    sums of ``x`` and ``x * x`` since the last flush (no per-pixel float work per tile; see
    :mod:`ltdask.kernels.integer_moments`), flushed into float64 ``[count, mean, m2,
    shift]`` (as `moments_state`; shift unused) before they hold more than ``MAX_FRAMES``
    frames and by `finished`; `pixel_sums` gathers the exact sums flushed. Task scratch."""

    __slots__ = ("n", "s1", "s2", "state", "pixel_sums")

    def __init__(self, px: int):
        self.n = 0
        self.s1 = scratch.zeros(px, np.int64)
        self.s2 = scratch.zeros(px, np.int64)
        self.state = [0, scratch.zeros(px), scratch.zeros(px), None]  # (no shift)
        self.pixel_sums = scratch.zeros(px, np.int64)

    @classmethod
    def kept(cls, states: dict, key, px: int) -> IntegerMoments:
        """The `IntegerMoments` of `states` under `key`, made there for `px` pixels first
        where there is none (one per signal slice of a partition)."""
        state = states.get(key)
        if state is None:
            state = states[key] = cls(px)
        return state

    def add(self, frames: np.ndarray, p0: int, p1: int, frame_sums=_NO_SUMS) -> None:
        """Add the tile ``frames[:, p0:p1]``; with `frame_sums` (int64, one per frame) also
        each frame's sum over the slice."""
        with_sums = frame_sums.shape[0] > 0
        for f0 in range(0, frames.shape[0], MAX_FRAMES):
            piece = frames[f0 : f0 + MAX_FRAMES]
            if self.n + piece.shape[0] > MAX_FRAMES:
                self.flush()
            sums = frame_sums[f0 : f0 + MAX_FRAMES] if with_sums else frame_sums
            add_integer_sums(piece, p0, p1, self.s1, self.s2, sums, with_sums)
            self.n += piece.shape[0]

    def flush(self) -> None:
        st = self.state
        st[0] = flush_integer_sums(self.n, self.s1, self.s2, st[0], st[1], st[2], self.pixel_sums)
        self.n = 0

    def finished(self) -> list:
        """The running ``[count, mean, m2, shift]`` of every frame added (flushed)."""
        self.flush()
        return self.state


def finished_moments(state) -> list:
    """``[count, mean, m2, shift]`` of a `moments_state` list or an `IntegerMoments`."""
    return state.finished() if isinstance(state, IntegerMoments) else state


def moved_moments(layout, state) -> list:
    """``[count, mean, m2, None]`` of the raw frames' pixels (a `moments_state` list or an
    `IntegerMoments`) as the image's pixels of `layout` (a `PixelLayout`)."""
    count, mean, m2, _ = finished_moments(state)
    return [count, layout.gather(mean), layout.gather(m2), None]


class TileStats:
    __slots__ = ("moments", "frame_sums")

    def __init__(self, moments, frame_sums):
        self.moments = moments
        self.frame_sums = frame_sums


class SharedStats:
    """The shared statistics of one partition task, or ``None`` from :meth:`make` when
    fewer than two UDFs would share them."""

    def __init__(self, frame_sums: bool, integer: bool = False):
        self.with_frame_sums = frame_sums
        self.integer = integer
        self.states: dict = {}
        self.work = None if integer else moments_work()

    @classmethod
    def make(cls, udfs, read_dtype) -> SharedStats | None:
        integer = integer_tiles(read_dtype)
        if np.dtype(read_dtype).kind != "f" and not integer:
            return None
        wanted = [set(tile_paths(u).shared_stats) for u in udfs]
        if len([w for w in wanted if w]) < 2:
            return None
        union = set().union(*wanted)
        if "moments" not in union or not union <= STATS:
            return None
        return cls("frame_sums" in union, integer)

    @staticmethod
    def wants(udf) -> bool:
        return bool(tile_paths(udf).shared_stats)

    def compute(self, frames: np.ndarray, p0: int, p1: int, scheme_idx: int) -> TileStats:
        if self.integer:
            return self._integer(frames, p0, p1, scheme_idx)
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

    def _integer(self, frames: np.ndarray, p0: int, p1: int, scheme_idx: int) -> TileStats:
        state = IntegerMoments.kept(self.states, scheme_idx, p1 - p0)
        sums = np.zeros(frames.shape[0] if self.with_frame_sums else 0, np.int64)
        state.add(frames, p0, p1, sums)
        return TileStats(state, sums)
