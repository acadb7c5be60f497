"""Statistics kernels on flat tiles: sums over frames and over pixels, per-pixel moments.

`SumUDF`, `SumSigUDF` and `StdDevUDF` use them on their own; the runner's shared tile
statistics (:mod:`ltdask.udf.shared`) run `moments_frame_sums` once per tile for all three
when they share a run. See :mod:`ltdask.kernels` for what a flat tile is.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.kernels import FASTMATH
from ltdask.kernels.repaired import block_extras, no_repaired, no_weighted

#: pixels per block in `moments`: the block's float64 sums (2 x 128 KiB) stay in L2, and
#: each frame's piece of the block (32 KiB of uint16, 64 KiB of float32) is long enough to
#: stream from RAM, where shorter pieces stall on each new row (the sizes tried:
#: docs/performance.md)
BLOCK = 16384


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def sum_frames(frames, p0, p1, acc):
    """``acc[k] += sum_i frames[i, p0 + k]``: the tile's frames added up, four at a time
    (one load and store of ``acc`` per four rows), the last five, three or two together
    (tiles that end with a file or a run of HDF5 chunks are often short: 7 frames in two
    passes of ``acc``, not four; 57 in 14, as fast per frame as 64 in 16, not 15)."""
    n = frames.shape[0]
    stop = n - 5 if n % 4 == 1 and n >= 5 else n
    i = 0
    while i + 4 <= stop:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += (r0[k] + r1[k]) + (r2[k] + r3[k])
        i += 4
    if n - i == 5:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        r4 = frames[i + 4][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += ((r0[k] + r1[k]) + (r2[k] + r3[k])) + r4[k]
    elif n - i == 3:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += (r0[k] + r1[k]) + r2[k]
    elif n - i == 2:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += r0[k] + r1[k]
    elif n - i == 1:
        row = frames[i][p0:p1]
        for k in range(acc.shape[0]):
            acc[k] += row[k]


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def sum_pixels(frames, p0, p1, out):
    """``out[i] += sum_k frames[i, p0 + k]``, four frames at a time: four streams from
    memory keep more reads in flight than one."""
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


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def moments(frames, p0, p1, count, mean, m2, shift, work):
    """Merge the tile ``frames[:, p0:p1]``'s per-pixel count / mean / centred sum of
    squares into running ones (indexed from 0).

    One pass over the tile: sums of ``d = x - shift`` and ``d * d`` in float64, where
    ``shift`` (float64: the running mean, or the first frame) is close to the data, so no
    precision is lost to a large mean, unlike plain sums of squares; the tile's statistics
    join the running ones by Chan et al.'s formula. ``shift`` is updated to the new mean.
    `work`: float64 scratch of at least ``2 * BLOCK`` (`moments_work`). Returns the new
    count.
    """
    return moments_frame_sums(frames, p0, p1, count, mean, m2, shift, np.empty(0), False, work)


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def moments_frame_sums(frames, p0, p1, count, mean, m2, shift, frame_sums, with_sums, work):
    """`moments`, and with `with_sums` also ``frame_sums[i] += sum_k frames[i, p0 + k]``
    in the same pass (Sum, SumSig and StdDev of one run then read each tile once)."""
    return moments_with(
        frames,
        p0,
        p1,
        count,
        mean,
        m2,
        shift,
        frame_sums,
        with_sums,
        work,
        no_weighted(),
        no_repaired(),
    )


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def moments_with(
    frames, p0, p1, count, mean, m2, shift, frame_sums, with_sums, work, weighted, repaired
):
    """`moments_frame_sums`, and on each block's rows as they are read the `weighted` frame
    sums and the `repaired` pixels' values (:mod:`ltdask.kernels.repaired`).

    The block sums live in `work` (given, not allocated per call: 2 x 128 KiB is above
    glibc's mmap threshold in a distributed worker, whose nanny sets
    ``MALLOC_TRIM_THRESHOLD_``, so every call mapped and faulted in fresh pages, which the
    kernel zeroes: see docs/performance.md)."""
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
    s1 = work[:BLOCK]
    s2 = work[BLOCK : 2 * BLOCK]
    # (the weighted sums of whole groups of four rows in this loop: `_weighted_four`; those
    # of the rest by `block_extras`)
    weights, weighted_sums = weighted
    fused = (weights[:0], weighted_sums)
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
        # the block's weights, and what the shift adds to each row's weighted sum (the same
        # for all of the block's rows)
        wb = weights[j0:j1]
        weighted_shift = _dot(wb, k_) if weights.shape[0] else 0.0
        # four frames per pass: the block's running sums are loaded and stored once per
        # four rows instead of once per row (the loop is bound by those stores otherwise)
        i = 0
        while i + 4 <= n:
            r0 = frames[i][p0 + j0 : p0 + j1]
            r1 = frames[i + 1][p0 + j0 : p0 + j1]
            r2 = frames[i + 2][p0 + j0 : p0 + j1]
            r3 = frames[i + 3][p0 + j0 : p0 + j1]
            if weights.shape[0]:
                _weighted_four(r0, r1, r2, r3, k_, a, b, wb, weighted_shift, weighted_sums[i:])
                block_extras(frames, i, i + 4, p0, j0, j1, j0 // BLOCK, fused, repaired)
            elif with_sums:
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
                block_extras(frames, i, i + 4, p0, j0, j1, j0 // BLOCK, weighted, repaired)
            else:
                for k in range(a.shape[0]):
                    c = k_[k]
                    d0 = np.float64(r0[k]) - c
                    d1 = np.float64(r1[k]) - c
                    d2 = np.float64(r2[k]) - c
                    d3 = np.float64(r3[k]) - c
                    a[k] += (d0 + d1) + (d2 + d3)
                    b[k] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
                block_extras(frames, i, i + 4, p0, j0, j1, j0 // BLOCK, weighted, repaired)
            i += 4
        rest = i
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
        block_extras(frames, rest, n, p0, j0, j1, j0 // BLOCK, weighted, repaired)
        mu = mean[j0:j1]
        q = m2[j0:j1]
        for k in range(a.shape[0]):
            tile_mean = k_[k] + a[k] * inv
            delta = tile_mean - mu[k]
            q[k] += b[k] - a[k] * a[k] * inv + delta * delta * w
            mu[k] += delta * frac
            k_[k] = mu[k]
    return total


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def _dot(weights, values):
    """``sum_k weights[k] * values[k]`` in float64."""
    total = 0.0
    for k in range(weights.shape[0]):
        total += np.float64(weights[k]) * values[k]
    return total


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def _weighted_four(r0, r1, r2, r3, shift, a, b, weights, weighted_shift, sums):
    """Four rows of a block of `moments_with` with each row's weighted sum, ``sums[r] +=
    sum_k weights[k] * x[k]``, in the same loop: ``d = x - shift`` is there already, so
    ``sum_k weights[k] * d`` is one more product per pixel, and `weighted_shift` (``sum_k
    weights[k] * shift[k]``, the block's) is added once per row (float64)."""
    t0 = t1 = t2 = t3 = 0.0
    for k in range(a.shape[0]):
        c = shift[k]
        wk = np.float64(weights[k])
        d0 = np.float64(r0[k]) - c
        d1 = np.float64(r1[k]) - c
        d2 = np.float64(r2[k]) - c
        d3 = np.float64(r3[k]) - c
        t0 += wk * d0
        t1 += wk * d1
        t2 += wk * d2
        t3 += wk * d3
        a[k] += (d0 + d1) + (d2 + d3)
        b[k] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
    sums[0] += t0 + weighted_shift
    sums[1] += t1 + weighted_shift
    sums[2] += t2 + weighted_shift
    sums[3] += t3 + weighted_shift


@numba.njit(nogil=True, cache=True)
def add_rows(out, acc):
    """``out[y, x] += acc[y * cols + x]`` for a 2-D `out` of ``cols`` columns, a view that
    may be strided (a signal slice of a result), computed as numpy's ``np.add(out, acc,
    out=out, casting="unsafe")`` computes it (float64 for an int64 `acc` into float32), but
    row by row: numpy casts a strided view through a small buffer, a few elements at a
    time, which cost a K2 IS partition more than its sums (docs/performance.md)."""
    cols = out.shape[1]
    for y in range(out.shape[0]):
        row = out[y]
        part = acc[y * cols : (y + 1) * cols]
        for x in range(cols):
            row[x] += part[x]


@numba.njit(nogil=True, cache=True)
def chan_merge(count, n, part_sum, part_m2, total_sum, m2, mean):
    """Merge a part's (`n` frames, per-pixel `part_sum`, centred sums of squares `part_m2`)
    into running (`count`, `total_sum`, `m2`, `mean`) in place, by Chan et al.'s formula,
    in one pass without temporaries (real data; flat arrays). Returns the new count."""
    total = count + n
    w = count * n / total
    frac = n / total
    inv = 1.0 / n
    for k in range(part_sum.shape[0]):
        delta = part_sum[k] * inv - mean[k]
        m2[k] += part_m2[k]
        if count:
            m2[k] += delta * delta * w
        mean[k] += delta * frac
        total_sum[k] += part_sum[k]
    return total


__all__ = [
    "BLOCK",
    "add_rows",
    "chan_merge",
    "moments",
    "moments_frame_sums",
    "moments_with",
    "sum_frames",
    "sum_pixels",
]
