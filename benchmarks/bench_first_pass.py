"""A scan's first pass, and repeated runs on a ``distributed`` cluster, against repeated runs
on the threaded scheduler (issue 20).

Run as ``.venv/bin/python benchmarks/bench_first_pass.py`` (``--small`` for a quick check,
``--parts first`` or ``--parts cluster`` for one half).

Uses the scans of ``bench_read.py`` (4 GiB float32 and 2 GiB uint16, nav 128x128, sig
256x256; written once to ``--dir`` and page-cached). GB/s are of file bytes; the machine is
noisy, so every comparison is made round by round, interleaved, medians of ``--repeats``.

Before measuring, each scan is dropped from the page cache and read back with ``read()``, so
that it is cached as a file just read from disk or written by an acquisition is
(``bench_read.recache_file``; ``--keep-cache`` measures it as it happens to be cached). How a
file sits in the page cache decides what a first pass costs: on this kernel (6.18, ext4) a
file cached in 2 MiB folios maps 2 MiB per fault (touching 2 GiB: about 10 ms), one first
faulted in through a plain 4 KiB map costs about 200 ms of kernel time per 2 GiB, as much as
summing it. The "faults only" column shows which case a run measured.

**First pass** (threaded scheduler, ``--threads`` threads): each round starts, for every scan
and UDF, a new Python process. It loads ltdask's compiled kernels on a tiny scan of the same
dtype, then runs the UDF over the scan six times: run 1 is the first pass (the process has
never mapped the file), run 2 maps it afresh and keeps the map (``ltdask.map-cache-bytes``),
runs 3 and 4 reuse it ("repeated": their median); runs 5 and 6 drop the kept map and map the
file afresh each (``ltdask.map-cache-bytes: 0``): "fresh map", a first pass's page faults
without a new process's first-call costs. Around each run it reads ``getrusage``: user and
system CPU seconds and minor page faults. Last, it maps the file afresh and touches one byte
per page on the same threads without computing ("faults only"): what faulting the pages in
costs by itself.

**Cluster** (``distributed.LocalCluster``, ``processes=True``, 2 workers x 1 thread and
1 worker x 2 threads, memory limits as ``--memory-limit``): each cluster runs twice, once
with the workers keeping their maps (``ltdask.worker-map-fraction`` as configured) and once
keeping none (``ltdask.worker-map-fraction: 0``, how workers ran before issue 20), against
the threaded scheduler in this process. Every method runs twice to warm up (the first is the
cluster's first pass over the scan; the second keeps maps), then all run interleaved, round
by round. Afterwards it prints each worker's RSS (what distributed's memory thresholds
measure) next to its memory limit.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import dask
import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import (  # noqa: E402
    SIG,
    THREADS,
    ForeignLoad,
    cache_file,
    child_options,
    log,
    meminfo,
    recache_file,
    scan_path,
    write_scan,
)

import ltdask  # noqa: E402
from ltdask.io.maps import MAPS  # noqa: E402
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF  # noqa: E402

UDFS = {"SumUDF": SumUDF, "SumSigUDF": SumSigUDF, "StdDevUDF": StdDevUDF}
PAGE = os.sysconf("SC_PAGE_SIZE")


@numba.njit(nogil=True, cache=True)
def _touch(pages, step):
    """One byte of every `step`-th byte of `pages`: faults each page in, computes nothing."""
    total = 0
    for i in range(0, pages.shape[0], step):
        total += pages[i]
    return total


class TreeLoad(ForeignLoad):
    """`ForeignLoad` where this process's own CPU time includes its children's: the
    benchmark's child processes and cluster workers are not "other processes"."""

    def own(self) -> float:
        return tree_seconds()


def tree_seconds() -> float:
    """CPU seconds of this process, its finished children and its live descendants."""
    import psutil

    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    for proc in psutil.Process().children(recursive=True):
        try:
            cpu = proc.cpu_times()
            total += cpu.user + cpu.system
        except psutil.Error:
            pass
    return total


# -- the child: one process, one scan, one UDF -------------------------------------------------
def usage() -> dict:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall": time.perf_counter(),
        "user": r.ru_utime,
        "sys": r.ru_stime,
        "minflt": r.ru_minflt,
    }


