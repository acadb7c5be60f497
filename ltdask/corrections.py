"""Detector corrections: dark frame, gain map and excluded (hot, dead, noisy) pixels.

Every frame a UDF sees becomes ``(frame - dark) * gain`` in the run's float dtype, and then
each excluded pixel the mean of the pixels of its 3×3 neighbourhood that are not excluded
(fewer at edges and corners; clusters are handled because excluded neighbours never count),
as LiberTEM 0.16 does. A pixel whose neighbours are all excluded cannot be repaired: an error
when the `CorrectionSet` is made, unless ``allow_empty=True`` (then it keeps its dark- and
gain-corrected value).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import numba
import numpy as np

from ltdask.exceptions import DataSetError


class CorrectionSet:
    """Corrections applied where frames are read, before any UDF sees them.

    Parameters
    ----------
    dark
        Subtracted from every frame: an array of the signal shape.
    gain
        Multiplied with every frame after the dark subtraction: an array of the signal
        shape, finite.
    excluded_pixels
        The pixels to repair: a boolean array of the signal shape (True = excluded), a
        ``sparse.COO`` array of it, or an integer ``(sig_dims, N)`` array of coordinates.
    allow_empty
        Leave a pixel whose neighbours are all excluded as it is, instead of an error.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.ones((2, 2, 4, 4), dtype=np.float32)
    >>> data[..., 1, 2] = 1000  # a hot pixel
    >>> hot = np.zeros((4, 4), dtype=bool); hot[1, 2] = True
    >>> cs = ltdask.CorrectionSet(dark=np.full((4, 4), 0.5), excluded_pixels=hot)
    >>> res = ltdask.udf.SumUDF().compute(ltdask.from_array(data), corrections=cs)
    >>> res["intensity"].values[1, 2].item()
    2.0
    """

    def __init__(self, dark=None, gain=None, excluded_pixels=None, allow_empty: bool = False):
        self.dark = None if dark is None else _as_array(dark, "dark")
        self.gain = None if gain is None else _as_array(gain, "gain")
        if self.gain is not None and not np.isfinite(self.gain).all():
            bad = np.argwhere(~np.isfinite(self.gain))[0]
            raise DataSetError(
                f"CorrectionSet: gain has non-finite values (first at {tuple(bad.tolist())}); "
                "a gain map must be finite"
            )
        if self.dark is not None and not np.isfinite(self.dark).all():
            raise DataSetError("CorrectionSet: dark has non-finite values; it must be finite")
        self.allow_empty = bool(allow_empty)
        self._excluded_input = excluded_pixels
        self.excluded = None  # coordinates (sig_dims, N), set by `for_shape` or below
        shapes = {a.shape for a in (self.dark, self.gain) if a is not None}
        if len(shapes) > 1:
            raise DataSetError(
                f"CorrectionSet: dark {self.dark.shape} and gain {self.gain.shape} have "
                "different shapes; both must have the signal shape"
            )
        known = shapes.pop() if shapes else getattr(excluded_pixels, "shape", None)
        if excluded_pixels is not None and known is not None and _is_mask(excluded_pixels):
            self.excluded = _coordinates(excluded_pixels, tuple(known))
            RepairPlan.make(tuple(known), self.excluded, self.allow_empty)

    def have_corrections(self) -> bool:
        return any(x is not None for x in (self.dark, self.gain, self._excluded_input))

    def _n_excluded(self) -> int:
        if self._excluded_input is None:
            return 0
        if self.excluded is not None:
            return self.excluded.shape[1]
        return -1  # unknown until the signal shape is known

    def get_dark_frame(self):
        return self.dark

    def get_gain_map(self):
        return self.gain

    def get_excluded_pixels(self):
        """The excluded pixels as a ``sparse.COO`` boolean array (LiberTEM's form)."""
        if self.excluded is None:
            return None
        import sparse

        shape = None if self.dark is None else self.dark.shape
        shape = shape or (None if self.gain is None else self.gain.shape)
        return sparse.COO(self.excluded, data=True, shape=shape)

    def for_shape(
        self, sig_shape: Sequence[int], where: str = "", tile_dtype=None, out_dtype=np.float32
    ) -> PreparedCorrections:
        """The corrections checked against a dataset's signal shape, ready to apply to tiles
        read as `tile_dtype` (by default `out_dtype`), giving `out_dtype`."""
        sig_shape = tuple(int(s) for s in sig_shape)
        prefix = f"{where}: " if where else ""
        for name, arr in (("dark", self.dark), ("gain", self.gain)):
            if arr is not None and arr.shape != sig_shape:
                if arr.size == np.prod(sig_shape) and arr.ndim == 1:
                    continue
                raise DataSetError(
                    f"{prefix}CorrectionSet {name} has shape {arr.shape}; expected the "
                    f"signal shape {sig_shape}"
                )
        excluded = np.zeros((len(sig_shape), 0), dtype=np.int64)
        if self._excluded_input is not None:
            excluded = _coordinates(self._excluded_input, sig_shape, prefix)
        plan = RepairPlan.make(sig_shape, excluded, self.allow_empty, prefix)
        out_dtype = np.dtype(out_dtype)
        tile_dtype = out_dtype if tile_dtype is None else np.dtype(tile_dtype)
        return PreparedCorrections(self, sig_shape, plan, tile_dtype, out_dtype)

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return (
            "ltdask.CorrectionSet",
            tokenize(self.dark, self.gain),
            repr(self._excluded_token()),
            self.allow_empty,
        )

    def _excluded_token(self):
        from dask.base import tokenize

        x = self._excluded_input
        if x is None:
            return None
        if hasattr(x, "coords"):
            return tokenize(np.asarray(x.coords), x.shape)
        return tokenize(np.asarray(x))

    def __repr__(self) -> str:
        parts = []
        if self.dark is not None:
            parts.append(f"dark {self.dark.shape}")
        if self.gain is not None:
            parts.append(f"gain {self.gain.shape}")
        if self._excluded_input is not None:
            n = self._n_excluded()
            parts.append(f"{n if n >= 0 else '?'} excluded pixels")
        return f"<CorrectionSet {', '.join(parts) or 'empty'}>"


def _as_array(value, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value.todense() if hasattr(value, "todense") else value)
    except Exception as e:
        raise DataSetError(f"CorrectionSet: {name} is not an array ({e})") from None
    if arr.dtype.kind not in "biuf":
        raise DataSetError(
            f"CorrectionSet: {name} has dtype {arr.dtype}; expected a real number array"
        )
    return arr.astype(np.float64 if arr.dtype == np.float64 else np.float32)


def _is_mask(value) -> bool:
    return hasattr(value, "coords") or np.asarray(value).dtype == bool


def _coordinates(value, sig_shape: tuple[int, ...], prefix: str = "") -> np.ndarray:
    """Excluded pixels as integer coordinates ``(sig_dims, N)``, checked against the shape."""
    if hasattr(value, "coords"):  # sparse.COO
        if tuple(value.shape) != sig_shape:
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels has shape {tuple(value.shape)}; "
                f"expected the signal shape {sig_shape}"
            )
        coords = np.asarray(value.coords)[:, np.asarray(value.data).astype(bool)]
        return coords.astype(np.int64)
    arr = np.asarray(value)
    if arr.dtype == bool:
        if arr.shape != sig_shape:
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels (a mask) has shape {arr.shape}; "
                f"expected the signal shape {sig_shape}"
            )
        return np.argwhere(arr).T.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 2 or arr.shape[0] != len(sig_shape):
        raise DataSetError(
            f"{prefix}CorrectionSet excluded_pixels: expected a boolean mask of shape "
            f"{sig_shape}, a sparse.COO of it, or integer coordinates of shape "
            f"({len(sig_shape)}, N); got {arr.dtype} of shape {arr.shape}"
        )
    for dim, size in enumerate(sig_shape):
        bad = (arr[dim] < 0) | (arr[dim] >= size)
        if bad.any():
            raise DataSetError(
                f"{prefix}CorrectionSet excluded_pixels: coordinate {int(arr[dim][bad][0])} "
                f"in dim {dim} is outside the signal shape {sig_shape}"
            )
    return np.unique(arr.astype(np.int64), axis=1)


