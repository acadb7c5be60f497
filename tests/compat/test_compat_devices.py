"""LiberTEM's device selection (``libertem.utils.devices``, ``libertem.common.backend``)
and in-memory dataset (``libertem.io.dataset.memory.MemoryDataSet``) in ltdask.compat."""

from __future__ import annotations

import numpy as np
import pytest
import sparse

import ltdask
from ltdask import UDF
from ltdask.compat import Context, UnsupportedError, devices
from ltdask.compat.datasets import MemoryDataSet
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture(autouse=True)
def no_device_choice(monkeypatch):
    monkeypatch.delenv("LIBERTEM_USE_CUDA", raising=False)
    monkeypatch.delenv("LIBERTEM_USE_CPU", raising=False)


def test_use_cpu_and_cuda_follow_libertem():
    assert (devices.get_use_cpu(), devices.get_use_cuda()) == (0, None)
    assert devices.get_device_class() == "cpu"
    devices.set_use_cuda(1)
    assert (devices.get_use_cpu(), devices.get_use_cuda()) == (None, 1)
    assert devices.get_device_class() == "cuda"
    devices.set_use_cpu(3)
    assert (devices.get_use_cpu(), devices.get_use_cuda()) == (3, None)


def test_detect():
    import psutil

    found = devices.detect()
    assert found["cpus"] == list(range(psutil.cpu_count(logical=False) or 1))
    assert found["has_cupy"] == devices.has_cupy()
    if not found["has_cupy"]:
        assert found["cudas"] == []


def test_runs_honour_set_use_cuda():
    data = np.ones((2, 2, 3, 3), np.float32)
    ctx = Context.make_with("inline")
    ds = ctx.load("memory", data=data)
    devices.set_use_cuda(0)
    if not devices.has_cupy():
        # the run asks for a CUDA backend, as LiberTEM's inline executor would
        with pytest.raises(ltdask.UDFError, match=r"SumUDF can only run on a CUDA device"):
            ctx.run_udf(dataset=ds, udf=SumUDF())
    # a run's own backends= wins
    res = ctx.run_udf(dataset=ds, udf=SumUDF(), backends=("numpy",))
    np.testing.assert_array_equal(res["intensity"].data, data.sum(axis=(0, 1)))
    devices.set_use_cpu(0)
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    np.testing.assert_array_equal(res["intensity"].data, data.sum(axis=(0, 1)))


class TileKinds(UDF):
    def get_result_buffers(self):
        return {"sparse": self.buffer(kind="nav", dtype=bool)}

    def get_backends(self):
        return (self.BACKEND_NUMPY, self.BACKEND_SPARSE_COO)

    def process_frame(self, frame):
        self.results.sparse[:] = isinstance(frame, sparse.SparseArray)


def test_memory_dataset():
    data = np.random.default_rng(1).random((3, 4, 5, 6)).astype(np.float32)
    ds = MemoryDataSet(data=data, tileshape=(1, 5, 6), num_partitions=2, sig_dims=2)
    res = Context.make_with("inline").run_udf(dataset=ds, udf=SumSigUDF())
    np.testing.assert_allclose(res["intensity"].data, data.sum(axis=(2, 3)), rtol=1e-5)
    zeros = MemoryDataSet(datashape=(2, 3, 4, 4))
    assert tuple(zeros.shape) == (2, 3, 4, 4) and zeros.dtype == np.float32
    flat = MemoryDataSet(data=data.reshape(12, 5, 6), nav_shape=(3, 4), sig_dims=2)
    assert tuple(flat.shape.nav) == (3, 4)


@pytest.mark.parametrize(
    ("backends", "sparse_tiles"),
    [(None, False), (("numpy",), False), (("sparse.COO",), True)],
)
def test_memory_dataset_array_backends(backends, sparse_tiles):
    data = np.zeros((2, 2, 4, 4), np.float32)
    data[..., 1, 1] = 3
    ds = MemoryDataSet(data=data, array_backends=backends)
    ctx = Context.make_with("inline")
    res = ctx.run_udf(dataset=ds, udf=TileKinds())
    assert (res["sparse"].data == sparse_tiles).all()
    np.testing.assert_array_equal(
        ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data, data.sum(axis=(0, 1))
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param(dict(), ValueError, r"give data= \(an array\) or datashape=", id="none"),
        pytest.param(
            dict(datashape=(2, 2, 4, 4), tiledelay=0.1),
            UnsupportedError,
            r"tiledelay=0.1 is not supported",
            id="tiledelay",
        ),
        pytest.param(
            dict(datashape=(2, 2, 4, 4), array_backends=("torch",)),
            UnsupportedError,
            r"array_backends=\('torch',\) is not supported .*dense tiles \(numpy, cupy, cuda\)",
            id="array-backend",
        ),
    ],
)
def test_memory_dataset_refusals(kwargs, error, match):
    with pytest.raises(error, match=match):
        MemoryDataSet(**kwargs)
