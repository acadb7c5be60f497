"""Rows of Merlin raw (``R64``) words decoded into pixels: the inner loops of
:func:`ltdask.io.formats.mib.kernels.decode_raw`, one read range's row at a time (the read
ranges' columns are described there).
"""

from __future__ import annotations

import sys

import numba
import numpy as np

# Pixel ``p`` of a range (counted from its first word) is field ``p % ppw`` of word
# ``p // ppw``. Rows that start on a word boundary and cover whole words are decoded word by
# word from 64-bit loads (fast); anything else (columns cut inside a word) pixel by pixel.

#: whole-word loads read the stored big-endian words in this machine's byte order
LITTLE_ENDIAN = sys.byteorder == "little"


@numba.njit(nogil=True, cache=True, inline="always")
def _px(src, start, p, field_bits):
    """Pixel `p` of the words from byte `start`, one byte at a time."""
    if field_bits == 16:
        b = start + 8 * (p >> 2) + 6 - 2 * (p & 3)
        return (np.uint32(src[b]) << 8) | np.uint32(src[b + 1])
    if field_bits == 8:
        return np.uint32(src[start + 8 * (p >> 3) + 7 - (p & 7)])
    b = start + 8 * (p >> 6) + 7 - ((p & 63) >> 3)
    return np.uint32((src[b] >> (p & 7)) & 1)


# Whole words: the file viewed as 64-bit words once (frame headers are multiples of 8 bytes)
# and read with little-endian loads, so byte ``j`` of a stored word sits at bits ``8 * j`` of
# the loaded ``x``. Each row goes through a function for its field width and direction whose
# loops run from 0 over contiguous slices with constant trip counts: they vectorise (a generic
# loop, or one slice that may be reversed, runs at a third of the speed or less).


@numba.njit(nogil=True, cache=True, inline="always")
def field12(x, k):
    """Field `k` (0..3) of a 16-bit-field word: the stored big-endian u16 at bytes 6-2k."""
    return (((x >> (48 - 16 * k)) & 0xFF) << 8) | ((x >> (56 - 16 * k)) & 0xFF)


@numba.njit(nogil=True, cache=True, inline="always")
def _f6(x, k):
    """Field `k` (0..7) of an 8-bit-field word: stored byte 7-k."""
    return (x >> (56 - 8 * k)) & 0xFF


@numba.njit(nogil=True, cache=True, inline="always")
def _f1(x, k):
    """Field `k` (0..63) of a 1-bit-field word: bit k % 8 of stored byte 7 - k // 8."""
    return (x >> (56 - 8 * (k >> 3) + (k & 7))) & 1


@numba.njit(nogil=True, cache=True, inline="always")
def swap_lane_bytes(x):
    """The two bytes of each 16-bit lane of `x` swapped."""
    m = np.uint64(0x00FF00FF00FF00FF)
    return ((x & m) << np.uint64(8)) | ((x >> np.uint64(8)) & m)


@numba.njit(nogil=True, cache=True, inline="always")
def reverse_bytes(x):
    """The eight bytes of `x` in reverse order."""
    x = swap_lane_bytes(x)
    m = np.uint64(0x0000FFFF0000FFFF)
    x = ((x & m) << np.uint64(16)) | ((x >> np.uint64(16)) & m)
    return (x << np.uint64(32)) | (x >> np.uint64(32))


@numba.njit(nogil=True, cache=True, inline="always")
def back(nw, w):
    """Index ``nw - 1 - w`` (word `w` of a row of `nw` read last first), unsigned: with a
    signed index numba wraps negative values around, which keeps LLVM from seeing the
    reversed loads as contiguous (it gathered them, word by word: 6x slower)."""
    return np.uint64(nw - 1 - w)


@numba.njit(nogil=True, cache=True)
def words_as_pixels(words, out, field_bits, reverse):
    """A row of whole words (`field_bits` 8 or 16) into `out`, the row's pixels as uint64
    words, where a pixel is as wide as its field: each output word is a stored word with
    its bytes moved (loads and stores of whole words, 3-6x faster than field by field, and
    as fast reversed). Forwards, pixel k of a word is the field at stored bytes 6-2k and
    7-2k (16-bit, big-endian), or at byte 7-k (8-bit): the eight bytes reversed. Reversed
    rows take the words last first and their fields last first: 16-bit fields stay where
    they are with their two bytes swapped; 8-bit fields are the stored bytes as they are."""
    nw = words.shape[0]
    if not reverse:
        for w in range(nw):
            out[w] = reverse_bytes(words[w])
    elif field_bits == 16:
        for w in range(nw):
            out[w] = swap_lane_bytes(words[back(nw, w)])
    else:
        for w in range(nw):
            out[w] = words[back(nw, w)]


