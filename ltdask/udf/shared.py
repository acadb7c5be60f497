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

from ltdask.kernels.integer_moments import MAX_FRAMES, add_integer_sums_with, flush_integer_sums
from ltdask.kernels.repaired import no_repaired, no_weighted
from ltdask.kernels.statistics import BLOCK, moments_with
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

    def add(
        self,
        frames: np.ndarray,
        p0: int,
        p1: int,
        frame_sums=_NO_SUMS,
        weighted: tuple | None = None,
        repaired=None,
    ) -> None:
        """Add the tile ``frames[:, p0:p1]``; with `frame_sums` (int64, one per frame) also
        each frame's sum over the slice; in the same pass, with `weighted` (``(weights,
        sums)``, float64) each frame's weighted sum, and with `repaired` (a
        `ltdask.corrections.RepairedMoments`) its repaired pixels' values."""
        with_sums = frame_sums.shape[0] > 0
        for f0 in range(0, frames.shape[0], MAX_FRAMES):
            piece = frames[f0 : f0 + MAX_FRAMES]
            if self.n + piece.shape[0] > MAX_FRAMES:
                self.flush()
            sums = frame_sums[f0 : f0 + MAX_FRAMES] if with_sums else frame_sums
            extra = no_weighted() if weighted is None else (weighted[0], weighted[1][f0:])

            def run(rows, piece=piece, sums=sums, extra=extra):
                add_integer_sums_with(piece, p0, p1, self.s1, self.s2, sums, with_sums, extra, rows)

            if repaired is None:
                run(no_repaired())
            else:
                repaired.during(piece, p0, p1, run)
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
    """One tile's shared statistics: the running ``moments`` of its signal slice, the
    tile's ``frame_sums`` (of corrected frames where `corrected`: the run's folded
    corrections weight the pixels, and the pass weighted them), and the slice's
    `repaired` pixels' moments (a `ltdask.corrections.RepairedMoments`, or None)."""

    __slots__ = ("moments", "frame_sums", "corrected", "repaired")

    def __init__(self, moments, frame_sums, corrected: bool = False, repaired=None):
        self.moments = moments
        self.frame_sums = frame_sums
        self.corrected = corrected
        self.repaired = repaired


def tile_pixel_weights(udf, px: int) -> tuple[np.ndarray, float] | None:
    """``(weights, offset)`` of `udf`'s current signal slice where the corrections it
    folds weight the pixels (a gain map, excluded pixels): a corrected frame's sum over
    the slice is ``weights . x - offset`` of the uncorrected tile's pixels ``x`` (a raw
    frame's pixel weighs what its image pixels weigh); else None."""
    form = udf.tile_form
    folded = form.folded_corrections
    if folded is None or not folded.weights_pixels:
        return None
    layout = form.pixel_layout
    if layout is None:
        weights, offset = folded.pixel_weights(udf.meta.sig_slice.get())
    else:  # (whole frames)
        weights, offset = folded.pixel_weights()
        weights = np.bincount(layout.index, weights, minlength=px)
    return np.ascontiguousarray(weights[:px]), offset


def repaired_moments(udf):
    """A new `ltdask.corrections.RepairedMoments` of `udf`'s current signal slice where
    the corrections it folds repair pixels, else None."""
    from ltdask.corrections import RepairedMoments

    form = udf.tile_form
    folded = form.folded_corrections
    if folded is None or not folded.has_excluded:
        return None
    layout = form.pixel_layout  # (raw frames: whole frames)
    linear = folded.linear(udf.meta.sig_slice.get() if layout is None else None)
    return RepairedMoments(linear, None if layout is None else layout.index)


class SharedStats:
    """The shared statistics of one partition task, or ``None`` from :meth:`make` when
    fewer than two UDFs would share them.

    Where the run folds corrections (`ltdask.udf.paths.TilePaths.folds_corrections`), the
    pass takes them too: frame sums weighted where the corrections weight the pixels, the
    repaired pixels' values worked out from the rows just read
    (:mod:`ltdask.kernels.repaired`)."""

    def __init__(self, frame_sums: bool, integer: bool = False, lead=None):
        self.with_frame_sums = frame_sums
        self.integer = integer
        self.states: dict = {}
        self.work = None if integer else moments_work()
        #: the first UDF that takes the statistics: pointed at the tile when they are made
        self.lead = lead
        folded = None if lead is None else lead.tile_form.folded_corrections
        self.folded = folded
        self.weights: dict = {}
        self.repaired: dict = {}

    @classmethod
    def make(cls, udfs, read_dtype) -> SharedStats | None:
        integer = integer_tiles(read_dtype)
        if np.dtype(read_dtype).kind != "f" and not integer:
            return None
        wanted = [_wanted(u) for u in udfs]
        takers = [u for u, w in zip(udfs, wanted, strict=True) if w]
        if len(takers) < 2:
            return None
        union = set().union(*wanted)
        if "moments" not in union or not union <= STATS:
            return None
        return cls("frame_sums" in union, integer, takers[0])

    @staticmethod
    def wants(udf) -> bool:
        return bool(_wanted(udf))

    def _extras(self, frames, p0, p1, scheme_idx):
        """``(frame sums, weighted, repaired)`` of the tile for the pass."""
        n = frames.shape[0]
        folded = self.folded
        weighted = None
        if self.with_frame_sums and folded is not None:
            if scheme_idx not in self.weights:
                weights = tile_pixel_weights(self.lead, p1 - p0)
                if weights is not None:  # (products in float32 for float32 runs)
                    dtype = np.result_type(self.lead.meta.input_dtype, np.float32)
                    weights = (weights[0].astype(dtype), weights[1])
                self.weights[scheme_idx] = weights
            weights = self.weights[scheme_idx]
            if weights is not None:
                weighted = (weights[0], np.zeros(n))
        plain = self.with_frame_sums and weighted is None
        sums = np.zeros(n if plain else 0, np.int64 if self.integer else np.float64)
        repaired = None
        if folded is not None and folded.has_excluded:
            if scheme_idx not in self.repaired:
                self.repaired[scheme_idx] = repaired_moments(self.lead)
            repaired = self.repaired[scheme_idx]
        return sums, weighted, repaired

    def compute(self, frames: np.ndarray, p0: int, p1: int, scheme_idx: int) -> TileStats:
        sums, weighted, repaired = self._extras(frames, p0, p1, scheme_idx)
        if self.integer:
            kept = IntegerMoments.kept(self.states, scheme_idx, p1 - p0)
            kept.add(frames, p0, p1, sums, weighted, repaired)
            return self._stats(kept, sums, weighted, repaired, scheme_idx)
        state = self.states.get(scheme_idx)
        if state is None:
            state = self.states[scheme_idx] = moments_state(p1 - p0)
        extra = no_weighted() if weighted is None else weighted
        with_sums = sums.shape[0] > 0

        def run(rows):
            state[0] = moments_with(frames, p0, p1, *state, sums, with_sums, self.work, extra, rows)

        if repaired is None:
            run(no_repaired())
        else:
            repaired.during(frames, p0, p1, run)
        return self._stats(state, sums, weighted, repaired, scheme_idx)

    def _stats(self, state, sums, weighted, repaired, scheme_idx) -> TileStats:
        if weighted is None:
            return TileStats(state, sums, False, repaired)
        return TileStats(state, weighted[1] - self.weights[scheme_idx][1], True, repaired)


def _wanted(udf) -> set[str]:
    """The statistics `udf` takes from the shared pass."""
    return set(tile_paths(udf).shared_stats)
