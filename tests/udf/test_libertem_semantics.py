"""LiberTEM 0.16's UDF semantics around a UDF (issue 19), one section per cause: what a
LiberTEM script relies on beyond the arithmetic. Written from LiberTEM's documented
behaviour; `tests/reference` compares the numbers with LiberTEM's own output."""

from __future__ import annotations

import pickle

import dask
import numpy as np
import pytest

import ltdask
from ltdask import UDF
from ltdask.compat import Context
from ltdask.udf import CoMUDF, SumSigUDF, SumUDF


@pytest.fixture
def data():
    return np.random.default_rng(0).random((4, 6, 5, 3)).astype(np.float32)


@pytest.fixture
def ds(data):
    return ltdask.from_array(data)


# -- 7. the UDF instance ---------------------------------------------------------------------
@pytest.mark.parametrize("how", ["compute", "lazy", "context"])
def test_the_instance_given_knows_the_run(ds, how):
    udf = SumSigUDF()
    assert udf.meta is None
    roi = np.zeros(ds.nav_shape, bool)
    roi[1, 2] = True
    if how == "compute":
        ltdask.compute(ds, [udf], roi=roi)
    elif how == "lazy":
        ltdask.lazy(ds, [udf], roi=roi)
    else:
        Context.make_with("inline").run_udf(dataset=ds, udf=udf, roi=roi)
    assert udf.meta.dataset_shape == ds.shape
    assert udf.meta.input_dtype == np.float32
    np.testing.assert_array_equal(udf.meta.roi, roi)
    # what a run binds stays out of the pickled instance (tasks stay small)
    assert pickle.loads(pickle.dumps(udf)).meta is None
    assert len(pickle.dumps(udf)) < 400


# -- 10. validation when the UDF is made -------------------------------------------------------
def test_com_parameters_checked_when_made():
    with pytest.raises(ValueError, match="outer radius r=2 is smaller than inner ri=3"):
        CoMUDF.with_params(r=2, ri=3)


# -- 11. a UDF without result buffers runs ---------------------------------------------------
class Raises(UDF):
    def __init__(self, private=False):
        super().__init__(private=private)

    def get_result_buffers(self):
        if self.params.private:
            return {"scratch": self.buffer(kind="nav", use="private")}
        return {}

    def process_frame(self, frame):
        raise RuntimeError("process_frame ran")


@pytest.mark.parametrize("private", [False, True], ids=["no-buffers", "private-only"])
def test_udf_without_results_runs(ds, private):
    with pytest.raises(RuntimeError, match="process_frame ran"):
        Raises(private=private).compute(ds)
    with pytest.raises(RuntimeError, match="process_frame ran"):
        Context.make_with("inline").run_udf(dataset=ds, udf=Raises(private=private))
    with pytest.raises(RuntimeError, match="process_frame ran"):
        ltdask.compute(ds, [SumUDF(), Raises(private=private)])


# -- 8. merge semantics ----------------------------------------------------------------------
class RunningMax(UDF):
    """Starts from -inf in ``preprocess`` (a zero start would be wrong for negative data)
    and counts its merges."""

    def __init__(self, log=None):
        super().__init__(log=log)

    def get_result_buffers(self):
        return {
            "frame_max": self.buffer(kind="nav"),
            "pixel_max": self.buffer(kind="sig"),
            "merges": self.buffer(kind="single", dtype="int64"),
        }

    def preprocess(self):
        self.results.frame_max[:] = -np.inf
        self.results.pixel_max[:] = -np.inf

    def process_frame(self, frame):
        self.results.frame_max[:] = np.maximum(self.results.frame_max, frame.max())
        self.results.pixel_max[:] = np.maximum(self.results.pixel_max, frame)

    def merge(self, dest, src):
        # dest's nav part is this partition's, as preprocess left it on the whole dataset
        assert (dest.frame_max == -np.inf).all()
        assert dest.frame_max.shape == src.frame_max.shape
        self.params.log.append(int(self.meta.get_valid_nav_mask().sum()))
        dest.frame_max[:] = np.maximum(dest.frame_max, src.frame_max)
        dest.pixel_max[:] = np.maximum(dest.pixel_max, src.pixel_max)
        dest.merges[:] += 1


