"""The exact moments of 8/16-bit integer tiles (`ltdask.udf.shared.IntegerMoments`, the
kernels of :mod:`ltdask.kernels.integer_moments`) against numpy, and through the UDFs
that use them (StdDev alone, and Sum + SumSig + StdDev sharing one pass)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask.runtime import scratch
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF, shared
from ltdask.udf.shared import IntegerMoments

DTYPES = ["uint8", "int8", "uint16", "int16"]


def frames_of(dtype, n, px, seed, spread=None):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    if spread is None:
        lo, hi = info.min, info.max
    else:  # values near the top of the range: a large mean, a small variance
        lo, hi = info.max - spread, info.max
    return rng.integers(lo, hi, (n, px), dtype=dtype, endpoint=True)


@given(
    dtype=st.sampled_from(DTYPES),
    depths=st.lists(st.integers(0, 21), min_size=1, max_size=5),
    px=st.integers(1, 40),
    cols=st.tuples(st.integers(0, 5), st.integers(0, 5)),
    max_frames=st.sampled_from([3, 8, 32768]),
    spread=st.sampled_from([None, 1, 3]),
    seed=st.integers(0, 2**16),
)
def test_integer_moments_match_numpy(dtype, depths, px, cols, max_frames, spread, seed):
    """Tiles of any depth (the kernel's eight-frame passes and their tails), columns
    ``p0:p1`` of wider frames, flushes forced every few frames (`MAX_FRAMES`): sums and
    frame sums exact, mean and variance as numpy's in float64."""
    before, after = cols
    n = sum(depths)
    data = frames_of(dtype, n, before + px + after, seed, spread)
    old = shared.MAX_FRAMES
    shared.MAX_FRAMES = max_frames
    try:
        with scratch.task():
            state = IntegerMoments(px)
            sums = np.zeros(n, np.int64)
            first = 0
            for d in depths:
                tile = data[first : first + d]
                state.add(tile, before, before + px, sums[first : first + d])
                first += d
            count, mean, m2, _ = [np.copy(v) for v in state.finished()]
            pixel_sums = state.pixel_sums.copy()
    finally:
        shared.MAX_FRAMES = old
    part = data[:, before : before + px].astype(np.int64)
    assert count == n
    np.testing.assert_array_equal(pixel_sums, part.sum(axis=0))
    np.testing.assert_array_equal(sums, part.sum(axis=1))
    if n:
        exact = part.astype(np.float64)
        # (rounding of float64 merges: relative to the largest value, not to the result)
        top = float(np.abs(exact).max())
        np.testing.assert_allclose(mean, exact.mean(axis=0), rtol=1e-13, atol=1e-13 * top)
        # the exact centred sum of squares: (n * sum x^2 - (sum x)^2) / n in integers
        num = n * (part * part).sum(axis=0) - part.sum(axis=0) ** 2
        np.testing.assert_allclose(m2, num / n, rtol=1e-12, atol=1e-13 * n * top**2)


@pytest.mark.parametrize("dtype", ["uint16", "int16"])
def test_the_extremes_do_not_overflow(dtype):
    """A whole `MAX_FRAMES` step of the largest (and most negative) values: ``n * s2`` is
    the largest product the kernel forms."""
    info = np.iinfo(dtype)
    n = shared.MAX_FRAMES + 5
    for value in (info.max, info.min):
        data = np.full((n, 3), value, dtype)
        data[::7, 1] = 0
        with scratch.task():
            state = IntegerMoments(3)
            state.add(data, 0, 3)
            count, mean, m2, _ = [np.copy(v) for v in state.finished()]
            pixel_sums = state.pixel_sums.copy()
        part = data.astype(np.int64)
        np.testing.assert_array_equal(pixel_sums, part.sum(axis=0))
        np.testing.assert_allclose(mean, part.mean(axis=0), rtol=1e-13)
        np.testing.assert_allclose(m2, part.var(axis=0) * n, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_trio_on_integer_tiles_is_exact(tmp_path, monkeypatch, dtype):
    """Sum, SumSig and StdDev in one shared pass over a raw file of `dtype`, with
    flushes every 4 frames: the sums equal numpy's integer sums exactly, the variance
    numpy's; StdDev alone gives the same statistics."""
    monkeypatch.setattr(shared, "MAX_FRAMES", 4)
    data = frames_of(dtype, 7 * 5, 9 * 11, 3).reshape(7, 5, 9, 11)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(7, 5), sig_shape=(9, 11), dtype=dtype)
    total, per_frame, stats = ltdask.compute(ds, [SumUDF(), SumSigUDF(), StdDevUDF()])
    exact = data.astype(np.int64)
    np.testing.assert_array_equal(total["intensity"].values, exact.sum(axis=(0, 1)))
    np.testing.assert_array_equal(per_frame["intensity"].values, exact.sum(axis=(2, 3)))
    as_float = data.astype(np.float64)
    np.testing.assert_allclose(stats["var"].values, as_float.var(axis=(0, 1)), rtol=1e-12)
    np.testing.assert_allclose(stats["mean"].values, as_float.mean(axis=(0, 1)), rtol=1e-13)
    alone = StdDevUDF().compute(ds)
    for name in ("var", "mean", "sum", "num_frames"):
        np.testing.assert_allclose(alone[name].values, stats[name].values, rtol=1e-13)
