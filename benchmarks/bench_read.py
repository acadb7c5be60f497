"""Read throughput of ``ltdask.open_raw(...).to_dask()`` against a dask-over-memmap baseline.

Run as ``.venv/bin/python benchmarks/bench_read.py`` (``--small`` for a quick check).

Writes (once) a float32 and a uint16 raw scan of nav 128x128, sig 256x256 (4 GiB and
2 GiB) to ``--dir``, makes sure both are page-cached, and for each dtype measures the
throughput in GB/s of file bytes of a sum over nav (``axis=(0, 1)``) and a sum over sig
(``axis=(2, 3)``) with dask's threaded scheduler on 2 threads:

* ``ltdask``: ``ltdask.open_raw(...).to_dask().sum(axis).compute()``;
* ``memmap C``: ``da.from_array(np.memmap(...), chunks=C).sum(axis).compute()`` for a few
  chunkings ``C``, the memmap wrapped so that dask neither copies nor hashes it (see
  `MemmapArray`); the best one per reduction is the baseline;
* ``np.memmap as is``: the same with the bare ``np.memmap`` at ltdask's chunking, which in
  this dask copies the file into RAM and hashes it on every call (for information; not a
  baseline candidate; ``--skip-naive`` leaves it out);
* ceilings without dask: the data in RAM summed over halves on 2 threads, and a
  long-lived memmap summed in 8-row slices on 2 threads (the page-cache read limit).

Both timed expressions include opening the data (``open_raw`` / ``np.memmap``), so both
map the file afresh each run. Each method is warmed up once, then the methods run
interleaved, round by round, ``--repeats`` times; the table shows medians (the machine is
noisy, about +-17 %, so only side-by-side numbers from one process are comparable).

Sums keep numpy's default accumulator: float32 for float32, uint64 for uint16.

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set in the environment; they only affect BLAS
calls, and these reductions (plain ``np.sum``) make none, so they do not matter here.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as da
import numpy as np

import ltdask

SIG = (256, 256)
THREADS = 2
AXES = {"nav": (0, 1), "sig": (2, 3)}
BLOCK_FRAMES = 128  # frames generated / read per block while writing and caching


def child_options(description: str, dtypes, udfs, choices) -> argparse.ArgumentParser:
    """The options of a benchmark that runs UDFs over the scans in child processes:
    ``--child`` (internal), ``--dir``, ``--repeats``, ``--small``, ``--dtypes``, ``--udfs``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", default="/tmp/ltdask-bench-read")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="nav 32x32, for a quick check")
    parser.add_argument("--dtypes", nargs="*", default=list(dtypes))
    parser.add_argument("--udfs", nargs="*", default=list(udfs), choices=choices)
    return parser


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


# -- data files ----------------------------------------------------------------------------
def scan_path(directory: str, dtype: np.dtype, nav: tuple[int, int]) -> str:
    return os.path.join(directory, f"scan_{dtype.name}_{nav[0]}x{nav[1]}_{SIG[0]}x{SIG[1]}.raw")


def write_scan(path: str, dtype: np.dtype, nav: tuple[int, int]) -> None:
    """Random frames, written block by block so that memory stays low."""
    frames = math.prod(nav)
    size = frames * math.prod(SIG) * dtype.itemsize
    if os.path.exists(path) and os.path.getsize(path) == size:
        log(f"  {path}: present ({size / 2**30:.2f} GiB)")
        return
    log(f"  writing {path} ({size / 2**30:.2f} GiB) ...")
    t0 = time.perf_counter()
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        for i, first in enumerate(range(0, frames, BLOCK_FRAMES)):
            n = min(BLOCK_FRAMES, frames - first)
            rng = np.random.default_rng([12345, dtype.itemsize, i])
            if dtype.kind == "f":
                block = rng.random((n, *SIG), dtype=dtype)
            else:
                block = rng.integers(0, np.iinfo(dtype).max, (n, *SIG), dtype=dtype, endpoint=True)
            block.tofile(f)
    os.replace(tmp, path)
    log(f"  wrote {path} in {time.perf_counter() - t0:.1f} s")


