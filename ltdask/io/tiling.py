"""Tiling negotiation: how a partition is cut into tiles for its consumers.

A :class:`TilingScheme` is one tile depth (frames per tile) and a list of signal slices that
cover the frame exactly once. The :class:`Negotiator` picks it from what the consumers (UDFs,
``to_dask``) prefer and what the dataset can deliver efficiently: a *base shape* every tile's
signal extent must be a multiple of, a minimum signal size, the largest sensible read, and a
tile size in bytes near the L3 cache share of one core.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.runtime import settings


class Negotiable(Protocol):
    """What the negotiation asks of a dataset (`ltdask.io.dataset.DataSet`, which imports
    this module): its shape, whether reading as a dtype copies, its largest read, and the
    tile shapes its files prefer."""

    @property
    def shape(self) -> Shape: ...

    def need_decode(self, read_dtype, roi=None) -> bool: ...

    def get_max_io_size(self) -> int | None: ...

    def get_base_shape(self, roi=None) -> tuple[int, ...]: ...

    def get_min_sig_size(self) -> int: ...

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]: ...


Intent = Literal["tile", "frame", "partition"]

TILE_DEPTH_DEFAULT = 32
#: marker for "as deep / as large as possible"
TILE_MAX = math.inf
#: marker for "the size the negotiator finds best" (the configured tile size)
TILE_SIZE_BEST_FIT = -1


class TilingScheme:
    """A tile depth plus signal slices that tile the frame (row-major order).

    Parameters
    ----------
    slices
        Signal-only slices, disjoint, covering the whole signal shape.
    depth
        Frames per tile; tiles at the end of a partition may be shallower.
    intent
        ``"tile"``, ``"frame"`` or ``"partition"``: what the consumers asked for.

    Examples
    --------
    A run negotiates one (:meth:`DataSet.negotiate`); a UDF sees it as
    ``self.meta.tiling_scheme``, the current slice's index as ``self.meta.tiling_scheme_idx``.

    >>> import ltdask
    >>> scheme = ltdask.TilingScheme.make_for_shape((4, 8, 16), sig_shape=(16, 16))
    >>> scheme
    TilingScheme(tileshape=(4, 8, 16), slices=2, intent='tile')
    >>> scheme.sig_indices  # each slice indexes a frame
    ((slice(0, 8, None), slice(0, 16, None)), (slice(8, 16, None), slice(0, 16, None)))
    """

    def __init__(self, slices: Sequence[Slice], depth: int, intent: Intent = "tile"):
        if not slices:
            raise ValueError("a tiling scheme needs at least one signal slice")
        if depth < 1:
            raise ValueError(f"tile depth must be >= 1, got {depth}")
        self.slices = tuple(slices)
        self.depth = int(depth)
        self.intent = intent
        sig = self.slices[0].shape
        self.sig_dims = sig.sig_dims
        self.slices_array = np.array(
            [[s.origin, tuple(s.shape)] for s in self.slices], dtype=np.int64
        ).reshape(len(self.slices), 2, self.sig_dims)

    @classmethod
    def make_for_shape(
        cls, tileshape: Sequence[int], sig_shape: Sequence[int], intent: Intent = "tile"
    ) -> TilingScheme:
        """Cut `sig_shape` into slices of ``tileshape[1:]``; ``tileshape[0]`` is the depth."""
        sig = Shape(sig_shape, sig_dims=len(sig_shape))
        slices = list(Slice.full(sig).subslices(tileshape[1:]))
        return cls(slices, depth=int(tileshape[0]), intent=intent)

    @functools.cached_property
    def sig_indices(self) -> tuple[tuple[slice, ...], ...]:
        """Each signal slice as a tuple of Python slices (indexes a frame)."""
        return tuple(s.get() for s in self.slices)

    @functools.cached_property
    def flat_ranges(self) -> tuple[tuple[int, int] | None, ...]:
        """Each signal slice as a range ``(p0, p1)`` of the flattened frame where it is one
        (whole rows), else None."""
        full = [sum(c) for c in self.sig_chunks]
        inner = math.prod(full[1:])
        out = []
        for s in self.slices:
            whole_rows = all(
                o == 0 and n == f
                for o, n, f in zip(s.origin[1:], tuple(s.shape)[1:], full[1:], strict=True)
            )
            p0 = s.origin[0] * inner
            out.append((p0, p0 + math.prod(s.shape)) if whole_rows else None)
        return tuple(out)

    @property
    def tileshape(self) -> tuple[int, ...]:
        return (self.depth, *self.slices[0].shape)

    @property
    def sig_chunks(self) -> tuple[tuple[int, ...], ...]:
        """The slices as per-dim chunk sizes (they always form a grid)."""
        chunks = []
        for dim in range(self.sig_dims):
            sizes = {}
            for s in self.slices:
                sizes[s.origin[dim]] = s.shape[dim]
            chunks.append(tuple(sizes[k] for k in sorted(sizes)))
        return tuple(chunks)

    def __len__(self) -> int:
        return len(self.slices)

    def __getitem__(self, idx: int) -> Slice:
        return self.slices[idx]

    def __iter__(self):
        return iter(self.slices)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TilingScheme):
            return NotImplemented
        return (self.slices, self.depth, self.intent) == (other.slices, other.depth, other.intent)

    def __hash__(self) -> int:
        return hash((self.slices, self.depth, self.intent))

    def __repr__(self) -> str:
        return (
            f"TilingScheme(tileshape={self.tileshape}, slices={len(self.slices)}, "
            f"intent={self.intent!r})"
        )

    def __dask_tokenize__(self):
        return ("ltdask.TilingScheme", self.slices_array.tobytes(), self.depth, self.intent)


@dataclass(frozen=True)
class TilingPreferences:
    """What one consumer of tiles wants.

    ``method`` is how it consumes data (``"tile"``, ``"frame"`` or ``"partition"``);
    ``depth`` frames per tile (``TILE_DEPTH_DEFAULT``, an int or ``TILE_MAX``);
    ``total_size`` bytes per tile (``TILE_SIZE_BEST_FIT``, an int or ``TILE_MAX``). Tile
    consumers alone get tiles grown, deeper first, to their smallest ``total_size`` (at
    most the dataset's largest read): there ``total_size``, not ``depth``, sets the depth.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> ds = ltdask.from_array(np.zeros((8, 8, 16, 16), dtype=np.uint16))
    >>> ds.negotiate([ltdask.TilingPreferences()], np.float32)
    TilingScheme(tileshape=(32, 16, 16), slices=1, intent='tile')
    >>> ds.negotiate([ltdask.TilingPreferences(total_size=4096)], np.float32)  # 4 frames
    TilingScheme(tileshape=(4, 16, 16), slices=1, intent='tile')
    """

    method: Intent = "tile"
    depth: float = TILE_DEPTH_DEFAULT
    total_size: float = TILE_SIZE_BEST_FIT


#: whole frames as view tiles only where a tile holds this many of them (see `Negotiator`)
VIEW_DEPTH = 4


class Negotiator:
    """Finds one :class:`TilingScheme` for a run (all partitions, all consumers).

    Parameters
    ----------
    tile_bytes
        The tile size to aim for; by default ``ltdask.tile-bytes`` from dask's config.

    Examples
    --------
    >>> import ltdask, numpy as np
    >>> ds = ltdask.from_array(np.zeros((16, 16, 128, 128), dtype=np.float32))
    >>> Negotiator(tile_bytes=2**20).get_scheme(
    ...     [TilingPreferences()], ds, np.float32, partition_frames=128).tileshape
    (16, 128, 128)
    >>> Negotiator(tile_bytes=2**20).get_scheme(  # decoding float32 to float64: row blocks
    ...     [TilingPreferences()], ds, np.float64, partition_frames=128).tileshape
    (32, 32, 128)
    """

    def __init__(self, tile_bytes: int | None = None):
        self.tile_bytes = int(tile_bytes) if tile_bytes is not None else settings.tile_bytes()

    def get_scheme(
        self,
        consumers: Sequence[TilingPreferences],
        dataset: Negotiable,
        read_dtype,
        partition_frames: int,
        roi: np.ndarray | None = None,
        max_io_size: int | None = None,
        excluded: np.ndarray | None = None,
    ) -> TilingScheme:
        """The scheme for `consumers` reading `dataset` as `read_dtype`.

        `partition_frames` is the number of frames of the largest partition: no tile is
        deeper. `max_io_size` overrides the largest read the dataset asks for. `excluded`:
        coordinates ``(sig_dims, N)`` of pixels repaired from their 3×3 neighbourhood, which
        must lie in the same tile (`avoid_excluded`).
        """
        if not consumers:
            consumers = [TilingPreferences()]
        itemsize = np.dtype(read_dtype).itemsize
        sig = tuple(dataset.shape.sig)
        frame_px = math.prod(sig)
        partition_frames = max(1, int(partition_frames))
        partition_bytes = partition_frames * frame_px * itemsize
        need_decode = dataset.need_decode(read_dtype, roi)

        # Tiles are L3-sized whether they are decoded into a buffer or handed out as views
        # of the files: several UDFs in one run then find each tile still in cache.
        io_max = max_io_size if max_io_size is not None else dataset.get_max_io_size()
        if io_max is None:
            io_max = self.tile_bytes

        methods = {c.method for c in consumers}
        if "partition" in methods:
            intent: Intent = "partition"
        elif "frame" in methods:
            intent = "frame"
        else:
            intent = "tile"

        depth = 1
        sizes = []
        for c in consumers:
            if c.method == "partition":
                d = partition_frames
                sizes.append(partition_bytes)
            elif c.method == "frame":
                d = 1
                sizes.append(max(self.tile_bytes, frame_px * itemsize))
            else:
                pref_depth = TILE_DEPTH_DEFAULT if c.depth is None else c.depth
                d = partition_frames if pref_depth == TILE_MAX else int(pref_depth)
                total = self.tile_bytes if c.total_size == TILE_SIZE_BEST_FIT else c.total_size
                sizes.append(min(total, io_max))
            depth = max(depth, min(d, partition_frames))

        if intent == "tile":
            base = tuple(dataset.get_base_shape(roi))
            if not need_decode and VIEW_DEPTH * frame_px * itemsize <= min(self.tile_bytes, io_max):
                # views of the files: cutting the frame saves no buffer space, and whole
                # frames keep each tile one contiguous block, read as one stream (row
                # blocks of deep tiles measured no faster, even for several UDFs) -- where
                # tiles of whole frames can be VIEW_DEPTH deep: a UDF's per-pixel state of
                # a larger frame leaves the caches between frames (docs/performance.md)
                base = sig
        else:
            base = sig
        base = tuple(min(b, s) for b, s in zip(base, sig, strict=True))
        base_px = math.prod(base)
        size = max(sizes) if intent == "partition" else min(sizes)
        size = max(size, base_px * itemsize)
        size_px = max(1, int(size // itemsize))

        # signal extent: the base shape scaled up to the dataset's minimum signal size
        min_sig_px = min(dataset.get_min_sig_size(), frame_px)
        sig_tile = list(base)
        for i in range(len(sig)):
            have = math.prod(sig_tile)
            if have >= min_sig_px:
                break
            factor = -(-min_sig_px // have)
            sig_tile[i] = min(sig[i], sig_tile[i] * factor)
            sig_tile[i] = _snap(sig_tile[i], base[i], sig[i])

        if intent == "partition":
            depth = partition_frames
        else:
            depth = min(depth, max(1, size_px // math.prod(sig_tile)))
        tileshape = [depth, *sig_tile]
        if intent == "tile" or methods == {"frame"}:
            # frame consumers alone get stacks of frames (fewer, larger reads); mixed with
            # tile consumers they get the tile consumers' depth, in whole frames
            tileshape = self._scale(tileshape, (partition_frames, *sig), (1, *base), size_px)
        tileshape = list(dataset.adjust_tileshape(tuple(tileshape), roi))
        if intent == "partition":
            tileshape[0] = partition_frames  # a partition UDF gets its whole partition
        if excluded is not None and np.size(excluded):
            before = math.prod(tileshape[1:])
            tileshape[1:] = avoid_excluded(tileshape[1:], sig, base, excluded)
            if intent == "tile":
                # a slice widened around excluded pixels keeps the tile's bytes: fewer
                # frames deep (with 1 % of pixels excluded slices grew 4x, and tiles to
                # 36 MiB, out of the cache)
                tileshape[0] = max(1, tileshape[0] * before // math.prod(tileshape[1:]))
        self._validate(tileshape, sig, base)
        return TilingScheme.make_for_shape(tileshape, sig, intent)

    @staticmethod
    def _scale(tileshape, containing, base, size_px):
        """Grow each dim in turn, depth first, while the tile stays within `size_px`."""
        tileshape = list(tileshape)
        for i in range(len(tileshape)):
            current = math.prod(tileshape)
            if current >= size_px:
                break
            factor = size_px / current
            grown = int(tileshape[i] * factor)
            if i == 0:
                grown = min(grown, containing[0])
            else:
                grown = _snap(min(grown, containing[i]), base[i], containing[i])
            tileshape[i] = max(tileshape[i], grown)
        return tileshape

    @staticmethod
    def _validate(tileshape, sig, base):
        if tileshape[0] < 1:
            raise ValueError(f"negotiated tile depth {tileshape[0]} < 1")
        for t, s, b in zip(tileshape[1:], sig, base, strict=True):
            if not 1 <= t <= s:
                raise ValueError(f"negotiated tile shape {tuple(tileshape)} does not fit {sig}")
            if t != s and t % b != 0:
                raise ValueError(
                    f"negotiated tile shape {tuple(tileshape)} is not a multiple of the "
                    f"base shape {base}"
                )


def avoid_excluded(tile, sig, base, excluded) -> list[int]:
    """`tile` (the signal extent of a tile) changed, dim by dim, so that no boundary between
    two tiles runs next to an excluded pixel (whose 3×3 neighbourhood must then be in one
    tile): a multiple of the base shape near the old extent, or the whole dim."""
    out = list(tile)
    for d, (t, s, b) in enumerate(zip(tile, sig, base, strict=True)):
        if t >= s:
            continue
        # a boundary at k*t separates rows k*t - 1 and k*t: neither may hold one
        forbidden = set(np.asarray(excluded[d]).tolist())
        forbidden |= {p + 1 for p in forbidden}
        b = max(1, b)
        candidates = sorted(range(b, s, b), key=lambda c: (abs(c - t), -c))
        out[d] = next((c for c in candidates if not any(m in forbidden for m in range(c, s, c))), s)
    return out


def _snap(value: int, base: int, full: int) -> int:
    """Round `value` down to a multiple of `base`, or to `full` when it reaches it."""
    if value >= full:
        return full
    return max(base, (value // base) * base)


def flat_of(data: np.ndarray, copy: bool = False) -> tuple | None:
    """``(frames, 0, pixels)`` for a C-contiguous tile; for another tile None, or with
    `copy` the same of a C-contiguous copy."""
    if not data.flags.c_contiguous:
        if not copy:
            return None
        data = np.ascontiguousarray(data)
    frames = data.reshape(data.shape[0], -1)
    return frames, 0, frames.shape[1]
