"""LiberTEM's in-memory dataset (``libertem.io.dataset.memory.MemoryDataSet``) as an
ltdask dataset; ``Context.load("memory", ...)`` makes it too."""

from __future__ import annotations

import numpy as np

from ltdask.compat.executors import refuse
from ltdask.io._memory import ArrayDataSet
from ltdask.io.calibration import calibrated

__all__ = ["MemoryDataSet"]

#: LiberTEM's keywords about its own reading of the array (tiles, their base shape,
#: partitions, the cast check, a forced decode step): ltdask negotiates tiles and
#: partitions itself and reads the array as it is
_READING_KEYS = (
    "tileshape",
    "num_partitions",
    "check_cast",
    "io_backend",
    "base_shape",
    "force_need_decode",
)


class MemoryDataSet(ArrayDataSet):
    """An array in memory as a dataset, with LiberTEM's keywords: `data` (or an array of
    zeros of `datashape`, float32), `sig_dims`, and ``nav_shape``, ``sig_shape``,
    ``sync_offset`` (see :func:`ltdask.from_array`). `array_backends` (the array backends
    the dataset gives tiles in): with a dense one (``"numpy"``, ``"cupy"``, ``"cuda"``) the
    tiles are dense (a run converts them to the backend its UDFs take); with only sparse
    ones (``"sparse.COO"``, ``"scipy.sparse.csr_matrix"``, ...) the array is held as a
    ``sparse.COO`` array and the tiles are sparse. LiberTEM's ``tileshape``,
    ``num_partitions``, ``base_shape``, ``force_need_decode`` and ``check_cast`` are taken
    and have no effect (ltdask sizes tiles
    and partitions itself); ``tiledelay`` and ``crop_frames=True`` (LiberTEM's test hooks
    for slow and cropped tiles) are refused. ``ds.data`` is the array given (as in
    LiberTEM); ``nav_calibration`` / ``sig_calibration`` as for :func:`ltdask.from_array`.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.datasets import MemoryDataSet
    >>> ds = MemoryDataSet(data=np.ones((2, 3, 4, 4)), tileshape=(1, 4, 4), num_partitions=2)
    >>> tuple(ds.shape.nav), tuple(ds.shape.sig)
    ((2, 3), (4, 4))
    """

    def __init__(
        self,
        data=None,
        datashape=None,
        sig_dims: int = 2,
        tiledelay=None,
        crop_frames: bool = False,
        array_backends=None,
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
        held = data if array_backends is None else _in_backends(data, tuple(array_backends))
        super().__init__(held, sig_dims=sig_dims, **kwargs)
        calibrated(self, nav_calibration, sig_calibration)

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
