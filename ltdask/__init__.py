"""ltdask: LiberTEM-style 4D-STEM datasets and UDFs, natively on dask, xarray and Zarr."""

from ltdask import _config  # noqa: F401  (registers the ltdask.* dask config defaults)
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

from ltdask._version import __version__  # noqa: E402

from ltdask import compat, masks, udf  # noqa: E402
from ltdask.store import StoreReplaceError, to_zarr  # noqa: E402
from ltdask.udf import UDF  # noqa: E402
from ltdask.udf.api import compute, lazy  # noqa: E402
from ltdask.udf.api import iter_results as iter
from ltdask.udf.builtin import map  # noqa: E402

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
