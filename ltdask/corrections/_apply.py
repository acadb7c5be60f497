"""Corrections prepared for one signal shape (`PreparedCorrections`): what the partition
tasks apply to each tile, with the excluded pixels' repair plan (`RepairPlan`)."""

from __future__ import annotations

import collections
import functools
import itertools
import threading
from typing import Protocol

import numpy as np

from ltdask.corrections._kernels import add_folded_sums, correct_frames
from ltdask.corrections._kernels import fold_moments as _fold_moments
from ltdask.corrections._linear import LinearCorrection
from ltdask.exceptions import DataSetError


class Source(Protocol):
    """What `PreparedCorrections` reads of the `CorrectionSet` it prepares (which imports
    this module, not the other way round)."""

    dark: np.ndarray | None
    gain: np.ndarray | None


class RepairPlan:
    """Flat indices of the excluded pixels (``excluded``), of the pixels each is repaired
    from (``sources``, a row per excluded pixel) and how many of them there are (``counts``).

    Examples
    --------
    >>> from ltdask.corrections import RepairPlan
    >>> plan = RepairPlan.make((4, 4), [[0], [0]], allow_empty=False)  # the corner pixel
    >>> plan.excluded.tolist(), plan.counts.tolist(), plan.sources[0, :3].tolist()
    ([0], [3], [1, 4, 5])
    """

    def __init__(self, excluded: np.ndarray, sources: np.ndarray, counts: np.ndarray):
        self.excluded = excluded
        self.sources = sources
        self.counts = counts

    @classmethod
    def make(cls, sig_shape, coords: np.ndarray, allow_empty: bool, prefix: str = ""):
        sig_shape = tuple(sig_shape)
        coords = np.asarray(coords, dtype=np.int64).reshape(len(sig_shape), -1)
        flat = np.ravel_multi_index(tuple(coords), sig_shape) if coords.size else coords[0]
        flat = np.unique(flat)
        bad = np.zeros(int(np.prod(sig_shape)), dtype=bool)
        bad[flat] = True
        offsets = [o for o in itertools.product((-1, 0, 1), repeat=len(sig_shape)) if any(o)]
        # (all pixels at once: a loop per pixel took 43 ms for 1 % of a 256x256 frame, a
        # third of what a corrected run of a 2 GiB scan takes to read it; now 1 ms)
        points = np.array(np.unravel_index(flat, sig_shape), dtype=np.int64).T.reshape(
            flat.size, len(sig_shape)
        )
        near = points[:, None, :] + np.asarray(offsets, dtype=np.int64)[None]
        inside = np.asarray(((near >= 0) & (near < np.asarray(sig_shape)[None, None])).all(-1))
        near = np.where(inside[..., None], near, 0)
        index = np.asarray(np.ravel_multi_index(tuple(np.moveaxis(near, -1, 0)), sig_shape))
        usable = inside & ~bad[index]
        counts = usable.sum(axis=1).astype(np.int64)
        # the usable neighbours first, in the order of `offsets`; zeros after them
        order = np.argsort(~usable, axis=1, kind="stable")
        sources = np.take_along_axis(np.where(usable, index, 0), order, axis=1).astype(np.int64)
        if not allow_empty and (counts == 0).any():
            point = points[int(np.argmax(counts == 0))]
            raise DataSetError(
                f"{prefix}CorrectionSet: excluded pixel {tuple(point.tolist())} has no "
                "neighbour that is not excluded, so it cannot be repaired; exclude fewer "
                "pixels or pass allow_empty=True to leave it as it is"
            )
        return cls(flat.astype(np.int64), sources, counts)