@numba.njit(nogil=True, cache=True)
def move_rows(words, out_words, plans, rows, field_bits):
    """Rows ``0 .. rows`` of read ranges of whole words whose pixels are as wide as their
    fields (8 or 16 bits), as `words_as_pixels` moves them, into `out_words` (the output's
    words): for each row, each range of `plans` in turn. A plan's row is ``(first word,
    words from one row to the next, words of a row, first output word, output words from
    one row to the next, reversed)``, worked out once per range: making the views, the
    divisions and the call of every row cost more than moving a quad chip's row (12-bit
    quad frames: 190 -> 125 us, their top halves 63 -> 16)."""
    for r in range(rows):
        for g in range(plans.shape[0]):
            w0 = plans[g, 0] + r * plans[g, 1]
            nw = plans[g, 2]
            o0 = plans[g, 3] + r * plans[g, 4]
            src = words[w0 : w0 + nw]
            dst = out_words[o0 : o0 + nw]
            if plans[g, 5] == 0:
                for w in range(nw):
                    dst[w] = reverse_bytes(src[w])
            elif field_bits == 16:
                for w in range(nw):
                    dst[w] = swap_lane_bytes(src[back(nw, w)])
            else:
                for w in range(nw):
                    dst[w] = src[back(nw, w)]


@numba.njit(nogil=True, cache=True)
def _row12(words, out, reverse):
    """Pixels of `words` into `out` (``out[0]`` first, or ``out[-1]`` first if `reverse`)."""
    nw = words.shape[0]
    if reverse:
        for w in range(nw):
            x = words[back(nw, w)]
            for k in range(4):
                out[4 * w + k] = field12(x, 3 - k)
    else:
        for w in range(nw):
            x = words[w]
            for k in range(4):
                out[4 * w + k] = field12(x, k)


@numba.njit(nogil=True, cache=True)
def _row12_add(words, out, reverse, shift):
    nw = words.shape[0]
    if reverse:
        for w in range(nw):
            x = words[back(nw, w)]
            for k in range(4):
                out[4 * w + k] += field12(x, 3 - k) << shift
    else:
        for w in range(nw):
            x = words[w]
            for k in range(4):
                out[4 * w + k] += field12(x, k) << shift


@numba.njit(nogil=True, cache=True)
def _row6(words, out, reverse):
    nw = words.shape[0]
    if reverse:
        for w in range(nw):
            x = words[back(nw, w)]
            for k in range(8):
                out[8 * w + k] = _f6(x, 7 - k)
    else:
        for w in range(nw):
            x = words[w]
            for k in range(8):
                out[8 * w + k] = _f6(x, k)


@numba.njit(nogil=True, cache=True)
def _row1(words, out, reverse):
    nw = words.shape[0]
    if reverse:
        for w in range(nw):
            x = words[back(nw, w)]
            for k in range(64):
                out[64 * w + k] = _f1(x, 63 - k)
    else:
        for w in range(nw):
            x = words[w]
            for k in range(64):
                out[64 * w + k] = _f1(x, k)


@numba.njit(nogil=True, cache=True, inline="always")
def decode_row(src, words, rng, r, field_bits, add, out):
    """Row `r` of the read range `rng` into `out`."""
    ppw = 64 // field_bits
    start, dest, skip, n, rows = rng[1], rng[3], rng[4], rng[5], rng[6]
    src_stride, step, dest_stride, shift = rng[7], rng[8], rng[9], rng[10]
    d = dest + r * dest_stride
    whole_words = (
        LITTLE_ENDIAN
        and start % 8 == 0
        and skip == 0
        and n % ppw == 0
        and (rows == 1 or src_stride % ppw == 0)
    )
    if whole_words:
        w0 = start // 8 + r * (src_stride // ppw)
        row_words = words[w0 : w0 + n // ppw]
        reverse = step < 0
        row_out = out[d - n + 1 : d + 1] if reverse else out[d : d + n]
        if add:
            _row12_add(row_words, row_out, reverse, shift)
        elif out.itemsize * 8 == field_bits:
            words_as_pixels(row_words, row_out.view(np.uint64), field_bits, reverse)
        elif field_bits == 16:
            _row12(row_words, row_out, reverse)
        elif field_bits == 8:
            _row6(row_words, row_out, reverse)
        else:
            _row1(row_words, row_out, reverse)
        return
    p0 = skip + r * src_stride
    for k in range(n):
        value = _px(src, start, p0 + k, field_bits)
        if add:
            out[d + step * k] += value << shift
        else:
            out[d + step * k] = value