def cache_file(path: str) -> None:
    """Read the file once so that it is in the page cache; report the read speed."""
    buf = bytearray(64 * 2**20)
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
    dt = time.perf_counter() - t0
    log(f"  read {path}: {total / 2**30:.2f} GiB in {dt:.2f} s ({total / dt / 1e9:.1f} GB/s)")


def recache_file(path: str) -> None:
    """Drop the file's pages from the page cache (those no process maps) and read it in
    again, so that it is cached as a file just read from disk (or written with ``write()``)
    is: on kernels and filesystems with large folios (XFS; ext4 from Linux 6.16) in 2 MiB
    folios, which a map faults in 2 MiB at a time. A file first faulted in through a plain
    memory map may sit in 4 KiB pages instead, and faulting those in costs as much CPU time
    as summing them; where it is cached depends on the file's history, not on the reader."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    cache_file(path)


def meminfo() -> str:
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, rest = line.split(":", 1)
            values[key] = int(rest.split()[0]) * 1024
    keys = ("MemTotal", "MemFree", "MemAvailable", "Cached")
    return ", ".join(f"{k} {values[k] / 2**30:.1f} GiB" for k in keys if k in values)


# -- methods -------------------------------------------------------------------------------
def ltdask_method(path, dtype, nav, axis):
    def run():
        ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
        return ds.to_dask().sum(axis=axis).compute()

    return run


class MemmapArray:
    """An `np.memmap` that dask's ``from_array`` takes as it is.

    Given an `np.memmap` itself, ``from_array`` (dask 2025+) first calls ``x.copy()``, which
    reads the whole file into RAM, and then hashes all of its bytes for the graph's name.
    This wrapper has no ``copy`` and tokenizes by path, size and mtime (as ltdask does), so
    the tasks slice the memory map and the chunks are views of the page cache.
    """

    def __init__(self, path, dtype, shape):
        self.path = path
        self.mm = np.memmap(path, dtype=dtype, mode="r", shape=shape)
        self.shape, self.dtype, self.ndim = self.mm.shape, self.mm.dtype, self.mm.ndim

    def __getitem__(self, index):
        return self.mm[index]

    def __dask_tokenize__(self):
        st = os.stat(self.path)
        return ("MemmapArray", self.path, st.st_size, st.st_mtime_ns, self.dtype.str, self.shape)


def memmap_method(path, dtype, nav, axis, chunks):
    """``da.from_array`` over a fresh memory map of the file (see `MemmapArray`)."""

    def run():
        mm = MemmapArray(path, dtype, (*nav, *SIG))
        return da.from_array(mm, chunks=chunks).sum(axis=axis).compute()

    return run


def naive_memmap_method(path, dtype, nav, axis, chunks):
    """Literally ``da.from_array(np.memmap(...))``: dask copies the file into RAM and hashes it."""

    def run():
        mm = np.memmap(path, dtype=dtype, mode="r", shape=(*nav, *SIG))
        return da.from_array(mm, chunks=chunks).sum(axis=axis).compute()

    return run


def row_slices(n: int, step: int) -> list[slice]:
    return [slice(a, min(n, a + step)) for a in range(0, n, step)]


def numpy_threads_method(arr: np.ndarray, axis, pool: ThreadPoolExecutor, step: int):
    """`arr` summed over `axis` in slices of `step` rows of nav dim 0 on the pool's threads."""
    slices = row_slices(arr.shape[0], step)

    def run():
        parts = list(pool.map(lambda s: arr[s].sum(axis=axis), slices))
        if axis == AXES["nav"]:
            out = parts[0].copy()
            for p in parts[1:]:
                out += p
            return out
        return np.concatenate(parts)

    return run


def memmap_candidates(nav: tuple[int, int]) -> list:
    cands: list = ["auto"]
    for rows in (1, 4, 8, 16, 32):
        c = (min(rows, nav[0]), nav[1], *SIG)
        if c not in cands:
            cands.append(c)
    return cands


