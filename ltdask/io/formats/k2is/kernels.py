"""numba kernels of the K2 IS reader: read ranges from tiles to blocks, and the 12-bit
decoder that unpacks each block into its place in the tile.

Sector ``s`` (of 8) holds columns ``256 s .. 256 s + 255`` of the 1860 x 2048 frame. A frame
is 32 consecutive blocks per sector: two bands of 930 rows, each of 16 blocks of 16 columns
that run right to left. A block is a 40-byte header and 930 rows of 16 pixels packed in 24
bytes (two pixels per 3 bytes, low nibble first).
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.read_ranges import rows_per_frame, tile_table

BLOCK_BYTES = 0x5758
BLOCK_HEADER_BYTES = 40
BLOCK_ROWS = 930
BLOCK_COLS = 16
BLOCKS_PER_FRAME = 32  # per sector
SECTOR_WIDTH = 256
NUM_SECTORS = 8
ROW_BYTES = BLOCK_COLS * 3 // 2
FRAME_SHAPE = (2 * BLOCK_ROWS, NUM_SECTORS * SECTOR_WIDTH)
RR_COLUMNS = 9


@numba.njit(nogil=True, cache=True)
def k2is_read_ranges(frames, depth, slices, files, sig_shape):
    """Read ranges of K2 IS frames: one row per (frame, block touched by the slice).

    Parameters
    ----------
    frames : int64[:]
        Stream frame per output slot (-1: empty).
    slices : int64[n_slices, 2, 2]
        Origins and shapes of the signal slices (any rectangle; blocks are clipped).
    files : int64[8, 3]
        ``(0, frames, first_block_offset)`` of each sector file.
    sig_shape : int64[2]
        The frame shape, ``(1860, 2048)``.

    Returns
    -------
    tiles : int64[n_tiles, 3]
    ranges : int64[n_tiles, max_ranges, 9]
        ``(sector, start, stop, dest_px, dest_row_stride, r0, r1, c0, c1)``: rows ``r0:r1``
        and columns ``c0:c1`` of the block whose payload is ``start:stop``, written to the
        tile from pixel ``dest_px`` on, rows ``dest_row_stride`` apart.
    """
    n_slices = slices.shape[0]
    frame_stride = BLOCKS_PER_FRAME * BLOCK_BYTES
    max_blocks = 1
    for s in range(n_slices):
        y0, x0 = slices[s, 0, 0], slices[s, 0, 1]
        h, w = slices[s, 1, 0], slices[s, 1, 1]
        by = (y0 + h - 1) // BLOCK_ROWS - y0 // BLOCK_ROWS + 1
        bx = (x0 + w - 1) // BLOCK_COLS - x0 // BLOCK_COLS + 1
        max_blocks = max(max_blocks, by * bx)
    tiles = tile_table(frames.shape[0], depth, n_slices)
    ranges = np.zeros((tiles.shape[0], max(1, depth * max_blocks), RR_COLUMNS), dtype=np.int64)
    for t in range(tiles.shape[0]):
        first, n, s = tiles[t, 0], tiles[t, 1], tiles[t, 2]
        y0, x0 = slices[s, 0, 0], slices[s, 0, 1]
        h, w = slices[s, 1, 0], slices[s, 1, 1]
        row = 0
        for i in range(n):
            frame = frames[first + i]
            if frame < 0:
                continue
            for band in range(y0 // BLOCK_ROWS, (y0 + h - 1) // BLOCK_ROWS + 1):
                r0 = max(y0, band * BLOCK_ROWS) - band * BLOCK_ROWS
                r1 = min(y0 + h, (band + 1) * BLOCK_ROWS) - band * BLOCK_ROWS
                for bx in range(x0 // BLOCK_COLS, (x0 + w - 1) // BLOCK_COLS + 1):
                    c0 = max(x0, bx * BLOCK_COLS) - bx * BLOCK_COLS
                    c1 = min(x0 + w, (bx + 1) * BLOCK_COLS) - bx * BLOCK_COLS
                    sector = bx // BLOCK_COLS
                    k = band * BLOCK_COLS + (BLOCK_COLS - 1 - bx % BLOCK_COLS)
                    start = files[sector, 2] + frame * frame_stride + k * BLOCK_BYTES
                    start += BLOCK_HEADER_BYTES
                    dest_y = band * BLOCK_ROWS + r0 - y0
                    dest_x = bx * BLOCK_COLS + c0 - x0
                    ranges[t, row, 0] = sector
                    ranges[t, row, 1] = start
                    ranges[t, row, 2] = start + BLOCK_BYTES - BLOCK_HEADER_BYTES
                    ranges[t, row, 3] = i * h * w + dest_y * w + dest_x
                    ranges[t, row, 4] = w
                    ranges[t, row, 5] = r0
                    ranges[t, row, 6] = r1
                    ranges[t, row, 7] = c0
                    ranges[t, row, 8] = c1
                    row += 1
    return tiles, ranges


@numba.njit(nogil=True, cache=True, inline="always")
def _pixel(src, row_start, c):
    """Pixel `c` of a packed row: the low or high 12 bits of its 3-byte pair."""
    p = row_start + (c >> 1) * 3
    if c & 1:
        return (np.uint16(src[p + 1]) >> 4) | (np.uint16(src[p + 2]) << 4)
    return np.uint16(src[p]) | ((np.uint16(src[p + 1]) & 0x0F) << 8)


@numba.njit(nogil=True, cache=True)
def _unpack(src, out):
    """Unpack the packed bytes `src` (3 per 2 pixels) into `out` (a loop over the whole
    run, which LLVM vectorises: slices, not offsets, let it see that they do not overlap)."""
    for k in range(src.size // 3):
        b0 = np.uint16(src[3 * k])
        b1 = np.uint16(src[3 * k + 1])
        b2 = np.uint16(src[3 * k + 2])
        out[2 * k] = b0 | ((b1 & 0x0F) << 8)
        out[2 * k + 1] = (b1 >> 4) | (b2 << 4)


@numba.njit(nogil=True, cache=True)
def decode_k2is(src, file_idx, ranges, out):
    """Unpack the blocks of sector file `file_idx` into the flat tile `out`."""
    for i in range(ranges.shape[0]):
        start = ranges[i, 1]
        if ranges[i, 0] != file_idx or start == ranges[i, 2]:
            continue
        dest0 = ranges[i, 3]
        stride = ranges[i, 4]
        r0, r1, c0, c1 = ranges[i, 5], ranges[i, 6], ranges[i, 7], ranges[i, 8]
        if c0 == 0 and c1 == BLOCK_COLS and stride == BLOCK_COLS:
            # whole rows into a tile one block wide: one run of packed bytes
            p = start + r0 * ROW_BYTES
            n = (r1 - r0) * ROW_BYTES
            _unpack(src[p : p + n], out[dest0 : dest0 + n // 3 * 2])
        elif c0 == 0 and c1 == BLOCK_COLS:
            for r in range(r0, r1):
                p = start + r * ROW_BYTES
                d = dest0 + (r - r0) * stride
                for j in range(BLOCK_COLS // 2):
                    b0 = np.uint16(src[p + 3 * j])
                    b1 = np.uint16(src[p + 3 * j + 1])
                    b2 = np.uint16(src[p + 3 * j + 2])
                    out[d + 2 * j] = b0 | ((b1 & 0x0F) << 8)
                    out[d + 2 * j + 1] = (b1 >> 4) | (b2 << 4)
        else:
            for r in range(r0, r1):
                p = start + r * ROW_BYTES
                d = dest0 + (r - r0) * stride
                for c in range(c0, c1):
                    out[d + c - c0] = _pixel(src, p, c)


@numba.njit(nogil=True, cache=True, inline="always")
def _low(b0, b1):
    return b0 | ((b1 & np.uint16(0x0F)) << np.uint16(8))


@numba.njit(nogil=True, cache=True, inline="always")
def _high(b1, b2):
    return (b1 >> np.uint16(4)) | (b2 << np.uint16(4))


@numba.njit(nogil=True, cache=True)
def _add_four(s0, s1, s2, s3, acc):
    """``acc += `` the pixels of four packed runs (12-bit sums of four fit uint16)."""
    for k in range(acc.shape[0] // 2):
        a = _low(np.uint16(s0[3 * k]), np.uint16(s0[3 * k + 1]))
        a += _low(np.uint16(s1[3 * k]), np.uint16(s1[3 * k + 1]))
        a += _low(np.uint16(s2[3 * k]), np.uint16(s2[3 * k + 1]))
        a += _low(np.uint16(s3[3 * k]), np.uint16(s3[3 * k + 1]))
        b = _high(np.uint16(s0[3 * k + 1]), np.uint16(s0[3 * k + 2]))
        b += _high(np.uint16(s1[3 * k + 1]), np.uint16(s1[3 * k + 2]))
        b += _high(np.uint16(s2[3 * k + 1]), np.uint16(s2[3 * k + 2]))
        b += _high(np.uint16(s3[3 * k + 1]), np.uint16(s3[3 * k + 2]))
        acc[2 * k] += a
        acc[2 * k + 1] += b


@numba.njit(nogil=True, cache=True)
def _add_one(s0, acc):
    for k in range(acc.shape[0] // 2):
        acc[2 * k] += _low(np.uint16(s0[3 * k]), np.uint16(s0[3 * k + 1]))
        acc[2 * k + 1] += _high(np.uint16(s0[3 * k + 1]), np.uint16(s0[3 * k + 2]))


@numba.njit(nogil=True, cache=True)
def sum_k2is(src, file_idx, ranges, slice_px, acc):
    """``acc += `` the frames of one tile unpacked (``acc``: the tile's signal slice, flat),
    without unpacking them into a tile: four frames' runs of each block at a time.

    The ranges of a tile come frame by frame, the same blocks for every frame (frames
    that are not in the files have none). Returns False, having added nothing, where a
    block is not read whole-width into a slice one block wide (the unpacked rows would not
    be one run of the slice)."""
    used = 0
    for i in range(ranges.shape[0]):
        if ranges[i, 1] == ranges[i, 2]:
            break
        if ranges[i, 7] != 0 or ranges[i, 8] != BLOCK_COLS or ranges[i, 4] != BLOCK_COLS:
            return False
        used += 1
    if used == 0:
        return True
    per_frame = rows_per_frame(ranges, used, slice_px)
    n = used // per_frame
    for j in range(per_frame):
        if ranges[j, 0] != file_idx:
            continue
        r0, r1 = ranges[j, 5], ranges[j, 6]
        d = ranges[j, 3] % slice_px
        size = (r1 - r0) * ROW_BYTES
        a = acc[d : d + size // 3 * 2]
        i = 0
        while i + 4 <= n:
            p0 = ranges[i * per_frame + j, 1] + r0 * ROW_BYTES
            p1 = ranges[(i + 1) * per_frame + j, 1] + r0 * ROW_BYTES
            p2 = ranges[(i + 2) * per_frame + j, 1] + r0 * ROW_BYTES
            p3 = ranges[(i + 3) * per_frame + j, 1] + r0 * ROW_BYTES
            _add_four(
                src[p0 : p0 + size],
                src[p1 : p1 + size],
                src[p2 : p2 + size],
                src[p3 : p3 + size],
                a,
            )
            i += 4
        while i < n:
            p0 = ranges[i * per_frame + j, 1] + r0 * ROW_BYTES
            _add_one(src[p0 : p0 + size], a)
            i += 1
    return True


def unpack12(packed: np.ndarray) -> np.ndarray:
    """The numpy reference of the unpacking: bytes (3 per 2 pixels) -> uint16 pixels."""
    b = packed.reshape(-1, 3).astype(np.uint16)
    out = np.empty(b.shape[0] * 2, dtype=np.uint16)
    out[0::2] = b[:, 0] | ((b[:, 1] & 0x0F) << 8)
    out[1::2] = (b[:, 1] >> 4) | (b[:, 2] << 4)
    return out
