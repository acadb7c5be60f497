"""numba kernels of the FRMS6 reader: read ranges that unfold the pnCCD's raw frames, and the
decoder that copies each row forwards or backwards.

A raw frame is ``h`` rows of ``2 W`` pixels (uint16 LE): the left halves are the top half of
the image, the right halves the bottom half turned by 180°. With binning ``b`` every raw row
stands for ``b`` image rows. Image row ``Y`` of the ``(2 h b, W)`` frame comes from binned row
``y = Y // b``: raw row ``y`` (left half, forwards) for ``y < h``, else raw row ``2h - 1 - y``
(right half, backwards). Each read range is one (part of a) row; a fifth column says
backwards.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.read_ranges import _find_file, tile_table


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
    ranges : int64[n_tiles, depth * max_rows, 5]
        ``(file, start, stop, dest_px, backwards)``.
    """
    n_slices = slices.shape[0]
    width = sig_shape[1]
    half = sig_shape[0] // binning // 2  # raw rows
    stride = frame_header + raw_bytes
    max_rows = 1
    for s in range(n_slices):
        max_rows = max(max_rows, slices[s, 1, 0])
    tiles = tile_table(frames.shape[0], depth, n_slices)
    ranges = np.zeros((tiles.shape[0], max(1, depth * max_rows), 5), dtype=np.int64)
    for t in range(tiles.shape[0]):
        first, n, s = tiles[t, 0], tiles[t, 1], tiles[t, 2]
        y0, x0 = slices[s, 0, 0], slices[s, 0, 1]
        rows, cols = slices[s, 1, 0], slices[s, 1, 1]
        row = 0
        for i in range(n):
            frame = frames[first + i]
            if frame < 0:
                continue
            f = _find_file(files, frame)
            start = files[f, 2] + (frame - files[f, 0]) * stride + frame_header
            for r in range(rows):
                y = (y0 + r) // binning
                if y < half:
                    px = y * 2 * width + x0
                    back = 0
                else:
                    # right half, backwards: image columns x0..x0+cols-1 are raw columns
                    # 2W-1-x0 down to 2W-x0-cols of raw row 2h-1-y
                    px = (2 * half - 1 - y) * 2 * width + 2 * width - x0 - cols
                    back = 1
                ranges[t, row, 0] = f
                ranges[t, row, 1] = start + 2 * px
                ranges[t, row, 2] = start + 2 * (px + cols)
                ranges[t, row, 3] = (i * rows + r) * cols
                ranges[t, row, 4] = back
                row += 1
    return tiles, ranges


@numba.njit(nogil=True, cache=True)
def decode_frms6(src, file_idx, ranges, out):
    """Copy each uint16 row range of file `file_idx` into `out`, reversed where flagged."""
    words = src[: src.shape[0] // 2 * 2].view(np.uint16)  # frames start at even offsets
    for i in range(ranges.shape[0]):
        start = ranges[i, 1]
        stop = ranges[i, 2]
        if ranges[i, 0] != file_idx or start == stop:
            continue
        n = (stop - start) // 2
        values = words[start // 2 : start // 2 + n]
        dest = out[ranges[i, 3] : ranges[i, 3] + n]
        # loops from 0 over slices vectorise (absolute indices do not); a reversed view
        # copies 2-4x faster than reversed indices, in its own loop (one variable of both
        # layouts would make the forward copy strided too)
        if ranges[i, 4]:
            backwards = values[::-1]
            for k in range(n):
                dest[k] = backwards[k]
        else:
            for k in range(n):
                dest[k] = values[k]


def unfold(raw: np.ndarray, binning: int) -> np.ndarray:
    """The numpy reference of the unfolding: raw frames ``(n, h, 2W)`` -> ``(n, 2hb, W)``."""
    width = raw.shape[-1] // 2
    top = raw[:, :, :width]
    bottom = raw[:, ::-1, width:][:, :, ::-1]
    image = np.concatenate([top, bottom], axis=1)
    return np.repeat(image, binning, axis=1)
