"""ltdask: LiberTEM-style 4D-STEM datasets and UDFs, natively on dask, xarray and Zarr."""

import os as _os
from typing import TYPE_CHECKING

# runtime first: importing it registers the ltdask.* dask config defaults, and the kernel
# cache's listener that announces a first compile
from ltdask.runtime import kernel_cache as _kernel_cache  # noqa: F401  # isort: skip
from ltdask import udf
from ltdask._version import __version__
from ltdask.beam import find_beam
from ltdask.common import Shape, Slice
from ltdask.common._lazy import lazy_exports
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import (
    ConversionError,
    DataSetError,
    EmptyMaskWarning,
    LtdaskError,
    MetadataWarning,
    MissingFramesWarning,
    PerformanceWarning,
    ROIDtypeWarning,
    UDFError,
    UseDiscouragedWarning,
)
from ltdask.io import DataSet, Negotiator, TilingPreferences, TilingScheme, from_array
from ltdask.io import open_dataset as open  # noqa: A004  (the documented name)
from ltdask.io import registry as _registry
from ltdask.io.formats import _openers
from ltdask.store import StoreReplaceError, to_hyperspy, to_zarr
from ltdask.udf import UDF
from ltdask.udf.api import compute, lazy
from ltdask.udf.api import iter_results as iter
from ltdask.udf.builtin import map
from ltdask.udf.explain import explain
from ltdask.udf.warmup import warmup
from ltdask.views import plot
from ltdask.views.live import live

if TYPE_CHECKING:
    from ltdask import acquire as acquire
    from ltdask import analysis as analysis
    from ltdask import compat, masks
    from ltdask.io.formats._openers import *  # noqa: F403
    from ltdask.io.scan_array import mean_scan as mean
    from ltdask.io.scan_array import sum_scan as sum  # noqa: A004  (the documented name)
    from ltdask.views import viz as viz

#: imported when first used, not by ``import ltdask`` (see `ltdask.common._lazy`): the format
#: openers (each format's module), the LiberTEM compatibility layer and its Analysis API,
#: the masks (which need ``sparse`` and ``scipy.sparse``) and the live plots
_LAZY = {
    # each built-in format's opener (the registry's list, see ltdask.io); plug-ins' openers
    # are found in the registry (the fallback)
    **_openers.NAMES,
    **{name: f"ltdask.{name}" for name in ("acquire", "analysis", "compat", "masks")},
    # LiberTEM's live plot classes (``libertem.viz``), under their name there
    "viz": "ltdask.views.viz",
    # the kernels' sums of any dask array (the route to them under dask's array-expr)
    "sum": "ltdask.io.scan_array:sum_scan",
    "mean": "ltdask.io.scan_array:mean_scan",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, fallback=_registry.opener_named)

# LTDASK_ALIAS_LIBERTEM=1: ``import libertem`` resolves to ltdask (see ltdask.compat.alias)
if _os.environ.get("LTDASK_ALIAS_LIBERTEM", "").strip().lower() not in (
    "",
    "0",
    "false",
    "no",
    "off",
):
    from ltdask.compat.alias import alias_libertem as _alias_libertem

    _alias_libertem()

__all__ = [
    "ConversionError",
    "CorrectionSet",
    "DataSet",
    "DataSetError",
    "EmptyMaskWarning",
    "LtdaskError",
    "Negotiator",
    "MetadataWarning",
    "MissingFramesWarning",
    "PerformanceWarning",
    "ROIDtypeWarning",
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
    "explain",
    "find_beam",
    "iter",
    "lazy",
    "live",
    "map",
    "masks",
    "mean",
    "plot",
    "sum",
    "to_hyperspy",
    "to_zarr",
    "udf",
    "warmup",
    "from_array",
    "open",
]
__all__ += _openers.__all__
