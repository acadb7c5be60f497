"""Bitshuffle chunks decoded without HDF5 (`ltdask.io.formats.dectris.codecs`): equal to the
`bitshuffle` package's own decoder on chunks it compressed, into a caller's buffer or not,
through the C library or the Python fallback; damaged chunks give errors, never a crash."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltdask import DataSetError
from ltdask.io.formats.dectris import codecs as chunk_codecs

bitshuffle = pytest.importorskip("bitshuffle")  # ltdask[hdf5], installed by ltdask[test]


def chunk(items: np.ndarray, block_items: int, zstd: bool = False) -> np.ndarray:
    """`items` as an HDF5 bitshuffle chunk: the filter's 12-byte header, then the blocks."""
    compress = bitshuffle.compress_zstd if zstd else bitshuffle.compress_lz4
    body = np.asarray(compress(items, block_items)).view(np.uint8)
    head = items.nbytes.to_bytes(8, "big") + (block_items * items.itemsize).to_bytes(4, "big")
    return np.concatenate([np.frombuffer(head, np.uint8), body])


@pytest.fixture(params=["native", "python"])
def decoder(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(chunk_codecs, "_native", lambda zstd: None)
    else:
        assert chunk_codecs._native(False) is not None, "bitshuffle's C library not found"
    return chunk_codecs.decode_bitshuffle


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
    for native in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            if not native:
                mp.setattr(chunk_codecs, "_native", lambda zstd: None)
            out = np.full(n + 3, 7, dtype=dtype) if into else None
            got = chunk_codecs.decode_bitshuffle(raw, n, np.dtype(dtype), zstd, "test", out)
        np.testing.assert_array_equal(got, items)
        if into:
            assert n == 0 or np.shares_memory(got, out)
            np.testing.assert_array_equal(out[n:], 7)  # nothing past the chunk is written


@pytest.mark.parametrize("cut", [13, 20, -1, -100])
def test_truncated_chunk(decoder, cut):
    items = np.arange(3000, dtype="<u2") % 97
    raw = chunk(items, 512)
    with pytest.raises(DataSetError, match="does not decompress"):
        decoder(raw[:cut], items.size, np.dtype("<u2"), False, "chunk 3")


def test_block_length_past_the_end(decoder):
    items = np.arange(3000, dtype="<u2") % 97
    raw = chunk(items, 512).copy()
    raw[12:16] = np.frombuffer((2**30).to_bytes(4, "big"), np.uint8)
    with pytest.raises(DataSetError, match="chunk 3: the chunk does not decompress"):
        decoder(raw, items.size, np.dtype("<u2"), False, "chunk 3")


def test_out_must_fit(decoder):
    items = np.arange(100, dtype="<u2")
    raw = chunk(items, 64)
    with pytest.raises(ValueError, match="too small or not C-contiguous"):
        decoder(raw, 100, np.dtype("<u2"), False, "x", np.empty(99, "<u2"))
    with pytest.raises(ValueError, match="too small or not C-contiguous"):
        decoder(raw, 100, np.dtype("<u2"), False, "x", np.empty(400, "<u2")[::2])
