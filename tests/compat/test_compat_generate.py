"""`ltdask.compat.generate.cbed_frame` (LiberTEM's ``libertem.utils.generate``): lattice
points, the margin, disk values and weights worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.compat.generate import cbed_frame


def test_defaults_lattice():
    data, indices, peaks = cbed_frame(radius=4)
    assert data.shape == (1, 128, 128) and data.dtype == np.float32
    # zero (64, 64), a = (16, 0), b = (0, 16): points 64 + 16 * (i, j), kept where they
    # lie in [4, 124): i and j from -3 to 3
    assert len(peaks) == 49
    np.testing.assert_array_equal(peaks, 64 + 16 * indices)
    assert indices.min() == -3 and indices.max() == 3


def test_given_lattice_and_margin():
    a, b = (0, 5), (5, 0)
    indices = np.array([(0, 0), (1, 1), (2, 0), (-3, 0)])
    _, kept, peaks = cbed_frame(fy=20, fx=20, zero=(10, 10), a=a, b=b, indices=indices, margin=2)
    # (10, 10), (15, 15), (10, 20) [x out: 20 >= 18], (10, -5) [out]
    assert kept.tolist() == [[0, 0], [1, 1]]
    assert peaks.tolist() == [[10, 10], [15, 15]]


def test_mgrid_indices_column_by_column():
    _, kept, _ = cbed_frame(fy=64, fx=64, indices=np.mgrid[0:2, 0:2], radius=1)
    assert kept.tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]


def test_disk_values_and_weights():
    indices = np.array([(0, 0), (1, 0), (0, 1)])
    equal, _, peaks = cbed_frame(fy=32, fx=32, indices=indices, radius=2, all_equal=True)
    weighted, _, _ = cbed_frame(fy=32, fx=32, indices=indices, radius=2)
    # distances 0, 4, 4 from zero; top = max(4 + 1, 3 + 1) = 5: weights 5, 2, 3
    weights = [5 - 0 + 0, 5 - 4 + 1, 5 - 4 + 2]
    for (y, x), w in zip(peaks, weights, strict=True):
        assert equal[0, y, x] == 1  # a disk's centre pixel is covered whole
        assert weighted[0, y, x] == pytest.approx(w)
    assert equal[0, 0, 0] == 0 and equal[0, 31, 31] == 0
    # each disk covers about its area, pi r^2 (antialiased)
    assert equal.sum() == pytest.approx(3 * np.pi * 2**2, rel=0.05)


def test_bad_indices():
    with pytest.raises(ValueError, match=r"indices has shape \(3,\); expected \(n, 2\)"):
        cbed_frame(indices=np.array([1, 2, 3]))
