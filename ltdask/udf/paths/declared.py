"""What a UDF declares it can take besides decoded tiles (`TilePaths`, on its class as
``TILE_PATHS``), and what the run's path then hands it with its tiles (`TileForm`, as
``self.tile_form``); see :mod:`ltdask.udf.paths`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

#: corrections a UDF can fold into its results: affine in each pixel
FOLDABLE = frozenset({"dark", "gain"})
#: shared tile statistics (see :mod:`ltdask.udf.shared`)
SHARED_STATS = frozenset({"moments", "pixel_sums", "frame_sums"})
#: the methods that see tiles or what was made of them: a subclass that overrides one of
#: them processes tiles its own way
TILE_METHODS = (
    "process_tile",
    "process_flat_tile",
    "process_frame",
    "process_partition",
    "process_shared_stats",
    "process_tile_sums",
    "get_method",
    "get_task_data",
    "preprocess",
    "postprocess",
)


@dataclass(frozen=True)
class TilePaths:
    """What a UDF class can take besides decoded float tiles (all off by default).

    Parameters
    ----------
    integer_tiles
        Takes 8- and 16-bit tiles as the data's own integers where its input dtype is a
        float, with the results of float tiles (its kernels convert each pixel).
    folds_corrections
        The corrections (``"dark"``, ``"gain"``) it applies to its results, from
        uncorrected integer tiles: ``self.tile_form.folded_corrections``.
    folds_layout
        Sums the files' raw frames and moves its per-pixel results to the image's pixels
        with ``self.tile_form.pixel_layout``.
    sums_from_decoder
        Run alone, takes each tile's per-pixel sums from the decoder in place of the tile:
        ``process_tile_sums(sums, n, dtype)``.
    shared_stats
        Shared tile statistics it takes in ``process_shared_stats`` (see
        :mod:`ltdask.udf.shared`).
    merge_all_on_numpy
        Its ``merge_all`` works on numpy arrays as well as dask arrays: small partial
        results are merged in one task.

    Examples
    --------
    >>> from ltdask.udf import SumUDF, TilePaths, UDF
    >>> SumUDF.TILE_PATHS.integer_tiles
    True
    >>> class Total(UDF):  # sums frames from any integer tile, merges on numpy too
    ...     TILE_PATHS = TilePaths(integer_tiles=True, merge_all_on_numpy=True)
    >>> bool(Total.TILE_PATHS.folds_corrections)
    False
    """

    integer_tiles: bool = False
    folds_corrections: frozenset[str] = frozenset()
    folds_layout: bool = False
    sums_from_decoder: bool = False
    shared_stats: frozenset[str] = frozenset()
    merge_all_on_numpy: bool = False
    #: the class that declared it (set when assigned in a class body)
    owner: type | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self):
        for name, allowed in (
            ("folds_corrections", FOLDABLE),
            ("shared_stats", SHARED_STATS),
        ):
            value = getattr(self, name)
            given = frozenset((value,) if isinstance(value, str) else value)
            if not given <= allowed:
                raise ValueError(
                    f"TilePaths({name}={value!r}): {sorted(given - allowed)} unknown; "
                    f"expected names from {sorted(allowed)}"
                )
            object.__setattr__(self, name, given)

    def __set_name__(self, owner: type, name: str) -> None:
        if self.owner is not None and self.owner is not owner:
            raise TypeError(
                f"{owner.__name__}.{name} is the TilePaths of {self.owner.__name__}: give "
                f"each class its own, e.g. dataclasses.replace({self.owner.__name__}.{name})"
            )
        object.__setattr__(self, "owner", owner)


#: what a UDF declaring nothing takes: decoded tiles
PLAIN = TilePaths()


def tile_paths(udf: Any) -> TilePaths:
    """The `TilePaths` that hold for `udf`: its class's declaration, less what a subclass
    overriding the declaring class's tile methods (`TILE_METHODS`, ``merge_all``) cannot
    take."""
    cls = type(udf)
    declared = getattr(cls, "TILE_PATHS", PLAIN)
    owner = declared.owner
    if owner is None or owner is cls:
        return declared
    if any(_overridden(cls, owner, name) for name in TILE_METHODS):
        declared = replace(PLAIN, merge_all_on_numpy=declared.merge_all_on_numpy)
    if _overridden(cls, owner, "merge_all"):
        declared = replace(declared, merge_all_on_numpy=False)
    return declared


def _overridden(cls: type, owner: type, name: str) -> bool:
    return getattr(cls, name, None) is not getattr(owner, name, None)


@dataclass(frozen=True)
class TileForm:
    """What the run's route hands a UDF with its tiles (``self.tile_form``); a UDF that
    declares no `TilePaths` always gets tiles as they are decoded (everything None)."""

    #: the prepared corrections the UDF applies to its results (``folds_corrections``;
    #: ``dark_gain(sig_index, dtype)`` gives them for a signal slice), else None
    folded_corrections: Any = None
    #: the `ltdask.io.layout.PixelLayout` that moves its per-pixel sums of the files' raw
    #: frames to the image's pixels (``folds_layout``), else None
    pixel_layout: Any = None


#: tiles as decoded
DECODED: TileForm = TileForm()
