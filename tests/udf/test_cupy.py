"""CuPy on a machine with a GPU: the shipped UDFs on the GPU equal to their CPU runs (dense,
sparse and corrected sources, ROIs, integer files), a LiberTEM-style UDF written with
``self.xp``, and a `distributed` cluster whose worker has a ``GPU`` resource. Skipped where
CuPy finds no device. Each CUDA backend delivered to a UDF that asks for it, and the plan's
checks without a GPU: test_backends.py."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.formatfiles import write_raw_csr
from test_backends import NAV, ON_GPU, SIG, counts

import ltdask
from ltdask.udf import (
    FEMUDF,
    ApplyMasksUDF,
    CoMUDF,
    LogsumUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

pytestmark = ON_GPU


def shipped():
    rng = np.random.default_rng(5)
    weights = rng.random(SIG).astype(np.float32)
    return [
        SumUDF(),
        SumSigUDF(),
        StdDevUDF(),
        ApplyMasksUDF([lambda: weights, lambda: np.eye(*SIG)]),
        ApplyMasksUDF([lambda: np.eye(*SIG, dtype=np.float32)], use_sparse=True),
        CoMUDF.with_params(cy=4.5, cx=5.0, r=3.5),
        LogsumUDF(),
        FEMUDF(center=(4.5, 5.0), rad_in=1.5, rad_out=4),
    ]


@pytest.mark.parametrize("roi", [None, "random", "none"])
@pytest.mark.parametrize("kind", ["dense", "csr-file", "uint16-raw", "corrected"])
def test_shipped_udfs_on_gpu_equal_cpu(tmp_path, kind, roi):
    data = counts(7)
    kwargs = {}
    if kind == "dense":
        ds = ltdask.from_array(data)
    elif kind == "csr-file":
        path, csr_kw = write_raw_csr(tmp_path, data)
        ds = ltdask.open_raw_csr(path, **csr_kw)
    else:
        path = tmp_path / "scan.raw"
        data.astype(np.uint16).tofile(path)
        ds = ltdask.open_raw(path, nav_shape=NAV, sig_shape=SIG, dtype=np.uint16)
        if kind == "corrected":
            rng = np.random.default_rng(1)
            kwargs = dict(
                corrections=ltdask.CorrectionSet(dark=rng.random(SIG) * 3, gain=1 + rng.random(SIG))
            )
    roi = {None: None, "random": np.random.default_rng(2).random(NAV) < 0.5}.get(
        roi, np.zeros(NAV, bool)
    )
    cpu = ltdask.compute(ds, shipped(), roi=roi, backends="numpy", **kwargs)
    gpu_plan = ltdask.explain(ds, shipped(), backends=("cupy",)).backends
    assert gpu_plan.device == "cuda"
    dense = [t for i, t in enumerate(gpu_plan.targets) if i != 4]
    assert dense == ["cupy"] * 7
    assert gpu_plan.targets[4].startswith("cupy")
    gpu = ltdask.compute(ds, shipped(), roi=roi, backends=("cupy",), **kwargs)
    for i, (a, b) in enumerate(zip(cpu, gpu, strict=True)):
        for name in a.data_vars:
            np.testing.assert_allclose(
                b[name].values, a[name].values, rtol=2e-5, atol=1e-4, err_msg=f"UDF {i}: {name}"
            )


class XPMeanUDF(ltdask.UDF):
    """Written as for LiberTEM: ``self.xp`` arrays, ``forbuf`` into the buffers."""

    def get_backends(self):
        return (self.BACKEND_CUPY,)

    def get_result_buffers(self):
        return {
            "mean": self.buffer(kind="nav", dtype=np.float32),
            "total": self.buffer(kind="sig", dtype=np.float32),
            "is_cupy": self.buffer(kind="single", dtype=bool),
        }

    def process_tile(self, tile):
        xp = self.xp
        self.results.is_cupy[:] = xp.__name__ == "cupy" and type(tile).__module__.startswith("cupy")
        self.results.mean[:] += self.forbuf(xp.sum(tile, axis=(-1, -2)), self.results.mean)
        self.results.total[:] += self.forbuf(xp.sum(tile, axis=0), self.results.total)

    def postprocess(self):
        self.results.mean[:] /= float(np.prod(self.meta.dataset_shape.sig))

    def merge(self, dest, src):
        dest.mean[:] = src.mean
        dest.total[:] += src.total
        dest.is_cupy[:] = src.is_cupy


def test_libertem_style_xp_udf():
    data = counts(4)
    res = XPMeanUDF().compute(ltdask.from_array(data))
    assert bool(res["is_cupy"].values)
    np.testing.assert_allclose(res["mean"].values, data.mean(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(res["total"].values, data.sum(axis=(0, 1)), rtol=1e-5)


def test_cluster_with_a_gpu_worker():
    import dask
    from distributed import Client, LocalCluster

    data = counts(9)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, resources={"GPU": 1}, processes=True
        ) as cluster,
        Client(cluster) as client,
    ):
        with client.as_current(), dask.config.set(scheduler="dask.distributed"):
            ds = ltdask.from_array(data)
            plan = ltdask.explain(ds, [SumUDF(), XPMeanUDF()], backends=("cupy",)).backends
            assert plan.device == "cuda"
            total, mean = ltdask.compute(ds, [SumUDF(), XPMeanUDF()], backends=("cupy",))
    np.testing.assert_allclose(total["intensity"].values, data.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(mean["mean"].values, data.mean(axis=(2, 3)), rtol=1e-5)
    assert bool(mean["is_cupy"].values)
