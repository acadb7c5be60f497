"""Where the device tile path's time goes: the bus, the host's reads into pinned buffers,
the staging pipeline alone, and SumUDF / StdDevUDF on the GPU under other tile sizes,
partition sizes and thread counts, with the CPU run beside them; all interleaved, round by
round, in one process. Then a profile of one GPU run on one thread.

Run as ``python benchmarks/bench_gpu_staging.py --out FILE`` on a machine with CuPy and a
CUDA device (``--small``: nav 32x32). Uses the raw scans of `bench_read`.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dask  # noqa: E402
from bench_gpu import copy_method, gpu_options, without_device  # noqa: E402
from bench_read import SIG, cache_file, gbps, log, measure, scan_path, write_scan  # noqa: E402

import ltdask  # noqa: E402
from ltdask.udf import StdDevUDF, SumUDF  # noqa: E402

MIB = 2**20


def chunked_copy_method(nbytes: int, chunk: int):
    """The bus in copies of `chunk` bytes from one pinned buffer, on one stream."""
    import cupy

    memory = cupy.cuda.alloc_pinned_memory(chunk)
    host = np.frombuffer(memory, np.uint8, chunk)
    host[:] = 1
    device = cupy.empty(chunk, np.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def go():
        for _ in range(nbytes // chunk):
            device.set(host, stream=stream)
        stream.synchronize()

    return go


def host_read_method(path: str, threads: int, chunk: int = 8 * MIB):
    """The file's pages copied into pinned buffers by `threads` threads (no bus)."""
    import cupy

    mapped = np.memmap(path, np.uint8, "r")
    pinned = [
        np.frombuffer(cupy.cuda.alloc_pinned_memory(chunk), np.uint8, chunk) for _ in range(threads)
    ]
    starts = list(range(0, mapped.size, chunk))
    pool = ThreadPoolExecutor(threads)

    def part(i):
        buf = pinned[i]
        for start in starts[i::threads]:
            n = min(chunk, mapped.size - start)
            np.copyto(buf[:n], mapped[start : start + n])

    def go():
        list(pool.map(part, range(threads)))

    return go


def staging_method(path: str, dtype, threads: int, tile: int = 8 * MIB):
    """`ltdask.udf.device.TileStager` alone over the file, `threads` stagers at once."""
    from ltdask.udf.device import CupyDevice, TileStager

    mapped = np.memmap(path, dtype, "r")
    n = tile // mapped.itemsize
    starts = list(range(0, mapped.size, n))
    pool = ThreadPoolExecutor(threads)

    def part(i):
        stager = TileStager(CupyDevice(), dtype, n)
        for start in starts[i::threads]:
            _, slot = stager.stage(mapped[start : start + n])
            stager.release(slot)
        stager.finish()

    def go():
        list(pool.map(part, range(threads)))

    return go