class RepairPlan:
    """Flat indices of the excluded pixels and of the pixels each is repaired from."""

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
        width = len(offsets)
        sources = np.zeros((flat.size, width), dtype=np.int64)
        counts = np.zeros(flat.size, dtype=np.int64)
        points = np.array(np.unravel_index(flat, sig_shape)).T if flat.size else []
        for i, point in enumerate(points):
            n = 0
            for off in offsets:
                q = point + np.asarray(off)
                if (q < 0).any() or (q >= np.asarray(sig_shape)).any():
                    continue
                index = int(np.ravel_multi_index(tuple(q), sig_shape))
                if not bad[index]:
                    sources[i, n] = index
                    n += 1
            counts[i] = n
            if n == 0 and not allow_empty:
                raise DataSetError(
                    f"{prefix}CorrectionSet: excluded pixel {tuple(point.tolist())} has no "
                    "neighbour that is not excluded, so it cannot be repaired; exclude fewer "
                    "pixels or pass allow_empty=True to leave it as it is"
                )
        return cls(flat.astype(np.int64), sources, counts)


class PreparedCorrections:
    """A `CorrectionSet` for one signal shape: what the partition tasks apply."""

    def __init__(self, source: CorrectionSet, sig_shape, plan: RepairPlan, tile_dtype, out_dtype):
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
        by default ``self.out_dtype``), in `out` (a flat buffer to reuse) if given.

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
        if out is None or out.dtype != out_dtype or out.size < size:
            out = np.empty((n, p1 - p0), dtype=out_dtype)
        else:
            out = out.reshape(-1)[:size].reshape(n, p1 - p0)
        dark, gain = self._cut(sig_index, out_dtype)
        plan = self.plan
        if sig_index is not None and p1 - p0 != int(np.prod(self.sig_shape)):
            plan = self._plan_for(tuple((s.start, s.stop) for s in sig_index))
        _correct_frames(src, p0, p1, dark, gain, plan.excluded, plan.sources, plan.counts, out)
        return out.reshape(tile.shape)

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

    def _cut(self, sig_index, out_dtype):
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


