"""TVIPS ``.tvips`` series (EM-Menu recorder): ``NAME_000.tvips``, ``NAME_001.tvips``, …

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.tvips.dataset import TVIPSDataSet, open_tvips
from ltdask.io.registry import Format

FORMAT = Format(
    name="tvips",
    opener=open_tvips,
    description=".tvips series (TVIPS cameras, EM-Menu recorder)",
    suffixes=(".tvips",),
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims"),
    engine_suffixes=(".tvips",),
)

__all__ = ["FORMAT", "TVIPSDataSet", "open_tvips"]
