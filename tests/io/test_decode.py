"""Decoder: read ranges of either byte order decoded like numpy's frombuffer(...).astype(...)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.rawfiles import make_frames
from hypothesis import given
from hypothesis import strategies as st

from ltdask.io import Decoder

STORED = [
    pytest.param("u1", id="u8"),
    pytest.param("i1", id="i8"),
    pytest.param("?", id="bool"),
    pytest.param("<u2", id="u16-le"),
    pytest.param(">u2", id="u16-be"),
    pytest.param("<i2", id="i16-le"),
    pytest.param(">i2", id="i16-be"),
    pytest.param("<u4", id="u32-le"),
    pytest.param(">u4", id="u32-be"),
    pytest.param("<i8", id="i64-le"),
    pytest.param(">i8", id="i64-be"),
    pytest.param("<f4", id="f32-le"),
    pytest.param(">f4", id="f32-be"),
    pytest.param("<f8", id="f64-le"),
    pytest.param(">f8", id="f64-be"),
    pytest.param("<c8", id="c64-le"),
    pytest.param(">c8", id="c64-be"),
    pytest.param("<c16", id="c128-le"),
    pytest.param(">c16", id="c128-be"),
]


def targets(stored):
    """The native dtype and the usual conversion (each pair is one numba specialisation)."""
    dt = np.dtype(stored)
    return [dt.newbyteorder("=").str, "complex128" if dt.kind == "c" else "float32"]


#: further conversions, a few, as each compiles its own kernel
CONVERSIONS = [
    pytest.param(">u2", "float64", id="u16-be-as-f64"),
    pytest.param(">i2", "int64", id="i16-be-as-i64"),
    pytest.param("<f4", "float64", id="f32-le-as-f64"),
    pytest.param(">f8", "float32", id="f64-be-as-f32"),
    pytest.param("<f4", "int32", id="f32-le-as-i32"),
    pytest.param(">c8", "complex64", id="c64-be-as-c64"),
    pytest.param("<c16", "complex64", id="c128-le-as-c64"),
]


def src_and_ranges(stored, n_px, rng, pieces=3, prefix=5):
    """File bytes holding `n_px` pixels after `prefix` junk bytes, and ranges that read them
    in `pieces` runs, out of order, with a padding row."""
    values = make_frames(rng, 1, (n_px,), stored)[0]
    raw = values.tobytes()
    src = np.frombuffer(b"\x77" * prefix + raw, dtype=np.uint8)
    item = np.dtype(stored).itemsize
    cuts = np.linspace(0, n_px, pieces + 1).astype(int)
    rows = [
        [0, prefix + a * item, prefix + b * item, a]
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    rows = rows[::-1] + [[0, 0, 0, 0]]
    return src, np.array(rows, dtype=np.int64), raw


@pytest.mark.parametrize("stored", STORED)
def test_decoder_matches_numpy(stored):
    rng = np.random.default_rng(0)
    decoder = Decoder(stored)
    assert decoder.is_plain == (np.dtype(stored).isnative or np.dtype(stored).itemsize == 1)
    src, ranges, raw = src_and_ranges(stored, 37, rng)
    for target in targets(stored):
        out = np.full(37, 99, dtype=target)
        decoder.decode([src], ranges, out)
        expected = np.frombuffer(raw, dtype=stored).astype(target)
        np.testing.assert_array_equal(out, expected, err_msg=f"{stored} -> {target}")


@pytest.mark.parametrize("stored, target", CONVERSIONS)
def test_decoder_conversions(stored, target):
    src, ranges, raw = src_and_ranges(stored, 23, np.random.default_rng(2))
    out = np.empty(23, dtype=target)
    Decoder(stored).decode([src], ranges, out)
    np.testing.assert_array_equal(out, np.frombuffer(raw, dtype=stored).astype(target))


@pytest.mark.parametrize("stored", ["<u2", ">f4", ">c8"])
def test_decoder_several_files(stored):
    """Rows of several files decode from their own buffers; untouched pixels stay as they were."""
    rng = np.random.default_rng(1)
    a = make_frames(rng, 1, (10,), stored)[0]
    b = make_frames(rng, 1, (6,), stored)[0]
    item = np.dtype(stored).itemsize
    buffers = [np.frombuffer(a.tobytes(), np.uint8), np.frombuffer(b"xyz" + b.tobytes(), np.uint8)]
    ranges = np.array(
        [
            [1, 3, 3 + 6 * item, 0],  # all of file 1 to pixels 0..5
            [0, 2 * item, 5 * item, 8],  # pixels 2..4 of file 0 to pixels 8..10
            [1, 3, 3, 0],  # padding
        ],
        dtype=np.int64,
    )
    target = "complex128" if np.dtype(stored).kind == "c" else "float64"
    out = np.full(12, -1, dtype=target)
    Decoder(stored).decode(buffers, ranges, out)
    expected = np.full(12, -1, dtype=target)
    expected[:6] = b.astype(target)
    expected[8:11] = a[2:5].astype(target)
    np.testing.assert_array_equal(out, expected)


def test_decoder_no_ranges():
    out = np.full(4, 7, dtype="f4")
    Decoder("<u2").decode([], np.zeros((0, 4), dtype=np.int64), out)
    Decoder("<u2").decode([], np.zeros((3, 4), dtype=np.int64), out)
    np.testing.assert_array_equal(out, 7)


def test_decoder_token():
    from dask.base import tokenize

    assert tokenize(Decoder("<u2")) == tokenize(Decoder("<u2"))
    assert tokenize(Decoder("<u2")) != tokenize(Decoder(">u2"))


@given(
    stored=st.sampled_from([p.values[0] for p in STORED]),
    n_px=st.integers(1, 200),
    pieces=st.integers(1, 6),
    prefix=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_decoder_property(stored, n_px, pieces, prefix, seed):
    src, ranges, raw = src_and_ranges(
        stored, n_px, np.random.default_rng(seed), min(pieces, n_px), prefix
    )
    for target in targets(stored):
        out = np.empty(n_px, dtype=target)
        Decoder(stored).decode([src], ranges, out)
        np.testing.assert_array_equal(out, np.frombuffer(raw, dtype=stored).astype(target))
