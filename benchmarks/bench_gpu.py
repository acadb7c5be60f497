"""Shipped UDFs on the GPU (CuPy) against the same runs on the CPU, interleaved.

Run as ``python benchmarks/bench_gpu.py`` on a machine with CuPy and a CUDA device
(``--small`` for a quick check). Writes (once, to ``--dir``) the float32 and uint16 raw
scans of `bench_read` (nav 128x128, sig 256x256), makes sure they are page-cached, and runs
each UDF with ``backends=("cupy",)`` and ``backends="numpy"`` on the threaded scheduler
(all of the machine's cores), round by round in one process; prints GB/s of file bytes and
GPU / CPU. The GPU runs include the host reads and the copies to the device: the scan is
read from the page cache by the CPU either way.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import SIG, cache_file, gbps, log, measure, scan_path, write_scan  # noqa: E402
from bench_udfs import ring_masks  # noqa: E402

import ltdask  # noqa: E402
from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF, SumSigUDF, SumUDF  # noqa: E402


def runs(path, dtype, nav) -> dict:
    dense16 = ring_masks(16)
    disk = ring_masks(1)
    udfs = {
        "SumUDF": lambda: [SumUDF()],
        "SumSigUDF": lambda: [SumSigUDF()],
        "StdDevUDF": lambda: [StdDevUDF()],
        "ApplyMasksUDF 1 dense": lambda: [ApplyMasksUDF(lambda: disk)],
        "ApplyMasksUDF 16 dense": lambda: [ApplyMasksUDF(lambda: dense16)],
        "CoMUDF": lambda: [CoMUDF.with_params(r=SIG[0] / 4)],
    }

    def run(make, backends):
        def go():
            ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
            return ltdask.compute(ds, make(), backends=backends)

        return go

    methods = {}
    for name, make in udfs.items():
        methods[f"{name} cpu"] = run(make, "numpy")
        methods[f"{name} gpu"] = run(make, ("cupy",))
    return methods


def check(path, dtype, nav) -> None:
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF(), ApplyMasksUDF(lambda: ring_masks(16))]
    plan = ltdask.explain(ds, udfs, backends=("cupy",)).backends
    assert plan.device == "cuda", plan
    cpu = ltdask.compute(ds, udfs, backends="numpy")
    gpu = ltdask.compute(ds, udfs, backends=("cupy",))
    for a, b in zip(cpu, gpu, strict=True):
        for name in a.data_vars:
            np.testing.assert_allclose(b[name].values, a[name].values, rtol=1e-4, atol=1e-3)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench-read")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="nav 32x32")
    args = parser.parse_args(argv)
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    log(f"device: {props['name'].decode()}, {os.cpu_count()} CPUs")
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    for dtype in (np.dtype(np.uint16), np.dtype(np.float32)):
        path = scan_path(args.dir, dtype, nav)
        if not os.path.exists(path):
            write_scan(path, dtype, nav)
        cache_file(path)
        check(path, dtype, nav)
        nbytes = os.path.getsize(path)
        times, load, _ = measure(runs(path, dtype, nav), args.repeats, nbytes)
        print(f"\n{dtype.name}, {nbytes / 2**30:.1f} GiB, medians of {args.repeats} rounds")
        print("| UDF | CPU GB/s | GPU GB/s | GPU / CPU |\n|---|---|---|---|")
        for name in [n[:-4] for n in times if n.endswith(" cpu")]:
            cpu, gpu = gbps(nbytes, times[f"{name} cpu"]), gbps(nbytes, times[f"{name} gpu"])
            print(f"| {name} | {cpu:.1f} | {gpu:.1f} | {gpu / cpu:.2f} |")


if __name__ == "__main__":
    main()
