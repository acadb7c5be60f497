"""Datasets, partitions, tiling negotiation and the numba read path; the file formats and
their registry."""

from ltdask.io._memory import ArrayDataSet, from_array
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.blo import BloDataSet, open_blo
from ltdask.io.formats.dectris import DectrisDataSet, open_dectris
from ltdask.io.formats.dm import DMDataSet, open_dm
from ltdask.io.formats.empad import EMPADDataSet, open_empad
from ltdask.io.formats.frms6 import Frms6DataSet, open_frms6
from ltdask.io.formats.hdf5 import HDF5DataSet, open_hdf5
from ltdask.io.formats.hdf5_mapped import HDF5MappedDataSet
from ltdask.io.formats.k2is import K2ISDataSet, open_k2is
from ltdask.io.formats.mib import MibDataSet, open_mib
from ltdask.io.formats.mrc import MrcDataSet, open_mrc
from ltdask.io.formats.npy import NpyDataSet, open_npy
from ltdask.io.formats.raw import RawDataSet, open_raw
from ltdask.io.formats.raw_csr import RawCSRDataSet, open_raw_csr
from ltdask.io.formats.seq import SeqDataSet, open_seq
from ltdask.io.formats.tvips import TVIPSDataSet, open_tvips
from ltdask.io.formats.velox import VeloxDataSet, VeloxH5DataSet, open_emd
from ltdask.io.formats.zarr import ZarrDataSet, open_zarr
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

__all__ = [
    "ArrayDataSet",
    "BloDataSet",
    "ChunkedArrayDataSet",
    "DMDataSet",
    "DataSet",
    "EMPADDataSet",
    "Decoder",
    "DectrisDataSet",
    "File",
    "FileDataSet",
    "FileSet",
    "Format",
    "FormatPluginError",
    "FormatPluginWarning",
    "Frms6DataSet",
    "HDF5DataSet",
    "HDF5MappedDataSet",
    "K2ISDataSet",
    "MibDataSet",
    "MrcDataSet",
    "Negotiator",
    "NpyDataSet",
    "Partition",
    "RawCSRDataSet",
    "RawDataSet",
    "TVIPSDataSet",
    "SeqDataSet",
    "TilingPreferences",
    "TilingScheme",
    "VeloxDataSet",
    "VeloxH5DataSet",
    "ZarrDataSet",
    "detect_format",
    "formats",
    "from_array",
    "get_format",
    "open_dataset",
    "open_dm",
    "open_dectris",
    "open_emd",
    "open_blo",
    "open_empad",
    "open_frms6",
    "open_hdf5",
    "open_k2is",
    "open_mib",
    "open_mrc",
    "open_npy",
    "open_raw",
    "open_raw_csr",
    "open_tvips",
    "open_seq",
    "open_zarr",
    "supported_formats",
]
