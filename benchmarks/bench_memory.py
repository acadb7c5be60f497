"""Peak memory of a UDF run and of a dask reduction as the scan grows 16-fold.

Run as ``.venv/bin/python benchmarks/bench_memory.py`` (``--small`` for a quick check with
64, 256 and 1024 MiB scans).

Writes raw uint16 scans of 1, 4 and 16 GiB (frames of 256 x 256) block by block to
``--dir``, then measures, each case in a fresh subprocess (so that nothing is left from an
earlier case), with dask's threaded scheduler on 2 threads:

* ``SumUDF``: ``SumUDF().compute(ltdask.open_raw(...))`` (uint16 decoded to float32 tiles);
* ``to_dask().sum()``: ``ds.to_dask().sum().compute()`` (views of the memory-mapped files).

The subprocess warms up (imports, numba kernels on a tiny scan), then samples
``/proc/self/status`` every 5 ms in a thread while the case runs and reports the peak of
``VmRSS`` (``VmHWM``, the kernel's own high-water mark, as a check), ``RssAnon`` (heap:
buffers, results) and ``RssFile`` (pages of memory-mapped files that the process has
touched and still maps). Memory-mapped file pages count in RSS only while they are mapped;
they are page cache, not memory the process owns, but they are what users see in ``top``.

The peaks must stay flat (within about 1.5x) from the smallest scan to the 16x larger one.
The 16 GiB scan is deleted at the end unless ``--keep``; the 1 and 4 GiB ones are kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

SIG = (256, 256)
DTYPE = "uint16"
THREADS = 2
GIB = 2**30
MIB = 2**20
#: scan sizes and their nav shapes (frames of 256 x 256 uint16 are 128 KiB)
SIZES = {
    "1 GiB": (64, 128),
    "4 GiB": (128, 256),
    "16 GiB": (256, 512),
}
SMALL_SIZES = {
    "64 MiB": (16, 32),
    "256 MiB": (32, 64),
    "1 GiB": (64, 128),
}
CASES = ("SumUDF", "to_dask().sum()")


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def scan_path(directory: str, nav: tuple[int, int]) -> str:
    return os.path.join(directory, f"mem_{DTYPE}_{nav[0]}x{nav[1]}_{SIG[0]}x{SIG[1]}.raw")


def write_scan(path: str, nav: tuple[int, int]) -> None:
    """A cheap pattern (the values do not matter here), 256 frames per block."""
    import numpy as np

    frames = math.prod(nav)
    size = frames * math.prod(SIG) * 2
    if os.path.exists(path) and os.path.getsize(path) == size:
        log(f"  {path}: present ({size / GIB:.2f} GiB)")
        return
    log(f"  writing {path} ({size / GIB:.2f} GiB) ...")
    t0 = time.perf_counter()
    base = (np.arange(256 * math.prod(SIG), dtype=np.uint32) % 4099).astype(np.uint16)
    base = base.reshape(256, -1)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        for first in range(0, frames, 256):
            n = min(256, frames - first)
            (base[:n] + np.uint16(first % 7)).tofile(f)
    os.replace(tmp, path)
    log(f"  wrote {path} in {time.perf_counter() - t0:.1f} s")


# -- the measured subprocess ------------------------------------------------------------------
def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def measure(case: str, path: str, nav: tuple[int, int]) -> dict:
    """Run one case in this process; the peaks of RSS and its parts while it ran."""
    import threading

    import dask
    import numpy as np

    import ltdask
    from ltdask.udf import SumUDF

    def run(p, n):
        ds = ltdask.open_raw(p, nav_shape=n, sig_shape=SIG, dtype=DTYPE)
        if case == "SumUDF":
            return SumUDF().compute(ds)["intensity"].values.sum()
        return ds.to_dask().sum().compute()

    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=DTYPE)
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        # warm up: imports, numba kernels (compiled or loaded from cache), thread pool
        tiny = path + f".warmup-{os.getpid()}"
        np.ones((4, 4, *SIG), dtype=DTYPE).tofile(tiny)
        try:
            run(tiny, (4, 4))
        finally:
            os.remove(tiny)
        before = _status()
        peaks = dict(before)
        done = threading.Event()

        def sample():
            while not done.is_set():
                for k, v in _status().items():
                    peaks[k] = max(peaks.get(k, 0), v)
                done.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        try:
            run(path, nav)
        finally:
            seconds = time.perf_counter() - t0
            done.set()
            sampler.join()
        after = _status()
    for k, v in after.items():
        peaks[k] = max(peaks.get(k, 0), v)
    return {
        "before": before,
        "peak": peaks,
        "after": after,
        "seconds": seconds,
        "partitions": len(ds.get_partitions()),
    }


def run_case(case: str, path: str, nav: tuple[int, int]) -> dict:
    """`measure` in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--measure", case, path, json.dumps(nav)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{case} on {path} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench", help="where the scans live")
    parser.add_argument("--small", action="store_true", help="64 MiB to 1 GiB scans")
    parser.add_argument("--keep", action="store_true", help="keep the largest scan")
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.measure:
        case, path, nav = args.measure
        print(json.dumps(measure(case, path, tuple(json.loads(nav)))))
        return 0

    sizes = SMALL_SIZES if args.small else SIZES
    os.makedirs(args.dir, exist_ok=True)
    log("scans:")
    paths = {}
    for label, nav in sizes.items():
        paths[label] = scan_path(args.dir, nav)
        write_scan(paths[label], nav)

    rows = []
    try:
        for case in CASES:
            for label, nav in sizes.items():
                log(f"  {case} on {label} ...")
                rows.append((case, label, run_case(case, paths[label], nav)))
    finally:
        if not args.keep:
            largest = list(sizes)[-1]
            if largest not in ("1 GiB", "4 GiB") and os.path.exists(paths[largest]):
                os.remove(paths[largest])
                log(f"  removed {paths[largest]}")

    print(
        f"Peak memory, {DTYPE} scans of {SIG[0]}x{SIG[1]} frames, threaded scheduler, "
        f"{THREADS} threads (MiB; 'delta' is the rise over the warmed-up process)"
    )
    header = (
        f"{'case':<17} {'scan':>8} {'parts':>5} {'s':>6} {'base RSS':>9} {'peak RSS':>9} "
        f"{'VmHWM':>7} {'d RSS':>7} {'pk anon':>8} {'d anon':>7} {'pk file':>8} "
        f"{'after':>7}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for case in CASES:
        deltas = []
        for c, label, r in rows:
            if c != case:
                continue
            b, p, a = r["before"], r["peak"], r["after"]
            d_rss = p["VmRSS"] - b["VmRSS"]
            deltas.append(p["VmRSS"])
            print(
                f"{case:<17} {label:>8} {r['partitions']:>5} {r['seconds']:>6.1f} "
                f"{b['VmRSS'] / MIB:>9.0f} {p['VmRSS'] / MIB:>9.0f} {p['VmHWM'] / MIB:>7.0f} "
                f"{d_rss / MIB:>7.0f} {p['RssAnon'] / MIB:>8.0f} "
                f"{(p['RssAnon'] - b['RssAnon']) / MIB:>7.0f} {p['RssFile'] / MIB:>8.0f} "
                f"{a['VmRSS'] / MIB:>7.0f}"
            )
        growth = deltas[-1] / deltas[0]
        flat = growth <= 1.5
        ok &= flat
        print(
            f"{'':<17} peak RSS, largest / smallest scan: {growth:.2f}x "
            f"({'flat' if flat else 'GROWS'})"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