_NO_REPAIR = RepairPlan(np.zeros(0, np.int64), np.zeros((0, 1), np.int64), np.zeros(0, np.int64))


@numba.njit(nogil=True, cache=True)
def _correct_frames(src, p0, p1, dark, gain, excluded, sources, counts, out):
    """``out = (src[:, p0:p1] - dark) * gain`` per frame, then each excluded pixel the mean
    of its sources (empty dark/gain: none). `dark` and `gain` have `out`'s dtype: the arithmetic
    stays in it (float32 + float64 would widen every pixel and stop vectorisation)."""
    n = src.shape[0]
    px = p1 - p0
    with_dark = dark.shape[0] > 0
    with_gain = gain.shape[0] > 0
    for i in range(n):
        row = src[i][p0:p1]
        dest = out[i]
        if with_dark and with_gain:
            for k in range(px):
                dest[k] = (dest.dtype.type(row[k]) - dark[k]) * gain[k]
        elif with_dark:
            for k in range(px):
                dest[k] = dest.dtype.type(row[k]) - dark[k]
        elif with_gain:
            for k in range(px):
                dest[k] = dest.dtype.type(row[k]) * gain[k]
        else:
            for k in range(px):
                dest[k] = row[k]
        for j in range(excluded.shape[0]):
            c = counts[j]
            if c == 0:
                continue
            acc = 0.0
            for m in range(c):
                acc += dest[sources[j, m]]
            dest[excluded[j]] = acc / c


class ExcludedReport:
    """What :func:`find_excluded` found: the mask and, per kind, the pixels' coordinates
    (``hot``, ``dead``, ``noisy``: ``(sig_dims, N)`` arrays) and the thresholds used."""

    def __init__(self, mask: np.ndarray, kinds: dict, thresholds: dict, frames: int):
        self.mask = mask
        self.kinds = kinds
        self.thresholds = thresholds
        self.frames = frames

    def __repr__(self) -> str:
        counts = ", ".join(f"{len(v[0]) if len(v) else 0} {k}" for k, v in self.kinds.items())
        return (
            f"<ExcludedReport {int(self.mask.sum())} of {self.mask.size} pixels ({counts}) "
            f"from {self.frames} frames>"
        )


