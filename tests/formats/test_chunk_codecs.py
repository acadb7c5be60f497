"""HDF5 filter chunks decoded without HDF5 (`ltdask.io.formats.dectris.codecs`): bitshuffle
chunks equal to the `bitshuffle` package's own decoder on chunks it compressed (LZ4 inside:
ltdask's numba kernels; Zstd: the C library or the Python fallback), LZ4 chunks equal to
what the `lz4` library compressed, into a caller's buffer or not; damaged chunks and
hostile LZ4 sequences give errors naming the chunk, never a crash or a wrong result."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.lz4blocks import lz4_sequences
from hypothesis import given, settings
from hypothesis import strategies as st

from ltdask import DataSetError
from ltdask.io.formats.dectris import codecs as chunk_codecs

bitshuffle = pytest.importorskip("bitshuffle")  # ltdask[hdf5], installed by ltdask[test]
lz4_block = pytest.importorskip("lz4.block")


def header(nbytes: int, block_bytes: int) -> bytes:
    return nbytes.to_bytes(8, "big") + block_bytes.to_bytes(4, "big")


def chunk(items: np.ndarray, block_items: int, zstd: bool = False) -> np.ndarray:
    """`items` as an HDF5 bitshuffle chunk: the filter's 12-byte header, then the blocks."""
    compress = bitshuffle.compress_zstd if zstd else bitshuffle.compress_lz4
    body = np.asarray(compress(items, block_items)).view(np.uint8)
    head = header(items.nbytes, block_items * items.itemsize)
    return np.concatenate([np.frombuffer(head, np.uint8), body])


def lz4_chunk(items: np.ndarray, block_bytes: int) -> np.ndarray:
    """`items` as an HDF5 LZ4 chunk (filter 32004) compressed by the lz4 library, blocks
    that do not compress stored as they are (as the filter does)."""
    raw = items.tobytes()
    out = bytearray(header(len(raw), block_bytes))
    for at in range(0, len(raw), block_bytes):
        block = raw[at : at + block_bytes]
        packed = lz4_block.compress(block, store_size=False)
        if len(packed) >= len(block):
            packed = block
        out += len(packed).to_bytes(4, "big") + packed
    return np.frombuffer(bytes(out), np.uint8)


def _without_native(mp):
    mp.setattr(chunk_codecs, "_native_zstd", lambda: None)


@pytest.fixture(params=["bslz4", "bszstd-native", "bszstd-python"])
def decoder(request, monkeypatch):
    """``decode(raw, nelems, dtype, where, out=None)`` and the chunk maker for one path."""
    zstd = request.param != "bslz4"
    if request.param == "bszstd-python":
        _without_native(monkeypatch)
    elif zstd:
        assert chunk_codecs._native_zstd() is not None, "bitshuffle's C library not found"

    def decode(raw, nelems, dtype, where, out=None):
        return chunk_codecs.decode_bitshuffle(raw, nelems, dtype, zstd, where, out)

    return decode, lambda items, block: chunk(items, block, zstd)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 5000),
    dtype=st.sampled_from(["u1", "<u2", "<u4", "<f4"]),
    block_items=st.sampled_from([8, 64, 1024, 4096]),
    zstd=st.booleans(),
    into=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_decode_equals_bitshuffle(n, dtype, block_items, zstd, into, seed):
    rng = np.random.default_rng(seed)
    items = (rng.poisson(0.5, n) * rng.integers(1, 200, n)).astype(dtype)
    raw = chunk(items, block_items, zstd)
    for native in (True, False) if zstd else (True,):
        with pytest.MonkeyPatch.context() as mp:
            if not native:
                _without_native(mp)
            out = np.full(n + 3, 7, dtype=dtype) if into else None
            got = chunk_codecs.decode_bitshuffle(raw, n, np.dtype(dtype), zstd, "test", out)
        np.testing.assert_array_equal(got, items)
        if into:
            assert n == 0 or np.shares_memory(got, out)
            np.testing.assert_array_equal(out[n:], 7)  # nothing past the chunk is written


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(0, 3000),
    dtype=st.sampled_from(["u1", "<u2", "<u4"]),
    block_bytes=st.sampled_from([1, 7, 64, 1000, 1 << 30]),
    noise=st.booleans(),
    into=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_lz4_chunks_equal_the_lz4_library(n, dtype, block_bytes, noise, into, seed):
    rng = np.random.default_rng(seed)
    items = (rng.integers(0, 255, n) if noise else rng.poisson(0.5, n)).astype(dtype)
    raw = lz4_chunk(items, block_bytes)
    out = np.full(n + 3, 7, dtype=dtype) if into else None
    got = chunk_codecs.decode_lz4(raw, n, np.dtype(dtype), "test", out)
    np.testing.assert_array_equal(got, items)
    if into:
        np.testing.assert_array_equal(out[n:], 7)


