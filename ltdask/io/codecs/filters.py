"""The chunks of HDF5's bitshuffle (filter 32008, LZ4 inside) and LZ4 (filter 32004)
filters, decoded by numba kernels that check every length against the buffers' ends.

Both begin with a 12-byte header (a big-endian u64 of the decoded bytes and a u32 of the
block bytes), which the callers read and check themselves (a file's chunk must state its
size; a stream's blob may leave the header zero), then blocks, each a big-endian u32
compressed length and the block:

* bitshuffle: per block of `block_elements` elements (a multiple of 8; the last block
  the rest rounded down to 8) one LZ4 block of the bit-shuffled elements, then the last
  ``n % 8`` elements as they are;
* LZ4: per block of `block_bytes` bytes (the last the rest) one LZ4 block, or the bytes as
  they are where the compressed length equals the block's length.

The kernels release the GIL. They return ``(0, offset after the chunk)``, or ``(error
code, -1)`` with the byte offset of the fault in ``err[1]``; `MESSAGES` says what each
code means.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.io.codecs.bitshuffle import bitunshuffle
from ltdask.io.codecs.lz4 import BEFORE_START, OVERRUN, SHORT, TRUNCATED, lz4_block

#: error codes of the chunk kernels beyond `lz4_block`'s: a header's total bytes are not
#: the decoded size; its block size is not one a chunk may have; a block's compressed
#: length is zero or runs past the end; the chunk's length does not fit its decoded size
BAD_TOTAL, BAD_BLOCK_SIZE, BLOCK_PAST_END, BAD_LENGTH = 5, 6, 7, 9
#: what each error code means, ``{what}`` the name of the caller's buffer ("blob", "chunk")
MESSAGES = {
    TRUNCATED: "the {what} ends inside an LZ4 sequence",
    OVERRUN: "an LZ4 sequence writes past the end of its block",
    BEFORE_START: "an LZ4 match points before the start of its block",
    SHORT: "an LZ4 block decompresses to fewer bytes than its part of the {what} holds",
    BAD_TOTAL: "the bitshuffle header's total bytes do not match the {what}'s decoded size",
    BAD_BLOCK_SIZE: "the header's block size is not a multiple of 8 elements, or too large",
    BLOCK_PAST_END: "a block's compressed length is zero or runs past the {what}'s end",
    BAD_LENGTH: "the {what}'s length does not match its decoded size (trailing or missing bytes)",
}


@numba.njit(cache=True, nogil=True)
def big_endian(src, at, nbytes):
    """The unsigned big-endian integer ``src[at:at + nbytes]`` (the caller checks the range)."""
    value = np.int64(0)
    for i in range(nbytes):
        value = (value << 8) | np.int64(src[at + i])
    return value


@numba.njit(cache=True, nogil=True)
def bitshuffle_lz4_blocks(src, ip, iend, dst, itemsize, block_elements, tmp, err):
    """The blocks of a bitshuffle-LZ4 chunk, ``src[ip:iend]`` after its header, into all of
    `dst` (``n * itemsize`` bytes), each LZ4 block through `tmp` (at least ``min(n,
    block_elements) * itemsize`` bytes)."""
    if block_elements <= 0 or block_elements % 8 != 0:
        err[1] = ip
        return BAD_BLOCK_SIZE, -1
    nbytes = dst.shape[0]
    n = nbytes // itemsize
    full = n // block_elements
    last = n % block_elements
    last -= last % 8
    op = 0
    for b in range(full + (1 if last > 0 else 0)):
        m = block_elements if b < full else last
        if m * itemsize > tmp.shape[0]:
            err[1] = ip
            return BAD_BLOCK_SIZE, -1
        if iend - ip < 4:
            err[1] = ip
            return BLOCK_PAST_END, -1
        clen = big_endian(src, ip, 4)
        if clen > iend - ip - 4:
            err[1] = ip
            return BLOCK_PAST_END, -1
        ip += 4
        code = lz4_block(src, ip, ip + clen, tmp, 0, m * itemsize, err)
        if code != 0:
            return code, -1
        bitunshuffle(tmp, dst, op, m, itemsize)
        ip += clen
        op += m * itemsize
    tail = nbytes - op
    if iend - ip < tail:
        err[1] = ip
        return BAD_LENGTH, -1
    dst[op:] = src[ip : ip + tail]
    return 0, ip + tail


@numba.njit(cache=True, nogil=True)
def lz4_blocks(src, ip, iend, dst, block_bytes, err):
    """The blocks of an LZ4 chunk, ``src[ip:iend]`` after its header, into all of `dst`."""
    if block_bytes <= 0:
        err[1] = ip
        return BAD_BLOCK_SIZE, -1
    nbytes = dst.shape[0]
    op = 0
    while op < nbytes:
        want = min(block_bytes, nbytes - op)
        if iend - ip < 4:
            err[1] = ip
            return BLOCK_PAST_END, -1
        clen = big_endian(src, ip, 4)
        if clen <= 0 or clen > iend - ip - 4:
            err[1] = ip
            return BLOCK_PAST_END, -1
        ip += 4
        if clen == want:  # (stored as it is: it did not compress)
            dst[op : op + want] = src[ip : ip + want]
        else:
            # (each block on its own: a match never reaches into the block before)
            code = lz4_block(src, ip, ip + clen, dst, op, op + want, err)
            if code != 0:
                return code, -1
        ip += clen
        op += want
    return 0, ip