def find_excluded(
    dataset,
    hot: float = 8.0,
    dead: float = 0.1,
    noisy: float = 4.0,
    roi=None,
) -> tuple[np.ndarray, ExcludedReport]:
    """Flag hot, dead and noisy pixels of a detector from one pass over a scan (or a dark
    series), by comparing each pixel with the 3×3 neighbourhood around it.

    From the per-pixel mean and standard deviation over the frames (`StdDevUDF`), each pixel
    is compared with the third largest (``high_*``) and third smallest (``low_*``) of its 8
    neighbours' values, so that clusters of up to two bad pixels and the edges of bright
    structures (a diffraction disk: a pixel on either side of the edge has at least three
    neighbours on its own side) do not hide or fake a bad pixel:

    * hot: ``mean - high_mean > hot * s``, where ``s`` is the robust spread (1.4826 × the
      median absolute deviation) of ``mean - high_mean`` over all pixels, and at least
      ``hot * sqrt(high_mean / frames)`` (the counting noise of a mean);
    * dead: ``mean < dead * low_mean`` where the neighbours see signal (``low_mean > 0``);
    * noisy: ``std > noisy * high_std`` where the neighbours vary (``high_std > 0``) (a
      noisy pixel is not called hot, a dead one not noisy).

    Parameters
    ----------
    dataset
        The scan or dark series.
    hot, dead, noisy
        The thresholds above; ``None`` skips that kind.
    roi
        The frames to use.

    Returns
    -------
    mask, report
        The boolean mask of the signal shape (for ``CorrectionSet(excluded_pixels=mask)``)
        and an `ExcludedReport`.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.random.default_rng(0).poisson(50, (4, 4, 16, 16)).astype(np.uint16)
    >>> data[..., 3, 5] = 4000
    >>> mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data))
    >>> np.argwhere(mask).tolist()
    [[3, 5]]
    """
    from scipy import ndimage

    from ltdask.udf.builtin.stddev import StdDevUDF

    res = StdDevUDF(dtype="float64").compute(dataset, roi=roi)
    mean = np.asarray(res["mean"].values, dtype=np.float64)
    std = np.asarray(res["std"].values, dtype=np.float64)
    frames = int(res["num_frames"].values[0])
    footprint = np.ones((3,) * mean.ndim, dtype=bool)
    footprint[(1,) * mean.ndim] = False
    n = int(footprint.sum())

    def neighbour(values, rank):
        return ndimage.rank_filter(values, rank, footprint=footprint, mode="mirror")

    high_mean, low_mean = neighbour(mean, n - 3), neighbour(mean, 2)
    high_std = neighbour(std, n - 3)
    kinds: dict = {}
    thresholds: dict = {"hot": hot, "dead": dead, "noisy": noisy}
    flagged = np.zeros(mean.shape, dtype=bool)
    # noisy first: a noisy pixel's mean wanders too, which is no reason to call it hot
    is_noisy = np.zeros(mean.shape, dtype=bool)
    if noisy is not None:
        is_noisy = (high_std > 0) & (std > noisy * high_std)
    if hot is not None:
        excess = mean - high_mean
        spread = 1.4826 * np.median(np.abs(excess - np.median(excess)))
        floor = hot * np.sqrt(np.maximum(high_mean, 0) / max(frames, 1))
        is_hot = (excess > np.maximum(hot * spread, floor)) & ~is_noisy
        kinds["hot"] = np.array(np.nonzero(is_hot))
        flagged |= is_hot
    if dead is not None:
        is_dead = (low_mean > 0) & (mean < dead * low_mean)
        kinds["dead"] = np.array(np.nonzero(is_dead))
        flagged |= is_dead
    if noisy is not None:
        is_noisy &= ~flagged
        kinds["noisy"] = np.array(np.nonzero(is_noisy))
        flagged |= is_noisy
    return flagged, ExcludedReport(flagged, kinds, thresholds, frames)
