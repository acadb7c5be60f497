"""The shipped UDFs' numba kernels against plain numpy on the same data."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given
from hypothesis import strategies as st

from ltdask.udf.builtin._kernels import (
    c_frames,
    dot_masks,
    dot_runs,
    interval_moments,
    moments,
    sum_pixels,
)
from ltdask.udf.builtin.com import _row_intervals
from ltdask.udf.builtin.masks import _runs


def tiles(seed, n, px, dtype=np.float32, offset=0.0):
    return (offset + np.random.default_rng(seed).normal(0, 1, (n, px))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_pixels(dtype):
    t = tiles(0, 7, 333, dtype)
    out = np.zeros(7)
    sum_pixels(t, out)
    np.testing.assert_allclose(out, t.astype(np.float64).sum(axis=1), rtol=1e-6)


@given(
    depths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    px=st.integers(1, 2500),
    offset=st.sampled_from([0.0, 1e6]),
)
def test_moments_match_numpy(depths, px, offset):
    data = tiles(1, sum(depths), px, np.float32, offset)
    count, mean, m2 = 0, np.zeros(px), np.zeros(px)
    shift = np.zeros(px)
    first = 0
    for d in depths:
        count = moments(data[first : first + d], count, mean, m2, shift)
        first += d
    ref = data.astype(np.float64)
    assert count == len(data)
    np.testing.assert_allclose(mean, ref.mean(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(m2, ref.var(axis=0) * len(data), rtol=1e-6, atol=1e-6)


def test_moments_empty_tile_changes_nothing():
    mean, m2 = np.ones(4), np.ones(4)
    assert moments(np.zeros((0, 4), np.float32), 3, mean, m2, np.zeros(4)) == 3
    np.testing.assert_array_equal(mean, 1)
    np.testing.assert_array_equal(m2, 1)


@pytest.mark.parametrize("rows", [(0, 9), (3, 7)])
def test_interval_moments(rows):
    h, w = 9, 11
    yy, xx = np.mgrid[:h, :w]
    mask = ((yy - 4.2) ** 2 + (xx - 5.1) ** 2 < 16) & ((yy - 4.2) ** 2 + (xx - 5.1) ** 2 >= 4)
    starts, stops = _row_intervals(mask)
    frames = tiles(2, 5, h * w).reshape(5, h, w)
    r0, r1 = rows
    part = np.ascontiguousarray(frames[:, r0:r1]).reshape(5, -1)
    out = np.zeros((5, 3))
    interval_moments(part, w, r0, starts, stops, np.arange(w, dtype=np.float32), out)
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
def test_dot_masks(n, m):
    t = tiles(3, n, 257)
    masks = tiles(4, m, 257)
    out = np.zeros((n, m), np.float32)
    dot_masks(t, masks, out)
    np.testing.assert_allclose(
        out, t.astype(np.float64) @ masks.T.astype(np.float64), rtol=1e-4, atol=1e-4
    )


def test_dot_masks_nan_stays_in_its_frame():
    t = tiles(5, 2, 16)
    t[0, 0] = np.nan
    out = np.zeros((2, 2), np.float32)
    dot_masks(t, np.ones((2, 16), np.float32), out)
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()


@pytest.mark.parametrize("density", [0.05, 0.5])
def test_dot_runs(density):
    rng = np.random.default_rng(6)
    dense = (rng.random((5, 300)) < density) * rng.random((5, 300))
    dense[2] = 0  # an empty mask
    t = tiles(7, 4, 300)
    out = np.zeros((4, 5))
    dot_runs(t, *_runs(scipy.sparse.csr_matrix(dense))[:5], out)
    np.testing.assert_allclose(out, t.astype(np.float64) @ dense.T, rtol=1e-5, atol=1e-5)


def test_c_frames_views_and_copies():
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2 * 3, 4, 5)
    contiguous = list(c_frames(base))
    assert len(contiguous) == 1 and np.shares_memory(contiguous[0][1], base)
    rows = base[:, 1:3]  # each frame's rows are contiguous, the frames are not
    pieces = list(c_frames(rows))
    assert [i for i, _ in pieces] == list(range(6))
    np.testing.assert_array_equal(np.concatenate([p for _, p in pieces]), rows.reshape(6, -1))
    cols = base[:, :, 1:3]
    ((_, copy),) = c_frames(cols)
    np.testing.assert_array_equal(copy, cols.reshape(6, -1))
