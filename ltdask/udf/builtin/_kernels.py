"""numba kernels of single shipped UDFs on flat tiles: centre of mass (`CoMUDF`) and mask
products (`ApplyMasksUDF`).

See :mod:`ltdask.kernels` for what a flat tile is and for the statistics kernels that
the engine shares.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from ltdask.io.tiling import flat_of
from ltdask.kernels import FASTMATH

#: pixels per block in `dot_masks`: 4 masks × 4096 float32 pixels stay in L2
MASK_BLOCK = 4096


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def _interval_moments_one(frames, p0, p1, width, row0, starts, stops, cols, out):
    """`interval_moments` one frame at a time (the frames after the last four)."""
    n = frames.shape[0]
    rows = (p1 - p0) // width
    for i in range(n):
        frame = frames[i][p0:p1]
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
                rs = xs[0] - xs[0]
                rx = rs
                for c in range(seg.shape[0]):
                    v = cols.dtype.type(seg[c])
                    rs += v
                    rx += v * xs[c]
                s0 += rs
                sy += rs * y
                sx += rx
        out[i, 0] += s0
        out[i, 1] += sy
        out[i, 2] += sx


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def interval_moments(frames, p0, p1, width, row0, starts, stops, cols, out):
    """Per frame: ``out[i] += (sum I, sum I*y, sum I*x)`` over a mask given as column
    intervals per row.

    The tile ``frames[:, p0:p1]`` holds rows ``row0 ..`` of full-width frames;
    ``starts[r, k]:stops[r, k]`` are the mask's column intervals in frame row ``r``
    (empty when equal); ``cols`` is ``0 .. width - 1`` in the dtype the sums are taken in
    (the tile's, or for integer tiles the float dtype they stand for: each pixel is
    converted to it, so the sums are those of float tiles). Only the
    pixels inside the mask are read, four frames at a time (four streams from memory,
    and independent sums).
    """
    n = frames.shape[0]
    rows = (p1 - p0) // width
    i = 0
    while i + 4 <= n:
        f0 = frames[i][p0:p1]
        f1 = frames[i + 1][p0:p1]
        f2 = frames[i + 2][p0:p1]
        f3 = frames[i + 3][p0:p1]
        a0 = a1 = a2 = a3 = 0.0
        y0 = y1 = y2 = y3 = 0.0
        x0 = x1 = x2 = x3 = 0.0
        for r in range(rows):
            y = row0 + r
            o = r * width
            for k in range(starts.shape[1]):
                a = starts[y, k]
                b = stops[y, k]
                if a >= b:
                    continue
                s0 = f0[o + a : o + b]
                s1 = f1[o + a : o + b]
                s2 = f2[o + a : o + b]
                s3 = f3[o + a : o + b]
                xs = cols[a:b]
                t0 = t1 = t2 = t3 = xs[0] - xs[0]
                u0 = u1 = u2 = u3 = t0
                for c in range(xs.shape[0]):
                    xc = xs[c]
                    v0 = cols.dtype.type(s0[c])
                    v1 = cols.dtype.type(s1[c])
                    v2 = cols.dtype.type(s2[c])
                    v3 = cols.dtype.type(s3[c])
                    t0 += v0
                    u0 += v0 * xc
                    t1 += v1
                    u1 += v1 * xc
                    t2 += v2
                    u2 += v2 * xc
                    t3 += v3
                    u3 += v3 * xc
                a0 += t0
                y0 += t0 * y
                x0 += u0
                a1 += t1
                y1 += t1 * y
                x1 += u1
                a2 += t2
                y2 += t2 * y
                x2 += u2
                a3 += t3
                y3 += t3 * y
                x3 += u3
        out[i, 0] += a0
        out[i, 1] += y0
        out[i, 2] += x0
        out[i + 1, 0] += a1
        out[i + 1, 1] += y1
        out[i + 1, 2] += x1
        out[i + 2, 0] += a2
        out[i + 2, 1] += y2
        out[i + 2, 2] += x2
        out[i + 3, 0] += a3
        out[i + 3, 1] += y3
        out[i + 3, 2] += x3
        i += 4
    if i < n:
        _interval_moments_one(frames[i:], p0, p1, width, row0, starts, stops, cols, out[i:])


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def dot_masks(frames, p0, p1, masks, out):
    """``out[i, m] += sum_k frames[i, p0 + k] * masks[m, k]``, two frames × four masks at
    a time, in blocks of `MASK_BLOCK` pixels.

    Each pass over a block reads 2 frame rows and 4 mask rows for 8 sums, so the work is
    bound by arithmetic; the blocks keep all masks' pixels of the block in L2 while every
    frame of the tile goes by (40 % faster than whole rows). Sums are in ``out``'s dtype
    (the product's), each pixel converted to it: integer tiles give the sums of the float
    tiles they stand for (as do `dot_mask` and `dot_runs`).
    """
    n = frames.shape[0]
    px = p1 - p0
    nm = masks.shape[0]
    # zero in the product's dtype, not from the data: a NaN or inf first pixel of one
    # frame must not turn its neighbour's sums into NaN
    z = out.dtype.type(0)
    for j0 in range(0, px, MASK_BLOCK):
        j1 = min(px, j0 + MASK_BLOCK)
        for i0 in range(0, n, 2):
            two = i0 + 1 < n
            a = frames[i0][p0 + j0 : p0 + j1]
            b = frames[i0 + 1][p0 + j0 : p0 + j1] if two else a
            for m0 in range(0, nm, 4):
                k0 = masks[m0][j0:j1]
                k1 = masks[min(m0 + 1, nm - 1)][j0:j1]
                k2 = masks[min(m0 + 2, nm - 1)][j0:j1]
                k3 = masks[min(m0 + 3, nm - 1)][j0:j1]
                s00 = s01 = s02 = s03 = z
                s10 = s11 = s12 = s13 = z
                for j in range(a.shape[0]):
                    va = out.dtype.type(a[j])
                    vb = out.dtype.type(b[j])
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


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def dot_mask(frames, p0, p1, mask, out):
    """``out[i] += sum_k frames[i, p0 + k] * mask[k]`` for one mask, four frames at a
    time (`dot_masks` would compute four masks' products to keep one)."""
    n = frames.shape[0]
    z = out.dtype.type(0)
    i = 0
    while i + 4 <= n:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        s0 = s1 = s2 = s3 = z
        for k in range(mask.shape[0]):
            w = mask[k]
            s0 += out.dtype.type(r0[k]) * w
            s1 += out.dtype.type(r1[k]) * w
            s2 += out.dtype.type(r2[k]) * w
            s3 += out.dtype.type(r3[k]) * w
        out[i] += s0
        out[i + 1] += s1
        out[i + 2] += s2
        out[i + 3] += s3
        i += 4
    while i < n:
        row = frames[i][p0:p1]
        s = z
        for k in range(mask.shape[0]):
            s += out.dtype.type(row[k]) * mask[k]
        out[i] += s
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def dot_runs(frames, p0, p1, run_start, run_len, run_weight, run_mask, weights, out):
    """Sparse masks as runs of consecutive pixels: ``out[i, run_mask[r]] += sum_c
    frames[i, p0 + run_start[r] + c] * weights[run_weight[r] + c]``.

    Runs are short (a ring crosses a row in a dozen pixels), so four frames go through
    each run together: four independent sums per weight loaded, instead of one sum whose
    additions wait on each other. Sums are in ``out``'s dtype, the product's (like a sparse
    matrix product), over slices from 0 (7x faster than float64 sums at absolute offsets).
    """
    n = frames.shape[0]
    z = out.dtype.type(0)
    i = 0
    while i + 4 <= n:
        f0 = frames[i][p0:p1]
        f1 = frames[i + 1][p0:p1]
        f2 = frames[i + 2][p0:p1]
        f3 = frames[i + 3][p0:p1]
        for r in range(run_start.shape[0]):
            a = run_start[r]
            b = a + run_len[r]
            w = weights[run_weight[r] : run_weight[r] + run_len[r]]
            g0 = f0[a:b]
            g1 = f1[a:b]
            g2 = f2[a:b]
            g3 = f3[a:b]
            s0 = s1 = s2 = s3 = z
            for c in range(w.shape[0]):
                wc = w[c]
                s0 += out.dtype.type(g0[c]) * wc
                s1 += out.dtype.type(g1[c]) * wc
                s2 += out.dtype.type(g2[c]) * wc
                s3 += out.dtype.type(g3[c]) * wc
            m = run_mask[r]
            out[i, m] += s0
            out[i + 1, m] += s1
            out[i + 2, m] += s2
            out[i + 3, m] += s3
        i += 4
    while i < n:
        frame = frames[i][p0:p1]
        for r in range(run_start.shape[0]):
            seg = frame[run_start[r] : run_start[r] + run_len[r]]
            w = weights[run_weight[r] : run_weight[r] + run_len[r]]
            s = z
            for c in range(seg.shape[0]):
                s += out.dtype.type(seg[c]) * w[c]
            out[i, run_mask[r]] += s
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def weighted_moments(frames, p0, p1, width, row0, starts, stops, weights, cols, at, rest, out):
    """CoM's three products with folded corrections, ``out[i] += (sum I w, sum I w y + r1,
    sum I w x + r2)``: one weight per pixel (`weights`, the folded mask ``m``, of the tile's
    pixels) over the column intervals ``starts[r, k]:stops[r, k]`` of the tile's row ``r``
    (frame row ``row0 + r``; the tile ``frames[:, p0:p1]`` of full-width rows; `cols`:
    ``0 .. width - 1`` in the weights' dtype), and the folded ``m y`` and ``m x`` as ``w y``
    and ``w x`` plus what the repairs of excluded pixels add at their sources (pixels `at`
    of the tile, ``rest[j] = (r1, r2)``: a few, gathered). Each pixel is converted to the
    weights' dtype and weighted once, then summed as interval_moments sums (three weights
    a pixel, read from three masks, streamed 20 % slower from the page cache), four
    frames at a time; the last few with the rows of the last frame read again in the
    places of the missing ones (their sums not added)."""
    n = frames.shape[0]
    rows = (p1 - p0) // width
    acc = np.zeros((4, 3))
    for i in range(0, n, 4):
        acc[:] = 0.0
        f0 = frames[i][p0:p1]
        f1 = frames[min(i + 1, n - 1)][p0:p1]
        f2 = frames[min(i + 2, n - 1)][p0:p1]
        f3 = frames[min(i + 3, n - 1)][p0:p1]
        for r in range(rows):
            o = r * width
            y = row0 + r
            for k in range(starts.shape[1]):
                a = starts[r, k]
                b = stops[r, k]
                if a >= b:
                    continue
                ws = weights[o + a : o + b]
                xs = cols[a:b]
                s0 = f0[o + a : o + b]
                s1 = f1[o + a : o + b]
                s2 = f2[o + a : o + b]
                s3 = f3[o + a : o + b]
                t0 = t1 = t2 = t3 = ws[0] - ws[0]
                u0 = u1 = u2 = u3 = t0
                for c in range(ws.shape[0]):
                    wc = ws[c]
                    xc = xs[c]
                    v0 = weights.dtype.type(s0[c]) * wc
                    v1 = weights.dtype.type(s1[c]) * wc
                    v2 = weights.dtype.type(s2[c]) * wc
                    v3 = weights.dtype.type(s3[c]) * wc
                    t0 += v0
                    u0 += v0 * xc
                    t1 += v1
                    u1 += v1 * xc
                    t2 += v2
                    u2 += v2 * xc
                    t3 += v3
                    u3 += v3 * xc
                acc[0, 0] += t0
                acc[0, 1] += np.float64(t0) * y
                acc[0, 2] += u0
                acc[1, 0] += t1
                acc[1, 1] += np.float64(t1) * y
                acc[1, 2] += u1
                acc[2, 0] += t2
                acc[2, 1] += np.float64(t2) * y
                acc[2, 2] += u2
                acc[3, 0] += t3
                acc[3, 1] += np.float64(t3) * y
                acc[3, 2] += u3
        for j in range(min(4, n - i)):
            f = frames[i + j][p0:p1]
            for q in range(at.shape[0]):
                v = np.float64(f[at[q]])
                acc[j, 1] += v * rest[q, 0]
                acc[j, 2] += v * rest[q, 1]
            for m in range(3):
                out[i + j, m] += acc[j, m]


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def dot_shared_runs(frames, p0, p1, run_start, run_len, run_weight, weights, out):
    """Masks with one support, as runs of consecutive pixels shared by all of them:
    ``out[i, m] += sum_c frames[i, p0 + run_start[r] + c] * weights[m, run_weight[r] +
    c]`` (`weights`: ``(masks, total run length)``). Each run's pixels are read once for
    every mask (CoM's three sums: one sweep, not three runs per stretch of pixels), four
    frames together, over slices from 0 (see `dot_runs`)."""
    n = frames.shape[0]
    z = out.dtype.type(0)
    i = 0
    while i + 4 <= n:
        f0 = frames[i][p0:p1]
        f1 = frames[i + 1][p0:p1]
        f2 = frames[i + 2][p0:p1]
        f3 = frames[i + 3][p0:p1]
        for r in range(run_start.shape[0]):
            a = run_start[r]
            b = a + run_len[r]
            g0 = f0[a:b]
            g1 = f1[a:b]
            g2 = f2[a:b]
            g3 = f3[a:b]
            for m in range(weights.shape[0]):
                w = weights[m, run_weight[r] : run_weight[r] + run_len[r]]
                s0 = s1 = s2 = s3 = z
                for c in range(w.shape[0]):
                    wc = w[c]
                    s0 += out.dtype.type(g0[c]) * wc
                    s1 += out.dtype.type(g1[c]) * wc
                    s2 += out.dtype.type(g2[c]) * wc
                    s3 += out.dtype.type(g3[c]) * wc
                out[i, m] += s0
                out[i + 1, m] += s1
                out[i + 2, m] += s2
                out[i + 3, m] += s3
        i += 4
    while i < n:
        frame = frames[i][p0:p1]
        for r in range(run_start.shape[0]):
            seg = frame[run_start[r] : run_start[r] + run_len[r]]
            for m in range(weights.shape[0]):
                w = weights[m, run_weight[r] : run_weight[r] + run_len[r]]
                s = z
                for c in range(seg.shape[0]):
                    s += out.dtype.type(seg[c]) * w[c]
                out[i, m] += s
        i += 1


def flat_tile(tile: np.ndarray) -> np.ndarray:
    """`tile` as a C-contiguous ``(frames, pixels)`` array (a view where it is one)."""
    flat = flat_of(tile, copy=True)
    assert flat is not None  # (copy=True: always one)
    return flat[0]


__all__ = [
    "MASK_BLOCK",
    "dot_mask",
    "dot_masks",
    "dot_runs",
    "dot_shared_runs",
    "flat_tile",
    "interval_moments",
    "weighted_moments",
]


@functools.lru_cache(maxsize=16)
def com_disk(sy: int, sx: int, cy: float, cx: float, r: float, ri: float):
    """The disk or ring of the centre of mass in a ``(sy, sx)`` frame and its row intervals
    (`row_intervals`), read-only: made once per process, not per partition (1 ms each)."""
    y, x = np.mgrid[:sy, :sx]
    d2 = (y - cy) ** 2 + (x - cx) ** 2
    # LiberTEM's disk and ring (``ltdask.masks``): ``ri² < d² <= r²``
    mask = d2 <= r**2
    if ri > 0:
        mask &= d2 > ri**2
    out = (mask, *row_intervals(mask))
    for arr in out:
        arr.flags.writeable = False
    return out


def row_intervals(mask: np.ndarray):
    """Per row, the column intervals ``[start, stop)`` where `mask` is True."""
    padded = np.zeros((mask.shape[0], mask.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    rows_up, cols_up = np.nonzero(edges == 1)
    _, cols_down = np.nonzero(edges == -1)
    per_row = np.bincount(rows_up, minlength=mask.shape[0])
    k = max(1, int(per_row.max()) if per_row.size else 1)
    starts = np.zeros((mask.shape[0], k), dtype=np.int64)
    stops = np.zeros((mask.shape[0], k), dtype=np.int64)
    slot = np.zeros(mask.shape[0], dtype=np.int64)
    for r, a, b in zip(rows_up, cols_up, cols_down, strict=True):
        starts[r, slot[r]] = a
        stops[r, slot[r]] = b
        slot[r] += 1
    return starts, stops
