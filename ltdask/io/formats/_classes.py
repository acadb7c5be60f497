"""The other public names of the built-in formats, which ``ltdask.io`` re-exports.

Written by ``tools/write_format_names.py`` from the format registry (each format package's
``__all__``, in the order of ``ltdask.io.registry.BUILTIN``); do not edit. Type checkers read
the imports; at run time each name is imported when it is first used.
"""

from typing import TYPE_CHECKING

from ltdask.common._lazy import lazy_exports

if TYPE_CHECKING:
    from ltdask.io.formats.blo import BloDataSet
    from ltdask.io.formats.dectris import DectrisDataSet
    from ltdask.io.formats.dm import DMDataSet
    from ltdask.io.formats.empad import EMPADDataSet
    from ltdask.io.formats.frms6 import Frms6DataSet
    from ltdask.io.formats.hdf5 import HDF5DataSet, HDF5MappedDataSet
    from ltdask.io.formats.k2is import K2ISDataSet
    from ltdask.io.formats.mib import MibDataSet
    from ltdask.io.formats.mrc import MrcDataSet
    from ltdask.io.formats.npy import NpyDataSet
    from ltdask.io.formats.raw import RawDataSet
    from ltdask.io.formats.raw_csr import RawCSRDataSet
    from ltdask.io.formats.seq import SeqDataSet
    from ltdask.io.formats.tvips import TVIPSDataSet
    from ltdask.io.formats.velox import VeloxDataSet, VeloxH5DataSet
    from ltdask.io.formats.zarr import ZarrDataSet

#: name -> ``"package:name"``
NAMES = {
    "RawDataSet": "ltdask.io.formats.raw:RawDataSet",
    "NpyDataSet": "ltdask.io.formats.npy:NpyDataSet",
    "HDF5DataSet": "ltdask.io.formats.hdf5:HDF5DataSet",
    "HDF5MappedDataSet": "ltdask.io.formats.hdf5:HDF5MappedDataSet",
    "ZarrDataSet": "ltdask.io.formats.zarr:ZarrDataSet",
    "RawCSRDataSet": "ltdask.io.formats.raw_csr:RawCSRDataSet",
    "MibDataSet": "ltdask.io.formats.mib:MibDataSet",
    "MrcDataSet": "ltdask.io.formats.mrc:MrcDataSet",
    "DMDataSet": "ltdask.io.formats.dm:DMDataSet",
    "DectrisDataSet": "ltdask.io.formats.dectris:DectrisDataSet",
    "VeloxDataSet": "ltdask.io.formats.velox:VeloxDataSet",
    "VeloxH5DataSet": "ltdask.io.formats.velox:VeloxH5DataSet",
    "EMPADDataSet": "ltdask.io.formats.empad:EMPADDataSet",
    "BloDataSet": "ltdask.io.formats.blo:BloDataSet",
    "TVIPSDataSet": "ltdask.io.formats.tvips:TVIPSDataSet",
    "SeqDataSet": "ltdask.io.formats.seq:SeqDataSet",
    "Frms6DataSet": "ltdask.io.formats.frms6:Frms6DataSet",
    "K2ISDataSet": "ltdask.io.formats.k2is:K2ISDataSet",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), NAMES)

__all__ = [
    "RawDataSet",
    "NpyDataSet",
    "HDF5DataSet",
    "HDF5MappedDataSet",
    "ZarrDataSet",
    "RawCSRDataSet",
    "MibDataSet",
    "MrcDataSet",
    "DMDataSet",
    "DectrisDataSet",
    "VeloxDataSet",
    "VeloxH5DataSet",
    "EMPADDataSet",
    "BloDataSet",
    "TVIPSDataSet",
    "SeqDataSet",
    "Frms6DataSet",
    "K2ISDataSet",
]
