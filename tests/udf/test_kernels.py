"""The numba kernels (the shared statistics ones and the shipped UDFs' own) against plain
numpy on the same data."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given
from hypothesis import strategies as st

from ltdask.kernels.statistics import (
    BLOCK,
    add_rows,
    chan_merge,
    moments,
    moments_frame_sums,
    sum_frames,
    sum_pixels,
)
from ltdask.udf.builtin._kernels import (
    MASK_BLOCK,
    dot_mask,
    dot_masks,
    dot_runs,
    flat_tile,
    interval_moments,
)
from ltdask.udf.builtin._kernels import row_intervals as _row_intervals
from ltdask.udf.builtin.apply_masks import _runs


def tiles(seed, n, px, dtype=np.float32, offset=0.0):
    return (offset + np.random.default_rng(seed).normal(0, 1, (n, px))).astype(dtype)


def embedded(tile, before, after, fill=np.nan):
    """`tile` as ``frames[:, p0:p1]`` of a wider C-contiguous array whose other pixels are
    `fill` (NaN: a kernel that reads outside its range shows it)."""
    n, px = tile.shape
    frames = np.full((n, before + px + after), fill, dtype=tile.dtype)
    frames[:, before : before + px] = tile
    return frames, before, before + px


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("margins", [(0, 0), (5, 0), (3, 11)])
def test_sum_pixels(dtype, margins):
    t = tiles(0, 7, 333, dtype)
    out = np.zeros(7)
    sum_pixels(*embedded(t, *margins), out)
    np.testing.assert_allclose(out, t.astype(np.float64).sum(axis=1), rtol=1e-6)


@given(n=st.integers(0, 11), px=st.integers(1, 300), before=st.integers(0, 7))
def test_sum_frames(n, px, before):
    t = tiles(8, n, px)
    acc = np.ones(px, np.float32)
    sum_frames(*embedded(t, before, 3), acc)
    np.testing.assert_allclose(acc, 1 + t.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)


def test_sum_frames_integers():
    t = np.arange(5 * 7, dtype=np.int64).reshape(5, 7) * 10**12
    acc = np.zeros(7, np.int64)
    sum_frames(t, 0, 7, acc)
    np.testing.assert_array_equal(acc, t.sum(axis=0))


@pytest.mark.parametrize("acc_dtype", [np.int64, np.float64, np.float32])
@pytest.mark.parametrize("out_dtype", [np.float32, np.float64, np.int64])
def test_add_rows_is_numpys_unsafe_add(acc_dtype, out_dtype):
    """Into a strided column slice of a result, as ``np.add(..., casting="unsafe")``."""
    rng = np.random.default_rng(4)
    acc = (rng.random(9 * 5) * 2**40).astype(acc_dtype)
    result = (rng.random((9, 13)) * 1000).astype(out_dtype)
    want = result.copy()
    view = want[:, 3:8]
    np.add(view, acc.reshape(view.shape), out=view, casting="unsafe")
    add_rows(result[:, 3:8], acc)
    np.testing.assert_array_equal(result, want)


def garbage_work() -> np.ndarray:
    """The `moments` kernel's scratch as a task hands it over: whatever the last tile left."""
    return np.full(2 * BLOCK, np.nan)


