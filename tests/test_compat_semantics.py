"""LiberTEM 0.16 semantics that its own test suite relies on (issue 30), one section per
gap: names, dtypes, messages and exception types a LiberTEM script or test sees. The
expected values come from numpy on the same data or from LiberTEM's documented
behaviour."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ltdask import UDF
from ltdask.compat import Context
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF, consolidate_result, run_stddev


@pytest.fixture
def data():
    return np.random.default_rng(0).random((4, 6, 5, 3)).astype(np.float32)


@pytest.fixture
def ctx():
    return Context.make_with("inline")


# -- 1. run_stddev and consolidate_result ------------------------------------------------------
@pytest.mark.parametrize("with_roi", [False, True], ids=["all", "roi"])
def test_run_stddev_gives_numpy_statistics(ctx, data, with_roi):
    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.random.default_rng(1).random(data.shape[:2]) > 0.5 if with_roi else None
    picked = data[roi] if with_roi else data.reshape(-1, *data.shape[2:])
    res = run_stddev(ctx, ds, roi=roi)
    assert sorted(res) == ["mean", "num_frames", "std", "sum", "var", "varsum"]
    assert type(res["num_frames"]) is int and res["num_frames"] == len(picked)
    wide = picked.astype(np.float64)
    for name, expected in [
        ("sum", wide.sum(axis=0)),
        ("mean", wide.mean(axis=0)),
        ("var", wide.var(axis=0)),
        ("std", wide.std(axis=0)),
        ("varsum", wide.var(axis=0) * len(picked)),
    ]:
        assert type(res[name]) is np.ndarray, name
        np.testing.assert_allclose(res[name], expected, rtol=1e-6, err_msg=name)


def test_consolidate_result_takes_run_udf_results(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    res = consolidate_result(ctx.run_udf(dataset=ds, udf=StdDevUDF()))
    assert res["num_frames"] == 24
    np.testing.assert_allclose(res["var"], data.reshape(24, 5, 3).var(axis=0), rtol=1e-5)


# -- 3. AuxData.raw_data ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra_shape", "shape"),
    [((), (6,)), ((1,), (6,)), ((2,), (6, 2))],
    ids=["scalar", "extra-1", "extra-2"],
)
def test_aux_data_raw_data_is_a_property(extra_shape, shape):
    values = np.arange(6 * int(np.prod(extra_shape))).reshape((2, 3, *extra_shape))
    aux = UDF.aux_data(values, kind="nav", extra_shape=extra_shape, dtype="int32")
    assert isinstance(aux.raw_data, np.ndarray)  # LiberTEM: BufferWrapper.raw_data property
    np.testing.assert_array_equal(aux.raw_data, values.reshape(shape))
    assert aux.raw_data.dtype == np.int32


# -- 4. buffer names ending in _valid ------------------------------------------------------------
class _ValidNamesUDF(UDF):
    """LiberTEM's test_valid_mask declares buffers such as ``all_valid``; here beside a
    buffer ``all`` whose mask would be ``all_valid``."""

    def get_result_buffers(self):
        return {
            "all": self.buffer(kind="nav", dtype="float32"),
            "all_valid": self.buffer(kind="nav", dtype="int32"),
            "total_valid": self.buffer(kind="single", dtype="int64"),
        }

    def process_frame(self, frame):
        self.results.all[:] = frame.sum()
        self.results.all_valid[:] = 7
        self.results.total_valid[:] += 1

    def merge(self, dest, src):
        dest.all[:] = src.all
        dest.all_valid[:] = src.all_valid
        dest.total_valid[:] += src.total_valid


def test_buffers_named_like_valid_masks(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.zeros(data.shape[:2], bool)
    roi[1, 2:5] = True
    res = _ValidNamesUDF().compute(ds, roi=roi)
    # the documented rule: NAME_valid, one more underscore before 'valid' where a result
    # already has that name
    assert set(res.data_vars) == {"all", "all_valid", "total_valid"}
    assert {"all__valid", "all_valid_valid", "total_valid_valid"} <= set(res.coords)
    np.testing.assert_array_equal(res["all__valid"], roi)
    np.testing.assert_array_equal(res["all_valid_valid"], roi)
    np.testing.assert_array_equal(res["all"].values[roi], data[roi].sum(axis=(1, 2)))
    np.testing.assert_array_equal(res["all_valid"].values, np.where(roi, 7, 0))
    assert res["total_valid"].values.tolist() == [3]
    # LiberTEM's view: the buffers by their names, each with its own valid mask
    buffers = ctx.run_udf(dataset=ds, udf=_ValidNamesUDF(), roi=roi)
    np.testing.assert_array_equal(buffers["all_valid"].raw_data, [7, 7, 7])
    np.testing.assert_array_equal(buffers["all"].valid_mask, roi)
    np.testing.assert_array_equal(buffers["all_valid"].valid_mask, roi)
    assert buffers["total_valid"].raw_data.tolist() == [3]


def test_ordinary_names_keep_name_valid(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    res = StdDevUDF().compute(ds)
    assert {f"{name}_valid" for name in res.data_vars} <= set(res.coords)


# -- 2. Analysis API dtypes and values ------------------------------------------------------------
def _numpy_com_shifts(data, cy, cx):
    """Centre of mass of whole frames relative to (cy, cx), float64."""
    frames = data.astype(np.float64)
    yy, xx = np.mgrid[: data.shape[2], : data.shape[3]]
    total = frames.sum(axis=(2, 3))
    return (
        (frames * yy).sum(axis=(2, 3)) / total - cy,
        (frames * xx).sum(axis=(2, 3)) / total - cx,
    )


@pytest.mark.parametrize(
    ("params", "with_roi"),
    [
        pytest.param({}, False, id="default"),
        pytest.param(dict(cy=2.1, cx=3.7, mask_radius=10.2), True, id="disk-roi"),
        pytest.param(dict(cy=17, cx=23, mask_radius=19, mask_radius_inner=3.1), False, id="ring"),
        pytest.param(dict(cy=7, cx=9, scan_rotation=13.3, flip_y=True), True, id="rot-flip"),
    ],
)
def test_com_analysis_agrees_with_com_udf(ctx, params, with_roi):
    from numpy.testing import assert_allclose

    from ltdask.udf import CoMUDF

    data = np.random.default_rng(3).random((6, 5, 32, 40)).astype(np.float32)
    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.random.default_rng(4).random((6, 5)) > 0.4 if with_roi else None
    analysis = ctx.create_com_analysis(dataset=ds, **params)
    got = ctx.run(analysis, roi=roi)
    p = analysis.parameters
    udf = CoMUDF.with_params(
        cy=p["cy"],
        cx=p["cx"],
        r=p["r"],
        ri=p["ri"],
        scan_rotation=p["scan_rotation"],
        flip_y=p["flip_y"],
    )
    res = ctx.run_udf(dataset=ds, udf=udf, roi=roi)
    # LiberTEM's own test (test_com.py) compares the two with assert_allclose's default
    # rtol=1e-7: they must compute alike, not only both be close to the truth
    x, y = got.field.raw_data
    assert x.dtype == y.dtype == np.float64  # LiberTEM 0.16's analysis dtype
    assert_allclose(res["field"].data, np.stack([y, x], axis=-1))
    assert_allclose(res["magnitude"].data, got.magnitude.raw_data)
    inside = np.ones((6, 5), bool) if roi is None else roi
    assert_allclose(res["divergence"].data[inside], got.divergence.raw_data[inside])
    assert_allclose(res["curl"].data[inside], got.curl.raw_data[inside])
    if not params:  # and both are the centre of mass numpy gives
        ny, nx = _numpy_com_shifts(data, 16, 20)
        assert_allclose(got.y.raw_data, ny, atol=1e-5)
        assert_allclose(got.x.raw_data, nx, atol=1e-5)


def test_mask_analysis_dtype_int_with_boolean_masks(ctx):
    # LiberTEM: results in numpy.result_type(dtype, mask dtype); boolean masks keep int
    rng = np.random.default_rng(5)
    data = rng.integers(0, 30000, (4, 5, 6, 7)).astype(np.int16)
    masks = rng.random((2, 6, 7)) > 0.5
    ds = ctx.load("memory", data=data, sig_dims=2)
    for use_sparse in (False, True):
        analysis = ctx.create_mask_analysis(
            dataset=ds, factories=lambda: masks, dtype=np.int32, use_sparse=use_sparse
        )
        got = ctx.run(analysis)
        expected = np.einsum("abij,mij->mab", data.astype(np.int64), masks.astype(np.int64))
        for m in range(2):
            raw = getattr(got, f"mask_{m}").raw_data
            assert raw.dtype == np.int32
            np.testing.assert_array_equal(raw, expected[m])
    # without dtype: float32, as LiberTEM (its default input dtype)
    assert (
        ctx.run(ctx.create_mask_analysis(dataset=ds, factories=lambda: masks)).mask_0.raw_data.dtype
        == np.float32
    )


# -- 5. LiberTEM's warning text and exception types ----------------------------------------------
@pytest.mark.parametrize("dtype", [int, float, None, np.uint8], ids=str)
def test_non_boolean_roi_warns_with_libertems_words(ctx, data, dtype):
    import ltdask

    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.zeros(data.shape[:2], dtype=dtype)
    roi[1, 2] = 1
    # LiberTEM's test_roi_dtype matches exactly this text, as a UserWarning
    text = f"ROI dtype is {roi.dtype}, expected bool. Attempting cast to bool."
    with pytest.warns(ltdask.ROIDtypeWarning, match=f"^{re.escape(text)}$") as caught:
        res = ctx.run_udf(dataset=ds, udf=SumUDF(), roi=roi)
    assert issubclass(caught[0].category, UserWarning)
    np.testing.assert_allclose(res["intensity"].data, data[1, 2])


@pytest.mark.parametrize(
    ("spec", "cpus"),
    [("inline", 4), ("synchronous", 2), ("delayed", 2), ("not_an_executor", None)],
)
def test_make_with_raises_executor_spec_exception(spec, cpus):
    from ltdask.compat import ExecutorSpecException

    with pytest.raises(ExecutorSpecException, match=spec) as caught:
        Context.make_with(spec, cpus=cpus)
    assert isinstance(caught.value, ValueError)  # (what ltdask raised before)


# -- 8. ctx.load("npy", nav_shape=...) ---------------------------------------------------------
def test_context_loads_a_flat_npy_stack_as_a_scan(ctx, tmp_path):
    stack = np.random.default_rng(6).random((16 * 4, 3, 5)).astype(np.float32)
    path = tmp_path / "stack.npy"
    np.save(path, stack)
    ds = ctx.load("npy", path=str(path), nav_shape=(16, 4))
    assert (ds.nav_shape, ds.sig_shape) == ((16, 4), (3, 5))
    res = ctx.run_udf(dataset=ds, udf=SumUDF(), roi=None)
    np.testing.assert_allclose(res["intensity"].data, stack.sum(axis=0), rtol=1e-5)
    frames = ctx.load("npy", path=str(path), nav_shape=(8, 8), sig_shape=(3, 5))
    np.testing.assert_array_equal(frames.to_dask().compute(), stack.reshape(8, 8, 3, 5))


# -- 6. plots, AutoUDF(monitor=True), self.results["x"].raw_data -------------------------------
class _Recorder:
    """A plot class that records what it is given (instead of drawing)."""

    made: list = []

    def __init__(self, dataset, udf, roi, channel, udfresult=None, **kwargs):
        self.udf, self.channel, self.updates = udf, channel, 0
        _Recorder.made.append(self)

    def display(self):
        pass

    def get_udf(self):
        return self.udf

    def new_data(self, udf_results, damage, force=False):
        self.updates += 1


def test_plots_with_fewer_lists_than_udfs(data):
    ds = Context().load("memory", data=data, sig_dims=2)
    ctx = Context.make_with("inline", plot_class=_Recorder)
    _Recorder.made = []
    total, frames = ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()], plots=[["intensity"]])
    # as LiberTEM: the UDFs after the last list are not plotted
    assert [(type(p.udf).__name__, p.channel) for p in _Recorder.made] == [("SumUDF", "intensity")]
    assert _Recorder.made[0].updates >= 1
    np.testing.assert_allclose(total["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)
    with pytest.raises(ValueError, match=r"plots: 3 lists of channels for 2 UDFs"):
        ctx.run_udf(dataset=ds, udf=[SumUDF(), SumSigUDF()], plots=[[], [], []])


@pytest.mark.parametrize("with_roi", [False, True], ids=["all", "roi"])
def test_auto_udf_monitor_is_the_last_result(ctx, data, with_roi):
    from ltdask.udf import AutoUDF

    ds = ctx.load("memory", data=data, sig_dims=2)
    roi = np.zeros(data.shape[:2], bool)
    roi[1, 1:4] = roi[2, 0] = True
    res = ctx.run_udf(
        dataset=ds,
        udf=AutoUDF(f=lambda frame: frame.sum(axis=0), monitor=True),
        roi=roi if with_roi else None,
    )
    frames = data[roi] if with_roi else data.reshape(-1, *data.shape[2:])
    np.testing.assert_allclose(res["result"].raw_data, frames.sum(axis=1), rtol=1e-5)
    # the result of the last position processed, in flat nav order
    assert res["monitor"].kind == "single"
    np.testing.assert_allclose(res["monitor"].data, frames[-1].sum(axis=0), rtol=1e-5)
    assert "monitor" not in ctx.run_udf(dataset=ds, udf=AutoUDF(f=np.max))


def test_dict_access_to_a_buffer_has_raw_data(ctx, data):
    import ltdask

    class RawDataInPostprocess(UDF):
        def get_result_buffers(self):
            return {"total": self.buffer(kind="sig", dtype="float64")}

        def process_frame(self, frame):
            self.results.total[:] += frame

        def postprocess(self):
            # LiberTEM: self.results["x"] is the buffer, with raw_data
            self.results["total"].raw_data[:] *= 2

        def merge(self, dest, src):
            dest.total[:] += src.total

    ds = ctx.load("memory", data=data, sig_dims=2)
    with pytest.warns(ltdask.UseDiscouragedWarning):
        res = ctx.run_udf(dataset=ds, udf=RawDataInPostprocess())
    np.testing.assert_allclose(res["total"].data, 2 * data.astype(np.float64).sum(axis=(0, 1)))


# -- 7. the async steps, FEMAnalysis / ApplyFFTMask, CoMUDF's regression ---------------------------
class _LatestIndexUDF(UDF):
    """LiberTEM's test_dynamic_parameter_update_*: each partition records the parameter."""

    def __init__(self, latest_index):
        super().__init__(latest_index=latest_index)

    def get_result_buffers(self):
        return {"index": self.buffer(kind="nav", dtype=int)}

    def process_partition(self, partition):
        self.results.index[:] = self.params.latest_index


