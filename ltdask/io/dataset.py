"""`DataSet`: a scan described by its layout; reads happen in tasks, never at open time."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.common.shape import RoiBuilder, default_dims
from ltdask.exceptions import DataSetError, MissingFramesWarning, UDFError, warn
from ltdask.io.calibration import Calibrated
from ltdask.io.checks import SUPPORTED_DTYPES, check_dtype, check_shape, unsupported
from ltdask.io.partition import Partition, Sizing, TooManyPartitions, nav_grid, partitions_for_grid
from ltdask.io.tiling import Negotiator, TilingPreferences, TilingScheme, flat_of

#: partitions without any frame (a nav shape far beyond the files) that planning accepts
MAX_EMPTY_PARTITIONS = 10_000
#: bytes of raw data a signal slice should at least hold (LiberTEM's rule of thumb)
MIN_SIG_BYTES = 4 * 4096


class DataSet(Calibrated):
    """A scan of ``nav_shape`` positions, each holding a ``sig_shape`` frame.

    Subclasses say where the frames are (:meth:`read_frames`, :meth:`iter_tiles`); the base
    class owns partitioning, tiling negotiation, the frame bookkeeping of ``sync_offset`` and
    the conversion to dask and xarray.

    Frame ``i`` of the scan (flat nav order) is frame ``i + sync_offset`` of the files' frame
    stream; positions whose frame is not in the files read as zeros.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((4, 5, 16, 16), dtype=np.uint16))
    >>> isinstance(ds, ltdask.DataSet), ds.nav_shape, ds.sig_shape, ds.dtype
    (True, (4, 5), (16, 16), dtype('uint16'))
    """

    #: where the data comes from, for messages
    path: str = "<memory>"
    #: where a nav shape the user did not give comes from (``"ScanY=256, ScanX=256 in
    #: 'scan.hdr'"``), for messages; such a shape far beyond the files fails at open
    nav_origin: str | None = None
    #: coordinates of the scan's dims (name -> ``xarray.Variable``), given to
    #: :meth:`to_xarray`; e.g. those of a DataArray given to :func:`ltdask.from_array`
    coords: dict = {}
    #: the array types :meth:`iter_tiles` delivers, the one the data is stored in first
    #: (LiberTEM's ``BACKEND_*`` names); a dataset listing more than numpy takes
    #: ``iter_tiles(..., array_backend=name)`` and gives 2-D backends' tiles as
    #: ``(frames, pixels)``
    array_backends: tuple[str, ...] = ("numpy",)

    def __init__(
        self,
        nav_shape: Sequence[int],
        sig_shape: Sequence[int],
        dtype,
        sync_offset: int = 0,
        image_count: int | None = None,
        dims: Sequence[str] | None = None,
    ):
        where = self.path
        nav = check_shape(nav_shape, "nav_shape", where)
        sig = check_shape(sig_shape, "sig_shape", where)
        self.raw_dtype = check_dtype(dtype, where)
        self.shape = Shape(nav + sig, sig_dims=len(sig))
        self.image_count = math.prod(nav) if image_count is None else int(image_count)
        try:
            self.sync_offset = int(sync_offset)
            if self.sync_offset != sync_offset:
                raise ValueError  # 1.5 or "3" would be silently truncated or parsed
        except (TypeError, ValueError):
            raise DataSetError(f"{where}: sync_offset={sync_offset!r} is not an integer") from None
        if self.image_count > 0 and not -self.image_count < self.sync_offset < self.image_count:
            raise DataSetError(
                f"{where}: sync_offset={self.sync_offset} is beyond the data; expected a value "
                f"in ({-self.image_count}, {self.image_count}), the files hold "
                f"{self.image_count} frames"
            )
        if dims is None:
            dims = default_dims(len(nav), len(sig))
        dims = tuple(str(d) for d in dims)
        if len(dims) != len(self.shape) or len(set(dims)) != len(dims):
            raise DataSetError(
                f"{where}: dims={dims} must be {len(self.shape)} distinct names "
                f"(nav dims then sig dims)"
            )
        self.dims = dims
        start, stop = self.present_range
        if self.num_frames > self.image_count:
            if self.nav_origin is not None:
                # the user chose no nav shape: say now that the header's cannot be processed
                self.checked_grid(Sizing.from_settings())
            warn(
                f"{where}: {self._nav_text()} asks for {self.num_frames} frames, but the files "
                f"hold {self.image_count} (sync_offset={self.sync_offset}): only positions "
                f"{start} to {stop - 1} (flat nav order) hold frames; the other "
                f"{self.num_frames - (stop - start)} read as zeros and are invalid in results",
                MissingFramesWarning,
            )

    @property
    def roi(self) -> RoiBuilder:
        """ROIs by indexing: ``ds.roi[2:5, 3]`` is a nav-shaped boolean array, True there."""
        return RoiBuilder(self.nav_shape)

    # -- shapes and dtypes -------------------------------------------------------------
    @property
    def nav_shape(self) -> tuple[int, ...]:
        return tuple(self.shape.nav)

    @property
    def sig_shape(self) -> tuple[int, ...]:
        return tuple(self.shape.sig)

    @property
    def dtype(self) -> np.dtype:
        """The pixels' dtype in this machine's byte order."""
        return self.raw_dtype.newbyteorder("=")

    @property
    def num_frames(self) -> int:
        return math.prod(self.nav_shape)

    @property
    def nbytes(self) -> int:
        return self.shape.size * self.dtype.itemsize

    # -- frames present in the files ----------------------------------------------------
    @property
    def present_range(self) -> tuple[int, int]:
        """Flat nav positions ``[start, stop)`` whose frames exist in the files."""
        start = max(0, -self.sync_offset)
        stop = min(self.num_frames, self.image_count - self.sync_offset)
        return start, max(start, stop)

    def stream_frames(self, positions: np.ndarray) -> np.ndarray:
        """Stream frame index for flat nav `positions`; -1 where the frame does not exist."""
        frames = np.asarray(positions, dtype=np.int64) + self.sync_offset
        frames[(frames < 0) | (frames >= self.image_count)] = -1
        return frames

    def valid_nav_mask(self) -> np.ndarray:
        """Boolean nav-shaped array: True where the position's frame exists in the files."""
        mask = np.zeros(self.num_frames, dtype=bool)
        start, stop = self.present_range
        mask[start:stop] = True
        return mask.reshape(self.nav_shape)

    # -- negotiation hooks ---------------------------------------------------------------
    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        """Every tile's signal extent is a multiple of this (default: whole rows)."""
        sig = self.sig_shape
        return (1,) * (len(sig) - 1) + (sig[-1],)

    def get_min_sig_size(self) -> int:
        """Fewest pixels a signal slice should hold."""
        return max(1, MIN_SIG_BYTES // self.raw_dtype.itemsize)

    def get_max_io_size(self) -> int | None:
        return None

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        return tileshape

    def need_decode(self, read_dtype, roi=None) -> bool:
        """Whether tiles must be copied/decoded rather than handed out as views."""
        return roi is not None or np.dtype(read_dtype) != self.raw_dtype

    # -- partitions ------------------------------------------------------------------------
    def partition_frame_bytes(self) -> int:
        """The bytes of one frame in a partition's work, which ``ltdask.partition-bytes``
        divides the scan by: float32 (or wider) pixels; sparse formats, their entries."""
        return math.prod(self.sig_shape) * max(4, self.dtype.itemsize)

    @functools.cached_property
    def nav_chunks(self) -> tuple[tuple[int, ...], ...]:
        """The partition grid (chunk sizes per nav dim) for the settings when first asked."""
        return self.checked_grid(Sizing.from_settings())

    def partition_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        """The partition grid for `sizing` (chunked formats align it to their chunks)."""
        return nav_grid(self.nav_shape, self.partition_frame_bytes(), sizing=sizing)

    def checked_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        """`partition_grid`; a `DataSetError` where most partitions would hold no frame."""
        try:
            chunks = self.partition_grid(sizing)
        except TooManyPartitions as e:  # (say why, for which file)
            self._check_empty_partitions(e.count)
            raise DataSetError(f"{self.path}: {self._nav_text()}: {e}") from None
        self._check_empty_partitions(math.prod(len(c) for c in chunks))
        return chunks

    def _nav_text(self) -> str:
        origin = f" (from {self.nav_origin})" if self.nav_origin else ""
        return f"nav_shape={self.nav_shape}{origin}"

    def _check_empty_partitions(self, count: int) -> None:
        start, stop = self.present_range
        empty = count * (1 - (stop - start) / self.num_frames)
        if empty > MAX_EMPTY_PARTITIONS:
            raise DataSetError(
                f"{self.path}: {self._nav_text()} asks for {self.num_frames} frames, but the "
                f"files hold {self.image_count}: processing it would take {count} partitions, "
                f"about {int(empty)} of them without a single frame; give a nav_shape that "
                "fits the frames in the files"
            )

    def get_partitions(self) -> list[Partition]:
        return partitions_for_grid(self.nav_chunks)

    # -- runs of data that arrives over time (live acquisitions, `ltdask.acquire`) ----------
    def planned_for(self, target, in_steps: bool = False) -> DataSet:
        """This dataset as a run for `target` (a `RunTarget`; `in_steps`: in steps of
        partitions readable now, `ready_partitions`) reads it."""
        return self

    def ready_partitions(self, first: int, want: int = 1, patience: float = 0.0) -> int | None:
        """Partitions from `first` on that can be read now (waits for one, then up to
        `patience` s for `want` of them); None: all."""
        return None

    def settle(self, datasets: list) -> list:
        """A run's computed results as this dataset vouches for them (frames that never
        came: invalid)."""
        return datasets

    def hands_out_views(self, dtype) -> bool:
        """Whether reading as `dtype` gives views of the files rather than copies."""
        return False

    def negotiate(
        self,
        consumers: Sequence[TilingPreferences],
        read_dtype,
        roi: np.ndarray | None = None,
        negotiator: Negotiator | None = None,
        max_io_size: int | None = None,
        excluded: np.ndarray | None = None,
    ) -> TilingScheme:
        """The tiling scheme for `consumers` reading this dataset as `read_dtype`.

        `excluded`: coordinates ``(sig_dims, N)`` of pixels repaired from their 3×3
        neighbourhood; no tile boundary then runs next to one.

        Raises a `UDFError` if tiles cannot be read as `read_dtype` (a UDF run's dtype
        comes from the UDFs' ``get_preferred_input_dtype()``): this runs when the run is
        built, before numba meets the dtype in a task.
        """
        read_dtype = self.run_dtype(read_dtype, promote=False)
        negotiator = negotiator or Negotiator()
        depth = max(p.num_frames for p in self.get_partitions())
        return negotiator.get_scheme(consumers, self, read_dtype, depth, roi, max_io_size, excluded)

    # -- reading (in tasks) -----------------------------------------------------------------
    def read_frames(self, positions: np.ndarray, sig_slice: Slice, dtype) -> np.ndarray:
        """Frames at flat nav `positions`, cut to `sig_slice`, as `dtype`; missing ones zero.

        May return a read-only view of the files.
        """
        raise NotImplementedError

    def iter_tiles(
        self,
        positions: np.ndarray,
        scheme: TilingScheme,
        dtype,
        block=None,
        array_backend: str | None = None,
    ) -> Iterator[tuple[Any, int, int]]:
        """Tiles of the frames at `positions` (sorted flat nav positions whose frames exist).

        Yields ``(data, first, scheme_idx)``: ``data`` has shape ``(n, *slice_shape)`` and holds
        ``positions[first:first + n]`` cut to ``scheme[scheme_idx]``. ``data`` may be a
        reused buffer or a read-only view: consumers must not keep it. `array_backend`:
        one of :attr:`array_backends` (2-D backends give ``(n, pixels)`` tiles); numpy by
        default, the only one this base class delivers.

        Subclasses implement this or :meth:`iter_flat_tiles`; each defaults to the other.
        """
        if array_backend not in (None, "numpy"):
            raise DataSetError(
                f"{self.path}: array_backend={array_backend!r}; expected one of "
                f"{self.array_backends}"
            )
        if type(self).iter_flat_tiles is DataSet.iter_flat_tiles:
            raise NotImplementedError
        flat_tiles = self.iter_flat_tiles(positions, scheme, dtype, block)
        return ((data, first, s) for data, first, s, _ in flat_tiles)

    def iter_flat_tiles(
        self, positions: np.ndarray, scheme: TilingScheme, dtype, block=None
    ) -> Iterator[tuple[np.ndarray, int, int, tuple | None]]:
        """Like :meth:`iter_tiles`, yielding ``(data, first, scheme_idx, flat)``.

        ``flat`` is ``(frames, p0, p1)``: a C-contiguous ``(n, pixels)`` array whose
        ``frames[:, p0:p1]`` holds ``data`` flattened (so numba kernels can read row blocks
        of whole frames without strides), or None where there is no such array. UDF runs
        read through this method; by default it wraps :meth:`iter_tiles`."""
        for data, first, s in self.iter_tiles(positions, scheme, dtype, block):
            yield data, first, s, flat_of(data)

    def pixel_layout(self):
        """The `ltdask.io.layout.PixelLayout` of frames stored with their pixels moved."""

    def default_corrections(self):
        """The `ltdask.CorrectionSet` the acquisition carries (a stored dark frame...) or None:
        applied where no ``corrections=`` is given (``CorrectionSet()``: none)."""

    def for_task(self) -> DataSet:
        """What a task needs of this dataset (small, picklable)."""
        return self

    def partition_blocks(self):
        """A dask array whose nav blocks are the partitions' data, or None (tasks read files)."""
        return None

    # -- dask and xarray ---------------------------------------------------------------------
    def to_dask(self, dtype=None, chunks=None, corrections=None):
        """The scan as a dask array of shape ``nav + sig``: a `ltdask.io.scan_array.ScanArray`,
        whose sums and means of integers run ltdask's kernels (3x numpy's); with dask's
        array-expr engine on (``array.query-planning``) a plain dask array, whose kernel
        sums are ``ltdask.sum(arr, axis)`` and ``ltdask.mean(arr, axis)``.

        Parameters
        ----------
        dtype
            dtype of the chunks; the native dtype (this machine's byte order) by default.
        chunks
            dask chunks; by default nav chunks are the partitions and signal chunks the
            negotiated signal slices (whole frames unless the format stores tiles).
        corrections
            A `ltdask.CorrectionSet`: the frames as UDFs see them with it, as floats (at
            least float32); chunks hold whole frames where pixels are repaired. Positions
            without a frame stay zero. By default the :meth:`default_corrections` of the
            acquisition, if it has any (``CorrectionSet()``: none).

        Examples
        --------
        >>> import ltdask, numpy as np
        >>> data = np.arange(4 * 5 * 6 * 7, dtype=np.uint16).reshape(4, 5, 6, 7)
        >>> arr = ltdask.from_array(data).to_dask(dtype="float32")
        >>> arr.shape, arr.dtype, bool((arr.compute() == data).all())
        ((4, 5, 6, 7), dtype('float32'), True)
        """
        from ltdask.io.dask_array import dataset_to_dask

        if corrections is None:
            corrections = self.default_corrections()
        if corrections is not None and corrections.have_corrections():
            from ltdask.io.dask_array import corrected_dask

            return corrected_dask(self, corrections, dtype=dtype, chunks=chunks)
        return dataset_to_dask(self, dtype=dtype, chunks=chunks)

    def to_xarray(self, dtype=None, chunks=None, corrections=None):
        """The scan as a lazy `xarray.DataArray` with named dims and the dataset's
        :attr:`coords` (see :meth:`to_dask`)."""
        import xarray as xr

        arr = self.to_dask(dtype=dtype, chunks=chunks, corrections=corrections)
        return xr.DataArray(
            arr,
            dims=self.dims,
            coords=self.calibrated_coords() or None,
            name=type(self).__name__,
            attrs=self.attrs(),
        )

    def to_zarr(self, store, *args, **kwargs):
        """The scan written to the Zarr `store`: :func:`ltdask.store.write_dataset`."""
        from ltdask.store import write_dataset

        return write_dataset(self, store, *args, **kwargs)

    def to_hyperspy(self, *args, **kwargs):
        """A lazy HyperSpy signal of the scan: :func:`ltdask.to_hyperspy`."""
        from ltdask.store import to_hyperspy

        return to_hyperspy(self, *args, **kwargs)

    def attrs(self) -> dict:
        return {"path": str(self.path), "sync_offset": self.sync_offset}

    def resolve_dtype(self, dtype) -> np.dtype:
        """`dtype` (or the native one) checked for a sensible conversion from the data."""
        if dtype is None:
            return self.dtype
        dt = check_dtype(dtype, self.path)
        if self.dtype.kind == "c" and dt.kind != "c":
            raise DataSetError(
                f"{self.path}: cannot read complex data ({self.dtype}) as {dt}; "
                "ask for a complex dtype"
            )
        return dt.newbyteorder("=")

    def run_dtype(self, dtype, promote: bool = True) -> np.dtype:
        """The dtype a UDF run reads tiles as, given `dtype`: the ``numpy.result_type`` of
        the data's dtype and every UDF's ``get_preferred_input_dtype()``.

        float16 becomes float32 (with `promote`): the shipped UDFs compute in numba, which
        has no float16, and float32 holds every float16 value exactly.

        Raises
        ------
        ltdask.UDFError
            Tiles cannot be read as `dtype` (object, extended precision, strings...).
        """
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError) as e:
            raise UDFError(
                f"{self.path}: get_preferred_input_dtype() gave {dtype!r}, which is not a "
                f"numpy dtype ({e}); return one of {SUPPORTED_DTYPES}"
            ) from None
        reason = unsupported(dt)
        if reason is not None:
            raise UDFError(
                f"{self.path}: tiles cannot be read as {dt} ({reason}), the "
                f"numpy.result_type of the data's {self.dtype} and the UDFs' "
                f"get_preferred_input_dtype(); return one of {SUPPORTED_DTYPES}"
            )
        if promote and dt == np.float16:
            return np.dtype(np.float32)
        return dt.newbyteorder("=")

    def _token_fields(self) -> tuple:
        return (
            tuple(self.shape),
            self.shape.sig_dims,
            self.raw_dtype.str,
            self.sync_offset,
            self.image_count,
            self.dims,
        )

    def __dask_tokenize__(self):
        return (type(self).__qualname__, self._token_fields())

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.path!s}: nav {self.nav_shape}, sig {self.sig_shape}, "
            f"{self.dtype}>"
        )
