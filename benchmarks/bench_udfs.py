"""Throughput of the shipped UDFs against the machine's read limit and dask baselines.

Run as ``.venv/bin/python benchmarks/bench_udfs.py`` (``--small`` for a quick check).

Uses the scans of ``bench_read.py`` (4 GiB float32 and 2 GiB uint16, nav 128x128, sig
256x256; written once to ``--dir`` and page-cached). For each dtype it prints, in GB/s of
file bytes (threaded scheduler, 2 threads, median of ``--repeats`` after a warm-up):

* the ceiling: an ``np.memmap`` of the file summed in 8-row slices on 2 threads;
* ``SumUDF``, ``SumSigUDF``, ``StdDevUDF``, ``ApplyMasksUDF`` with 1 and 16 dense masks and
  16 sparse masks, ``CoMUDF``, ``SumUDF`` with a 50 % random ROI, and Sum+SumSig+StdDev in
  one pass, each as a share of the ceiling next to the issue's target;
* a user UDF summing over the signal with ``process_tile`` in plain numpy, and the trio run
  separately (sum of the three times) against the one-pass run;
* for uint16, the best ``da.from_array(memmap).astype(float32)`` expression of the same
  reduction for Sum, SumSig and StdDev, and ltdask's speed-up over it.

With the default ``ltdask.map-cache-bytes`` (``auto``), UDF runs keep their memory maps
from the second run over a file on, as the ceiling's long-lived memmap does; the warm-up
run is the first. A scan's first run faults its pages in and reaches about half the
ceiling (set ``DASK_LTDASK__MAP_CACHE_BYTES=0`` to measure that case).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as da
import numpy as np
import sparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import (  # noqa: E402
    SIG,
    THREADS,
    MemmapArray,
    cache_file,
    gbps,
    log,
    measure,
    meminfo,
    memmap_candidates,
    numpy_threads_method,
    scan_path,
    write_scan,
)

import ltdask  # noqa: E402
from ltdask.udf import (  # noqa: E402
    UDF,
    ApplyMasksUDF,
    CoMUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

# share of the ceiling each float32 run should reach (issue targets)
TARGETS = {
    "SumUDF": 0.90,
    "SumSigUDF": 0.90,
    "ApplyMasksUDF 1 dense": 0.90,
    "SumUDF 50% ROI": 0.90,
    "CoMUDF": 0.80,
    "StdDevUDF": 0.60,
    "Sum+SumSig+StdDev one pass": 0.60,
    "ApplyMasksUDF 16 dense": 0.45,
    "ApplyMasksUDF 16 sparse": 0.40,
}


class NumpySumSigUDF(UDF):
    """What a user writes first: a sum over the signal with ``process_tile`` in numpy."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float32")}

    def process_tile(self, tile):
        self.results.intensity[:] += tile.reshape(tile.shape[0], -1).sum(axis=1)


