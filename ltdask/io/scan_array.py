"""`ScanArray`: the dask array that ``DataSet.to_dask()`` returns.

It is a plain `dask.array.Array` in every respect but one: its sums over the navigation
dims, the signal dims or all dims are taken by the numba kernels of the shipped UDFs in
place of numpy's ``sum``, chunk by chunk. For integer chunks (what detectors write) these
are exact 64-bit sums, four frames per pass, never a float copy of a chunk: numpy converts
integers to the result dtype in small buffers, at a third of the memory's speed. Means of
integers are those sums divided. Float sums per pixel stay in the chunk's dtype (as
numpy's, four frames per pass), float sums per frame are taken in float64. Results are
numpy's sums of the same chunks, to the rounding of the result dtype. Frames converted
to a dtype that holds each of their values (``to_dask(dtype="float32")`` of 8- or 16-bit
integers) are summed from the native ones (`ScanArray.sums_from`). Every other
operation, and these ones over other axes, is dask's; arrays derived from a `ScanArray`
by slicing, rechunking or ``persist()`` are `ScanArray`\\ s too, anything else a plain
dask array.

With dask's array-expr engine (``array.query-planning`` on) ``to_dask()`` is a plain dask
array: array-expr arrays are remade from their expressions by dask (``new_collection``
picks the class from the chunks' type), so a subclass is lost at the first slice or
``persist()``, and ``numpy.sum`` of any array-expr array raises NotImplementedError. The
kernels' sums are then taken with `sum_scan` and `mean_scan` (``ltdask.sum``,
``ltdask.mean``), which take any dask array in either engine.
"""

from __future__ import annotations

import functools
import inspect
import math

import dask.array as da
import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

#: pixels per block of per-pixel sums: their int64 accumulators (512 KiB) stay in L2
#: while the chunk's frames go by (16384: 3 % slower, 4096: 15 %)
SUM_BLOCK = 65536

_NP_SUM = inspect.signature(np.sum)
_NP_MEAN = inspect.signature(np.mean)


