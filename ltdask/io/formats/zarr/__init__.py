"""Zarr arrays (formats 2 and 3, sharded or not), read chunk aligned through zarr-python.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.zarr.dataset import ZarrDataSet, claims_target, is_zarr, open_zarr
from ltdask.io.registry import Format

FORMAT = Format(
    name="zarr",
    opener=open_zarr,
    description=".zarr directories, zarr.json/.zarray (path= or key= names the array)",
    suffixes=(".zarr",),
    sniff=is_zarr,
    directory=True,
    claims=claims_target,
    keywords=("path", "sig_dims", "dims", "sync_offset", "nav_shape"),
    keyword_aliases=(("key", "path"),),
)

__all__ = ["FORMAT", "ZarrDataSet", "open_zarr"]
