"""ltdask: LiberTEM-style 4D-STEM datasets and UDFs, natively on dask, xarray and Zarr."""

from ltdask import _config  # noqa: F401  (registers the ltdask.* dask config defaults)
from ltdask.common import Shape, Slice
from ltdask.exceptions import DataSetError, LtdaskError, PerformanceWarning, UDFError
from ltdask.io import (
    DataSet,
    Negotiator,
    TilingPreferences,
    TilingScheme,
    from_array,
    open_npy,
    open_raw,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "DataSet",
    "DataSetError",
    "LtdaskError",
    "Negotiator",
    "PerformanceWarning",
    "Shape",
    "Slice",
    "TilingPreferences",
    "TilingScheme",
    "UDFError",
    "__version__",
    "from_array",
    "open_npy",
    "open_raw",
]