def mapped_copy_method(path: str, chunk: int = 64 * MIB):
    """The file's pages copied to the device straight from its memory map in copies of
    `chunk` bytes: pageable memory, staged by the driver (no copy of ours)."""
    import cupy

    mapped = np.memmap(path, np.uint8, "r")
    device = cupy.empty(chunk, np.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def go():
        for start in range(0, mapped.size, chunk):
            n = min(chunk, mapped.size - start)
            device[:n].set(mapped[start : start + n], stream=stream)
        stream.synchronize()

    return go


def registered_copy_method(path: str, chunk: int = 64 * MIB):
    """As `mapped_copy_method`, with the memory map registered with CUDA once (read-only
    ``cudaHostRegister``): the page cache's pages read by the device itself, no host copy
    -- where the driver can lock a file's pages. Prints what the registration took."""
    import cupy

    runtime = cupy.cuda.runtime
    mapped = np.memmap(path, np.uint8, "r")
    t0 = time.perf_counter()
    runtime.hostRegister(mapped.ctypes.data, mapped.size, 8)  # (cudaHostRegisterReadOnly)
    log(f"  registered {mapped.size / 2**30:.2f} GiB in {time.perf_counter() - t0:.2f} s")
    device = cupy.empty(chunk, np.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def go():
        for start in range(0, mapped.size, chunk):
            n = min(chunk, mapped.size - start)
            runtime.memcpyAsync(
                device.data.ptr, mapped.ctypes.data + start, n, runtime.memcpyHostToDevice,
                stream.ptr,
            )  # fmt: skip
        stream.synchronize()

    go.mapped = mapped  # (the registration lives as long as the map)
    return go


def udf_method(path, dtype, nav, make, backends, **config):
    def go():
        with dask.config.set(config):
            ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
            return ltdask.compute(ds, [make()], backends=backends)

    return go


def methods_for(path, dtype, nav) -> dict:
    name = np.dtype(dtype).name
    nbytes = os.path.getsize(path)
    cpus = os.cpu_count() or 1
    gpu = ("cupy",)
    m = {
        f"{name} copy limit, one copy": copy_method(nbytes),
        f"{name} copy from the memory map (pageable)": mapped_copy_method(path),
        f"{name} copy limit, 8 MiB copies": chunked_copy_method(nbytes, 8 * MIB),
        f"{name} host read to pinned, 1 thread": host_read_method(path, 1),
        f"{name} host read to pinned, {cpus} threads": host_read_method(path, cpus),
        f"{name} TileStager only, 1 thread": staging_method(path, dtype, 1),
        f"{name} TileStager only, {cpus} threads": staging_method(path, dtype, cpus),
        f"{name} SumUDF cpu": udf_method(path, dtype, nav, SumUDF, "numpy"),
        f"{name} SumUDF gpu": udf_method(path, dtype, nav, SumUDF, gpu),
        f"{name} StdDevUDF gpu": udf_method(path, dtype, nav, StdDevUDF, gpu),
    }
    try:
        m[f"{name} copy from the memory map, registered"] = registered_copy_method(path)
    except Exception as e:  # (a driver that cannot lock a file's pages)
        log(f"  {name}: registering the memory map: {type(e).__name__}: {e}")
    for tile in ("32MiB", "128MiB"):
        for label, make in (("SumUDF", SumUDF), ("StdDevUDF", StdDevUDF)):
            m[f"{name} {label} gpu, tiles {tile}"] = udf_method(
                path, dtype, nav, make, gpu, **{"ltdask.tile-bytes": tile}
            )
    for threads in (1, 4):
        m[f"{name} SumUDF gpu, {threads} threads"] = udf_method(
            path, dtype, nav, SumUDF, gpu, num_workers=threads
        )
    m[f"{name} SumUDF gpu, partitions 512MiB, tiles 32MiB"] = udf_method(
        path,
        dtype,
        nav,
        SumUDF,
        gpu,
        **{"ltdask.partition-bytes": "512MiB", "ltdask.tile-bytes": "32MiB"},
    )
    return m


def profile(path, dtype, nav) -> str:
    run = udf_method(path, dtype, nav, SumUDF, ("cupy",), scheduler="sync")
    run()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run()
    prof.disable()
    took = time.perf_counter() - t0
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    return f"SumUDF gpu, 1 thread, {took:.2f} s, by own time:\n{out.getvalue()}"


def main(argv=None) -> int:
    args = gpu_options(argv, __doc__.splitlines()[0], repeats=3)
    if without_device("bench_gpu_staging"):
        return 2
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    methods, sizes = {}, {}
    plans = []
    for dtype in (np.dtype(np.uint16), np.dtype(np.float32)):
        path = scan_path(args.dir, dtype, nav)
        write_scan(path, dtype, nav)
        cache_file(path)
        sizes[dtype.name] = os.path.getsize(path)
        methods.update(methods_for(path, dtype, nav))
        ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
        try:
            plans.append(str(ltdask.explain(ds, [SumUDF()], backends=("cupy",))))
        except Exception as e:
            plans.append(f"explain: {type(e).__name__}: {e}")
    for name, fn in list(methods.items()):  # (one that fails is left out, not the rest)
        try:
            fn()
        except Exception as e:
            log(f"  {name}: {type(e).__name__}: {e}; left out")
            del methods[name]
    times, _, _ = measure(methods, args.repeats, max(sizes.values()))
    lines = [f"medians of {args.repeats} rounds, GB/s of file bytes", ""]
    lines += ["| what | GB/s |", "|---|---|"]
    for name, ts in times.items():
        lines.append(f"| {name} | {gbps(sizes[name.split()[0]], ts):.1f} |")
    text = "\n".join([*lines, "", *plans])
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    try:
        prof = profile(scan_path(args.dir, np.dtype(np.uint16), nav), np.uint16, nav)
    except Exception as e:
        prof = f"profile: {type(e).__name__}: {e}"
    print(prof)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + prof + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
