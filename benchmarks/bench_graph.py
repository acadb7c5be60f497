"""How planning scales with the scan: ``ltdask.lazy()`` + ``ltdask.explain()`` of ever larger
scans, and the number of tasks their graphs hold (issue 32: planning stays O(partitions)).

Run as ``python benchmarks/bench_graph.py``. The scans are sparse raw files (``os.truncate``:
no data is written or read; planning never reads data), uint16 frames of 256 x 256, from
1 GiB to 1 TiB, and a flat scan of 10^8 frames of 4 x 4 (a nav far larger than any file's
frame count a format's header could announce). For each: the seconds ``lazy()`` and
``explain()`` take together (median of 3, first call excluded: it imports what planning
needs), the partitions and the tasks of the lazy results' graph, and the microseconds per
partition. The guard: the 1 TiB scan plans in under 2 s (``--check`` exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import ltdask
from ltdask.udf import CoMUDF, SumSigUDF, SumUDF

#: the 1 TiB scan's planning budget, seconds
BUDGET_S = 2.0
#: (name, nav shape, sig shape)
SCANS = [
    ("1 GiB", (128, 64), (256, 256)),
    ("16 GiB", (512, 256), (256, 256)),
    ("256 GiB", (2048, 1024), (256, 256)),
    ("1 TiB", (2048, 4096), (256, 256)),
    ("10^8 frames", (10**8,), (4, 4)),
]


def _plan(path, nav, sig) -> tuple[float, int, int]:
    """Seconds for lazy() + explain(), partitions, tasks."""
    start = time.perf_counter()
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    udfs = [SumUDF(), SumSigUDF()]
    if len(nav) == 2:
        udfs.append(CoMUDF.with_params(r=8))
    results = ltdask.lazy(ds, udfs)
    text = str(ltdask.explain(ds, udfs))
    seconds = time.perf_counter() - start
    graph = results[0]["intensity"].data.__dask_graph__()
    tasks = len(dict(graph))
    partitions = int(text.split(" partition(s)")[0].split(" in ")[-1])
    return seconds, partitions, tasks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 past the 1 TiB budget")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ltdask-bench-graph-")
    rows = []
    try:
        for name, nav, sig in SCANS:
            path = os.path.join(folder, f"{name.replace(' ', '_')}.raw")
            with open(path, "wb") as f:
                f.truncate(int(np.prod(nav)) * int(np.prod(sig)) * 2)
            _plan(path, nav, sig)  # (imports, first-time caches)
            runs = [_plan(path, nav, sig) for _ in range(args.repeats)]
            seconds = statistics.median(r[0] for r in runs)
            rows.append((name, seconds, runs[0][1], runs[0][2]))
            os.remove(path)
    finally:
        for leftover in os.listdir(folder):
            os.remove(os.path.join(folder, leftover))
        os.rmdir(folder)
    print(
        f"{'scan':<12} {'lazy+explain s':>15} {'partitions':>11} {'tasks':>8} {'us/partition':>13}"
    )
    for name, seconds, partitions, tasks in rows:
        print(
            f"{name:<12} {seconds:>15.3f} {partitions:>11} {tasks:>8} "
            f"{1e6 * seconds / partitions:>13.1f}"
        )
    tib = next(r for r in rows if r[0] == "1 TiB")
    verdict = "within" if tib[1] < BUDGET_S else "OVER"
    print(f"1 TiB: {tib[1]:.2f} s, {verdict} the {BUDGET_S} s budget")
    return 1 if args.check and tib[1] >= BUDGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
