"""Result buffers: shapes, extra_shape, kinds under a ROI, fill values, in-place updates,
merging by attribute assignment, dtypes seen by the UDF (LiberTEM architecture notes, 4.2
"Buffers and shapes", "ROI" and "Dtypes")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    check_variable,
    fill_nav,
    make_roi,
    nav_dims,
    open_dataset,
    partitions,
    random_data,
    roi_mask,
    selected,
)

import ltdask
from ltdask.udf.buffers import Namespace

# the scan of the `data` and `ds` fixtures (conftest.py): 5 partitions
NAV, SIG, SEED, FRAMES_PER_PARTITION = (4, 6), (5, 3), 3, 5
SHAPE = (*NAV, *SIG)


@pytest.mark.parametrize("nav_shape", [(4, 6), (24,), (2, 3, 4)], ids=["2d", "1d", "3d"])
def test_nav_buffer_shape_follows_nav(data, nav_shape, tmp_path):
    arr = data.reshape((*nav_shape, *SHAPE[2:]))
    with partitions(4 * 15 * 5):
        ds = open_dataset("raw", arr, tmp_path)
    res = ex.SumSigPerFrameUDF().compute(ds)
    expected = arr.sum(axis=(-2, -1))
    check_variable(res, "intensity", expected, True, nav_dims(len(nav_shape)), np.float32)


@pytest.mark.parametrize(
    "extra",
    [pytest.param((), id="none"), pytest.param((2,), id="2"), pytest.param((2, 3), id="2x3")]
    + [pytest.param((0,), id="zero"), pytest.param((3, 0), id="3x0")],
)
@pytest.mark.parametrize("roi_kind", ["none", "random"])
def test_extra_shape(ds, data, extra, roi_kind):
    roi = make_roi(roi_kind, SHAPE[:2])
    mask = roi_mask(roi, SHAPE[:2])
    count = int(mask.sum())
    res = ex.ShapesUDF(extra=extra).compute(ds, roi=roi)

    def extra_dims(name):
        return tuple(f"{name}_{i}" for i in range(len(extra)))

    nav_expected = fill_nav(np.ones((*SHAPE[:2], *extra)), mask, np.float32)
    nav_valid = mask.reshape(mask.shape + (1,) * len(extra))
    check_variable(res, "nav", nav_expected, nav_valid, ("scan_y", "scan_x", *extra_dims("nav")))
    # sig and single accumulators see only the ROI's frames
    sig_dims = ("det_y", "det_x", *extra_dims("sig"))
    check_variable(res, "sig", np.full((*SHAPE[2:], *extra), count), True, sig_dims)
    single_shape = extra or (1,)
    single_dims = tuple(f"single_{i}" for i in range(len(single_shape)))
    check_variable(res, "single", np.full(single_shape, count), True, single_dims)


def test_single_counter_and_vector(ds, data):
    res = ex.CounterUDF().compute(ds)
    check_variable(res, "count", [24], True, ("count_0",), dtype=np.uint32)
    check_variable(res, "rows", data.sum(axis=(0, 1, 3)), True, ("rows_0",), dtype=np.float64)


def test_merge_by_attribute_assignment(ds, data):
    """``dest.x = src.x`` in merge writes into the buffer, like ``dest.x[:] = src.x``."""
    res = ex.SumSigAttrMergeUDF().compute(ds)
    check_variable(res, "intensity", data.sum(axis=(2, 3)), True, ("scan_y", "scan_x"))


def test_in_place_add_on_sig_buffer(ds, data):
    """``self.results.sum += frame`` (no ``[:]``) in process_frame and merge."""
    roi = make_roi("random", SHAPE[:2])
    res = ex.SumUDF().compute(ds, roi=roi)
    expected = selected(data, roi, 2).astype(np.float64).sum(axis=0)
    check_variable(res, "sum", expected, True, ("det_y", "det_x"), dtype=np.float64)


def test_namespace_assignment_semantics():
    arr = np.zeros(3)
    ns = Namespace({"x": arr}, assign_in_place=True)
    ns.x = np.arange(3)
    assert ns.x is arr
    np.testing.assert_array_equal(arr, [0, 1, 2])
    ns.x += 1
    np.testing.assert_array_equal(arr, [1, 2, 3])
    ns["x"] = 5
    np.testing.assert_array_equal(arr, [5, 5, 5])


FILL_DTYPES = [
    pytest.param("int64", 1, id="int64"),
    pytest.param("uint8", 1, id="uint8"),
    pytest.param("bool", True, id="bool"),
    pytest.param("float32", 1.0, id="float32"),
    pytest.param("float64", 1.0, id="float64"),
    pytest.param("complex64", 1 + 0j, id="complex64"),
    pytest.param("U4", "x", id="str"),
    pytest.param("S3", b"x", id="bytes"),
    pytest.param([("a", "i4"), ("b", "f4")], (1, 1.0), id="struct"),
    pytest.param(object, None, id="object"),
]


@pytest.mark.parametrize(("dtype", "inside"), FILL_DTYPES)
@pytest.mark.parametrize("roi_kind", ["random", "all-false"])
def test_fill_values_outside_roi(ds, dtype, inside, roi_kind):
    roi = make_roi(roi_kind, SHAPE[:2])
    res = ex.DtypeFillUDF(dtype=dtype).compute(ds, roi=roi)
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        order = np.cumsum(roi.reshape(-1)) - 1
        values = np.empty(roi.size, dtype=object)
        for i in range(roi.size):
            values[i] = ("frame", int(order[i]))
        expected = fill_nav(values.reshape(roi.shape), roi, object)
    else:
        values = np.empty(roi.shape, dtype=dtype)
        values[...] = inside
        expected = fill_nav(values, roi, dtype)
    var = res["value"]
    assert var.dtype == dtype
    if dtype.kind in "fc":
        np.testing.assert_array_equal(var.values, expected)  # NaN outside the ROI
        assert np.isnan(var.values[~roi]).all()
    else:
        assert var.values.tolist() == expected.tolist()
    np.testing.assert_array_equal(res.coords["value_valid"].values, roi)


def test_full_roi_equals_no_roi(ds):
    full = make_roi("all-true", SHAPE[:2])
    for udf in (ex.TileSumUDF(), ex.PixelsumUDF(), ex.CoordUDF(), ex.MergeOnlyUDF()):
        a = udf.compute(ds)
        b = udf.compute(ds, roi=full)
        for name in a.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values)
            np.testing.assert_array_equal(
                a.coords[f"{name}_valid"].values, b.coords[f"{name}_valid"].values
            )


@pytest.mark.parametrize("roi_shape", ["nav", "flat"])
def test_roi_is_copied_and_flat_roi_accepted(ds, data, roi_shape):
    roi = make_roi("random", SHAPE[:2])
    given = roi.copy() if roi_shape == "nav" else roi.reshape(-1).copy()
    lazy = ex.SumSigPerFrameUDF().lazy(ds, roi=given)
    given[...] = True  # changing the caller's array after building changes nothing
    res = lazy.compute()
    expected = fill_nav(data.sum(axis=(2, 3)), roi, np.float32)
    check_variable(res, "intensity", expected, roi, ("scan_y", "scan_x"))


def test_empty_roi_processes_nothing(ds):
    """An all-False ROI: no frame reaches the UDF; nav results are all fill values."""
    roi = make_roi("all-false", SHAPE[:2])
    res = ex.ExplodingUDF().compute(ds, roi=roi)
    assert np.isnan(res["x"].values).all()
    assert not res.coords["x_valid"].values.any()
    with pytest.raises(RuntimeError, match="processed a frame"):
        ex.ExplodingUDF().compute(ds, roi=~roi)


# -- dtypes -----------------------------------------------------------------------------------

# (UDF preference, dataset dtype) -> dtype the UDF sees
INPUT_DTYPES = [
    pytest.param("bool", "uint16", "uint16", id="bool-pref-u16"),
    pytest.param(None, "bool", "float32", id="default-bool"),
    pytest.param(None, "complex64", "complex64", id="default-c64"),
    pytest.param(None, "complex128", "complex128", id="default-c128"),
    pytest.param("int16", "uint16", "int32", id="i16-pref-u16"),
    pytest.param("native", "int32", "int32", id="native-i32"),
    pytest.param("native", "uint8", "uint8", id="native-u8"),
    pytest.param(None, "uint16", "float32", id="default-u16"),
    pytest.param(None, "int32", "float64", id="default-i32"),
    pytest.param(None, "float64", "float64", id="default-f64"),
    pytest.param("float64", "float32", "float64", id="f64-pref-f32"),
]


@pytest.mark.parametrize(("preferred", "ds_dtype", "seen"), INPUT_DTYPES)
@pytest.mark.parametrize("kind", ["memory", "raw"])
def test_input_dtype(kind, preferred, ds_dtype, seen, tmp_path):
    arr = random_data((3, 4, 2, 3), ds_dtype, seed=1)
    if ds_dtype == "bool":
        arr = arr > 20
    with partitions(4 * 6 * 5):
        ds = open_dataset(kind, arr, tmp_path)
    res = ex.InputDtypeUDF(preferred=preferred).compute(ds, roi=make_roi("random", (3, 4)))
    roi = make_roi("random", (3, 4))
    assert (res["seen"].values[roi] == seen).all()
    assert (res["meta_input"].values[roi] == seen).all()
    assert (res["meta_dataset"].values[roi] == np.dtype(ds_dtype).name).all()
    assert np.dtype(res.attrs["input_dtype"]) == np.dtype(seen)


def test_multi_udf_runs_share_the_input_dtype(tmp_path):
    arr = random_data((3, 4, 2, 3), "uint16", seed=1)
    with partitions(4 * 6 * 5):
        ds = open_dataset("raw", arr, tmp_path)
    native, default = ltdask.compute(ds, [ex.InputDtypeUDF(preferred="native"), ex.InputDtypeUDF()])
    assert (native["seen"].values == "float32").all()
    assert (default["seen"].values == "float32").all()
    alone = ex.InputDtypeUDF(preferred="native").compute(ds)
    assert (alone["seen"].values == "uint16").all()


def test_default_merge_refuses_unsafe_casts():
    udf = ex.NavOnlyNoMergeUDF()
    dest = Namespace({"total": np.zeros(3, np.float32)}, assign_in_place=True)
    with pytest.raises(TypeError, match="cannot merge buffer 'total'"):
        udf.merge(dest, Namespace({"total": np.ones(3, np.float64)}))
    udf.merge(dest, Namespace({"total": np.ones(3, np.float16)}))
    np.testing.assert_array_equal(dest.total, 1)