@pytest.fixture
def small_partitions():
    import dask

    with dask.config.set({"ltdask.partition-bytes": 4 * 6 * 15, "ltdask.min-partitions": 1}):
        yield


def test_async_steps_update_parameters_and_close(ctx, data, small_partitions):
    import asyncio

    ds = ctx.load("memory", data=data, sig_dims=2)

    async def run():
        steps = ctx.run_udf_iter(dataset=ds, udf=[_LatestIndexUDF(latest_index=0)], sync=False)
        seen = []
        try:
            async for step in steps:
                seen.append(step.buffers[0]["index"].data.copy())
                await steps.update_parameters_experimental([{"latest_index": len(seen)}])
        finally:
            await steps.aclose()
        return seen

    seen = asyncio.run(run())
    assert len(seen) > 1
    # the first partition ran with 0, later ones with the updated values
    assert seen[-1].max() > 0 and seen[-1].flat[0] == 0


def test_throw_into_the_steps(ctx, data, small_partitions):
    import asyncio

    ds = ctx.load("memory", data=data, sig_dims=2)
    steps = ctx.run_udf_iter(dataset=ds, udf=SumUDF())
    with pytest.raises(RuntimeError, match="stuff"):
        for _ in steps:
            steps.throw(RuntimeError("stuff"))

    async def athrow():
        steps = ctx.run_udf_iter(dataset=ds, udf=SumUDF(), sync=False)
        async for _ in steps:
            await steps.athrow(RuntimeError("async stuff"))

    with pytest.raises(RuntimeError, match="async stuff"):
        asyncio.run(athrow())


