"""Decoded tiles: the path every run can take. Tiles as the dataset decodes them, in the
run's input dtype and corrected as they are read -- or, where every UDF of the run takes
them (`ltdask.udf.paths.integer_input`), the data's own 8/16-bit integers, uncorrected
where the UDFs fold the corrections into their results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ltdask.io.tiling import TilingScheme
from ltdask.udf.paths.declared import DECODED, TileForm
from ltdask.udf.paths.query import PathQuery, folded_lines, integer_input

if TYPE_CHECKING:
    from ltdask.udf.paths.query import PartitionFeed


@dataclass(frozen=True)
class DecodedTiles:
    """Tiles of the negotiated scheme, read as `tile_dtype` (None: the run's input dtype,
    corrected where `corrects_tiles`)."""

    tile_dtype: np.dtype | None = None
    form: TileForm = DECODED
    corrects_tiles: bool = False

    @classmethod
    def choose(cls, query: PathQuery) -> tuple[DecodedTiles, TilingScheme]:
        integers = integer_input(query)
        if integers is None:
            path = cls(corrects_tiles=query.prepared is not None)
            return path, query.negotiate(query.context.input_dtype)
        path = cls(integers.dtype, TileForm(folded_corrections=integers.folded))
        return path, query.negotiate(integers.dtype)

    def deliver(self, feed: PartitionFeed) -> None:
        dtype = self.tile_dtype
        if dtype is None:
            corrections = feed.corrections
            dtype = feed.read_dtype if corrections is None else corrections.tile_dtype
        dataset, present, scheme, block = feed.dataset, feed.present, feed.scheme, feed.block
        if feed.source == "numpy":
            feed.consume(dataset.iter_flat_tiles(present, scheme, dtype, block))
            return
        tiles = dataset.iter_tiles(present, scheme, dtype, block, array_backend=feed.source)
        feed.consume((tile, first, s, None) for tile, first, s in tiles)

    def describe(self) -> list[str]:
        if self.corrects_tiles:
            return [
                "corrections (dark/gain/excluded pixels) applied as tiles are read: dense tiles"
            ]
        return folded_lines(self.form)
