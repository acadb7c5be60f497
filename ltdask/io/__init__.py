"""Datasets, partitions, tiling negotiation and the numba read path."""

from ltdask.io._memory import ArrayDataSet, from_array
from ltdask.io._npy import NpyDataSet, open_npy
from ltdask.io._raw import RawDataSet, open_raw
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.partition import Partition
from ltdask.io.tiling import Negotiator, TilingPreferences, TilingScheme

__all__ = [
    "ArrayDataSet",
    "DataSet",
    "Decoder",
    "File",
    "FileDataSet",
    "FileSet",
    "Negotiator",
    "NpyDataSet",
    "Partition",
    "RawDataSet",
    "TilingPreferences",
    "TilingScheme",
    "from_array",
    "open_npy",
    "open_raw",
]
