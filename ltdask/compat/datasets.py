"""LiberTEM's in-memory dataset (``libertem.io.dataset.memory.MemoryDataSet``) as an
ltdask dataset; ``Context.load("memory", ...)`` makes it too."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ltdask.compat.executors import refuse
from ltdask.exceptions import DataSetError
from ltdask.io._memory import ArrayDataSet
from ltdask.io.calibration import calibrated
from ltdask.io.partition import Sizing

__all__ = ["MemoryDataSet"]

#: LiberTEM's keywords about its own reading of the array (the base shape of tiles, the
#: cast check, a forced decode step, the IO backend): ltdask negotiates tiles itself and
#: reads the array as it is
_READING_KEYS = ("check_cast", "io_backend", "base_shape", "force_need_decode")


class MemoryDataSet(ArrayDataSet):
    """An array in memory as a dataset, with LiberTEM's keywords: `data` (or an array of
    zeros of `datashape`, float32), `sig_dims`, and ``nav_shape``, ``sig_shape``,
    ``sync_offset`` (see :func:`ltdask.from_array`). As in LiberTEM, `tileshape` (frames,
    then the signal extent) is the shape of every tile a run reads (smaller at the edges
    of the frame and the partition; a partition UDF gets whole partitions, frame UDFs need
    a tileshape of whole frames), and `num_partitions` the number of partitions of the
    scan (cut along the nav grid: where whole rows do not give that many, the nearest
    larger count; at most one per frame). `array_backends` (the array backends
    the dataset gives tiles in): with a dense one (``"numpy"``, ``"cupy"``, ``"cuda"``) the
    tiles are dense (a run converts them to the backend its UDFs take); with only sparse
    ones (``"sparse.COO"``, ``"scipy.sparse.csr_matrix"``, ...) the array is held as a
    ``sparse.COO`` array and the tiles are sparse. LiberTEM's ``base_shape``,
    ``force_need_decode`` and ``check_cast`` are taken and have no effect (ltdask sizes
    tiles itself); ``tiledelay`` and ``crop_frames=True`` (LiberTEM's test hooks
    for slow and cropped tiles) are refused. ``ds.data`` is the array given (as in
    LiberTEM); ``nav_calibration`` / ``sig_calibration`` as for :func:`ltdask.from_array`.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.datasets import MemoryDataSet
    >>> ds = MemoryDataSet(data=np.ones((2, 3, 4, 4)), tileshape=(1, 4, 4), num_partitions=2)
    >>> tuple(ds.shape.nav), tuple(ds.shape.sig)
    ((2, 3), (4, 4))
    >>> [(p.start, p.stop) for p in ds.get_partitions()]
    [(0, 3), (3, 6)]
    """

    def __init__(
        self,
        data=None,
        datashape=None,
        sig_dims: int = 2,
        tiledelay=None,
        crop_frames: bool = False,
        array_backends=None,
        tileshape=None,
        num_partitions=None,
        *,
        nav_calibration=None,
        sig_calibration=None,
        **kwargs,
    ):
        if tiledelay is not None:
            refuse("MemoryDataSet", "tiledelay", tiledelay, "ltdask tiles are not slowed down")
        if crop_frames:
            refuse("MemoryDataSet", "crop_frames", crop_frames, "ltdask negotiates its tiles")
        for key in _READING_KEYS:
            kwargs.pop(key, None)
        if data is None:
            if datashape is None:
                raise ValueError("MemoryDataSet: give data= (an array) or datashape= (a shape)")
            data = np.zeros(datashape, dtype=kwargs.pop("dtype", np.float32))
        self._data = data
        #: the partition count asked for (None: ltdask's own partitioning)
        self._num_partitions = _partition_count(num_partitions)
        held = data if array_backends is None else _in_backends(data, tuple(array_backends))
        super().__init__(held, sig_dims=sig_dims, **kwargs)
        #: the tile shape asked for (None: negotiated)
        self._tileshape = _tile_shape(tileshape, self.sig_shape)
        calibrated(self, nav_calibration, sig_calibration)

    def partition_grid(self, sizing: Sizing) -> tuple[tuple[int, ...], ...]:
        """`num_partitions` partitions whatever the sizing; else ltdask's own grid."""
        if self._num_partitions is None:
            return super().partition_grid(sizing)
        return _grid_of(self.nav_shape, self._num_partitions)

    def need_decode(self, read_dtype, roi=None) -> bool:
        # a tile shape that cuts the frame gives tiles that are copies, not views of whole
        # frames (which the negotiator would otherwise prefer to the base shape)
        cuts = self._tileshape is not None and self._tileshape[1:] != tuple(self.sig_shape)
        return cuts or super().need_decode(read_dtype, roi)

    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        if self._tileshape is None:
            return super().get_base_shape(roi)
        return self._tileshape[1:]

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        if self._tileshape is None:
            return super().adjust_tileshape(tileshape, roi)
        # as LiberTEM's: the tile shape given, whatever the UDFs prefer
        return super().adjust_tileshape(self._tileshape, roi)

    @property
    def data(self):
        """The array the dataset was made from (LiberTEM's ``MemoryDataSet.data``)."""
        if self._data is None:
            raise AttributeError("MemoryDataSet.data is not sent to tasks")
        return self._data

    def for_task(self) -> MemoryDataSet:
        light = super().for_task()
        assert isinstance(light, MemoryDataSet)
        light._data = None
        return light


