"""The numba kernel that corrects frames; ``tests/test_corrections.py`` checks it against
plain numpy (``corrected``)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def correct_frames(src, p0, p1, dark, gain, excluded, sources, counts, out):
    """``out = (src[:, p0:p1] - dark) * gain`` per frame, then each excluded pixel the mean
    of its sources (empty dark/gain: none). `dark` and `gain` have `out`'s dtype: the arithmetic
    stays in it (float32 + float64 would widen every pixel and stop vectorisation)."""
    n = src.shape[0]
    px = p1 - p0
    with_dark = dark.shape[0] > 0
    with_gain = gain.shape[0] > 0
    for i in range(n):
        row = src[i][p0:p1]
        dest = out[i]
        if with_dark and with_gain:
            for k in range(px):
                dest[k] = (dest.dtype.type(row[k]) - dark[k]) * gain[k]
        elif with_dark:
            for k in range(px):
                dest[k] = dest.dtype.type(row[k]) - dark[k]
        elif with_gain:
            for k in range(px):
                dest[k] = dest.dtype.type(row[k]) * gain[k]
        else:
            for k in range(px):
                dest[k] = row[k]
        repair_values(dest, excluded, sources, counts)


@numba.njit(nogil=True, cache=True)
def add_folded_sums(sums, frames, dark, gain, out):
    """``out += (sums - frames * dark) * gain`` (flat; empty dark/gain: none), in float64:
    sums over `frames` uncorrected frames added as sums of corrected ones, in one pass."""
    with_dark = dark.shape[0] > 0
    with_gain = gain.shape[0] > 0
    for k in range(out.shape[0]):
        v = np.float64(sums[k])
        if with_dark:
            v -= frames * dark[k]
        if with_gain:
            v *= gain[k]
        out[k] += v


@numba.njit(nogil=True, cache=True)
def repair_values(values, excluded, sources, counts):
    """Each excluded pixel of `values` (flat) the mean of its sources, in place: the repair
    of `correct_frames` on one vector. It is linear, so applied to a sum of corrected
    frames it gives the sum of repaired ones."""
    for j in range(excluded.shape[0]):
        c = counts[j]
        if c == 0:
            continue
        acc = 0.0
        for m in range(c):
            acc += values[sources[j, m]]
        values[excluded[j]] = acc / c


@numba.njit(nogil=True, cache=True)
def add_repaired_moments(frames, p0, p1, sources, weights, counts, first, shift, s1, s2):
    """For each frame ``i`` and repaired pixel ``j``: ``v = sum_m weights[j, m] *
    frames[i, p0 + sources[j, m]]`` over its ``counts[j]`` sources (its repaired value,
    gain applied, dark not taken off), summed as ``s1[j] += v - shift[j]`` and ``s2[j] +=
    (v - shift[j]) ** 2``; with `first`, ``shift`` is set to the first frame's values
    (shifted sums keep the variance exact). Four frames at a time: each pixel's sources
    and weights are loaded once for four rows, whose reads are independent."""
    n = frames.shape[0]
    if first and n:
        row = frames[0][p0:p1]
        for j in range(sources.shape[0]):
            v = 0.0
            for m in range(counts[j]):
                v += weights[j, m] * np.float64(row[sources[j, m]])
            shift[j] = v
    i = 0
    while i + 4 <= n:
        r0 = frames[i][p0:p1]
        r1 = frames[i + 1][p0:p1]
        r2 = frames[i + 2][p0:p1]
        r3 = frames[i + 3][p0:p1]
        for j in range(sources.shape[0]):
            v0 = v1 = v2 = v3 = 0.0
            for m in range(counts[j]):
                w = weights[j, m]
                k = sources[j, m]
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
    while i < n:
        row = frames[i][p0:p1]
        for j in range(sources.shape[0]):
            v = 0.0
            for m in range(counts[j]):
                v += weights[j, m] * np.float64(row[sources[j, m]])
            d = v - shift[j]
            s1[j] += d
            s2[j] += d * d
        i += 1
