"""Bad input to UDF runs and to the command line, systematically: ROIs, UDF parameters,
preferred input dtypes, NaN and inf in the data; the CLI on FIFOs and devices.

Every case must raise a clear, documented exception (see ``tests/badinput.py``); NaN and
inf in the data propagate as numpy propagates them. At the end of the module a table of
every case and what it raised is printed. Bad input to the openers is tested next to them:
``tests/formats/test_<format>_errors.py`` and ``tests/io/test_errors.py``.
"""

from __future__ import annotations

import re

import dask
import numpy as np
import pytest
from helpers.badinput import (
    FRAMES,
    NAV,
    NOT_REGULAR,
    SIG,
    case_id,
    expect,
    record,
    report,
    scan_data,
    special,
)

import ltdask
from ltdask import UDF, DataSetError, UDFError, from_array, open_raw
from ltdask.udf import (
    ApplyMasksUDF,
    AutoUDF,
    CoMUDF,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)


@pytest.fixture(scope="module", autouse=True)
def report_table(request):
    """Print every case's exception at the end of the module."""
    yield from report(request)


# -- UDF runs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_ds():
    with dask.config.set({"ltdask.partition-bytes": 6 * 64 * 4, "ltdask.min-partitions": 1}):
        ds = from_array(scan_data("<f4"))
        ds.get_partitions()
    return ds


ROI_CASES = [
    pytest.param(np.ones((6, 4), bool), r"roi of shape \(6, 4\) does not fit .*\(4, 6\)",
                 id="roi-transposed"),
    pytest.param(np.ones(23, bool), r"roi of shape \(23,\).*24", id="roi-flat-too-short"),
    pytest.param(np.ones((4, 6, 1), bool), r"roi of shape \(4, 6, 1\)", id="roi-3d"),
    pytest.param(np.full((4, 6), "a"), r"roi must be a boolean \(or numeric\) array, got dtype <U1",
                 id="roi-strings"),
    pytest.param("all", r"roi of shape \(\) does not fit", id="roi-string"),
    pytest.param(np.ones((), bool), r"roi of shape \(\)", id="roi-scalar"),
]  # fmt: skip


@pytest.mark.parametrize(("roi", "match"), ROI_CASES)
@pytest.mark.parametrize("run", ["compute", "lazy", "iter"])
def test_roi(request, small_ds, roi, match, run):
    def go():
        if run == "compute":
            return ltdask.compute(small_ds, [SumUDF(), SumSigUDF()], roi=roi)
        if run == "lazy":
            return ltdask.lazy(small_ds, [SumUDF()], roi=roi)
        return list(ltdask.iter(small_ds, [SumUDF()], roi=roi))

    expect(request, UDFError, match, go)


@pytest.mark.parametrize(
    "roi",
    [np.ones((4, 6), np.int64), np.ones((4, 6), np.float32), np.full((4, 6), np.nan)],
    ids=["roi-int", "roi-float", "roi-nan"],
)
def test_numeric_roi_cast_with_warning(small_ds, roi):
    """As LiberTEM: a numeric ROI warns and is cast to bool (NaN is True)."""
    with pytest.warns(UserWarning, match=rf"ROI dtype is {roi.dtype}, expected bool"):
        (res,) = ltdask.compute(small_ds, [SumUDF()], roi=roi)
    (full,) = ltdask.compute(small_ds, [SumUDF()], roi=roi.astype(bool))
    np.testing.assert_array_equal(res["intensity"].values, full["intensity"].values)


def _masks(shape):
    return lambda: np.ones(shape, np.float32)


