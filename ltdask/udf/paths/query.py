"""What a path of :mod:`ltdask.udf.paths` is (`TilePath`) and what it is told of a run to
say whether it serves it (`PathQuery`), with what several paths share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.io.tiling import Intent, TilingScheme
from ltdask.udf.paths.declared import TileForm, TilePaths, tile_paths

if TYPE_CHECKING:
    from ltdask.io.dataset import DataSet
    from ltdask.io.tiling import TilingPreferences


# The engine's modules that run a path import this package; a path names what it uses of
# them as protocols, so that no import runs back up.
class RunFacts(Protocol):
    """What the paths read of a run as the UDFs see it (`ltdask.udf.bind.RunContext`)."""

    @property
    def sig_shape(self) -> tuple[int, ...]: ...
    @property
    def input_dtype(self) -> np.dtype: ...
    @property
    def roi(self) -> Any: ...
    @property
    def backends(self) -> Any: ...


class PartitionFeed(Protocol):
    """What a path's `TilePath.deliver` uses of a partition task's frames on their way to
    the UDFs (`ltdask.udf.runner.PartitionFeed`)."""

    dataset: Any
    present: np.ndarray
    scheme: TilingScheme
    bound: list
    read_dtype: np.dtype
    source: str
    block: Any
    corrections: Any

    def point(self, b: Any, first: int, n: int, s: int, frame: bool = False) -> None: ...

    def consume(self, tiles: Any) -> None: ...


class TilePath(Protocol):
    """How the tiles of a run reach its UDFs: picked once per run by the planner
    (`choose_path`), pickled into its partition tasks, which call `deliver`."""

    @property
    def tile_dtype(self) -> np.dtype | None:
        """The dtype tiles are read as, where it is not the run's input dtype (the data's
        integers, for UDFs that convert them themselves), else None."""

    @property
    def form(self) -> TileForm:
        """What the UDFs get with the tiles (``self.tile_form``)."""

    @property
    def corrects_tiles(self) -> bool:
        """Whether the partition tasks apply the run's corrections to every tile."""

    def deliver(self, feed: PartitionFeed) -> None:
        """Stream the frames of `feed`'s partition to its UDFs (``feed.consume`` takes
        tiles; ``feed.point`` points a UDF at a part of the partition)."""

    def describe(self) -> list[str]:
        """Lines for `ltdask.explain`: how the tiles reach the UDFs."""


@dataclass(frozen=True, eq=False)
class PathQuery:
    """What a path needs to know of a run to say whether it serves it."""

    dataset: DataSet
    #: the UDF instances of the run, their methods (``"tile"``, ``"frame"``,
    #: ``"partition"``) and tiling preferences
    udfs: Sequence[Any]
    methods: Sequence[str]
    consumers: Sequence[TilingPreferences]
    #: the run as the UDFs see it (decoded tiles)
    context: RunFacts
    #: the corrections for the dataset's signal shape, or None
    prepared: Any
    #: the most frames of a partition
    partition_frames: int
    #: the tiling scheme the dataset negotiates for tiles read as a dtype (keyword
    #: ``tile_bytes``: tiles of about that size, not ``ltdask.tile-bytes``)
    negotiate: Callable[..., TilingScheme]

    @property
    def numpy_only(self) -> bool:
        """Whether the dataset delivers numpy and every UDF takes numpy."""
        plan = self.context.backends
        return plan is None or (plan.source, set(plan.targets)) == ("numpy", {"numpy"})

    def all_declare(self, wanted: Callable[[TilePaths], Any]) -> bool:
        """Whether the `TilePaths` of every UDF of the run has `wanted`."""
        return all(wanted(tile_paths(u)) for u in self.udfs)

    def whole_frames(self, depth: int, intent: Intent = "tile") -> TilingScheme:
        """Tiles of `depth` whole frames."""
        sig = self.context.sig_shape
        full = Slice.full(Shape(sig, sig_dims=len(sig)))
        return TilingScheme([full], depth=depth, intent=intent)


@dataclass(frozen=True)
class IntegerInput:
    """Tiles of the data's own dtype (`dtype`: 8/16-bit integers, or the floats of a
    float scan where they are the run's input dtype) for UDFs that take them, with the
    corrections they fold (`folded`, or None)."""

    dtype: np.dtype
    folded: Any = None


def integer_input(query: PathQuery) -> IntegerInput | None:
    """The data's own dtype where every UDF of the run takes tiles of it in place of
    corrected float ones: 8- and 16-bit integers, which float32 holds exactly, read without
    a converted copy where every UDF takes them (``integer_tiles``: their results are those
    of float tiles, the conversion done in their kernels); and with corrections, the
    data's integers or floats (of the run's input dtype) uncorrected where every UDF folds
    the given corrections into its results (``folds_corrections``: a sum of uncorrected
    frames is corrected after the sum, a mask product through corrected masks; see
    `ltdask.corrections.LinearCorrection`). None where the tiles are corrected as they are
    read."""
    context, prepared = query.context, query.prepared
    native = np.dtype(query.dataset.dtype).newbyteorder("=")
    if context.input_dtype.kind != "f" or not query.numpy_only:
        return None
    integers = (
        native.kind in "ui"
        and native.itemsize <= 2
        and query.all_declare(lambda d: d.integer_tiles)
    )
    if prepared is None:
        return IntegerInput(native) if integers else None
    if not integers and native != context.input_dtype:
        return None
    given = {name for name in ("dark", "gain") if getattr(prepared.source, name) is not None}
    if prepared.has_excluded:
        given.add("excluded")
    if not query.all_declare(lambda d: given <= d.folds_corrections):
        return None
    return IntegerInput(native, prepared)


def folded_lines(form: TileForm) -> list[str]:
    if form.folded_corrections is None:
        return []
    return [
        "corrections (dark/gain/excluded pixels) applied by the UDFs to their results: "
        "tiles uncorrected"
    ]
