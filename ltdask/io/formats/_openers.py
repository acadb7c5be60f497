"""The openers of the built-in formats, which ``ltdask`` and ``ltdask.io`` re-export.

Written by ``tools/write_format_names.py`` from the format registry (each format package's
``__all__``, in the order of ``ltdask.io.registry.BUILTIN``); do not edit. Type checkers read
the imports; at run time each name is imported when it is first used.
"""

from typing import TYPE_CHECKING

from ltdask.common._lazy import lazy_exports

if TYPE_CHECKING:
    from ltdask.io.formats.blo import open_blo
    from ltdask.io.formats.dectris import open_dectris
    from ltdask.io.formats.dm import open_dm
    from ltdask.io.formats.empad import open_empad
    from ltdask.io.formats.frms6 import open_frms6
    from ltdask.io.formats.hdf5 import open_hdf5
    from ltdask.io.formats.k2is import open_k2is
    from ltdask.io.formats.mib import open_mib
    from ltdask.io.formats.mrc import open_mrc
    from ltdask.io.formats.npy import open_npy
    from ltdask.io.formats.raw import open_raw
    from ltdask.io.formats.raw_csr import open_raw_csr
    from ltdask.io.formats.seq import open_seq
    from ltdask.io.formats.tvips import open_tvips
    from ltdask.io.formats.velox import open_emd
    from ltdask.io.formats.zarr import open_zarr

#: name -> ``"package:name"``
NAMES = {
    "open_raw": "ltdask.io.formats.raw:open_raw",
    "open_npy": "ltdask.io.formats.npy:open_npy",
    "open_hdf5": "ltdask.io.formats.hdf5:open_hdf5",
    "open_zarr": "ltdask.io.formats.zarr:open_zarr",
    "open_raw_csr": "ltdask.io.formats.raw_csr:open_raw_csr",
    "open_mib": "ltdask.io.formats.mib:open_mib",
    "open_mrc": "ltdask.io.formats.mrc:open_mrc",
    "open_dm": "ltdask.io.formats.dm:open_dm",
    "open_dectris": "ltdask.io.formats.dectris:open_dectris",
    "open_emd": "ltdask.io.formats.velox:open_emd",
    "open_empad": "ltdask.io.formats.empad:open_empad",
    "open_blo": "ltdask.io.formats.blo:open_blo",
    "open_tvips": "ltdask.io.formats.tvips:open_tvips",
    "open_seq": "ltdask.io.formats.seq:open_seq",
    "open_frms6": "ltdask.io.formats.frms6:open_frms6",
    "open_k2is": "ltdask.io.formats.k2is:open_k2is",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), NAMES)

__all__ = [
    "open_raw",
    "open_npy",
    "open_hdf5",
    "open_zarr",
    "open_raw_csr",
    "open_mib",
    "open_mrc",
    "open_dm",
    "open_dectris",
    "open_emd",
    "open_empad",
    "open_blo",
    "open_tvips",
    "open_seq",
    "open_frms6",
    "open_k2is",
]
