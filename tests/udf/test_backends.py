"""Array backends: each backend delivered to a UDF that asks for it, the run's plan
(`ltdask.explain`), the ``backends=`` restriction, shipped UDFs on sparse tiles equal to
their dense results, and sparse runs that never make a dense tile."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse
import sparse
from helpers.formatfiles import write_raw_csr

import ltdask
from ltdask.udf import ApplyMasksUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF
from ltdask.udf.backends import plan_backends

CPU = sorted(ltdask.UDF.CPU_BACKENDS - {ltdask.UDF.BACKEND_SPARSE_DOK})
GPU = sorted(ltdask.UDF.CUDA_BACKENDS)
NAV, SIG = (5, 7), (9, 11)


def counts(seed=0, fill=0.1, dtype=np.float32):
    rng = np.random.default_rng(seed)
    hits = rng.random((*NAV, *SIG)) < fill
    return (hits * rng.integers(1, 100, hits.shape)).astype(dtype)


@pytest.fixture(params=["csr-file", "dense", "sparse.COO", "scipy-csr"])
def source(request, tmp_path):
    """``(dataset, data)``: the same counts as a raw CSR file, dense and sparse arrays."""
    data = counts()
    if request.param == "csr-file":
        target, kwargs = write_raw_csr(tmp_path, data)
        return ltdask.open_raw_csr(target, **kwargs), data
    if request.param == "dense":
        return ltdask.from_array(data), data
    if request.param == "sparse.COO":
        return ltdask.from_array(sparse.COO.from_numpy(data)), data
    csr = scipy.sparse.csr_matrix(data.reshape(np.prod(NAV), -1))
    return ltdask.from_array(csr, nav_shape=NAV, sig_shape=SIG), data


class Probe(ltdask.UDF):
    """Records what it is given, and sums it (per frame and over frames)."""

    def __init__(self, backend, method="tile"):
        super().__init__(backend=backend, method=method)

    def get_backends(self):
        return (self.params.backend,)

    def get_method(self):
        return self.UDF_METHOD(self.params.method)

    def get_result_buffers(self):
        return {
            "frames": self.buffer(kind="nav", dtype=np.float64),
            "pixels": self.buffer(kind="sig", dtype=np.float64),
            "ok": self.buffer(kind="nav", dtype=bool),
        }

    def _take(self, arr, frames: int):
        d2 = self.params.backend in self.D2_BACKENDS
        ok = self.meta.array_backend == self.params.backend
        from sparseconverter import get_backend

        # (`cuda` UDFs get numpy arrays and move them to the GPU themselves)
        delivered = "numpy" if self.params.backend == self.BACKEND_CUDA else self.params.backend
        ok &= get_backend(arr) == delivered
        ok &= arr.shape == ((frames, int(np.prod(SIG))) if d2 else (frames, *SIG))
        rows = arr.reshape((frames, -1))
        self.results.frames[:] = self.forbuf(rows.sum(axis=1), self.results.frames)
        self.results.pixels[:] += self.forbuf(rows.sum(axis=0), self.results.pixels)
        self.results.ok[:] = ok

    def process_tile(self, tile):
        self._take(tile, tile.shape[0])

    def process_partition(self, partition):
        self._take(partition, partition.shape[0])

    def process_frame(self, frame):
        d2 = self.params.backend in self.D2_BACKENDS
        if d2:  # 2-D backends: frames keep a nav dim of 1
            self._take(frame, 1)
        else:
            self._take(frame[np.newaxis], 1)

    def merge(self, dest, src):
        dest.frames[:] = src.frames
        dest.ok[:] = src.ok
        dest.pixels[:] += src.pixels


def _gpu() -> bool:
    try:
        import cupy
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver: cupy imports, CUDA calls fail
        return False


ON_GPU = pytest.mark.skipif(not _gpu(), reason="needs cupy and a CUDA device")


@pytest.mark.parametrize("method", ["tile", "frame", "partition"])
@pytest.mark.parametrize("backend", CPU + [pytest.param(b, marks=ON_GPU) for b in GPU])
def test_each_backend_is_delivered(source, backend, method):
    ds, data = source
    roi = np.random.default_rng(3).random(NAV) < 0.6
    res = Probe(backend, method).compute(ds, roi=roi)
    assert res["ok"].values[roi].all()
    np.testing.assert_allclose(res["frames"].values[roi], data[roi].sum(axis=(1, 2)), rtol=1e-6)
    np.testing.assert_allclose(res["pixels"].values, data[roi].sum(axis=0), rtol=1e-6)


def test_csr_file_runs_sparse_when_every_udf_takes_it(tmp_path):
    target, kwargs = write_raw_csr(tmp_path, counts())
    ds = ltdask.open_raw_csr(target, **kwargs)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), ApplyMasksUDF([lambda: np.ones(SIG)])]
    plan = ltdask.explain(ds, udfs).backends
    assert plan.source == "scipy.sparse.csr_matrix"
    assert set(plan.targets) == {"scipy.sparse.csr_matrix"}
    # one UDF that wants numpy: the dataset densifies once, for all
    plan = ltdask.explain(ds, [SumUDF(), PickUDF()]).backends
    assert (plan.source, plan.targets) == ("numpy", ("numpy", "numpy"))
    assert "converted" not in str(ltdask.explain(ds, [SumUDF(), PickUDF()]))
    # restricted: numpy for all
    plan = ltdask.explain(ds, udfs, backends="numpy").backends
    assert set(plan.targets) == {"numpy"}


def test_dense_data_stays_dense_unless_asked(source):
    ds, _ = source
    plan = ltdask.explain(ds, [SumUDF()]).backends
    expected = {"csr-file": "scipy.sparse.csr_matrix", "dense": "numpy"}
    assert plan.source == expected.get(ds.path if ds.path == "<array>" else "csr-file", plan.source)
    if ds.array_backends == ("numpy",):
        assert plan.targets == ("numpy",)
        restricted = ltdask.explain(ds, [SumUDF()], backends="sparse.COO").backends
        assert restricted.targets == ("sparse.COO",)
        assert "converted from numpy" in restricted.describe(["SumUDF"])


@pytest.mark.parametrize(
    "roi",
    [None, "random", "one", "none"],
)
@pytest.mark.parametrize("backend", [None, "scipy.sparse.csr_matrix", "sparse.GCXS"])
def test_shipped_udfs_sparse_equal_dense(source, backend, roi):
    ds, data = source
    rng = np.random.default_rng(5)
    roi = {
        None: None,
        "random": rng.random(NAV) < 0.5,
        "one": ds.roi[2, 3],
        "none": np.zeros(NAV, bool),
    }[roi]
    weights = rng.random(SIG).astype(np.float32)
    masks = [lambda: weights, lambda: np.eye(*SIG)]
    # overlapping sparse masks, and one alone (each pixel in one mask at most)
    sparse_masks = [
        lambda: scipy.sparse.random(*SIG, density=0.2, random_state=1),
        lambda: scipy.sparse.random(*SIG, density=0.3, random_state=2),
    ]

    def run(backends):
        udfs = [
            SumUDF(),
            SumSigUDF(),
            StdDevUDF(),
            ApplyMasksUDF(masks),
            ApplyMasksUDF(sparse_masks, use_sparse=True),
            ApplyMasksUDF(sparse_masks[:1], use_sparse=True),
        ]
        return ltdask.compute(ds, udfs, roi=roi, backends=backends)

    dense = run("numpy")
    other = run(backend)
    names = {0: ["intensity"], 1: ["intensity"], 2: ["sum", "varsum", "num_frames"]}
    names.update({3: ["intensity"], 4: ["intensity"], 5: ["intensity"]})
    for i, keys in names.items():
        for k in keys:
            np.testing.assert_allclose(
                other[i][k].values, dense[i][k].values, rtol=1e-5, atol=1e-6, err_msg=f"{i} {k}"
            )
    sel = np.ones(NAV, bool) if roi is None else roi
    np.testing.assert_allclose(other[0]["intensity"].values, data[sel].sum(axis=0), rtol=1e-6)


def test_csr_run_never_makes_a_dense_tile(tmp_path, monkeypatch):
    from ltdask.io.formats.raw_csr import RawCSRDataSet
    from ltdask.udf import backends

    def refuse(*args, **kwargs):
        raise AssertionError("a dense tile was made")

    monkeypatch.setattr(RawCSRDataSet, "_densify", refuse)
    monkeypatch.setattr(backends.TileForms, "dense", refuse)
    real = backends.convert

    def convert(tile, target, sig_shape):
        return refuse() if target == "numpy" else real(tile, target, sig_shape)

    monkeypatch.setattr(backends, "convert", convert)
    data = counts(fill=0.01)
    target, kwargs = write_raw_csr(tmp_path, data)
    ds = ltdask.open_raw_csr(target, **kwargs)
    s, ss, sd, am = ltdask.compute(
        ds,
        [SumUDF(), SumSigUDF(), StdDevUDF(), ApplyMasksUDF([lambda: np.ones(SIG)])],
        roi=np.random.default_rng(2).random(NAV) < 0.7,
    )
    assert float(s["intensity"].sum()) == pytest.approx(float(am["intensity"].sum()), rel=1e-6)
    with pytest.raises(AssertionError, match="dense tile"):
        ltdask.compute(ds, [PickUDF()], roi=ds.roi[0, 0])


class Only(ltdask.UDF):
    def __init__(self, backends):
        super().__init__(backends=backends)

    def get_backends(self):
        return self.params.backends

    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_tile(self, tile):
        pass


def test_plan_device_choice():
    cpu_and_gpu = Only(("cupy", "numpy"))
    gpu_only = Only(("cupy",))
    numpy_only = Only(("numpy",))
    assert plan_backends(["numpy"], [cpu_and_gpu], gpu=False).targets == ("numpy",)
    plan = plan_backends(["numpy"], [cpu_and_gpu, gpu_only], gpu=True)
    assert (plan.device, plan.targets) == ("cuda", ("cupy", "cupy"))
    # a UDF that prefers numpy keeps the run on the CPU even where a GPU is
    assert plan_backends(["numpy"], [Only(("numpy", "cupy"))], gpu=True).device == "cpu"
    with pytest.raises(ltdask.UDFError, match="Only can only run on a CUDA device.*has none"):
        plan_backends(["numpy"], [gpu_only], gpu=False)
    with pytest.raises(ltdask.UDFError, match="the other UDFs of the run cannot"):
        plan_backends(["numpy"], [gpu_only, numpy_only], gpu=True)


@pytest.mark.parametrize(
    "backends, message",
    [
        ("tensorflow", "unknown array backend 'tensorflow'"),
        ((), "name at least one"),
        (("cupy",), r"Only processes \('numpy',\), but the run allows only backends=\('cupy',\)"),
    ],
)
def test_backends_restriction_errors(backends, message):
    ds = ltdask.from_array(counts())
    with pytest.raises(ltdask.UDFError, match=message):
        Only(("numpy",)).compute(ds, backends=backends)


@pytest.mark.parametrize("bad", [("numpy", "quantum"), ()])
def test_get_backends_checked(bad):
    ds = ltdask.from_array(counts())
    with pytest.raises(ltdask.UDFError, match=r"Only.get_backends\(\) returned"):
        Only(bad).compute(ds)


def test_compat_run_udf_backends(tmp_path):
    from ltdask.compat import Context

    data = counts()
    target, kwargs = write_raw_csr(tmp_path, data)
    ctx = Context.make_with("inline")
    ds = ctx.load("raw_csr", path=str(target), **kwargs)
    res = ctx.run_udf(dataset=ds, udf=Probe("scipy.sparse.csr_matrix"))
    assert res["ok"].data.all()
    res = ctx.run_udf(dataset=ds, udf=SumUDF(), backends=("scipy.sparse.csr_matrix",))
    np.testing.assert_allclose(res["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-6)


def test_xp_and_forbuf():
    udf = SumUDF()
    assert udf.xp is np
    buf = np.zeros((3, 4))
    m = scipy.sparse.csr_matrix(np.arange(12.0).reshape(1, 12))
    np.testing.assert_array_equal(udf.forbuf(m, buf), np.arange(12.0).reshape(3, 4))
    coo = sparse.COO.from_numpy(np.arange(12.0).reshape(3, 4))
    assert isinstance(udf.forbuf(coo, buf), np.ndarray)


class WhereUDF(ltdask.UDF):
    """Records the worker that processed each frame; `cuda` backend: host arrays, scheduled
    on CUDA workers (no CuPy needed)."""

    def __init__(self, backends=("cuda",)):
        super().__init__(backends=backends)

    def get_backends(self):
        return self.params.backends

    def get_result_buffers(self):
        return {"gpu": self.buffer(kind="nav", dtype=bool), "s": self.buffer(kind="nav")}

    def process_tile(self, tile):
        from distributed import get_worker

        self.results.gpu[:] = get_worker().state.total_resources.get("GPU", 0) > 0
        self.results.s[:] = tile.reshape(tile.shape[0], -1).sum(axis=1)


@pytest.fixture(scope="module")
def gpu_cluster():
    """One worker without and one with a ``GPU`` resource, in this process."""
    from distributed import Client, Scheduler, SpecCluster, Worker

    workers = {
        "cpu": {"cls": Worker, "options": {"nthreads": 1}},
        "gpu": {"cls": Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}},
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    with SpecCluster(workers=workers, scheduler=scheduler) as cluster, Client(cluster) as client:
        yield client


def test_cuda_udfs_go_to_gpu_workers(gpu_cluster):
    data = counts()
    ds = ltdask.from_array(data)
    assert ltdask.explain(ds, WhereUDF()).backends.device == "cuda"
    res = WhereUDF().compute(ds)
    assert res["gpu"].values.all()
    np.testing.assert_allclose(res["s"].values, data.sum(axis=(2, 3)), rtol=1e-6)
    # a UDF that also takes numpy runs on the CPU (where it prefers numpy)
    assert ltdask.explain(ds, WhereUDF(("numpy", "cuda"))).backends.device == "cpu"


def test_cuda_udf_without_gpu_workers_is_refused(distributed_client):
    with distributed_client.as_current(), dask.config.set(scheduler="dask.distributed"):
        with pytest.raises(ltdask.UDFError, match="no worker of the cluster has a GPU resource"):
            WhereUDF().compute(ltdask.from_array(counts()))
        plan = ltdask.explain(ltdask.from_array(counts()), WhereUDF(("cuda", "numpy"))).backends
        assert plan.device == "cpu"


@ON_GPU
@pytest.mark.parametrize("source", ["dense", "csr-file"])
def test_cupy_end_to_end_equals_numpy(tmp_path, source):
    """On a machine with a GPU: shipped UDFs restricted to CuPy give numpy's results."""
    data = counts(3)
    if source == "dense":
        ds = ltdask.from_array(data)
    else:
        path, _ = write_raw_csr(tmp_path, data)
        ds = ltdask.open_raw_csr(path)
    mask = np.zeros(SIG, np.float32)
    mask[2:6, 3:8] = 1
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), ApplyMasksUDF(mask_factories=[lambda: mask])]
    plan = ltdask.explain(ds, udfs, backends=("cupy",)).backends
    assert plan.device == "cuda"
    total, sumsig, std, masked = ltdask.compute(ds, udfs, backends=("cupy",))
    np.testing.assert_allclose(total["intensity"].values, data.sum((0, 1)), rtol=1e-5)
    np.testing.assert_allclose(sumsig["intensity"].values, data.sum((2, 3)), rtol=1e-5)
    np.testing.assert_allclose(std["std"].values, data.std((0, 1)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        masked["intensity"].values[..., 0], (data * mask).sum((2, 3)), rtol=1e-5
    )
