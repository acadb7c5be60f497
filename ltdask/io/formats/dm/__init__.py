"""Gatan DigitalMicrograph ``.dm3`` / ``.dm4`` files holding 4-D scans or stacks of frames.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.dm.dataset import DMDataSet, is_dm, open_dm
from ltdask.io.registry import Format

FORMAT = Format(
    name="dm",
    opener=open_dm,
    description=".dm3/.dm4, or their header (Gatan DigitalMicrograph)",
    suffixes=(".dm3", ".dm4"),
    sniff=is_dm,
    keywords=("nav_shape", "sync_offset", "dims", "force_c_order"),
    aliases=("dm3", "dm4"),
    engine_suffixes=(".dm3", ".dm4"),
)

__all__ = ["FORMAT", "DMDataSet", "open_dm"]
