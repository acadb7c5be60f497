"""DECTRIS frame blobs: LZ4 blocks, the HDF5 bitshuffle-LZ4 chunk format, raw pixels.

A DECTRIS stream (SIMPLON stream v1) sends each frame as one blob whose ``encoding`` says
how to read it: ``bs<N>-lz4<`` (the HDF5 bitshuffle filter's chunk: a 12-byte big-endian
header of the total bytes and the block bytes, then per block a big-endian uint32
compressed length and one LZ4 block of the bit-shuffled elements; the last < 8 elements
raw), ``lz4<`` (one LZ4 block of the pixels) or ``<`` (the pixels). The header of a
bitshuffle blob need not be filled (LiberTEM's own mock writes zeros): the frame's shape
and type say how many bytes it holds and the block size is then bitshuffle's default.

Decoding runs in the partition tasks on blobs kept in fixed-size *slots* (`slot_bytes`):
a 16-byte prefix (uint32 blob length, the encoding's code, the frame's scan index) and the
blob, so that frames of any compressed size travel through the acquisition's store. The
kernels (`ltdask.io.codecs`, which the DECTRIS file reader shares) check every length and
offset against the buffers' ends (numba does not): a malformed blob raises
`AcquisitionError` naming the frame and the byte, never writes past an end. The encoders
are the simulator's (`ltdask.acquire.simulate.encode`).
"""

from __future__ import annotations

import math
import mmap

import numba
import numpy as np

from ltdask.acquire.store import AcquisitionError
from ltdask.io.codecs.filters import (
    BAD_BLOCK_SIZE,
    BAD_LENGTH,
    BAD_TOTAL,
    MESSAGES,
    big_endian,
    bitshuffle_lz4_blocks,
)
from ltdask.io.codecs.lz4 import TRUNCATED, lz4_block

#: bytes before the blob in a slot: uint32 length, uint8 encoding code, 3 spare, int64 index
PREFIX = 16
#: encoding codes of a slot (0: an empty slot, a frame that never came: zeros)
RAW, LZ4, BSLZ4 = 1, 2, 3
#: bitshuffle's target block size in bytes and the multiple of elements a block has
_TARGET_BLOCK_BYTES = 8192
_BLOCK_MULTIPLE = 8

#: slot faults beyond the decoders' (`ltdask.io.codecs.filters.MESSAGES`)
_TOO_LONG, _UNKNOWN = 8, 10
_ERRORS = {
    **{code: text.format(what="blob") for code, text in MESSAGES.items()},
    _TOO_LONG: "the blob's length does not fit its slot",
    _UNKNOWN: "the slot's encoding code is unknown",
}


def parse_encoding(encoding: str, dtype) -> int:
    """The code (`RAW`, `LZ4`, `BSLZ4`) of a stream's ``encoding`` for frames of `dtype`.

    Examples
    --------
    >>> parse_encoding("bs16-lz4<", "uint16") == BSLZ4
    True
    """
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    if encoding == "<":
        return RAW
    if encoding == "lz4<":
        return LZ4
    if encoding == f"bs{bits}-lz4<":
        return BSLZ4
    raise AcquisitionError(
        f"encoding {encoding!r} for {dtype} frames: expected '<', 'lz4<' or 'bs{bits}-lz4<' "
        "(little-endian; big-endian and other filters are not supported)"
    )


