"""Direct Electron StreamPix ``.seq`` acquisitions (DE-16, DE-64 ... cameras).

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.seq.dataset import SeqDataSet, open_seq
from ltdask.io.formats.seq.headers import SEQ_MAGIC_BYTES
from ltdask.io.registry import Format

FORMAT = Format(
    name="seq",
    opener=open_seq,
    description=".seq (Direct Electron StreamPix)",
    suffixes=(".seq",),
    magic=(SEQ_MAGIC_BYTES,),
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims", "dark", "gain", "excluded_pixels"),
    engine_suffixes=(".seq",),
)

__all__ = ["FORMAT", "SeqDataSet", "open_seq"]
