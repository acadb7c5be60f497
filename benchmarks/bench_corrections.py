"""Detector corrections: UDF runs with dark + gain + 64 excluded pixels against the same runs
without corrections, and against LiberTEM 0.16's corrected runs on the same file.

Run as ``python benchmarks/bench_corrections.py`` (``--small`` for a quick check;
``--libertem PYTHON`` names the interpreter of an environment with ``libertem==0.16.0``,
by default ``/tmp/lt-venv/bin/python``; ``--libertem ''`` leaves LiberTEM out).

Uses the 2 GiB uint16 scan of ``bench_read.py`` (nav 128x128, sig 256x256, page-cached).
Every round runs, in one process and interleaved, ``SumUDF``, ``ApplyMasksUDF`` (one ring)
and ``CoMUDF`` with and without corrections (threaded scheduler, 2 threads), then the same
three corrected runs in LiberTEM (a child process with 2 worker threads, timed inside it
after a warm-up run, so that its start-up does not count). Prints GB/s of file bytes, the
corrected/uncorrected ratio (target >= 0.8) and ltdask/LiberTEM (target >= 3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

import dask
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import SIG, THREADS, cache_file, log, measure, meminfo, scan_path, write_scan  # noqa: E402

import ltdask  # noqa: E402
from ltdask.udf import ApplyMasksUDF, CoMUDF, SumUDF  # noqa: E402

EXCLUDED = 64


def corrections_arrays(seed: int = 3):
    rng = np.random.default_rng(seed)
    dark = rng.normal(10, 1, SIG).astype(np.float32)
    gain = rng.uniform(0.9, 1.1, SIG).astype(np.float32)
    mask = np.zeros(SIG, bool)
    # spread out, so that every excluded pixel has neighbours to be repaired from
    ys = rng.choice(np.arange(1, SIG[0] - 1, 3), EXCLUDED, replace=False)
    xs = rng.choice(np.arange(1, SIG[1] - 1, 3), EXCLUDED, replace=False)
    mask[ys, xs] = True
    return dark, gain, mask


def udfs():
    h, w = SIG
    return {
        "SumUDF": lambda: SumUDF(),
        "ApplyMasksUDF 1 ring": lambda: ApplyMasksUDF(
            [lambda: ltdask.masks.ring(w / 2, h / 2, w, h, 60, 20)]
        ),
        "CoMUDF": lambda: CoMUDF.with_params(cy=h / 2, cx=w / 2, r=60),
    }


LIBERTEM_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from libertem.api import Context
    from libertem.io.corrections import CorrectionSet
    from libertem.masks import ring
    from libertem.udf.com import CoMUDF
    from libertem.udf.masks import ApplyMasksUDF
    from libertem.udf.sum import SumUDF
    import sparse

    path, corr = sys.argv[1], sys.argv[4]
    nav, sig = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    h, w = sig
    data = np.load(corr)
    cs = CorrectionSet(dark=data["dark"], gain=data["gain"],
                       excluded_pixels=sparse.COO(data["mask"]))
    ctx = Context.make_with("threads", cpus=2)
    ds = ctx.load("raw", path=path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    udfs = {
        "SumUDF": lambda: SumUDF(),
        "ApplyMasksUDF 1 ring": lambda: ApplyMasksUDF(
            mask_factories=[lambda: ring(w / 2, h / 2, w, h, 60, 20)]),
        "CoMUDF": lambda: CoMUDF.with_params(cy=h / 2, cx=w / 2, r=60),
    }
    times = {}
    for name, make in udfs.items():
        ctx.run_udf(dataset=ds, udf=make(), corrections=cs)  # warm-up: compilation
        t0 = time.perf_counter()
        ctx.run_udf(dataset=ds, udf=make(), corrections=cs)
        times[name] = time.perf_counter() - t0
    print(json.dumps(times))
    """
)


def libertem_round(python: str, path: str, nav, corr_file: str) -> dict[str, float]:
    out = subprocess.run(
        [python, "-c", LIBERTEM_SCRIPT, path, json.dumps(nav), json.dumps(SIG), corr_file],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench", help="where the scans live")
    parser.add_argument("--small", action="store_true", help="nav 32x32 for a quick check")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--libertem", default="/tmp/lt-venv/bin/python")
    args = parser.parse_args(argv)

    nav = (32, 32) if args.small else (128, 128)
    dtype = np.dtype(np.uint16)
    os.makedirs(args.dir, exist_ok=True)
    path = scan_path(args.dir, dtype, nav)
    write_scan(path, dtype, nav)
    cache_file(path)
    log(f"memory: {meminfo()}")
    nbytes = os.path.getsize(path)
    dark, gain, mask = corrections_arrays()
    corr_file = os.path.join(args.dir, "corrections.npz")
    np.savez(corr_file, dark=dark, gain=gain, mask=mask)
    cs = ltdask.CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)

    methods = {}
    for name, make in udfs().items():
        methods[name] = lambda make=make: make().compute(ds)
        methods[f"{name} corrected"] = lambda make=make: make().compute(ds, corrections=cs)
    libertem: dict[str, list[float]] = {name: [] for name in udfs()}
    if args.libertem:
        # LiberTEM runs in its own process: once per round, after ltdask's methods
        def libertem_run():
            for name, t in libertem_round(args.libertem, path, nav, corr_file).items():
                libertem[name].append(t)

        methods["LiberTEM (child process)"] = libertem_run
    # the LiberTEM child process runs inside each round and counts as "other processes":
    # with it, every round counts (run this on an otherwise idle machine)
    max_foreign = 1.0 if args.libertem else 0.15
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        times, foreign, rounds = measure(methods, args.repeats, nbytes, max_foreign=max_foreign)

    def rate(ts):
        return nbytes / statistics.median(ts) / 1e9

    print(
        f"### uint16 raw, nav {nav}, sig {SIG}, {nbytes / 2**30:.2f} GiB, dark + gain + "
        f"{EXCLUDED} excluded pixels, {THREADS} threads, median of {args.repeats} rounds "
        f"(other processes {foreign:.0%}{', the LiberTEM child included' if args.libertem else ''})"
    )
    print(f"{'UDF':<24}{'plain':>8}{'corrected':>11}{'ratio':>8}{'LiberTEM':>10}{'x':>7}")
    for name in udfs():
        plain = rate(times[name])
        corrected = rate(times[f"{name} corrected"])
        line = f"{name:<24}{plain:8.2f}{corrected:11.2f}{corrected / plain:8.2f}"
        if libertem[name]:
            lt = rate(libertem[name][1:] or libertem[name])  # the warm-up round's run too
            line += f"{lt:10.2f}{corrected / lt:7.1f}"
        print(line)
    print(
        "GB/s of file bytes; ratio: corrected / plain (target 0.8); x: ltdask / LiberTEM "
        "corrected (target 3)"
    )


if __name__ == "__main__":
    main()