class ScanArray(da.Array):
    """A `dask.array.Array` whose sums (and means of integers) run ltdask's kernels (see
    the module's description); ``numpy.sum`` and ``numpy.mean`` of it too.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.arange(2 * 3 * 4 * 5, dtype=np.uint16).reshape(2, 3, 4, 5)
    >>> arr = ltdask.from_array(data).to_dask()
    >>> type(arr).__name__, arr.sum(axis=(0, 1)).dtype
    ('ScanArray', dtype('uint64'))
    >>> bool((arr.sum(axis=(2, 3), dtype="float32").compute() == data.sum(axis=(2, 3))).all())
    True
    """

    __slots__ = ()

    #: the same scan in a dtype whose values this one holds exactly (``to_dask(dtype=
    #: "float32")`` of uint16 frames: the native integers), or None: sums and means are
    #: taken from it (the integers summed exactly, then rounded once, as a float sum of
    #: the converted frames would be without rounding on the way)
    sums_from: ScanArray | None = None
    #: for ``to_dask(corrections=...)``: ``(raw, prepared)``, the same scan uncorrected
    #: (every frame present) and the `ltdask.corrections.PreparedCorrections` its chunks
    #: are corrected by, or None: sums over the frames, over each frame or over all are
    #: taken from the uncorrected frames and corrected after the sum (`folded_sum`)
    folded_from: tuple | None = None

    def sum(self, axis=None, dtype=None, keepdims=False, split_every=None, out=None):
        if self.sums_from is not None and out is None:
            dtype = _sum_result_dtype(self.dtype, dtype)
            return self.sums_from.sum(axis, dtype, keepdims, split_every)
        return sum_scan(self, axis, dtype, keepdims, split_every, out)

    def mean(self, axis=None, dtype=None, keepdims=False, split_every=None, out=None):
        if self.folded_from is not None and out is None:
            return mean_scan(self, axis, dtype, keepdims, split_every)
        if self.sums_from is not None and out is None:
            dtype = dtype or np.mean(np.zeros(1, dtype=self.dtype)).dtype
            return self.sums_from.mean(axis, dtype, keepdims, split_every)
        if self.dtype.kind not in "ui" or out is not None:
            return super().mean(axis, dtype, keepdims, split_every, out)
        return mean_scan(self, axis, dtype, keepdims, split_every)

    def __dask_postpersist__(self):  # (what ``persist()`` returns)
        rebuild, args = super().__dask_postpersist__()
        return _rebuilt_scan_array, (rebuild, *args)

    def __getitem__(self, index):
        return as_scan_array(super().__getitem__(index))

    def rechunk(self, *args, **kwargs):
        return as_scan_array(super().rechunk(*args, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        method = {np.sum: (self.sum, _NP_SUM), np.mean: (self.mean, _NP_MEAN)}.get(func)
        if method is not None:
            bound = method[1].bind(*args, **kwargs).arguments
            if bound.pop("a") is self and set(bound) <= {"axis", "dtype", "keepdims", "out"}:
                return method[0](**bound)
        return super().__array_function__(func, types, args, kwargs)


def as_scan_array(arr):
    """`arr` (a dask array) as a `ScanArray` (the same graph); anything else, and any array
    of dask's array-expr engine (see the module's description), as it is."""
    if type(arr) is not da.Array or _array_expr():
        return arr
    return ScanArray(arr.dask, arr.name, arr.chunks, meta=arr._meta)


def _rebuilt_scan_array(dsk, rebuild, *args, **kwargs):
    """A persisted `ScanArray`: dask's rebuild of its computed graph `dsk`, as one."""
    return as_scan_array(rebuild(dsk, *args, **kwargs))


def _array_expr() -> bool:
    return bool(getattr(da, "ARRAY_EXPR_ENABLED", False))


def sum_scan(arr, axis=None, dtype=None, keepdims=False, split_every=None, out=None):
    """``arr.sum(axis, dtype, keepdims=keepdims)`` of the dask array `arr`, chunk by chunk by
    ltdask's kernels where they apply (see the module's description): what the sums of a
    `ScanArray` take, for any dask array, in either of dask's array engines; as
    ``ltdask.sum``.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.arange(2 * 3 * 4 * 5, dtype=np.uint16).reshape(2, 3, 4, 5)
    >>> arr = ltdask.from_array(data).to_dask()
    >>> total = ltdask.sum(arr, axis=(0, 1))
    >>> total.dtype, bool((total.compute() == data.sum(axis=(0, 1))).all())
    (dtype('uint64'), True)
    """
    if out is None:
        folded = folded_sum(arr, axis, dtype, keepdims, split_every)
        if folded is not None:
            return folded
    return da.reduction(
        arr,
        chunk_sum,
        _aggregate_sum,
        axis=axis,
        keepdims=keepdims,
        dtype=_sum_result_dtype(arr.dtype, dtype),
        split_every=split_every,
        out=out,
        name="sum",
    )


def mean_scan(arr, axis=None, dtype=None, keepdims=False, split_every=None):
    """``arr.mean(axis, dtype, keepdims=keepdims)`` of the dask array `arr`: of integers,
    their `sum_scan` in float64 divided by the count; of floats, dask's; as ``ltdask.mean``.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.arange(2 * 3 * 4 * 5, dtype=np.uint16).reshape(2, 3, 4, 5)
    >>> means = ltdask.mean(ltdask.from_array(data).to_dask(), axis=(2, 3))
    >>> bool(np.allclose(means.compute(), data.mean(axis=(2, 3))))
    True
    """
    folded = getattr(arr, "folded_from", None) is not None
    if arr.dtype.kind not in "ui" and not folded:
        return da.mean(arr, axis, dtype, keepdims, split_every)
    axes = _axes(axis, arr.ndim)
    count = math.prod(arr.shape[a] for a in axes)
    total = sum_scan(arr, axes, np.float64, keepdims, split_every)
    return (total / count).astype(dtype or np.mean(np.zeros(1, arr.dtype)).dtype)


def folded_sum(arr, axis=None, dtype=None, keepdims=False, split_every=None):
    """The sum of a corrected scan (``to_dask(corrections=...)``, `ScanArray.folded_from`)
    over its frames (per pixel), over each frame or over all, from the uncorrected frames:
    the corrections are linear in each frame (`ltdask.corrections.LinearCorrection`), so
    per pixel the sum of ``n`` corrected frames is ``A (sum - n * dark)``, and each
    corrected frame's sum is ``w . (x - dark)`` with ``w = A^T 1``. None for other axes
    (and arrays without `folded_from`)."""
    source = getattr(arr, "folded_from", None)
    if source is None:
        return None
    raw, prepared = source
    sig_dims = len(prepared.sig_shape)
    nav_dims = arr.ndim - sig_dims
    axes = _axes(axis, arr.ndim)
    nav, sig = tuple(range(nav_dims)), tuple(range(nav_dims, arr.ndim))
    dtype = _sum_result_dtype(arr.dtype, dtype)
    if axes == sig:
        total = _folded_frame_sums(raw, prepared, nav_dims, arr.dtype, split_every)
    elif axes in (nav, nav + sig):
        sums = da.reduction(
            raw,
            functools.partial(chunk_sum, wide=True),
            _aggregate_sum,
            axis=nav,
            dtype=_accumulator(raw.dtype),
            split_every=split_every,
            name="sum",
        )
        frames = math.prod(arr.shape[:nav_dims])
        total = sums.rechunk(-1).map_blocks(
            _fold_pixel_sums, prepared, frames, dtype=np.float64, meta=np.empty((0,) * sig_dims)
        )
        if axes != nav:
            total = total.sum()
    else:
        return None
    total = total.astype(dtype)
    if keepdims:
        total = total.reshape([1 if a in axes else s for a, s in enumerate(arr.shape)])
    return total


def _accumulator(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.int64 if dtype.kind in "ui" else np.float64)


def _fold_pixel_sums(sums: np.ndarray, prepared, frames: int) -> np.ndarray:
    """Per-pixel sums of `frames` uncorrected frames (whole frames) as sums of corrected
    ones, in float64."""
    total = np.zeros(sums.size)
    prepared.add_folded_sums(total, sums.reshape(-1), frames)
    prepared.linear().repair(total)
    return total.reshape(sums.shape)


def _folded_frame_sums(raw, prepared, nav_dims: int, dtype, split_every=None):
    """Each corrected frame's sum, ``w . (x - dark)`` (float64), from the uncorrected
    chunks of `raw`: their parts of it per chunk (weighted, products in the corrected
    frames' `dtype` as the shared tile pass takes them), added over the signal chunks."""
    weights, _ = prepared.pixel_weights()
    dark = prepared.dark_gain(None, np.float64)[0]
    weighted_dark = weights * dark if dark.size else np.zeros_like(weights)
    sig_shape = prepared.sig_shape
    chunks = raw.chunks[:nav_dims] + tuple((1,) * len(c) for c in raw.chunks[nav_dims:])
    parts = raw.map_blocks(
        _weighted_block,
        weights.astype(np.result_type(dtype, np.float32)).reshape(sig_shape),
        weighted_dark.reshape(sig_shape),
        nav_dims,
        chunks=chunks,
        dtype=np.float64,
        meta=np.empty((0,) * raw.ndim),
    )
    return parts.sum(axis=tuple(range(nav_dims, raw.ndim)), split_every=split_every)


def _weighted_block(block, weights, weighted_dark, nav_dims: int, block_info=None):
    from ltdask.kernels.repaired import weighted_rows

    where = tuple(slice(a, b) for a, b in block_info[0]["array-location"][nav_dims:])
    frames = np.ascontiguousarray(block).reshape(-1, math.prod(block.shape[nav_dims:]))
    w = np.ascontiguousarray(weights[where]).reshape(-1)
    sums = np.zeros(frames.shape[0])
    weighted_rows(frames, 0, frames.shape[0], 0, frames.shape[1], w, sums)
    sums -= weighted_dark[where].sum()
    return sums.reshape(block.shape[:nav_dims] + (1,) * (block.ndim - nav_dims))


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """`axis` as sorted non-negative axes; numpy's `AxisError` for one out of bounds (a
    remainder would take axis 4 of a 4-D scan for axis 0), its errors for duplicates and
    non-integers."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axis_tuple(axis, ndim)))


def _sum_result_dtype(data: np.dtype, dtype) -> np.dtype:
    """`dtype`, or numpy's for sums of `data` (64 bits for integers)."""
    return np.dtype(dtype) if dtype is not None else np.zeros(1, data).sum().dtype


def _aggregate_sum(x, axis=None, keepdims=False, dtype=None):
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype)


def chunk_sum(x, axis=None, keepdims=True, dtype=None, computing_meta=False, wide=False):
    """``numpy.sum(x, axis, dtype, keepdims=keepdims)`` of one chunk, by ltdask's kernels
    where the summed axes are the chunk's first or its last ones, its ``(frames, pixels)``
    view is C-contiguous and `_sum_dtype` gives the sums' dtype; by numpy otherwise.
    `wide`: float sums in float64 by the kernels too (each pixel converted as added)."""
    dtype = _sum_result_dtype(x.dtype, dtype)
    axes = _axes(axis, x.ndim)
    flat = None if computing_meta else _flat(x, axes)
    acc_dtype = None if flat is None else _sum_dtype(x.dtype, dtype, flat[1])
    if wide and flat is not None and x.dtype.kind == "f" and dtype == np.float64:
        acc_dtype = dtype
    if acc_dtype is None:
        return np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    from ltdask.kernels.statistics import sum_frames, sum_pixels

    frames, per_pixel = flat
    if per_pixel:
        acc = np.zeros(frames.shape[1], acc_dtype)
        for p0 in range(0, acc.size, SUM_BLOCK):
            p1 = min(acc.size, p0 + SUM_BLOCK)
            sum_frames(frames, p0, p1, acc[p0:p1])
    else:
        acc = np.zeros(frames.shape[0], acc_dtype)
        sum_pixels(frames, 0, frames.shape[1], acc)
    out = acc.astype(dtype).reshape([1 if a in axes else s for a, s in enumerate(x.shape)])
    return out if keepdims else out.squeeze(axes)


def _sum_dtype(dtype: np.dtype, result: np.dtype, per_pixel: bool):
    """The dtype the kernels sum chunks of `dtype` in, for a result of dtype `result`, or
    None where numpy sums them.

    Integers: exact 64-bit sums (uint64 of uint32: numba adds uint32 and int64 in float64),
    for any integer or float result. Floats: sums per pixel in their own dtype where the
    result has it (as numpy adds the frames up; the kernel four at a time); sums per frame
    in float64 (each pixel converted, then the float result rounded once: as exact as
    numpy's pairwise sums or more)."""
    if result.kind not in "uif" or not dtype.isnative:
        return None
    if dtype.kind in "ui" and dtype.itemsize <= 4:
        return np.dtype(np.uint64 if dtype == np.uint32 else np.int64)
    if dtype not in (np.float32, np.float64):
        return None
    if per_pixel:
        return dtype if result == dtype else None
    return np.dtype(np.float64) if result.kind == "f" else None


def _flat(x, axes: tuple[int, ...]):
    """``(frames, per_pixel)``: `x` as a C-contiguous ``(frames, pixels)`` view, and whether
    `axes` are the frames' (a sum per pixel) or the pixels' (a sum per frame; all axes
    too); None where the kernels do not apply."""
    if not (type(x) in (np.ndarray, np.memmap) and x.size and axes):
        return None
    per_pixel = axes == tuple(range(len(axes))) and len(axes) < x.ndim
    if per_pixel:
        split = len(axes)  # (sums per pixel over the leading axes)
    elif axes == tuple(range(x.ndim - len(axes), x.ndim)):
        split = x.ndim - len(axes)  # (sums per frame over the trailing axes; all: 1 frame)
    else:
        return None
    shape = (math.prod(x.shape[:split]), math.prod(x.shape[split:]))
    try:
        frames = np.reshape(x, shape, copy=False)
    except ValueError:
        return None
    if not frames.flags.c_contiguous:
        return None
    return frames, per_pixel