class PreparedCorrections:
    """A `CorrectionSet` for one signal shape (:meth:`CorrectionSet.for_shape`): what the
    partition tasks apply.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> hot = np.zeros((4, 4), dtype=bool); hot[1, 2] = True
    >>> cs = ltdask.CorrectionSet(dark=np.full((4, 4), 0.5), excluded_pixels=hot)
    >>> prepared = cs.for_shape((4, 4))
    >>> prepared.excluded_coordinates.tolist()
    [[1], [2]]
    >>> tile = np.ones((1, 4, 4), dtype=np.float32); tile[0, 1, 2] = 1000
    >>> prepared.apply(tile)[0, 1:3, 1:4].tolist()  # dark subtracted, hot pixel repaired
    [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    """

    def __init__(self, source: Source, sig_shape, plan: RepairPlan, tile_dtype, out_dtype):
        #: the `CorrectionSet` (``self.meta.corrections`` in UDFs)
        self.source = source
        self.sig_shape = tuple(sig_shape)
        self.plan = plan
        #: the dtype tiles are read as, and the dtype of the corrected tiles
        self.tile_dtype = np.dtype(tile_dtype)
        self.out_dtype = np.dtype(out_dtype)

    @property
    def has_excluded(self) -> bool:
        return self.plan.excluded.size > 0

    @property
    def excluded_coordinates(self) -> np.ndarray:
        """The excluded pixels as ``(sig_dims, N)`` coordinates."""
        return np.array(np.unravel_index(self.plan.excluded, self.sig_shape))

    def apply(
        self,
        tile: np.ndarray,
        out_dtype=None,
        sig_index: tuple | None = None,
        out=None,
        flat: tuple | None = None,
    ) -> np.ndarray:
        """A corrected copy of `tile` (``(n, *slice shape)``) as `out_dtype` (a float dtype;
        by default ``self.out_dtype``), in `out` if given: a flat buffer to reuse, or an
        array of the tile's shape and `out_dtype` whose frames' pixels are contiguous (a
        view of a results buffer), written in place.

        `sig_index` is the tile's signal slice (``Slice.get()``); None for whole frames.
        `flat`: ``(frames, p0, p1)``, C-contiguous frames whose ``[:, p0:p1]`` is the tile
        (read from there without a copy). The negotiation keeps tile boundaries away from
        excluded pixels, so each is repaired within its tile."""
        n = tile.shape[0]
        if flat is None:
            flat = (np.ascontiguousarray(tile).reshape(n, -1), 0, tile[0].size if n else 0)
        src, p0, p1 = flat
        out_dtype = self.out_dtype if out_dtype is None else np.dtype(out_dtype)
        size = n * (p1 - p0)
        rows = _rows_of(out, tile.shape, out_dtype)
        if rows is not None:
            result, out = out, rows
        elif out is None or out.ndim != 1 or out.dtype != out_dtype or out.size < size:
            out = result = np.empty((n, p1 - p0), dtype=out_dtype)
        else:
            out = result = out.reshape(-1)[:size].reshape(n, p1 - p0)
        dark, gain = self.dark_gain(sig_index, out_dtype)
        plan = self.plan
        if sig_index is not None and p1 - p0 != int(np.prod(self.sig_shape)):
            plan = self._plan_for(tuple((s.start, s.stop) for s in sig_index))
        correct_frames(src, p0, p1, dark, gain, plan.excluded, plan.sources, plan.counts, out)
        return result if result.shape == tile.shape else result.reshape(tile.shape)

    # -- folded into results: ``(x - dark) * gain`` is affine in each pixel ---------------
    def add_folded_sums(self, out: np.ndarray, sums: np.ndarray, frames, sig_index=None):
        """Add sums over `frames` uncorrected frames of the signal slice `sig_index` (flat)
        to `out` (its shape) as sums of corrected ones: ``(sums - frames * dark) * gain``,
        worked out in float64."""
        dark, gain = self.dark_gain(sig_index, np.float64)
        if out.flags.c_contiguous:
            add_folded_sums(sums, frames, dark, gain, out.reshape(-1))
            return
        flat = np.zeros(out.size)  # (a slice of columns: added through a copy)
        add_folded_sums(sums, frames, dark, gain, flat)
        out += flat.reshape(out.shape)

    def linear(self, sig_index=None) -> LinearCorrection:
        """The corrections of the signal slice `sig_index` (None: whole frames) as one
        linear map (`LinearCorrection`), for results linear in the frame: the same object
        for the same corrections and slice in a process, run after run (of the last
        corrections used: `KEPT_CORRECTIONS`, `KEPT_PIXELS`)."""
        return self._linear(
            None if sig_index is None else tuple((s.start, s.stop) for s in sig_index)
        )

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a few signal slices per run)
    def _linear(self, key) -> LinearCorrection:
        # one per content and slice in the process (`_LINEARS`), not per run: what UDFs
        # derive from it (`LinearCorrection.derived`) is kept for the next run with the
        # same corrections
        with _LINEARS_LOCK:
            slices = _LINEARS.setdefault(self.token, {})
            _LINEARS.move_to_end(self.token)
            linear = slices.get(key)
        if linear is None:
            dark, gain = self._dark_gain(key, np.dtype(np.float64))
            plan = self.plan if key is None else self._plan_for(key)
            shape = self.sig_shape if key is None else [b - a for a, b in key]
            linear = LinearCorrection(dark, gain, plan, int(np.prod(shape)))
            with _LINEARS_LOCK:
                linear = slices.setdefault(key, linear)
                _forget_old_linears()
        return linear

    @functools.cached_property
    def token(self) -> str:
        """A hash of the corrections (dark, gain, excluded pixels) and signal shape."""
        from dask.base import tokenize

        return tokenize(self)

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a few signal slices per run)
    def _weights(self, key) -> tuple[np.ndarray, float]:
        linear = self._linear(key)
        size = int(np.prod(self.sig_shape if key is None else [b - a for a, b in key]))
        weights = linear.adjoint(np.ones((1, size)))
        return weights[0], float(linear.offsets(weights)[0])

    def pixel_weights(self, sig_index=None) -> tuple[np.ndarray, float]:
        """``(weights, offset)``: a corrected frame's sum over the signal slice
        `sig_index` is ``weights . x - offset`` of the uncorrected frame ``x`` (flat,
        float64; weights 1 and offset the dark frame's sum without gain or excluded
        pixels)."""
        return self._weights(
            None if sig_index is None else tuple((s.start, s.stop) for s in sig_index)
        )

    @property
    def weights_pixels(self) -> bool:
        """Whether a corrected frame's sum weights the pixels of the uncorrected one (a
        gain map or excluded pixels), rather than only taking the dark frame's sum off."""
        return self.source.gain is not None or self.has_excluded

    def fold_moments(self, mean, m2, count, sums, out_m2=None, sig_index=None) -> None:
        """Write the per-pixel mean and sum of squared deviations of `count` uncorrected
        frames (flat, of the signal slice `sig_index`) as the sums and sums of squared
        deviations of corrected ones into the flat `sums` and `out_m2` (None: not wanted):
        ``(mean - dark) * gain * count`` and ``m2 * gain**2``, in one pass."""
        dark, gain = self.dark_gain(sig_index, np.float64)
        if out_m2 is None:
            m2 = out_m2 = _NO_VALUES
        _fold_moments(mean, m2, count, dark, gain, sums, out_m2)

    def dark_total(self, sig_index=None) -> float:
        """The sum of the dark frame over the signal slice `sig_index`: what subtracting it
        takes from each frame's sum over the slice (without a gain map)."""
        return self._dark_total(
            None if sig_index is None else tuple((s.start, s.stop) for s in sig_index)
        )

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a few signal slices per run)
    def _dark_total(self, key) -> float:
        dark = self._dark_gain(key, np.dtype(np.float64))[0]
        return float(dark.sum())

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a few signal slices per run)
    def _plan_for(self, box) -> RepairPlan:
        """The repair plan in the coordinates of the signal slice `box` (``(start, stop)``
        per dim), whose boundaries the negotiation kept away from excluded pixels."""
        if not self.has_excluded:
            return _NO_REPAIR
        coords = self.excluded_coordinates
        lo = np.array([a for a, _ in box])[:, None]
        hi = np.array([b for _, b in box])[:, None]
        inside = ((coords >= lo) & (coords < hi)).all(axis=0)
        shape = tuple(b - a for a, b in box)
        return RepairPlan.make(shape, coords[:, inside] - lo, allow_empty=True)

    def dark_gain(self, sig_index, out_dtype) -> list[np.ndarray]:
        """``[dark, gain]`` of the signal slice `sig_index` (``Slice.get()``; None: whole
        frames), flat and in `out_dtype`; empty arrays where not given."""
        key = None if sig_index is None else tuple((s.start, s.stop) for s in sig_index)
        return self._dark_gain(key, np.dtype(out_dtype))

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a few signal slices per run)
    def _dark_gain(self, key, dtype) -> list[np.ndarray]:
        """Dark and gain (empty where not given) cut to the signal slice `key` (``(start,
        stop)`` per dim; None: whole frames), flat and in `dtype`."""
        out = []
        for arr in (self.source.dark, self.source.gain):
            if arr is None:
                out.append(np.zeros(0, dtype=dtype))
                continue
            arr = arr.reshape(self.sig_shape)
            if key is not None:
                arr = arr[tuple(slice(a, b) for a, b in key)]
            out.append(np.ascontiguousarray(arr, dtype=dtype).reshape(-1))
        return out

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return (
            "ltdask.PreparedCorrections",
            self.sig_shape,
            tokenize(self.source, self.plan.excluded),
        )


