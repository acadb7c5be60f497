"""What LiberTEM 0.16's own tests (run by tools/run_libertem_tests.py) ask of its API:
``MemoryDataSet`` as a class with ``.data``, ``UDFMeta(partition_slice=...)`` and
``Context.load("hdf5", ds_path=...)``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ltdask import UDF, Shape, Slice
from ltdask.compat import Context, InlineJobExecutor
from ltdask.compat.datasets import MemoryDataSet
from ltdask.io._memory import ArrayDataSet
from ltdask.udf import SumUDF
from ltdask.udf.meta import UDFMeta


@pytest.fixture
def ctx():
    return Context(executor=InlineJobExecutor(debug=True))


def test_memory_dataset_is_a_class_with_data(ctx):
    data = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape((2, 3, 4, 4))
    ds = MemoryDataSet(data=data, tileshape=(1, 4, 4), num_partitions=2)
    assert isinstance(MemoryDataSet, type) and isinstance(ds, ArrayDataSet)
    assert ds.data is data  # LiberTEM's MemoryDataSet.data: the array given
    assert isinstance(ctx.load("memory", data=data), MemoryDataSet)
    result = ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data
    np.testing.assert_allclose(result, data.sum(axis=(0, 1)))
    # tasks get the dataset without the array (it reaches them as dask blocks)
    light = pickle.loads(pickle.dumps(ds.for_task()))
    assert light._data is None
    with pytest.raises(AttributeError, match="not sent to tasks"):
        light.data  # noqa: B018


def test_memory_dataset_calibration_and_zeros():
    ds = MemoryDataSet(datashape=(2, 2, 3, 3), nav_calibration=[(0.5, "nm"), (0.5, "nm")])
    assert ds.data.shape == (2, 2, 3, 3) and ds.data.dtype == np.float32
    assert not ds.data.any()
    assert ds.nav_calibration[0].scale == 0.5


def test_udf_meta_takes_libertem_partition_slice():
    shape = Shape((4, 8, 8), sig_dims=2)
    part = Slice(origin=(4, 0, 0), shape=Shape((6, 8, 8), sig_dims=2))
    meta = UDFMeta(
        partition_slice=part,
        dataset_shape=shape,
        roi=None,
        dataset_dtype="float32",
        input_dtype="float32",
        corrections=None,
    )
    assert tuple(meta.partition_shape) == (6, 8, 8)
    none = UDFMeta(partition_slice=None, dataset_shape=shape, dataset_dtype="f4", input_dtype="f4")
    assert none.partition_shape is None


def test_load_hdf5_with_libertem_ds_path(ctx, tmp_path):
    h5py = pytest.importorskip("h5py")
    data = np.random.default_rng(0).random((2, 3, 4, 4)).astype(np.float32)
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("group/data", data=data)
    ds = ctx.load("hdf5", path=str(path), ds_path="group/data")
    result = ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data
    np.testing.assert_allclose(result, data.sum(axis=(0, 1)), rtol=1e-6)
    with pytest.raises(TypeError, match="key= or LiberTEM's ds_path="):
        ctx.load("hdf5", path=str(path), ds_path="group/data", key="group/data")


def test_noop_udf_reads_in_the_dtype_asked_and_returns_nothing():
    from ltdask.udf.builtin.noop import NoOpUDF

    seen = []

    class Spy(NoOpUDF):
        def process_tile(self, tile):
            seen.append(tile.dtype)

    ds = MemoryDataSet(data=np.ones((2, 2, 4, 4), dtype=np.uint16))
    ctx = Context(executor=InlineJobExecutor())
    assert dict(ctx.run_udf(dataset=ds, udf=NoOpUDF())) == {}
    ctx.run_udf(dataset=ds, udf=Spy())  # by default: the data's own dtype
    assert set(seen) == {np.dtype(np.uint16)}
    seen.clear()
    ctx.run_udf(dataset=ds, udf=Spy(preferred_input_dtype=np.float64))
    assert set(seen) == {np.dtype(np.float64)}


@pytest.mark.parametrize("gpu", [True, 0, 1])
def test_make_with_main_process_gpu_needs_cupy(gpu, monkeypatch):
    from ltdask.compat import context
    from ltdask.exceptions import ExecutorSpecException

    monkeypatch.setattr(context, "has_cupy", lambda: False)
    with pytest.raises(ExecutorSpecException, match=f"main_process_gpu={gpu!r} asks for a GPU"):
        Context.make_with("inline", main_process_gpu=gpu)


@pytest.mark.parametrize("gpu", [None, False])
def test_make_with_main_process_gpu_off(gpu):
    ctx = Context.make_with("inline", main_process_gpu=gpu)
    ds = ctx.load("memory", data=np.ones((1, 2, 3, 3), dtype=np.float32))
    assert ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data.sum() == 18.0


def test_apply_correction_backwards_inverts_it():
    from ltdask.udf.builtin.com import apply_correction

    # a shift of (1, 0) on the detector, flipped then turned by 90°: (-1, 0) → (0, 1)
    fy, fx = apply_correction(np.array(1.0), np.array(0.0), 90, True)
    np.testing.assert_allclose([fy, fx], [0.0, 1.0], atol=1e-12)
    back = apply_correction(fy, fx, 90, True, forward=False)
    np.testing.assert_allclose(back, [1.0, 0.0], atol=1e-12)
    y, x = np.random.default_rng(1).normal(size=(2, 3, 4))
    for angle, flip in [(0, False), (-173, True), (23, False)]:
        fwd = apply_correction(y, x, angle, flip)
        np.testing.assert_allclose(apply_correction(*fwd, angle, flip, forward=False), (y, x))


@pytest.mark.parametrize(("angle", "flip"), [(0, False), (30, True), (-100, False), (135, True)])
def test_guess_corrections_finds_rotation_and_flip(angle, flip):
    from ltdask.udf.builtin.com import apply_correction
    from ltdask.udf.builtin.com_guess import guess_corrections

    # the field of an "atom": minus the gradient of a (skewed) potential well, curl-free,
    # pointing at the well (negative divergence there); seen on a detector turned/flipped
    yy, xx = np.mgrid[-8:9, -8:9].astype(float)
    well = -np.exp(-(yy**2 + xx**2 + 0.8 * yy * xx) / 12)
    gy, gx = np.gradient(well)
    dy, dx = apply_correction(-gy + 0.5, -gx - 2.0, angle, flip, forward=False)
    guess = guess_corrections(dy, dx)
    assert (guess.scan_rotation, guess.flip_y) == (angle, flip)
    # cy, cx: the mean shift over all but the last row and column
    assert guess.cy == pytest.approx(dy[:-1, :-1].mean())
    assert guess.cx == pytest.approx(dx[:-1, :-1].mean())


@pytest.mark.parametrize("spec", ["threads", "inline", "delayed", "dask"])
def test_make_with_gpus_is_libertems_executor_spec_exception(spec, monkeypatch):
    # GPUs that are not there, or another spec than "dask" (the one that starts GPU workers)
    from ltdask.exceptions import ExecutorSpecException
    from ltdask.runtime import gpu_cluster

    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: 2)
    with pytest.raises(ExecutorSpecException, match="gpus=4"):
        Context.make_with(spec, gpus=4)


def test_memory_dataset_takes_libertems_tiling_keywords(ctx):
    # LiberTEM's test_multi_udf makes its dataset with base_shape= and force_need_decode=
    data = np.random.default_rng(2).random((4, 4, 6, 6)).astype(np.float32)
    ds = MemoryDataSet(
        data=data,
        tileshape=(2, 6, 6),
        num_partitions=2,
        base_shape=(1, 3, 3),
        force_need_decode=True,
    )
    result = ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data
    np.testing.assert_allclose(result, data.sum(axis=(0, 1)), rtol=1e-6)


class _CustomMask(UDF):
    """A ``single`` result (64, 64, 3) returned with the valid mask given."""

    def get_result_buffers(self):
        return {"custom": self.buffer(kind="single", dtype="float32", extra_shape=(64, 64, 3))}

    def get_results(self):
        data = np.zeros((64, 64, 3), dtype="float32")
        return {"custom": self.with_mask(data, mask=self.params.mask)}

    def process_frame(self, frame):
        pass

    def merge(self, dest, src):
        pass


@pytest.mark.parametrize(
    "mask",
    [
        np.zeros((32, 32), dtype=bool),  # does not broadcast to (64, 64, 3)
        np.zeros((64, 64), dtype=bool),  # needs a trailing 1 to broadcast
        np.zeros((1, 1, 1, 1), dtype=bool),  # too many dims
        np.zeros((64, 64, 3), dtype=np.float32),  # not boolean
        np.full((1, 1, 3), 2, dtype=np.int64),  # integers other than 0/1
    ],
    ids=["32x32", "64x64", "4d", "float", "int2"],
)
def test_invalid_valid_masks_raise_invalid_mask_error(ctx, mask):
    from ltdask.exceptions import InvalidMaskError, UDFError

    ds = MemoryDataSet(datashape=(4, 4, 4, 4))
    with pytest.raises(InvalidMaskError, match="the valid mask of 'custom'"):
        ctx.run_udf(dataset=ds, udf=_CustomMask(mask=mask))
    assert issubclass(InvalidMaskError, UDFError)


def test_valid_masks_that_broadcast_are_taken(ctx):
    ds = MemoryDataSet(datashape=(4, 4, 4, 4))
    mask = np.zeros((64, 1, 3), dtype=bool)
    mask[:2] = True
    valid = ctx.run_udf(dataset=ds, udf=_CustomMask(mask=mask))["custom"].valid_mask
    assert valid.shape == (64, 64, 3) and valid.sum() == 2 * 64 * 3