def test_fem_analysis_and_apply_fft_mask(ctx):
    from ltdask.analysis import ApplyFFTMask, FEMAnalysis
    from ltdask.udf import run_analysis_crystall, run_fem

    data = np.random.default_rng(7).random((3, 4, 9, 9)).astype(np.float32)
    ds = ctx.load("memory", data=data, sig_dims=2)
    fem = ctx.run(FEMAnalysis(dataset=ds, parameters=dict(cx=4, cy=3, ri=1, ro=3)))
    assert fem.keys() == ["intensity"]
    expected = run_fem(ctx, ds, center=(3, 4), rad_in=1, rad_out=3)["intensity"].data
    np.testing.assert_array_equal(fem.intensity.raw_data, expected)
    # the standard deviation of each frame's pixels in the ring 1 < r <= 3 around (3, 4)
    yy, xx = np.mgrid[:9, :9]
    r2 = (yy - 3) ** 2 + (xx - 4) ** 2
    ring = (r2 > 1) & (r2 <= 9)
    np.testing.assert_allclose(expected, data[..., ring].std(axis=-1), rtol=1e-4)
    params = dict(rad_in=1, rad_out=3, real_centerx=4, real_centery=4, real_rad=2)
    fft = ctx.run(ApplyFFTMask(dataset=ds, parameters=params))
    crystall = run_analysis_crystall(ctx, ds, rad_in=1, rad_out=3, real_center=(4, 4), real_rad=2)[
        "intensity"
    ].data
    np.testing.assert_array_equal(fft.intensity.raw_data, crystall)
    assert fft.intensity.desc == "result from integration over mask in Fourier space"


