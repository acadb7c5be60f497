"""Thermo Fisher Velox EMD files (HDF5): the camera stacks of 4D-STEM acquisitions.

The format's declaration: its registry record, ``FORMAT``, and its public names
(``__all__``), which ``ltdask.io`` re-exports, and ``ltdask`` its opener."""

from __future__ import annotations

from ltdask.io.formats.velox.dataset import VeloxDataSet, VeloxH5DataSet, is_velox, open_emd
from ltdask.io.registry import Format

FORMAT = Format(
    name="velox",
    opener=open_emd,
    description=".emd (Thermo Fisher Velox; dataset= names the image series)",
    claims=is_velox,
    keywords=("dataset", "nav_shape", "sync_offset", "dims"),
    aliases=("emd",),
    keyword_aliases=(("key", "dataset"),),
)

__all__ = ["FORMAT", "VeloxDataSet", "VeloxH5DataSet", "open_emd"]
