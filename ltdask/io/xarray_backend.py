"""The ``ltdask`` engine for xarray: ``xarray.open_dataset(path, engine="ltdask")``.

A thin layer over :func:`ltdask.open`: the dataset's variable ``data`` is the lazy dask array
of :meth:`DataSet.to_dask` (one chunk per partition and signal slice) with named dims, and
its ``preferred_chunks`` encoding repeats those chunks, so ``chunks={}`` keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from xarray.backends import BackendEntrypoint

from ltdask.io.open import MIB_SUFFIXES, open_dataset

VARIABLE = "data"


class LtdaskBackendEntrypoint(BackendEntrypoint):
    """Open 4D-STEM scans with ltdask: raw, npy, HDF5, Zarr, raw_csr and MIB.

    Examples
    --------
    >>> import numpy as np, xarray as xr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.ones((2, 3, 4, 5), dtype=np.uint16))
    >>> xr.open_dataarray(path, engine="ltdask").dims
    ('scan_y', 'scan_x', 'det_y', 'det_x')
    """

    description = "4D-STEM scans (raw, npy, HDF5, Zarr, raw_csr, MIB) as lazy dask arrays"
    url = "https://github.com/ltdask/ltdask"

    def open_dataset(
        self,
        filename_or_obj,
        *,
        drop_variables: str | Iterable[str] | None = None,
        format: str | None = None,
        key: str | None = None,
        sig_dims: int | None = None,
        nav_shape: Sequence[int] | None = None,
        sig_shape: Sequence[int] | None = None,
        dtype=None,
        sync_offset: int | None = None,
        dims: Sequence[str] | None = None,
        file_header_bytes: int | None = None,
        frame_header_bytes: int | None = None,
        frame_footer_bytes: int | None = None,
        read_dtype=None,
    ):
        """The scan as an `xarray.Dataset` with one lazy variable, ``data``.

        `read_dtype` converts the pixels (the native dtype by default); the other keywords
        go to :func:`ltdask.open` where given.
        """
        import xarray as xr

        given = {
            "key": key,
            "sig_dims": sig_dims,
            "nav_shape": nav_shape,
            "sig_shape": sig_shape,
            "dtype": dtype,
            "sync_offset": sync_offset,
            "dims": dims,
            "file_header_bytes": file_header_bytes,
            "frame_header_bytes": frame_header_bytes,
            "frame_footer_bytes": frame_footer_bytes,
        }
        kwargs = {k: v for k, v in given.items() if v is not None}
        if isinstance(filename_or_obj, os.PathLike):
            filename_or_obj = os.fspath(filename_or_obj)
        ds = open_dataset(filename_or_obj, format=format, **kwargs)
        arr = ds.to_dask(dtype=read_dtype)
        preferred = dict(zip(ds.dims, arr.chunks, strict=True))
        variable = xr.Variable(ds.dims, arr, encoding={"preferred_chunks": preferred})
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        data_vars = {} if VARIABLE in set(drop_variables or ()) else {VARIABLE: variable}
        attrs = {k: v for k, v in ds.attrs().items() if v is not None}
        attrs["ltdask_dataset"] = type(ds).__name__
        result = xr.Dataset(data_vars, attrs=attrs)
        result.set_close(None)
        return result

    def guess_can_open(self, filename_or_obj) -> bool:
        """Claims only suffixes no other engine reads: ``.npy``, ``.mib`` and raw_csr
        ``.toml`` descriptors (HDF5 and Zarr files go to their own engines unless
        ``engine="ltdask"`` is given)."""
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        suffix = os.path.splitext(path)[1].lower()
        if suffix == ".npy" or suffix in MIB_SUFFIXES[:1]:
            return True
        if suffix == ".toml":
            from ltdask.io.open import _is_raw_csr

            return _is_raw_csr(path)
        return False
