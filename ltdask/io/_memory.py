"""Arrays already in memory (numpy), in a dask graph or in an xarray DataArray, as datasets."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator

import numpy as np

from ltdask.common import Slice
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_shape, check_sig_dims
from ltdask.io.dataset import DataSet, flat_of
from ltdask.io.tiling import TilingScheme


def _is_dataarray(obj) -> bool:
    xr = sys.modules.get("xarray")  # a DataArray means xarray is imported; never import it
    return xr is not None and isinstance(obj, xr.DataArray)


SPARSE_COO = "sparse.COO"


def _sparse_input(array):
    """A ``sparse`` array (as it is) or a scipy sparse matrix of ``(frames, pixels)`` (as a
    2-D ``sparse.COO``); None for anything else."""
    module = type(array).__module__
    if module.startswith("sparse"):
        return array
    if module.startswith("scipy.sparse"):
        from sparseconverter import for_backend

        return for_backend(array, SPARSE_COO)
    return None


def unwrap_dataarray(array, dims):
    """``(data, dims, coords)`` of an `xarray.DataArray`, its dims renamed to `dims` if
    given (with the coordinates along them)."""
    if dims is not None:
        dims = tuple(str(d) for d in dims)
        if len(dims) != array.ndim:
            raise DataSetError(
                f"from_array: dims={dims} must be {array.ndim} names, one per dim of the "
                f"DataArray {array.dims}"
            )
        try:
            array = array.rename(
                {old: new for old, new in zip(array.dims, dims, strict=True) if old != new}
            )
        except ValueError as e:  # a new name that is already a coordinate's
            raise DataSetError(
                f"from_array: cannot rename the DataArray's dims {array.dims} to {dims}: {e}"
            ) from None
    coords = {name: coord.variable for name, coord in array.coords.items()}
    return array.data, tuple(str(d) for d in array.dims), coords


class ArrayDataSet(DataSet):
    """A numpy, dask or xarray array as a dataset (see :func:`from_array`).

    The data enters graphs as a dask array whose nav blocks are the partitions, so each
    task receives just its block.

    Examples
    --------
    >>> import dask.array as da, ltdask
    >>> ds = ltdask.from_array(da.ones((4, 6, 8, 8), chunks=(2, 6, 8, 8)))
    >>> type(ds).__name__, ds.path, ds.to_dask().chunks[:2]  # the partitions: dask's blocks
    ('ArrayDataSet', '<array>', ((2, 2), (6,)))
    """

    path = "<array>"

    def __init__(
        self, array, sig_dims: int = 2, dims=None, nav_shape=None, sig_shape=None, sync_offset=0
    ):
        import dask.array as da

        coords = {}
        if _is_dataarray(array):
            array, dims, coords = unwrap_dataarray(array, dims)
        sparse_array = _sparse_input(array)
        #: sparse data (a ``sparse`` array): tiles delivered sparse where UDFs take them
        self.sparse = sparse_array is not None
        if self.sparse:
            array = sparse_array
            if sync_offset != 0:
                raise DataSetError(
                    f"from_array: sync_offset={sync_offset} is not supported for sparse "
                    "arrays; shift the frames first (or densify the array)"
                )
            if nav_shape is not None or sig_shape is not None:
                nav_ = tuple(array.shape[:-sig_dims]) if nav_shape is None else nav_shape
                sig_ = tuple(array.shape[-sig_dims:]) if sig_shape is None else sig_shape
                nav_ = check_shape(nav_, "nav_shape", self.path)
                sig_ = check_shape(sig_, "sig_shape", self.path)
                if math.prod(nav_) * math.prod(sig_) != math.prod(array.shape):
                    raise DataSetError(
                        f"from_array: nav_shape={nav_} and sig_shape={sig_} do not fit the "
                        f"sparse array of shape {tuple(array.shape)}"
                    )
                array = array.reshape((*nav_, *sig_))
                sig_dims = len(sig_)
                nav_shape = sig_shape = None
            self.array_backends = (SPARSE_COO, "scipy.sparse.csr_matrix", "numpy")
        if not hasattr(array, "shape") or not hasattr(array, "dtype"):
            array = np.asarray(array)
        sig_dims = check_sig_dims(sig_dims, "from_array", array.shape)
        own_nav, own_sig = tuple(array.shape[:-sig_dims]), tuple(array.shape[-sig_dims:])
        # the frames as a stream, as a file holds them: nav_shape, sig_shape and sync_offset
        # lay them out differently (as LiberTEM's memory datasets do)
        relaid = nav_shape is not None or sig_shape is not None or sync_offset != 0
        nav = own_nav if nav_shape is None else check_shape(nav_shape, "nav_shape", self.path)
        sig = own_sig if sig_shape is None else check_shape(sig_shape, "sig_shape", self.path)
        if math.prod(sig) != math.prod(own_sig):
            raise DataSetError(
                f"from_array: sig_shape={sig} does not fit the array's frames of shape "
                f"{own_sig} ({math.prod(own_sig)} pixels)"
            )
        image_count = math.prod(own_nav)
        super().__init__(
            nav, sig, array.dtype, sync_offset=sync_offset, image_count=image_count, dims=dims
        )
        self.coords = {} if relaid else coords
        chunks = (*self.nav_chunks, *((s,) for s in self.sig_shape))
        if relaid:
            darr = self._relaid(da.asarray(array).reshape((image_count, *sig)))
        elif isinstance(array, da.Array):
            darr = array
        else:
            from dask.base import tokenize

            darr = da.from_array(
                array,
                chunks=chunks,
                name=f"ltdask-array-{tokenize(array)}",
                asarray=not self.sparse,
            )
        self._array = darr
        self._array_name = darr.name

    def _relaid(self, stream):
        """The stream of frames laid out on the nav shape: position ``p`` holds frame
        ``p + sync_offset``, zeros where there is none."""
        import dask.array as da

        start, stop = self.present_range
        first = start + self.sync_offset
        pieces = [
            da.zeros((start, *self.sig_shape), dtype=stream.dtype),
            stream[first : first + stop - start],
            da.zeros((self.num_frames - stop, *self.sig_shape), dtype=stream.dtype),
        ]
        flat = da.concatenate([p for p in pieces if p.shape[0]], axis=0)
        sizes = tuple(p.num_frames for p in self.get_partitions())
        flat = flat.rechunk((sizes, *((s,) for s in self.sig_shape)))
        return flat.reshape((*self.nav_shape, *self.sig_shape))

    def need_decode(self, read_dtype, roi=None) -> bool:
        return roi is not None or np.dtype(read_dtype) != self.raw_dtype

    def get_min_sig_size(self) -> int:
        # sparse frames are not cut into signal slices
        return math.prod(self.sig_shape) if self.sparse else super().get_min_sig_size()

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        return (tileshape[0], *self.sig_shape) if self.sparse else tileshape

    def iter_tiles(self, positions, scheme, dtype, block=None, array_backend=None):
        """Tiles (see :meth:`DataSet.iter_tiles`); for sparse data also as `array_backend`
        (one of :attr:`array_backends`: 2-D backends ``(n, pixels)``)."""
        if array_backend in (None, "numpy"):
            for data, first, s, _ in self.iter_flat_tiles(positions, scheme, dtype, block):
                yield data, first, s
            return
        if not self.sparse or array_backend not in self.array_backends:
            raise DataSetError(
                f"{self.path}: array_backend={array_backend!r}; expected one of "
                f"{self.array_backends}"
            )
        from sparseconverter import for_backend

        local = self._local(positions)
        frames = block.reshape((-1, *self.sig_shape))
        for first in range(0, positions.size, scheme.depth):
            tile = frames[local[first : first + scheme.depth]].astype(dtype)
            if array_backend != SPARSE_COO:
                tile = for_backend(tile.reshape((tile.shape[0], -1)), array_backend)
            yield tile, first, 0

    def _local(self, positions: np.ndarray) -> np.ndarray:
        """`positions` relative to their partition's first frame (the block is a whole
        partition; an ROI may skip its first frames). The first frame from the nav grid's
        chunk bounds, dim by dim: listing the partitions took 3 ms of each task of a scan in
        256 partitions (a third of a live DECTRIS run's time)."""
        coords = np.unravel_index(int(positions[0]), self.nav_shape)
        first = []
        for c, chunks in zip(coords, self.nav_chunks, strict=True):
            bounds = np.cumsum((0, *chunks))
            first.append(int(bounds[np.searchsorted(bounds, c, side="right") - 1]))
        start = int(np.ravel_multi_index(tuple(first), self.nav_shape)) if first else 0
        return positions - start

    def for_task(self) -> ArrayDataSet:
        light = object.__new__(type(self))
        light.__dict__.update(self.__dict__)
        light._array = None
        light.coords = {}  # only to_xarray needs them
        return light

    def partition_blocks(self):
        chunks = (*self.nav_chunks, *((s,) for s in self.sig_shape))
        if self._array.chunks == chunks:
            return self._array
        return self._array.rechunk(chunks)

    def read_frames(self, positions, sig_slice: Slice, dtype, block=None) -> np.ndarray:
        raise DataSetError("in-memory datasets are read through their dask blocks")

    def iter_flat_tiles(
        self, positions: np.ndarray, scheme: TilingScheme, dtype, block=None
    ) -> Iterator[tuple[np.ndarray, int, int, tuple | None]]:
        if block is None:
            raise DataSetError("ArrayDataSet.iter_tiles needs the partition's block")
        dtype = np.dtype(dtype)
        if positions.size == 0:
            return
        if self.sparse:
            block = block.todense()  # (the dense path: UDFs that want numpy)
        flat = np.asarray(block).reshape((-1, *self.sig_shape))
        local = self._local(positions)
        contiguous = local[-1] - local[0] == local.size - 1
        convert = flat.dtype != dtype
        buf = None
        for first in range(0, positions.size, scheme.depth):
            stop = min(positions.size, first + scheme.depth)
            if contiguous:
                frames = flat[local[first] : local[first] + stop - first]
            else:
                frames = flat[local[first:stop]]
            if convert or not frames.flags.c_contiguous:
                if buf is None:
                    buf = np.empty((scheme.depth, *self.sig_shape), dtype=dtype)
                out = buf[: stop - first]
                out[...] = frames
                frames = out
            rows = frames.reshape(frames.shape[0], -1)
            for s, index in enumerate(scheme.sig_indices):
                r = scheme.flat_ranges[s]
                data = frames[(slice(None), *index)]
                yield data, first, s, (rows, *r) if r is not None else flat_of(data)

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self._array_name)


