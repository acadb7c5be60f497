"""Shipped UDFs on the GPU (CuPy) against the same runs on the CPU, with the bus's own
limit, both scans interleaved in one process.

Run as ``python benchmarks/bench_gpu.py`` on a machine with CuPy and a CUDA device
(``--small`` for a quick check; ``benchmarks/gpu_session.sh`` runs it with the CUDA tests
on a lent GPU machine). Writes (once, to ``--dir``) the float32 and uint16 raw scans of
`bench_read` (nav 128x128, sig 256x256) and makes sure they are page-cached. Each round
runs, for both scans, a plain CuPy copy of a pinned host buffer of the scan's size to
the device (the bus's limit) and each UDF with ``backends=("cupy",)`` and
``backends="numpy"`` on the threaded scheduler (all of the machine's cores); prints (and
writes to ``--out``) GB/s of file bytes, GPU / CPU and GPU / copy limit, against the
targets of issue 35. The GPU runs include the host reads and the copies to the device:
the scan is read from the page cache by the CPU either way. Then a run split between a
GPU worker and a CPU worker (two GPU workers where there are two GPUs) is checked
against the single-GPU results.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import SIG, cache_file, gbps, log, measure, scan_path, write_scan  # noqa: E402
from bench_udfs import ring_masks  # noqa: E402

import ltdask  # noqa: E402
from ltdask.analysis.radial import radial_fourier_masks  # noqa: E402
from ltdask.udf import (  # noqa: E402
    FEMUDF,
    ApplyMasksUDF,
    CoMUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

#: rows at the bus's speed (GPU / copy limit >= 0.7) and heavy rows (GPU / CPU >= 5)
AT_THE_BUS = ("SumUDF", "SumSigUDF", "ApplyMasksUDF 1 dense", "CoMUDF")
HEAVY = ("ApplyMasksUDF 256 dense", "radial Fourier 32x8", "FEMUDF")


def no_device() -> str | None:
    """Why this process cannot use a CUDA device through CuPy, or None."""
    try:
        import cupy
    except ImportError as e:
        return f"CuPy is not installed ({e})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # (no driver: cupy imports, CUDA calls fail)
        return f"CuPy finds no CUDA driver ({type(e).__name__}: {e})"
    return None if count > 0 else "CuPy sees no CUDA device"


def udf_factories() -> dict:
    c = SIG[0] / 2
    radial = radial_fourier_masks(SIG[0], SIG[1], c, c, 0, c, 32, 7, use_sparse=False)
    dense16, dense256, disk = ring_masks(16), ring_masks(256), ring_masks(1)
    return {
        "SumUDF": lambda: [SumUDF()],
        "SumSigUDF": lambda: [SumSigUDF()],
        "ApplyMasksUDF 1 dense": lambda: [ApplyMasksUDF(lambda: disk)],
        "CoMUDF": lambda: [CoMUDF.with_params(r=SIG[0] / 4)],
        "StdDevUDF": lambda: [StdDevUDF()],
        "ApplyMasksUDF 16 dense": lambda: [ApplyMasksUDF(lambda: dense16)],
        "ApplyMasksUDF 256 dense": lambda: [ApplyMasksUDF(lambda: dense256)],
        "radial Fourier 32x8": lambda: [ApplyMasksUDF(radial, use_sparse=False)],
        "FEMUDF": lambda: [FEMUDF(center=(c, c), rad_in=c / 4, rad_out=c / 2)],
    }


def on_gpu(make) -> bool:
    """Whether the UDFs of `make` take a CuPy backend (else no GPU row)."""
    return all(ltdask.UDF.BACKEND_CUPY in u.get_backends() for u in make())


def copy_method(nbytes: int):
    """A plain copy of a pinned host buffer of `nbytes` to the device, waited for."""
    import cupy

    memory = cupy.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(memory, np.uint8, nbytes)
    host[:] = 1
    device = cupy.empty(nbytes, np.uint8)

    def go():
        device.set(host)
        cupy.cuda.get_current_stream().synchronize()

    return go


def runs(path, dtype, nav, factories) -> dict:
    def run(make, backends):
        def go():
            ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
            return ltdask.compute(ds, make(), backends=backends)

        return go

    nbytes = os.path.getsize(path)
    methods = {f"{dtype.name} copy limit": copy_method(nbytes)}
    for name, make in factories.items():
        methods[f"{dtype.name} {name} cpu"] = run(make, "numpy")
        if on_gpu(make):
            methods[f"{dtype.name} {name} gpu"] = run(make, ("cupy",))
    return methods


def check(path, dtype, nav, factories) -> None:
    """Every GPU row's results equal to its CPU run's."""
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    for name, make in factories.items():
        if not on_gpu(make):
            log(f"  {name}: no CUDA backend, CPU only")
            continue
        plan = ltdask.explain(ds, make(), backends=("cupy",))
        assert plan.backends.device == "cuda", plan
        how = [line for line in str(plan).splitlines() if "GPU" in line]
        log(f"  {name} on the GPU: {how[0] if how else 'tiles copied by the UDFs'}")
        cpu = ltdask.compute(ds, make(), backends="numpy")
        gpu = ltdask.compute(ds, make(), backends=("cupy",))
        for a, b in zip(cpu, gpu, strict=True):
            for var in a.data_vars:
                assert_close(b[var].values, a[var].values, name)


def assert_close(actual, desired, name) -> None:
    """Equal up to float32 rounding: the devices sum in different orders, so an element
    far below the result's largest (a Fourier coefficient near zero) is compared against
    the largest's rounding, not its own."""
    scale = float(np.abs(desired).max()) if np.size(desired) else 0.0
    np.testing.assert_allclose(
        actual, desired, rtol=1e-4, atol=max(1e-3, 1e-4 * scale), err_msg=name
    )


