"""numba kernels of the shipped UDFs, on flat tiles.

A flat tile is ``frames[:, p0:p1]`` of a C-contiguous ``(frames, pixels)`` array: the
runner hands these out for tiles of whole rows (see `UDF.process_flat_tile`), as views of
the files where it can, so kernels never see strided arrays. Each kernel has a pure-numpy
reference in the tests. They run with ``fastmath`` re-association
so the inner loops vectorise, and loop over contiguous slices from 0 (absolute bounds or
strided views keep LLVM from vectorising).
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.dataset import flat_of

_FAST = {"reassoc", "contract", "nsz", "arcp"}
#: pixels per block in `moments`: the block's float64 sums (64 KiB) stay in L2, and each
#: frame's 16 KiB piece of the block is long enough to stream from RAM (1024 was 15 % slower)
BLOCK = 4096
#: pixels per block in `dot_masks`: 4 masks × 4096 float32 pixels stay in L2
MASK_BLOCK = 4096


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def sum_frames(frames, p0, p1, acc):
    """``acc[k] += sum_i frames[i, p0 + k]``: the tile's frames added up, four at a time
    (one load and store of ``acc`` per four rows)."""
    n = frames.shape[0]
    i = 0
    while i + 4 <= n:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += (r0[k] + r1[k]) + (r2[k] + r3[k])
        i += 4
    while i < n:
        row = frames[i][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += row[k]
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def sum_pixels(frames, p0, p1, out):
    """``out[i] += sum_k frames[i, p0 + k]``, four frames at a time: four streams from
    memory keep more reads in flight than one (a third faster from RAM)."""
    n = frames.shape[0]
    z = out[0] - out[0] if n else 0
    i = 0
    while i + 4 <= n:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        s0 = s1 = s2 = s3 = z
        for j in range(r0.shape[0]):
            s0 += r0[j]
            s1 += r1[j]
            s2 += r2[j]
            s3 += r3[j]
        out[i] += s0
        out[i + 1] += s1
        out[i + 2] += s2
        out[i + 3] += s3
        i += 4
    while i < n:
        row = frames[i][p0:p1]
        s = z
        for j in range(row.shape[0]):
            s += row[j]
        out[i] += s
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def moments(frames, p0, p1, count, mean, m2, shift):
    """Merge the tile ``frames[:, p0:p1]``'s per-pixel count / mean / centred sum of
    squares into running ones (indexed from 0).

    One pass over the tile: sums of ``d = x - shift`` and ``d * d`` in float64, where
    ``shift`` (float64: the running mean, or the first frame) is close to the data, so no
    precision is lost to a large mean, unlike plain sums of squares; the tile's statistics
    join the running ones by Chan et al.'s formula. ``shift`` is updated to the new mean.
    Returns the new count.
    """
    return moments_frame_sums(frames, p0, p1, count, mean, m2, shift, np.empty(0), False)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def moments_frame_sums(frames, p0, p1, count, mean, m2, shift, frame_sums, with_sums):
    """`moments`, and with `with_sums` also ``frame_sums[i] += sum_k frames[i, p0 + k]``
    in the same pass (Sum, SumSig and StdDev of one run then read each tile once)."""
    n = frames.shape[0]
    if n == 0:
        return count
    px = p1 - p0
    if count == 0:
        first = frames[0][p0:p1]
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
        shift_sum = 0.0
        for k in range(a.shape[0]):
            a[k] = 0.0
            b[k] = 0.0
            shift_sum += k_[k]
        # four frames per pass: the block's running sums are loaded and stored once per
        # four rows instead of once per row (the loop is bound by those stores otherwise)
        i = 0
        while i + 4 <= n:
            r0 = frames[i][p0 + j0 : p0 + j1]
            r1 = frames[i + 1][p0 + j0 : p0 + j1]
            r2 = frames[i + 2][p0 + j0 : p0 + j1]
            r3 = frames[i + 3][p0 + j0 : p0 + j1]
            if with_sums:
                t0 = t1 = t2 = t3 = 0.0
                for k in range(a.shape[0]):
                    c = k_[k]
                    d0 = np.float64(r0[k]) - c
                    d1 = np.float64(r1[k]) - c
                    d2 = np.float64(r2[k]) - c
                    d3 = np.float64(r3[k]) - c
                    t0 += d0
                    t1 += d1
                    t2 += d2
                    t3 += d3
                    a[k] += (d0 + d1) + (d2 + d3)
                    b[k] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
                frame_sums[i] += t0 + shift_sum
                frame_sums[i + 1] += t1 + shift_sum
                frame_sums[i + 2] += t2 + shift_sum
                frame_sums[i + 3] += t3 + shift_sum
            else:
                for k in range(a.shape[0]):
                    c = k_[k]
                    d0 = np.float64(r0[k]) - c
                    d1 = np.float64(r1[k]) - c
                    d2 = np.float64(r2[k]) - c
                    d3 = np.float64(r3[k]) - c
                    a[k] += (d0 + d1) + (d2 + d3)
                    b[k] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
            i += 4
        while i < n:
            row = frames[i][p0 + j0 : p0 + j1]
            t = 0.0
            for k in range(a.shape[0]):
                d = np.float64(row[k]) - k_[k]
                t += d
                a[k] += d
                b[k] += d * d
            if with_sums:
                frame_sums[i] += t + shift_sum
            i += 1
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
def interval_moments(frames, p0, p1, width, row0, starts, stops, cols, out):
    """Per frame: ``out[i] += (sum I, sum I*y, sum I*x)`` over a mask given as column
    intervals per row.

    The tile ``frames[:, p0:p1]`` holds rows ``row0 ..`` of full-width frames;
    ``starts[r, k]:stops[r, k]`` are the mask's column intervals in frame row ``r``
    (empty when equal); ``cols`` is ``0 .. width - 1`` in the tile's dtype. Only the
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
                t0 = t1 = t2 = t3 = s0[0] - s0[0]
                u0 = u1 = u2 = u3 = t0
                for c in range(xs.shape[0]):
                    xc = xs[c]
                    t0 += s0[c]
                    u0 += s0[c] * xc
                    t1 += s1[c]
                    u1 += s1[c] * xc
                    t2 += s2[c]
                    u2 += s2[c] * xc
                    t3 += s3[c]
                    u3 += s3[c] * xc
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


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def dot_masks(frames, p0, p1, masks, out):
    """``out[i, m] += sum_k frames[i, p0 + k] * masks[m, k]``, two frames × four masks at
    a time, in blocks of `MASK_BLOCK` pixels.

    Each pass over a block reads 2 frame rows and 4 mask rows for 8 sums, so the work is
    bound by arithmetic; the blocks keep all masks' pixels of the block in L2 while every
    frame of the tile goes by (40 % faster than whole rows).
    """
    n = frames.shape[0]
    px = p1 - p0
    nm = masks.shape[0]
    # zero in the product's dtype, not from the data: a NaN or inf first pixel of one
    # frame must not turn its neighbour's sums into NaN
    z = np.zeros(1, dtype=frames.dtype)[0] * np.zeros(1, dtype=masks.dtype)[0]
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
def dot_mask(frames, p0, p1, mask, out):
    """``out[i] += sum_k frames[i, p0 + k] * mask[k]`` for one mask, four frames at a
    time (`dot_masks` would compute four masks' products to keep one)."""
    n = frames.shape[0]
    z = np.zeros(1, dtype=frames.dtype)[0] * np.zeros(1, dtype=mask.dtype)[0]
    i = 0
    while i + 4 <= n:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        s0 = s1 = s2 = s3 = z
        for k in range(mask.shape[0]):
            w = mask[k]
            s0 += r0[k] * w
            s1 += r1[k] * w
            s2 += r2[k] * w
            s3 += r3[k] * w
        out[i] += s0
        out[i + 1] += s1
        out[i + 2] += s2
        out[i + 3] += s3
        i += 4
    while i < n:
        row = frames[i][p0:p1]
        s = z
        for k in range(mask.shape[0]):
            s += row[k] * mask[k]
        out[i] += s
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def dot_runs(frames, p0, p1, run_start, run_len, run_weight, run_mask, weights, out):
    """Sparse masks as runs of consecutive pixels: ``out[i, run_mask[r]] += sum_c
    frames[i, p0 + run_start[r] + c] * weights[run_weight[r] + c]``.

    Runs are short (a ring crosses a row in a dozen pixels), so four frames go through
    each run together: four independent sums per weight loaded, instead of one sum whose
    additions wait on each other. Sums are in the product's dtype (like a sparse matrix
    product), over slices from 0 (7x faster than float64 sums at absolute offsets).
    """
    n = frames.shape[0]
    z = np.zeros(1, dtype=frames.dtype)[0] * np.zeros(1, dtype=weights.dtype)[0]
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
                s0 += g0[c] * wc
                s1 += g1[c] * wc
                s2 += g2[c] * wc
                s3 += g3[c] * wc
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
                s += seg[c] * w[c]
            out[i, run_mask[r]] += s
        i += 1


def flat_tile(tile: np.ndarray) -> np.ndarray:
    """`tile` as a C-contiguous ``(frames, pixels)`` array (a view where it is one)."""
    return flat_of(tile, copy=True)[0]


__all__ = [
    "BLOCK",
    "MASK_BLOCK",
    "dot_mask",
    "dot_masks",
    "dot_runs",
    "flat_tile",
    "interval_moments",
    "moments",
    "moments_frame_sums",
    "sum_frames",
    "sum_pixels",
]
