"""Tests for ltdask.masks against plain-numpy references."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse
import sparse
from hypothesis import assume, example, given
from hypothesis import strategies as st

import ltdask
from ltdask import masks

# the property tests draw centres and offsets outside the frame on purpose; the warning for
# masks without a pixel in the frame is tested below with pytest.warns (which sees it anyway)
pytestmark = pytest.mark.filterwarnings("ignore::ltdask.EmptyMaskWarning")

# -- independent references ----------------------------------------------------------------


def grid(sx, sy):
    """Row (y) and column (x) coordinates of every pixel centre."""
    return np.mgrid[0:sy, 0:sx]


def distance(cx, cy, sx, sy):
    y, x = grid(sx, sy)
    return np.sqrt((x - cx) ** 2 + (y - cy) ** 2)


def ref_disk(cx, cy, sx, sy, r):
    y, x = grid(sx, sy)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r**2


def ref_ring(cx, cy, sx, sy, r, ri):
    y, x = grid(sx, sy)
    d2 = (x - cx) ** 2 + (y - cy) ** 2
    return (d2 > ri**2) & (d2 <= r**2)


def ref_ramp(d, inner, outer):
    """LiberTEM's documented antialiasing ramp for a band at least one pixel wide."""
    return np.clip(np.minimum(d - inner, outer - d) + 0.5, 0, 1)


def ref_rectangle(X, Y, W, H, sx, sy):
    y, x = grid(sx, sy)
    if W == 0 or H == 0:
        return np.zeros((sy, sx), dtype=bool)
    x0, x1 = sorted((int(X), int(X + W)))
    y0, y1 = sorted((int(Y), int(Y + H)))
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


sizes = st.integers(1, 23)
centres = st.floats(-8, 30, allow_nan=False)
radii = st.floats(0, 20, allow_nan=False)


# -- circular ------------------------------------------------------------------------------


@given(sx=sizes, sy=sizes, cx=centres, cy=centres, r=radii)
def test_circular_matches_numpy(sx, sy, cx, cy, r):
    mask = masks.circular(cx, cy, sx, sy, r)
    assert mask.dtype == bool
    assert mask.shape == (sy, sx)
    np.testing.assert_array_equal(mask, ref_disk(cx, cy, sx, sy, r))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            (1, 1, 3, 3, 1),
            [[0, 1, 0], [1, 1, 1], [0, 1, 0]],
            id="radius-1-includes-boundary",
        ),
        pytest.param(
            (1.5, 0.5, 4, 2, 0.75),
            [[0, 1, 1, 0], [0, 1, 1, 0]],
            id="off-grid-centre",
        ),
        pytest.param(
            (-1, 1, 3, 3, 1),
            [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
            id="centre-outside-touching",
        ),
        pytest.param(
            (-1, 1, 3, 3, 1.5),
            [[1, 0, 0], [1, 0, 0], [1, 0, 0]],
            id="centre-outside-overlapping",
        ),
        pytest.param((-1, 1, 3, 3, 0.9), np.zeros((3, 3)), id="centre-outside-missing"),
        pytest.param((2, 2, 5, 3, 0), [[0] * 5, [0] * 5, [0, 0, 1, 0, 0]], id="radius-0"),
        pytest.param((2.5, 2, 5, 3, 0), np.zeros((3, 5)), id="radius-0-off-grid"),
    ],
)
def test_circular_small_cases(args, expected):
    np.testing.assert_array_equal(masks.circular(*args), np.array(expected, dtype=bool))


def test_circular_odd_size_is_symmetric():
    mask = masks.circular(6, 4, 13, 9, 3.7)
    np.testing.assert_array_equal(mask, mask[::-1, :])
    np.testing.assert_array_equal(mask, mask[:, ::-1])


# -- ring ----------------------------------------------------------------------------------


@given(sx=sizes, sy=sizes, cx=centres, cy=centres, r=radii, fraction=st.floats(0, 1))
def test_ring_matches_numpy(sx, sy, cx, cy, r, fraction):
    ri = r * fraction
    mask = masks.ring(cx, cy, sx, sy, r, ri)
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, ref_ring(cx, cy, sx, sy, r, ri))
    np.testing.assert_array_equal(
        mask, masks.circular(cx, cy, sx, sy, r) & ~masks.circular(cx, cy, sx, sy, ri)
    )


