"""EMPAD (G1) scans: an XML descriptor and a raw file of float32 frames.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.empad.dataset import EMPADDataSet, is_empad_xml, open_empad
from ltdask.io.registry import Format

FORMAT = Format(
    name="empad",
    opener=open_empad,
    description=".xml descriptor naming a .raw file (EMPAD)",
    sniff=is_empad_xml,
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims"),
    engine_suffixes=(".xml",),
)

__all__ = ["FORMAT", "EMPADDataSet", "open_empad"]
