"""Peak memory of writing a nav result larger than the scan to Zarr, with ``ltdask.to_zarr``.

Run as ``.venv/bin/python benchmarks/bench_zarr_memory.py`` (``--small`` for a quick check
with nav 256x256 and 128x128, and 256x256 with 2 MiB partitions).

Writes (once) a raw uint8 scan, nav 1024x1024, frames of 16x16 (256 MiB), to ``--dir``.
`RadialBinsUDF` (below) turns each frame into 1024 float32 values, a radial histogram with
1024 bins of which most are empty, so that the nav result is 1024 x 1024 x 1024 x 4 B =
4 GiB, 16 times the scan. Each case runs in a fresh subprocess (``--child``), so that the
peak RSS belongs to its work alone:

    lazy = RadialBinsUDF().lazy(ltdask.open_raw(...))
    ltdask.to_zarr(lazy, out, mode="w")   # dask's threaded scheduler, 2 threads

The child reports the peak RSS (``ru_maxrss``, and ``VmHWM`` from ``/proc/self/status``),
the peak ``RssAnon`` (heap; sampled every 5 ms in a thread) and ``RssAnon``/``RssFile`` at
the end (``RssFile`` are pages of memory-mapped files, here the scan), the RSS after the
imports, and the wall time of ``to_zarr``; then it checks a few positions of the store
(read back with ``xarray.open_zarr``) against numpy on the same frames. A second case with
nav 512x512 (result 1 GiB) shows that the peak does not grow with the result: it is set by
the partitions being processed at a time (``ltdask.partition-bytes``, counted in float32
pixels of the *input*: 131072 frames of 16x16 per partition, whose result is 512 MiB) and
the threads, not by the result's size. A third case, nav 1024x1024 again with
``ltdask.partition-bytes`` at 16 MiB (partitions of 16384 frames, results of 64 MiB), shows
that. The written stores are deleted at the end; the scan is kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

import ltdask

SIG = (16, 16)
BINS = 1024
THREADS = 2
GIB = 2**30
#: the cases: name -> (nav shape, ``ltdask.partition-bytes`` or None for the default)
CASES = {
    "nav 1024x1024": ((1024, 1024), None),
    "nav 512x512": ((512, 512), None),
    "1024x1024 16M": ((1024, 1024), "16MiB"),
}
SMALL_CASES = {
    "nav 256x256": ((256, 256), None),
    "nav 128x128": ((128, 128), None),
    "256x256 2M": ((256, 256), "2MiB"),
}


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def radial_bins(sig_shape=SIG, bins: int = BINS) -> np.ndarray:
    """The bin of each pixel: its distance from the frame centre, in steps of 1/96 pixel."""
    y, x = np.indices(sig_shape)
    cy, cx = (sig_shape[0] - 1) / 2, (sig_shape[1] - 1) / 2
    r = np.hypot(y - cy, x - cx)
    return np.minimum((r * 96).astype(np.int64), bins - 1)


def radial_profile(frames: np.ndarray, bins: np.ndarray, nbins: int = BINS) -> np.ndarray:
    """``(n, nbins)`` float32: each frame's pixels summed into `bins` (pixels ``(n, k)``,
    `bins` ``(k,)``); the reference, and the UDF's kernel."""
    n = frames.shape[0]
    flat = frames.reshape(n, -1)
    idx = (np.arange(n, dtype=np.int64)[:, None] * nbins + bins.reshape(-1)[None, :]).ravel()
    out = np.bincount(idx, weights=flat.ravel(), minlength=n * nbins)
    return out.reshape(n, nbins).astype(np.float32)


class RadialBinsUDF(ltdask.UDF):
    """A radial histogram of each frame in 1024 bins: a ``(1024,)`` float32 nav result."""

    def get_result_buffers(self):
        return {"profile": self.buffer(kind="nav", extra_shape=(BINS,), dtype="float32")}

    def get_task_data(self):
        return {"bins": radial_bins(tuple(self.meta.dataset_shape.sig), BINS)}

    def process_tile(self, tile):
        # a tile may hold part of each frame: its pixels go to their bins, added up
        bins = self.meta.slice.get(self.task_data.bins, sig_only=True)
        self.results.profile[:] += radial_profile(tile, bins)


def scan_path(directory: str, nav: tuple[int, int]) -> str:
    return os.path.join(directory, f"zmem_uint8_{nav[0]}x{nav[1]}_{SIG[0]}x{SIG[1]}.raw")


def write_scan(path: str, nav: tuple[int, int]) -> None:
    """Random uint8 counts, one block of 64 scan rows at a time."""
    size = math.prod(nav) * math.prod(SIG)
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    log(f"  writing {path} ({size / 2**20:.0f} MiB)")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "wb") as f:
        for row in range(0, nav[0], 64):
            rng = np.random.default_rng([2026, row])
            rows = min(64, nav[0] - row)
            rng.integers(0, 256, size=(rows, nav[1], *SIG), dtype=np.uint8).tofile(f)
    os.replace(path + ".part", path)


