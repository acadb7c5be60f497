"""Read ranges: which bytes of which file make up each tile, computed in numba.

A read-range array has the shape ``(tiles, ranges_per_tile, 4)``; each row is
``(file_idx, start_byte, stop_byte, dest_px)``: read ``stop - start`` bytes of file
``file_idx`` from ``start`` and decode them into the tile buffer (flat, C order of
``(depth, *slice_shape)``) from pixel ``dest_px`` on. Rows with ``start == stop`` are padding.
Formats whose pixels are not a plain strided dtype supply their own generator with the same
output (more columns may follow the first four).
"""

from __future__ import annotations

import numba
import numpy as np

RR_COLUMNS = 4


@numba.njit(nogil=True, cache=True)
def _runs_for_slice(sig_shape, origin, shape):
    """Contiguous runs of a signal slice: (first dim that is not full, run length in px)."""
    nd = sig_shape.shape[0]
    k = nd - 1
    while k > 0 and shape[k] == sig_shape[k] and origin[k] == 0:
        k -= 1
    run_len = shape[k]
    for j in range(k + 1, nd):
        run_len *= sig_shape[j]
    n_runs = 1
    for j in range(k):
        n_runs *= shape[j]
    return k, run_len, n_runs


@numba.njit(nogil=True, cache=True)
def _run_offset(sig_shape, origin, shape, k, r):
    """Pixel offset within the frame of run number `r` of a slice (runs in C order)."""
    nd = sig_shape.shape[0]
    offset = 0
    stride = 1
    for j in range(nd - 1, -1, -1):
        if j < k:
            idx = r % shape[j]
            r //= shape[j]
            offset += (origin[j] + idx) * stride
        elif j == k:
            offset += origin[j] * stride
        stride *= sig_shape[j]
    return offset


@numba.njit(nogil=True, cache=True)
def _find_file(files, frame):
    """Index of the file holding stream frame `frame` (files sorted by first frame)."""
    lo = 0
    hi = files.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if files[mid, 0] <= frame:
            lo = mid
        else:
            hi = mid - 1
    return lo


@numba.njit(nogil=True, cache=True)
def rows_per_frame(ranges, used, slice_px):
    """How many of the `used` read-range rows of one tile belong to each frame: the rows come
    frame by frame, the same for every frame (frames not in the files have none), so the
    first frame's slot has as many as each (``dest // slice_px``: the slot)."""
    first = ranges[0, 3] // slice_px
    n = 0
    while n < used and ranges[n, 3] // slice_px == first:
        n += 1
    return n


@numba.njit(nogil=True, cache=True)
def tile_table(n_slots, depth, n_slices):
    """``(first_slot, n_slots, scheme_idx)`` of each tile: blocks of `depth` slots, every
    signal slice of a block before the next block."""
    n_blocks = (n_slots + depth - 1) // depth
    tiles = np.zeros((n_blocks * n_slices, 3), dtype=np.int64)
    for b in range(n_blocks):
        first = b * depth
        for s in range(n_slices):
            t = b * n_slices + s
            tiles[t, 0] = first
            tiles[t, 1] = min(depth, n_slots - first)
            tiles[t, 2] = s
    return tiles


@numba.njit(nogil=True, cache=True)
def strided_read_ranges(
    frames, depth, slices, files, sig_shape, bits_per_px, frame_header, frame_footer
):
    """Read ranges for frames stored one after another with fixed headers/footers.

    Parameters
    ----------
    frames : int64[:]
        Stream frame index for each output slot, ``-1`` for a slot that stays empty (a
        frame that is not in the files).
    depth : int
        Slots per tile; tiles are emitted block by block, all signal slices of a block
        before the next block.
    slices : int64[n_slices, 2, sig_dims]
        Origins and shapes of the scheme's signal slices.
    files : int64[n_files, 3]
        ``(first_frame, stop_frame, file_header_bytes)`` per file, sorted.
    sig_shape : int64[sig_dims]
    bits_per_px, frame_header, frame_footer : int

    Returns
    -------
    tiles : int64[n_tiles, 3]
        ``(first_slot, n_slots, scheme_idx)`` per tile.
    ranges : int64[n_tiles, max_ranges, 4]
    """
    n_slots = frames.shape[0]
    n_slices = slices.shape[0]
    frame_px = 1
    for j in range(sig_shape.shape[0]):
        frame_px *= sig_shape[j]
    frame_bytes = (frame_px * bits_per_px) // 8
    stride = frame_header + frame_bytes + frame_footer

    max_runs = 1
    for s in range(n_slices):
        k, run_len, n_runs = _runs_for_slice(sig_shape, slices[s, 0], slices[s, 1])
        if n_runs > max_runs:
            max_runs = n_runs

    tiles = tile_table(n_slots, depth, n_slices)
    ranges = np.zeros((tiles.shape[0], max(1, depth * max_runs), 4), dtype=np.int64)
    for t in range(tiles.shape[0]):
        first, n, s = tiles[t, 0], tiles[t, 1], tiles[t, 2]
        origin = slices[s, 0]
        shape = slices[s, 1]
        k, run_len, n_runs = _runs_for_slice(sig_shape, origin, shape)
        slice_px = run_len * n_runs
        row = 0
        for i in range(n):
            frame = frames[first + i]
            if frame < 0:
                continue
            f = _find_file(files, frame)
            frame_start = files[f, 2] + (frame - files[f, 0]) * stride + frame_header
            for r in range(n_runs):
                px = _run_offset(sig_shape, origin, shape, k, r)
                start = frame_start + (px * bits_per_px) // 8
                ranges[t, row, 0] = f
                ranges[t, row, 1] = start
                ranges[t, row, 2] = start + (run_len * bits_per_px) // 8
                ranges[t, row, 3] = i * slice_px + r * run_len
                row += 1
    return tiles, ranges
