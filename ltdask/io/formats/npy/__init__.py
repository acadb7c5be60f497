"""NumPy ``.npy`` files: a raw scan whose layout comes from the file's header (or, as in
LiberTEM, from ``nav_shape=`` / ``sig_shape=`` over the array's values in C order).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.npy.dataset import NPY_MAGIC, NpyDataSet, open_npy
from ltdask.io.registry import Format

FORMAT = Format(
    name="npy",
    opener=open_npy,
    description=".npy",
    suffixes=(".npy",),
    magic=(NPY_MAGIC,),
    keywords=("sig_dims", "sync_offset", "dims", "nav_shape", "sig_shape"),
    engine_suffixes=(".npy",),
)

__all__ = ["FORMAT", "NpyDataSet", "open_npy"]
