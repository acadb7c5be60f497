"""Decoding the compressed chunks of HDF5 files without HDF5: bitshuffle (filter 32008, LZ4
or Zstd inside) and LZ4 (filter 32004), as DECTRIS detectors write them.

Chunk framing (both filters): a big-endian u64 with the decompressed byte count and a u32
block size in bytes, then blocks, each a big-endian u32 compressed length and the block.
Bitshuffle transposes bits inside each block (the last ``n % 8`` items of a chunk are stored
as they are, after the blocks); LZ4 stores a block whose compressed length equals its raw
length uncompressed.

Bitshuffle-LZ4 and LZ4 chunks are decoded by the numba kernels the DECTRIS stream decodes
its frames with (`ltdask.io.codecs`: every length and offset checked, the GIL released),
straight into the caller's buffer. Bitshuffle-Zstd chunks are decompressed by the C library
inside the `bitshuffle` package, called through ctypes (the GIL released) once every block
has been checked to lie inside the chunk (the library trusts the lengths it reads); where
that library cannot be found, through bitshuffle's Python functions.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading

import numba
import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.codecs.filters import MESSAGES, bitshuffle_lz4_blocks, lz4_blocks


def chunk_header(raw: np.ndarray, expected: int, where: str) -> int:
    """The block size of a chunk of `expected` decoded bytes, from its 12-byte header."""
    if raw.size < 12:
        raise DataSetError(f"{where}: {raw.size} bytes, too short for a chunk header")
    total = int.from_bytes(raw[:8].tobytes(), "big")
    block = int.from_bytes(raw[8:12].tobytes(), "big")
    if total != expected:
        raise DataSetError(f"{where}: the header says {total} bytes, the chunk holds {expected}")
    if block <= 0 or block > max(expected, 1 << 30):
        raise DataSetError(f"{where}: block size {block} in the chunk header is not valid")
    return block


@numba.njit(nogil=True, cache=True)
def bitshuffle_blocks_fit(raw, nelems, itemsize, block_items):
    """-1 if every block of the bitshuffle chunk `raw` (header included) lies inside it, else
    the index of the first block that does not (its length runs past the end)."""
    pos = 12
    full = nelems // block_items
    rest = nelems % block_items
    last = rest - rest % 8
    blocks = full + (1 if last > 0 else 0)
    for b in range(blocks):
        if pos + 4 > raw.shape[0]:
            return b
        length = (
            (np.int64(raw[pos]) << 24)
            | (np.int64(raw[pos + 1]) << 16)
            | (np.int64(raw[pos + 2]) << 8)
            | np.int64(raw[pos + 3])
        )
        pos += 4 + length
        if length <= 0 or pos > raw.shape[0]:
            return b
    if pos + (rest % 8) * itemsize > raw.shape[0]:
        return blocks
    return -1


@functools.cache
def _bitshuffle_openmp():
    """``omp_set_num_threads`` of the OpenMP runtime that bitshuffle's wheel carries for
    itself (``bitshuffle.libs/libgomp-*.so``), or None (another build: left alone)."""
    import bitshuffle

    folder = os.path.join(os.path.dirname(os.path.dirname(bitshuffle.__file__)), "bitshuffle.libs")
    for path in sorted(glob.glob(os.path.join(folder, "libgomp*.so*"))):
        try:
            return ctypes.CDLL(path).omp_set_num_threads
        except (OSError, AttributeError):
            continue
    return None


_openmp_set = threading.local()


def _one_openmp_thread() -> None:
    """Decompress on the calling thread only: tasks already decompress in parallel, and an
    OpenMP team per call oversubscribes the cores (its threads spin while they wait, which
    made 2 threads decode 4x slower than 1 on a loaded 2-core machine). The setting is per
    thread and only reaches bitshuffle's private OpenMP runtime."""
    if getattr(_openmp_set, "done", False):
        return
    setter = _bitshuffle_openmp()
    if setter is not None:
        setter(1)
    _openmp_set.done = True


@functools.cache
def _native_zstd():
    """``bshuf_decompress_zstd`` of bitshuffle's compiled module, or None."""
    try:
        from bitshuffle import ext
    except ImportError:
        return None
    try:
        fn = ctypes.CDLL(ext.__file__).bshuf_decompress_zstd
    except (OSError, AttributeError):
        return None
    # (in, out, items, item bytes, block items) -> bytes read, negative on an error
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    fn.restype = ctypes.c_int64
    return fn