def chunk_label(arr) -> str:
    """`arr.chunks` in short: the distinct sizes per dim and the number of blocks."""
    dims = []
    for c in arr.chunks:
        sizes = sorted(set(c), reverse=True)
        dims.append("/".join(str(s) for s in sizes))
    return f"({', '.join(dims)}) x{math.prod(arr.numblocks)}"


# -- timing --------------------------------------------------------------------------------
class ForeignLoad:
    """Share of the CPUs that other processes used while the block ran (from /proc/stat)."""

    def own(self) -> float:
        """This process's CPU seconds (what is not "other processes")."""
        return own_seconds()

    def __enter__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), busy_seconds(), self.own()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        foreign = (busy_seconds() - self.busy0) - (self.own() - self.own0)
        self.share = max(0.0, foreign) / (wall * (os.cpu_count() or 1))


def busy_seconds() -> float:
    """CPU seconds all processes have used (user, nice, system, irq, softirq, steal)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def measure(
    methods: dict,
    repeats: int,
    nbytes: int,
    max_foreign: float = 1.0,
    max_rounds: int = 0,
    retry_until: float = math.inf,
    settle: bool = False,
) -> tuple[dict[str, list[float]], float, int]:
    """Warm up each method once, then run all of them interleaved, round by round.

    With `settle`, each method also runs once, untimed, right before its timed run: what a
    heavy method leaves behind (dask's ``std`` over 4 GiB allocates GiBs) slowed the next
    method's run by up to 2x, whichever method came next.

    A round during which other processes used more than `max_foreign` of the CPUs does not
    count, up to `max_rounds` rounds in all and no extra round after `retry_until`
    (``time.perf_counter()``); then the `repeats` least disturbed rounds are kept. Returns
    the times per method, the mean foreign load of the kept rounds and the rounds run.
    """
    for name, fn in methods.items():
        t0 = time.perf_counter()
        fn()
        log(f"    warm-up {name}: {nbytes / (time.perf_counter() - t0) / 1e9:.1f} GB/s")
    rounds: list[tuple[float, dict[str, float]]] = []
    clean = 0
    while clean < repeats and (
        len(rounds) < repeats or (len(rounds) < max_rounds and time.perf_counter() < retry_until)
    ):
        times = {}
        with ForeignLoad() as load:
            for name, fn in methods.items():
                if settle:
                    fn()
                t0 = time.perf_counter()
                fn()
                times[name] = time.perf_counter() - t0
        rounds.append((load.share, times))
        ok = load.share <= max_foreign
        clean += ok
        log(
            f"    round {len(rounds)}: other processes {load.share:.0%}"
            + ("" if ok else f" > {max_foreign:.0%}, does not count")
        )
    kept = sorted(rounds, key=lambda r: r[0])[:repeats]
    out = {name: [t[name] for _, t in kept] for name in methods}
    return out, statistics.fmean(share for share, _ in kept), len(rounds)


def gbps(nbytes: int, ts: list[float]) -> float:
    return nbytes / statistics.median(ts) / 1e9


# -- correctness ---------------------------------------------------------------------------
def check_correct(path, dtype, nav) -> None:
    """ltdask's sums against the memmap baseline's and a float64-accumulated reference."""
    rtol = 1e-4 if dtype.kind == "f" else 0.0
    shape = (*nav, *SIG)
    for red, axis in AXES.items():
        got = ltdask_method(path, dtype, nav, axis)()
        base = memmap_method(path, dtype, nav, axis, (4, nav[1], *SIG))()
        mm = MemmapArray(path, dtype, shape)
        ref = da.from_array(mm, chunks=(8, nav[1], *SIG)).sum(axis=axis, dtype=np.float64)
        ref = ref.compute()
        problems = []
        if got.shape != base.shape or got.dtype != base.dtype:
            problems.append(f"shape/dtype {got.shape} {got.dtype} vs {base.shape} {base.dtype}")
        elif not np.allclose(got.astype(np.float64), base.astype(np.float64), rtol=rtol, atol=0):
            problems.append("differs from the memmap baseline")
        if not np.allclose(got.astype(np.float64), ref, rtol=rtol, atol=0):
            problems.append("differs from the float64-accumulated reference")
        if problems:
            err = np.max(np.abs(got.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-30))
            raise SystemExit(
                f"CORRECTNESS FAILURE: {dtype} sum over {red}: {'; '.join(problems)} "
                f"(max relative error vs float64 {err:.3g}, rtol {rtol})"
            )
        err = np.max(np.abs(got.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-30))
        log(f"  correct: {dtype} sum over {red} (max rel. error vs float64 {err:.2g})")


# -- one dtype -----------------------------------------------------------------------------
def bench_dtype(
    path: str,
    dtype: np.dtype,
    nav: tuple[int, int],
    repeats: int,
    skip_naive: bool,
    max_foreign: float,
    deadlines: list[float],
):
    shape = (*nav, *SIG)
    nbytes = math.prod(shape) * dtype.itemsize
    log(f"\n== {dtype}: {path} ({nbytes / 2**30:.2f} GiB)")

    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    arr = ds.to_dask()
    t0 = time.perf_counter()
    for axis in AXES.values():
        ds.to_dask().sum(axis=axis).__dask_graph__()
    graph_ms = (time.perf_counter() - t0) / len(AXES) * 1e3
    info = (
        f"ltdask chunks {chunk_label(arr)}, chunksize {arr.chunksize} "
        f"({math.prod(arr.chunksize) * dtype.itemsize / 2**20:.0f} MiB), "
        f"{len(ds.get_partitions())} partitions, graph build {graph_ms:.1f} ms/reduction"
    )
    log("  " + info)

    check_correct(path, dtype, nav)

    log("  loading the data into RAM for the ceiling ...")
    in_ram = np.empty(shape, dtype=dtype)
    mm_ceiling = np.memmap(path, dtype=dtype, mode="r", shape=shape)
    for s in row_slices(nav[0], 8):
        in_ram[s] = mm_ceiling[s]
    log(f"  memory: {meminfo()}")

    candidates, labels, seen = [], {}, set()
    for c in memmap_candidates(nav):
        probe = da.from_array(MemmapArray(path, dtype, shape), chunks=c)
        if probe.chunks in seen:
            continue  # "auto" may coincide with one of the explicit chunkings
        seen.add(probe.chunks)
        candidates.append(c)
        labels[c] = f"memmap {chunk_label(probe)}" + (" auto" if c == "auto" else "")

    naive = f"np.memmap as is {chunk_label(arr)} (copy+hash)"
    results: dict[str, dict[str, float]] = {}
    best_of: dict[str, dict[str, float]] = {}
    foreign: dict[str, float] = {}
    n_rounds: dict[str, int] = {}
    with ThreadPoolExecutor(THREADS) as pool:
        for red, axis in AXES.items():
            log(f"  sum over {red} (axis={axis}):")
            methods = {"ltdask": ltdask_method(path, dtype, nav, axis)}
            for c in candidates:
                methods[labels[c]] = memmap_method(path, dtype, nav, axis, c)
            half = max(1, -(-nav[0] // THREADS))
            methods["ceiling: in-RAM numpy, halves"] = numpy_threads_method(
                in_ram, axis, pool, half
            )
            methods["ceiling: memmap, 8-row slices"] = numpy_threads_method(
                mm_ceiling, axis, pool, 8
            )
            times, foreign[red], n_rounds[red] = measure(
                methods, repeats, nbytes, max_foreign, 3 * repeats, deadlines.pop(0)
            )
            if not skip_naive:
                # alone, after the others: its 2-4 GiB copies would disturb their timings
                naive_fn = naive_memmap_method(path, dtype, nav, axis, arr.chunksize)
                times.update(measure({naive: naive_fn}, 1, nbytes)[0])
            for name, ts in times.items():
                results.setdefault(name, {})[red] = gbps(nbytes, ts)
                best_of.setdefault(name, {})[red] = nbytes / min(ts) / 1e9
    del in_ram, mm_ceiling

    mm_names = [labels[c] for c in candidates]
    best = {red: max(mm_names, key=lambda n, r=red: results[n][r]) for red in AXES}
    ceil_names = [n for n in results if n.startswith("ceiling")]
    ceiling = {red: max(results[n][red] for n in ceil_names) for red in AXES}

    print(f"\n### {dtype}: nav {nav}, sig {SIG}, {nbytes / 2**30:.2f} GiB, {THREADS} threads")
    print(f"    {info}")
    print(f"    best memmap chunking: nav sum -> {best['nav']}; sig sum -> {best['sig']}")
    print(
        f"    other processes used {foreign['nav']:.0%} (nav) / {foreign['sig']:.0%} (sig) of "
        f"the CPUs during the kept rounds ({repeats} of {n_rounds['nav']} / {n_rounds['sig']} "
        f"rounds; a round counts when they used <= {max_foreign:.0%})"
    )
    head = (
        f"{'method':<50} {'nav GB/s':>9} {'sig GB/s':>9} {'nav/mm':>7} {'sig/mm':>7} "
        f"{'nav/ceil':>8} {'sig/ceil':>8} {'nav best':>8} {'sig best':>8}"
    )
    print(head)
    print("-" * len(head))
    order = ["ltdask", *mm_names, *([] if skip_naive else [naive]), *ceil_names]
    for name in order:
        r = results[name]
        mark = "".join(f" *{red}" for red in AXES if best[red] == name)
        mm_n = r["nav"] / results[best["nav"]]["nav"]
        mm_s = r["sig"] / results[best["sig"]]["sig"]
        print(
            f"{name + mark:<50} {r['nav']:>9.2f} {r['sig']:>9.2f} {mm_n:>7.2f} {mm_s:>7.2f} "
            f"{r['nav'] / ceiling['nav']:>8.2f} {r['sig'] / ceiling['sig']:>8.2f} "
            f"{best_of[name]['nav']:>8.2f} {best_of[name]['sig']:>8.2f}"
        )
    print("(GB/s and ratios: medians of the timed rounds; ratios to the best memmap chunking")
    print(" per reduction (marked *nav / *sig) and to the best ceiling row; 'best': the fastest")
    print(" round, less sensitive to other processes)", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench", help="where the scans live")
    parser.add_argument("--small", action="store_true", help="nav 32x32 for a quick check")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per method")
    parser.add_argument(
        "--skip-naive",
        action="store_true",
        help="leave out da.from_array(np.memmap) as is (it copies and hashes the whole file)",
    )
    parser.add_argument(
        "--max-foreign",
        type=float,
        default=0.1,
        help="a round counts only when other processes used at most this share of the CPUs "
        "(rounds are retried up to 3x --repeats in all; then the least disturbed are kept)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=420.0,
        help="seconds after which disturbed rounds are no longer retried",
    )
    args = parser.parse_args(argv)

    nav = (32, 32) if args.small else (128, 128)
    dtypes = [np.dtype(np.float32), np.dtype(np.uint16)]
    os.makedirs(args.dir, exist_ok=True)
    t_start = time.perf_counter()
    log(f"cpus {os.cpu_count()}; memory: {meminfo()}")
    with ForeignLoad() as load:
        time.sleep(1.0)
    log(f"other processes use {load.share:.0%} of the CPUs now (load {os.getloadavg()[0]:.1f})")
    log("data files:")
    paths = {}
    for dt in dtypes:
        paths[dt] = scan_path(args.dir, dt, nav)
        write_scan(paths[dt], dt, nav)
    log("page cache:")
    for dt in dtypes:
        cache_file(paths[dt])
    log(f"memory after caching: {meminfo()}")
    print(f"memory after caching the scans: {meminfo()}")
    print(
        f"numpy {np.__version__}, dask {dask.__version__}, ltdask {ltdask.__version__}, "
        f"{os.cpu_count()} cpus, scheduler threads x{THREADS}"
    )

    # retries of disturbed rounds stop at these times (one per dtype and reduction), so that
    # the whole run stays within about --budget seconds
    steps = len(dtypes) * len(AXES)
    deadlines = [t_start + args.budget * (k + 1) / steps for k in range(steps)]
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        for dt in dtypes:
            bench_dtype(
                paths[dt], dt, nav, args.repeats, args.skip_naive, args.max_foreign, deadlines
            )
    log(f"\ntotal {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