@given(sx=sizes, sy=sizes, cx=centres, cy=centres, r=radii)
def test_ring_with_equal_radii_is_empty(sx, sy, cx, cy, r):
    assert not masks.ring(cx, cy, sx, sy, r, r).any()
    assert masks.ring(cx, cy, sx, sy, r, r, antialiased=True).sum() == 0


def test_ring_with_zero_inner_radius_leaves_out_exact_centre():
    # LiberTEM's convention: ring = circular(radius) & ~circular(radius_inner), both `<=`
    mask = masks.ring(2, 2, 5, 5, 2, 0)
    assert not mask[2, 2]
    assert mask.sum() == masks.circular(2, 2, 5, 5, 2).sum() - 1


# -- antialiasing --------------------------------------------------------------------------


@given(sx=sizes, sy=sizes, cx=centres, cy=centres, r=st.floats(0.01, 20))
def test_antialiased_circle_is_coverage_consistent_with_hard_mask(sx, sy, cx, cy, r):
    soft = masks.circular(cx, cy, sx, sy, r, antialiased=True)
    hard = masks.circular(cx, cy, sx, sy, r)
    assert soft.dtype == np.float64
    assert soft.shape == (sy, sx)
    assert soft.min() >= 0 and soft.max() <= 1
    assert hard[soft == 1].all()
    assert not hard[soft == 0].any()
    d = distance(cx, cy, sx, sy)
    np.testing.assert_array_equal(soft[(d >= 0.5) & (d <= r - 0.5)], 1)
    # the pixel on the centre stands for radii 0..1
    np.testing.assert_array_equal(soft[d < 0.5], min(r, 1))
    np.testing.assert_array_equal(soft[d >= r + 0.5], 0)


@given(
    cx=st.floats(30, 34),
    cy=st.floats(30, 34),
    r=st.floats(3, 25),
)
def test_antialiased_circle_area(cx, cy, r):
    # away from the border the sum approximates the disk's area far better than the hard mask
    soft = masks.circular(cx, cy, 64, 64, r, antialiased=True)
    assert abs(soft.sum() - math.pi * r**2) <= 0.25 * r + 0.5


@given(cx=centres, cy=centres, r=st.floats(1, 20))
def test_antialiased_circle_matches_libertem_ramp(cx, cy, r):
    soft = masks.circular(cx, cy, 23, 17, r, antialiased=True)
    d = distance(cx, cy, 23, 17)
    away = d >= 0.5
    np.testing.assert_allclose(soft[away], ref_ramp(d[away], 0, r), atol=1e-12)
    # LiberTEM sets the pixel on the centre to 1
    np.testing.assert_array_equal(soft[~away], 1)


@given(cx=centres, cy=centres, r=st.floats(1, 20), ri=st.floats(1, 20))
def test_antialiased_ring_matches_libertem_ramp(cx, cy, r, ri):
    r, ri = ri + r, ri  # at least one pixel wide
    soft = masks.ring(cx, cy, 23, 17, r, ri, antialiased=True)
    d = distance(cx, cy, 23, 17)
    np.testing.assert_allclose(soft, ref_ramp(d, ri, r), atol=1e-12)


def test_antialiased_small_case():
    soft = masks.circular(2, 2, 5, 5, 1.7, antialiased=True)
    e = 1.7 + 0.5 - math.sqrt(2)  # diagonal neighbours reach from sqrt(2) - 0.5 to sqrt(2) + 0.5
    expected = np.array(
        [
            [0, 0, 0.2, 0, 0],
            [0, e, 1, e, 0],
            [0.2, 1, 1, 1, 0.2],
            [0, e, 1, e, 0],
            [0, 0, 0.2, 0, 0],
        ]
    )
    np.testing.assert_allclose(soft, expected)


def test_antialiased_radius_0_is_empty():
    # zero area: unlike the hard mask, which keeps a pixel sitting exactly on the centre
    assert masks.circular(2, 2, 5, 5, 0, antialiased=True).sum() == 0
    assert masks.circular(2, 2, 5, 5, 0).sum() == 1


