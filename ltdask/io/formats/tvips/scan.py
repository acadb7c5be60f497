"""The scan of a TVIPS series, found from its frame headers (version 2).

The known fields of a version 2 frame header (offsets in bytes, little-endian): a counter
(u4 at 0), the Unix time (u4 at 4) and its milliseconds (u4 at 8), the mode (u4 at 24: 1
image, 2 diffraction), the rotator index (u4 at 48) and, from newer scan software, the scan
position (f4 x at 68, f4 y at 72). Only the bytes 48 to 76 of each header are read, once.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ltdask.io.checks import KeptByVersion
from ltdask.io.fileset import FileSet

SCAN_X_OFFSET = 68
ROTATOR_OFFSET = 48
#: frames whose scan positions are examined at most (the lead-in and first scan row must
#: lie within them), and whose rotator indices are (all of them)
MAX_POSITION_FRAMES = 1 << 16
MAX_ROTATOR_FRAMES = 1 << 20


@dataclass(frozen=True)
class Scan:
    """A scan found in the frame headers: where it starts in the frame stream, its shape."""

    sync_offset: int
    nav_shape: tuple[int, ...]
    how: str


def read_fields(fileset: FileSet, offset: int, dtype, per_frame: int, start: int, stop: int):
    """``(stop - start, per_frame)`` values of `dtype` at byte `offset` of the headers of
    stream frames ``start .. stop``."""
    dt = np.dtype(dtype)
    width = dt.itemsize * per_frame
    stride = fileset.frame_stride
    parts = []
    for f in fileset.files:
        lo = max(start, f.first_frame)
        hi = min(stop, f.first_frame + f.num_frames)
        if lo >= hi:
            continue
        first = f.header_bytes + (lo - f.first_frame) * stride + offset
        # a few bytes from every frame, one frame stride apart: reads of just those bytes
        # (a memory map would fault in a page per frame, and unmap them all again)
        out = bytearray((hi - lo) * width)
        with open(f.path, "rb", buffering=0) as fh:
            fd = fh.fileno()
            for k in range(hi - lo):
                got = os.pread(fd, width, first + k * stride)
                out[k * width : k * width + len(got)] = got
        parts.append(np.frombuffer(out, dtype=dt.newbyteorder("<")).reshape(hi - lo, per_frame))
    return np.concatenate(parts) if parts else np.empty((0, per_frame), dt)


def first_frame_header(fileset: FileSet) -> dict:
    """Time, milliseconds and mode of the series' first frame, where its header has them."""
    if fileset.frame_header_bytes < 28 or fileset.image_count == 0:
        return {}
    words = read_fields(fileset, 0, "<u4", 7, 0, 1)[0].tolist()
    return {"time": words[1], "ms": words[2], "mode": words[6]}


def _scan_from_positions(y: np.ndarray, x: np.ndarray, count: int, complete: bool):
    """The scan the positions of the first frames describe, in a stream of `count` frames;
    None: more frames are needed (or, with `complete`, there is none); False: the positions
    describe no scan."""
    at_origin = (y[:-1] == 0) & (x[:-1] == 0)
    starts = np.flatnonzero(at_origin & (y[1:] == 0) & (x[1:] == 1))
    if starts.size == 0:
        return None
    sync = int(starts[0])
    row = x[sync:]
    widest = np.maximum.accumulate(row)
    back = np.flatnonzero(row[1:] < widest[:-1])
    if back.size:
        width = int(widest[back[0]]) + 1
    elif complete:
        width = int(widest[-1]) + 1  # a single row
    else:
        return None
    rows = (count - sync) // width
    if rows < 1:
        return False
    return Scan(sync, (rows, width), "scan positions in the frame headers")


