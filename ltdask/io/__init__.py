"""Datasets, partitions, tiling negotiation and the numba read path."""

from ltdask.io._hdf5 import HDF5DataSet, HDF5MappedDataSet, open_hdf5
from ltdask.io._memory import ArrayDataSet, from_array
from ltdask.io._mib import MibDataSet, open_mib
from ltdask.io._npy import NpyDataSet, open_npy
from ltdask.io._raw import RawDataSet, open_raw
from ltdask.io._raw_csr import RawCSRDataSet, open_raw_csr
from ltdask.io._zarr import ZarrDataSet, open_zarr
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.open import open_dataset
from ltdask.io.partition import Partition
from ltdask.io.tiling import Negotiator, TilingPreferences, TilingScheme

__all__ = [
    "ArrayDataSet",
    "ChunkedArrayDataSet",
    "DataSet",
    "Decoder",
    "File",
    "FileDataSet",
    "FileSet",
    "HDF5DataSet",
    "HDF5MappedDataSet",
    "MibDataSet",
    "Negotiator",
    "NpyDataSet",
    "Partition",
    "RawCSRDataSet",
    "RawDataSet",
    "TilingPreferences",
    "TilingScheme",
    "ZarrDataSet",
    "from_array",
    "open_dataset",
    "open_hdf5",
    "open_mib",
    "open_npy",
    "open_raw",
    "open_raw_csr",
    "open_zarr",
]
