"""PNDetector pnCCD ``.frms6`` acquisitions: a ``.hdr`` file and ``NAME_000.frms6`` (dark
frames), ``NAME_001.frms6``, … (signal frames).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.frms6.dataset import Frms6DataSet, is_frms6_hdr, open_frms6
from ltdask.io.formats.frms6.headers import FRMS6_MAGIC
from ltdask.io.registry import Format

FORMAT = Format(
    name="frms6",
    opener=open_frms6,
    description=".frms6/.hdr (PNDetector pnCCD)",
    suffixes=(".frms6",),
    magic=(FRMS6_MAGIC,),
    sniff=is_frms6_hdr,
    keywords=(
        "nav_shape",
        "sig_shape",
        "sync_offset",
        "dims",
        "enable_offset_correction",
        "gain_map_path",
    ),
    engine_suffixes=(".frms6",),
)

__all__ = ["FORMAT", "Frms6DataSet", "open_frms6"]
