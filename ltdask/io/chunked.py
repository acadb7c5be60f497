"""Datasets stored as chunked N-d arrays that a storage library reads (HDF5, Zarr).

The storage chunks drive the layout of the work:

* partitions start on the chunks' nav boundaries (Zarr shards, HDF5 chunks) wherever that
  keeps them near their target size, so no chunk is decompressed by two tasks
  (:func:`aligned_nav_grid`);
* the chunks' signal shape is the dataset's base shape, so a tile's signal slice is a union
  of whole chunks, and the tile depth is a multiple of the chunks' innermost nav extent;
* a tile is read straight into its buffer, as the few hyperslabs of the stored array that
  cover its run of frames (:func:`flat_boxes`).

A format supplies the array's description and :meth:`ChunkedArrayDataSet.open_reader`: a
context manager giving ``read(index, out)``, which fills the C-contiguous native-dtype
array `out` with ``array[index]``. Reading happens in the task; the dataset only carries
paths and shapes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ltdask.common import Slice
from ltdask.io.checks import check_shape, check_sig_dims
from ltdask.io.dataset import DataSet
from ltdask.io.partition import Sizing, nav_grid
from ltdask.io.tiling import TilingScheme

#: how much larger than the default a partition may grow to start on chunk boundaries
ALIGN_GROWTH = 4

Reader = Callable[[tuple, np.ndarray], None]


def aligned_nav_grid(
    nav_shape: Sequence[int],
    frame_bytes: int,
    align: Sequence[int] | None,
    sizing: Sizing | None = None,
) -> tuple[tuple[int, ...], ...]:
    """The partition grid of :func:`~ltdask.io.partition.nav_grid`, with blocks that start
    on the boundaries of storage chunks of nav shape `align`.

    Partitions are flat-nav ranges, so leading nav dims are cut into pieces of one: the grid
    is cut at the first dim whose chunks are more than one deep (or where the default grid
    cuts, if that comes first), into pieces of whole chunks; trailing dims stay whole. When
    that would make partitions more than ``ALIGN_GROWTH`` times larger than the default
    ones, the default grid is kept (and tasks share some chunks).
    """
    nav = tuple(int(n) for n in nav_shape)
    default = nav_grid(nav, frame_bytes, sizing=sizing)
    if align is None or len(align) != len(nav):
        return default
    target = math.prod(c[0] for c in default)
    if target >= math.prod(nav):
        return default
    align = tuple(max(1, min(int(a), n)) for a, n in zip(align, nav, strict=True))
    # the first dim whose trailing block fits the target (>= 1: the whole scan does not)
    split = next(j for j in range(len(nav) + 1) if math.prod(nav[j:]) <= target)
    cut = split - 1
    cut = next((j for j in range(cut) if align[j] > 1), cut)
    trailing = math.prod(nav[cut + 1 :])
    unit = align[cut]
    per = max(unit, (max(1, target // trailing) // unit) * unit)
    if per * trailing > ALIGN_GROWTH * target:
        return default
    full, rest = divmod(nav[cut], per)
    pieces = (per,) * full + ((rest,) if rest else ())
    return tuple((1,) * n for n in nav[:cut]) + (pieces,) + tuple((n,) for n in nav[cut + 1 :])


def flat_boxes(start: int, stop: int, shape: Sequence[int]) -> list[tuple[int, tuple[slice, ...]]]:
    """Boxes of the C-ordered array `shape` that cover the flat range ``[start, stop)``.

    Returns ``(flat offset from start, slices)`` in flat order: at most ``2 * ndim - 1``
    boxes (a partial head row, whole rows, a partial tail row, recursively).

    Examples
    --------
    >>> [(off, [(s.start, s.stop) for s in sl]) for off, sl in flat_boxes(3, 12, (3, 5))]
    [(0, [(0, 1), (3, 5)]), (2, [(1, 2), (0, 5)]), (7, [(2, 3), (0, 2)])]
    """
    shape = tuple(int(s) for s in shape)
    out: list[tuple[int, tuple[slice, ...]]] = []

    def cover(a: int, b: int, dims: tuple[int, ...], prefix: tuple[slice, ...], base: int):
        if a >= b:
            return
        if len(dims) == 1:
            out.append((base, (*prefix, slice(a, b))))
            return
        inner = math.prod(dims[1:])
        rest = tuple(slice(0, d) for d in dims[1:])
        i0, r0 = divmod(a, inner)
        i1, r1 = divmod(b, inner)
        if i0 == i1:
            cover(r0, r1, dims[1:], (*prefix, slice(i0, i0 + 1)), base)
            return
        if r0:
            cover(r0, inner, dims[1:], (*prefix, slice(i0, i0 + 1)), base)
            base += inner - r0
            i0 += 1
        if i1 > i0:
            out.append((base, (*prefix, slice(i0, i1), *rest)))
            base += (i1 - i0) * inner
        if r1:
            cover(0, r1, dims[1:], (*prefix, slice(i1, i1 + 1)), base)

    cover(int(start), int(stop), shape, (), 0)
    return out


def frame_runs(frames: np.ndarray) -> list[tuple[int, int]]:
    """``(i0, i1)`` index ranges of `frames` that hold consecutive present (>= 0) frames."""
    present = frames >= 0
    if not present.any():
        return []
    breaks = np.flatnonzero((np.diff(frames) != 1) | ~present[1:] | ~present[:-1]) + 1
    bounds = [0, *breaks.tolist(), frames.size]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if frames[a] >= 0]


class ChunkedArrayDataSet(DataSet):
    """Frames of a stored N-d array (nav dims, then `sig_dims` signal dims) read through a
    storage library, chunk aligned.

    Parameters
    ----------
    array_shape
        Shape of the stored array.
    dtype
        dtype of the stored array.
    sig_dims
        How many trailing dims are the frame.
    read_chunks
        Shape of the unit the library reads and decompresses (HDF5 chunks, Zarr chunks or
        shard inner chunks); None for unchunked storage.
    storage_chunks
        Shape of the unit partitions should not split (Zarr shards); `read_chunks` if None.
    nav_shape
        The scan's nav shape, if not the stored array's (the stored frames, flattened, are
        then the frame stream).

    Examples
    --------
    The class of the datasets of chunked stores (`open_zarr`, `open_hdf5` of compressed
    data, `open_dectris`); their partitions do not split a chunk:

    >>> import zarr, ltdask, tempfile, os
    >>> store = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> _ = zarr.create_array(store, shape=(4, 6, 8, 8), dtype="uint16", chunks=(1, 3, 8, 8))
    >>> ds = ltdask.open_zarr(store)
    >>> isinstance(ds, ChunkedArrayDataSet), ds.chunks
    (True, (1, 3, 8, 8))
    >>> all(p.num_frames % 3 == 0 for p in ds.get_partitions())
    True
    """

    #: the readers of :meth:`open_reader` fill buffers of any dtype (converting as they
    #: copy), so reading as another dtype needs no native scratch copy in between
    reader_converts = False

    def __init__(
        self,
        array_shape: Sequence[int],
        dtype,
        sig_dims: int,
        read_chunks: Sequence[int] | None = None,
        storage_chunks: Sequence[int] | None = None,
        nav_shape: Sequence[int] | None = None,
        sync_offset: int = 0,
        dims: Sequence[str] | None = None,
    ):
        self.array_shape = tuple(int(s) for s in array_shape)
        sig_dims = check_sig_dims(sig_dims, self.path, self.array_shape)
        self.array_nav_shape = self.array_shape[:-sig_dims]
        self.read_chunks = None if read_chunks is None else tuple(int(c) for c in read_chunks)
        if storage_chunks is None:
            storage_chunks = self.read_chunks
        self.storage_chunks = (
            None if storage_chunks is None else tuple(int(c) for c in storage_chunks)
        )
        if nav_shape is None:
            nav_shape = self.array_nav_shape
        nav_shape = check_shape(nav_shape, "nav_shape", self.path)
        super().__init__(
            nav_shape,
            self.array_shape[-sig_dims:],
            dtype,
            sync_offset=sync_offset,
            image_count=math.prod(self.array_nav_shape),
            dims=dims,
        )

    # -- the format's part ---------------------------------------------------------------
    def open_reader(self) -> contextlib.AbstractContextManager[Reader]:
        """A context manager giving ``read(index, out)`` (in the task)."""
        raise NotImplementedError

    # -- negotiation -----------------------------------------------------------------------
    @property
    def _stream_is_array(self) -> bool:
        """Whether nav positions are the stored array's own nav positions."""
        return self.nav_shape == self.array_nav_shape and self.sync_offset == 0

    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        if self.read_chunks is None:
            return super().get_base_shape(roi)
        sig_dims = len(self.sig_shape)
        chunk_sig = self.read_chunks[-sig_dims:]
        return tuple(min(c, s) for c, s in zip(chunk_sig, self.sig_shape, strict=True))

    def get_nav_alignment(self) -> tuple[int, ...] | None:
        """Nav shape of the chunks (or shards) partitions start on; None if the scan's nav
        positions are not the stored array's (``nav_shape`` or ``sync_offset`` given)."""
        if self.storage_chunks is None or not self._stream_is_array:
            return None
        return self.storage_chunks[: len(self.nav_shape)]

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        if self.read_chunks is None or not self._stream_is_array:
            return tileshape
        inner = self.read_chunks[len(self.nav_shape) - 1]
        depth = tileshape[0]
        if depth >= inner:
            depth = (depth // inner) * inner
        return (depth, *tileshape[1:])

    def need_decode(self, read_dtype, roi=None) -> bool:
        return True

    def partition_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        frame_bytes = math.prod(self.sig_shape) * max(4, self.dtype.itemsize)
        return aligned_nav_grid(self.nav_shape, frame_bytes, self.get_nav_alignment(), sizing)

    # -- reading (in tasks) ------------------------------------------------------------------
    def _read(
        self,
        read: Reader,
        frames: np.ndarray,
        sig_index: tuple[slice, ...],
        out: np.ndarray,
        scratch: np.ndarray | None,
    ) -> None:
        """Fill `out` (``(len(frames), *slice)``, C order) with `frames` cut to `sig_index`;
        slots of missing frames (-1) are left alone. `scratch` is a flat native-dtype buffer
        at least as large as `out`, needed when `out` has another dtype."""
        slice_shape = out.shape[1:]
        native = out if out.dtype == self.dtype or self.reader_converts else None
        for i0, i1 in frame_runs(frames):
            n = i1 - i0
            if native is None:
                assert scratch is not None, "reading as another dtype needs a scratch buffer"
                target = scratch[: n * math.prod(slice_shape)].reshape((n, *slice_shape))
            else:
                target = out[i0:i1]
            first = int(frames[i0])
            for off, nav_index in flat_boxes(first, first + n, self.array_nav_shape):
                box = tuple(s.stop - s.start for s in nav_index)
                m = math.prod(box)
                read((*nav_index, *sig_index), target[off : off + m].reshape(box + slice_shape))
            if native is None:
                out[i0:i1] = target

    def read_frames(self, positions: np.ndarray, sig_slice: Slice, dtype) -> np.ndarray:
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        shape = (frames.size, *sig_slice.shape)
        out = np.zeros(shape, dtype) if (frames < 0).any() else np.empty(shape, dtype)
        if frames.size == 0 or not (frames >= 0).any():
            return out
        scratch = None if dtype == self.dtype else np.empty(out.size, self.dtype)
        with self.open_reader() as read:
            self._read(read, frames, sig_slice.get(), out, scratch)
        return out

    def iter_tiles(
        self, positions: np.ndarray, scheme: TilingScheme, dtype, block=None, array_backend=None
    ) -> Iterator[tuple[np.ndarray, int, int]]:
        # (numpy only: the run asks for what `array_backends` lists)
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        if frames.size == 0:
            return
        shapes = [tuple(s.shape) for s in scheme.slices]
        indices = [s.get() for s in scheme.slices]
        slice_px = [math.prod(shape) for shape in shapes]
        size = scheme.depth * max(slice_px)
        buf = np.empty(size, dtype=dtype)
        scratch = None if dtype == self.dtype else np.empty(size, dtype=self.dtype)
        with self.open_reader() as read:
            for first in range(0, frames.size, scheme.depth):
                block_frames = frames[first : first + scheme.depth]
                n = block_frames.size
                for s, shape in enumerate(shapes):
                    out = buf[: n * slice_px[s]].reshape((n, *shape))
                    if (block_frames < 0).any():
                        out[...] = 0
                    self._read(read, block_frames, indices[s], out, scratch)
                    yield out, first, s

    def attrs(self) -> dict:
        attrs = super().attrs()
        if self.read_chunks is not None:
            attrs["chunks"] = list(self.read_chunks)
        return attrs

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self.array_shape, self.read_chunks, self.storage_chunks)
