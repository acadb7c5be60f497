"""Detector corrections (issue 33): each shipped UDF with dark + gain + excluded pixels
against the same UDF without corrections, and against LiberTEM 0.16's corrected runs.

Run as ``python benchmarks/bench_corrections.py`` (``--small`` for a quick check: nav
32x32; ``--dtypes``, ``--excluded`` and ``--udfs`` pick a part; ``--libertem PYTHON`` names
the interpreter of an environment with ``libertem==0.16.0``, by default
``/tmp/lt-venv/bin/python``, used where it exists; ``--libertem ''`` leaves LiberTEM out).

Uses the scans of ``bench_read.py`` (2 GiB uint16 and 4 GiB float32, nav 128x128, sig
256x256, page-cached). Per scan, every UDF runs without corrections and with dark + gain +
each set of excluded pixels (0.1 % and 1 % of the pixels, spread at random or in small
clusters -- lines, L shapes and 2x2 blocks, on the borders too), once to warm up, then all
interleaved, round by round, in this one process (threaded scheduler, 2 threads); with
LiberTEM, one child process per scan (`LiberTEMChild`, LiberTEM's threads executor on 2
threads) runs the same UDFs corrected, each run a method of the same rounds, driven over
a pipe and timed inside the child. Prints GB/s of file bytes uncorrected, and per set of excluded
pixels the corrected/uncorrected ratio (target >= 0.8) and ltdask/LiberTEM (target >= 3).
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
from ltdask.corrections import RepairPlan  # noqa: E402
from ltdask.udf import (  # noqa: E402
    ApplyMasksUDF,
    CoMUDF,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

#: the sets of excluded pixels: (percent of the pixels, how they are placed)
EXCLUDED = {"0.1% random": (0.1, "random"), "1% random": (1.0, "random")}
EXCLUDED |= {"0.1% clusters": (0.1, "clusters"), "1% clusters": (1.0, "clusters")}
#: cluster shapes (offsets from a corner pixel): a pixel, lines, an L, a 2x2 block
SHAPES = [[(0, 0)], [(0, 0), (0, 1)], [(0, 0), (1, 0), (2, 0)], [(0, 0), (1, 0), (1, 1)]]
SHAPES += [[(0, 0), (0, 1), (1, 0), (1, 1)]]


def excluded_mask(percent: float, kind: str, seed: int = 3) -> np.ndarray:
    """About `percent` % of the pixels excluded, at random or in clusters (`SHAPES`), less
    any that no neighbour could repair (a corner of a block in the frame's corner)."""
    rng = np.random.default_rng(seed)
    h, w = SIG
    want = round(h * w * percent / 100)
    mask = np.zeros(SIG, bool)
    if kind == "random":
        mask.reshape(-1)[rng.choice(h * w, want, replace=False)] = True
    else:
        while mask.sum() < want:
            shape = SHAPES[rng.integers(len(SHAPES))]
            y, x = rng.integers(0, h), rng.integers(0, w)
            for dy, dx in shape:
                mask[min(h - 1, y + dy), min(w - 1, x + dx)] = True
    plan = RepairPlan.make(SIG, np.argwhere(mask).T, allow_empty=True)
    mask.reshape(-1)[plan.excluded[plan.counts == 0]] = False
    return mask


def corrections_arrays(dtype: np.dtype, seed: int = 3):
    """A dark frame and gain map of the scale of `dtype`'s frames (``bench_read.py``:
    uint16 over its range, float32 in [0, 1))."""
    rng = np.random.default_rng(seed)
    scale = 1.0 if dtype.kind == "f" else 1000.0
    dark = (rng.normal(0.01, 0.001, SIG) * scale).astype(np.float32)
    gain = rng.uniform(0.9, 1.1, SIG).astype(np.float32)
    return dark, gain


def pick_roi(nav) -> np.ndarray:
    roi = np.zeros(nav, bool)
    roi[:, ::16] = True  # (a column of frames every 16)
    return roi


def copy_frames(frames: np.ndarray, index: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The frames `index` of `frames` copied into a new array of `dtype`: the floor of a
    Pick of them, whose result is new memory of that dtype (float32 where corrected)."""
    out = np.empty((len(index), *frames.shape[1:]), dtype=dtype)
    for j, i in enumerate(index):
        out[j] = frames[i]
    return out


def udfs() -> dict:
    """name: (a function making the run's UDFs, its ROI maker or None)."""
    h, w = SIG
    ring = ltdask.masks.ring(w / 2, h / 2, w, h, 60, 20)
    dense16 = np.random.default_rng(0).random((16, *SIG)).astype(np.float32)
    return {
        "SumUDF": (lambda: [SumUDF()], None),
        "SumSigUDF": (lambda: [SumSigUDF()], None),
        "StdDevUDF": (lambda: [StdDevUDF()], None),
        "ApplyMasks 1 ring": (lambda: [ApplyMasksUDF([lambda: ring])], None),
        "ApplyMasks 16 dense": (lambda: [ApplyMasksUDF(lambda: dense16)], None),
        "CoMUDF": (lambda: [CoMUDF.with_params(cy=h / 2, cx=w / 2, r=60)], None),
        "PickUDF (1/16)": (lambda: [PickUDF()], pick_roi),
        "Sum+SumSig+StdDev": (lambda: [SumUDF(), SumSigUDF(), StdDevUDF()], None),
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
    from libertem.udf.raw import PickUDF
    from libertem.udf.stddev import StdDevUDF
    from libertem.udf.sum import SumUDF
    from libertem.udf.sumsigudf import SumSigUDF
    import sparse

    path, nav, sig, dtype, corr = sys.argv[1:6]
    nav, sig = json.loads(nav), json.loads(sig)
    h, w = sig
    data = np.load(corr)
    ctx = Context.make_with("threads", cpus=2)
    ds = ctx.load("raw", path=path, nav_shape=nav, sig_shape=sig, dtype=dtype)
    dense16 = np.random.default_rng(0).random((16, h, w)).astype(np.float32)
    roi = np.zeros(nav, bool)
    roi[:, ::16] = True
    make = {
        "SumUDF": (lambda: [SumUDF()], None),
        "SumSigUDF": (lambda: [SumSigUDF()], None),
        "StdDevUDF": (lambda: [StdDevUDF()], None),
        "ApplyMasks 1 ring": (lambda: [ApplyMasksUDF(
            mask_factories=[lambda: ring(w / 2, h / 2, w, h, 60, 20)])], None),
        "ApplyMasks 16 dense": (lambda: [ApplyMasksUDF(
            mask_factories=lambda: dense16, mask_count=16, mask_dtype=np.float32)], None),
        "CoMUDF": (lambda: [CoMUDF.with_params(cy=h / 2, cx=w / 2, r=60)], None),
        "PickUDF (1/16)": (lambda: [PickUDF()], roi),
        "Sum+SumSig+StdDev": (lambda: [SumUDF(), SumSigUDF(), StdDevUDF()], None),
    }
    sets = {
        k[len("mask_"):]: CorrectionSet(dark=data["dark"], gain=data["gain"],
                                        excluded_pixels=sparse.COO(data[k]))
        for k in data.files if k.startswith("mask_")
    }
    print("LTREADY", flush=True)
    for line in sys.stdin:  # one run per line: "name | case"; its time back
        name, case = json.loads(line).split(" | ")
        udf, r = make[name]
        t0 = time.perf_counter()
        ctx.run_udf(dataset=ds, udf=udf(), roi=r, corrections=sets[case])
        print("LTTIME " + json.dumps(time.perf_counter() - t0), flush=True)
    """
)


class LiberTEMChild:
    """LiberTEM 0.16 in a child process of its own environment (`python`), started once
    per scan, with the scan opened and every set of corrections made: `run` asks it over
    a pipe for one corrected run and returns the seconds it took there (timed in the
    child, the pipe's round trip left out). It runs on LiberTEM's ``threads`` executor
    (``Context.make_with("threads", cpus=2)``: a ConcurrentJobExecutor of 2 threads, as
    ltdask's 2 threads)."""

    def __init__(self, python: str, path: str, nav, dtype: np.dtype, corr_file: str):
        args = [path, json.dumps(list(nav)), json.dumps(list(SIG)), dtype.name, corr_file]
        self.proc = subprocess.Popen(
            [python, "-c", LIBERTEM_SCRIPT, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reply("LTREADY")

    def _reply(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # (LiberTEM may print other lines)
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise RuntimeError(f"the LiberTEM child ended (exit code {self.proc.wait()})")

    def run(self, key: str) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(key) + "\n")
        self.proc.stdin.flush()
        return float(self._reply("LTTIME "))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def bench_scan(args, dtype: np.dtype, nav, names: list[str], cases: list[str]) -> None:
    path = scan_path(args.dir, dtype, nav)
    write_scan(path, dtype, nav)
    cache_file(path)
    log(f"memory: {meminfo()}")
    nbytes = os.path.getsize(path)
    dark, gain = corrections_arrays(dtype)
    masks = {case: excluded_mask(*EXCLUDED[case]) for case in cases}
    corr_file = os.path.join(args.dir, f"corrections_{dtype.name}.npz")
    np.savez(corr_file, dark=dark, gain=gain, **{f"mask_{c}": m for c, m in masks.items()})
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)
    runs = udfs()
    methods = {}
    for name in names:
        make, roi_of = runs[name]
        roi = None if roi_of is None else roi_of(nav)
        methods[name] = lambda make=make, roi=roi: ltdask.compute(ds, make(), roi=roi)
        for case in cases:
            cs = ltdask.CorrectionSet(dark=dark, gain=gain, excluded_pixels=masks[case])
            methods[f"{name} | {case}"] = lambda make=make, roi=roi, cs=cs: ltdask.compute(
                ds, make(), roi=roi, corrections=cs
            )
    pick = "PickUDF (1/16)"
    if pick in names:
        # the floor of Pick's runs: its frames copied into new memory, of the data's dtype
        # (uncorrected) and of float32 (corrected: twice the bytes for uint16 data)
        frames = np.memmap(path, dtype=dtype, mode="r").reshape(-1, *SIG)
        index = np.flatnonzero(pick_roi(nav))
        for kind, out_dtype in (("native", dtype), ("float32", np.dtype(np.float32))):
            methods[f"floor {kind}"] = lambda d=out_dtype: copy_frames(frames, index, d)
    libertem: dict[str, list[float]] = {}
    use_libertem = bool(args.libertem) and os.path.exists(args.libertem)
    child = LiberTEMChild(args.libertem, path, nav, dtype, corr_file) if use_libertem else None
    if child is not None:
        # one method per corrected run, interleaved with ltdask's round by round (the
        # child's own time of each run is kept: warm-up first, as every method's)
        for name in names:
            for case in cases:
                key = f"{name} | {case}"

                def libertem_run(key=key):
                    libertem.setdefault(key, []).append(child.run(key))

                methods[f"LiberTEM {key}"] = libertem_run
    # the LiberTEM child's runs count as "other processes": with it, every round counts
    # (run this on an otherwise idle machine)
    max_foreign = 1.0 if use_libertem else 0.15
    try:
        with dask.config.set(scheduler="threads", num_workers=THREADS):
            times, foreign, _ = measure(
                methods, args.repeats, nbytes, max_foreign=max_foreign, max_rounds=3 * args.repeats
            )
    finally:
        if child is not None:
            child.close()
    libertem = {key: ts[1:] for key, ts in libertem.items()}  # (not the warm-up)

    def rate(ts):
        return nbytes / statistics.median(ts) / 1e9

    print(
        f"\n### {dtype.name} raw, nav {nav}, sig {SIG}, {nbytes / 2**30:.2f} GiB, dark + gain "
        f"+ excluded pixels, {THREADS} threads, median of {args.repeats} rounds (other "
        f"processes {foreign:.0%}{', the LiberTEM child included' if use_libertem else ''})"
    )
    head = "| UDF | none (GB/s) | " + " | ".join(cases) + " |"
    print(head)
    print("|" + "---|" * (2 + len(cases)))
    for name in names:
        plain = rate(times[name])
        cells = []
        for case in cases:
            corrected = rate(times[f"{name} | {case}"])
            cell = f"{corrected / plain:.2f}"
            lt = libertem.get(f"{name} | {case}")
            if lt:
                cell += f" ({corrected / rate(lt):.1f}x LT)"
            cells.append(cell)
        print(f"| {name} | 1.00 ({plain:.1f}) | " + " | ".join(cells) + " |")
    if pick in names:
        native, as_float = rate(times["floor native"]), rate(times["floor float32"])
        cell = f"{as_float / native:.2f}"
        print(
            f"| Pick's floor: numpy copy | 1.00 ({native:.1f}) | "
            + " | ".join([cell] * len(cases))
            + " |"
        )
    print(
        "cells: corrected / uncorrected GB/s (target >= 0.8); x LT: ltdask / LiberTEM 0.16 "
        "corrected (target >= 3); Pick's floor: its frames copied into new memory, float32 "
        "/ the data's dtype (what corrected / uncorrected can be at most where the "
        "copy into new memory is all a Pick costs)"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench", help="where the scans live")
    parser.add_argument("--small", action="store_true", help="nav 32x32 for a quick check")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--dtypes", default="uint16,float32")
    parser.add_argument("--excluded", default=",".join(EXCLUDED), help="sets of pixels")
    parser.add_argument("--udfs", default=",".join(udfs()), help="UDF runs, by name")
    parser.add_argument("--libertem", default="/tmp/lt-venv/bin/python")
    args = parser.parse_args(argv)

    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    names = [n for n in args.udfs.split(",") if n]
    cases = [c for c in args.excluded.split(",") if c]
    for bad, known in ((set(names) - set(udfs()), udfs()), (set(cases) - set(EXCLUDED), EXCLUDED)):
        if bad:
            parser.error(f"unknown {sorted(bad)}; expected names from {sorted(known)}")
    for dtype in args.dtypes.split(","):
        bench_scan(args, np.dtype(dtype), nav, names, cases)


if __name__ == "__main__":
    main()