UDF_CASES = [
    pytest.param(lambda: ApplyMasksUDF([_masks((7, 8))]), UDFError,
                 r"masks have shape \(7, 8\), the frames \(8, 8\)", id="masks-wrong-shape"),
    pytest.param(lambda: ApplyMasksUDF(lambda: np.ones((3, 8, 9))), UDFError,
                 r"\(8, 9\)", id="mask-stack-wrong-shape"),
    pytest.param(lambda: ApplyMasksUDF([]), UDFError, r"mask_factories is empty",
                 id="masks-empty"),
    pytest.param(lambda: ApplyMasksUDF([_masks(SIG)], mask_count=3), UDFError,
                 r"mask_count=3 but the factories give 1", id="mask-count-wrong"),
    pytest.param(lambda: ApplyMasksUDF([np.ones(SIG)]), (UDFError, TypeError),
                 r"callable|not callable", id="mask-not-callable"),
    pytest.param(lambda: ApplyMasksUDF([lambda: "mask"]), (UDFError, ValueError),
                 r"mask|shape", id="mask-factory-returns-str"),
    pytest.param(lambda: CoMUDF.with_params(r=2, ri=5), ValueError,
                 r"outer radius r=2 is smaller than inner ri=5", id="com-r-below-ri"),
    pytest.param(lambda: CoMUDF.with_params(regression=5), ValueError, r"regression.*not 5",
                 id="com-regression-5"),
    pytest.param(lambda: CoMUDF.with_params(regression=np.zeros((2, 2))), ValueError,
                 r"3×2 array", id="com-regression-shape"),
    pytest.param(lambda: CoMUDF.with_params(r=-1), (UDFError, ValueError), r"r=-1",
                 id="com-negative-radius"),
    pytest.param(lambda: SumUDF(dtype="foo"), (UDFError, TypeError, ValueError), r"foo",
                 id="sum-dtype-garbage"),
    pytest.param(lambda: StdDevUDF(dtype="foo"), (UDFError, TypeError, ValueError), r"foo",
                 id="stddev-dtype-garbage"),
    pytest.param(lambda: AutoUDF(f=None), (UDFError, TypeError), r"None|callable",
                 id="auto-f-none"),
    pytest.param(lambda: "SumUDF", UDFError, r"'SumUDF' is not an ltdask\.UDF", id="not-a-udf"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "expected", "match"), UDF_CASES)
def test_udf_parameters(request, small_ds, make, expected, match):
    expect(request, expected, match, lambda: ltdask.compute(small_ds, [make()]))


def test_com_needs_2d_nav(request):
    ds = from_array(np.zeros((24, 8, 8), np.float32))
    expect(request, ValueError, r"CoMUDF needs 2-D nav .*\(24, 8, 8\)", CoMUDF().compute, ds)


def test_map_function_raises(request, small_ds):
    def bad(frame):
        if frame[0, 0] > 1000:
            raise ArithmeticError("bad frame")
        return frame.sum()

    with pytest.raises(ArithmeticError, match="bad frame") as info:
        ltdask.map(small_ds, bad)
    assert any("ltdask: while running AutoUDF on partition" in n for n in info.value.__notes__)
    record(case_id(request), info.value)


def test_no_udfs(request, small_ds):
    expect(request, UDFError, r"empty list of UDFs - nothing to do!", ltdask.compute, small_ds, [])


class _Prefers(UDF):
    """A UDF whose tiles would be `dtype`: LiberTEM lets it through to numba's TypingError."""

    def __init__(self, dtype):
        super().__init__(dtype=dtype)

    def get_preferred_input_dtype(self):
        return self.params.dtype

    def get_result_buffers(self):
        return {"peak": self.buffer(kind="nav", dtype="float64")}

    def process_frame(self, frame):
        self.results.peak[:] = frame.max()


@pytest.mark.parametrize(
    ("dtype", "match"),
    [
        pytest.param(object, r"cannot be read as object \(not a bool", id="object"),
        pytest.param(np.longdouble, r"cannot be read as float128 \(extended", id="float128"),
        pytest.param(np.clongdouble, r"cannot be read as complex256", id="complex256"),
    ],
)
@pytest.mark.parametrize("how", ["compute", "lazy", "with-sum"])
def test_udf_preferred_dtype_refused_at_run_start(request, small_ds, how, dtype, match):
    udf = _Prefers(dtype)
    run = {
        "compute": lambda: udf.compute(small_ds),
        "lazy": lambda: udf.lazy(small_ds),  # refused when built, not when computed
        "with-sum": lambda: ltdask.compute(small_ds, [SumUDF(), udf]),
    }[how]
    message = match + r".*get_preferred_input_dtype\(\); return one of bool, .*complex128"
    expect(request, UDFError, message, run)