@pytest.mark.parametrize("roi_kind", ["none", "first-rows", "scattered", "empty"])
def test_merge_like_libertem(small_partitions, roi_kind):
    data = -1 - np.random.default_rng(3).random((12, 5, 3, 4)).astype(np.float32)
    ds = ltdask.from_array(data)
    roi = np.ones((12, 5), bool)
    if roi_kind == "first-rows":
        roi[4:] = False
    elif roi_kind == "scattered":
        roi = np.random.default_rng(4).random((12, 5)) < 0.15
    elif roi_kind == "empty":
        roi[:] = False
    log: list = []
    parts = ds.get_partitions()
    with_frames = [p for p in parts if roi.reshape(-1)[p.start : p.stop].any()]
    res = RunningMax(log=log).compute(ds, roi=None if roi_kind == "none" else roi)
    assert len(parts) > 3
    # each partition with ROI frames merged once, in order, none without
    assert res["merges"].values.tolist() == [len(with_frames)]
    counts = [int(roi.reshape(-1)[p.start : p.stop].sum()) for p in with_frames]
    assert log == np.cumsum([0, *counts])[:-1].tolist()
    expected = np.where(roi, data.max(axis=(2, 3)), np.nan)
    np.testing.assert_array_equal(res["frame_max"].values, expected)
    pixel = data[roi].max(axis=0) if roi.any() else np.full((3, 4), -np.inf)
    np.testing.assert_array_equal(res["pixel_max"].values, pixel)


# -- 3. aux data is an array wherever a UDF looks at it -----------------------------------------
class AuxShapes(UDF):
    """Records the shape of its aux data in each phase, as LiberTEM 0.16 shows them."""

    def get_result_buffers(self):
        self.params.log.append(("get_result_buffers", self.params.aux.shape))
        return {"x": self.buffer(kind="nav", extra_shape=(2,)), "n": self.buffer(kind="single")}

    def preprocess(self):
        self.params.log.append(("preprocess", self.params.aux.shape))

    def process_frame(self, frame):
        self.params.log.append(("process_frame", self.params.aux.shape))
        self.results.x[:] = self.params.aux

    def merge(self, dest, src):
        self.params.log.append(("merge", self.params.aux.shape))
        np.testing.assert_array_equal(self.params.aux, src.x)  # the partition's part
        dest.x[:] = src.x
        dest.n[:] += 1

    def get_results(self):
        self.params.log.append(("get_results", self.params.aux.shape))
        return {}


def test_aux_data_views_like_libertem(small_partitions):
    data = np.random.default_rng(5).random((12, 5, 3, 4)).astype(np.float32)
    ds = ltdask.from_array(data)
    values = np.arange(12 * 5 * 2, dtype=np.float32).reshape(12, 5, 2)
    aux = UDF.aux_data(values, kind="nav", extra_shape=(2,), dtype=np.float32)
    roi = np.zeros((12, 5), bool)
    roi[1, 1:4] = True
    roi[7, 0] = True
    log: list = []
    udf = AuxShapes(aux=aux, log=log)
    assert udf.params.aux.shape == (60, 2)  # the caller sees the array, not a wrapper
    res = Context.make_with("inline").run_udf(dataset=ds, udf=udf, roi=roi)
    np.testing.assert_array_equal(res["x"].raw_data, values[roi])
    phases: dict = {}
    for phase, shape in log:
        phases.setdefault(phase, []).append(shape)
    # main node: the raw data in get_result_buffers and get_results, the ROI in preprocess;
    # partitions: their ROI frames; merge: the merged partition's part
    assert phases["get_result_buffers"][0] == (60, 2)
    assert phases["preprocess"][0] == (4, 2) or (4, 2) in phases["preprocess"]
    assert sorted(phases["merge"]) == [(1, 2), (3, 2)]
    assert set(phases["process_frame"]) == {(2,)}
    assert phases["get_results"] == [(60, 2)]
    assert udf.params.aux.shape == (60, 2)