def default_block_elements(itemsize: int) -> int:
    """Elements per block of a bitshuffle blob whose header gives no block size."""
    block = (_TARGET_BLOCK_BYTES // itemsize) // _BLOCK_MULTIPLE * _BLOCK_MULTIPLE
    return max(block, 128)


def lz4_bound(nbytes: int) -> int:
    """The most bytes an LZ4 block of `nbytes` takes (LZ4's compress bound)."""
    return nbytes + nbytes // 255 + 16


def max_blob_bytes(frame_bytes: int, itemsize: int) -> int:
    """The largest blob a frame of `frame_bytes` takes in any encoding."""
    block = default_block_elements(itemsize) * itemsize
    blocks = math.ceil(frame_bytes / block)
    bslz4 = 12 + frame_bytes + blocks * (4 + 16) + frame_bytes // 255 + 16
    return max(bslz4, lz4_bound(frame_bytes), frame_bytes)


def slot_bytes(frame_bytes: int, itemsize: int) -> int:
    """Bytes of a slot that holds any blob of a frame of `frame_bytes`: whole memory pages
    where it takes one or more, so that a blob of n bytes touches ``ceil((n + PREFIX) /
    page)`` pages of a store's buffer (each a page fault the first time: ~2.5 pages a 6 KB
    blob touched in slots that began anywhere in a page, 2 in slots that begin a page)."""
    need = PREFIX + max_blob_bytes(frame_bytes, itemsize)
    if need < mmap.PAGESIZE:
        return need
    return -(-need // mmap.PAGESIZE) * mmap.PAGESIZE


# -- decoding ----------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _bslz4(src, ip, iend, dst, itemsize, block_elements, tmp, err):
    """The bitshuffle-LZ4 blob ``src[ip:iend]`` into all of `dst`: its header's fields may
    be zero (the frame says the size, bitshuffle's default the block), and no byte may
    follow the last element."""
    nbytes = dst.shape[0]
    if iend - ip < 12:
        err[1] = ip
        return TRUNCATED
    total = big_endian(src, ip, 8)
    block_bytes = big_endian(src, ip + 8, 4)
    if total != 0 and total != nbytes:
        err[1] = ip
        return BAD_TOTAL
    if block_bytes != 0:
        if block_bytes % (itemsize * 8) != 0 or block_bytes > tmp.shape[0]:
            err[1] = ip + 8
            return BAD_BLOCK_SIZE
        block_elements = block_bytes // itemsize
    code, end = bitshuffle_lz4_blocks(src, ip + 12, iend, dst, itemsize, block_elements, tmp, err)
    if code == 0 and end != iend:
        err[1] = end
        return BAD_LENGTH
    return code


@numba.njit(cache=True, nogil=True)
def _decode_slots(slots, out, itemsize, block_elements, err):
    """Each slot's blob into its row of `out`; on an error, ``err`` = (row, code, offset in
    the blob) and the rest stays undecoded."""
    capacity = slots.shape[1] - PREFIX
    nbytes = out.shape[1]
    tmp = np.empty(max(block_elements, 4096) * itemsize, np.uint8)
    for i in range(slots.shape[0]):
        slot = slots[i]
        n = (
            np.int64(slot[0])
            | (np.int64(slot[1]) << 8)
            | (np.int64(slot[2]) << 16)
            | (np.int64(slot[3]) << 24)
        )
        code = 0
        err[1] = PREFIX
        if n == 0:
            out[i, :] = 0
            continue
        if n > capacity:
            code = _TOO_LONG
        elif slot[4] == RAW:
            if n != nbytes:
                code = BAD_LENGTH
            else:
                out[i, :] = slot[PREFIX : PREFIX + n]
        elif slot[4] == LZ4:
            code = lz4_block(slot, PREFIX, PREFIX + n, out[i], 0, nbytes, err)
        elif slot[4] == BSLZ4:
            code = _bslz4(slot, PREFIX, PREFIX + n, out[i], itemsize, block_elements, tmp, err)
        else:
            code = _UNKNOWN
        if code != 0:
            err[0] = i
            err[2] = code
            err[1] -= PREFIX
            return


def decode_slots(slots: np.ndarray, sig_shape: tuple[int, ...], dtype) -> np.ndarray:
    """Frames ``(k, *sig_shape)`` of `dtype` from `k` slots (rows of uint8, `PREFIX` + blob).

    Raises `AcquisitionError` naming the frame's scan index and the byte offset in its blob
    where a blob is malformed.

    Examples
    --------
    >>> import numpy as np
    >>> frame = np.arange(12, dtype=np.uint16).reshape(3, 4)
    >>> slots = np.zeros((1, slot_bytes(24, 2)), np.uint8)
    >>> put_blob(slots[0], frame.tobytes(), RAW, index=0)
    >>> bool((decode_slots(slots, (3, 4), np.uint16)[0] == frame).all())
    True
    """
    dtype = np.dtype(dtype)
    slots = np.ascontiguousarray(slots, dtype=np.uint8).reshape(len(slots), -1)
    nbytes = math.prod(sig_shape) * dtype.itemsize
    out = np.empty((len(slots), nbytes), np.uint8)
    err = np.full(3, -1, np.int64)
    _decode_slots(slots, out, dtype.itemsize, default_block_elements(dtype.itemsize), err)
    if err[0] >= 0:
        row = int(err[0])
        index = int(slots[row, 8:16].view("<i8")[0])
        raise AcquisitionError(
            f"frame {index}: {_ERRORS.get(int(err[2]), 'malformed blob')} (byte {int(err[1])} "
            f"of its {int(slots[row, :4].view('<u4')[0])}-byte blob, encoding code "
            f"{int(slots[row, 4])}, {dtype} {tuple(sig_shape)})"
        )
    return (
        out.view(dtype.newbyteorder("<"))
        .astype(dtype, copy=False)
        .reshape((len(slots), *sig_shape))
    )


def put_blob(slot: np.ndarray, blob, code: int, index: int) -> None:
    """Write `blob` (encoding `code`) of the frame at scan `index` into `slot`."""
    n = len(blob)
    if n > len(slot) - PREFIX:
        raise AcquisitionError(
            f"frame {index}: a blob of {n} bytes, larger than any encoding of the frame "
            f"takes ({len(slot) - PREFIX} bytes)"
        )
    slot[:4] = np.frombuffer(np.uint32(n).tobytes(), np.uint8)
    slot[4] = code
    slot[8:16] = np.frombuffer(np.int64(index).astype("<i8").tobytes(), np.uint8)
    slot[PREFIX : PREFIX + n] = np.frombuffer(blob, np.uint8)


def decode_blob(blob, sig_shape: tuple[int, ...], dtype, encoding: str) -> np.ndarray:
    """One frame from a blob of the stream's `encoding` (for a single frame; streams use
    slots and `decode_slots`).

    Examples
    --------
    >>> import numpy as np
    >>> blob = bytes([0x50, 1, 2, 3, 4, 5, 1, 0, 0])  # 5 literals, 4 bytes from 1 back, end
    >>> decode_blob(blob, (3, 3), np.uint8, "lz4<").tolist()
    [[1, 2, 3], [4, 5, 5], [5, 5, 5]]
    """
    dtype = np.dtype(dtype)
    code = parse_encoding(encoding, dtype)
    frame_bytes = math.prod(sig_shape) * dtype.itemsize
    slots = np.zeros((1, PREFIX + max(len(blob), 1)), np.uint8)
    if len(blob) > max_blob_bytes(frame_bytes, dtype.itemsize):
        raise AcquisitionError(
            f"a blob of {len(blob)} bytes for a {dtype} {tuple(sig_shape)} frame: expected "
            f"at most {max_blob_bytes(frame_bytes, dtype.itemsize)}"
        )
    put_blob(slots[0], blob, code, 0)
    return decode_slots(slots, sig_shape, dtype)[0]


__all__ = [
    "BSLZ4",
    "LZ4",
    "PREFIX",
    "RAW",
    "decode_blob",
    "decode_slots",
    "max_blob_bytes",
    "parse_encoding",
    "put_blob",
    "slot_bytes",
]