@takes_calibration
def from_array(
    array, sig_dims: int = 2, dims=None, nav_shape=None, sig_shape=None, sync_offset: int = 0
) -> ArrayDataSet:
    """A numpy, dask or xarray array (nav dims first, then `sig_dims` signal dims) as a
    dataset.

    Parameters
    ----------
    array
        A numpy or dask array (or anything ``numpy.asarray`` takes), or an
        `xarray.DataArray`: its data (a dask-backed one stays lazy), its dim names and its
        coordinates (``ds.coords``, which :meth:`~ltdask.io.dataset.DataSet.to_xarray`
        gives back) make the dataset; its name and attrs are not kept.
    sig_dims
        How many trailing dims are the frame.
    dims
        Names of the nav and sig dims (for a DataArray: new names for its dims).
    nav_shape, sig_shape, sync_offset
        Lay the array's frames out as a file's stream of frames would be (as LiberTEM's
        memory datasets do): another scan shape, frames of another shape with the same
        pixels, and the first frame at position ``-sync_offset`` (positive: frames skipped;
        negative: positions without a frame, zeros and invalid in results).

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((4, 4, 16, 16), dtype=np.float32))
    >>> ds.shape.nav, ds.shape.sig
    (Shape((4, 4), sig_dims=0), Shape((16, 16), sig_dims=2))

    A DataArray keeps its dims and coordinates:

    >>> import xarray as xr
    >>> xa = xr.DataArray(np.zeros((3, 4, 8, 8)), dims=("y", "x", "ky", "kx"),
    ...                   coords={"y": [0.0, 0.5, 1.0]})
    >>> ds = ltdask.from_array(xa)
    >>> ds.dims, ds.to_xarray().y.values.tolist()
    (('y', 'x', 'ky', 'kx'), [0.0, 0.5, 1.0])
    """
    return ArrayDataSet(array, sig_dims, dims, nav_shape, sig_shape, sync_offset)