# -- rectangular ---------------------------------------------------------------------------


@given(
    sx=sizes,
    sy=sizes,
    X=st.floats(-10, 30),
    Y=st.floats(-10, 30),
    W=st.floats(-15, 15),
    H=st.floats(-15, 15),
)
def test_rectangular_matches_numpy(sx, sy, X, Y, W, H):
    mask = masks.rectangular(X, Y, W, H, sx, sy)
    assert mask.dtype == bool
    assert mask.shape == (sy, sx)
    np.testing.assert_array_equal(mask, ref_rectangle(X, Y, W, H, sx, sy))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            (1, 1, 1, 1, 4, 3), [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0]], id="both-ends"
        ),
        pytest.param((2, 2, -1, -2, 4, 3), [[0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 1, 0]], id="neg"),
        pytest.param((1, 0, 0, 2, 4, 3), np.zeros((3, 4)), id="zero-width"),
        pytest.param((-5, -5, 2, 2, 4, 3), np.zeros((3, 4)), id="outside-above-left"),
        pytest.param((3, 2, 5, 5, 4, 3), [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], id="clip"),
    ],
)
def test_rectangular_small_cases(args, expected):
    np.testing.assert_array_equal(masks.rectangular(*args), np.array(expected, dtype=bool))


# -- point and gradients -------------------------------------------------------------------


@given(sx=sizes, sy=sizes, data=st.data())
def test_point(sx, sy, data):
    cx = data.draw(st.floats(0, sx, exclude_max=True))
    cy = data.draw(st.floats(0, sy, exclude_max=True))
    mask = masks.point(sx, sy, cx, cy)
    assert mask.dtype == bool
    assert mask.shape == (sy, sx)
    assert mask.sum() == 1
    assert mask[int(cy), int(cx)]


@given(sx=sizes, sy=sizes)
def test_gradients_match_mgrid(sx, sy):
    y, x = grid(sx, sy)
    gx, gy = masks.gradient_x(sx, sy), masks.gradient_y(sx, sy)
    assert gx.dtype == gy.dtype == np.float32
    np.testing.assert_array_equal(gx, x)
    np.testing.assert_array_equal(gy, y)
    assert masks.gradient_x(sx, sy, dtype=np.int64).dtype == np.int64
    gy64 = masks.gradient_y(sx, sy, dtype=np.float64)
    assert gy64.dtype == np.float64 and gy64.flags.writeable


# -- polar_map -----------------------------------------------------------------------------


@given(cx=centres, cy=centres, sx=sizes, sy=sizes)
def test_polar_map_matches_numpy(cx, cy, sx, sy):
    y, x = grid(sx, sy)
    r, phi = masks.polar_map(cx, cy, sx, sy)
    np.testing.assert_allclose(r, np.sqrt((x - cx) ** 2 + (y - cy) ** 2), atol=1e-12)
    np.testing.assert_allclose(phi, np.arctan2(y - cy, x - cx), atol=1e-12)


def test_polar_map_stretch():
    y, x = grid(9, 7)
    r, _ = masks.polar_map(4, 3, 9, 7, stretchY=2.0)
    np.testing.assert_allclose(r, np.hypot((y - 3) / 2, x - 4))
    r_rotated, _ = masks.polar_map(4, 3, 9, 7, stretchY=1.0, angle=0.7)
    np.testing.assert_allclose(r_rotated, np.hypot(y - 3, x - 4))
    # stretching along x (angle pi/2) divides the x distance instead
    r_x, _ = masks.polar_map(4, 3, 9, 7, stretchY=2.0, angle=np.pi / 2)
    np.testing.assert_allclose(r_x, np.hypot(y - 3, (x - 4) / 2))


# -- radial_bins ---------------------------------------------------------------------------


def patched_centre(cx, cy, sx, sy, ri):
    """The pixel LiberTEM sets to ``1 - ri`` in the first bin (rounded half to even)."""
    y, x = int(np.round(cy)), int(np.round(cx))
    return (y, x) if ri < 0.5 and 0 <= y < sy and 0 <= x < sx else None


