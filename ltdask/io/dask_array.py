"""Datasets as dask arrays: one chunk per (partition × signal slice), filled in its task."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ltdask.common import Slice
from ltdask.io.scan_array import ScanArray, as_scan_array
from ltdask.io.tiling import TILE_MAX, TilingPreferences, TilingScheme
from ltdask.runtime import settings


class Scan(Protocol):
    """What building a dask array reads of a dataset (`ltdask.io.dataset.DataSet`, whose
    ``to_dask`` calls this module): shapes and dtypes, partitions, the negotiation, and
    ``read_frames`` in the tasks."""

    path: str

    @property
    def shape(self) -> Any: ...
    @property
    def nav_shape(self) -> tuple[int, ...]: ...
    @property
    def sig_shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def num_frames(self) -> int: ...
    @property
    def present_range(self) -> tuple[int, int]: ...

    def resolve_dtype(self, dtype) -> np.dtype: ...
    def run_dtype(self, dtype, promote: bool = True) -> np.dtype: ...
    def get_partitions(self) -> Sequence[Any]: ...
    def partition_blocks(self) -> Any: ...
    def hands_out_views(self, dtype) -> bool: ...
    @property
    def nav_chunks(self) -> tuple[tuple[int, ...], ...]: ...
    def partition_frame_bytes(self) -> int: ...
    def negotiate(self, consumers, read_dtype, *args, **kwargs) -> TilingScheme: ...
    def for_task(self) -> Any: ...
    def read_frames(self, positions: np.ndarray, sig_slice: Slice, dtype) -> np.ndarray: ...


def dataset_to_dask(ds: Scan, dtype=None, chunks=None):
    """See :meth:`ltdask.io.dataset.DataSet.to_dask`."""
    dtype = ds.resolve_dtype(dtype)
    arr = as_scan_array(_chunks_of(ds, dtype, chunks))
    native = ds.dtype.newbyteorder("=")
    if isinstance(arr, ScanArray) and dtype != native and np.can_cast(native, dtype, "safe"):
        # (frames converted to a dtype that holds every value: their sums from the natives)
        arr.sums_from = dataset_to_dask(ds)
    return arr


def _chunks_of(ds: Scan, dtype: np.dtype, chunks):
    import dask.array as da
    from dask.base import tokenize

    blocks = ds.partition_blocks()
    if blocks is not None:
        arr = blocks if chunks is None else blocks.rechunk(chunks)
        return arr if arr.dtype == dtype else arr.astype(dtype)
    if chunks is None:
        largest = max(p.num_frames for p in ds.get_partitions())
        consumer = TilingPreferences("tile", depth=TILE_MAX, total_size=TILE_MAX)
        scheme = ds.negotiate(
            [consumer], dtype, max_io_size=largest * math.prod(ds.sig_shape) * dtype.itemsize
        )
        chunks = (*_copy_nav_chunks(ds, dtype, scheme.sig_chunks), *scheme.sig_chunks)
    else:
        chunks = da.core.normalize_chunks(chunks, tuple(ds.shape), dtype=dtype)
    name = f"ltdask-{type(ds).__name__.lower()}-{tokenize(ds, dtype.str, chunks)}"
    return da.map_blocks(
        load_block,
        chunks=chunks,
        dtype=dtype,
        meta=np.empty((0,) * len(ds.shape), dtype=dtype),
        name=name,
        dataset=ds.for_task(),
        read_dtype=dtype,
    )


#: the most bytes of a ``to_dask()`` chunk of whole frames that is a copy (decoded, or
#: converted to another dtype): a larger array is fresh pages from the kernel, zeroed for
#: every chunk (above glibc's largest mmap threshold, 32 MiB); one this size comes back
#: from the heap, its pages already mapped (what that gains: docs/performance.md)
COPY_CHUNK_BYTES = 16 << 20


def dask_nav_chunks(ds: Scan, dtype) -> tuple[tuple[int, ...], ...]:
    """Nav chunks of ``to_dask()``: the partitions, or, where chunks are views of the page
    cache (which cost no memory), blocks of ``ltdask.partition-bytes`` (``auto``: 512 MiB):
    fewer, larger tasks make dask reductions faster."""
    from ltdask.io.partition import nav_grid

    frame_bytes = math.prod(ds.sig_shape) * max(4, ds.dtype.itemsize)
    if not ds.hands_out_views(dtype):
        # dense chunks: partitions of sparse data would be too large for them
        if ds.partition_frame_bytes() < frame_bytes:
            return nav_grid(ds.nav_shape, frame_bytes)
        return ds.nav_chunks
    target = settings.partition_bytes("views") // frame_bytes
    target = min(max(1, target), max(1, ds.num_frames // settings.min_partitions()))
    return nav_grid(ds.nav_shape, frame_bytes, target_frames=target)


def _copy_nav_chunks(ds: Scan, dtype: np.dtype, sig_chunks) -> tuple:
    """`dask_nav_chunks`, cut finer where the chunks are copies of whole frames larger than
    `COPY_CHUNK_BYTES` (where the frame is cut into signal chunks, a finer nav grid would
    multiply their number)."""
    from ltdask.io.partition import nav_grid

    nav = dask_nav_chunks(ds, dtype)
    if ds.hands_out_views(dtype) or any(len(c) > 1 for c in sig_chunks):
        return nav
    frame_bytes = math.prod(ds.sig_shape) * dtype.itemsize
    if math.prod(max(c) for c in nav) * frame_bytes <= COPY_CHUNK_BYTES:
        return nav
    return nav_grid(ds.nav_shape, frame_bytes, target_frames=COPY_CHUNK_BYTES // frame_bytes)


def block_positions(nav_shape, nav_location) -> np.ndarray:
    """Flat nav positions of a nav block given as ``[(start, stop), ...]`` per dim (C order)."""
    starts = [a for a, _ in nav_location]
    extents = [b - a for a, b in nav_location]
    # contiguous when every dim after the first cut one is whole
    first_cut = next((j for j, e in enumerate(extents) if e > 1), len(extents))
    if all(extents[j] == nav_shape[j] for j in range(first_cut + 1, len(extents))):
        start = int(np.ravel_multi_index(starts, nav_shape))
        return np.arange(start, start + math.prod(extents), dtype=np.int64)
    grids = np.meshgrid(*(np.arange(a, b) for a, b in nav_location), indexing="ij")
    return np.ravel_multi_index(grids, nav_shape).reshape(-1).astype(np.int64)


def load_block(dataset: Scan, read_dtype, block_info=None):
    """The task behind each chunk of ``to_dask()``."""
    from ltdask.common import Shape, Slice

    location = block_info[None]["array-location"]
    nav_dims = len(dataset.nav_shape)
    nav_loc, sig_loc = location[:nav_dims], location[nav_dims:]
    positions = block_positions(dataset.nav_shape, nav_loc)
    sig_slice = Slice(
        tuple(a for a, _ in sig_loc),
        Shape(tuple(b - a for a, b in sig_loc), sig_dims=len(sig_loc)),
    )
    data = dataset.read_frames(positions, sig_slice, read_dtype)
    return data.reshape(block_info[None]["chunk-shape"])


def corrected_dask(ds: Scan, corrections, dtype=None, chunks=None):
    """`dataset_to_dask` with a `ltdask.CorrectionSet` applied to every frame (see
    :meth:`ltdask.io.dataset.DataSet.to_dask`)."""
    import dask.array as da

    out_dtype = np.dtype(np.result_type(ds.resolve_dtype(dtype), np.float32))
    prepared = corrections.for_shape(ds.sig_shape, ds.path, out_dtype=out_dtype)
    raw = dataset_to_dask(ds, dtype=ds.run_dtype(ds.dtype), chunks=chunks)
    nav_dims = len(ds.nav_shape)
    if prepared.has_excluded and any(len(c) > 1 for c in raw.chunks[nav_dims:]):
        # pixels are repaired from their neighbours: whole frames per chunk
        raw = raw.rechunk(raw.chunks[:nav_dims] + tuple((s,) for s in ds.sig_shape))
    arr = da.map_blocks(
        _correct_block,
        raw,
        dtype=out_dtype,
        meta=np.empty((0,) * raw.ndim, dtype=out_dtype),
        prepared=prepared,
        dataset=ds.for_task(),
    )
    arr = as_scan_array(arr)
    start, stop = ds.present_range
    if isinstance(arr, ScanArray) and stop - start == ds.num_frames:
        # (sums taken from the uncorrected frames, corrected after the sum)
        arr.folded_from = (raw, prepared)
    return arr


def _correct_block(block, prepared, dataset: Scan, block_info=None):
    location = block_info[0]["array-location"]
    nav_dims = len(dataset.nav_shape)
    sig_loc = location[nav_dims:]
    whole = all(b - a == s for (a, b), s in zip(sig_loc, dataset.sig_shape, strict=True))
    sig_index = None if whole else tuple(slice(a, b) for a, b in sig_loc)
    frames = block.reshape((-1, *block.shape[nav_dims:]))
    out = prepared.apply(frames, sig_index=sig_index)
    start, stop = dataset.present_range
    if stop - start < dataset.num_frames:  # positions without a frame stay zero
        positions = block_positions(dataset.nav_shape, location[:nav_dims])
        out[(positions < start) | (positions >= stop)] = 0
    return out.reshape(block.shape)
