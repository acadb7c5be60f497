"""`UDF`: the base class of user-defined functions, LiberTEM 0.16's UDF interface run as
dask graphs.

The interface the engine calls is `UDFBase` (:mod:`ltdask.udf.interface`); `UDF` adds
the methods that run a UDF on a dataset (:mod:`ltdask.udf.api`).
"""

from __future__ import annotations

from ltdask.io.tiling import flat_of
from ltdask.udf.api import compute, iter_results, lazy
from ltdask.udf.interface import AuxData, MaskedResult, UDFBase, UDFMethod, overrides, raw_params

__all__ = [
    "UDF",
    "AuxData",
    "FlatTileUDF",
    "MaskedResult",
    "UDFBase",
    "UDFMethod",
    "overrides",
    "raw_params",
]


class UDF(UDFBase):
    """Base class of user-defined functions, source-compatible with LiberTEM 0.16 UDFs.

    Subclasses declare result buffers in :meth:`get_result_buffers` and implement at least
    one of ``process_tile(tile)``, ``process_frame(frame)`` or
    ``process_partition(partition)``. Keyword arguments given to the constructor are
    available as ``self.params``; the constructor runs again (with the same keyword
    arguments) for every partition, wherever that partition is processed.

    ltdask extension: a tile UDF may also define ``process_flat_tile(frames, p0, p1)``.
    The runner then calls it instead of ``process_tile`` with the tile as
    ``frames[:, p0:p1]``, where ``frames`` is a C-contiguous ``(n, pixels)`` array: for
    tiles of whole rows a view of the files' frames, otherwise a copy of the tile
    flattened (``p0 = 0``). Pixel ``p0 + k`` is pixel ``k`` of the tile's signal slice
    (``self.meta.sig_slice``) in C order: numba kernels looping from ``p0`` to ``p1`` over
    such rows never see strided arrays, and never copies of views of the files.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> class MaxUDF(ltdask.UDF):
    ...     def get_result_buffers(self):
    ...         return {"maximum": self.buffer(kind="nav", dtype="float32")}
    ...     def process_frame(self, frame):
    ...         self.results.maximum[:] = frame.max()
    >>> data = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    >>> res = MaxUDF().compute(ltdask.from_array(data))
    >>> res["maximum"].values.tolist()
    [[15.0, 31.0, 47.0], [63.0, 79.0, 95.0]]

    The engine sees any instance of `UDFBase` (:mod:`ltdask.udf.interface`: the interface
    without these run methods); post-processing that needs whole result arrays in numpy
    goes through :func:`ltdask.udf.apply_whole` in :meth:`get_results`.
    """

    def lazy(self, dataset, roi=None, corrections=None, backends=None, scheduler=None):
        """The results as a lazy `xarray.Dataset` (see :func:`ltdask.lazy`)."""
        kwargs = dict(roi=roi, corrections=corrections, backends=backends, scheduler=scheduler)
        return lazy(dataset, [self], **kwargs)[0]

    def compute(
        self,
        dataset,
        roi=None,
        progress: bool | None = None,
        corrections=None,
        backends=None,
        scheduler=None,
    ):
        """Run on `dataset` and return the results as an `xarray.Dataset` (see
        :func:`ltdask.lazy` for the parameters)."""
        kwargs = dict(corrections=corrections, backends=backends, scheduler=scheduler)
        return compute(dataset, [self], roi=roi, progress=progress, **kwargs)[0]

    def iter(self, dataset, roi=None, corrections=None, backends=None):
        """Partial results as partitions finish (see :func:`ltdask.iter`)."""
        for partials in iter_results(
            dataset, [self], roi=roi, corrections=corrections, backends=backends
        ):
            yield partials[0]


class FlatTileUDF(UDF):
    """A tile UDF written for flat tiles alone: ``process_tile`` (for LiberTEM-style
    callers) hands the tile to ``process_flat_tile``, copied where it is not contiguous."""

    def process_tile(self, tile):
        self.process_flat_tile(*flat_of(tile, copy=True))
