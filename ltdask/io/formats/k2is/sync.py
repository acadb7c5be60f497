"""Synchronising the eight sector files of a K2 IS acquisition by their block headers.

The sectors were not started at the same block, and the first and last frame of a file may
be incomplete. :func:`sync_sectors` finds, from block headers only (a few hundred small
reads), where each sector's first whole frame starts, how many whole frames all sectors
hold, and the first frame with the shutter flag set:

1. every sector moves to the block whose ``block_count`` is the largest of the first blocks;
2. if the next 32 blocks of any sector span two frames, every sector moves to its first block
   of the next frame (the first frame was incomplete);
3. the frame count is the whole frames every sector holds (a trailing partial frame is
   dropped); the last one must be one frame in every sector;
4. the shutter frame is the first frame whose blocks have flag bit 0 set (found by bisection:
   the flag stays set once the shutter opened).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.formats.k2is.kernels import BLOCK_BYTES, BLOCK_HEADER_BYTES, BLOCKS_PER_FRAME

SYNC_WORD = 0xFFFF0055
SYNC_BYTES = SYNC_WORD.to_bytes(4, "big")
SHUTTER_ACTIVE = 0x1

HEADER = np.dtype(
    [
        ("sync", ">u4"),
        ("pad1", "V4"),
        ("version", "u1"),
        ("flags", "u1"),
        ("pad2", "V6"),
        ("block_count", ">u4"),
        ("width", ">u2"),
        ("height", ">u2"),
        ("frame_id", ">u4"),
        ("x_start", ">u2"),
        ("y_start", ">u2"),
        ("x_end", ">u2"),
        ("y_end", ">u2"),
        ("block_size", ">u4"),
    ]
)
assert HEADER.itemsize == BLOCK_HEADER_BYTES


def _valid(raw: bytes) -> bool:
    h = np.frombuffer(raw, dtype=HEADER, count=1)[0]
    return bool(h["sync"] == SYNC_WORD and h["width"] == 256 and h["height"] == 1860)


def is_k2is_sector(path: str) -> bool:
    """Whether `path` starts with K2 IS blocks: a valid block header at byte 0 (sync word,
    sector width 256 and height 1860) and, if the file is longer than a block, another one
    a block later. Strict enough to claim ``.bin`` files from raw (never raises)."""
    try:
        with open(path, "rb") as f:
            first = f.read(BLOCK_HEADER_BYTES)
            f.seek(BLOCK_BYTES)
            second = f.read(BLOCK_HEADER_BYTES)
    except OSError:
        return False
    if len(first) < BLOCK_HEADER_BYTES or not _valid(first):
        return False
    return len(second) < BLOCK_HEADER_BYTES or _valid(second)


class Sector:
    """One sector file, read block header by block header."""

    def __init__(self, path: str, index: int):
        self.path = path
        self.index = index
        self.size = os.path.getsize(path)
        self.first = 0  # byte offset of the first block of the first whole frame
        self._cache: dict[int, np.void] = {}

    @property
    def blocks(self) -> int:
        """Whole blocks from `first` to the end of the file."""
        return max(0, (self.size - self.first) // BLOCK_BYTES)

    def header(self, block: int) -> np.void:
        """The header of block `block` (counted from `first`), checked."""
        offset = self.first + block * BLOCK_BYTES
        h = self._cache.get(offset)
        if h is not None:
            return h
        if block < 0 or offset + BLOCK_BYTES > self.size:
            raise DataSetError(
                f"{self.path!r}: block {block} (byte {offset}) is beyond the end of the file "
                f"({self.size} bytes); the sector file is truncated"
            )
        with open(self.path, "rb") as f:
            f.seek(offset)
            raw = f.read(BLOCK_HEADER_BYTES)
        h = np.frombuffer(raw, dtype=HEADER)[0]
        if h["sync"] != SYNC_WORD or h["width"] != 256 or h["height"] != 1860:
            raise DataSetError(
                f"{self.path!r}: no valid K2 IS block at byte {offset} (sync word "
                f"{int(h['sync']):#010x}, width {int(h['width'])}, height {int(h['height'])}; "
                f"expected {SYNC_WORD:#010x}, 256, 1860): the file is corrupt, or its blocks "
                f"are not {BLOCK_BYTES} bytes apart"
            )
        self._cache[offset] = h
        return h

    def frame_ids(self, first_block: int, n: int) -> set[int]:
        return {int(self.header(first_block + k)["frame_id"]) for k in range(n)}


@dataclass(frozen=True)
class SyncResult:
    #: byte offset of each sector's first whole frame
    first_offsets: tuple[int, ...]
    #: whole frames held by every sector
    frames: int
    #: first frame (of the whole frames) with the shutter flag set; None if none has it
    shutter_frame: int | None
    #: block format version of the first block
    version: int
    #: whole frames each sector file holds from its first whole frame on
    sector_frames: tuple[int, ...] = ()


def sync_sectors(paths: list[str]) -> SyncResult:
    """Synchronise the sector files `paths` (in sector order); see the module doc."""
    sectors = [Sector(p, i) for i, p in enumerate(paths)]
    for s in sectors:
        if s.size < BLOCK_BYTES:
            raise DataSetError(
                f"{s.path!r}: {s.size} bytes, not even one K2 IS block ({BLOCK_BYTES} bytes)"
            )
    # 1. the same block in every sector
    counts = [int(s.header(0)["block_count"]) for s in sectors]
    target = max(counts)
    for s, c in zip(sectors, counts, strict=True):
        skip = target - c
        if skip >= s.blocks:
            raise DataSetError(
                f"{s.path!r}: starts at block {c}, the other sectors at block {target}: "
                "the sector files do not overlap"
            )
        s.first = skip * BLOCK_BYTES
        got = int(s.header(0)["block_count"])
        if got != target:
            raise DataSetError(
                f"{s.path!r}: block {skip} has block_count {got}, expected {target}: the block "
                "counts of this sector are not consecutive"
            )
    # 2. start at a whole frame
    span = [s.frame_ids(0, min(BLOCKS_PER_FRAME, s.blocks)) for s in sectors]
    if any(len(ids) > 1 for ids in span):
        partial = int(sectors[0].header(0)["frame_id"])
        for s in sectors:
            for k in range(min(BLOCKS_PER_FRAME, s.blocks)):
                if int(s.header(k)["frame_id"]) != partial:
                    break
            else:
                raise DataSetError(f"{s.path!r}: no whole frame after the incomplete first one")
            s.first += k * BLOCK_BYTES
    # 3. whole frames in every sector, the last one complete
    frames = min(s.blocks for s in sectors) // BLOCKS_PER_FRAME
    if frames == 0:
        raise DataSetError(
            f"{paths[0]!r} and the other sector files hold no whole frame "
            f"({BLOCKS_PER_FRAME} blocks per sector)"
        )
    last = (frames - 1) * BLOCKS_PER_FRAME
    for s in sectors:
        ids = {int(s.header(last)["frame_id"]), int(s.header(last + 31)["frame_id"])}
        if ids != {int(sectors[0].header(last)["frame_id"])}:
            raise DataSetError(
                f"{s.path!r}: frame {frames - 1} (blocks {last}..{last + 31} after byte "
                f"{s.first}) has frame ids {sorted(ids)}, sector 0 has "
                f"{int(sectors[0].header(last)['frame_id'])}: blocks are missing in a sector"
            )
    first_ids = {int(s.header(0)["frame_id"]) for s in sectors}
    if len(first_ids) != 1:
        raise DataSetError(
            f"{paths[0]!r}: the sectors' first whole frames have different frame ids "
            f"{sorted(first_ids)}; the sector files do not belong together"
        )
    # 4. the shutter
    shutter = _first_shutter_frame(sectors[0], frames)
    return SyncResult(
        tuple(s.first for s in sectors),
        frames,
        shutter,
        int(sectors[0].header(0)["version"]),
        tuple(s.blocks // BLOCKS_PER_FRAME for s in sectors),
    )


def _active(sector: Sector, frame: int) -> bool:
    return bool(sector.header(frame * BLOCKS_PER_FRAME)["flags"] & SHUTTER_ACTIVE)


def _first_shutter_frame(sector: Sector, frames: int) -> int | None:
    if _active(sector, 0):
        return 0
    if not _active(sector, frames - 1):
        return None
    lo, hi = 0, frames - 1  # inactive at lo, active at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _active(sector, mid):
            hi = mid
        else:
            lo = mid
    return hi
