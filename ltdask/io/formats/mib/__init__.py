"""Quantum Detectors Merlin ``.mib`` files (with their optional ``.hdr`` acquisition header).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.mib.dataset import MibDataSet, open_mib
from ltdask.io.formats.mib.headers import MIB_MAGIC
from ltdask.io.registry import Format

FORMAT = Format(
    name="mib",
    opener=open_mib,
    description=".mib/.hdr (Quantum Detectors Merlin)",
    suffixes=(".mib",),
    # a Merlin .hdr starts with "HDR,"; FRMS6 acquisitions have .hdr files too (INI text)
    magic=(MIB_MAGIC, b"HDR,"),
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims", "disable_glob"),
    engine_suffixes=(".mib",),
)

__all__ = ["FORMAT", "MibDataSet", "open_mib"]
