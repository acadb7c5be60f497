"""numba kernels of the shipped UDFs, on C-contiguous ``(frames, pixels)`` tiles.

Each has a pure-numpy reference in the tests. They run with ``fastmath`` re-association
so the inner loops vectorise, and loop over contiguous slices from 0 (absolute bounds or
strided views keep LLVM from vectorising).
"""

from __future__ import annotations

import numba
import numpy as np

_FAST = {"reassoc", "contract", "nsz", "arcp"}
#: pixels per block in the two-pass kernels: ``depth * BLOCK`` values stay in L2
BLOCK = 1024


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def sum_pixels(tile, out):
    """``out[i] += sum_j tile[i, j]``."""
    for i in range(tile.shape[0]):
        row = tile[i]
        s = out[i] - out[i]
        for j in range(row.shape[0]):
            s += row[j]
        out[i] += s


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def moments(tile, count, mean, m2, shift):
    """Merge a tile's per-pixel count / mean / centred sum of squares into running ones.

    One pass over the tile: sums of ``d = x - shift`` and ``d * d`` in float64, where
    ``shift`` (float64: the running mean, or the first frame) is close to the data, so no
    precision is lost to a large mean, unlike plain sums of squares; the tile's statistics
    join the running ones by Chan et al.'s formula. ``shift`` is updated to the new mean.
    Returns the new count.
    """
    n = tile.shape[0]
    if n == 0:
        return count
    px = tile.shape[1]
    if count == 0:
        first = tile[0]
        for j in range(px):
            shift[j] = first[j]
    total = count + n
    w = count * n / total
    frac = n / total
    inv = 1.0 / n
    s1 = np.empty(BLOCK)
    s2 = np.empty(BLOCK)
    for j0 in range(0, px, BLOCK):
        j1 = min(px, j0 + BLOCK)
        k_ = shift[j0:j1]
        a = s1[: j1 - j0]
        b = s2[: j1 - j0]
        for k in range(a.shape[0]):
            a[k] = 0.0
            b[k] = 0.0
        for i in range(n):
            row = tile[i][j0:j1]
            for k in range(a.shape[0]):
                d = np.float64(row[k]) - k_[k]
                a[k] += d
                b[k] += d * d
        mu = mean[j0:j1]
        q = m2[j0:j1]
        for k in range(a.shape[0]):
            tile_mean = k_[k] + a[k] * inv
            delta = tile_mean - mu[k]
            q[k] += b[k] - a[k] * a[k] * inv + delta * delta * w
            mu[k] += delta * frac
            k_[k] = mu[k]
    return total


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def interval_moments(tile, width, row0, starts, stops, cols, out):
    """Per frame: ``out[i] += (sum I, sum I*y, sum I*x)`` over a mask given as column
    intervals per row.

    ``tile`` is ``(frames, rows * width)``, rows ``row0 ..`` of full-width frames;
    ``starts[r, k]:stops[r, k]`` are the mask's column intervals in frame row ``r``
    (empty when equal); ``cols`` is ``0 .. width - 1`` in the tile's dtype. Only the
    pixels inside the mask are read.
    """
    n = tile.shape[0]
    rows = tile.shape[1] // width
    for i in range(n):
        frame = tile[i]
        s0 = 0.0
        sy = 0.0
        sx = 0.0
        for r in range(rows):
            y = row0 + r
            for k in range(starts.shape[1]):
                a = starts[y, k]
                b = stops[y, k]
                if a >= b:
                    continue
                seg = frame[r * width + a : r * width + b]
                xs = cols[a:b]
                rs = seg[0] - seg[0]
                rx = rs
                for c in range(seg.shape[0]):
                    v = seg[c]
                    rs += v
                    rx += v * xs[c]
                s0 += rs
                sy += rs * y
                sx += rx
        out[i, 0] += s0
        out[i, 1] += sy
        out[i, 2] += sx


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def dot_masks(tile, masks, out):
    """``out[i, m] += sum_j tile[i, j] * masks[m, j]``, two frames × four masks at a time.

    Each pass over a pixel block reads 2 frame rows and 4 mask rows for 8 sums, so the
    work is bound by arithmetic, not by reloading the masks.
    """
    n, px = tile.shape
    nm = masks.shape[0]
    # zero in the product's dtype, not from the data: a NaN or inf first pixel of one
    # frame must not turn its neighbour's sums into NaN
    z = np.zeros(1, dtype=tile.dtype)[0] * np.zeros(1, dtype=masks.dtype)[0]
    for i0 in range(0, n, 2):
        two = i0 + 1 < n
        a = tile[i0]
        b = tile[i0 + 1] if two else tile[i0]
        for m0 in range(0, nm, 4):
            k0 = masks[m0]
            k1 = masks[min(m0 + 1, nm - 1)]
            k2 = masks[min(m0 + 2, nm - 1)]
            k3 = masks[min(m0 + 3, nm - 1)]
            s00 = s01 = s02 = s03 = z
            s10 = s11 = s12 = s13 = z
            for j in range(px):
                va = a[j]
                vb = b[j]
                s00 += va * k0[j]
                s01 += va * k1[j]
                s02 += va * k2[j]
                s03 += va * k3[j]
                s10 += vb * k0[j]
                s11 += vb * k1[j]
                s12 += vb * k2[j]
                s13 += vb * k3[j]
            sums_a = (s00, s01, s02, s03)
            sums_b = (s10, s11, s12, s13)
            for q in range(4):
                m = m0 + q
                if m < nm:
                    out[i0, m] += sums_a[q]
                    if two:
                        out[i0 + 1, m] += sums_b[q]


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def dot_runs(tile, run_start, run_len, run_weight, run_mask, weights, out):
    """Sparse masks as runs of consecutive pixels: ``out[i, run_mask[r]] += sum_c
    tile[i, run_start[r] + c] * weights[run_weight[r] + c]`` (contiguous, vectorised)."""
    for i in range(tile.shape[0]):
        frame = tile[i]
        for r in range(run_start.shape[0]):
            seg = frame[run_start[r] : run_start[r] + run_len[r]]
            w = weights[run_weight[r] : run_weight[r] + run_len[r]]
            s = 0.0
            for c in range(seg.shape[0]):
                s += seg[c] * w[c]
            out[i, run_mask[r]] += s


def c_frames(tile: np.ndarray):
    """The tile as C-contiguous ``(frames, pixels)`` pieces: ``(first_frame, piece)``,
    views where possible (one per frame when only each frame is contiguous)."""
    n = tile.shape[0]
    if tile.flags.c_contiguous:
        yield 0, tile.reshape(n, -1)
        return
    if n and tile[0].flags.c_contiguous:
        for i in range(n):
            yield i, tile[i].reshape(1, -1)
        return
    yield 0, np.ascontiguousarray(tile).reshape(n, -1)


__all__ = [
    "BLOCK",
    "c_frames",
    "dot_masks",
    "dot_runs",
    "interval_moments",
    "moments",
    "sum_pixels",
]