@given(
    sx=sizes,
    sy=sizes,
    cx=centres,
    cy=centres,
    r=st.floats(0.1, 20),
    fraction=st.floats(0, 1),
    n_bins=st.integers(1, 30),
)
def test_radial_bins_are_libertems_ramps(sx, sy, cx, cy, r, fraction, n_bins):
    """Each bin is LiberTEM's ramp ``clip(w/2 + 1/2 - |d - r0|, 0, 1)`` around its centre
    ``r0``, and the centre pixel of the first bin is ``1 - ri`` when ``ri < 1/2``."""
    ri = r * fraction
    # bins of no width (ri == r) are empty: test_radial_bins_default_bin_count_and_dtype
    assume(ri < r)
    bins = masks.radial_bins(cx, cy, sx, sy, r, ri, n_bins=n_bins, use_sparse=False)
    assert isinstance(bins, np.ndarray)
    assert bins.shape == (n_bins, sy, sx)
    assert bins.dtype == np.float64
    assert bins.min() >= 0 and bins.max() <= 1
    d = distance(cx, cy, sx, sy)
    w = (r - ri) / n_bins
    want = np.stack(
        [np.clip(w / 2 + 0.5 - np.abs(d - (ri + w * (i + 0.5))), 0, 1) for i in range(n_bins)]
    )
    centre = patched_centre(cx, cy, sx, sy, ri)
    if centre is not None:
        want[(0, *centre)] = 1 - ri
    np.testing.assert_allclose(bins, want, atol=1e-12)


@given(
    sx=sizes,
    sy=sizes,
    cx=centres,
    cy=centres,
    r=st.floats(2, 20),
    fraction=st.floats(0, 0.5),
    width=st.floats(1, 10),
)
@example(sx=3, sy=2, cx=1.5, cy=1.25, r=2.0, fraction=0.125, width=10)  # centre pixel (1, 2)
@example(sx=3, sy=1, cx=1.5, cy=0.5, r=2.0, fraction=0.0, width=1.0)  # patched pixel inside
def test_radial_bins_wide_ones_partition_the_ring(sx, sy, cx, cy, r, fraction, width):
    """Bins at least a pixel wide add up to the antialiased ring (away from the centre and
    its patched pixel, where LiberTEM's ramp and patch apply) and count every pixel in
    range once."""
    ri = r * fraction
    # bins about `width` pixels wide (r - ri >= 1, so one bin is always wide enough)
    n_bins = max(1, int((r - ri) / width))
    bins = masks.radial_bins(cx, cy, sx, sy, r, ri, n_bins=n_bins, use_sparse=False)
    ring = masks.ring(cx, cy, sx, sy, r, ri, antialiased=True)
    d = distance(cx, cy, sx, sy)
    away = d >= 0.5
    centre = patched_centre(cx, cy, sx, sy, ri)
    if centre is not None:  # (rounded half to even, it can lie half a pixel off the centre)
        away[centre] = False
    np.testing.assert_allclose(bins.sum(axis=0)[away], ring[away], atol=1e-12)
    inside = (d - 0.5 >= ri) & (d + 0.5 <= r) & away
    np.testing.assert_allclose(bins.sum(axis=0)[inside], 1)


@given(
    sx=sizes,
    sy=sizes,
    cx=centres,
    cy=centres,
    r=st.floats(0.1, 20),
    n_bins=st.integers(1, 30),
)
def test_radial_bins_sparse_equals_dense(sx, sy, cx, cy, r, n_bins):
    for normalize in (False, True):
        dense = masks.radial_bins(
            cx, cy, sx, sy, r, n_bins=n_bins, normalize=normalize, use_sparse=False
        )
        coo = masks.radial_bins(
            cx, cy, sx, sy, r, n_bins=n_bins, normalize=normalize, use_sparse=True
        )
        assert isinstance(coo, sparse.COO)
        assert coo.shape == dense.shape
        assert (coo.data != 0).all()
        np.testing.assert_array_equal(coo.todense(), dense)


