"""Datasets, partitions, tiling negotiation and the numba read path; the file formats and
their registry."""

from typing import TYPE_CHECKING

# the formats subpackage before the registry's `formats` function, which takes the name
# here: a subpackage imported later (a format's first use) would put itself in its place
from ltdask.io import formats as _formats_package  # noqa: F401  # isort: skip
from ltdask.common._lazy import lazy_exports
from ltdask.io._memory import ArrayDataSet, from_array
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
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

#: each format's module is imported when its opener or dataset class is first used (the
#: registry imports it when a scan of it is opened): ``import ltdask`` imports none
_LAZY = {
    "BloDataSet": "ltdask.io.formats.blo:BloDataSet",
    "open_blo": "ltdask.io.formats.blo:open_blo",
    "DectrisDataSet": "ltdask.io.formats.dectris:DectrisDataSet",
    "open_dectris": "ltdask.io.formats.dectris:open_dectris",
    "DMDataSet": "ltdask.io.formats.dm:DMDataSet",
    "open_dm": "ltdask.io.formats.dm:open_dm",
    "EMPADDataSet": "ltdask.io.formats.empad:EMPADDataSet",
    "open_empad": "ltdask.io.formats.empad:open_empad",
    "Frms6DataSet": "ltdask.io.formats.frms6:Frms6DataSet",
    "open_frms6": "ltdask.io.formats.frms6:open_frms6",
    "HDF5DataSet": "ltdask.io.formats.hdf5:HDF5DataSet",
    "open_hdf5": "ltdask.io.formats.hdf5:open_hdf5",
    "HDF5MappedDataSet": "ltdask.io.formats.hdf5_mapped:HDF5MappedDataSet",
    "K2ISDataSet": "ltdask.io.formats.k2is:K2ISDataSet",
    "open_k2is": "ltdask.io.formats.k2is:open_k2is",
    "MibDataSet": "ltdask.io.formats.mib:MibDataSet",
    "open_mib": "ltdask.io.formats.mib:open_mib",
    "MrcDataSet": "ltdask.io.formats.mrc:MrcDataSet",
    "open_mrc": "ltdask.io.formats.mrc:open_mrc",
    "NpyDataSet": "ltdask.io.formats.npy:NpyDataSet",
    "open_npy": "ltdask.io.formats.npy:open_npy",
    "RawDataSet": "ltdask.io.formats.raw:RawDataSet",
    "open_raw": "ltdask.io.formats.raw:open_raw",
    "RawCSRDataSet": "ltdask.io.formats.raw_csr:RawCSRDataSet",
    "open_raw_csr": "ltdask.io.formats.raw_csr:open_raw_csr",
    "SeqDataSet": "ltdask.io.formats.seq:SeqDataSet",
    "open_seq": "ltdask.io.formats.seq:open_seq",
    "TVIPSDataSet": "ltdask.io.formats.tvips:TVIPSDataSet",
    "open_tvips": "ltdask.io.formats.tvips:open_tvips",
    "VeloxDataSet": "ltdask.io.formats.velox:VeloxDataSet",
    "VeloxH5DataSet": "ltdask.io.formats.velox:VeloxH5DataSet",
    "open_emd": "ltdask.io.formats.velox:open_emd",
    "ZarrDataSet": "ltdask.io.formats.zarr:ZarrDataSet",
    "open_zarr": "ltdask.io.formats.zarr:open_zarr",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

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
