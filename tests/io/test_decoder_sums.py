"""Sums from the decoder (`Decoder.add_sums`, ``SUMS_FROM_DECODER``): SumUDF alone on
big-endian uint16 frames adds them up as the decoder swaps them, never into a tile -- equal
to numpy with headers between frames, several files, ROIs, missing frames and any tiling;
other dtypes and runs read tiles. (K2 IS's 12-bit sums: tests/formats/test_k2is.py.)"""

from __future__ import annotations

import dask
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.io import Decoder, File, FileDataSet, FileSet
from ltdask.io import decode as decode_module
from ltdask.io.tiling import TilingScheme
from ltdask.udf import SumSigUDF, SumUDF


def scan(folder, frames, dtype, header=0, splits=()):
    """`frames` in files cut at `splits` (frame indices), `header` bytes before each frame."""
    files, bounds = [], [0, *splits, len(frames)]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        path = folder / f"part{k}.bin"
        with open(path, "wb") as f:
            for frame in frames[a:b]:
                f.write(b"\x5a" * header + frame.astype(dtype).tobytes())
        files.append(File(str(path), a, b - a))
    return FileSet(files, frames.shape[1:], dtype, header)


def _refuse(*args):
    raise AssertionError("a tile was decoded")


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 23),
    sig=st.sampled_from([(3, 5), (8, 8), (1, 7), (17, 4)]),
    header=st.sampled_from([0, 2, 6]),
    split=st.integers(0, 23),
    sync=st.integers(-3, 3),
    fill=st.floats(0.0, 1.0),
    tile_bytes=st.sampled_from([40, 400, 1 << 20]),
    seed=st.integers(0, 99),
)
def test_big_endian_sums_equal_numpy(
    tmp_path_factory, n, sig, header, split, sync, fill, tile_bytes, seed
):
    folder = tmp_path_factory.mktemp("be")
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 65536, (n, *sig)).astype(np.uint16)
    fileset = scan(folder, frames, ">u2", header, [s for s in (split,) if 0 < s < n])
    sync = max(-(n - 1), min(sync, n - 1))  # (within the files, as datasets require)
    nav = (max(1, n - sync),)
    roi = rng.random(nav) < fill
    config = {"ltdask.tile-bytes": tile_bytes, "ltdask.partition-bytes": 2000}
    with dask.config.set({**config, "ltdask.min-partitions": 1}):
        ds = FileDataSet(fileset, Decoder(">u2"), nav, sync_offset=sync)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(decode_module, "decode_swapped", _refuse)
            got = SumUDF(dtype="float64").compute(ds, roi=roi)["intensity"].values
    stream = np.arange(nav[0]) + sync
    picked = roi & (stream >= 0) & (stream < n)
    want = frames[stream[picked]].sum(0, dtype=np.float64)
    np.testing.assert_array_equal(got, want)


def test_only_for_big_endian_uint16_and_sumudf_alone(tmp_path, monkeypatch):
    frames = np.random.default_rng(1).integers(0, 65536, (6, 4, 5)).astype(np.uint16)
    whole = TilingScheme.make_for_shape((3, 4, 5), (4, 5))
    assert Decoder(">u2").can_sum(whole)
    for other in ("<u2", ">i2", ">u4", ">f4", "u1"):
        assert not Decoder(other).can_sum(whole)
    ds = FileDataSet(scan(tmp_path, frames, ">u2"), Decoder(">u2"), (2, 3))
    calls = []
    real = Decoder.add_sums
    monkeypatch.setattr(Decoder, "add_sums", lambda *a: calls.append(1) or real(*a))
    both = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    assert not calls  # two UDFs: tiles, decoded once for both
    alone = SumUDF().compute(ds)
    assert calls
    np.testing.assert_array_equal(alone["intensity"].values, both[0]["intensity"].values)
    np.testing.assert_array_equal(alone["intensity"].values, frames.sum(0))
