"""The ``ltdask`` engine for xarray: ``xarray.open_dataset(path, engine="ltdask")``.

A thin layer over :func:`ltdask.open`: the dataset's variable ``data`` is the scan with named
dims, lazily indexed as xarray's own backends do it: with ``chunks=None`` (the default) an
access reads just what it selects, as numpy; with ``chunks={}`` it is a dask array of the
chunks of :meth:`DataSet.to_dask` (one per partition and signal slice), which its
``preferred_chunks`` encoding repeats; other ``chunks=`` as xarray takes them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from ltdask.io.open import open_dataset
from ltdask.io.registry import BUILTIN, formats

VARIABLE = "data"


class ScanBackendArray(BackendArray):
    """The scan for xarray's lazy indexing: each access computes that part of the dask
    array of :meth:`DataSet.to_dask` on the calling thread (also inside a dask task of a
    chunked variable, on any scheduler)."""

    def __init__(self, arr):
        self.array = arr
        self.shape = arr.shape
        self.dtype = arr.dtype

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER_1VECTOR, self._read
        )

    def _read(self, key: tuple) -> np.ndarray:
        return np.asarray(self.array[key].compute(scheduler="sync"))


class LtdaskBackendEntrypoint(BackendEntrypoint):
    """Open 4D-STEM scans with ltdask, in any format of its registry (the built-in ones and
    ``ltdask.formats`` plug-ins).

    Examples
    --------
    >>> import numpy as np, xarray as xr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.ones((2, 3, 4, 5), dtype=np.uint16))
    >>> xr.open_dataarray(path, engine="ltdask").dims
    ('scan_y', 'scan_x', 'det_y', 'det_x')
    """

    description = (
        f"4D-STEM scans ({', '.join(BUILTIN)} and ltdask.formats plug-ins) as lazy dask arrays"
    )
    url = "https://github.com/ltdask/ltdask"
    #: what xarray may pass besides the format's own keywords, which go to ltdask.open
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "format", "read_dtype")

    def open_dataset(
        self,
        filename_or_obj,
        *,
        drop_variables: str | Iterable[str] | None = None,
        format: str | None = None,
        read_dtype=None,
        **kwargs,
    ):
        """The scan as an `xarray.Dataset` with one lazy variable, ``data``.

        `read_dtype` converts the pixels (the native dtype by default); the other keywords
        (those of the format's ``open_*`` function) go to :func:`ltdask.open` where given.
        """
        import xarray as xr

        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        if isinstance(filename_or_obj, os.PathLike):
            filename_or_obj = os.fspath(filename_or_obj)
        ds = open_dataset(filename_or_obj, format=format, **kwargs)
        arr = ds.to_dask(dtype=read_dtype)
        preferred = dict(zip(ds.dims, arr.chunks, strict=True))
        # lazily indexed, as xarray's own backends: numpy on access with chunks=None (the
        # default), dask arrays of the preferred chunks with chunks={}
        data = indexing.LazilyIndexedArray(ScanBackendArray(arr))
        variable = xr.Variable(ds.dims, data, encoding={"preferred_chunks": preferred})
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        data_vars = {} if VARIABLE in set(drop_variables or ()) else {VARIABLE: variable}
        attrs = {k: v for k, v in ds.attrs().items() if v is not None}
        attrs["ltdask_dataset"] = type(ds).__name__
        # calibrated dims (from the file or the opener's keywords) as coordinates with units
        result = xr.Dataset(data_vars, coords=ds.calibrated_coords() or None, attrs=attrs)
        result.set_close(None)
        return result

    def guess_can_open(self, filename_or_obj) -> bool:
        """Claims only what the formats list as their ``engine_suffixes``, suffixes no other
        engine reads (``.npy``, ``.mib``, raw_csr ``.toml`` descriptors): HDF5 and Zarr files
        go to their own engines unless ``engine="ltdask"`` is given."""
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        if not isinstance(path, str):
            return False
        suffix = os.path.splitext(path)[1].lower()
        return any(
            suffix in fmt.engine_suffixes and (fmt.sniff is None or fmt.sniff(path))
            for fmt in formats()
        )
