"""`UDFMeta`: what a UDF knows about the data it is processing (``self.meta``)."""

from __future__ import annotations

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.io.calibration import Axis


class UDFMeta:
    """Context of a UDF call, as ``self.meta``.

    Attributes
    ----------
    dataset_shape : Shape
        Shape of the whole scan (nav dims as opened).
    partition_shape : Shape
        Flat-nav shape of the current partition, ROI applied (the whole scan, ROI applied,
        on the main node).
    dataset_dtype, input_dtype : numpy.dtype
        The data's native dtype and the dtype the UDF receives.
    roi : numpy.ndarray or None
        Nav-shaped boolean ROI.
    slice : Slice
        The current frame/tile/partition in flat, ROI-compressed nav coordinates.
    sig_slice : Slice
        The signal part of the current tile.
    tiling_scheme, tiling_scheme_idx
        The negotiated scheme and the index of the current signal slice in it.
    device_class, array_backend, threads_per_worker
        ``"cpu"``, ``"numpy"`` and 1: each task runs on one thread of the dask scheduler.
    corrections : ltdask.CorrectionSet or None
        The detector corrections of the run.
    run_id : str or None
        ltdask extension: an id of the run, fresh for each run, while its partitions are
        processed (None elsewhere): a key for per-process caches of what a UDF derives from
        its parameters (so nothing leaks into a later run).
    nav_calibration, sig_calibration : tuple of ltdask.io.calibration.Axis
        ltdask extension: the dataset's physical calibration of each nav and signal dim.

    Made by the engine (:func:`ltdask.udf.bind.make_meta`), one per UDF instance. Made by
    hand (as LiberTEM's tests do), LiberTEM's ``partition_slice=`` (a `Slice` of the
    partition, or None) gives ``partition_shape``.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> class ColumnUDF(ltdask.UDF):
    ...     def get_result_buffers(self):
    ...         return {"x": self.buffer(kind="nav", dtype="int64")}
    ...     def process_frame(self, frame):  # the scan column of this frame
    ...         self.results.x[:] = self.meta.coordinates[0, 1]
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> ColumnUDF().compute(ds)["x"].values.tolist()
    [[0, 1, 2], [0, 1, 2]]
    """

    def __init__(
        self,
        dataset_shape: Shape,
        dataset_dtype,
        input_dtype,
        roi: np.ndarray | None = None,
        partition_shape: Shape | None = None,
        tiling_scheme=None,
        positions: np.ndarray | None = None,
        slice_origin: int = 0,
        corrections=None,
        run_id: str | None = None,
        nav_calibration: tuple[Axis, ...] | None = None,
        sig_calibration: tuple[Axis, ...] | None = None,
        partition_slice: Slice | None = None,
    ):
        if partition_shape is None and partition_slice is not None:
            # LiberTEM's keyword: the partition as a slice of the flat-nav dataset
            partition_shape = partition_slice.shape
        self._given_partition_slice = partition_slice
        self.dataset_shape = dataset_shape
        self.dataset_dtype = np.dtype(dataset_dtype)
        self.input_dtype = np.dtype(input_dtype)
        self.roi = roi
        self.partition_shape = partition_shape
        self.tiling_scheme = tiling_scheme
        self.tiling_scheme_idx: int | None = None
        self.sig_slice: Slice | None = None
        self._slice: Slice | None = None
        self._origin: int | None = None
        self._count = 0
        self.device_class = "cpu"
        self.array_backend = "numpy"
        self.threads_per_worker = 1
        self.corrections = corrections
        self.run_id = run_id
        self.nav_calibration = nav_calibration or (Axis(),) * len(dataset_shape.nav)
        self.sig_calibration = sig_calibration or (Axis(),) * len(dataset_shape.sig)
        # flat nav positions (true coordinates) of the partition's selected frames
        self._positions = positions
        self._slice_origin = slice_origin
        self._valid_nav_mask: np.ndarray | None = None
        self._valid_nav_mask_full: np.ndarray | None = None

    @property
    def coordinates(self) -> np.ndarray:
        """True nav coordinates ``(n, nav_dims)`` of the frames in the current slice."""
        if self._positions is None or self._origin is None:
            return np.zeros((0, len(self.dataset_shape.nav)), dtype=np.int64)
        a = self._origin - self._slice_origin
        flat = self._positions[a : a + self._count]
        return np.stack(np.unravel_index(flat, tuple(self.dataset_shape.nav)), axis=-1)

    @property
    def slice(self) -> Slice | None:
        """The current frame/tile/partition in flat, ROI-compressed nav coordinates."""
        sig = self.sig_slice
        if self._slice is None and self._origin is not None and sig is not None:
            self._slice = Slice(
                (self._origin, *sig.origin),
                Shape((self._count, *sig.shape), sig_dims=sig.shape.sig_dims),
            )
        return self._slice

    @property
    def _partition_slice(self) -> Slice | None:
        """The current partition in flat, ROI-compressed nav coordinates, whole frames
        (LiberTEM's private ``meta._partition_slice``, which its tests compare with
        ``meta.slice`` in ``process_partition``)."""
        if self._given_partition_slice is not None:
            return self._given_partition_slice
        shape = self.partition_shape
        if shape is None:
            return None
        return Slice((self._slice_origin, *(0,) * shape.sig_dims), shape)

    def set_slice(self, origin: int, count: int, sig_slice: Slice, scheme_idx: int | None):
        # per tile, so cheap: the Slice is only built when a UDF asks for it
        self._origin = origin
        self._count = count
        self._slice = None
        self.sig_slice = sig_slice
        self.tiling_scheme_idx = scheme_idx

    def get_valid_nav_mask(self, full_nav: bool = False) -> np.ndarray | None:
        """Flat boolean mask of the nav positions holding valid results so far.

        None while processing data; in ``merge`` the positions merged before; in
        ``get_results`` every position that holds data. ROI-compressed unless `full_nav`.
        """
        return self._valid_nav_mask_full if full_nav else self._valid_nav_mask

    def set_valid_nav_mask(self, full: np.ndarray | None, compressed: np.ndarray | None):
        """Set what `get_valid_nav_mask` returns (the engine does, before ``merge`` and
        ``get_results``): the flat mask over all positions and over the ROI's."""
        self._valid_nav_mask_full = full
        self._valid_nav_mask = compressed