def test_aux_data_with_one_value_per_frame_is_flat():
    aux = UDF.aux_data(np.arange(6.0).reshape(2, 3, 1), kind="nav", extra_shape=(1,))
    assert AuxShapes(aux=aux, log=[]).params.aux.shape == (6,)


# -- 1., 2. and 9. partial results, damage and result objects of Context ------------------------
def _steps(ds, udfs, roi=None):
    with dask.config.set({"ltdask.partition-bytes": 3 * 4 * 4 * 5, "ltdask.min-partitions": 1}):
        return list(Context.make_with("inline").run_udf_iter(dataset=ds, udf=udfs, roi=roi))


@pytest.fixture
def raw_ds(data, tmp_path):
    data.tofile(tmp_path / "scan.raw")
    return ltdask.open_raw(tmp_path / "scan.raw", nav_shape=(4, 6), sig_shape=(5, 3), dtype="f4")


def test_partial_results_show_initial_values_and_damage(data, raw_ds):
    ds = raw_ds
    roi = np.zeros(ds.nav_shape, bool)
    roi[1:3, 2:5] = True
    roi[0, 0] = True
    steps = _steps(ds, [SumSigUDF(), RunningMax(log=[])], roi=roi)
    assert len(steps) > 2
    expected = data.sum(axis=(2, 3))
    for step in steps:
        damage = step.damage
        assert damage.data.shape == ds.nav_shape and damage.data.dtype == bool
        assert not damage.data[~roi].any()
        np.testing.assert_array_equal(damage.raw_data, damage.data[roi])
        sumsig, running = step.buffers
        frames = sumsig["intensity"]
        done = damage.data
        np.testing.assert_array_equal(frames.valid_mask, done)
        np.testing.assert_allclose(frames.data[done], expected[done], rtol=1e-6)
        # in the ROI and not processed yet: the buffer's start value (0), not NaN
        assert (frames.data[roi & ~done] == 0).all()
        assert np.isnan(frames.data[~roi]).all()
        # a merged UDF: not-yet-merged positions keep what preprocess set (-inf)
        assert (running["frame_max"].data[roi & ~done] == -np.inf).all()
    assert steps[-1].damage.data[roi].all()


class CountsGetResults(UDF):
    def __init__(self, log=None):
        super().__init__(log=log)

    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_frame(self, frame):
        self.results.x[:] = 1

    def get_results(self):
        self.params.log.append(1)
        return {}


def test_get_results_runs_when_buffers_are_read(raw_ds):
    ds = raw_ds
    log: list = []
    steps = _steps(ds, [CountsGetResults(log=log)])
    assert len(steps) > 1 and log == []
    steps[-1].buffers  # noqa: B018
    steps[-1].buffers  # noqa: B018
    assert log == [1]


def test_result_buffer_api(data, ds):
    ctx = Context.make_with("inline")
    roi = np.zeros(ds.nav_shape, bool)
    roi[1:3, 2:5] = True
    frames, total = ctx.run_udf(dataset=ds, udf=[SumSigUDF(), SumUDF()], roi=roi)
    res = frames["intensity"]
    assert res.kind == "nav" and res.extra_shape == () and res.dtype == np.float32
    assert res.shape == (6,) == res.raw_data.shape  # the buffer: flat, ROI-compressed
    assert res.valid_slice_bounding == (slice(1, 3), slice(2, 5))
    np.testing.assert_allclose(
        res.raw_masked_data.compressed(), data[roi].sum(axis=(1, 2)), rtol=1e-5
    )
    np.testing.assert_array_equal(res.masked_data.mask, ~roi)
    assert total["intensity"].shape == (5, 3) and total["intensity"].kind == "sig"
    assert total["intensity"].valid_slice_bounding == (slice(0, 5), slice(0, 3))
    full = ctx.run_udf(dataset=ds, udf=SumSigUDF())["intensity"]
    assert full.shape == (24,)
    empty = ctx.run_udf(dataset=ds, udf=SumSigUDF(), roi=np.zeros(ds.nav_shape, bool))
    assert empty["intensity"].shape == (0,)
    assert empty["intensity"].valid_slice_bounding == (slice(4, 1), slice(6, 1))


