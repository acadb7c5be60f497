"""Fast paths: how a run's tiles reach its UDFs, declared by the UDFs and picked once
per run.

A UDF class declares what it can take besides decoded float tiles as one `TilePaths`
(``TILE_PATHS = TilePaths(integer_tiles=True, ...)``). The planner asks the paths of
`PATHS`, in order, whether they serve the run (`TilePath.choose`); the first that does
-- else `DecodedTiles` -- is the run's `TilePath`, which the partition tasks follow
(`TilePath.deliver`) and which hands the UDFs what they need besides the tiles
(`TileForm`, ``self.tile_form``). A new fast path is a module here, its line in `PATHS`
(and, where UDFs must say they take it, a `TilePaths` field), and the UDFs that take it.

A subclass keeps its class's declaration only while it processes tiles as the declaring
class does: one that overrides a method that sees the tiles (`TILE_METHODS`) has
declared nothing (its own code may not take integer tiles, nor fold corrections), until
it declares ``TILE_PATHS`` itself.

Examples
--------
>>> import ltdask
>>> from ltdask.udf import SumUDF
>>> SumUDF.TILE_PATHS.integer_tiles
True
>>> class Clipped(SumUDF):  # its own tile code: no fast path until it says so
...     def process_flat_tile(self, frames, p0, p1):
...         super().process_flat_tile(frames.clip(0, 100), p0, p1)
>>> ltdask.udf.paths.tile_paths(Clipped()).integer_tiles
False
"""

from __future__ import annotations

from collections.abc import Callable

from ltdask.io.tiling import TilingScheme
from ltdask.udf.paths.declared import (
    DECODED,
    FOLDABLE,
    SHARED_STATS,
    TILE_METHODS,
    TileForm,
    TilePaths,
    tile_paths,
)
from ltdask.udf.paths.decoded import DecodedTiles
from ltdask.udf.paths.decoder_sums import DecoderSums
from ltdask.udf.paths.device import DeviceTiles
from ltdask.udf.paths.query import IntegerInput, PathQuery, TilePath, integer_input
from ltdask.udf.paths.raw_layout import RawLayout

#: a path's test: ``(path, scheme)`` where it serves the run of the query, else None
Chooser = Callable[[PathQuery], "tuple[TilePath, TilingScheme] | None"]


def choose_path(query: PathQuery) -> tuple[TilePath, TilingScheme]:
    """The first of `PATHS` that serves the run of `query`, else decoded tiles: the path
    and the tiling scheme of the tiles it delivers."""
    for choose in PATHS:
        chosen = choose(query)
        if chosen is not None:
            return chosen
    return DecodedTiles.choose(query)


#: the fast paths, in the order they are tried (the first that serves a run is taken)
PATHS: tuple[Chooser, ...] = (RawLayout.choose, DecoderSums.choose, DeviceTiles.choose)

__all__ = [
    "DECODED",
    "FOLDABLE",
    "PATHS",
    "SHARED_STATS",
    "TILE_METHODS",
    "DecodedTiles",
    "DecoderSums",
    "DeviceTiles",
    "IntegerInput",
    "PathQuery",
    "RawLayout",
    "TileForm",
    "TilePath",
    "TilePaths",
    "choose_path",
    "integer_input",
    "tile_paths",
]