def _rows_of(out, shape, dtype) -> np.ndarray | None:
    """`out` as ``(frames, pixels)`` without a copy, where it is an array of `shape` and
    `dtype` whose frames' pixels are contiguous; else None."""
    if out is None or out.shape != tuple(shape) or out.dtype != dtype or not len(shape):
        return None
    rows = out.view()
    try:
        rows.shape = (shape[0], -1)  # (raises where the frames' pixels are not contiguous)
    except AttributeError:
        return None
    return rows if rows.strides[1] == rows.itemsize else None


_NO_VALUES = np.zeros(0)
_NO_REPAIR = RepairPlan(np.zeros(0, np.int64), np.zeros((0, 1), np.int64), np.zeros(0, np.int64))


#: the `LinearCorrection`s kept per process: of each signal slice (the key of
#: `PreparedCorrections._linear`), by the corrections' content (`PreparedCorrections.token`),
#: for the last corrections used: at most `KEPT_CORRECTIONS` of them, and of their slices
#: at most `KEPT_PIXELS` pixels together beside the last one (each pixel holds float64 dark
#: and gain and what UDFs derived, CoM's masks: ~30 bytes; a benchmark alternates 4)
KEPT_CORRECTIONS = 8
KEPT_PIXELS = 2**23
_LINEARS: collections.OrderedDict[str, dict] = collections.OrderedDict()
_LINEARS_LOCK = threading.Lock()


def _forget_old_linears() -> None:
    """Drop the least recently used corrections' `LinearCorrection`s beyond the limits
    (`KEPT_CORRECTIONS`, `KEPT_PIXELS`); the caller holds ``_LINEARS_LOCK``."""
    total = sum(linear.pixels for slices in _LINEARS.values() for linear in slices.values())
    while len(_LINEARS) > 1 and (len(_LINEARS) > KEPT_CORRECTIONS or total > KEPT_PIXELS):
        _, dropped = _LINEARS.popitem(last=False)
        total -= sum(linear.pixels for linear in dropped.values())
