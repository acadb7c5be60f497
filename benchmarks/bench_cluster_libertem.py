"""A scan's first pass on a ``distributed`` cluster: ltdask against LiberTEM 0.16's dask
executor on the same file, in the same sitting (issue 20).

Run as ``.venv/bin/python benchmarks/bench_cluster_libertem.py`` (``--small`` for a quick
check; ``--libertem PYTHON`` names the interpreter of an environment with
``libertem==0.16.0``, by default ``/tmp/lt-venv/bin/python``).

Uses the scans of ``bench_read.py`` (2 GiB uint16 and 4 GiB float32, nav 128x128, sig
256x256; written once to ``--dir``, dropped from the page cache and read back as
``bench_first_pass.py`` does). Every round starts, for each scan and
UDF, two new processes in turn: one with ltdask, one with LiberTEM. Each starts a local
cluster of 2 worker processes x 1 thread (LiberTEM's ``Context.make_with("dask", cpus=2)``;
a ``distributed.LocalCluster`` for ltdask), runs the UDF twice on a tiny scan of the same
dtype in 8 partitions (every worker loads its compiled kernels), then times the UDF over
the scan twice: the first pass (no worker has mapped the file) and a repeated run. GB/s are
of file bytes; the target is ltdask >= 2x LiberTEM on the first pass. Cluster start-up is
not timed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import (  # noqa: E402
    AXES,
    SIG,
    cache_file,
    child_options,
    log,
    recache_file,
    scan_path,
    write_scan,
)

UDFS = ("SumUDF", "StdDevUDF")
WORKERS = 2

#: the LiberTEM child: make a cluster, warm it up on the tiny scan, time two runs
LIBERTEM_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import libertem.api as lt
    from libertem.udf.sum import SumUDF
    from libertem.udf.stddev import StdDevUDF

    spec = json.loads(sys.argv[1])
    udf = {"SumUDF": SumUDF, "StdDevUDF": StdDevUDF}[spec["udf"]]
    if __name__ == "__main__":
        with lt.Context.make_with("dask", cpus=spec["workers"]) as ctx:
            def load(path, nav, **kw):
                return ctx.load("raw", path=path, nav_shape=nav, sig_shape=spec["sig"],
                                dtype=spec["dtype"], **kw)
            tiny = load(spec["tiny"], (4, 4), num_partitions=4 * spec["workers"])
            for _ in range(2):
                ctx.run_udf(dataset=tiny, udf=udf())
            times = []
            for _ in range(2):
                time.sleep(0.5)
                t0 = time.perf_counter()
                ctx.run_udf(dataset=load(spec["path"], tuple(spec["nav"])), udf=udf())
                times.append(time.perf_counter() - t0)
        print(json.dumps(times))
    """
)


def ltdask_child(spec: dict) -> list[float]:
    """The ltdask child: the same on a ``distributed.LocalCluster``."""
    import dask
    from distributed import Client, LocalCluster

    import ltdask
    from ltdask.udf import StdDevUDF, SumUDF

    udf = {"SumUDF": SumUDF, "StdDevUDF": StdDevUDF}[spec["udf"]]
    dtype = np.dtype(spec["dtype"])
    with (
        LocalCluster(
            n_workers=spec["workers"], threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
        dask.config.set({"ltdask.compile-notice": False}),
    ):
        tiny = ltdask.open_raw(spec["tiny"], nav_shape=(4, 4), sig_shape=SIG, dtype=dtype)
        with dask.config.set({"ltdask.min-partitions": 4 * spec["workers"]}):
            for _ in range(2):
                udf().compute(tiny)
        times = []
        for _ in range(2):
            time.sleep(0.5)  # (the cluster idle; the run before released its results)
            t0 = time.perf_counter()
            ds = ltdask.open_raw(
                spec["path"], nav_shape=tuple(spec["nav"]), sig_shape=SIG, dtype=dtype
            )
            udf().compute(ds)
            times.append(time.perf_counter() - t0)
    return times


def run_child(argv: list[str]) -> list[float]:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"child failed ({argv[0]}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = child_options(__doc__.splitlines()[0], ["uint16", "float32"], UDFS, UDFS)
    parser.add_argument("--libertem", default="/tmp/lt-venv/bin/python")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(ltdask_child(json.loads(args.child))))
        return
    if not os.path.exists(args.libertem):
        raise SystemExit(
            f"--libertem {args.libertem!r} does not exist: make it with `python -m venv "
            "/tmp/lt-venv && /tmp/lt-venv/bin/pip install libertem==0.16.0`"
        )
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    specs, sizes = [], {}
    for name in args.dtypes:
        dtype = np.dtype(name)
        path, tiny = scan_path(args.dir, dtype, nav), scan_path(args.dir, dtype, (4, 4))
        for p, n in ((path, nav), (tiny, (4, 4))):
            if not os.path.exists(p):
                write_scan(p, dtype, n)
            (recache_file if p == path else cache_file)(p)  # (see bench_first_pass)
        sizes[name] = os.path.getsize(path)
        for udf in args.udfs:
            specs.append(
                {
                    "dtype": name,
                    "udf": udf,
                    "path": path,
                    "tiny": tiny,
                    "nav": nav,
                    "sig": SIG,
                    "workers": WORKERS,
                }
            )
    # (here, not at the top: the children and their spawned workers, which import this
    # module again, need none of it)
    from bench_ab import limit_method

    times: dict = {}
    limits: dict = {}
    pool = ThreadPoolExecutor(WORKERS)
    for r in range(args.repeats):
        for name in args.dtypes:
            limit = limit_method(
                scan_path(args.dir, np.dtype(name), nav), name, nav, AXES["nav"], pool
            )
            limit()
            t0 = time.perf_counter()
            limit()
            limits.setdefault(name, []).append(time.perf_counter() - t0)
        for spec in specs:
            key = (spec["dtype"], spec["udf"])
            ours = run_child(
                [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
            )
            theirs = run_child([args.libertem, "-c", LIBERTEM_CHILD, json.dumps(spec)])
            times.setdefault(key, []).append((ours, theirs))
        log(f"  round {r + 1}/{args.repeats} done")
    print(
        f"First pass on a local cluster ({WORKERS} workers x 1 thread), "
        f"nav {nav[0]}x{nav[1]}, medians of {args.repeats} rounds (GB/s of file bytes)"
    )
    print(
        f"{'scan, UDF':<20} {'ltdask 1st':>10} {'LiberTEM 1st':>12} {'ratio':>6} "
        f"{'ltdask 2nd':>10} {'LiberTEM 2nd':>12} {'ratio':>6} {'read limit':>10}"
    )
    for (dtype, udf), rounds in times.items():
        cells = []
        for run in (0, 1):
            ours = statistics.median(o[run] for o, _ in rounds)
            theirs = statistics.median(t[run] for _, t in rounds)
            cells += [sizes[dtype] / ours / 1e9, sizes[dtype] / theirs / 1e9, theirs / ours]
        limit = sizes[dtype] / statistics.median(limits[dtype]) / 1e9
        print(
            f"{dtype + ', ' + udf:<20} {cells[0]:10.2f} {cells[1]:12.2f} {cells[2]:6.2f} "
            f"{cells[3]:10.2f} {cells[4]:12.2f} {cells[5]:6.2f} {limit:10.2f}"
        )
    print(
        "(read limit: a numba sum over the scan's frames on this process's "
        f"{WORKERS} threads, its map kept, in the same rounds; 2x LiberTEM above it is "
        "out of reach)"
    )


if __name__ == "__main__":
    main()
