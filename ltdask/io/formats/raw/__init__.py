"""Raw binary scans: frames of one dtype, optionally with file and per-frame headers.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.raw.dataset import RawDataSet, open_raw
from ltdask.io.registry import Format

FORMAT = Format(
    name="raw",
    opener=open_raw,
    description=".raw/.bin/.dat, with nav_shape=, sig_shape= and dtype=",
    suffixes=(".raw", ".bin", ".dat"),
    keywords=(
        "nav_shape",
        "sig_shape",
        "dtype",
        "file_header_bytes",
        "frame_header_bytes",
        "frame_footer_bytes",
        "sync_offset",
        "dims",
    ),
    required=("nav_shape", "sig_shape", "dtype"),
)

__all__ = ["FORMAT", "RawDataSet", "open_raw"]
