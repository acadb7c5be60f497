"""NanoMEGAS ``.blo`` block files (ASTAR precession diffraction scans).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.blo.dataset import BLO_MAGIC, BloDataSet, open_blo
from ltdask.io.registry import Format

FORMAT = Format(
    name="blo",
    opener=open_blo,
    description=".blo (NanoMEGAS block file)",
    suffixes=(".blo",),
    magic=(BLO_MAGIC,),
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims"),
    engine_suffixes=(".blo",),
)

__all__ = ["FORMAT", "BloDataSet", "open_blo"]
