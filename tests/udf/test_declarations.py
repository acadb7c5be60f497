"""What a UDF declares and returns: the buffer rules of ``get_results``, merges, custom valid
masks, ``get_valid_nav_mask``, parameters, and the errors raised when the graph is built
(LiberTEM architecture notes, 4.2 "Buffer declaration rules", "Merging and valid masks")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    check_variable,
    fill_nav,
    make_roi,
    open_dataset,
    partitions,
    random_data,
    roi_mask,
    selected,
)

import ltdask
from ltdask import UDF, UDFError
from ltdask.exceptions import MergeNotImplementedError

# the scan of the `data` and `ds` fixtures (conftest.py): 7 partitions
NAV, SIG, SEED, FRAMES_PER_PARTITION = (4, 5), (3, 4), 21, 3


ROIS = ["none", "random", "all-false"]

# -- get_results and the buffer rules ---------------------------------------------------------


@pytest.mark.parametrize("roi_kind", ROIS)
def test_result_only_private_and_pass_through(ds, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    mask = roi_mask(roi, NAV)
    res = ex.ResultsRuleUDF(returns=("half",)).compute(ds, roi=roi)
    # private buffers are not results; the others not returned by get_results pass through
    assert set(res.data_vars) == {"sum", "half", "passed"}
    assert "hidden_valid" not in res.coords
    sums = fill_nav(data.astype(np.float64).sum(axis=(2, 3)), mask, np.float64)
    check_variable(res, "sum", sums, mask, ("scan_y", "scan_x"))
    check_variable(res, "half", sums / 2, mask, ("scan_y", "scan_x"))
    sel = selected(data, roi, 2).astype(np.float64)
    check_variable(res, "passed", sel.sum(axis=0), True, ("det_y", "det_x"))


def test_result_only_as_full_nav_array_is_shown_as_is(ds):
    roi = make_roi("random", NAV)
    res = ex.ResultsRuleUDF(returns=("half-full", "sum")).compute(ds, roi=roi)
    check_variable(res, "half", np.full(NAV, 0.5), roi, ("scan_y", "scan_x"))


def test_private_buffer_dropped_without_get_results(ds, data):
    res = ex.PrivateOnlyUDF().compute(ds)
    assert set(res.data_vars) == {"visible"}
    assert set(res.coords) == {"visible_valid"}
    check_variable(res, "visible", data.sum(axis=(2, 3)), True, ("scan_y", "scan_x"))


@pytest.mark.parametrize(
    ("udf", "message"),
    [
        pytest.param(
            ex.ResultsRuleUDF(returns=("half", "undeclared")),
            "get_results returned 'undeclared', which is not declared",
            id="undeclared",
        ),
        pytest.param(
            ex.ResultsRuleUDF(returns=("sum",)),
            "don't know how to set use='result_only' buffer 'half'; please implement `get_results`",
            id="result-only-missing",
        ),
        pytest.param(
            ex.NoGetResultsUDF(),
            "don't know how to set use='result_only' buffer 'extra'",
            id="result-only-no-get-results",
        ),
        pytest.param(
            ex.ResultsRuleUDF(returns=("half", "hidden")),
            "returned the private buffer 'hidden'",
            id="private-returned",
        ),
        pytest.param(
            ex.BadMergeAllUDF(),
            r"merge_all returned undeclared buffers \['surprise'\]",
            id="merge-all-undeclared",
        ),
        pytest.param(ex.MaskUDF(case="not-bool"), "has dtype float64, not bool", id="mask-dtype"),
        pytest.param(
            ex.MaskUDF(case="not-0-1"),
            r"has dtype uint8, not bool \(integer masks may hold only 0 and 1\)",
            id="mask-int-not-0-1",
        ),
        pytest.param(
            ex.MaskUDF(case="not-broadcastable"),
            r"\(shape \(3, 4\)\) does not broadcast to the result's shape \(4, 3\)",
            id="mask-shape",
        ),
    ],
)
def test_declaration_errors_at_graph_build(ds, udf, message):
    with pytest.raises(UDFError, match=message):
        udf.lazy(ds)


class _Declares(UDF):
    def get_result_buffers(self):
        return self.params.buffers

    def process_frame(self, frame):
        pass


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda u: {"x": u.buffer(kind="everywhere")}, "buffer kind='everywhere' is unknown"),
        (lambda u: {"x": u.buffer(kind="nav", use="public")}, "buffer use='public' is unknown"),
        (lambda u: {"x": u.buffer(kind="nav", extra_shape=(2, -1))}, "negative dims"),
        (lambda u: {"x": u.buffer(kind="nav", where="moon")}, "where='moon' is unknown"),
        (lambda u: {"x": np.zeros(3)}, "'x' is not declared with self.buffer"),
        (lambda u: [u.buffer(kind="nav")], "must return a dict of buffers"),
        (lambda u: {"a/b": u.buffer(kind="nav")}, r"'a/b' is not a valid buffer name"),
        (lambda u: {"": u.buffer(kind="nav")}, r"'' is not a valid buffer name"),
        (lambda u: {"2x": u.buffer(kind="nav")}, r"'2x' is not a valid buffer name"),
        (lambda u: {"a b": u.buffer(kind="nav")}, r"'a b' is not a valid buffer name"),
        (lambda u: {1: u.buffer(kind="nav")}, r"1 is not a valid buffer name"),
    ],
    ids=[
        "kind",
        "use",
        "extra",
        "where",
        "array",
        "list",
        "slash",
        "empty",
        "digit",
        "space",
        "int",
    ],
)
def test_bad_buffer_declarations(ds, make, message):
    class Bad(_Declares):
        def get_result_buffers(self):
            return make(self)

    with pytest.raises(UDFError, match=message):
        Bad().lazy(ds)


# -- merging -----------------------------------------------------------------------------------


def test_nav_and_sig_buffers_without_merge_fail_at_build(ds):
    with pytest.raises(MergeNotImplementedError, match=r"non-nav buffers \['sig'\]") as info:
        ex.NoMergeUDF().lazy(ds)
    assert isinstance(info.value, NotImplementedError)
    assert isinstance(info.value, UDFError)


@pytest.mark.parametrize("roi_kind", ROIS)
def test_nav_only_without_merge(ds, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    mask = roi_mask(roi, NAV)
    res = ex.NavOnlyNoMergeUDF().compute(ds, roi=roi)
    sums = fill_nav(data.astype(np.float64).sum(axis=(2, 3)), mask, np.float64)
    check_variable(res, "total", sums, mask, ("scan_y", "scan_x"))
    rows = np.arange(3) + np.arange(NAV[1])[None, :, None] + np.zeros((NAV[0], 1, 1), int)
    check_variable(
        res, "rows", fill_nav(rows, mask, np.int32), mask[..., None], ("scan_y", "scan_x", "rows_0")
    )


@pytest.mark.parametrize("roi_kind", ROIS)
def test_merge_all_only(ds, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    res = ex.MergeAllOnlyUDF().compute(ds, roi=roi)
    sel = selected(data, roi, 2).astype(np.float64)
    check_variable(res, "intensity", sel.sum(axis=0), True, ("det_y", "det_x"))
    check_variable(res, "count", [len(sel)], True, ("count_0",))


def test_tree_merge_over_many_partitions(data, tmp_path):
    """More partitions than one merge step takes (several levels of the tree)."""
    big = random_data((9, 10, 3, 4), "float32", seed=2)
    with partitions(4 * 12):  # one frame per partition: 90 partitions
        ds = open_dataset("raw", big, tmp_path)
    assert len(ds.get_partitions()) == 90
    roi = make_roi("random", (9, 10))
    res = ex.MergeOnlyUDF().compute(ds, roi=roi)
    sel = selected(big, roi, 2).astype(np.float64)
    check_variable(res, "maximum", sel.max(axis=0), True, ("det_y", "det_x"))
    check_variable(res, "count", [len(sel)], True, ("count_0",))
    order = (np.cumsum(roi.reshape(-1)) - 1).reshape(roi.shape)
    check_variable(res, "order", fill_nav(order, roi, np.int64), roi, ("scan_y", "scan_x"))


# -- valid masks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("roi_kind", ROIS)
def test_custom_valid_masks(ds, data, roi_kind):
    roi = make_roi(roi_kind, NAV)
    mask = roi_mask(roi, NAV)
    count = int(mask.sum())
    sel = selected(data, roi, 2).astype(np.float64)
    sig_dims = ("det_y", "det_x")
    single_dims = ("single_0", "single_1")

    res = ex.MaskUDF(case="scalars").compute(ds, roi=roi)
    check_variable(res, "sig", sel.sum(axis=0), True, sig_dims)
    check_variable(res, "single", np.full((4, 3), count), False, single_dims)
    # a nav buffer with extra_shape: the ROI broadcast over the extra dims
    sums = fill_nav(np.repeat(data.sum(axis=(2, 3))[..., None], 2, -1), mask, np.float64)
    check_variable(res, "nav", sums, mask[..., None], ("scan_y", "scan_x", "nav_0"))

    res = ex.MaskUDF(case="custom").compute(ds, roi=roi)
    custom = np.zeros((4, 3), dtype=bool)
    custom[1:3, ::2] = True
    check_variable(res, "single", np.full((4, 3), count), custom, single_dims)

    res = ex.MaskUDF(case="rows").compute(ds, roi=roi)
    rows = np.broadcast_to(np.array([True, False, True])[:, None], SIG)
    check_variable(res, "sig", sel.sum(axis=0), rows, sig_dims)

    # LiberTEM's with_mask(..., mask=1) and mask=0: integer masks of 0 and 1 are booleans
    res = ex.MaskUDF(case="ints").compute(ds, roi=roi)
    check_variable(res, "sig", sel.sum(axis=0), True, sig_dims)
    check_variable(res, "single", np.full((4, 3), count), False, single_dims)
    assert res["sig_valid"].dtype == bool


@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_get_valid_nav_mask_timing(ds, roi_kind):
    """None in process_*, a 1-D mask that is never all True in merge (asserted inside the
    UDF), and in get_results ROI-compressed or, with ``full_nav=True``, the whole nav."""
    roi = make_roi(roi_kind, NAV)
    count = int(roi_mask(roi, NAV).sum())
    res = ex.ValidMaskProbeUDF().compute(ds, roi=roi)
    np.testing.assert_array_equal(res["merge_counts"].values, [count, np.prod(NAV)])


# -- parameters ----------------------------------------------------------------------------------


def test_params_access(ds):
    res = ex.ParamsUDF(int_param=5, is_222=222).compute(ds)
    np.testing.assert_array_equal(res["vals"].values, [5, 222, 333, -1])
    udf = ex.ParamsUDF(int_param=5)
    assert udf.params.int_param == 5
    assert udf.params.get("is_missing") is None
    with pytest.raises(AttributeError, match="is_missing"):
        _ = udf.params.is_missing


# -- ROI validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roi", "message"),
    [
        pytest.param(np.ones((5, 4), bool), r"roi of shape \(5, 4\) does not fit", id="transposed"),
        pytest.param(np.ones(19, bool), r"roi of shape \(19,\) does not fit", id="flat-short"),
        pytest.param(np.ones((4, 5, 1), bool), r"\(4, 5, 1\) does not fit", id="extra-dim"),
        pytest.param([((0, 1), True), ((1, 1), False)], "same value", id="mixed-values"),
        pytest.param([(0, 1), (1, 1)], r"\(coordinates, value\) pairs", id="bare-coordinates"),
        pytest.param((4, 0), r"position \(4, 0\) is not in the nav shape \(4, 5\)", id="outside"),
        pytest.param((1, 2, 3), r"position \(1, 2, 3\) is not in", id="too-many-coordinates"),
    ],
)
def test_bad_roi_fails_at_build(ds, roi, message):
    with pytest.raises(UDFError, match=message):
        ex.SumSigPerFrameUDF().lazy(ds, roi=roi)
    with pytest.raises(UDFError, match=message):
        ltdask.lazy(ds, [ex.SumSigPerFrameUDF(), ex.SumUDF()], roi=roi)


def _roi_forms():
    import scipy.sparse
    import sparse

    roi = make_roi("random", NAV)
    coords = [(tuple(int(c) for c in ij), True) for ij in zip(*np.nonzero(roi), strict=True)]
    outside = [(tuple(int(c) for c in ij), False) for ij in zip(*np.nonzero(~roi), strict=True)]
    one = np.zeros(NAV, bool)
    one[2, 3] = True
    return [
        pytest.param(sparse.COO.from_numpy(roi), roi, id="sparse-coo"),
        pytest.param(sparse.DOK.from_numpy(roi), roi, id="sparse-dok"),
        pytest.param(scipy.sparse.csr_matrix(roi), roi, id="scipy-csr-matrix"),
        pytest.param(scipy.sparse.coo_array(roi), roi, id="scipy-coo-array"),
        pytest.param(coords, roi, id="coordinate-pairs"),
        pytest.param(tuple(outside), roi, id="coordinate-pairs-false"),
        pytest.param((2, 3), one, id="one-position"),
        pytest.param(roi.reshape(-1), roi, id="flat"),
    ]


@pytest.mark.parametrize("form, roi", _roi_forms())
def test_roi_forms(ds, data, form, roi):
    res = ex.SumSigPerFrameUDF().compute(ds, roi=form)
    expected = fill_nav(data.sum(axis=(2, 3)), roi, np.float32)
    check_variable(res, "intensity", expected, roi, ("scan_y", "scan_x"))


@pytest.mark.parametrize("dtype", [np.uint8, float, int])
def test_non_bool_roi_is_cast_with_a_warning(ds, data, dtype):
    roi = make_roi("random", NAV)
    with pytest.warns(UserWarning, match=f"ROI dtype is {np.dtype(dtype)}, expected bool"):
        res = ex.SumSigPerFrameUDF().compute(ds, roi=roi.astype(dtype) * 3)
    expected = fill_nav(data.sum(axis=(2, 3)), roi, np.float32)
    check_variable(res, "intensity", expected, roi, ("scan_y", "scan_x"))


def test_sparse_roi_accepted(ds, data):
    sparse = pytest.importorskip("sparse")
    roi = make_roi("random", NAV)
    res = ex.SumSigPerFrameUDF().compute(ds, roi=sparse.COO.from_numpy(roi))
    expected = fill_nav(data.sum(axis=(2, 3)), roi, np.float32)
    check_variable(res, "intensity", expected, roi, ("scan_y", "scan_x"))


def test_not_a_udf(ds):
    with pytest.raises(UDFError, match="is not an ltdask.UDF instance"):
        ltdask.lazy(ds, [ex.SumUDF(), object()])
    with pytest.raises(UDFError, match="empty list of UDFs - nothing to do!"):
        ltdask.lazy(ds, [])


def test_udf_with_own_init(ds, data):
    roi = make_roi("random", NAV)
    res = ex.InitUDF("2", offset=3.0).compute(ds, roi=roi)
    expected = data.astype(np.float64).sum(axis=(2, 3)) * 2 + 3
    check_variable(res, "scaled", fill_nav(expected, roi, np.float64), roi, ("scan_y", "scan_x"))
    a = ex.InitUDF("2", offset=3.0).lazy(ds)["scaled"].data.name
    assert a == ex.InitUDF(2.0, offset=3).lazy(ds)["scaled"].data.name
    assert a != ex.InitUDF(2.5, offset=3).lazy(ds)["scaled"].data.name


class _Positional(UDF):
    def __init__(self, threshold):
        super().__init__(thr=threshold)

    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav")}

    def process_frame(self, frame):
        self.results.n[:] = (frame > self.params.thr).sum()


def test_udf_that_cannot_be_made_again_says_how_to_fix_it(ds):
    with pytest.raises(
        UDFError,
        match=r"_Positional cannot be made again from its parameters: "
        r"_Positional\(\*\*\{'thr': 3\}\)"
        r".*pass every parameter as a keyword named as in _Positional.__init__",
    ):
        _Positional(3).compute(ds)


@pytest.mark.parametrize(
    "kind, extra_shape",
    [("single", (2**20, 2**20)), ("sig", (2**30,)), ("nav", (2**40,))],
)
def test_unallocatable_buffer_is_named(ds, kind, extra_shape):
    class Huge(_Declares):
        def get_result_buffers(self):
            return {"huge": self.buffer(kind=kind, extra_shape=extra_shape)}

        def merge(self, dest, src):
            pass

    with pytest.raises(
        MemoryError, match=rf"result buffer 'huge' \(kind='{kind}'\) of shape \(.*\) and dtype"
    ):
        Huge(buffers=None).compute(ds)
