"""`ltdask.udf.roi`: what ``roi=`` accepts, and the positions a `Selection` maps between
ROI-compressed and flat nav, against numpy on the same masks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import UDFError
from ltdask.udf.roi import Selection, normalize_roi

NAV = (3, 4)


@pytest.fixture(scope="module")
def ds():
    return ltdask.from_array(np.zeros((*NAV, 2, 2), dtype=np.float32))


def _mask(*positions):
    mask = np.zeros(NAV, bool)
    for p in positions:
        mask[p] = True
    return mask.reshape(-1)


@pytest.mark.parametrize(
    ("roi", "expected"),
    [
        pytest.param(None, None, id="none"),
        pytest.param(_mask((1, 2)).reshape(NAV), _mask((1, 2)), id="nav-shaped"),
        pytest.param(_mask((0, 3)), _mask((0, 3)), id="flat"),
        pytest.param((2, 1), _mask((2, 1)), id="one-position"),
        pytest.param([((0, 0), True), ((2, 3), True)], _mask((0, 0), (2, 3)), id="pairs-true"),
        pytest.param([((0, 0), False)], ~_mask((0, 0)), id="pairs-false"),
    ],
)
def test_accepted_rois(ds, roi, expected):
    got = normalize_roi(roi, ds)
    if expected is None:
        assert got is None
    else:
        assert got.dtype == bool and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)


def test_a_numeric_roi_is_cast_with_a_warning(ds):
    with pytest.warns(UserWarning, match="ROI dtype is int64, expected bool"):
        got = normalize_roi(_mask((1, 1)).astype(np.int64), ds)
    np.testing.assert_array_equal(got, _mask((1, 1)))


@pytest.mark.parametrize(
    ("roi", "message"),
    [
        pytest.param(np.ones((4, 3), bool), r"roi of shape \(4, 3\) does not fit", id="shape"),
        pytest.param(np.array(["a"] * 12), "must be a boolean", id="dtype"),
        pytest.param([((0, 0), True), ((1, 1), False)], "all pairs need the same", id="mixed"),
        pytest.param([((3, 0), True)], r"position \(3, 0\) is not in", id="outside"),
        pytest.param([("a", True)], r"\(coordinates, value\) pairs", id="not-pairs"),
    ],
)
def test_rejected_rois(ds, roi, message):
    with pytest.raises(UDFError, match=message):
        normalize_roi(roi, ds)


@given(
    flat=st.one_of(st.none(), st.lists(st.booleans(), min_size=12, max_size=12)),
    bounds=st.tuples(st.integers(0, 12), st.integers(0, 12)).map(sorted),
)
def test_selection_against_numpy(flat, bounds):
    roi = None if flat is None else np.array(flat)
    sel = Selection(roi, NAV)
    mask = np.ones(12, bool) if roi is None else roi
    start, stop = bounds
    expected = np.flatnonzero(mask[start:stop]) + start
    np.testing.assert_array_equal(sel.positions(start, stop), expected)
    assert sel.count(start, stop) == expected.size
    assert sel.count_before(start) == int(mask[:start].sum())
    values = np.arange(12) * 10
    np.testing.assert_array_equal(sel.compress(values), values[mask])
    compressed = np.arange(int(mask.sum())) % 2 == 0
    full = sel.scatter(compressed)
    np.testing.assert_array_equal(full[mask], compressed)
    assert not full[~mask].any()
    np.testing.assert_array_equal(sel.restrict(np.ones(12, bool)), mask)
    assert (sel.nd is None) == (roi is None)
    assert sel.describe() == ("none" if roi is None else f"{int(mask.sum())} positions")
    assert math.prod(sel.nav_shape) == 12