@given(cx=centres, cy=centres, r=st.floats(0.1, 20), n_bins=st.integers(1, 30))
def test_radial_bins_normalize(cx, cy, r, n_bins):
    """Each bin that is not empty sums to 1, before LiberTEM patches the centre pixel."""
    plain = masks.radial_bins(cx, cy, 23, 17, r, n_bins=n_bins, use_sparse=False)
    normed = masks.radial_bins(cx, cy, 23, 17, r, n_bins=n_bins, normalize=True, use_sparse=False)
    centre = patched_centre(cx, cy, 23, 17, 0)
    d = distance(cx, cy, 23, 17)
    w = r / n_bins
    unpatched = plain.copy()
    if centre is not None:
        unpatched[(0, *centre)] = np.clip(w / 2 + 0.5 - np.abs(d[centre] - w / 2), 0, 1)
        assert normed[(0, *centre)] == 1
    sums = unpatched.sum(axis=(1, 2))
    filled = ~np.isclose(sums, 0)
    expect = unpatched / np.where(filled, sums, 1)[:, None, None]
    if centre is not None:
        expect[(0, *centre)] = 1
    np.testing.assert_allclose(normed, expect, atol=1e-12)


def test_radial_bins_match_libertem_ramp_for_wide_bins():
    cx, cy, r = 10.3, 8.6, 12.0
    bins = masks.radial_bins(cx, cy, 21, 19, r, radius_inner=2, n_bins=5, use_sparse=False)
    d = distance(cx, cy, 21, 19)
    edges = np.linspace(2, r, 6)
    for i in range(5):
        np.testing.assert_allclose(bins[i], ref_ramp(d, edges[i], edges[i + 1]), atol=1e-12)


def test_radial_bins_default_covers_whole_frame():
    # the default radius reaches past every pixel; LiberTEM's own test of radial_bins
    bins = masks.radial_bins(35, 37, 80, 80, n_bins=42)
    assert isinstance(bins, sparse.COO)
    assert bins.shape == (42, 80, 80)
    np.testing.assert_allclose(bins.sum(axis=0).todense(), 1)
    dense = masks.radial_bins(40, 41, 80, 80, n_bins=2)
    assert isinstance(dense, np.ndarray)
    np.testing.assert_allclose(dense.sum(axis=0), 1)


def test_radial_bins_default_bin_count_and_dtype():
    bins = masks.radial_bins(8, 8, 17, 17, radius=6.4, radius_inner=1, dtype=np.float32)
    assert bins.shape == (5, 17, 17)
    assert bins.dtype == np.float32
    assert masks.radial_bins(8, 8, 17, 17, radius=3, radius_inner=3).shape == (1, 17, 17)
    assert masks.radial_bins(8, 8, 17, 17, radius=3, radius_inner=3).sum() == 0


def test_radial_bins_small_case():
    bins = masks.radial_bins(1, 1, 3, 3, radius=2, n_bins=2, use_sparse=False)
    s = 1.5 - math.sqrt(2)  # corner pixels reach from sqrt(2) - 0.5 to sqrt(2) + 0.5
    np.testing.assert_allclose(bins[0], [[s, 0.5, s], [0.5, 1, 0.5], [s, 0.5, s]])
    np.testing.assert_allclose(bins[1], [[1 - s, 0.5, 1 - s], [0.5, 0, 0.5], [1 - s, 0.5, 1 - s]])


# -- sparse helpers ------------------------------------------------------------------------