class DictAccess(UDF):
    def get_result_buffers(self):
        return {
            "x": self.buffer(kind="nav"),
            "later": self.buffer(kind="nav", use="result_only"),
            "n": self.buffer(kind="single"),
        }

    def preprocess(self):
        # result_only buffers are there while processing, with no value
        assert "later" in self.results and self.results.later is None

    def process_frame(self, frame):
        self.results["x"][:] = frame.sum()

    def merge(self, dest, src):
        dest.x[:] = src["x"]
        dest.n[:] += 1

    def get_results(self):
        return {"later": self.results.x * 2}


def test_dict_style_buffer_access_warns(ds, data):
    from ltdask import UseDiscouragedWarning

    with pytest.warns(UseDiscouragedWarning, match=r"dict-like access to buffers \(\['x'\]\)"):
        res = DictAccess().compute(ds)
    np.testing.assert_allclose(res["later"].values, 2 * data.sum(axis=(2, 3)), rtol=1e-6)


class ReturnsUndeclared(UDF):
    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_frame(self, frame):
        pass

    def get_results(self):
        return {"zzz": self.results.x}


def test_undeclared_result_and_empty_run_errors(ds):
    with pytest.raises(KeyError, match="'zzz', which is not declared"):
        ReturnsUndeclared().compute(ds)
    with pytest.raises(ValueError, match="empty list of UDFs - nothing to do!"):
        Context.make_with("inline").run_udf(dataset=ds, udf=[])


# -- 9. parameters changed during run_udf_iter --------------------------------------------------
class Scaled(UDF):
    def __init__(self, factor=1.0):
        super().__init__(factor=factor)

    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav"), "total": self.buffer(kind="single")}

    def process_frame(self, frame):
        self.results.x[:] = self.params.factor
        self.results.total[:] += self.params.factor

    def merge(self, dest, src):
        dest.x[:] = src.x
        dest.total[:] += src.total


def test_update_parameters_between_steps(raw_ds):
    ds = raw_ds
    with dask.config.set({"ltdask.partition-bytes": 3 * 4 * 4 * 5, "ltdask.min-partitions": 1}):
        steps = Context.make_with("inline").run_udf_iter(dataset=ds, udf=Scaled(factor=1.0))
        first = next(steps)
        steps.update_parameters_experimental([{"factor": 5.0}])
        *_, last = [first, *steps]
    done_first = first.damage.data.reshape(-1)
    x = last.buffers[0]["x"].data.reshape(-1)
    np.testing.assert_array_equal(x[done_first], 1.0)
    np.testing.assert_array_equal(x[~done_first], 5.0)
    assert last.buffers[0]["total"].data[0] == done_first.sum() + 5 * (~done_first).sum()
    with pytest.raises(ValueError, match="2 dicts of parameters for 1 UDFs"):
        steps = Context.make_with("inline").run_udf_iter(dataset=ds, udf=Scaled())
        next(steps)
        steps.update_parameters_experimental([{}, {}])
        list(steps)


