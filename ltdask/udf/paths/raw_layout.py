"""The files' raw frames: for a dataset whose frames are its files' frames with the
pixels moved (`ltdask.io.layout.PixelLayout`), UDFs that sum over frames declare
``folds_layout``: they sum the raw frames as stored (views of the files, no copy that
puts every pixel in its place) and move their per-pixel results once per partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ltdask.io.layout import PixelLayout
from ltdask.io.tiling import TilingScheme
from ltdask.udf.paths.declared import TileForm
from ltdask.udf.paths.query import PathQuery, folded_lines, integer_input

if TYPE_CHECKING:
    from ltdask.udf.paths.query import PartitionFeed


@dataclass(frozen=True)
class RawLayout:
    """Tiles of whole raw frames of `layout`'s dataset, in `raw_scheme`; the UDFs see
    tiles of whole frames (of the raw frame's size)."""

    layout: PixelLayout
    raw_scheme: TilingScheme
    tile_dtype: np.dtype | None
    form: TileForm
    corrects_tiles: bool = False

    @classmethod
    def choose(cls, query: PathQuery) -> tuple[RawLayout, TilingScheme] | None:
        integers = integer_input(query)
        folded = None if integers is None else integers.folded
        if (
            (query.prepared is not None and folded is None)  # (tiles corrected as read)
            or not query.numpy_only
            or any(method != "tile" for method in query.methods)
            or not query.all_declare(lambda d: d.folds_layout)
        ):
            return None
        layout = query.dataset.pixel_layout()
        if layout is None:
            return None
        tile_dtype = None if integers is None else integers.dtype
        read_as = query.context.input_dtype if tile_dtype is None else tile_dtype
        raw = layout.dataset.negotiate(query.consumers, read_as, query.context.roi.flat)
        if len(raw) != 1:
            return None
        form = TileForm(folded_corrections=folded, pixel_layout=layout)
        return cls(layout, raw, tile_dtype, form), query.whole_frames(raw.depth, raw.intent)

    def deliver(self, feed: PartitionFeed) -> None:
        dtype = feed.read_dtype if self.tile_dtype is None else self.tile_dtype
        raw = self.layout.dataset
        feed.consume(raw.iter_flat_tiles(feed.present, self.raw_scheme, dtype, feed.block))

    def describe(self) -> list[str]:
        raw = tuple(self.raw_scheme.slices[0].shape)
        return [
            *folded_lines(self.form),
            f"tiles are the files' raw frames of {raw}, read as stored: the UDFs move "
            "their per-pixel results to the frame's pixels",
        ]
