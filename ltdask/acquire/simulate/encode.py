"""Frames to DECTRIS blobs: an LZ4 block compressor and the bitshuffle-LZ4 chunk format.

The simulator's side of `ltdask.acquire.bslz4`: what a DECTRIS detector control unit does
to a frame before it streams it. The compressor is a plain greedy LZ4 (one hash table of
4-byte sequences, no search for longer matches): its blocks are valid LZ4 that any decoder
reads; they are a little larger than the reference library's on noisy data and as small
on sparse diffraction frames.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.acquire.bslz4 import BSLZ4, LZ4, RAW, default_block_elements, lz4_bound
from ltdask.acquire.store import AcquisitionError
from ltdask.io.codecs.bitshuffle import bitshuffle

_HASH_BITS = 13
#: LZ4: no match starts in the last 12 bytes, the last 5 are literals
_MATCH_LIMIT, _LAST_LITERALS = 12, 5


@numba.njit(cache=True, nogil=True)
def _length_bytes(dst, op, rest):
    """The LZ4 extension bytes of a length beyond 15 (`rest` = length - 15)."""
    while rest >= 255:
        dst[op] = 255
        op += 1
        rest -= 255
    dst[op] = rest
    return op + 1


@numba.njit(cache=True, nogil=True)
def _sequence(dst, op, src, anchor, literals, offset, length):
    """One LZ4 sequence (`length` 0: the last one, literals only) at ``dst[op:]``."""
    token_at = op
    op += 1
    token = min(literals, 15) << 4
    if literals >= 15:
        op = _length_bytes(dst, op, literals - 15)
    dst[op : op + literals] = src[anchor : anchor + literals]
    op += literals
    if length:
        dst[op] = offset & 255
        dst[op + 1] = offset >> 8
        op += 2
        token |= min(length - 4, 15)
        if length - 4 >= 15:
            op = _length_bytes(dst, op, length - 4 - 15)
    dst[token_at] = token
    return op


@numba.njit(cache=True, nogil=True)
def _read32(src, at):
    return (
        np.int64(src[at])
        | (np.int64(src[at + 1]) << 8)
        | (np.int64(src[at + 2]) << 16)
        | (np.int64(src[at + 3]) << 24)
    )


@numba.njit(cache=True, nogil=True)
def lz4_compress(src, dst):
    """``src`` (uint8) as one LZ4 block into `dst` (at least `lz4_bound` bytes); returns
    the block's length."""
    n = src.shape[0]
    table = np.full(1 << _HASH_BITS, -1, np.int64)
    ip, op, anchor = 0, 0, 0
    while ip < n - _MATCH_LIMIT:
        seq = _read32(src, ip)
        h = ((seq * 40503) >> (32 - _HASH_BITS + 16)) & ((1 << _HASH_BITS) - 1)
        h = (h ^ seq) & ((1 << _HASH_BITS) - 1)
        ref = table[h]
        table[h] = ip
        if ref >= 0 and ip - ref <= 65535 and _read32(src, ref) == seq:
            length = 4
            while ip + length < n - _LAST_LITERALS and src[ref + length] == src[ip + length]:
                length += 1
            op = _sequence(dst, op, src, anchor, ip - anchor, ip - ref, length)
            ip += length
            anchor = ip
        else:
            ip += 1
    return _sequence(dst, op, src, anchor, n - anchor, 0, 0)


@numba.njit(cache=True, nogil=True)
def _bslz4_compress(src, dst, itemsize, block_elements):
    """The HDF5 bitshuffle-LZ4 chunk of the bytes `src` into `dst`; returns its length."""
    nbytes = src.shape[0]
    block_bytes = block_elements * itemsize
    for i in range(8):
        dst[i] = (nbytes >> (8 * (7 - i))) & 255
    for i in range(4):
        dst[8 + i] = (block_bytes >> (8 * (3 - i))) & 255
    op = 12
    n = nbytes // itemsize
    full = n // block_elements
    last = n % block_elements
    last -= last % 8
    shuffled = np.empty(block_bytes, np.uint8)
    ip = 0
    for b in range(full + (1 if last > 0 else 0)):
        m = block_elements if b < full else last
        bitshuffle(src, ip, shuffled, m, itemsize)
        length = lz4_compress(shuffled[: m * itemsize], dst[op + 4 :])
        for i in range(4):
            dst[op + i] = (length >> (8 * (3 - i))) & 255
        op += 4 + length
        ip += m * itemsize
    tail = nbytes - ip
    dst[op : op + tail] = src[ip:]
    return op + tail


def encode_frame(frame: np.ndarray, code: int) -> bytes:
    """`frame` as a DECTRIS blob: `code` is ``bslz4.RAW``, ``LZ4`` or ``BSLZ4``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.acquire import bslz4
    >>> frame = np.zeros((64, 64), np.uint16)
    >>> blob = encode_frame(frame, bslz4.BSLZ4)
    >>> len(blob) < frame.nbytes // 20
    True
    >>> bool((bslz4.decode_blob(blob, (64, 64), np.uint16, "bs16-lz4<") == frame).all())
    True
    """
    frame = np.ascontiguousarray(frame)
    if frame.dtype not in (np.uint8, np.uint16, np.uint32):
        raise AcquisitionError(
            f"frames of {frame.dtype}: a DECTRIS stream sends uint8, uint16 or uint32"
        )
    raw = frame.astype(frame.dtype.newbyteorder("<"), copy=False).reshape(-1).view(np.uint8)
    if code == RAW:
        return raw.tobytes()
    dst = np.empty(12 + 2 * lz4_bound(raw.size) + 64, np.uint8)
    if code == LZ4:
        n = lz4_compress(raw, dst)
    elif code == BSLZ4:
        itemsize = frame.dtype.itemsize
        n = _bslz4_compress(raw, dst, itemsize, default_block_elements(itemsize))
    else:
        raise AcquisitionError(f"encoding code {code}: expected RAW, LZ4 or BSLZ4")
    return dst[:n].tobytes()
