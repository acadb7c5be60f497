"""Datasets, partitions, tiling negotiation and the numba read path; the file formats and
their registry."""

from typing import TYPE_CHECKING

# the formats subpackage before the registry's `formats` function, which takes the name
# here: a subpackage imported later (a format's first use) would put itself in its place
from ltdask.io import formats as _formats_package  # noqa: F401  # isort: skip
from ltdask.common._lazy import lazy_exports
from ltdask.io import registry
from ltdask.io._memory import ArrayDataSet, from_array
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats import _classes, _openers
from ltdask.io.open import detect_format, open_dataset
from ltdask.io.partition import Partition
from ltdask.io.registry import (
    Format,
    FormatPluginError,
    FormatPluginWarning,
    formats,
    get_format,
    supported_formats,
)
from ltdask.io.tiling import Negotiator, TilingPreferences, TilingScheme

if TYPE_CHECKING:
    from ltdask.io.formats._classes import *  # noqa: F403
    from ltdask.io.formats._openers import *  # noqa: F403

#: each format's public names (its package's ``__all__``: ``open_mib``, ``MibDataSet``),
#: listed by the registry (`ltdask.io.formats._openers` and ``_classes``, which
#: ``tools/write_format_names.py`` writes); each is imported when it is first used, so
#: ``import ltdask`` imports no format. Plug-in formats' openers are found in the registry.
_LAZY = {**_openers.NAMES, **_classes.NAMES}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, fallback=registry.opener_named)

__all__ = [
    "ArrayDataSet",
    "ChunkedArrayDataSet",
    "DataSet",
    "Decoder",
    "File",
    "FileDataSet",
    "FileSet",
    "Format",
    "FormatPluginError",
    "FormatPluginWarning",
    "Negotiator",
    "Partition",
    "TilingPreferences",
    "TilingScheme",
    "detect_format",
    "formats",
    "from_array",
    "get_format",
    "open_dataset",
    "supported_formats",
]
__all__ += _openers.__all__
__all__ += _classes.__all__