@given(
    sx=sizes,
    sy=sizes,
    stamps=st.lists(
        st.tuples(st.integers(0, 3), st.integers(-6, 25), st.integers(-6, 25)),
        min_size=1,
        max_size=6,
    ),
)
def test_sparse_template_multi_stack_matches_loop(sx, sy, stamps):
    template = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    index, ox, oy = (list(column) for column in zip(*stamps, strict=True))
    stack = masks.sparse_template_multi_stack(index, ox, oy, template, sx, sy)
    expected = np.zeros((max(index) + 1, sy, sx), dtype=np.float32)
    for i, x0, y0 in stamps:
        for ty in range(3):
            for tx in range(4):
                if 0 <= y0 + ty < sy and 0 <= x0 + tx < sx:
                    expected[i, y0 + ty, x0 + tx] += template[ty, tx]
    assert isinstance(stack, sparse.COO)
    assert stack.dtype == np.float32
    np.testing.assert_array_equal(stack.todense(), expected)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: a, id="numpy"),
        pytest.param(sparse.COO.from_numpy, id="pydata-coo"),
        pytest.param(lambda a: sparse.GCXS.from_numpy(a), id="pydata-gcxs"),
        pytest.param(scipy.sparse.csr_matrix, id="scipy-csr"),
        pytest.param(scipy.sparse.coo_array, id="scipy-coo-array"),
    ],
)
def test_sparse_conversions(make):
    a = masks.circular(3, 2, 7, 5, 2).astype(np.float64)
    converted = make(a)
    assert masks.is_sparse(converted) == (not isinstance(converted, np.ndarray))
    dense = masks.to_dense(converted)
    assert isinstance(dense, np.ndarray)
    np.testing.assert_array_equal(dense, a)
    coo = masks.to_sparse(converted)
    assert isinstance(coo, sparse.COO)
    np.testing.assert_array_equal(coo.todense(), a)
    assert masks.is_sparse(coo)


# -- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(lambda: masks.circular(2, 2, 5, 5, -1), r"radius must be >= 0", id="c-neg"),
        pytest.param(lambda: masks.ring(2, 2, 5, 5, -1, 0), r"radius must be >= 0", id="r-neg"),
        pytest.param(
            lambda: masks.ring(2, 2, 5, 5, 2, -1), r"radius_inner must be >= 0", id="ri-neg"
        ),
        pytest.param(
            lambda: masks.ring(2, 2, 5, 5, 2, 3, antialiased=True),
            r"radius_inner \(3\) must not be larger than radius \(2\)",
            id="ring-inner-larger",
        ),
        pytest.param(
            lambda: masks.radial_bins(2, 2, 5, 5, radius=2, radius_inner=3),
            r"radius_inner \(3\) must not be larger than radius \(2\)",
            id="bins-inner-larger",
        ),
        pytest.param(
            lambda: masks.radial_bins(2, 2, 5, 5, radius=-2), r"radius must be >= 0", id="b-neg"
        ),
        pytest.param(
            lambda: masks.radial_bins(2, 2, 5, 5, radius=2, n_bins=0),
            r"n_bins must be a positive integer, got 0",
            id="n-bins-0",
        ),
        pytest.param(
            lambda: masks.circular(2, 2, 0, 5, 1),
            r"imageSizeX must be a positive integer, got 0",
            id="size-0",
        ),
        pytest.param(
            lambda: masks.gradient_y(5, 2.5),
            r"imageSizeY must be a positive integer, got 2.5",
            id="size-fractional",
        ),
        pytest.param(
            lambda: masks.circular(np.nan, 2, 5, 5, 1),
            r"centerX must be a finite number",
            id="centre-nan",
        ),
        pytest.param(
            lambda: masks.point(4, 3, 4, 0),
            r"point \(cx=4, cy=0\) lies outside the image of 4 x 3 pixels",
            id="point-outside",
        ),
        pytest.param(
            lambda: masks.point(4, 3, 0, -0.5),
            r"lies outside the image",
            id="point-negative",
        ),
        pytest.param(
            lambda: masks.sparse_template_multi_stack([0, 1], [0], [0], np.ones((2, 2)), 4, 4),
            r"equal length, got lengths 2, 1 and 1",
            id="stack-lengths",
        ),
        pytest.param(
            lambda: masks.sparse_template_multi_stack([0], [0], [0], np.ones(2), 4, 4),
            r"template must be 2D",
            id="stack-template-1d",
        ),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_infinite_radius_covers_the_frame():
    """As LiberTEM: an infinite radius is a disk over the whole frame (CoM's default)."""
    assert masks.circular(2.5, 1.0, 7, 5, np.inf).all()
    ring = masks.ring(3, 2, 7, 5, np.inf, 1)
    d2 = distance(3, 2, 7, 5) ** 2
    np.testing.assert_array_equal(ring, d2 > 1)
    with pytest.raises(ValueError, match="radius must be a finite number"):
        masks.radial_bins(3, 2, 7, 5, radius=np.inf)


