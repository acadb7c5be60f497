"""numba kernels of the FRMS6 reader: read ranges that point at the pnCCD's raw frames, and
the decoder that unfolds each into its tile.

A raw frame is ``h`` rows of ``2 W`` pixels (uint16 LE): the left halves are the top half of
the image, the right halves the bottom half turned by 180°. With binning ``b`` every raw row
stands for ``b`` image rows. Image row ``Y`` of the ``(2 h b, W)`` frame comes from binned row
``y = Y // b``: raw row ``y`` (left half, forwards) for ``y < h``, else raw row ``2h - 1 - y``
(right half, backwards). Each read range is one frame's part of a signal slice; the decoder
walks its rows (a range per row cost more than the copying: 8.6 against 29 GB/s).
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.read_ranges import _find_file, tile_table

RR_COLUMNS = 9


@numba.njit(nogil=True, cache=True)
def frms6_read_ranges(frames, depth, slices, files, sig_shape, binning, frame_header, raw_bytes):
    """Read ranges of an unfolded FRMS6 frame stream.

    Parameters
    ----------
    frames : int64[:]
        Stream frame per output slot, -1 for an empty slot.
    slices : int64[n_slices, 2, 2]
        Origins and shapes of the signal slices (any rectangle of the image).
    files : int64[n_files, 3]
        ``(first_frame, stop_frame, file_header_bytes)``.
    sig_shape : int64[2]
        The unfolded image, ``(2 h b, W)``.
    binning, frame_header, raw_bytes : int
        Binning factor, bytes before each frame's pixels, bytes of a raw frame's pixels.

    Returns
    -------
    tiles : int64[n_tiles, 3]
    ranges : int64[n_tiles, depth, 9]
        ``(file, start, stop, dest_px, frame_start, y0, x0, rows, cols)``: the slice at
        ``(y0, x0)`` of ``rows x cols`` image pixels of the raw frame whose pixels start at
        byte `frame_start`, written to the tile from pixel `dest_px` on; ``start:stop``
        are the bytes of the raw rows it reads.
    """
    width = sig_shape[1]
    half = sig_shape[0] // binning // 2  # raw rows
    stride = frame_header + raw_bytes
    row_bytes = 4 * width
    tiles = tile_table(frames.shape[0], depth, slices.shape[0])
    ranges = np.zeros((tiles.shape[0], max(1, depth), RR_COLUMNS), dtype=np.int64)
    for t in range(tiles.shape[0]):
        first, n, s = tiles[t, 0], tiles[t, 1], tiles[t, 2]
        y0, x0 = slices[s, 0, 0], slices[s, 0, 1]
        rows, cols = slices[s, 1, 0], slices[s, 1, 1]
        # the raw rows the slice reads (the lower half's binned row y is raw row 2h - 1 - y)
        raw_lo, raw_hi = 2 * half, -1
        for y in range(y0 // binning, (y0 + rows - 1) // binning + 1):
            raw = y if y < half else 2 * half - 1 - y
            raw_lo, raw_hi = min(raw_lo, raw), max(raw_hi, raw)
        for i in range(n):
            frame = frames[first + i]
            if frame < 0:
                continue
            f = _find_file(files, frame)
            start = files[f, 2] + (frame - files[f, 0]) * stride + frame_header
            ranges[t, i, 0] = f
            ranges[t, i, 1] = start + raw_lo * row_bytes
            ranges[t, i, 2] = start + (raw_hi + 1) * row_bytes
            ranges[t, i, 3] = i * rows * cols
            ranges[t, i, 4] = start
            ranges[t, i, 5] = y0
            ranges[t, i, 6] = x0
            ranges[t, i, 7] = rows
            ranges[t, i, 8] = cols
    return tiles, ranges


@numba.njit(nogil=True, cache=True)
def decode_frms6(src, file_idx, ranges, binning, width, half, out):
    """Unfold the slices of raw frames of file `file_idx` named by `ranges` into `out`:
    ``half`` raw rows of ``2 width`` pixels per half of the image, ``binning`` image rows
    per raw row."""
    words = src[: src.shape[0] // 2 * 2].view(np.uint16)  # frames start at even offsets
    raw_row = 2 * width
    for i in range(ranges.shape[0]):
        if ranges[i, 0] != file_idx or ranges[i, 1] == ranges[i, 2]:
            continue
        dest, base = ranges[i, 3], ranges[i, 4] // 2
        y0, x0, rows, cols = ranges[i, 5], ranges[i, 6], ranges[i, 7], ranges[i, 8]
        for r in range(rows):
            y = (y0 + r) // binning
            d = out[dest + r * cols : dest + (r + 1) * cols]
            # loops from 0 over slices vectorise (absolute indices do not), and so do
            # backward ones with unsigned indices (no check for negative ones): 18 GB/s,
            # 8.5 with a reversed view
            if y < half:
                p = base + y * raw_row + x0
                values = words[p : p + cols]
                for k in range(cols):
                    d[k] = values[k]
            else:
                p = base + (2 * half - 1 - y) * raw_row + raw_row - x0 - cols
                values = words[p : p + cols]
                last = np.uint64(cols - 1)
                for k in range(cols):
                    d[k] = values[last - np.uint64(k)]


def unfold(raw: np.ndarray, binning: int) -> np.ndarray:
    """The numpy reference of the unfolding: raw frames ``(n, h, 2W)`` -> ``(n, 2hb, W)``."""
    width = raw.shape[-1] // 2
    top = raw[:, :, :width]
    bottom = raw[:, ::-1, width:][:, :, ::-1]
    image = np.concatenate([top, bottom], axis=1)
    return np.repeat(image, binning, axis=1)


def unfold_index(height: int, width: int, binning: int) -> np.ndarray:
    """The raw pixel (flat, of ``height`` rows of ``width``) of each unfolded image pixel
    (flat, ``(2 height binning, width / 2)``): what :func:`unfold` moves where."""
    half = width // 2
    y = np.arange(2 * height * binning)[:, None] // binning
    x = np.arange(half)[None, :]
    upper = y < height
    rows = np.where(upper, y, 2 * height - 1 - y)
    cols = np.where(upper, x, width - 1 - x)
    return (rows * width + cols).reshape(-1)