def _partition_count(num_partitions) -> int | None:
    if num_partitions is None:
        return None
    if isinstance(num_partitions, bool) or int(num_partitions) != num_partitions:
        raise ValueError(
            f"MemoryDataSet: num_partitions={num_partitions!r}; expected a whole number of "
            "at least 1, or None"
        )
    if num_partitions < 1:
        raise ValueError(
            f"MemoryDataSet: num_partitions={num_partitions!r}; expected at least 1, or None"
        )
    return int(num_partitions)


def _tile_shape(tileshape, sig_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    if tileshape is None:
        return None
    shape = tuple(int(t) for t in tileshape)
    if len(shape) != len(sig_shape) + 1:
        raise DataSetError(
            f"MemoryDataSet: tileshape={tuple(tileshape)}; expected {len(sig_shape) + 1} "
            f"numbers: the frames of a tile, then its extent in the {len(sig_shape)} signal "
            f"dims of {sig_shape}"
        )
    if any(t < 1 for t in shape) or any(t > s for t, s in zip(shape[1:], sig_shape, strict=True)):
        raise DataSetError(
            f"MemoryDataSet: tileshape={shape}; expected at least one frame and a signal "
            f"extent of 1 up to the frame's {sig_shape} in each dim"
        )
    return shape


def _grid_of(nav_shape: tuple[int, ...], count: int) -> tuple[tuple[int, ...], ...]:
    """Nav chunks that cut the scan into `count` partitions, each one flat-nav range: the
    first nav dim that `count` partitions reach is cut at LiberTEM's partition boundaries
    (``np.linspace`` over the frames) rounded to whole rows of it, the dims before it into
    single rows; where the rows before it do not divide `count`, the nearest larger
    count."""
    total = math.prod(nav_shape)
    if count > total:
        warnings.warn(
            f"MemoryDataSet: num_partitions={count} is more than the {total} frames; "
            f"using {total} (one frame each)",
            UserWarning,
            stacklevel=4,
        )
        count = total
    chunks: list[tuple[int, ...]] = []
    rows = 1  # partitions made by the dims before the cut one
    for j, size in enumerate(nav_shape):
        if rows * size >= count:
            pieces = -(-count // rows)
            bounds = np.floor(np.linspace(0, size, pieces + 1) + 0.5).astype(int)
            chunks.append(tuple(int(b) for b in np.diff(bounds)))
            chunks.extend((n,) for n in nav_shape[j + 1 :])
            return tuple(chunks)
        chunks.append((1,) * size)
        rows *= size
    return tuple(chunks)


_DENSE = ("numpy", "cupy", "cuda")


def _in_backends(data, backends: tuple):
    if any(b in _DENSE for b in backends):
        return data
    if backends and all(str(b).startswith(("sparse.", "scipy.sparse.")) for b in backends):
        from sparseconverter import for_backend

        return for_backend(data, "sparse.COO")
    refuse(
        "MemoryDataSet",
        "array_backends",
        backends,
        "ltdask's memory datasets give dense tiles (numpy, cupy, cuda) or sparse ones "
        "(sparse.*, scipy.sparse.*); a run's backends= picks what the UDFs see",
    )
