"""`ltdask.compat.buffers` and `ltdask.compat.math`: LiberTEM's ``BufferWrapper``, its
helpers and ``libertem.common.math``, checked against numpy and values worked out by hand;
and the results of ``Context.run_udf`` as ``BufferWrapper`` s."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import sparse

from ltdask import Shape
from ltdask.compat import Context, ResultBuffer
from ltdask.compat.buffers import (
    BufferWrapper,
    get_bbox,
    get_bbox_slice,
    get_inner_slice,
    reshaped_view,
)
from ltdask.compat.math import count_nonzero, prod
from ltdask.udf import UDF, SumSigUDF


def _numpy_bbox(a: np.ndarray) -> tuple[int, ...]:
    where = np.nonzero(a)
    return tuple(v for axis in where for v in (int(axis.min()), int(axis.max())))


@pytest.mark.parametrize(
    "points",
    [
        pytest.param([(6, 6)], id="2d-one-pixel"),
        pytest.param([(1, 2), (9, 0), (4, 15)], id="2d-scattered"),
        pytest.param([(0, 6, 6), (15, 6, 6)], id="3d-line"),
        pytest.param([(3, 1, 2), (5, 14, 9), (4, 7, 0)], id="3d-scattered"),
    ],
)
def test_bbox_matches_numpy(points):
    a = np.zeros((16,) * len(points[0]), dtype=bool)
    for p in points:
        a[p] = True
    box = _numpy_bbox(a)
    assert get_bbox(a) == box
    assert get_bbox_slice(a) == tuple(slice(box[i], box[i + 1] + 1) for i in range(0, len(box), 2))
    # the slice holds every non-zero element
    assert np.count_nonzero(a[get_bbox_slice(a)]) == len(points)


def test_bbox_of_nothing_is_empty():
    a = np.zeros((4, 5))
    assert get_bbox(a) == (4, 0, 5, 0)
    assert a[get_bbox_slice(a)].size == 0


def test_inner_slice_first_full_run():
    a = np.zeros((16, 16), dtype=bool)
    a[5:7] = True  # rows 5 and 6 are full
    a[8, 8] = True  # a partial row: not full
    a[10:12] = True  # a second full run: not the first
    assert get_inner_slice(a, axis=0) == (slice(5, 7), slice(None))
    b = np.zeros((4, 6, 3))
    b[:, 2:4, :] = 1
    assert get_inner_slice(b, axis=1) == (slice(None), slice(2, 4), slice(None))
    assert get_inner_slice(np.zeros((3, 3)), axis=0) == (slice(3, 1), slice(None))
    with pytest.raises(ValueError, match="axis=2, but the array has 2 axes"):
        get_inner_slice(a, axis=2)


def test_reshaped_view_is_a_view_or_refuses():
    a = np.arange(12.0).reshape(3, 4)
    flat = reshaped_view(a, (-1,))
    flat[5] = -1
    assert a[1, 1] == -1
    with pytest.raises(AttributeError, match=r"shape \(3, 2\).*without a copy"):
        reshaped_view(a[:, :2], (-1,))


@pytest.mark.parametrize(
    "shape, expected",
    [((), 1), ((3, 4), 12), ((np.int32(2**16), np.int32(2**16), 4), 2**34)],
    ids=["empty", "small", "beyond-int32"],
)
def test_prod(shape, expected):
    result = prod(shape)
    assert result == expected and type(result) is int


def test_prod_refuses_fractions():
    with pytest.raises(ValueError, match="2.5 is not an integer"):
        prod((2, 2.5))


def test_count_nonzero_dense_and_sparse():
    a = np.random.default_rng(1).random((6, 7))
    a[a < 0.5] = 0
    expected = np.count_nonzero(a)
    assert count_nonzero(a) == expected
    assert count_nonzero(a > 0) == expected
    assert count_nonzero(scipy.sparse.csr_matrix(a)) == expected
    assert count_nonzero(sparse.COO.from_numpy(a)) == expected
    stored_zero = scipy.sparse.csr_matrix((np.array([0.0, 2.0]), ([0, 1], [0, 1])), shape=(2, 2))
    assert count_nonzero(stored_zero) == 1


SHAPE = Shape((3, 1, 16, 16), sig_dims=2)


def test_default_mask_nav_follows_valid_positions():
    buf = BufferWrapper(kind="nav", extra_shape=(1, 2), dtype="float32")
    valid = np.array([True, True, False])
    mask = buf.make_default_mask(valid_nav_mask=valid, dataset_shape=SHAPE, roi=None)
    expected = np.zeros((3, 1, 2), dtype=bool)
    expected[:2] = True
    np.testing.assert_array_equal(mask, expected)


def test_default_mask_nav_with_roi_is_compressed():
    buf = BufferWrapper(kind="nav", dtype="float32")
    roi = np.array([True, False, True])
    mask = buf.make_default_mask(np.array([False, True]), SHAPE, roi=roi)
    np.testing.assert_array_equal(mask, [False, True])
    with pytest.raises(ValueError, match="3 entries; expected 2 .* of the ROI"):
        buf.make_default_mask(np.ones(3, bool), SHAPE, roi=roi)


@pytest.mark.parametrize(
    "kind, extra, shape",
    [("sig", (1, 2), (16, 16, 1, 2)), ("single", (1, 2), (1, 2)), ("single", (), (1,))],
)
def test_default_mask_sig_and_single_all_valid(kind, extra, shape):
    buf = BufferWrapper(kind=kind, extra_shape=extra, dtype="float32")
    mask = buf.make_default_mask(np.array([True, False, False]), SHAPE, roi=None)
    assert mask.shape == shape and mask.all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param({"kind": "frame"}, "kind='frame'; expected one of", id="kind"),
        pytest.param({"kind": "nav", "use": "shared"}, "use='shared'", id="use"),
        pytest.param({"kind": "nav", "where": "gpu"}, "where='gpu'", id="where"),
    ],
)
def test_buffer_wrapper_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BufferWrapper(**kwargs)


class _TwoKinds(UDF):
    def get_result_buffers(self):
        return {
            "frame_sum": self.buffer(kind="nav", dtype=np.float32, extra_shape=(2,)),
            "total": self.buffer(kind="sig", dtype=np.float32),
        }

    def process_frame(self, frame):
        self.results.frame_sum[:] = frame.sum()
        self.results.total[:] += frame

    def merge(self, dest, src):
        dest.frame_sum[:] = src.frame_sum
        dest.total[:] += src.total


def test_run_udf_results_are_buffer_wrappers():
    data = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    ctx = Context.make_with("inline")
    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.array([[True, False, True], [False, True, False]])
    res = ctx.run_udf(dataset=ds, udf=_TwoKinds(), roi=roi)
    nav, sig = res["frame_sum"], res["total"]
    assert isinstance(nav, BufferWrapper) and isinstance(nav, ResultBuffer)
    assert (nav.kind, nav.extra_shape, nav.dtype) == ("nav", (2,), np.float32)
    assert (sig.kind, sig.extra_shape) == ("sig", ())
    # the private raw-shaped valid mask and ROI LiberTEM code reads
    np.testing.assert_array_equal(nav._valid_mask, np.ones((3, 2), bool))
    np.testing.assert_array_equal(
        nav.raw_data, np.repeat(data.reshape(6, -1).sum(-1)[roi.reshape(-1)], 2).reshape(3, 2)
    )
    np.testing.assert_array_equal(sig._valid_mask, np.ones((4, 4), bool))
    np.testing.assert_array_equal(sig.data, data[roi].sum(axis=0))


def test_result_roi_is_a_copy():
    ctx = Context.make_with("inline")
    ds = ctx.load("memory", data=np.ones((2, 2, 4, 4)), sig_dims=2)
    roi = ds.roi[0, 0]
    res = ctx.run_udf(dataset=ds, udf=SumSigUDF(), roi=roi)
    roi[:] = True  # the caller's array changes after the run
    assert res["intensity"]._roi.tolist() == [True, False, False, False]
    assert res["intensity"].raw_data.tolist() == [16.0]