def ring_masks(n: int) -> np.ndarray:
    y, x = np.mgrid[: SIG[0], : SIG[1]]
    r = np.hypot(y - SIG[0] / 2, x - SIG[1] / 2)
    edges = np.linspace(0, SIG[0] / 2, n + 1)
    return np.stack(
        [(r >= a) & (r < b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    ).astype(np.float32)


def udf_runs(path, dtype, nav, roi):
    dense16 = ring_masks(16)
    dense16 += np.random.default_rng(0).random(dense16.shape, dtype=np.float32) * 1e-3
    sparse16 = sparse.COO.from_numpy(ring_masks(16))
    disk = ring_masks(1)

    def run(udfs, roi=None):
        def go():
            ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
            return ltdask.compute(ds, udfs, roi=roi)

        return go

    return {
        "SumUDF": run([SumUDF()]),
        "SumSigUDF": run([SumSigUDF()]),
        "StdDevUDF": run([StdDevUDF()]),
        "ApplyMasksUDF 1 dense": run([ApplyMasksUDF(lambda: disk)]),
        "ApplyMasksUDF 16 dense": run([ApplyMasksUDF(lambda: dense16)]),
        "ApplyMasksUDF 16 sparse": run([ApplyMasksUDF(lambda: sparse16, use_sparse=True)]),
        "CoMUDF": run([CoMUDF.with_params(r=SIG[0] / 4)]),
        "SumUDF 50% ROI": run([SumUDF()], roi),
        "Sum+SumSig+StdDev one pass": run([SumUDF(), SumSigUDF(), StdDevUDF()]),
        "numpy process_tile sum-over-sig UDF": run([NumpySumSigUDF()]),
    }


def dask_baselines(path, dtype, nav):
    """``da.from_array(memmap).astype(float32)`` reductions at several chunkings."""
    out = {}
    for chunks in memmap_candidates(nav)[1:]:
        label = f"{chunks[0]} rows"

        def make(kind, chunks=chunks):
            def go():
                x = da.from_array(MemmapArray(path, dtype, (*nav, *SIG)), chunks=chunks)
                x = x.astype(np.float32)
                if kind == "sum":
                    return x.sum(axis=(0, 1)).compute()
                if kind == "sumsig":
                    return x.sum(axis=(2, 3)).compute()
                return x.std(axis=(0, 1)).compute()

            return go

        for kind in ("sum", "sumsig", "std"):
            out[f"dask astype {kind} {label}"] = make(kind)
    return out


def bench(path, dtype, nav, repeats):
    nbytes = math.prod(nav) * math.prod(SIG) * dtype.itemsize
    roi = np.random.default_rng(1).random(nav) < 0.5
    mm = np.memmap(path, dtype=dtype, mode="r", shape=(*nav, *SIG))
    pool = ThreadPoolExecutor(THREADS)
    methods = {"ceiling: memmap 8-row slices": numpy_threads_method(mm, (0, 1), pool, 8)}
    methods.update(udf_runs(path, dtype, nav, roi))
    if dtype.kind != "f":
        methods.update(dask_baselines(path, dtype, nav))
    times, foreign, _ = measure(methods, repeats, nbytes, max_foreign=0.10, max_rounds=3 * repeats)
    speed = {k: gbps(nbytes, v) for k, v in times.items()}
    ceiling = speed["ceiling: memmap 8-row slices"]

    print(f"\n### {dtype.name}: nav {nav}, sig {SIG}, {nbytes / 2**30:.2f} GiB, {THREADS} threads")
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    from ltdask.udf.graph import Run

    print(f"    partitions {len(ds.get_partitions())}, tiles {Run(ds, [SumUDF()]).scheme}")
    print(f"    other processes used {foreign:.0%} of the CPUs during the kept rounds")
    print(f"{'method':<42}{'GB/s':>8}{'/ceiling':>10}{'target':>8}  ok")
    print("-" * 74)
    for name, value in speed.items():
        if name.startswith("dask astype"):
            continue
        target = TARGETS.get(name) if dtype.kind == "f" else None
        ratio = value / ceiling
        mark = "" if target is None else ("yes" if ratio >= target else "NO")
        tgt = "" if target is None else f"{target:.2f}"
        print(f"{name:<42}{value:8.2f}{ratio:10.2f}{tgt:>8}  {mark}")
    trio = [speed[k] for k in ("SumUDF", "SumSigUDF", "StdDevUDF")]
    separate = 1 / sum(1 / s for s in trio)
    print(f"{'the trio run separately (combined)':<42}{separate:8.2f}{separate / ceiling:10.2f}")
    print(f"one pass vs separately: {speed['Sum+SumSig+StdDev one pass'] / separate:.2f}x")
    if dtype.kind != "f":
        print(f"\n{'uint16 vs dask astype(float32)':<42}{'ltdask':>8}{'best dask':>11}{'x':>7}")
        for udf_name, kind in (("SumUDF", "sum"), ("SumSigUDF", "sumsig"), ("StdDevUDF", "std")):
            cands = {k: v for k, v in speed.items() if k.startswith(f"dask astype {kind} ")}
            best = max(cands, key=cands.get)
            ratio = speed[udf_name] / cands[best]
            print(
                f"{udf_name:<42}{speed[udf_name]:8.2f}{cands[best]:11.2f}{ratio:7.2f}"
                f"  (target 1.30: {'yes' if ratio >= 1.3 else 'NO'}; best: {best})"
            )
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench")
    parser.add_argument("--small", action="store_true", help="nav 32x32 instead of 128x128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "uint16", "both"], default="both")
    args = parser.parse_args(argv)
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    log(meminfo())
    dtypes = ["float32", "uint16"] if args.dtype == "both" else [args.dtype]
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        for name in dtypes:
            dtype = np.dtype(name)
            path = scan_path(args.dir, dtype, nav)
            write_scan(path, dtype, nav)
            cache_file(path)
            bench(path, dtype, nav, args.repeats)


if __name__ == "__main__":
    main()
