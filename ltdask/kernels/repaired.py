"""What the per-pixel passes over a flat tile (`ltdask.kernels.statistics.moments`,
`ltdask.kernels.integer_moments.add_integer_sums`) also do, for folded corrections, on the
rows of a block of pixels they have just read (hot in L2, not read again from RAM):

* weighted frame sums (`weighted_rows`): ``sum_k w[k] x[k]`` per frame, a corrected
  frame's sum where a gain map or repaired pixels weight the uncorrected ones;
* the values of the repaired (excluded) pixels (`repaired_rows`): each a weighted sum of
  its sources, its shifted sums of ``v`` and ``v * v`` kept for its moments.

A pass takes them as two tuples (`no_weighted()` / `no_repaired()` where there are none):
``weighted = (weights, sums)`` (float32 weights of the slice's pixels, float64 sums of the
tile's frames) and ``repaired = (starts, sources, weights, counts, shift, s1, s2)``, the
repaired pixels ordered by the block of `BLOCK` pixels that holds all their sources
(``starts[b]:starts[b + 1]`` for block ``b``), those whose sources lie in two blocks last
(``starts[-2]:``), added by `add_repaired_moments` after the pass (see
`ltdask.corrections.RepairedMoments`).

numba's cache does not follow calls into other modules: after editing this module, remove
the cached passes that call it (``ltdask/kernels/__pycache__/integer_moments*.nb*`` and
``statistics*.nb*``), or they keep running the old code.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.kernels import FASTMATH


@numba.njit(nogil=True, cache=True)
def no_weighted():
    """The `weighted` of a pass without weighted frame sums."""
    return (np.zeros(0, np.float32), np.zeros(0))


@numba.njit(nogil=True, cache=True)
def no_repaired():
    """The `repaired` of a pass without repaired pixels."""
    return (
        np.zeros(0, np.int64),
        np.zeros((0, 1), np.int64),
        np.zeros((0, 1)),
        np.zeros(0, np.int64),
        np.zeros(0),
        np.zeros(0),
        np.zeros(0),
    )


#: pixels per float32 partial sum in `weighted_rows`
CHUNK = 256


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def weighted_rows(frames, i0, i1, c0, c1, weights, sums):
    """``sums[i] += sum_k weights[k] * frames[i, c0 + k]`` for the rows ``i0:i1``, four at
    a time (each weight loaded once for four rows). Products and partial sums of `CHUNK`
    pixels in the weights' dtype (float32 for float32 runs: eight lanes a vector, each
    lane adding a few products, about 1e-7 of the sum; float64 for float64 runs), the
    partial sums added in float64 (`sums`)."""
    i = i0
    z = weights.dtype.type(0)
    while i + 4 <= i1:
        r0 = frames[i][c0:c1]
        r1 = frames[i + 1][c0:c1]
        r2 = frames[i + 2][c0:c1]
        r3 = frames[i + 3][c0:c1]
        t0 = t1 = t2 = t3 = 0.0
        for k0 in range(0, weights.shape[0], CHUNK):
            # (slices from 0: absolute bounds keep the loop from vectorising, 10x slower)
            w = weights[k0 : k0 + CHUNK]
            q0 = r0[k0 : k0 + CHUNK]
            q1 = r1[k0 : k0 + CHUNK]
            q2 = r2[k0 : k0 + CHUNK]
            q3 = r3[k0 : k0 + CHUNK]
            a0 = a1 = a2 = a3 = z
            for k in range(w.shape[0]):
                a0 += w.dtype.type(q0[k]) * w[k]
                a1 += w.dtype.type(q1[k]) * w[k]
                a2 += w.dtype.type(q2[k]) * w[k]
                a3 += w.dtype.type(q3[k]) * w[k]
            t0 += np.float64(a0)
            t1 += np.float64(a1)
            t2 += np.float64(a2)
            t3 += np.float64(a3)
        sums[i] += t0
        sums[i + 1] += t1
        sums[i + 2] += t2
        sums[i + 3] += t3
        i += 4
    while i < i1:
        row = frames[i][c0:c1]
        t = 0.0
        for k0 in range(0, weights.shape[0], CHUNK):
            w = weights[k0 : k0 + CHUNK]
            q = row[k0 : k0 + CHUNK]
            a = z
            for k in range(w.shape[0]):
                a += w.dtype.type(q[k]) * w[k]
            t += np.float64(a)
        sums[i] += t
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def repaired_rows(frames, i0, i1, p0, j0, j1, sources, weights, counts, shift, s1, s2):
    """For the rows ``i0:i1`` and the repaired pixels ``j0:j1``: ``v = sum_m weights[j, m]
    * frames[i, p0 + sources[j, m]]`` over its ``counts[j]`` sources, summed as ``s1[j] +=
    v - shift[j]`` and ``s2[j] += (v - shift[j]) ** 2`` (float64). Eight rows at a time
    (four, then one, for the rest): each pixel's sources and weights are loaded once for
    eight independent rows. The loop is bound by the conversions of the gathered pixels
    to float64, one per source and row: 0.17 ms a tile of 64 frames of 256x256 uint16
    pixels, 1 % of them repaired (0.25 ms four rows at a time, with numba's check of
    each index for a negative one)."""
    i = i0
    while i + 8 <= i1:
        _repaired_eight(frames, i, p0, j0, j1, sources, weights, counts, shift, s1, s2)
        i += 8
    while i + 4 <= i1:
        r0 = frames[i][p0:]
        r1 = frames[i + 1][p0:]
        r2 = frames[i + 2][p0:]
        r3 = frames[i + 3][p0:]
        for j in range(j0, j1):
            v0 = v1 = v2 = v3 = 0.0
            for m in range(counts[j]):
                w = weights[j, m]
                k = np.uint64(sources[j, m])  # (unsigned: no check for a negative index)
                v0 += w * np.float64(r0[k])
                v1 += w * np.float64(r1[k])
                v2 += w * np.float64(r2[k])
                v3 += w * np.float64(r3[k])
            c = shift[j]
            v0 -= c
            v1 -= c
            v2 -= c
            v3 -= c
            s1[j] += (v0 + v1) + (v2 + v3)
            s2[j] += (v0 * v0 + v1 * v1) + (v2 * v2 + v3 * v3)
        i += 4
    while i < i1:
        row = frames[i][p0:]
        for j in range(j0, j1):
            v = 0.0
            for m in range(counts[j]):
                v += weights[j, m] * np.float64(row[np.uint64(sources[j, m])])
            d = v - shift[j]
            s1[j] += d
            s2[j] += d * d
        i += 1


@numba.njit(nogil=True, cache=True, fastmath=FASTMATH)
def _repaired_eight(frames, i, p0, j0, j1, sources, weights, counts, shift, s1, s2):
    """`repaired_rows` on the eight rows from `i`."""
    r0 = frames[i][p0:]
    r1 = frames[i + 1][p0:]
    r2 = frames[i + 2][p0:]
    r3 = frames[i + 3][p0:]
    r4 = frames[i + 4][p0:]
    r5 = frames[i + 5][p0:]
    r6 = frames[i + 6][p0:]
    r7 = frames[i + 7][p0:]
    for j in range(j0, j1):
        v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = 0.0
        for m in range(counts[j]):
            w = weights[j, m]
            k = np.uint64(sources[j, m])
            v0 += w * np.float64(r0[k])
            v1 += w * np.float64(r1[k])
            v2 += w * np.float64(r2[k])
            v3 += w * np.float64(r3[k])
            v4 += w * np.float64(r4[k])
            v5 += w * np.float64(r5[k])
            v6 += w * np.float64(r6[k])
            v7 += w * np.float64(r7[k])
        c = shift[j]
        v0 -= c
        v1 -= c
        v2 -= c
        v3 -= c
        v4 -= c
        v5 -= c
        v6 -= c
        v7 -= c
        s1[j] += ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))
        s2[j] += ((v0 * v0 + v1 * v1) + (v2 * v2 + v3 * v3)) + (
            (v4 * v4 + v5 * v5) + (v6 * v6 + v7 * v7)
        )


@numba.njit(nogil=True, cache=True)
def repaired_shift(frames, p0, sources, weights, counts, shift):
    """``shift[j]``: pixel ``j``'s repaired value in the first frame (shifted sums keep the
    variance exact)."""
    if frames.shape[0] == 0:
        return
    row = frames[0][p0:]
    for j in range(sources.shape[0]):
        v = 0.0
        for m in range(counts[j]):
            v += weights[j, m] * np.float64(row[sources[j, m]])
        shift[j] = v


@numba.njit(nogil=True, cache=True)
def add_repaired_moments(frames, p0, p1, sources, weights, counts, first, shift, s1, s2):
    """`repaired_rows` over every frame of the tile and every pixel given, as a pass of its
    own; with `first`, ``shift`` is set from the first frame first (`repaired_shift`)."""
    if first:
        repaired_shift(frames, p0, sources, weights, counts, shift)
    repaired_rows(
        frames, 0, frames.shape[0], p0, 0, sources.shape[0], sources, weights, counts, shift, s1, s2
    )


@numba.njit(nogil=True, cache=True)
def dot_pixels(frames, p0, p1, index, weights, out):
    """``out[i, m] += sum_j frames[i, p0 + index[j]] * weights[m, j]`` over a short list of
    pixels (`index`; `weights`: ``(masks, pixels)``): what a folded mask adds beyond its
    regular part at the excluded pixels' sources, a few per thousand pixels, each read
    once for every mask; four frames at a time."""
    n = frames.shape[0]
    k = weights.shape[0]
    acc = np.zeros((4, k))
    for i in range(0, n, 4):
        r0 = frames[i][p0:p1]
        r1 = frames[min(i + 1, n - 1)][p0:p1]
        r2 = frames[min(i + 2, n - 1)][p0:p1]
        r3 = frames[min(i + 3, n - 1)][p0:p1]
        acc[:] = 0.0
        for j in range(index.shape[0]):
            q = index[j]
            v0 = np.float64(r0[q])
            v1 = np.float64(r1[q])
            v2 = np.float64(r2[q])
            v3 = np.float64(r3[q])
            for m in range(k):
                w = weights[m, j]
                acc[0, m] += v0 * w
                acc[1, m] += v1 * w
                acc[2, m] += v2 * w
                acc[3, m] += v3 * w
        for f in range(min(4, n - i)):
            for m in range(k):
                out[i + f, m] += acc[f, m]


@numba.njit(nogil=True, cache=True)
def block_extras(frames, i0, i1, p0, j0, j1, block, weighted, repaired):
    """What a pass does besides its own sums on the rows ``i0:i1`` of the pixels ``j0:j1``
    (block number `block`) of the flat tile from `p0`: the weighted frame sums and the
    repaired pixels of the block (see the module)."""
    weights, sums = weighted
    if weights.shape[0]:
        weighted_rows(frames, i0, i1, p0 + j0, p0 + j1, weights[j0:j1], sums)
    starts, sources, rweights, counts, shift, s1, s2 = repaired
    if starts.shape[0]:
        repaired_rows(
            frames,
            i0,
            i1,
            p0,
            starts[block],
            starts[block + 1],
            sources,
            rweights,
            counts,
            shift,
            s1,
            s2,
        )


__all__ = [
    "add_repaired_moments",
    "block_extras",
    "dot_pixels",
    "no_repaired",
    "no_weighted",
    "repaired_rows",
    "repaired_shift",
    "weighted_rows",
]
