"""DECTRIS ARINA / ELA / SELUN series as the SIMPLON FileWriter writes them (NeXus NXmx HDF5).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.dectris.dataset import DectrisDataSet, claims_series, open_dectris
from ltdask.io.registry import Format

FORMAT = Format(
    name="dectris",
    opener=open_dectris,
    description="DECTRIS ARINA/ELA/SELUN series (*_master.h5 and its *_data_NNNNNN.h5)",
    claims=claims_series,
    keywords=("nav_shape", "sync_offset", "dims"),
    aliases=("arina", "ela", "selun"),
)

__all__ = ["FORMAT", "DectrisDataSet", "open_dectris"]
