"""Bit shuffling as the HDF5 bitshuffle filter does it, and undoing it (numba kernels).

A block of m elements (m a multiple of 8) of s bytes is stored as 8 * s bit rows of m / 8
bytes: row ``8 * j + b`` holds bit b of byte j (little-endian) of every element, element e
at bit ``e % 8`` of the row's byte ``e // 8``. Within 8 elements and one byte, shuffling is
the transpose of an 8x8 bit matrix. `bitunshuffle` (for `ltdask.io.codecs.filters`) skips the
bits that are not set, as diffraction frames have few; `bitshuffle` is the simulator's.
"""

from __future__ import annotations

import numba
import numpy as np

_M1 = np.uint64(0x00AA00AA00AA00AA)
_M2 = np.uint64(0x0000CCCC0000CCCC)
_M3 = np.uint64(0x00000000F0F0F0F0)
_S7, _S14, _S28, _S8 = np.uint64(7), np.uint64(14), np.uint64(28), np.uint64(8)


@numba.njit(cache=True, nogil=True, inline="always")
def _transpose8(x):
    """The 8x8 bit matrix in `x` (byte r = row r, bit c = column c) transposed."""
    t = (x ^ (x >> _S7)) & _M1
    x = x ^ t ^ (t << _S7)
    t = (x ^ (x >> _S14)) & _M2
    x = x ^ t ^ (t << _S14)
    t = (x ^ (x >> _S28)) & _M3
    return x ^ t ^ (t << _S28)


_ONE, _S58 = np.uint64(1), np.uint64(58)
_K1 = np.uint64(0x5555555555555555)
_K2 = np.uint64(0x3333333333333333)
_K4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_K8 = np.uint64(0x0101010101010101)
_S1, _S2, _S4, _S56 = np.uint64(1), np.uint64(2), np.uint64(4), np.uint64(56)
#: de Bruijn multiplier and table: the index of a word's lowest set bit
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_LOWEST = np.zeros(64, np.int64)
for _i in range(64):
    _LOWEST[((0x03F79D71B4CB0A89 << _i) % 2**64) >> 58] = _i
#: set bits in 64 elements' byte up to which scattering bits beats transposing 8x8 blocks
_SPARSE_BITS = 24


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> _S1) & _K1)
    x = (x & _K2) + ((x >> _S2) & _K2)
    x = (x + (x >> _S4)) & _K4
    return np.int64((x * _K8) >> _S56)


@numba.njit(cache=True, nogil=True)
def bitunshuffle(src, dst, d0, m, itemsize):
    """`m` elements (a multiple of 8) of `itemsize` bytes, bit-shuffled in ``src[:m *
    itemsize]`` (row ``8 * j + b`` holds bit b of byte j of every element, element e at bit
    e % 8 of the row's byte e // 8), to ``dst[d0:]``.

    By 64 elements (a word of each row): none of their byte j's bits set (the high bytes of
    diffraction frames, mostly): nothing to do; a few: each set bit is put in place; many:
    8x8 bit blocks are transposed."""
    row = m // 8
    if row % 8:
        _bitunshuffle_bytes(src, dst, d0, m, itemsize)
        return
    words = src[: m * itemsize].view(np.uint64)
    per_row = row // 8
    dst[d0 : d0 + m * itemsize] = 0
    for j in range(itemsize):
        for g in range(per_row):
            bits = 0
            for b in range(8):
                bits += _popcount(words[(8 * j + b) * per_row + g])
            if bits == 0:
                continue
            base = d0 + 64 * g * itemsize + j
            if bits <= _SPARSE_BITS:
                for b in range(8):
                    w = words[(8 * j + b) * per_row + g]
                    bit = np.uint8(1 << b)
                    while w != 0:
                        low = w & (~w + _ONE)
                        dst[base + _LOWEST[(low * _DEBRUIJN) >> _S58] * itemsize] |= bit
                        w ^= low
                continue
            for q in range(8):
                x = np.uint64(0)
                for b in range(8):
                    byte = (words[(8 * j + b) * per_row + g] >> np.uint64(8 * q)) & np.uint64(255)
                    x |= byte << np.uint64(8 * b)
                if x == 0:
                    continue
                x = _transpose8(x)
                at = base + 8 * q * itemsize
                for k in range(8):
                    dst[at + k * itemsize] = np.uint8((x >> np.uint64(8 * k)) & np.uint64(255))


@numba.njit(cache=True, nogil=True)
def _bitunshuffle_bytes(src, dst, d0, m, itemsize):
    """`_bitunshuffle` byte by byte (rows whose length is not a multiple of 8 bytes)."""
    row = m // 8
    for j in range(itemsize):
        for c in range(row):
            x = np.uint64(0)
            for b in range(8):
                x |= np.uint64(src[(8 * j + b) * row + c]) << np.uint64(8 * b)
            x = _transpose8(x)
            base = d0 + 8 * c * itemsize + j
            for k in range(8):
                dst[base + k * itemsize] = np.uint8((x >> np.uint64(8 * k)) & np.uint64(255))


@numba.njit(cache=True, nogil=True)
def bitshuffle(src, s0, dst, m, itemsize):
    """`m` elements (a multiple of 8) from ``src[s0:]`` bit-shuffled into ``dst[:m *
    itemsize]`` (row ``8 * j + b`` = bit b of byte j of every element)."""
    row = m // 8
    for j in range(itemsize):
        for c in range(row):
            x = np.uint64(0)
            base = s0 + 8 * c * itemsize + j
            for k in range(8):
                x |= np.uint64(src[base + k * itemsize]) << np.uint64(8 * k)
            x = _transpose8(x)
            for b in range(8):
                dst[(8 * j + b) * row + c] = np.uint8((x >> np.uint64(8 * b)) & np.uint64(255))