# -- corrections that do not fit the run's dtype ------------------------------------------------
def _beyond_float32(name):
    values = np.ones(SIG)
    values[2, 5] = 1e39 if name == "gain" else -1e39
    return ltdask.CorrectionSet(**{name: values})


BEYOND = r"CorrectionSet {} holds {}1e\+39 \(at \(2, 5\)\), beyond the range of float32.*float64"

CORRECTION_RUNS = {
    "sumsig": lambda ds, cs: SumSigUDF().compute(ds, corrections=cs),
    "stddev-lazy": lambda ds, cs: StdDevUDF().lazy(ds, corrections=cs),
    "to-dask": lambda ds, cs: ds.to_dask(corrections=cs),
}


@pytest.mark.parametrize("run", list(CORRECTION_RUNS))
@pytest.mark.parametrize("name", ["gain", "dark"])
def test_corrections_beyond_float32(request, small_ds, name, run):
    # a float64 gain of 1e39 passed the finite check and became inf in float32 frames:
    # SumSigUDF gave inf and NaN
    cs = _beyond_float32(name)
    match = BEYOND.format(name, "-" if name == "dark" else "")
    expect(request, DataSetError, match, CORRECTION_RUNS[run], small_ds, cs)


def test_corrections_beyond_float32_fit_float64(small_ds):
    cs = _beyond_float32("gain")
    data = scan_data("<f4").astype(np.float64)
    got = ltdask.udf.SumUDF(dtype="float64").compute(small_ds, corrections=cs)
    np.testing.assert_allclose(got["intensity"].values, (data * cs.gain).sum(axis=(0, 1)))
    got = small_ds.to_dask(corrections=cs, dtype="float64").sum(axis=(2, 3)).compute()
    np.testing.assert_allclose(got, (data * cs.gain).sum(axis=(2, 3)))


class _Backends(SumSigUDF):
    """A UDF whose ``get_backends()`` returns `returns`."""

    def __init__(self, returns=None):
        super().__init__()
        self._returns = returns

    def get_backends(self):
        return self._returns


@pytest.mark.parametrize(
    ("returns", "match"),
    [
        pytest.param(None, r"_Backends.get_backends\(\) returned None; return a tuple of names "
                     r"from UDF.BACKEND_\*", id="get-backends-none"),
        pytest.param(3, r"_Backends.get_backends\(\) returned 3; return a tuple",
                     id="get-backends-int"),
        pytest.param([["numpy"]], r"returned \[\['numpy'\]\]: unknown array backend \['numpy'\]; "
                     r"return a tuple", id="get-backends-nested"),
    ],
)  # fmt: skip
def test_get_backends_returns_garbage(request, small_ds, returns, match):
    # None gave "TypeError: 'NoneType' object is not iterable" from inside the planner
    expect(request, UDFError, match, _Backends(returns).compute, small_ds)


# -- NaN and inf propagate like numpy --------------------------------------------------------------
@pytest.fixture(scope="module")
def nan_data():
    data = scan_data("<f4") / 100
    data[0, 1, 2, 3] = np.nan
    data[1, 2] = np.inf
    data[2, 3, 4, 5] = -np.inf
    data[3, 4, 5, 6] = np.inf  # with -inf elsewhere: inf - inf in sums over nav is fine
    return data


def _nan_udfs():
    return [
        SumUDF(),
        SumSigUDF(),
        StdDevUDF(),
        ApplyMasksUDF([lambda: np.ones(SIG, np.float32), lambda: np.eye(8, dtype=np.float32)]),
        PickUDF(),
    ]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("source", ["memory", "raw"])
