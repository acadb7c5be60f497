"""Writing UDF results and whole datasets to Zarr stores, and handing them to HyperSpy.

Every array is created by ltdask with chunks (or shards) that line up one to one with the
dask chunks that fill it (``_chunks``: dask silently writes wrong data otherwise). A store
on the local file system is written under a temporary name and swapped into place when
complete, and only a Zarr store or an empty folder is ever replaced (``_replace``: the
data-safety rules). ``_write`` holds the two writers, `to_zarr` (UDF results) and
`write_dataset` (a dataset as one array, :meth:`DataSet.to_zarr`); ``hyperspy``
`to_hyperspy` (a dataset or a result as a HyperSpy signal, :meth:`DataSet.to_hyperspy`).

The package takes datasets by what they offer (``to_dask``, dims, calibrations) and imports
none: datasets call it, for their ``to_zarr`` and ``to_hyperspy`` methods.
"""

from __future__ import annotations

from ltdask.store._chunks import check_alignment, regular_chunks, zarr_aligned
from ltdask.store._replace import MODES, ZARR_ROOT_FILES, StoreReplaceError
from ltdask.store._write import to_zarr, write_dataset
from ltdask.store.hyperspy import to_hyperspy

__all__ = [
    "MODES",
    "ZARR_ROOT_FILES",
    "StoreReplaceError",
    "check_alignment",
    "regular_chunks",
    "to_hyperspy",
    "to_zarr",
    "write_dataset",
    "zarr_aligned",
]
