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
kernels check every length and offset against the buffers' ends (numba does not): a
malformed blob raises `AcquisitionError` naming the frame and the byte, never writes past
an end. The encoders are the simulator's (`ltdask.acquire.simulate.encode`).
"""

from __future__ import annotations

import math
import mmap

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ltdask.acquire.bitshuffle import bitunshuffle
from ltdask.acquire.store import AcquisitionError

#: bytes before the blob in a slot: uint32 length, uint8 encoding code, 3 spare, int64 index
PREFIX = 16
#: encoding codes of a slot (0: an empty slot, a frame that never came: zeros)
RAW, LZ4, BSLZ4 = 1, 2, 3
#: bitshuffle's target block size in bytes and the multiple of elements a block has
_TARGET_BLOCK_BYTES = 8192
_BLOCK_MULTIPLE = 8

_ERRORS = {
    1: "the blob ends inside an LZ4 sequence",
    2: "an LZ4 sequence writes past the end of its block",
    3: "an LZ4 match points before the start of its block",
    4: "an LZ4 block decompresses to fewer bytes than the frame holds",
    5: "the bitshuffle header's total bytes do not match the frame's",
    6: "the bitshuffle header's block size is not a multiple of 8 elements",
    7: "a bitshuffle block's compressed length runs past the blob's end",
    8: "the blob's length does not fit its slot",
    9: "the blob's length does not match the frame (trailing or missing bytes)",
    10: "the slot's encoding code is unknown",
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
@intrinsic
def _copy8(typingctx, dst, at, src, start):
    """Copy 8 bytes ``src[start:start + 8]`` to ``dst[at:at + 8]`` as one unaligned 64-bit
    load and store (the caller checks both ranges)."""
    sig = types.void(dst, at, src, start)

    def codegen(context, builder, signature, args):
        out = context.make_array(signature.args[0])(context, builder, args[0])
        inp = context.make_array(signature.args[2])(context, builder, args[2])
        word = ir.IntType(64).as_pointer()
        value = builder.load(builder.bitcast(builder.gep(inp.data, [args[3]]), word), align=1)
        builder.store(value, builder.bitcast(builder.gep(out.data, [args[1]]), word), align=1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _copy(typingctx, dst, at, src, start, n):
    """Copy `n` bytes ``src[start:start + n]`` to ``dst[at:at + n]`` with the C library's
    memcpy (the caller checks both ranges, which must not overlap): a long LZ4 match or
    run of literals costs a fraction of what a loop of 8-byte words does, whose loads
    read bytes just stored (~2x the whole decoding on diffraction frames)."""
    sig = types.void(dst, at, src, start, n)

    def codegen(context, builder, signature, args):
        out = context.make_array(signature.args[0])(context, builder, args[0])
        inp = context.make_array(signature.args[2])(context, builder, args[2])
        target = builder.gep(out.data, [args[1]])
        cgutils.raw_memcpy(builder, target, builder.gep(inp.data, [args[3]]), args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def _extended(src, ip, iend, value):
    """An LZ4 length of 15 or more: `value` plus the bytes from `ip` up to the first that
    is not 255; ``(length, next ip)``, or ``(value, -1)`` where the block ends first."""
    while True:
        if ip >= iend:
            return value, -1
        extra = np.int64(src[ip])
        ip += 1
        value += extra
        if extra != 255:
            return value, ip


@numba.njit(cache=True, nogil=True)
def _lz4_block(src, ip, iend, dst, op, oend, err):
    """Decompress the LZ4 block ``src[ip:iend]`` into exactly ``dst[op:oend]``; 0, or an
    error code with the byte offset in ``err[1]``."""
    start = op
    while True:
        if ip >= iend:
            err[1] = ip
            return 1
        token = np.int64(src[ip])
        ip += 1
        lit = token >> 4
        if lit == 15:
            lit, ip = _extended(src, ip, iend, lit)
            if ip < 0:
                err[1] = iend
                return 1
        if lit > iend - ip:
            err[1] = ip
            return 1
        if lit > oend - op:
            err[1] = ip
            return 2
        if lit <= 16 and iend - ip >= 16 and oend - op >= 16:
            # (16 bytes at once; those past the literals are overwritten by what follows)
            _copy8(dst, op, src, ip)
            _copy8(dst, op + 8, src, ip + 8)
        elif lit < 16:
            for i in range(lit):
                dst[op + i] = src[ip + i]
        else:
            _copy(dst, op, src, ip, lit)
        ip += lit
        op += lit
        if ip == iend:
            break
        if iend - ip < 2:
            err[1] = ip
            return 1
        offset = np.int64(src[ip]) | (np.int64(src[ip + 1]) << 8)
        if offset == 0 or offset > op - start:
            err[1] = ip
            return 3
        ip += 2
        length = token & 15
        if length == 15:
            length, ip = _extended(src, ip, iend, length)
            if ip < 0:
                err[1] = iend
                return 1
        length += 4
        if length > oend - op:
            err[1] = ip
            return 2
        ref = op - offset
        if offset >= 8 and length <= 16 and oend - op >= 16:
            # (8 bytes back at least: each word reads bytes already written; those past
            # the match are overwritten by what follows)
            _copy8(dst, op, dst, ref)
            _copy8(dst, op + 8, dst, ref + 8)
        elif offset == 1:
            dst[op : op + length] = dst[ref]
        elif length < 16:  # (short runs: a loop costs less than a call)
            for i in range(length):
                dst[op + i] = dst[ref + i]
        else:
            # runs that do not overlap their source: where the match overlaps itself its
            # bytes repeat with period `offset`, so runs of doubling length copy it
            at, end = op, op + length
            while at < end:
                n = min(at - ref, end - at)
                _copy(dst, at, dst, ref, n)
                at += n
        op += length
    if op != oend:
        err[1] = ip
        return 4
    return 0


@numba.njit(cache=True, nogil=True)
def _be(src, at, nbytes):
    value = np.int64(0)
    for i in range(nbytes):
        value = (value << 8) | np.int64(src[at + i])
    return value


@numba.njit(cache=True, nogil=True)
def _bslz4(src, ip, iend, dst, itemsize, block_elements, tmp, err):
    """The bitshuffle-LZ4 blob ``src[ip:iend]`` into all of `dst`."""
    nbytes = dst.shape[0]
    if iend - ip < 12:
        err[1] = ip
        return 1
    total = _be(src, ip, 8)
    block_bytes = _be(src, ip + 8, 4)
    if total != 0 and total != nbytes:
        err[1] = ip
        return 5
    if block_bytes != 0:
        if block_bytes % (itemsize * 8) != 0 or block_bytes > tmp.shape[0]:
            err[1] = ip + 8
            return 6
        block_elements = block_bytes // itemsize
    ip += 12
    n = nbytes // itemsize
    full = n // block_elements
    last = n % block_elements
    last -= last % 8
    op = 0
    for b in range(full + (1 if last > 0 else 0)):
        m = block_elements if b < full else last
        if iend - ip < 4:
            err[1] = ip
            return 7
        clen = _be(src, ip, 4)
        ip += 4
        if clen > iend - ip:
            err[1] = ip - 4
            return 7
        code = _lz4_block(src, ip, ip + clen, tmp, 0, m * itemsize, err)
        if code != 0:
            return code
        bitunshuffle(tmp, dst, op, m, itemsize)
        ip += clen
        op += m * itemsize
    tail = nbytes - op
    if iend - ip != tail:
        err[1] = ip
        return 9
    dst[op:] = src[ip:iend]
    return 0


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
            code = 8
        elif slot[4] == RAW:
            if n != nbytes:
                code = 9
            else:
                out[i, :] = slot[PREFIX : PREFIX + n]
        elif slot[4] == LZ4:
            code = _lz4_block(slot, PREFIX, PREFIX + n, out[i], 0, nbytes, err)
        elif slot[4] == BSLZ4:
            code = _bslz4(slot, PREFIX, PREFIX + n, out[i], itemsize, block_elements, tmp, err)
        else:
            code = 10
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
