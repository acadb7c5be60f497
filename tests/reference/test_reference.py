"""ltdask against LiberTEM 0.16's own results (``make_reference.py`` stored them in ``data/``).

Every case of ``cases.py`` runs through ``ltdask.compute`` (xarray results) and through
``ltdask.compat.Context().run_udf`` (``.data`` / ``.valid_mask`` / ``.raw_data``); values,
valid masks, dtypes and shapes are compared with LiberTEM's. Integer and boolean results must
be equal; floating results agree to ``rtol=RTOL[dtype]`` (float32: 1e-5, float64: 1e-9) with
``atol`` scaled to the largest magnitude of the result (summation order differs between the
two); NaNs must sit at the same places.

Deliberate differences, asserted rather than skipped (DESIGN.md, "Result layout"):

* Positions whose frame is not in the files (a ``sync_offset`` past either end) are False in
  ltdask's nav valid masks; LiberTEM marks them valid. The values there agree (zero frames).
* LiberTEM 0.16 refuses raw MIB at counter depth 1 with a frame width below 64 pixels (an
  ``AssertionError`` in its decoder); ltdask reads those files, and its results are checked
  against LiberTEM's results for the integer-mode file of the same counts (``RAW_MIB_TWIN``).
* LiberTEM 0.16 decodes raw MIB at counter depth 24 into ``uint16``: its first frame holds the
  low 16 bits of each count (asserted), the later ones other values altogether; ltdask gives
  the ``uint32`` counts, checked against LiberTEM's results for the integer-mode (``U32``) file
  of the same counts.

* CoMUDF declares its nav results in the input dtype (at least float32); LiberTEM 0.16's
  ``get_results`` returns float64 arrays for them, so without a ROI its ``.data`` is float64
  (with a ROI float32, its ``.raw_data`` float64), and its ``.raw_data`` of a scalar result
  (``field_y``, ``magnitude``...) has a trailing dim of 1. ltdask gives the declared dtype
  (float32 for float32 or uint16 data) everywhere and LiberTEM's usual ``(n,)`` raw data;
  values are compared at float32's resolution.
* ``SumUDF(dtype=<integer>)``: LiberTEM sums in that dtype and wraps around; ltdask sums in
  64 bits and raises ``OverflowError`` when the result does not fit. Asserted: ltdask
  refuses, and LiberTEM's values are ltdask's exact 64-bit sums modulo 2**bits.

Tolerances: the result dtype's (above), except ``StdDevUDF(dtype="float32")``, whose float64
results LiberTEM computes in float32 arithmetic (``F32_ARITHMETIC``: float32's ``rtol``), and
CoMUDF, whose results all derive from float32 centres of mass (float32's ``rtol``, ``atol``
scaled to the frame size, the magnitude of the positions whose difference a shift is).

Cases LiberTEM refuses with an error (CoMUDF on a non-2-D nav) must be refused by ltdask too.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import warnings

import numpy as np
import pytest
from reference import cases  # noqa: E402

import ltdask  # noqa: E402
from ltdask import UDF, masks  # noqa: E402
from ltdask.compat import Context  # noqa: E402
from ltdask.udf import (  # noqa: E402
    ApplyMasksUDF,
    CoMUDF,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

NS = dict(
    UDF=UDF,
    SumUDF=SumUDF,
    SumSigUDF=SumSigUDF,
    StdDevUDF=StdDevUDF,
    ApplyMasksUDF=ApplyMasksUDF,
    CoMUDF=CoMUDF,
    PickUDF=PickUDF,
    masks=masks,
    custom=cases.make_udfs(UDF),
    aux_data=UDF.aux_data,
)

RTOL = {np.dtype("float32"): 1e-5, np.dtype("float64"): 1e-9}
RTOL[np.dtype("complex64")] = RTOL[np.dtype("float32")]
RTOL[np.dtype("complex128")] = RTOL[np.dtype("float64")]

#: cases whose arithmetic LiberTEM does in float32 although the result is float64
F32_ARITHMETIC = {"stddev-f32"}

#: LiberTEM misreads these raw-mode MIB scans; ltdask must give what it gives for the
#: integer-mode file of the same counts
RAW_MIB_TWIN = {"mib-r64-d1": "mib-u08-d1", "mib-r64-d24": "mib-u32-d24"}

_WORKDIR = tempfile.mkdtemp(prefix="ltdask-reference-")
atexit.register(shutil.rmtree, _WORKDIR, ignore_errors=True)


@functools.cache
def reference(group):
    with np.load(cases.group_file(group)) as z:
        return dict(z.items())


def expected(case_id, group):
    ref = reference(group)
    prefix = case_id + "__"
    error = ref.get(prefix + "__error")
    buffers = {}
    for key, value in ref.items():
        if key.startswith(prefix) and key.endswith("__valid"):
            name = key[len(prefix) : -len("__valid")]
            base = prefix + name
            buffers[name] = (ref[base], value, ref.get(base + "__raw"))
    return error, buffers


@functools.cache
def dataset(ds_key):
    filetype, kwargs = cases.dataset_load(ds_key, _WORKDIR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Context().load(filetype, **kwargs)


def _udf(ds_key, udf_key):
    nav, sig = cases.dataset_shape(ds_key)
    return cases.make_udf(udf_key, NS, sig, nav)


def run_compute(ds_key, roi_kind, udf_key):
    nav, _ = cases.dataset_shape(ds_key)
    roi = cases.roi(roi_kind, nav)
    ds = dataset(ds_key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if udf_key == "auto":
            res = ltdask.map(ds, cases.auto_fn, roi=roi).to_dataset()
        else:
            (res,) = ltdask.compute(ds, [_udf(ds_key, udf_key)], roi=roi)
    return {
        name: (np.asarray(var.values), np.asarray(res.coords[f"{name}_valid"].values), None)
        for name, var in res.data_vars.items()
    }


def run_context(ds_key, roi_kind, udf_key):
    nav, _ = cases.dataset_shape(ds_key)
    roi = cases.roi(roi_kind, nav)
    ds = dataset(ds_key)
    ctx = Context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if udf_key == "auto":
            buf = ctx.map(dataset=ds, f=cases.auto_fn, roi=roi)
            return {"result": (np.asarray(buf.data), np.asarray(buf.valid_mask), buf.raw_data)}
        res = ctx.run_udf(dataset=ds, udf=_udf(ds_key, udf_key), roi=roi)
    return {
        name: (np.asarray(b.data), np.asarray(b.valid_mask), np.asarray(b.raw_data))
        for name, b in res.items()
    }


def assert_values(case_id, name, got, want, rtol=None, scale=0.0, declared=None):
    assert got.shape == want.shape, (case_id, name, got.shape, want.shape)
    if declared is not None and name.split(".")[0] != "regression":
        # CoMUDF: ltdask keeps the declared dtype where LiberTEM returns float64
        assert got.dtype == declared, (case_id, name, got.dtype, declared)
        want = want.astype(declared)
    assert got.dtype == want.dtype, (case_id, name, got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        assert np.array_equal(np.isnan(got), np.isnan(want)), (case_id, name, "NaN positions")
        finite = ~np.isnan(want)
        scale = max(scale, float(np.max(np.abs(want[finite]), initial=0.0)))
        rtol = rtol or RTOL[want.dtype]
        np.testing.assert_allclose(
            got[finite], want[finite], rtol=rtol, atol=rtol * scale, err_msg=f"{case_id} {name}"
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{case_id} {name}")


def broadcast(nav_mask, like):
    extra = like.ndim - nav_mask.ndim
    return np.broadcast_to(nav_mask.reshape(nav_mask.shape + (1,) * extra), like.shape)


def compare(case_id, ds_key, roi_kind, got, want, rtol=None, scale=0.0, declared=None):
    assert sorted(got) == sorted(want), (case_id, sorted(got), sorted(want))
    missing = cases.missing_frames(ds_key)
    nav, _ = cases.dataset_shape(ds_key)
    for name, (want_data, want_valid, want_raw) in want.items():
        got_data, got_valid, got_raw = got[name]
        assert_values(case_id, name, got_data, want_data, rtol, scale, declared)
        if got_raw is not None:  # compat.Context's .raw_data
            raw = np.asarray(got_raw)
            if declared is not None and want_raw.shape == raw.shape + (1,):
                want_raw = want_raw[..., 0]  # CoMUDF: LiberTEM's (n, 1) for a scalar result
            assert_values(case_id, name + ".raw_data", raw, want_raw, rtol, scale, declared)
        assert got_valid.shape == want_valid.shape, (case_id, name)
        is_nav = want_valid.shape[: len(nav)] == tuple(nav)
        if missing is not None and is_nav:
            lost = missing.reshape(nav)
            # the deliberate difference: LiberTEM calls frames it never read valid (where
            # they are in the ROI); ltdask does not
            in_roi = cases.roi(roi_kind, nav)
            in_roi = np.ones(nav, bool) if in_roi is None else in_roi
            assert np.array_equal(want_valid[lost], broadcast(in_roi, want_valid)[lost]), (
                case_id,
                name,
            )
            expect = want_valid.copy()
            expect[lost] = False
            np.testing.assert_array_equal(got_valid, expect, err_msg=f"{case_id} {name} valid")
        else:
            np.testing.assert_array_equal(got_valid, want_valid, err_msg=f"{case_id} {name} valid")


UDF_CASES = [pytest.param(group, udf_key, id=case_id) for case_id, group, udf_key in cases.CASES]


@pytest.mark.parametrize("runner", [run_compute, run_context], ids=["compute", "context"])
@pytest.mark.parametrize(("group", "udf_key"), UDF_CASES)
def test_udf_case(group, udf_key, runner):
    ds_key, roi_kind = group
    case_id = f"{ds_key}-{roi_kind}-{udf_key}"
    error, want = expected(case_id, group)
    rtol, scale = None, 0.0
    if udf_key in F32_ARITHMETIC:
        rtol = RTOL[np.dtype("float32")]
    declared = None
    if udf_key.startswith("com-"):
        # every CoM result derives from float32 centres of mass: differences of pixel
        # positions up to the frame size, so float32's rtol of that size is the resolution
        rtol, scale = RTOL[np.dtype("float32")], float(max(cases.dataset_shape(ds_key)[1]))
        declared = np.result_type(dataset(ds_key).dtype, np.float32)
    if udf_key == "sum-uint16" and error is None:
        # LiberTEM wraps around; ltdask refuses and its 64-bit sums wrap to LiberTEM's
        with pytest.raises(OverflowError, match="do not fit the result dtype uint16"):
            runner(ds_key, roi_kind, udf_key)
        nav, _ = cases.dataset_shape(ds_key)
        exact = SumUDF(dtype="int64").compute(dataset(ds_key), roi=cases.roi(roi_kind, nav))
        np.testing.assert_array_equal(
            exact["intensity"].values % 2**16, want["intensity"][0].astype(np.int64)
        )
        assert (exact["intensity"].values >= 2**16).any()  # it does overflow
        return
    if ds_key in RAW_MIB_TWIN:
        # LiberTEM misreads the file (see module docstring); ltdask must equal the twin
        twin = RAW_MIB_TWIN[ds_key]
        twin_id = f"{twin}-{roi_kind}-{udf_key}"
        twin_error, twin_want = expected(twin_id, (twin, roi_kind))
        if ds_key == "mib-r64-d1":
            assert error is not None and "AssertionError" in str(error)
        elif udf_key == "custom-frames":
            frames = want["frame"][0]
            assert frames.dtype == np.uint16
            first = np.unravel_index(0, frames.shape[: frames.ndim - 2])
            np.testing.assert_array_equal(frames[first], twin_want["frame"][0][first] % 2**16)
        assert twin_error is None
        got = runner(ds_key, roi_kind, udf_key)
        compare(case_id, ds_key, roi_kind, got, twin_want, rtol, scale, declared)
        return
    if error is not None:
        with pytest.raises(Exception):  # noqa: B017, PT011 - LiberTEM's refusal, any type
            runner(ds_key, roi_kind, udf_key)
        return
    got = runner(ds_key, roi_kind, udf_key)
    compare(case_id, ds_key, roi_kind, got, want, rtol, scale, declared)


@functools.cache
def mask_reference():
    with np.load(cases.masks_file()) as z:
        return dict(z.items())


@pytest.mark.parametrize(
    ("name", "sig"),
    [pytest.param(name, sig, id=case_id) for case_id, name, sig in cases.MASK_FACTORY_CASES],
)
def test_mask_factory(name, sig):
    case_id = f"mask-{name}-{sig[0]}x{sig[1]}"
    want = mask_reference()[case_id]
    got = cases.call_mask(masks, cases.mask_specs(sig)[name])
    assert_values(case_id, "mask", got, want)


def test_case_count():
    assert len(cases.CASES) + len(cases.MASK_FACTORY_CASES) >= 150
