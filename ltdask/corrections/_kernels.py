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
def fold_moments(mean, m2, count, dark, gain, sums, out_m2):
    """``sums = (mean - dark) * gain * count`` and, where `out_m2` is not empty, ``out_m2 =
    m2 * gain**2`` (flat; empty dark/gain: none), in one pass: the per-pixel mean and sum of
    squared deviations of `count` uncorrected frames as the sums and sums of squared
    deviations of corrected ones (written into the results, no temporaries: a partition's
    new arrays of a frame's size cost more, in page faults, than the arithmetic)."""
    with_dark = dark.shape[0] > 0
    with_gain = gain.shape[0] > 0
    with_m2 = out_m2.shape[0] > 0
    for k in range(sums.shape[0]):
        v = mean[k]
        if with_dark:
            v -= dark[k]
        g = gain[k] if with_gain else 1.0
        sums[k] = v * g * count
        if with_m2:
            out_m2[k] = m2[k] * (g * g)


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