# -- 9. in-memory datasets laid out like a file's frames, ds.roi, coordinates ---------------------
@pytest.mark.parametrize(
    "sync_offset, nav_shape",
    [(0, (3, 8)), (3, None), (-2, None), (5, (2, 3)), (-3, (5, 5)), (23, (1, 1))],
)
def test_memory_sync_offset_and_nav_shape(data, sync_offset, nav_shape):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.MissingFramesWarning)
        ds = Context.make_with("inline").load(
            "memory", data=data, sig_dims=2, nav_shape=nav_shape, sync_offset=sync_offset
        )
    stream = data.reshape(-1, 5, 3)
    n = int(np.prod(ds.nav_shape))
    expected = np.zeros((n, 5, 3), np.float32)
    present = np.zeros(n, bool)
    for p in range(n):
        if 0 <= p + sync_offset < len(stream):
            expected[p] = stream[p + sync_offset]
            present[p] = True
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(n, 5, 3), expected)
    res = SumSigUDF().compute(ds)
    np.testing.assert_array_equal(res["intensity_valid"].values.reshape(-1), present)
    np.testing.assert_allclose(
        res["intensity"].values.reshape(-1)[present], expected[present].sum(axis=(1, 2)), 1e-6
    )


def test_memory_sig_shape(data):
    ds = ltdask.from_array(data, sig_shape=(3, 5))
    np.testing.assert_array_equal(ds.to_dask().compute(), data.reshape(4, 6, 3, 5))
    with pytest.raises(ltdask.DataSetError, match=r"sig_shape=\(4, 4\) does not fit"):
        ltdask.from_array(data, sig_shape=(4, 4))


def test_roi_builder(ds, data):
    roi = ds.roi[1, 2:5]
    assert roi.shape == ds.nav_shape and roi.sum() == 3 and roi[1, 2:5].all()
    res = SumUDF().compute(ds, roi=ds.roi[1:3])
    np.testing.assert_allclose(res["intensity"].values, data[1:3].sum(axis=(0, 1)), rtol=1e-6)


def test_dataarray_coordinates_on_results():
    import xarray as xr

    xa = xr.DataArray(
        np.ones((3, 4, 8, 6), np.float32),
        dims=("y", "x", "ky", "kx"),
        coords={"y": [0.0, 0.5, 1.0], "kx": np.arange(6) * 0.1},
    )
    nav, sig = ltdask.compute(ltdask.from_array(xa), [SumSigUDF(), SumUDF()])
    assert nav["y"].values.tolist() == [0.0, 0.5, 1.0] and "kx" not in nav.coords
    np.testing.assert_allclose(sig["kx"].values, np.arange(6) * 0.1)


# -- 10., 12. ApplyMasksUDF: checks when made, shifts past the frame -------------------------------
def test_apply_masks_checked_when_made():
    from ltdask.udf import ApplyMasksUDF

    with pytest.raises(ValueError, match="Sparse backend scipy.sparse not supported for shifts"):
        ApplyMasksUDF([lambda: np.ones((5, 3))], shifts=(1, 1), use_sparse="scipy.sparse")
    with pytest.raises(ValueError, match=r"No compatible backend found in \('moon',\)"):
        ApplyMasksUDF([lambda: np.ones((5, 3))], backends=("moon",))


@pytest.mark.parametrize("shifts", [(5, 0), (0, -3), (-7, 9)])
def test_apply_masks_shifted_off_the_frame_gives_zeros(ds, shifts):
    from ltdask.udf import ApplyMasksUDF

    res = ApplyMasksUDF([lambda: np.ones((5, 3)), lambda: np.eye(5, 3)], shifts=shifts).compute(ds)
    np.testing.assert_array_equal(res["intensity"].values, 0)


def test_complex_results_outside_the_roi_are_nan_in_both_parts():
    data = (np.random.default_rng(0).random((2, 3, 4, 4)) + 1j).astype(np.complex64)
    roi = np.eye(2, 3, dtype=bool)
    res = SumSigUDF().compute(ltdask.from_array(data), roi=roi)["intensity"].values
    assert np.isnan(res[~roi].real).all() and np.isnan(res[~roi].imag).all()
    np.testing.assert_allclose(res[roi], data[roi].sum(axis=(1, 2)), rtol=1e-5)
