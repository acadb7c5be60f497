"""Sums from the decoder: SumUDF (``sums_from_decoder``) run alone on packed or swapped
integer pixels takes each tile's per-pixel sums from the decoder, which adds the pixels up
as it unpacks them (`ltdask.io.decode.Decoder.add_sums`): no tile is made."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ltdask.io.tiling import TilingScheme
from ltdask.udf.paths.declared import TileForm, tile_paths
from ltdask.udf.paths.decoded import DecodedTiles
from ltdask.udf.paths.query import PathQuery, folded_lines, integer_input

if TYPE_CHECKING:
    from ltdask.udf.paths.query import PartitionFeed

#: the largest per-pixel sums (uint32) of a frame that a run whose tiles are summed by the
#: decoder keeps whole: they stay in the core's cache as frames are added
SUMMED_SLICE_BYTES = 2 << 20
#: the most frames of a tile whose sums the decoder makes
SUMMED_DEPTH = 65536


@runtime_checkable
class TileSums(Protocol):
    """A dataset whose decoder sums tiles (`ltdask.io.FileDataSet`)."""

    def can_sum_tiles(self, scheme: TilingScheme) -> bool:
        """Whether `tile_sums` sums the tiles of `scheme`."""

    def tile_sums(
        self, positions: np.ndarray, scheme: TilingScheme, block=None
    ) -> Iterator[tuple[int, int, int, np.ndarray]] | None:
        """``(first, n, scheme_idx, sums)`` per tile (`block`: the partition's dask
        block, where the dataset has blocks), or None where it cannot."""


@runtime_checkable
class TakesTileSums(Protocol):
    """A UDF that takes the per-pixel `sums` of a tile's `n` frames of `dtype`."""

    def process_tile_sums(self, sums: np.ndarray, n: int, dtype: np.dtype) -> None: ...


@dataclass(frozen=True)
class DecoderSums:
    """Tiles summed by the decoder; where it cannot sum a partition's tiles, they are
    read (`DecodedTiles`, of the data's integers)."""

    tile_dtype: np.dtype
    form: TileForm
    corrects_tiles: bool = False

    @classmethod
    def choose(cls, query: PathQuery) -> tuple[DecoderSums, TilingScheme] | None:
        integers = integer_input(query)
        dataset = query.dataset
        if (
            integers is None
            or len(query.udfs) != 1
            or not tile_paths(query.udfs[0]).sums_from_decoder
            or not isinstance(query.udfs[0], TakesTileSums)
            or not isinstance(dataset, TileSums)
        ):
            return None
        path = cls(integers.dtype, TileForm(folded_corrections=integers.folded))
        # no tile is made, so the negotiated size does not apply: tiles a partition deep,
        # of whole frames where their sums stay in the cache, else of the negotiated slices
        depth = min(SUMMED_DEPTH, max(query.partition_frames, 1))
        if 4 * math.prod(query.context.sig_shape) <= SUMMED_SLICE_BYTES:
            whole = query.whole_frames(depth)
            if dataset.can_sum_tiles(whole):
                return path, whole
        negotiated = query.negotiate(integers.dtype)
        deep = TilingScheme(negotiated.slices, depth=depth, intent=negotiated.intent)
        return (path, deep) if dataset.can_sum_tiles(deep) else None

    def deliver(self, feed: PartitionFeed) -> None:
        dataset = feed.dataset
        assert isinstance(dataset, TileSums)
        sums = dataset.tile_sums(feed.present, feed.scheme, feed.block)
        if sums is None:
            DecodedTiles(self.tile_dtype, self.form).deliver(feed)
            return
        bound = feed.bound[0]
        udf = bound.udf
        assert isinstance(udf, TakesTileSums)
        for first, n, s, acc in sums:
            feed.point(bound, first, n, s)
            udf.process_tile_sums(acc, n, self.tile_dtype)

    def describe(self) -> list[str]:
        return [
            *folded_lines(self.form),
            "the decoder adds the pixels up as it reads them: no tiles are made",
        ]