def _target(out, nbytes: int, caller: str) -> np.ndarray:
    """The first `nbytes` of `out` as bytes (a new array where `out` is None)."""
    if out is None:
        return np.empty(nbytes, dtype=np.uint8)
    if not (out.flags.c_contiguous and out.nbytes >= nbytes):
        raise ValueError(f"{caller}: `out` is too small or not C-contiguous")
    return out.reshape(-1).view(np.uint8)[:nbytes]


def _checked(code: int, err: np.ndarray, where: str, raw: np.ndarray, items: np.ndarray):
    """`items` where a kernel returned `code` 0, else the error naming where it failed."""
    if code != 0:
        what = MESSAGES.get(code, "malformed chunk").format(what="chunk")
        raise DataSetError(
            f"{where}: the chunk does not decompress: {what} (byte {int(err[1])} of its {raw.size})"
        )
    return items


@numba.njit(nogil=True, cache=True)
def _bitshuffle_lz4_chunk(raw, dst, itemsize, block_items, err):
    """A bitshuffle-LZ4 chunk whose header was checked into `dst`; 0 or an error code."""
    n = dst.shape[0] // itemsize
    tmp = np.empty(max(min(block_items, n), 8) * itemsize, np.uint8)
    code, _ = bitshuffle_lz4_blocks(raw, 12, raw.shape[0], dst, itemsize, block_items, tmp, err)
    return code


@numba.njit(nogil=True, cache=True)
def _lz4_chunk(raw, dst, block_bytes, err):
    """An LZ4 chunk whose header was checked into `dst`; 0 or an error code."""
    code, _ = lz4_blocks(raw, 12, raw.shape[0], dst, block_bytes, err)
    return code


def decode_bitshuffle(
    raw: np.ndarray, nelems: int, dtype: np.dtype, zstd: bool, where: str, out=None
):
    """A bitshuffle chunk (HDF5 filter 32008) decoded to `nelems` items of `dtype`, into `out`
    (C-contiguous, at least ``nelems * itemsize`` bytes) if given; returns the items.

    Bytes after the last item are ignored, as HDF5's filter does.
    """
    dtype = np.dtype(dtype)
    nbytes = nelems * dtype.itemsize
    target = _target(out, nbytes, "decode_bitshuffle")
    block = chunk_header(raw, nbytes, where)
    if block % dtype.itemsize or (block // dtype.itemsize) % 8:
        raise DataSetError(f"{where}: block size {block} bytes does not fit {dtype} items")
    block_items = block // dtype.itemsize
    if zstd:
        return _decode_zstd(raw, nelems, dtype, block_items, where, target)
    err = np.zeros(2, np.int64)
    code = _bitshuffle_lz4_chunk(raw, target, dtype.itemsize, block_items, err)
    return _checked(code, err, where, raw, target.view(dtype))


def _decode_zstd(raw, nelems, dtype, block_items, where, target):
    """A bitshuffle-Zstd chunk whose header was checked, by bitshuffle's C library."""
    _one_openmp_thread()
    # (bitshuffle's decoders trust the block lengths: one past the end reads beyond the map)
    bad = bitshuffle_blocks_fit(raw, nelems, dtype.itemsize, block_items)
    if bad >= 0:
        raise DataSetError(f"{where}: the chunk does not decompress: block {bad} runs past its end")
    native = _native_zstd()
    if native is None:
        import bitshuffle

        try:
            items = bitshuffle.decompress_zstd(raw[12:], (nelems,), dtype, block_items)
        except (ValueError, RuntimeError) as e:
            raise DataSetError(f"{where}: the chunk does not decompress: {e}") from None
        target.view(dtype)[...] = items
        return target.view(dtype)
    done = native(raw[12:].ctypes.data, target.ctypes.data, nelems, dtype.itemsize, block_items)
    if done < 0:
        raise DataSetError(f"{where}: the chunk does not decompress (bitshuffle error {done})")
    return target.view(dtype)


def decode_lz4(raw: np.ndarray, nelems: int, dtype: np.dtype, where: str, out=None):
    """An LZ4 chunk (HDF5 filter 32004) decoded to `nelems` items of `dtype`, into `out`
    (C-contiguous, at least ``nelems * itemsize`` bytes) if given; returns the items.

    Bytes after the last block are ignored, as HDF5's filter does.
    """
    dtype = np.dtype(dtype)
    nbytes = nelems * dtype.itemsize
    target = _target(out, nbytes, "decode_lz4")
    block = chunk_header(raw, nbytes, where)
    err = np.zeros(2, np.int64)
    return _checked(_lz4_chunk(raw, target, block, err), err, where, raw, target.view(dtype))
