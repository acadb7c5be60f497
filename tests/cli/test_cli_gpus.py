"""``ltdask run --gpus``: the GPU workers asked for checked against the devices CuPy sees
(none here: the checks' answers are patched where a count is needed), as one ``Error:``
line; the runs themselves on GPU workers: tests/test_gpu_cluster.py and, on a GPU,
benchmarks/gpu_session.sh."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli import invoke

from ltdask.runtime import gpu_cluster


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpus")
    np.save(d / "scan.npy", np.ones((2, 3, 4, 4), dtype=np.uint16))
    return d


def run(folder, *args):
    result = invoke(["run", "sum", "scan.npy", "--out", "out.zarr", *args], folder)
    assert result.exit_code == 2, (result.output, result.exception)
    assert not (folder / "out.zarr").exists()
    return result.stderr.strip()


@pytest.mark.parametrize(
    ("given", "count", "expect"),
    [
        pytest.param("2", 1, "GPU 1, but CuPy sees 1 CUDA device(s) here (ids 0 to 0)", id="2"),
        pytest.param("0,3", 2, "GPU 3, but CuPy sees 2 CUDA device(s) here (ids 0 to 1)", id="ids"),
    ],
)
def test_more_gpus_than_there_are(folder, monkeypatch, given, count, expect):
    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: count)
    line = run(folder, "--gpus", given)
    assert line == f"Error: ltdask run: --gpus {given} asks for {expect}; ask for fewer"


def test_gpus_without_cupy(folder, monkeypatch):
    monkeypatch.setattr(gpu_cluster.importlib.util, "find_spec", lambda name: None)
    line = run(folder, "--gpus", "1")
    assert line.startswith("Error: ltdask run: --gpus 1 asks for GPU workers, but CuPy is not")


def test_gpus_not_a_number(folder):
    assert "'x': expected a number of GPUs (2) or device ids (0,2)" in run(folder, "--gpus", "x")


def test_gpus_with_another_scheduler(folder, monkeypatch):
    monkeypatch.setattr(gpu_cluster, "device_count", lambda where, gpus: 1)
    result = invoke(
        ["--scheduler", "sync", "run", "sum", "scan.npy", "--out", "o.zarr", "--gpus", "1"],
        folder,
    )
    assert result.exit_code == 2
    assert "--gpus starts a local cluster of its own: leave out --scheduler 'sync'" in (
        result.stderr
    )