# -- masks without a pixel in the frame warn -----------------------------------------------
#: factory call with no pixel in a 64 x 64 frame -> the call as the warning names it
EMPTY = {
    "disk-centre-outside": (
        lambda: masks.circular(500, 500, 64, 64, 5),
        "circular(centerX=500, centerY=500, radius=5)",
    ),
    "disk-antialiased-centre-outside": (
        lambda: masks.circular(-10, 32, 64, 64, 5, antialiased=True),
        "circular(centerX=-10, centerY=32",
    ),
    "ring-centre-outside": (
        lambda: masks.ring(32, 500, 64, 64, 16, 8),
        "ring(centerX=32, centerY=500, radius=16, radius_inner=8)",
    ),
    "ring-equal-radii": (lambda: masks.ring(32, 32, 64, 64, 4, 4), "ring(centerX=32"),
    "rectangle-beside": (
        lambda: masks.rectangular(70, 0, 5, 5, 64, 64),
        "rectangular(X=70, Y=0, Width=5, Height=5)",
    ),
    "rectangle-zero-width": (lambda: masks.rectangular(3, 3, 0, 5, 64, 64), "Width=0"),
    "radial-bins-centre-outside": (
        lambda: masks.radial_bins(500, 500, 64, 64, radius=5, use_sparse=False),
        "radial_bins(centerX=500, centerY=500, radius=5",
    ),
    "radial-bins-sparse-centre-outside": (
        lambda: masks.radial_bins(500, 500, 64, 64, radius=5, use_sparse=True),
        "radial_bins(",
    ),
    "radial-gradient-centre-outside": (
        lambda: masks.radial_gradient(-100, 10, 64, 64, 5),
        "radial_gradient(centerX=-100",
    ),
    "background-subtraction-empty-ring": (
        lambda: masks.background_subtraction(32, 32, 64, 64, 5, 5),
        "background_subtraction(centerX=32, centerY=32, radius=5, radius_inner=5)'s ring",
    ),
    "template-stamped-outside": (
        lambda: masks.sparse_template_multi_stack(
            [0, 1], [3, 100], [3, 3], np.ones((2, 2)), 64, 64
        ),
        "in 1 of its 2 masks (1)",
    ),
}


@pytest.mark.parametrize("case", EMPTY)
def test_mask_without_a_pixel_in_the_frame_warns(case):
    make, call = EMPTY[case]
    with pytest.warns(ltdask.EmptyMaskWarning, match="has no pixel in the 64 x 64 frame") as rec:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # background_subtraction's 0 / 0
            mask = make()
    assert call in str(rec[0].message)
    assert rec[0].filename == __file__  # attributed to the caller's line
    dense = masks.to_dense(mask)
    if case == "template-stamped-outside":
        dense = dense[1]
    elif case == "background-subtraction-empty-ring":
        dense = ref_ring(32, 32, 64, 64, 5, 5)  # its ring part
    assert not np.any(dense)  # the warning is about a mask that is empty indeed


@pytest.mark.parametrize(
    "make",
    [
        lambda: masks.circular(-3, 70, 64, 64, 8),  # centre outside, the disk reaches in
        lambda: masks.ring(70, 32, 64, 64, 10, 3),
        lambda: masks.rectangular(-5, -5, 6, 6, 64, 64),
        lambda: masks.radial_bins(32, 32, 64, 64),  # its last bin is empty, not the stack
        lambda: masks.radial_gradient(-2, 10, 64, 64, 5),
        lambda: masks.background_subtraction(32, 32, 64, 64, 6, 3),
        lambda: masks.sparse_template_multi_stack(
            [0, 1], [-1, 62], [0, 0], np.ones((2, 2)), 64, 64
        ),
        lambda: masks.point(64, 64, 3, 4),
    ],
)
def test_mask_with_a_pixel_in_the_frame_does_not_warn(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ltdask.EmptyMaskWarning)
        assert np.any(masks.to_dense(make()))


def test_point_outside_the_frame_is_refused():
    with pytest.raises(ValueError, match="outside the image"):
        masks.point(64, 64, cx=70, cy=3)
