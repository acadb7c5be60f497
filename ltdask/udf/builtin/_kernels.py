"""numba kernels of the shipped UDFs, on C-contiguous ``(frames, pixels)`` tiles.

Each has a pure-numpy reference in the tests. They accumulate in float64 (or the result
dtype, when wider) and run with ``fastmath`` re-association so the inner loops vectorise.
"""

from __future__ import annotations

import numba
import numpy as np

_FAST = {"reassoc", "contract", "nsz", "arcp"}


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def sum_frames(tile, acc):
    """``acc[j] += sum_i tile[i, j]``."""
    for i in range(tile.shape[0]):
        row = tile[i]
        for j in range(row.shape[0]):
            acc[j] += row[j]


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
def moments(tile, count, mean, m2, scratch):
    """Merge a tile's per-pixel count / mean / centred sum of squares into running ones.

    Two passes over the (cache-hot) tile: its mean, then the squares centred on it; the
    tile's statistics are combined with the running ones by Chan et al.'s formula.
    """
    n = tile.shape[0]
    if n == 0:
        return count
    px = tile.shape[1]
    for j in range(px):
        scratch[j] = 0.0
    for i in range(n):
        row = tile[i]
        for j in range(px):
            scratch[j] += row[j]
    inv = 1.0 / n
    for j in range(px):
        scratch[j] *= inv
    total = count + n
    for i in range(n):
        row = tile[i]
        for j in range(px):
            d = row[j] - scratch[j]
            m2[j] += d * d
    # combine (count, mean, m2) with (n, scratch, tile's m2 already added)
    w = count * n / total
    for j in range(px):
        delta = scratch[j] - mean[j]
        m2[j] += delta * delta * w
        mean[j] += delta * n / total
    return total


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def masked_moments(tile, mask, ys, xs, out):
    """Per frame: ``out[i] += (sum I*m, sum I*m*y, sum I*m*x)`` over the tile's pixels."""
    for i in range(tile.shape[0]):
        row = tile[i]
        s0 = 0.0
        sy = 0.0
        sx = 0.0
        for j in range(row.shape[0]):
            v = row[j] * mask[j]
            s0 += v
            sy += v * ys[j]
            sx += v * xs[j]
        out[i, 0] += s0
        out[i, 1] += sy
        out[i, 2] += sx


def c_frames(tile: np.ndarray):
    """The tile as C-contiguous ``(frames, pixels)`` pieces (views where possible)."""
    n = tile.shape[0]
    if tile.flags.c_contiguous:
        yield 0, tile.reshape(n, -1)
        return
    if n and tile[0].flags.c_contiguous:
        for i in range(n):
            yield i, tile[i].reshape(1, -1)
        return
    yield 0, np.ascontiguousarray(tile).reshape(n, -1)


__all__ = ["sum_frames", "sum_pixels", "moments", "masked_moments", "c_frames"]