@pytest.mark.parametrize("cut", [13, 20, -1, -100])
def test_truncated_chunk(decoder, cut):
    decode, make = decoder
    items = np.arange(3000, dtype="<u2") % 97
    raw = make(items, 512)
    with pytest.raises(DataSetError, match="chunk 3: the chunk does not decompress"):
        decode(raw[:cut], items.size, np.dtype("<u2"), "chunk 3")


def test_block_length_past_the_end(decoder):
    decode, make = decoder
    items = np.arange(3000, dtype="<u2") % 97
    raw = make(items, 512).copy()
    raw[12:16] = np.frombuffer((2**30).to_bytes(4, "big"), np.uint8)
    with pytest.raises(DataSetError, match="chunk 3: the chunk does not decompress"):
        decode(raw, items.size, np.dtype("<u2"), "chunk 3")


def test_out_must_fit(decoder):
    decode, make = decoder
    items = np.arange(100, dtype="<u2")
    raw = make(items, 64)
    with pytest.raises(ValueError, match="too small or not C-contiguous"):
        decode(raw, 100, np.dtype("<u2"), "x", np.empty(99, "<u2"))
    with pytest.raises(ValueError, match="too small or not C-contiguous"):
        decode(raw, 100, np.dtype("<u2"), "x", np.empty(400, "<u2")[::2])


#: LZ4 blocks for 16 decoded bytes that a decoder must refuse
HOSTILE = [
    pytest.param(
        lz4_sequences((b"\x01\x02", 3, 6), (bytes(8), None, 0)),
        "an LZ4 match points before the start of its block",
        id="offset-before-start",
    ),
    pytest.param(
        lz4_sequences((b"\x01\x02", 0, 6), (bytes(8), None, 0)),
        "an LZ4 match points before the start",
        id="offset-0",
    ),
    pytest.param(
        lz4_sequences((b"\x01", 1, 400), (b"", None, 0)),
        "an LZ4 sequence writes past the end of its block",
        id="match-past-end",
    ),
    pytest.param(
        lz4_sequences((bytes(20), None, 0)),
        "an LZ4 sequence writes past the end",
        id="literals-past",
    ),
    pytest.param(
        lz4_sequences((bytes(5), 1, 4), (bytes(3), None, 0)),
        "an LZ4 block decompresses to fewer bytes",
        id="short",
    ),
    pytest.param(b"\xf0\xff\xff", "the chunk ends inside an LZ4 sequence", id="length-cut"),
    pytest.param(
        lz4_sequences((b"\x01", 1, 4))[:-1],
        "the chunk ends inside an LZ4 sequence",
        id="offset-cut",
    ),
]


@pytest.mark.parametrize("codec", ["bslz4", "lz4"])
@pytest.mark.parametrize("block, message", HOSTILE)
def test_hostile_lz4_blocks_name_the_chunk_and_the_fault(codec, block, message):
    """A chunk of 16 u8 items in one block (bitshuffle: 16 items, a multiple of 8, none
    left raw) whose LZ4 block lies: the kernels check every offset and length."""
    raw = np.frombuffer(header(16, 16) + len(block).to_bytes(4, "big") + block, np.uint8)
    out = np.full(20, 7, np.uint8)
    with pytest.raises(DataSetError, match=rf"^chunk 5: the chunk does not decompress: {message}"):
        if codec == "lz4":
            chunk_codecs.decode_lz4(raw, 16, np.dtype("u1"), "chunk 5", out)
        else:
            chunk_codecs.decode_bitshuffle(raw, 16, np.dtype("u1"), False, "chunk 5", out)
    np.testing.assert_array_equal(out[16:], 7)  # nothing written past the chunk's items


@pytest.mark.parametrize("codec", ["bslz4", "lz4"])
def test_corrupted_chunks_decode_or_raise_never_crash(codec):
    """Any byte changed anywhere after the header: an error naming the chunk, or items."""
    rng = np.random.default_rng(5)
    items = (rng.poisson(0.4, 3000) * 7).astype("<u2")
    good = chunk(items, 512) if codec == "bslz4" else lz4_chunk(items, 1024)
    seen = set()
    for _ in range(200):
        bad = good.copy()
        for at in rng.integers(12, bad.size, rng.integers(1, 4)):
            bad[at] = rng.integers(0, 256)
        try:
            if codec == "lz4":
                got = chunk_codecs.decode_lz4(bad, items.size, np.dtype("<u2"), "chunk 9")
            else:
                got = chunk_codecs.decode_bitshuffle(
                    bad, items.size, np.dtype("<u2"), False, "chunk 9"
                )
        except DataSetError as e:
            assert str(e).startswith("chunk 9: the chunk does not decompress")
            seen.add("error")
        else:
            assert got.shape == items.shape
            seen.add("decoded")
    assert "error" in seen


def test_bitshuffle_lz4_releases_the_gil():
    """Threads of the threaded scheduler decode chunks in parallel."""
    for kernel in (chunk_codecs._bitshuffle_lz4_chunk, chunk_codecs._lz4_chunk):
        assert kernel.targetoptions.get("nogil") is True