def test_nan_and_inf_propagate(tmp_path, nan_data, source):
    if source == "memory":
        ds = from_array(nan_data)
    else:
        nan_data.tofile(tmp_path / "nan.raw")
        ds = open_raw(tmp_path / "nan.raw", nav_shape=NAV, sig_shape=SIG, dtype="float32")

    data64 = nan_data.astype(np.float64)
    with np.errstate(invalid="ignore"):
        total, per_frame, std, masks, pick = ltdask.compute(ds, _nan_udfs())
        expected_std = data64.reshape(FRAMES, *SIG).std(axis=0)
        expected_var = data64.reshape(FRAMES, *SIG).var(axis=0)

    def same(actual, expected, rtol=1e-5):
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(actual), np.isposinf(expected))
        np.testing.assert_array_equal(np.isneginf(actual), np.isneginf(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol)

    same(total["intensity"].values, data64.sum(axis=(0, 1)))
    same(per_frame["intensity"].values, data64.sum(axis=(2, 3)))
    same(std["var"].values, expected_var)
    same(std["std"].values, expected_std)
    with np.errstate(invalid="ignore"):  # 0 * inf is NaN, in numpy as in the UDF
        stack = np.stack([np.ones(SIG), np.eye(8)]).reshape(2, -1)
        expected_masks = (data64.reshape(FRAMES, -1) @ stack.T).reshape(*NAV, 2)
    same(masks["intensity"].values, expected_masks)
    same(pick["intensity"].values.reshape(nan_data.shape), nan_data, rtol=0)
    same(ds.to_dask().sum(axis=(0, 1)).compute(scheduler="sync"), data64.sum(axis=(0, 1)))
    record("nan-inf-propagate[" + source + "]", None, "sums, std, masks, pick: like numpy")


def test_inf_in_frames_cut_into_tiles(tmp_path):
    """NaN and inf in frames cut into several signal slices: per-frame sums as numpy's."""
    data = np.ones((2, 3, 128, 128), np.float32)
    data[0, 1, 3, 5] = np.inf
    data[1, 2, 100, 5] = -np.inf
    data[1, 0, 7, 7] = np.nan
    data.tofile(tmp_path / "big.raw")
    ds = open_raw(tmp_path / "big.raw", nav_shape=(2, 3), sig_shape=(128, 128), dtype="float32")
    with dask.config.set({"ltdask.tile-bytes": 4 * 128 * 32}):
        run = ltdask.udf.graph.Run(ds, [SumSigUDF()])
        assert len(run.scheme) > 1  # frames are cut into signal slices
        res = SumSigUDF().compute(ds)["intensity"].values
    np.testing.assert_array_equal(res, data.astype(np.float64).sum(axis=(2, 3)))
    record("inf-in-sliced-tiles", None, "SumSigUDF: inf stays inf over signal slices")


def test_nan_in_com(nan_data):
    """CoM of a frame with NaN is NaN (numpy: NaN weights make NaN moments); others finite."""
    data = np.abs(scan_data("<f4")) + 1
    data[0, 1, 2, 3] = np.nan
    res = CoMUDF.with_params(cy=4, cx=4).compute(from_array(data))
    com = res["raw_com"].values
    assert np.isnan(com[0, 1]).all()
    assert np.isfinite(np.delete(com.reshape(FRAMES, 2), 1, axis=0)).all()
    record("nan-in-com", None, "NaN frame -> NaN centre, others finite")


# -- the command line ---------------------------------------------------------------------------
@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_cli_info_on_fifo_and_device(tmp_path, kind):
    from click.testing import CliRunner

    from ltdask.cli import main

    path = special(tmp_path, kind, ".npy")
    result = CliRunner().invoke(main, ["info", str(path)])
    assert result.exit_code != 0
    assert re.search(NOT_REGULAR, result.output), result.output
    assert path.name in result.output
