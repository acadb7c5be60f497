"""Per-pixel moments of 8- and 16-bit integer tiles, exactly: the integer counterpart of
:func:`ltdask.kernels.statistics.moments_frame_sums`.

Detector counts are small integers, so a tile's sums of ``x`` and ``x * x`` over its frames
are exact in 64-bit integers: no conversion to float64, no shift, no rounding per pixel.
From them the tile's mean is ``s1 / n`` and its centred sum of squares
``(n * s2 - s1 * s1) / n``, whose numerator is an exact integer too (below ``2**63`` for
tiles of up to `MAX_FRAMES` frames); the tile then joins the running statistics by Chan et
al.'s formula, as the float kernel's tiles do. The same pass adds each frame's sum over the
slice (`frame_sums`) and each pixel's sum (`pixel_sums`), both exact: what SumSigUDF and
SumUDF take from a shared pass.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.kernels import FASTMATH
from ltdask.kernels.repaired import CHUNK, block_extras, no_repaired, no_weighted
from ltdask.kernels.statistics import BLOCK

#: frames per step of the kernel: ``n * s2`` stays below ``2**63`` for 16-bit pixels
#: (``n**2 * 65535**2``, or ``32768**2`` per signed pixel squared) up to 46 000 frames
MAX_FRAMES = 32768


@numba.njit(nogil=True, cache=True)
def add_integer_sums(frames, p0, p1, s1, s2, frame_sums, with_sums):
    """``s1[k] += sum_i x``, ``s2[k] += sum_i x * x`` (int64, indexed from 0) for the tile
    ``frames[:, p0:p1]`` of 8/16-bit integers, in blocks of `BLOCK` pixels (the block's
    running sums stay in L2 while the tile's rows stream past); with `with_sums`,
    ``frame_sums[i] += sum_k x`` (int64). The caller flushes the sums (`flush_integer_sums`)
    before they hold more than `MAX_FRAMES` frames."""
    add_integer_sums_with(
        frames, p0, p1, s1, s2, frame_sums, with_sums, no_weighted(), no_repaired()
    )


@numba.njit(nogil=True, cache=True)
def add_integer_sums_with(frames, p0, p1, s1, s2, frame_sums, with_sums, weighted, repaired):
    """`add_integer_sums`, and on each block's rows as they are read the `weighted` frame
    sums and the `repaired` pixels' values (:mod:`ltdask.kernels.repaired`)."""
    px = p1 - p0
    for j0 in range(0, px, BLOCK):
        j1 = min(px, j0 + BLOCK)
        _block_sums(
            frames, p0, j0, j1, s1[j0:j1], s2[j0:j1], frame_sums, with_sums, weighted, repaired
        )


@numba.njit(nogil=True, cache=True)
def flush_integer_sums(n, s1, s2, count, mean, m2, pixel_sums):
    """Merge `n` frames' exact sums `s1`, `s2` into the running `count`, `mean`, `m2`
    (float64) by Chan et al.'s formula, add `s1` to `pixel_sums`, and zero `s1` and `s2`.
    Returns the new count."""
    if n == 0:
        return count
    total = count + n
    w = count * n / total
    frac = n / total
    inv = 1.0 / n
    for k in range(s1.shape[0]):
        a = s1[k]
        part_mean = a * inv
        delta = part_mean - mean[k]
        m2[k] += (n * s2[k] - a * a) * inv + delta * delta * w
        mean[k] += delta * frac
        pixel_sums[k] += a
        s1[k] = 0
        s2[k] = 0
    return total


@numba.njit(nogil=True, cache=True)
def _block_sums(frames, p0, j0, j1, a, b, frame_sums, with_sums, weighted, repaired):
    """``a[k] += sum x``, ``b[k] += sum x * x`` over the frames of columns ``c0:c1``
    (int64), eight frames per pass: the block's sums are loaded and stored once per eight
    rows, and those loads and stores bound the loop (four rows per pass: see
    docs/performance.md); with
    `with_sums`, ``frame_sums[i] += sum_k x``; then `block_extras` on the rows just read."""
    f1 = frames.shape[0]
    c0, c1 = p0 + j0, p0 + j1
    block = j0 // BLOCK
    # (the weighted sums of whole groups of eight rows in this loop: `_weighted_eight`;
    # those of the rest by `block_extras`)
    rest_weighted = weighted
    weights, weighted_sums = weighted
    if weights.shape[0]:
        weights = weights[j0:j1]
        weighted = (weights[:0], weighted_sums)
    i = 0
    while i + 8 <= f1:
        if weights.shape[0]:
            _weighted_eight(frames, i, c0, c1, a, b, weights, weighted_sums)
            block_extras(frames, i, i + 8, p0, j0, j1, block, weighted, repaired)
            i += 8
            continue
        r0 = frames[i][c0:c1]
        r1 = frames[i + 1][c0:c1]
        r2 = frames[i + 2][c0:c1]
        r3 = frames[i + 3][c0:c1]
        r4 = frames[i + 4][c0:c1]
        r5 = frames[i + 5][c0:c1]
        r6 = frames[i + 6][c0:c1]
        r7 = frames[i + 7][c0:c1]
        t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = np.int64(0)
        for k in range(a.shape[0]):
            x0 = np.int64(r0[k])
            x1 = np.int64(r1[k])
            x2 = np.int64(r2[k])
            x3 = np.int64(r3[k])
            x4 = np.int64(r4[k])
            x5 = np.int64(r5[k])
            x6 = np.int64(r6[k])
            x7 = np.int64(r7[k])
            if with_sums:
                t0 += x0
                t1 += x1
                t2 += x2
                t3 += x3
                t4 += x4
                t5 += x5
                t6 += x6
                t7 += x7
            a[k] += ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))
            b[k] += ((x0 * x0 + x1 * x1) + (x2 * x2 + x3 * x3)) + (
                (x4 * x4 + x5 * x5) + (x6 * x6 + x7 * x7)
            )
        if with_sums:
            frame_sums[i] += t0
            frame_sums[i + 1] += t1
            frame_sums[i + 2] += t2
            frame_sums[i + 3] += t3
            frame_sums[i + 4] += t4
            frame_sums[i + 5] += t5
            frame_sums[i + 6] += t6
            frame_sums[i + 7] += t7
        block_extras(frames, i, i + 8, p0, j0, j1, block, weighted, repaired)
        i += 8
    rest = i
    while i < f1:
        row = frames[i][c0:c1]
        t = np.int64(0)
        for k in range(a.shape[0]):
            x = np.int64(row[k])
            t += x
            a[k] += x
            b[k] += x * x
        if with_sums:
            frame_sums[i] += t
        i += 1
    block_extras(frames, rest, f1, p0, j0, j1, block, rest_weighted, repaired)


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def _weighted_eight(frames, i, c0, c1, a, b, weights, sums):
    """The eight rows from `i` of `_block_sums` with each row's weighted sum, ``sums[i]
    += sum_k weights[k] * x[k]``, in the same loop (products and partial sums of `CHUNK`
    pixels in the weights' dtype, as `ltdask.kernels.repaired.weighted_rows`), not in a
    second pass over the rows."""
    r0 = frames[i][c0:c1]
    r1 = frames[i + 1][c0:c1]
    r2 = frames[i + 2][c0:c1]
    r3 = frames[i + 3][c0:c1]
    r4 = frames[i + 4][c0:c1]
    r5 = frames[i + 5][c0:c1]
    r6 = frames[i + 6][c0:c1]
    r7 = frames[i + 7][c0:c1]
    z = weights.dtype.type(0)
    u0 = u1 = u2 = u3 = u4 = u5 = u6 = u7 = 0.0
    for k0 in range(0, a.shape[0], CHUNK):
        # (slices from 0: absolute bounds keep the loop from vectorising)
        w = weights[k0 : k0 + CHUNK]
        q0 = r0[k0 : k0 + CHUNK]
        q1 = r1[k0 : k0 + CHUNK]
        q2 = r2[k0 : k0 + CHUNK]
        q3 = r3[k0 : k0 + CHUNK]
        q4 = r4[k0 : k0 + CHUNK]
        q5 = r5[k0 : k0 + CHUNK]
        q6 = r6[k0 : k0 + CHUNK]
        q7 = r7[k0 : k0 + CHUNK]
        sa = a[k0 : k0 + CHUNK]
        sb = b[k0 : k0 + CHUNK]
        z0 = z1 = z2 = z3 = z4 = z5 = z6 = z7 = z
        for k in range(w.shape[0]):
            x0 = np.int64(q0[k])
            x1 = np.int64(q1[k])
            x2 = np.int64(q2[k])
            x3 = np.int64(q3[k])
            x4 = np.int64(q4[k])
            x5 = np.int64(q5[k])
            x6 = np.int64(q6[k])
            x7 = np.int64(q7[k])
            sa[k] += ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))
            sb[k] += ((x0 * x0 + x1 * x1) + (x2 * x2 + x3 * x3)) + (
                (x4 * x4 + x5 * x5) + (x6 * x6 + x7 * x7)
            )
            wk = w[k]
            z0 += w.dtype.type(q0[k]) * wk
            z1 += w.dtype.type(q1[k]) * wk
            z2 += w.dtype.type(q2[k]) * wk
            z3 += w.dtype.type(q3[k]) * wk
            z4 += w.dtype.type(q4[k]) * wk
            z5 += w.dtype.type(q5[k]) * wk
            z6 += w.dtype.type(q6[k]) * wk
            z7 += w.dtype.type(q7[k]) * wk
        u0 += np.float64(z0)
        u1 += np.float64(z1)
        u2 += np.float64(z2)
        u3 += np.float64(z3)
        u4 += np.float64(z4)
        u5 += np.float64(z5)
        u6 += np.float64(z6)
        u7 += np.float64(z7)
    sums[i] += u0
    sums[i + 1] += u1
    sums[i + 2] += u2
    sums[i + 3] += u3
    sums[i + 4] += u4
    sums[i + 5] += u5
    sums[i + 6] += u6
    sums[i + 7] += u7


__all__ = ["MAX_FRAMES", "add_integer_sums", "add_integer_sums_with", "flush_integer_sums"]
