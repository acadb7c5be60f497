"""ltdask: LiberTEM-style 4D-STEM datasets and UDFs, natively on dask, xarray and Zarr."""

# _config first: importing it registers the ltdask.* dask config defaults
from ltdask import _config  # noqa: F401  # isort: skip
from ltdask import compat, masks, udf
from ltdask._version import __version__
from ltdask.common import Shape, Slice
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import (
    DataSetError,
    LtdaskError,
    MissingFramesWarning,
    PerformanceWarning,
    UDFError,
    UseDiscouragedWarning,
)
from ltdask.io import (
    DataSet,
    Negotiator,
    TilingPreferences,
    TilingScheme,
    from_array,
    open_hdf5,
    open_mib,
    open_npy,
    open_raw,
    open_raw_csr,
    open_zarr,
)
from ltdask.io import open_dataset as open  # noqa: A004  (the documented name)
from ltdask.store import StoreReplaceError, to_zarr, write_dataset
from ltdask.udf import UDF
from ltdask.udf.api import compute, lazy
from ltdask.udf.api import iter_results as iter
from ltdask.udf.builtin import map


def _dataset_to_zarr(
    self: DataSet,
    store,
    chunks=None,
    dtype=None,
    compressors="auto",
    mode: str = "w-",
    progress: bool = False,
    corrections=None,
):
    """Convert the scan to a Zarr (v3) array, in parallel on the active scheduler.

    Shards hold one partition each (the chunks of :meth:`to_dask`), split into chunks of
    whole frames of about 1 MiB, compressed with blosc/zstd. A path is written under a
    temporary name and renamed when complete; an existing store is replaced only with
    ``mode="w"``. Read it back with :func:`ltdask.open_zarr`. With `corrections` (a
    `ltdask.CorrectionSet`), the corrected frames are written (as floats).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, zarr
    >>> data = np.arange(3 * 4 * 5 * 6, dtype=np.uint16).reshape(3, 4, 5, 6)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> _ = ltdask.from_array(data).to_zarr(path)
    >>> bool((zarr.open_array(path)[...] == data).all())
    True
    """
    return write_dataset(
        self,
        store,
        chunks=chunks,
        dtype=dtype,
        compressors=compressors,
        mode=mode,
        progress=progress,
        corrections=corrections,
    )


# Writing (ltdask.store) is not part of reading (ltdask.io), which does not import it: the
# package, which imports both, gives datasets their ``to_zarr`` method.
_dataset_to_zarr.__name__ = "to_zarr"
_dataset_to_zarr.__qualname__ = "DataSet.to_zarr"
DataSet.to_zarr = _dataset_to_zarr

__all__ = [
    "CorrectionSet",
    "DataSet",
    "DataSetError",
    "LtdaskError",
    "Negotiator",
    "MissingFramesWarning",
    "PerformanceWarning",
    "UseDiscouragedWarning",
    "Shape",
    "Slice",
    "StoreReplaceError",
    "TilingPreferences",
    "TilingScheme",
    "UDF",
    "UDFError",
    "__version__",
    "compat",
    "compute",
    "iter",
    "lazy",
    "map",
    "masks",
    "to_zarr",
    "udf",
    "from_array",
    "open",
    "open_hdf5",
    "open_mib",
    "open_npy",
    "open_raw",
    "open_raw_csr",
    "open_zarr",
]
