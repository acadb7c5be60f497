"""LiberTEM's in-memory dataset (``libertem.io.dataset.memory.MemoryDataSet``) as an
ltdask dataset; ``Context.load("memory", ...)`` makes it too."""

from __future__ import annotations

import numpy as np

from ltdask.compat.executors import refuse

__all__ = ["MemoryDataSet"]

#: LiberTEM's keywords about its own reading of the array (tiles, partitions, the cast
#: check): ltdask negotiates tiles and partitions itself and reads the array as it is
_READING_KEYS = ("tileshape", "num_partitions", "check_cast", "io_backend")


def MemoryDataSet(  # noqa: N802  (LiberTEM's class name; ltdask's class is ArrayDataSet)
    data=None,
    datashape=None,
    sig_dims: int = 2,
    tiledelay=None,
    crop_frames: bool = False,
    array_backends=None,
    **kwargs,
):
    """An array in memory as a dataset, with LiberTEM's keywords: `data` (or an array of
    zeros of `datashape`, float32), `sig_dims`, and ``nav_shape``, ``sig_shape``,
    ``sync_offset`` (see :func:`ltdask.from_array`). `array_backends` (the array backends
    the dataset gives tiles in): with a dense one (``"numpy"``, ``"cupy"``, ``"cuda"``) the
    tiles are dense (a run converts them to the backend its UDFs take); with only sparse
    ones (``"sparse.COO"``, ``"scipy.sparse.csr_matrix"``, ...) the array is held as a
    ``sparse.COO`` array and the tiles are sparse. LiberTEM's ``tileshape``,
    ``num_partitions`` and ``check_cast`` are taken and have no effect (ltdask sizes tiles
    and partitions itself); ``tiledelay`` and ``crop_frames=True`` (LiberTEM's test hooks
    for slow and cropped tiles) are refused.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.datasets import MemoryDataSet
    >>> ds = MemoryDataSet(data=np.ones((2, 3, 4, 4)), tileshape=(1, 4, 4), num_partitions=2)
    >>> tuple(ds.shape.nav), tuple(ds.shape.sig)
    ((2, 3), (4, 4))
    """
    from ltdask.io._memory import from_array

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
    if array_backends is not None:
        data = _in_backends(data, tuple(array_backends))
    return from_array(data, sig_dims=sig_dims, **kwargs)


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