def table(dtype, nbytes, times, factories) -> list[str]:
    limit = gbps(nbytes, times[f"{dtype.name} copy limit"])
    lines = [
        f"{dtype.name}, {nbytes / 2**30:.1f} GiB; pinned copy to the device: {limit:.1f} GB/s",
        "",
        "| UDF | CPU GB/s | GPU GB/s | GPU / CPU | GPU / copy limit | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in factories:
        cpu = gbps(nbytes, times[f"{dtype.name} {name} cpu"])
        if f"{dtype.name} {name} gpu" not in times:
            lines.append(f"| {name} | {cpu:.1f} | - | - | - | no CUDA backend | no |")
            continue
        gpu = gbps(nbytes, times[f"{dtype.name} {name} gpu"])
        target, met = "", ""
        if name in AT_THE_BUS:
            target = ">= 0.7 of copy" + (", >= CPU" if dtype.kind != "f" else "")
            met = gpu >= 0.7 * limit and (dtype.kind == "f" or gpu >= cpu)
        elif name in HEAVY:
            target, met = ">= 5x CPU", gpu >= 5 * cpu
        mark = "" if not target else ("yes" if met else "no")
        lines.append(
            f"| {name} | {cpu:.1f} | {gpu:.1f} | {gpu / cpu:.2f} | {gpu / limit:.2f} "
            f"| {target} | {mark} |"
        )
    return lines


def split_check(path, dtype, nav) -> str:
    """A run on a cluster of GPU and CPU workers (two GPU workers where there are two
    GPUs, else one GPU and one CPU worker) against the same run on this process's GPU."""
    import cupy
    import dask
    from distributed import get_task_stream

    from ltdask.runtime.gpu_cluster import start_local
    from ltdask.udf.graph import PARTITION_TASKS

    two = cupy.cuda.runtime.getDeviceCount() >= 2
    cpus, gpus = (0, [0, 1]) if two else (1, [0])
    make = udf_factories()
    udfs = [*make["SumUDF"](), *make["SumSigUDF"](), *make["ApplyMasksUDF 16 dense"]()]
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    alone = ltdask.compute(ds, udfs, backends=("cupy",))
    client = start_local(cpus, gpus)
    try:
        workers = client.scheduler_info()["workers"]
        with client.as_current(), dask.config.set(scheduler=client):
            with get_task_stream(client) as stream:
                t0 = time.perf_counter()
                split = ltdask.compute(ds, udfs)
                seconds = time.perf_counter() - t0
    finally:
        client.close()
        client.cluster.close()
    for a, b in zip(alone, split, strict=True):
        for var in a.data_vars:
            assert_close(b[var].values, a[var].values, "split run")
    took: dict[str, int] = {}
    for t in stream.data:
        if PARTITION_TASKS in str(t["key"]):
            name = workers[t["worker"]]["name"]
            took[name] = took.get(name, 0) + 1
    return (
        f"split run ({dtype.name}, {cpus} CPU + GPU workers {gpus}): results equal to the "
        f"single-GPU run; partitions per worker {took}; {seconds:.2f} s"
    )


def gpu_options(argv, description: str, repeats: int) -> argparse.Namespace:
    """The options of the GPU benchmarks (the scans of `bench_read`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dir", default="/tmp/ltdask-bench-read")
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--small", action="store_true", help="nav 32x32")
    parser.add_argument("--out", help="write the tables (markdown) to this file too")
    return parser.parse_args(argv)


def without_device(name: str) -> bool:
    """Says so (on stderr) where this process has no CUDA device."""
    why = no_device()
    if why is not None:
        print(f"{name}: no CUDA device: {why}; run it on a machine with one", file=sys.stderr)
    return why is not None


def main(argv=None) -> int:
    args = gpu_options(argv, __doc__.splitlines()[0], repeats=5)
    if without_device("bench_gpu"):
        return 2
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    head = f"device: {props['name'].decode()}, {os.cpu_count()} CPUs"
    log(head)
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    factories = udf_factories()
    methods, sizes = {}, {}
    for dtype in (np.dtype(np.uint16), np.dtype(np.float32)):
        path = scan_path(args.dir, dtype, nav)
        write_scan(path, dtype, nav)
        cache_file(path)
        check(path, dtype, nav, factories)
        sizes[dtype] = os.path.getsize(path)
        methods.update(runs(path, dtype, nav, factories))
    # both scans' runs interleaved, round by round; the copy limit measured in each round
    times, _, _ = measure(methods, args.repeats, max(sizes.values()))
    lines = [head, f"medians of {args.repeats} rounds, GB/s of file bytes", ""]
    for dtype, nbytes in sizes.items():
        lines += [*table(dtype, nbytes, times, factories), ""]
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    uint16 = np.dtype(np.uint16)
    split = split_check(scan_path(args.dir, uint16, nav), uint16, nav)
    print(split)
    if args.out:
        with open(args.out, "a") as f:
            f.write(split + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