def status() -> dict[str, int]:
    """``/proc/self/status`` memory fields, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0]) * 1024
    return out


def child(scan: str, scan_nav: tuple[int, int], nav: tuple[int, int], out: str) -> dict:
    """Run in a fresh process: write the result of `nav` positions to `out`, measure."""
    import resource

    import dask
    import xarray as xr

    after_imports = status()["VmRSS"]
    peak_anon = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak_anon[0] = max(peak_anon[0], status()["RssAnon"])
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # the first nav[0] x nav[1] frames of the scan, read as a scan of their own
    ds = ltdask.open_raw(scan, nav, SIG, "uint8")
    lazy = RadialBinsUDF().lazy(ds)
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        ltdask.to_zarr(lazy, out, mode="w")
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    end = status()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # check some positions against numpy on the same frames
    frames = np.memmap(scan, np.uint8, "r", shape=(math.prod(scan_nav), *SIG))
    back = xr.open_zarr(out)["profile"]
    bins = radial_bins()
    rng = np.random.default_rng(7)
    points = [(0, 0), (nav[0] - 1, nav[1] - 1)] + [
        tuple(int(v) for v in rng.integers(0, nav, size=2)) for _ in range(6)
    ]
    checked = 0
    for y, x in points:
        want = radial_profile(np.asarray(frames[y * nav[1] + x])[None].astype(np.float32), bins)
        got = back[y, x].values
        if not np.array_equal(got, want[0]):
            raise AssertionError(f"position {(y, x)}: store {got[:8]}..., numpy {want[0][:8]}...")
        checked += 1
    store_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    return {
        "result_bytes": int(back.size * back.dtype.itemsize),
        "store_bytes": store_bytes,
        "store_chunks": [int(c) for c in back.encoding.get("chunks", ())],
        "partitions": len(ds.get_partitions()),
        "maxrss": maxrss,
        "vmhwm": end["VmHWM"],
        "peak_anon": peak_anon[0],
        "end_anon": end["RssAnon"],
        "end_file": end["RssFile"],
        "after_imports": after_imports,
        "wall": wall,
        "checked": checked,
    }


def run_case(args, scan: str, scan_nav, nav, partition_bytes) -> dict:
    out = os.path.join(args.dir, f"zmem_result_{nav[0]}x{nav[1]}.zarr")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", scan, "--dir", args.dir]
    cmd += ["--scan-nav", *map(str, scan_nav), "--nav", *map(str, nav), "--out", out]
    try:
        env = dict(os.environ)
        env.pop("DASK_LTDASK__PARTITION_BYTES", None)
        if partition_bytes:
            env["DASK_LTDASK__PARTITION_BYTES"] = partition_bytes
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            log(proc.stdout, proc.stderr)
            raise RuntimeError(f"child failed with exit status {proc.returncode}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench")
    parser.add_argument("--small", action="store_true", help="nav 256x256 and 128x128")
    parser.add_argument("--child", metavar="SCAN", help=argparse.SUPPRESS)
    parser.add_argument("--scan-nav", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--nav", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        report = child(args.child, tuple(args.scan_nav), tuple(args.nav), args.out)
        print(json.dumps(report))
        return
    cases = SMALL_CASES if args.small else CASES
    scan_nav = max(nav for nav, _ in cases.values())
    scan = scan_path(args.dir, scan_nav)
    write_scan(scan, scan_nav)
    rows = {}
    for name, (nav, partition_bytes) in cases.items():
        log(f"  {name} ...")
        rows[name] = run_case(args, scan, scan_nav, nav, partition_bytes)
        log(f"  {name}: {rows[name]}")
    print(
        f"RadialBinsUDF ({BINS} float32 per frame of {SIG[0]}x{SIG[1]} uint8) -> "
        f"ltdask.to_zarr, threads x{THREADS}, each case in a fresh process"
    )
    print(
        f"{'case':<14} {'result GiB':>10} {'store GiB':>9} {'parts':>5} {'chunk MiB':>9} "
        f"{'peak RSS':>8} "
        f"{'VmHWM':>6} {'peak anon':>9} {'anon end':>8} {'file end':>8} {'imports':>7} "
        f"{'wall s':>6} {'peak/result':>11}"
    )
    for name, r in rows.items():
        print(
            f"{name:<14} {r['result_bytes'] / GIB:10.2f} {r['store_bytes'] / GIB:9.2f} "
            f"{r['partitions']:5d} {math.prod(r['store_chunks']) * 4 / 2**20:9.0f} "
            f"{r['maxrss'] / GIB:8.2f} {r['vmhwm'] / GIB:6.2f} "
            f"{r['peak_anon'] / GIB:9.2f} {r['end_anon'] / GIB:8.2f} {r['end_file'] / GIB:8.2f} "
            f"{r['after_imports'] / GIB:7.2f} {r['wall']:6.1f} "
            f"{r['maxrss'] / r['result_bytes']:11.2f}"
        )
    checked = ", ".join(f"{n}: {r['checked']} positions match numpy" for n, r in rows.items())
    print(
        "(GiB; chunk = one partition's result = one store chunk; peak RSS = ru_maxrss; "
        "peak anon sampled every 5 ms; end = at the end of to_zarr; imports = RSS before "
        f"the run; {checked})"
    )


if __name__ == "__main__":
    main()