def test_com_regression_is_checked_when_the_run_starts(ctx, data):
    from ltdask.udf import CoMUDF

    udf = CoMUDF.with_params(regression=5)  # as LiberTEM: accepted here
    with pytest.raises(ValueError, match="regression must be -1, 0, 1 or a 3×2 array, not 5"):
        ctx.run_udf(dataset=ctx.load("memory", data=data, sig_dims=2), udf=udf)


# -- 1b. LiberTEM's stddev kernels (test_stddev.py imports them) -----------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_stddev_process_tile_and_merge_kernels(dtype):
    import numba

    from ltdask.udf.builtin.stddev import merge, process_tile

    rng = np.random.default_rng(8)
    data = rng.standard_normal((3, 4, 5, 7)) + 100  # partitions, tiles, frames, pixels
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.standard_normal(data.shape)
    data = data.astype(dtype)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64

    @numba.njit
    def partitions(data):  # as LiberTEM's test_stability calls them: from numba
        total_n = 0
        total_sum = np.zeros(data.shape[3], data.dtype)
        total_varsum = np.zeros(data.shape[3], np.float64)
        for p in range(data.shape[0]):
            n = 0
            part_sum = np.zeros(data.shape[3], data.dtype)
            part_varsum = np.zeros(data.shape[3], np.float64)
            for t in range(data.shape[1]):
                n = process_tile(data[p, t], n, part_sum, part_varsum)
            total_n = merge(
                total_n, total_sum, total_varsum, n, part_sum, part_varsum, part_sum / n
            )
        return total_n, total_sum, total_varsum

    n, total, varsum = partitions(data)
    frames = data.reshape(-1, data.shape[-1]).astype(wide)
    assert n == len(frames) == 60
    np.testing.assert_allclose(total, frames.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(varsum / n, frames.var(axis=0), rtol=1e-4)
