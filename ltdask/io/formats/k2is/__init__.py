"""Gatan K2 IS raw acquisitions: ``NAME.gtg`` and eight sector files ``NAME1.bin`` …
``NAME8.bin``.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.k2is.dataset import K2ISDataSet, open_k2is
from ltdask.io.formats.k2is.sync import SYNC_BYTES, is_k2is_sector
from ltdask.io.registry import Format

FORMAT = Format(
    name="k2is",
    opener=open_k2is,
    description=".gtg/.bin (Gatan K2 IS raw: 8 sector files)",
    suffixes=(".gtg",),
    magic=(SYNC_BYTES,),
    # sector files are .bin, which would otherwise be read as raw
    content=is_k2is_sector,
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims"),
)

__all__ = ["FORMAT", "K2ISDataSet", "open_k2is"]
