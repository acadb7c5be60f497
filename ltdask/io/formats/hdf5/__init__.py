"""HDF5 datasets (through h5py): chunked and compressed, or read straight from the file.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.hdf5.dataset import (
    HDF5_MAGIC,
    HDF5_SUFFIXES,
    HDF5DataSet,
    is_hdf5,
    open_hdf5,
)
from ltdask.io.formats.hdf5.mapped import HDF5MappedDataSet
from ltdask.io.registry import Format

FORMAT = Format(
    name="hdf5",
    opener=open_hdf5,
    description=".h5/.hdf5/.hdf/.nxs/.emd/.cxi (key= names the dataset)",
    suffixes=HDF5_SUFFIXES,
    magic=(HDF5_MAGIC,),
    sniff=is_hdf5,
    keywords=("key", "sig_dims", "sync_offset", "dims", "nav_shape", "mmap"),
    aliases=("h5",),
)

__all__ = ["FORMAT", "HDF5DataSet", "HDF5MappedDataSet", "open_hdf5"]
