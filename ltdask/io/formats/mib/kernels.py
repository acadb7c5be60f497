"""Numba read ranges and decoders for Merlin "raw" (``R64``) frames.

In raw mode the detector writes its counters in 64-bit big-endian words: pixel ``k`` of a
word (counting along the row) is field ``k`` from the least significant end. A field is 1 bit
(counter depth 1), 8 bits (depth 6) or 16 bits (depth 12); depth 24 is stored as two 12-bit
sub-frames, the most significant half first. In a 2x2 ("quad") layout each raw row holds one
row of every chip, in the order [chip 4 | chip 3 | chip 2 | chip 1]: chips 1 and 2 are the top
half of the image as is, chips 3 and 4 the bottom half rotated by 180 degrees. A ``G`` layout
puts two gap pixels (zeros) between the chips, in both directions.

A read range here describes a block of up to ``rows`` rows of ``n`` pixels each:

====  ============  ===================================================================
col   name          meaning
====  ============  ===================================================================
0     file_idx      file to read from
1     start         first byte: the word that holds the block's first pixel
2     stop          end of the last word of the block (``start == stop``: padding row)
3     dest          output index of the first pixel
4     skip          pixels of the first word before the block's first pixel
5     n             pixels per row
6     rows          rows in the block
7     src_stride    pixels of the raw stream from one block row to the next
8     step          output index step from one pixel to the next (+1, or -1: flipped)
9     dest_stride   output index step from one block row to the next
10    shift         left shift of the decoded value (12 for the high half of depth 24)
====  ============  ===================================================================

Depth 24 emits each block twice (high half with ``shift=12``, then low half): the decoder
adds them up, so its output must start zeroed.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.formats.mib.rows import (
    LITTLE_ENDIAN,
    back,
    decode_row,
    move_rows,
    reverse_bytes,
    swap_lane_bytes,
)
from ltdask.io.read_ranges import (
    _find_file,
    _run_offset,
    _runs_for_slice,
    rows_per_frame,
    tile_table,
)

RAW_COLUMNS = 11


@numba.njit(nogil=True, cache=True)
def _emit(ranges, t, row, f, data_start, q, block, ppw, shift):
    """Write one range for `block` = (n, rows, src_stride, dest, step, dest_stride) whose
    first pixel is pixel `q` of the frame's raw stream; returns the next free row."""
    n, rows, src_stride, dest, step, dest_stride = block
    first_word = q // ppw
    last_px = q + (rows - 1) * src_stride + n - 1
    r = ranges[t, row]
    r[0] = f
    r[1] = data_start + 8 * first_word
    r[2] = data_start + 8 * (last_px // ppw + 1)
    r[3] = dest
    r[4] = q - first_word * ppw
    r[5] = n
    r[6] = rows
    r[7] = src_stride
    r[8] = step
    r[9] = dest_stride
    r[10] = shift
    return row + 1


@numba.njit(nogil=True, cache=True)
def _emit_both(ranges, t, row, f, data_start, q, block, layout):
    """One block; for depth 24 (``low_offset > 0``) the high half, then the low half."""
    ppw = layout[2]
    low_offset = layout[3]
    if low_offset == 0:
        return _emit(ranges, t, row, f, data_start, q, block, ppw, 0)
    row = _emit(ranges, t, row, f, data_start, q, block, ppw, 12)
    return _emit(ranges, t, row, f, data_start + low_offset, q, block, ppw, 0)


@numba.njit(nogil=True, cache=True)
def raw_read_ranges(frames, depth, slices, files, sig_shape, layout):
    """Read ranges of raw frames, in the layout of :mod:`ltdask.io.read_ranges`.

    Parameters
    ----------
    frames, depth, slices, files, sig_shape
        As for :func:`ltdask.io.read_ranges.strided_read_ranges`.
    layout : int64[8]
        ``(frame_header, frame_stride, ppw, low_offset, quad, gap, chip_h, chip_w)``: bytes
        of each frame's header and from one frame's header to the next; pixels per 64-bit
        word (64, 8 or 4); for depth 24 the bytes from the high to the low sub-frame, else 0;
        1 for a 2x2 chip layout (2-D signal only), 0 when the pixels are one raw stream in C
        order; for quad data the gap pixels between chips and one chip's rows and columns.
    """
    frame_header, frame_stride = layout[0], layout[1]
    quad = layout[4] != 0
    gap, chip_h, chip_w = layout[5], layout[6], layout[7]
    n_slots = frames.shape[0]
    n_slices = slices.shape[0]
    nd = sig_shape.shape[0]
    halves = 2 if layout[3] > 0 else 1
    raw_w = 4 * chip_w
    out_h = sig_shape[0]

    max_per_frame = 1
    for s in range(n_slices):
        if quad:
            per = 4
        elif nd <= 2:
            per = 1
        else:
            per = _runs_for_slice(sig_shape, slices[s, 0], slices[s, 1])[2]
        max_per_frame = max(max_per_frame, per)

    tiles = tile_table(n_slots, depth, n_slices)
    ranges = np.zeros(
        (tiles.shape[0], max(1, depth * max_per_frame * halves), RAW_COLUMNS), dtype=np.int64
    )
    for t in range(tiles.shape[0]):
        first, n, s = tiles[t, 0], tiles[t, 1], tiles[t, 2]
        origin = slices[s, 0]
        shape = slices[s, 1]
        slice_px = 1
        for j in range(nd):
            slice_px *= shape[j]
        y0, h = origin[0], shape[0]
        x0, w = origin[nd - 1], shape[nd - 1]
        row = 0
        for i in range(n):
            frame = frames[first + i]
            if frame < 0:
                continue
            f = _find_file(files, frame)
            data_start = files[f, 2] + (frame - files[f, 0]) * frame_stride + frame_header
            base = i * slice_px
            if quad:
                # the slice cut into the four chips: top (chips 1, 2), bottom (3, 4)
                for half in range(2):
                    if half == 0:
                        ya, yb = max(y0, 0), min(y0 + h, chip_h)
                    else:
                        ya, yb = max(y0, chip_h + gap), min(y0 + h, out_h)
                    for side in range(2):
                        cx0 = side * (chip_w + gap)
                        xa, xb = max(x0, cx0), min(x0 + w, cx0 + chip_w)
                        if ya >= yb or xa >= xb:
                            continue
                        if half == 0:
                            # chip 1 is the last block of a raw row, chip 2 the one before
                            q = ya * raw_w + (3 - side) * chip_w + (xa - cx0)
                            dest = base + (ya - y0) * w + (xa - x0)
                            blk = (xb - xa, yb - ya, raw_w, dest, 1, w)
                        else:
                            # chips 3 and 4 (blocks 1 and 0) are rotated by 180 degrees:
                            # raw row r is output row out_h - 1 - r, read right to left
                            q = (out_h - yb) * raw_w + (1 - side) * chip_w + (cx0 + chip_w - xb)
                            dest = base + (yb - 1 - y0) * w + (xb - 1 - x0)
                            blk = (xb - xa, yb - ya, raw_w, dest, -1, -w)
                        row = _emit_both(ranges, t, row, f, data_start, q, blk, layout)
            elif nd == 1:
                blk = (w, 1, 0, base, 1, 0)
                row = _emit_both(ranges, t, row, f, data_start, x0, blk, layout)
            elif nd == 2:
                width = sig_shape[1]
                if w == width:  # whole rows: one run of pixels
                    blk = (h * w, 1, 0, base, 1, 0)
                else:
                    blk = (w, h, width, base, 1, w)
                row = _emit_both(ranges, t, row, f, data_start, y0 * width + x0, blk, layout)
            else:
                k, run_len, n_runs = _runs_for_slice(sig_shape, origin, shape)
                for r in range(n_runs):
                    q = _run_offset(sig_shape, origin, shape, k, r)
                    blk = (run_len, 1, 0, base + r * run_len, 1, 0)
                    row = _emit_both(ranges, t, row, f, data_start, q, blk, layout)
    return tiles, ranges


# -- decoders ----------------------------------------------------------------------------------


@numba.njit(nogil=True, cache=True)
def decode_raw(src, file_idx, ranges, field_bits, add, out):
    """Decode the raw ranges of file `file_idx` into the flat `out`.

    `field_bits` is 1, 8 or 16; with `add` (depth 24) each value is shifted by column 10 and
    added to `out`, which must start zeroed.

    Consecutive ranges whose rows lie in the same raw rows (a quad frame's four chips) are
    decoded raw row by raw row, each raw row front to back, instead of chip by chip in four
    strided passes over the frame (12-bit quad frames not in the cache: 200 -> 170 us).
    Where the pixels are as wide as their fields (8 or 16 bits) and the ranges whole words
    at whole output words, their rows' words are moved by `move_rows`, which works out
    each range's offsets once (not for every row).
    """
    words = src[: (src.shape[0] // 8) * 8].view(np.uint64)
    moved = LITTLE_ENDIAN and not add and out.itemsize * 8 == field_bits
    per = 8 // out.itemsize
    if moved:
        out_words = out[: (out.shape[0] // per) * per].view(np.uint64)
    else:
        out_words = np.empty(0, np.uint64)
    count = ranges.shape[0]
    plans = np.empty((count if moved else 0, 6), np.int64)
    i = 0
    while i < count:
        if ranges[i, 0] != file_idx or ranges[i, 1] == ranges[i, 2]:
            i += 1
            continue
        j = _same_raw_rows(ranges, i, file_idx, field_bits)
        rows = ranges[i, 6]
        if moved and _word_plans(ranges, i, j, field_bits, plans):
            move_rows(words, out_words, plans[: j - i], rows, field_bits)
            i = j
            continue
        for r in range(rows):
            if ranges[i, 1] > ranges[j - 1, 1]:  # (the blocks of a raw row, last first)
                for g in range(j - 1, i - 1, -1):
                    decode_row(src, words, ranges[g], r, field_bits, add, out)
            else:
                for g in range(i, j):
                    decode_row(src, words, ranges[g], r, field_bits, add, out)
        i = j


@numba.njit(nogil=True, cache=True)
def _word_plans(ranges, i, j, field_bits, plans):
    """Into `plans` the plans of `move_rows` for ranges ``i .. j`` (the blocks of the
    same raw rows, in the order of their words); False where a range is not whole words
    placed at whole output words."""
    ppw = 64 // field_bits
    back = ranges[i, 1] > ranges[j - 1, 1]
    for q in range(j - i):
        g = j - 1 - q if back else i + q
        start, skip, n, rows = ranges[g, 1], ranges[g, 4], ranges[g, 5], ranges[g, 6]
        src_stride, dest_stride = ranges[g, 7], ranges[g, 9]
        reverse = ranges[g, 8] < 0
        lo = ranges[g, 3] - n + 1 if reverse else ranges[g, 3]
        whole = start % 8 == 0 and skip == 0 and n % ppw == 0 and lo % ppw == 0
        whole = whole and (rows == 1 or (src_stride % ppw == 0 and dest_stride % ppw == 0))
        if not whole:
            return False
        plans[q, 0] = start // 8
        plans[q, 1] = src_stride // ppw
        plans[q, 2] = n // ppw
        plans[q, 3] = lo // ppw
        plans[q, 4] = dest_stride // ppw
        plans[q, 5] = 1 if reverse else 0
    return True


@numba.njit(nogil=True, cache=True)
def _same_raw_rows(ranges, i, file_idx, field_bits):
    """The end of the run of ranges from `i` on whose rows lie in the same raw rows as
    those of range `i` (blocks of the same rows of one frame, side by side)."""
    rows, stride = ranges[i, 6], ranges[i, 7]
    row_bytes = stride * field_bits // 8
    j = i + 1
    if rows == 1:
        return j
    while (
        j < ranges.shape[0]
        and ranges[j, 0] == file_idx
        and ranges[j, 1] != ranges[j, 2]
        and ranges[j, 6] == rows
        and ranges[j, 7] == stride
        and abs(ranges[j, 1] - ranges[i, 1]) < row_bytes
    ):
        j += 1
    return j


#: frames whose 16-bit fields `sum_raw12` adds up in 32-bit lanes before it adds them to
#: the sums (the sums of a pixel cross the memory once per this many frames)
SUM_FRAMES = 32


@numba.njit(nogil=True, cache=True)
def sum_raw12(src, file_idx, ranges, slice_px, acc):
    """``acc += `` the 16-bit-field pixels of a tile's raw ranges of file `file_idx`, summed
    per pixel of its signal slice, never decoded into a tile. Returns False, having added
    nothing, where a range is not whole words (see `decode_raw`) or is a half of depth 24.

    A tile's ranges come frame by frame, the same blocks for every frame. Raw row by raw
    row, the words of `SUM_FRAMES` frames are put in pixel order with whole-word byte moves
    (as `ltdask.io.formats.mib.rows.words_as_pixels`) and added in 32-bit lanes (a word's
    pixels 0 and 2, and 1 and 3), then added to the row's sums: a 12-bit quad's 512x512
    frames 150 -> 72 us each (field by field, four frames at a time, chip by chip, the
    sums of a 1 MiB frame crossed the memory every four frames and each chip's pass read
    its raw rows' other halves too)."""
    used = 0
    for i in range(ranges.shape[0]):
        if ranges[i, 1] == ranges[i, 2]:
            break
        whole = ranges[i, 1] % 8 == 0 and ranges[i, 4] == 0 and ranges[i, 5] % 4 == 0
        whole = whole and (ranges[i, 6] == 1 or ranges[i, 7] % 4 == 0) and ranges[i, 10] == 0
        if not (LITTLE_ENDIAN and whole):
            return False
        used += 1
    if used == 0:
        return True
    words = src[: (src.shape[0] // 8) * 8].view(np.uint64)
    per_frame = rows_per_frame(ranges, used, slice_px)
    frames = used // per_frame
    most_rows, widest = 0, 0
    for j in range(per_frame):
        most_rows = max(most_rows, ranges[j, 6])
        widest = max(widest, ranges[j, 5] // 4)
    even = np.zeros(widest, np.uint64)  # (pixels 0 and 2 of each word, 32 bits each)
    odd = np.zeros(widest, np.uint64)  # (pixels 1 and 3)
    lanes = np.uint64(0x0000FFFF0000FFFF)
    low = np.uint64(0xFFFFFFFF)
    for i0 in range(0, frames, SUM_FRAMES):
        i1 = min(frames, i0 + SUM_FRAMES)
        for r in range(most_rows):
            for j in range(per_frame):
                n, rows, src_stride = ranges[j, 5], ranges[j, 6], ranges[j, 7]
                if r >= rows:
                    continue
                nw = n // 4
                ev = even[:nw]
                od = odd[:nw]
                ev[:] = 0
                od[:] = 0
                reverse = ranges[j, 8] < 0
                for i in range(i0, i1):
                    k = i * per_frame + j
                    if ranges[k, 0] != file_idx:
                        continue
                    at = ranges[k, 1] // 8 + r * (src_stride // 4)
                    row = words[at : at + nw]
                    if reverse:
                        for w in range(nw):
                            y = swap_lane_bytes(row[back(nw, w)])
                            ev[w] += y & lanes
                            od[w] += (y >> np.uint64(16)) & lanes
                    else:
                        for w in range(nw):
                            y = reverse_bytes(row[w])
                            ev[w] += y & lanes
                            od[w] += (y >> np.uint64(16)) & lanes
                d = ranges[j, 3] % slice_px + r * ranges[j, 9]
                out = acc[d - n + 1 : d + 1] if reverse else acc[d : d + n]
                for w in range(nw):
                    out[4 * w] += ev[w] & low
                    out[4 * w + 1] += od[w] & low
                    out[4 * w + 2] += ev[w] >> np.uint64(32)
                    out[4 * w + 3] += od[w] >> np.uint64(32)
    return True
