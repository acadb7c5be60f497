"""Sparse scans stored as CSR: LiberTEM's ``raw_csr`` format.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.raw_csr.dataset import RawCSRDataSet, open_raw_csr
from ltdask.io.formats.raw_csr.descriptor import is_raw_csr
from ltdask.io.registry import Format

FORMAT = Format(
    name="raw_csr",
    opener=open_raw_csr,
    description=".toml descriptor with filetype = 'raw_csr'",
    suffixes=(".toml",),
    sniff=is_raw_csr,
    keywords=("nav_shape", "sig_shape", "sync_offset", "dims"),
    engine_suffixes=(".toml",),
)

__all__ = ["FORMAT", "RawCSRDataSet", "open_raw_csr"]
