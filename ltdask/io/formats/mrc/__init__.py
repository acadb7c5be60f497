"""MRC files (MRC2014): stacks of frames after a 1024-byte header, as Velox and ``mrcfile``
write 4D-STEM scans.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.mrc.dataset import MrcDataSet, is_mrc, open_mrc
from ltdask.io.registry import Format

FORMAT = Format(
    name="mrc",
    opener=open_mrc,
    description=".mrc/.mrcs, or MAP at byte 208 (MRC2014 stacks: Velox, mrcfile)",
    suffixes=(".mrc", ".mrcs"),
    sniff=is_mrc,
    keywords=("nav_shape", "sync_offset", "dims"),
    engine_suffixes=(".mrc", ".mrcs"),
)

__all__ = ["FORMAT", "MrcDataSet", "open_mrc"]
