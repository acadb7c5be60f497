"""ltdask.Slice: boxes, subslices, intersections, ROI adjustment, shifting, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from dask.base import tokenize
from hypothesis import given
from hypothesis import strategies as st

from ltdask import Shape, Slice


@st.composite
def slices(draw, ndim=None, sig_dims=None, max_origin=6, max_extent=7):
    ndim = draw(st.integers(1, 4)) if ndim is None else ndim
    sig_dims = draw(st.integers(0, ndim)) if sig_dims is None else sig_dims
    origin = draw(st.lists(st.integers(0, max_origin), min_size=ndim, max_size=ndim))
    shape = draw(st.lists(st.integers(0, max_extent), min_size=ndim, max_size=ndim))
    return Slice(origin, Shape(shape, sig_dims=sig_dims))


def mask_of(sl: Slice, space) -> np.ndarray:
    m = np.zeros(space, dtype=int)
    m[sl.get()] += 1
    return m


SPACE = (14, 14, 14, 14)


@given(slices())
def test_get(sl):
    nd = sl.shape.nav_dims
    full = sl.get()
    assert full == tuple(slice(o, o + n) for o, n in zip(sl.origin, sl.shape, strict=True))
    assert sl.get(nav_only=True) == full[:nd]
    assert sl.get(sig_only=True) == full[nd:]
    arr = np.arange(np.prod(SPACE[: len(sl.origin)])).reshape(SPACE[: len(sl.origin)])
    assert sl.get(arr).shape == tuple(sl.shape)
    # with sig_only, the array is a frame (or a stack of sig-shaped arrays)
    frame = arr[(0,) * nd]
    np.testing.assert_array_equal(sl.get(frame, sig_only=True), frame[full[nd:]])
    assert sl.stop == tuple(o + n for o, n in zip(sl.origin, sl.shape, strict=True))
    assert sl.is_null() == (0 in tuple(sl.shape))


def test_get_exclusive():
    with pytest.raises(ValueError, match="exclusive"):
        Slice((0,), Shape((1,), sig_dims=1)).get(nav_only=True, sig_only=True)


@given(data=st.data())
def test_subslices_cover_exactly_once(data):
    sl = data.draw(slices())
    nd = len(sl.origin)
    sub = tuple(data.draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
    space = SPACE[:nd]
    count = np.zeros(space, dtype=int)
    parts = list(sl.subslices(sub))
    for p in parts:
        assert p.shape.sig_dims == sl.shape.sig_dims
        assert all(n <= s for n, s in zip(p.shape, sub, strict=True))
        assert p.intersection_with(sl) == p
        count[p.get()] += 1
    np.testing.assert_array_equal(count, mask_of(sl, space))
    # C order: origins increase lexicographically
    assert [p.origin for p in parts] == sorted(p.origin for p in parts)
    if not sl.is_null():
        assert all(not p.is_null() for p in parts)


@pytest.mark.parametrize("shape", [(0, 2), (2,), (2, 2, 2), (-1, 2)])
def test_subslices_bad_shape(shape):
    sl = Slice((0, 0), Shape((4, 4), sig_dims=1))
    with pytest.raises(ValueError, match="bad subslice shape"):
        list(sl.subslices(shape))


@given(data=st.data())
def test_intersection(data):
    nd = data.draw(st.integers(1, 4))
    sig_dims = data.draw(st.integers(0, nd))
    a = data.draw(slices(ndim=nd, sig_dims=sig_dims))
    b = data.draw(slices(ndim=nd, sig_dims=sig_dims))
    space = SPACE[:nd]
    both = a.intersection_with(b)
    assert both.shape.sig_dims == sig_dims
    expected = mask_of(a, space) * mask_of(b, space)
    if both.is_null():
        assert expected.sum() == 0
    else:
        np.testing.assert_array_equal(mask_of(both, space), expected)
    assert both.shape.size == expected.sum()
    assert b.intersection_with(a).shape.size == both.shape.size
    assert a.intersection_with(a) == a


def test_intersection_dimensionality():
    with pytest.raises(ValueError, match="different dimensionality"):
        Slice((0,), Shape((1,), sig_dims=0)).intersection_with(Slice((0, 0), Shape((1, 1), 1)))


@given(data=st.data())
def test_shift(data):
    nd = data.draw(st.integers(1, 4))
    sl = data.draw(slices(ndim=nd))
    ref = data.draw(slices(ndim=nd))
    shifted = sl.shift(ref)
    assert shifted.shape == sl.shape
    assert shifted.origin == tuple(a - b for a, b in zip(sl.origin, ref.origin, strict=True))
    # shifting relative to the full array's origin is the identity
    assert sl.shift(Slice.full(sl.shape)) == sl


def test_shift_into_partition():
    partition = Slice((10, 0, 0), Shape((5, 8, 8), sig_dims=2))
    tile = Slice((12, 0, 4), Shape((2, 8, 4), sig_dims=2))
    assert tile.shift(partition) == Slice((2, 0, 4), Shape((2, 8, 4), sig_dims=2))


@given(
    roi=st.lists(st.booleans(), min_size=1, max_size=40),
    data=st.data(),
)
def test_adjust_for_roi(roi, data):
    roi = np.array(roi)
    start = data.draw(st.integers(0, roi.size))
    n = data.draw(st.integers(0, roi.size - start))
    sl = Slice((start, 3, 1), Shape((n, 4, 5), sig_dims=2))
    adjusted = sl.adjust_for_roi(roi)
    # the positions of the ROI-compressed array that this slice holds
    compressed = np.flatnonzero(roi)
    inside = (compressed >= start) & (compressed < start + n)
    assert adjusted.shape[0] == inside.sum()
    if inside.any():
        assert adjusted.origin[0] == np.flatnonzero(inside)[0]
    else:
        assert adjusted.origin[0] == np.count_nonzero(roi[:start])
    assert adjusted.origin[1:] == sl.origin[1:]
    assert tuple(adjusted.shape.sig) == (4, 5) and adjusted.shape.sig_dims == 2
    assert sl.adjust_for_roi(None) is sl


def test_adjust_for_roi_needs_flat_nav():
    sl = Slice((0, 0, 0), Shape((2, 2, 4), sig_dims=1))
    with pytest.raises(ValueError, match="one \\(flat\\) nav dim"):
        sl.adjust_for_roi(np.ones(4, dtype=bool))


def test_adjust_for_roi_partitions_tile_the_compressed_axis():
    roi = np.zeros(20, dtype=bool)
    roi[[1, 2, 5, 9, 10, 11, 19]] = True
    parts = [Slice((a, 0), Shape((b - a, 3), sig_dims=1)) for a, b in [(0, 6), (6, 12), (12, 20)]]
    adjusted = [p.adjust_for_roi(roi) for p in parts]
    assert [(a.origin[0], a.shape[0]) for a in adjusted] == [(0, 3), (3, 3), (6, 1)]


@given(slices())
def test_pickle_hash_token(sl):
    back = pickle.loads(pickle.dumps(sl))
    assert back == sl and hash(back) == hash(sl)
    assert back.shape.sig_dims == sl.shape.sig_dims
    assert tokenize(back) == tokenize(sl)
    moved = Slice(tuple(o + 1 for o in sl.origin), sl.shape)
    assert moved != sl and tokenize(moved) != tokenize(sl)


def test_sig_part_and_full():
    sl = Slice((3, 1, 2), Shape((2, 4, 5), sig_dims=2))
    assert sl.sig_part() == Slice((1, 2), Shape((4, 5), sig_dims=2))
    full = Slice.full(Shape((2, 4, 5), sig_dims=2))
    assert full.origin == (0, 0, 0) and full.stop == (2, 4, 5)
    assert sl != (3, 1, 2)


def test_origin_length_must_match():
    with pytest.raises(ValueError, match="differ in length"):
        Slice((0, 0), Shape((1, 2, 3), sig_dims=1))


@given(slices())
def test_nav_and_sig_parts(sl):
    """``Slice.nav`` / ``Slice.sig`` (LiberTEM's names) cut the same box as the whole."""
    nav, sig = sl.nav, sl.sig
    assert nav.shape.sig_dims == 0 and sig.shape.sig_dims == sl.shape.sig_dims
    assert nav.origin + sig.origin == sl.origin
    assert tuple(nav.shape) + tuple(sig.shape) == tuple(sl.shape)
    whole = mask_of(sl, SPACE[: len(sl.shape)])
    nd = len(nav.shape)
    parts = np.multiply.outer(mask_of(nav, SPACE[:nd]), mask_of(sig, SPACE[nd : len(sl.shape)]))
    np.testing.assert_array_equal(whole, parts)
