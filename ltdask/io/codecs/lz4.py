"""LZ4 blocks decompressed by a numba kernel that checks every read and write.

An LZ4 block is a run of sequences: a token (high nibble: the count of literals, low
nibble: the match length - 4; 15 in either means more bytes follow, each added, up to the
first that is not 255), the literals, then a little-endian u16 offset back into the output
and the match; the last sequence is literals only. `lz4_block` is what the HDF5 filters'
chunks (`ltdask.io.codecs.filters`) and the DECTRIS stream's blobs hold. A hostile block
(a length past either end, an offset before the start of the output) gives an error
code, never a read or write outside the buffers.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: error codes of `lz4_block` (0: decoded): the input ends inside a sequence; a sequence
#: writes past the end of the output; a match points before its start; the block ends
#: before the output is full
TRUNCATED, OVERRUN, BEFORE_START, SHORT = 1, 2, 3, 4


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
def lz4_block(src, ip, iend, dst, op, oend, err):
    """Decompress the LZ4 block ``src[ip:iend]`` into exactly ``dst[op:oend]``; 0, or an
    error code (`TRUNCATED`, `OVERRUN`, `BEFORE_START`, `SHORT`) with the byte offset in
    ``err[1]``. The caller keeps ``iend <= len(src)`` and ``oend <= len(dst)``; every other
    read and write is checked here."""
    start = op
    while True:
        if ip >= iend:
            err[1] = ip
            return TRUNCATED
        token = np.int64(src[ip])
        ip += 1
        lit = token >> 4
        if lit == 15:
            lit, ip = _extended(src, ip, iend, lit)
            if ip < 0:
                err[1] = iend
                return TRUNCATED
        if lit > iend - ip:
            err[1] = ip
            return TRUNCATED
        if lit > oend - op:
            err[1] = ip
            return OVERRUN
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
            return TRUNCATED
        offset = np.int64(src[ip]) | (np.int64(src[ip + 1]) << 8)
        if offset == 0 or offset > op - start:
            err[1] = ip
            return BEFORE_START
        ip += 2
        length = token & 15
        if length == 15:
            length, ip = _extended(src, ip, iend, length)
            if ip < 0:
                err[1] = iend
                return TRUNCATED
        length += 4
        if length > oend - op:
            err[1] = ip
            return OVERRUN
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
        return SHORT
    return 0