def timed(fn) -> dict:
    before = usage()
    fn()
    after = usage()
    return {k: after[k] - before[k] for k in before}


def child(spec: dict) -> dict:
    """Runs 1-4 of the UDF over the scan in this (new) process, and the faults-only pass."""
    dtype, nav = np.dtype(spec["dtype"]), tuple(spec["nav"])
    udf_class = UDFS[spec["udf"]]
    dask.config.set(scheduler="threads", num_workers=spec["threads"])
    tiny = ltdask.open_raw(spec["tiny"], nav_shape=(4, 4), sig_shape=SIG, dtype=dtype)
    udf_class().compute(tiny)  # the kernels loaded (or compiled), the tiny file's pages mapped

    def run():
        ds = ltdask.open_raw(spec["path"], nav_shape=nav, sig_shape=SIG, dtype=dtype)
        udf_class().compute(ds)

    runs = [timed(run) for _ in range(4)]
    # fresh maps in a warm process: every map made anew and dropped after its run
    MAPS.clear()
    with dask.config.set({"ltdask.map-cache-bytes": 0}):
        runs += [timed(run) for _ in range(2)]
    flat = np.memmap(spec["path"], dtype=np.uint8, mode="r")
    parts = np.array_split(np.arange(flat.size // PAGE) * PAGE, spec["threads"])
    with ThreadPoolExecutor(spec["threads"]) as pool:
        _touch(flat[:PAGE], PAGE)

        def touch_all():
            jobs = [(flat[p[0] : p[-1] + PAGE], PAGE) for p in parts if p.size]
            list(pool.map(lambda job: _touch(*job), jobs))

        faults_only = timed(touch_all)
    return {"runs": runs, "faults_only": faults_only}


def run_child(spec: dict) -> dict:
    env = {**os.environ, "DASK_LTDASK__COMPILE_NOTICE": "False"}
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise SystemExit(f"child failed ({spec}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def short(dtype: str, udf: str) -> str:
    return f"{dtype[0]}{dtype[-2:]} {udf}"


# -- part 1: first pass against repeated runs --------------------------------------------------
def first_pass(scans: dict, udfs: list[str], threads: list[int], repeats: int, tiny: dict):
    """Per (scan, UDF, threads): the children's records, one per round."""
    records: dict = {}
    for r in range(repeats):
        with TreeLoad() as load:
            for (dtype, nav), path in scans.items():
                for name in udfs:
                    for n in threads:
                        spec = {"path": path, "dtype": dtype.name, "nav": nav, "udf": name}
                        spec.update(threads=n, tiny=tiny[dtype])
                        records.setdefault((dtype.name, name, n), []).append(run_child(spec))
        log(f"  first pass, round {r + 1}: other processes {load.share:.0%}")
    return records


def report_first(records: dict, sizes: dict) -> None:
    print("\n## First pass (new process) against repeated runs, threaded scheduler")
    groups = ("first", "fresh map", "repeat")
    print(
        f"{'':<24}{'GB/s':^21}{'/ repeat':^14}"
        + "".join(f"{g:^22}" for g in groups)
        + f"{'faults only':^16}"
    )
    head = (
        f"{'scan / UDF':<20}{'thr':>4}{'first':>7}{'fresh':>7}{'repeat':>7}{'first':>7}"
        f"{'fresh':>7}" + f"  {'user':>6}{'sys':>6}{'faults':>8}" * 3 + f"  {'GB/s':>8}{'sys':>6}"
    )
    print(head + "\n" + "-" * len(head))
    for (dtype, name, n), recs in records.items():
        nbytes = sizes[dtype]
        steps = {
            "first": [rec["runs"][0] for rec in recs],
            "fresh": [run for rec in recs for run in rec["runs"][4:6]],
            "repeat": [run for rec in recs for run in rec["runs"][2:4]],
        }
        only = [rec["faults_only"] for rec in recs]

        def med(items, key):
            return statistics.median(item[key] for item in items)

        rate = {k: nbytes / med(v, "wall") / 1e9 for k, v in steps.items()}
        cpu = "".join(
            f"  {med(v, 'user'):>6.2f}{med(v, 'sys'):>6.2f}{med(v, 'minflt'):>8.0f}"
            for v in steps.values()
        )
        print(
            f"{short(dtype, name):<20}{n:>4}{rate['first']:>7.1f}{rate['fresh']:>7.1f}"
            f"{rate['repeat']:>7.1f}{rate['first'] / rate['repeat']:>7.2f}"
            f"{rate['fresh'] / rate['repeat']:>7.2f}{cpu}"
            f"  {nbytes / med(only, 'wall') / 1e9:>8.1f}{med(only, 'sys'):>6.2f}"
        )
    print(
        "(GB/s of file bytes, medians; 'first': run 1 in a new process; 'repeat': runs 3-4\n"
        " in it, its maps kept; 'fresh': runs 5-6, each mapping the file afresh; ratios to\n"
        " 'repeat'; user/sys: CPU seconds of the run (all threads); faults: minor page faults;\n"
        " 'faults only': a fresh map's pages touched, one byte per page, no compute)"
    )


# -- part 2: repeated runs on a cluster against threads ----------------------------------------
def clusters(memory_limit: str, fraction):
    """``{label: client}``: 2x1 and 1x2 LocalClusters, with worker maps kept and not."""
    from distributed import Client, LocalCluster

    out = {}
    for workers, nthreads in ((2, 1), (1, 2)):
        for keep in (True, False):
            config = {} if keep else {"ltdask.worker-map-fraction": 0}
            if keep and fraction is not None:
                config = {"ltdask.worker-map-fraction": fraction}
            with dask.config.set(config):
                cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=nthreads,
                    processes=True,
                    memory_limit=memory_limit,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            client = Client(cluster, set_as_default=False)
            label = f"cluster {workers}x{nthreads}" + (" kept" if keep else " none kept")
            out[label] = client
    return out


def worker_memory(dask_worker) -> dict:
    import psutil

    return {
        "rss": psutil.Process().memory_info().rss,
        "limit": dask_worker.memory_manager.memory_limit,
        "ltdask": ltdask.__file__,
        **usage(),
    }


def process_usage(client) -> dict:
    """Minor faults and system CPU seconds so far of this process (`client` None) or of the
    cluster's workers together; and the workers' states."""
    states = client.run(worker_memory) if client is not None else {}
    parts = list(states.values()) or [usage()]
    return {k: sum(p[k] for p in parts) for k in ("minflt", "sys")} | {"workers": states}


def cluster_part(scans: dict, udfs: list[str], repeats: int, memory_limit: str, fraction):
    clients = clusters(memory_limit, fraction)
    try:
        files = {m["ltdask"] for c in clients.values() for m in c.run(worker_memory).values()}
        log(f"  workers import ltdask from {sorted(files)}")
        times: dict = {}
        first: dict = {}
        costs: dict = {}
        peaks: dict = {label: {} for label in clients}
        for (dtype, nav), path in scans.items():
            for name in udfs:

                def method(scheduler, name=name, path=path, dtype=dtype, nav=nav):
                    def go():
                        ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
                        with dask.config.set(scheduler=scheduler):
                            UDFS[name]().compute(ds)

                    return go

                methods = {"threads": method("threads")}
                methods.update({label: method(c) for label, c in clients.items()})
                for label, fn in methods.items():
                    for warm in range(2):
                        t0 = time.perf_counter()
                        fn()
                        if warm == 0:
                            first[(dtype.name, name, label)] = time.perf_counter() - t0
                for r in range(repeats):
                    with TreeLoad() as load:
                        for label, fn in methods.items():
                            before = process_usage(clients.get(label))
                            t0 = time.perf_counter()
                            fn()
                            key = (dtype.name, name, label)
                            times.setdefault(key, []).append(time.perf_counter() - t0)
                            after = process_usage(clients.get(label))
                            costs.setdefault(key, []).append(
                                {k: after[k] - before[k] for k in ("minflt", "sys")}
                            )
                            for w, m in after["workers"].items():
                                old = peaks[label].get(w, (0, None))[0]
                                peaks[label][w] = (max(old, m["rss"]), m["limit"])
                    log(f"  {dtype} {name}, round {r + 1}: other processes {load.share:.0%}")
        return times, costs, first, peaks
    finally:
        for client in clients.values():
            cluster = client.cluster
            client.close()
            cluster.close()


def report_cluster(times: dict, costs: dict, first: dict, peaks: dict, sizes: dict) -> None:
    labels = list(dict.fromkeys(label for _, _, label in times))
    print("\n## Repeated runs on a LocalCluster against the threaded scheduler (GB/s, medians)")
    head = f"{'scan / UDF':<22}" + "".join(f"{label:>24}" for label in labels)
    print(head + "\n" + "-" * len(head))
    for dtype, name in dict.fromkeys((d, n) for d, n, _ in times):
        nbytes = sizes[dtype]
        rate = {
            label: nbytes / statistics.median(times[(dtype, name, label)]) / 1e9 for label in labels
        }
        cells = "".join(
            f"{rate[label]:>15.1f} ({rate[label] / rate['threads']:.2f})" for label in labels
        )
        print(f"{short(dtype, name):<22}{cells}")
    print("(in brackets: the ratio to the threaded scheduler in the same rounds)")
    print("\nMinor page faults and system CPU seconds per run (all workers together; medians):")
    print(f"{'scan / UDF':<22}" + "".join(f"{label:>24}" for label in labels))
    for dtype, name in dict.fromkeys((d, n) for d, n, _ in times):
        cells = ""
        for label in labels:
            runs = costs[(dtype, name, label)]
            faults = statistics.median(c["minflt"] for c in runs)
            cells += f"{faults:>17.0f} {statistics.median(c['sys'] for c in runs):>6.2f}"
        print(f"{short(dtype, name):<22}{cells}")
    print("\nFirst pass of each method (its first run over the scan; one run each, GB/s):")
    for (dtype, name, label), seconds in first.items():
        print(f"  {short(dtype, name):<20} {label:<24} {sizes[dtype] / seconds / 1e9:6.1f}")
    print("\nWorkers' peak RSS (sampled after each timed run) and memory limits:")
    for label, workers in peaks.items():
        for w, (rss, limit) in workers.items():
            share = f"{rss / limit:.0%} of" if limit else "no limit,"
            print(
                f"  {label:<24} {w:<22} {rss / 2**30:6.2f} GiB "
                f"({share} {(limit or 0) / 2**30:.1f} GiB)"
            )


def main(argv=None) -> None:
    parser = child_options(
        __doc__.splitlines()[0], ["float32", "uint16"], ["SumUDF", "StdDevUDF"], UDFS
    )
    parser.add_argument("--threads", nargs="*", type=int, default=[THREADS])
    parser.add_argument("--parts", nargs="*", default=["first", "cluster"])
    parser.add_argument(
        "--memory-limit", default="auto", help="per worker, as distributed takes it"
    )
    parser.add_argument(
        "--worker-map-fraction", type=float, default=None, help="for the 'kept' clusters"
    )
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="read the scans as they are cached; by default they are dropped from the page "
        "cache and read again, as a file just read from disk is cached (see recache_file)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    scans, sizes, tiny = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ltdask-first-pass-") as folder:
        for name in args.dtypes:
            dtype = np.dtype(name)
            path = scans[(dtype, nav)] = scan_path(args.dir, dtype, nav)
            write_scan(path, dtype, nav)
            (cache_file if args.keep_cache else recache_file)(path)
            sizes[dtype.name] = os.path.getsize(path)
            tiny[dtype] = os.path.join(folder, f"tiny-{dtype.name}.raw")
            np.zeros((16, *SIG), dtype=dtype).tofile(tiny[dtype])
        print(f"memory: {meminfo()}; {os.cpu_count()} cpus; ltdask from {ltdask.__file__}")
        print(f"dask {dask.__version__}, numpy {np.__version__}, kernel {os.uname().release}")
        if "first" in args.parts:
            report_first(first_pass(scans, args.udfs, args.threads, args.repeats, tiny), sizes)
        if "cluster" in args.parts:
            dask.config.set(scheduler="threads", num_workers=THREADS)
            report_cluster(
                *cluster_part(
                    scans, args.udfs, args.repeats, args.memory_limit, args.worker_map_fraction
                ),
                sizes,
            )


if __name__ == "__main__":
    main()
