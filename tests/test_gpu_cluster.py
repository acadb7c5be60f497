"""Clusters of GPU and CPU workers (`ltdask.runtime.gpu_cluster`, ``Context.make_with("dask",
gpus=...)``) without a GPU: the GPU workers' partitions run the device tile path on the
numpy stand-in device (``ltdask.device.stand-in``), which records where it ran, so the
placement (which worker took which role) and the merge of both kinds of partial results
are checked against numpy. The same on real GPUs: tests/udf/test_cupy.py."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import ltdask
from ltdask.compat import Context
from ltdask.exceptions import ExecutorSpecException
from ltdask.runtime import gpu_cluster
from ltdask.udf import ApplyMasksUDF, SumSigUDF, SumUDF
from ltdask.udf.device import StandInDevice
from ltdask.udf.graph import PARTITION_TASKS

NAV, SIG = (8, 6), (8, 9)


class CudaOnly(ltdask.UDF):
    """Sums of each frame, on CUDA backends only."""

    def get_backends(self):
        return (self.BACKEND_CUPY,)

    def get_result_buffers(self):
        return {"total": self.buffer(kind="nav", dtype=np.float64)}

    def process_frame(self, frame):
        self.results.total[:] = float(frame.sum())


@pytest.fixture(scope="module")
def cluster():
    """A client of 1 CPU and 1 GPU worker (threads of this process), each one thread; they
    do not freeze this process's garbage collector (``ltdask.worker-gc-freeze``: the
    workers share the test run's process)."""
    with dask.config.set({"ltdask.worker-gc-freeze": False}):
        client = gpu_cluster.start_local(1, [0], processes=False)
        workers = client.scheduler_info()["workers"]
        gpu = next(address for address, w in workers.items() if w["resources"].get("GPU"))
        yield client, next(address for address in workers if address != gpu), gpu
        client.close()
        client.cluster.close()


@pytest.fixture
def run_on(cluster):
    client, cpu, gpu = cluster
    StandInDevice.staged.clear()
    settings = {
        "ltdask.device.stand-in": True,
        "ltdask.partition-bytes": 2 * np.prod(SIG) * 6,  # (8 partitions)
        "ltdask.min-partitions": 8,
        "scheduler": client,
    }
    with client.as_current(), dask.config.set(settings):
        yield client, cpu, gpu


def scan():
    rng = np.random.default_rng(2)
    return rng.integers(0, 4000, (*NAV, *SIG)).astype(np.uint16)


def test_partitions_on_both_kinds_of_worker(run_on):
    client, cpu, gpu = run_on
    data = scan()
    masks = np.random.default_rng(3).random((1, *SIG)).astype(np.float32)
    udfs = [SumUDF(), SumSigUDF(), ApplyMasksUDF([lambda: masks[0]])]
    plan = ltdask.explain(ltdask.from_array(data), udfs)
    assert plan.backends.device == "cpu" and plan.backends.gpu_role is not None
    assert "on GPU workers: cupy, cupy, cupy" in str(plan)
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        total, per_frame, masked = ltdask.compute(ltdask.from_array(data), udfs)
    f = data.astype(np.float64)
    np.testing.assert_allclose(total["intensity"].values, f.sum(axis=(0, 1)), rtol=1e-6)
    np.testing.assert_allclose(per_frame["intensity"].values, f.sum(axis=(2, 3)), rtol=1e-6)
    expect = (f * masks[0]).sum(axis=(2, 3))
    np.testing.assert_allclose(masked["intensity"].values[..., 0], expect, rtol=1e-5)
    # the GPU worker's partitions, and only those, were staged to the (stand-in) device
    staged = {where for where, _ in StandInDevice.staged}
    assert staged == {gpu}
    frames_on_gpu = sum(n for _, n in StandInDevice.staged)
    assert 0 < frames_on_gpu < np.prod(NAV)
    workers = {t["worker"] for t in stream.data if PARTITION_TASKS in str(t["key"])}
    assert workers == {cpu, gpu}, stream.data


def test_cuda_only_udfs_go_to_gpu_workers(run_on):
    client, cpu, gpu = run_on
    data = scan()
    (res,) = ltdask.compute(ltdask.from_array(data), [CudaOnly()])
    np.testing.assert_allclose(res["total"].values, data.sum(axis=(2, 3), dtype=np.float64))
    assert {where for where, _ in StandInDevice.staged} == {gpu}
    assert sum(n for _, n in StandInDevice.staged) == np.prod(NAV)


def test_cpu_only_runs_stage_nothing(run_on):
    data = scan()
    (res,) = ltdask.compute(ltdask.from_array(data), [SumUDF()], backends="numpy")
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(0, 1), dtype=np.float64))
    assert StandInDevice.staged == []


@pytest.mark.parametrize(
    ("gpus", "count", "match"),
    [
        pytest.param(2, 1, r"gpus=2 asks for GPU 1, but CuPy sees 1 CUDA device", id="too-many"),
        pytest.param([0, 3], 2, r"gpus=\[0, 3\] asks for GPU 3", id="missing-id"),
        pytest.param(-1, 1, r"gpus=-1; expected a number of GPUs", id="negative"),
        pytest.param("all", 1, r"gpus='all'; expected a number of GPUs", id="string"),
    ],
)
def test_gpus_checked_against_the_devices(monkeypatch, gpus, count, match):
    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: count)
    with pytest.raises(ExecutorSpecException, match=match):
        Context.make_with("dask", gpus=gpus)


def test_gpus_without_cupy(monkeypatch):
    monkeypatch.setattr(gpu_cluster.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        ExecutorSpecException, match=r"gpus=1 asks for GPU workers, but CuPy is not installed"
    ):
        Context.make_with("dask", gpus=1)


def test_gpus_only_with_the_dask_spec(monkeypatch):
    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: 1)
    with pytest.raises(ExecutorSpecException, match=r"'threads'.*gpus=1.*'dask'"):
        Context.make_with("threads", gpus=1)


@pytest.mark.slow
def test_make_with_gpus_starts_gpu_and_cpu_workers(monkeypatch):
    """Worker processes: one per GPU id with its ``GPU`` resource and only its device
    visible, and the CPU workers asked for."""
    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: 2)
    # (device 1 is made up: on a machine with one real GPU, a worker's NVML monitor
    # would ask the driver for it and fail the worker's start)
    nvml = dask.config.set({"distributed.diagnostics.nvml": False})  # (workers get it)
    with nvml, Context.make_with("dask", cpus=1, gpus=[1]) as ctx:
        client = ctx.executor.client
        workers = client.scheduler_info()["workers"]
        assert sorted(w["resources"].get("GPU", 0) for w in workers.values()) == [0, 1]
        seen = client.run(lambda: __import__("os").environ.get("CUDA_VISIBLE_DEVICES"))
        names = {address: w["name"] for address, w in workers.items()}
        assert {names[a]: v for a, v in seen.items()} == {"cpu-0": None, "gpu-0-cuda1": "1"}
        nvml_on = client.run(lambda: dask.config.get("distributed.diagnostics.nvml"))
        assert set(nvml_on.values()) == {False}