class HeaderFields:
    """Bytes ``ROTATOR_OFFSET .. SCAN_X_OFFSET + 8`` of the frame headers (rotator index and
    scan position), read once per frame as far as asked for; past the end of the last
    frame, zeros."""

    WIDTH = SCAN_X_OFFSET + 8 - ROTATOR_OFFSET

    def __init__(self, fileset: FileSet):
        self.fileset = fileset
        self.rows = np.empty((0, self.WIDTH), np.uint8)

    def _upto(self, stop: int) -> np.ndarray:
        have = self.rows.shape[0]
        if stop > have:
            more = read_fields(self.fileset, ROTATOR_OFFSET, "u1", self.WIDTH, have, stop)
            self.rows = np.concatenate([self.rows, more])
        return self.rows[:stop]

    def positions(self, start: int, stop: int) -> np.ndarray:
        """``(stop - start, 2)`` float32 scan positions (x, y)."""
        at = SCAN_X_OFFSET - ROTATOR_OFFSET
        raw = np.ascontiguousarray(self._upto(stop)[start:, at : at + 8])
        return raw.view("<f4").reshape(-1, 2)

    def rotator(self, stop: int) -> np.ndarray:
        """The rotator index of frames ``0 .. stop``."""
        return np.ascontiguousarray(self._upto(stop)[:, :4]).view("<u4").reshape(-1)


def _scan_from_positions_of(fileset: FileSet, fields: HeaderFields, partial: int) -> Scan | None:
    count = fileset.image_count
    limit = min(count, MAX_POSITION_FRAMES)
    seen, block = 0, 1024
    parts = []
    while seen < limit:
        stop = min(limit, seen + block)
        parts.append(fields.positions(seen, stop))
        seen, block = stop, block * 2
        xy = np.nan_to_num(np.concatenate(parts), nan=-1.0, posinf=-1.0, neginf=-1.0)
        positions = np.clip(xy, -1, 2**31).astype(np.int64)
        scan = _scan_from_positions(
            positions[:, 1], positions[:, 0], count + partial, seen == count
        )
        if scan is False:
            return None
        if scan is not None:
            return scan
    return None


def _scan_from_rotator(fileset: FileSet, fields: HeaderFields, partial: int) -> Scan | None:
    """A scan whose frames carry rotator indices 0, 1, … N - 1 from the series' first frame,
    or 1, 2, … N after frames of index 0, one after the other."""
    count = fileset.image_count
    if count > MAX_ROTATOR_FRAMES:
        return None
    index = fields.rotator(count).astype(np.int64)
    ones = np.flatnonzero(index == 1)
    if ones.size == 0 or (index[: ones[0]] != 0).any():
        return None
    # one 0 on the series' first frame, then 1, 2, …: a count from 0, whose first point is
    # that frame (dropping it would lose a scan position); several 0s: the count stood
    # still, those frames are outside the scan (0 marks them, as RosettaSciIO reads it)
    start = 0 if ones[0] == 1 else int(ones[0])
    run = index[start:]
    expected = np.arange(run[0], run[0] + run.size)
    wrong = np.flatnonzero(run != expected)
    n = int(wrong[0]) if wrong.size else run.size
    if n == run.size:
        n += partial  # the count runs to the end: the cut-off frame is its next point
    if n < 2:
        return None
    side = math.isqrt(n)
    nav = (side, side) if side * side == n else (n,)
    return Scan(start, nav, "rotator index in the frame headers")


#: scans found, by the files' versions and layout: opening the same series again reads no
#: frame header (16384 small reads cost 20 ms, a sixth of summing 2 GiB of frames)
_SCANS = KeptByVersion()


def detect_scan(fileset: FileSet, header_bytes: int, partial: int = 0) -> Scan | None:
    """The scan the frame headers describe (of `header_bytes` bytes; 0 for version 1
    files, whose headers hold no scan), or None. Kept for files of the same versions.

    `partial` is 1 where the last file ends inside a frame after the whole ones (an
    interrupted acquisition): the scan's shape counts that frame, so a cut-off last frame
    leaves the shape as the headers give it, its position missing (invalid in results),
    rather than dropping a row of whole frames."""
    layout = tuple((f.path, f.first_frame, f.num_frames, f.header_bytes) for f in fileset.files)
    key = (fileset.signatures(), layout, fileset.frame_stride, header_bytes, partial)
    return _SCANS.get(key, lambda: _detect_scan(fileset, header_bytes, partial))


def _detect_scan(fileset: FileSet, header_bytes: int, partial: int) -> Scan | None:
    fields = HeaderFields(fileset)
    if header_bytes >= SCAN_X_OFFSET + 8:
        scan = _scan_from_positions_of(fileset, fields, partial)
        if scan is not None:
            return scan
    if header_bytes >= ROTATOR_OFFSET + 4:
        # (with shorter headers, the bytes read past the index are pixels, and unused)
        return _scan_from_rotator(fileset, fields, partial)
    return None