@given(
    depths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    px=st.one_of(st.integers(1, 300), st.sampled_from([BLOCK - 1, BLOCK + 1, 2 * BLOCK + 7])),
    offset=st.sampled_from([0.0, 1e6]),
    before=st.integers(0, 5),
)
def test_moments_match_numpy(depths, px, offset, before):
    data = tiles(1, sum(depths), px, np.float32, offset)
    count, mean, m2 = 0, np.zeros(px), np.zeros(px)
    shift = np.zeros(px)
    first = 0
    for d in depths:
        part = embedded(data[first : first + d], before, 2)
        count = moments(*part, count, mean, m2, shift, garbage_work())
        first += d
    ref = data.astype(np.float64)
    assert count == len(data)
    np.testing.assert_allclose(mean, ref.mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(m2, ref.var(axis=0) * len(data), rtol=1e-6, atol=1e-6)


@given(
    depths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    px=st.one_of(st.integers(1, 300), st.sampled_from([BLOCK - 1, BLOCK + 1, 2 * BLOCK + 7])),
    offset=st.sampled_from([0.0, 1e6]),
)
def test_moments_frame_sums(depths, px, offset):
    """The fused pass gives `moments`' statistics and each frame's sum."""
    data = tiles(9, sum(depths), px, np.float32, offset)
    state = [0, np.zeros(px), np.zeros(px), np.zeros(px)]
    fused = [0, np.zeros(px), np.zeros(px), np.zeros(px)]
    sums = np.zeros(len(data))
    work = garbage_work()  # (one scratch for every tile, as in a task)
    first = 0
    for d in depths:
        part = embedded(data[first : first + d], 3, 1)
        state[0] = moments(*part, *state, garbage_work())
        fused[0] = moments_frame_sums(*part, *fused, sums[first : first + d], True, work)
        first += d
    assert fused[0] == state[0] == len(data)
    for a, b in zip(fused[1:3], state[1:3], strict=True):
        # the same sums, in an order fastmath may choose differently
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(sums, data.astype(np.float64).sum(axis=1), rtol=1e-9)


def test_moments_empty_tile_changes_nothing():
    mean, m2 = np.ones(4), np.ones(4)
    empty = np.zeros((0, 4), np.float32)
    assert moments(empty, 0, 4, 3, mean, m2, np.zeros(4), garbage_work()) == 3
    np.testing.assert_array_equal(mean, 1)
    np.testing.assert_array_equal(m2, 1)


@pytest.mark.parametrize("rows", [(0, 9), (3, 7)])
@pytest.mark.parametrize("n", [1, 4, 7])
def test_interval_moments(rows, n):
    h, w = 9, 11
    yy, xx = np.mgrid[:h, :w]
    mask = ((yy - 4.2) ** 2 + (xx - 5.1) ** 2 < 16) & ((yy - 4.2) ** 2 + (xx - 5.1) ** 2 >= 4)
    starts, stops = _row_intervals(mask)
    frames = tiles(2, n, h * w).reshape(n, h, w)
    r0, r1 = rows
    # the rows r0:r1 as a flat range of the whole frames
    flat = frames.reshape(n, -1)
    out = np.zeros((n, 3))
    interval_moments(
        flat, r0 * w, r1 * w, w, r0, starts, stops, np.arange(w, dtype=np.float32), out
    )
    m = mask[r0:r1]
    f = frames[:, r0:r1].astype(np.float64) * m
    want = np.stack(
        [f.sum(axis=(1, 2)), (f * yy[r0:r1]).sum(axis=(1, 2)), (f * xx[r0:r1]).sum(axis=(1, 2))],
        axis=1,
    )
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_row_intervals():
    mask = np.array([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    starts, stops = _row_intervals(mask)
    rebuilt = np.zeros_like(mask)
    for r in range(mask.shape[0]):
        for a, b in zip(starts[r], stops[r], strict=True):
            rebuilt[r, a:b] = True
    np.testing.assert_array_equal(rebuilt, mask)


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("m", [1, 3, 4, 7])
@pytest.mark.parametrize("px", [257, MASK_BLOCK * 2 + 5])
def test_dot_masks(n, m, px):
    t = tiles(3, n, px)
    masks = tiles(4, m, px)
    out = np.zeros((n, m), np.float32)
    dot_masks(*embedded(t, 6, 1), masks, out)
    np.testing.assert_allclose(
        out, t.astype(np.float64) @ masks.T.astype(np.float64), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("n", [1, 4, 7])
def test_dot_mask(n):
    t = tiles(3, n, 301)
    mask = tiles(4, 1, 301)[0]
    out = np.ones(n, np.float32)
    dot_mask(*embedded(t, 2, 5), mask, out)
    want = 1 + t.astype(np.float64) @ mask.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_dot_masks_nan_stays_in_its_frame():
    t = tiles(5, 2, 16)
    t[0, 0] = np.nan
    out = np.zeros((2, 2), np.float32)
    dot_masks(t, 0, 16, np.ones((2, 16), np.float32), out)
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()


@pytest.mark.parametrize("density", [0.05, 0.5])
@pytest.mark.parametrize("n", [1, 4, 7])
def test_dot_runs(density, n):
    rng = np.random.default_rng(6)
    dense = (rng.random((5, 300)) < density) * rng.random((5, 300))
    dense[2] = 0  # an empty mask
    t = tiles(7, n, 300)
    out = np.zeros((n, 5))
    dot_runs(*embedded(t, 9, 4), *_runs(scipy.sparse.csr_matrix(dense))[:5], out)
    np.testing.assert_allclose(out, t.astype(np.float64) @ dense.T, rtol=1e-5, atol=1e-5)


def test_flat_tile_views_and_copies():
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2 * 3, 4, 5)
    flat = flat_tile(base)
    assert flat.shape == (6, 20) and np.shares_memory(flat, base)
    rows = base[:, 1:3]  # each frame's rows are contiguous, the frames are not
    copy = flat_tile(rows)
    assert copy.flags.c_contiguous and not np.shares_memory(copy, base)
    np.testing.assert_array_equal(copy, rows.reshape(6, -1))


@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6), offset=st.sampled_from([0, 1e6]))
def test_chan_merge(sizes, offset):
    """Parts' sums and centred sums of squares merged: the whole's sum, mean and m2."""
    data = tiles(3, sum(sizes), 17, np.float64, offset)
    total_sum, m2, mean = np.zeros(17), np.zeros(17), np.zeros(17)
    count, start = 0, 0
    for n in sizes:
        part = data[start : start + n]
        start += n
        part_m2 = ((part - part.mean(axis=0)) ** 2).sum(axis=0)
        count = chan_merge(count, n, part.sum(axis=0), part_m2, total_sum, m2, mean)
    assert count == len(data)
    np.testing.assert_allclose(total_sum, data.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(m2, data.var(axis=0) * len(data), rtol=1e-6)
