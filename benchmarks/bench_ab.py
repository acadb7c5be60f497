"""ltdask against the best plain-dask expression and the numba read limit, A/B (issue 15).

Run as ``.venv/bin/python benchmarks/bench_ab.py`` (``--small`` for a quick check).

Uses the scans of ``bench_read.py`` (4 GiB float32 and 2 GiB uint16, nav 128x128, sig
256x256, page-cached). For each scan, every method below runs once to warm up, then all of
them run interleaved, round by round, ``--repeats`` times in this one process (memory
bandwidth here drifts by +-20 % within minutes: only ratios measured this way mean
anything). GB/s are of file bytes, threaded scheduler, 2 threads. Every method keeps its
memory map between runs (the baselines one ``np.memmap``, ltdask its map cache), so no
round pays page faults that another does not. Each method runs once more, untimed, right
before its timed run: a heavy method's aftermath (dask's ``std``) slowed whatever came
next by up to 2x (float32 SumUDF, which followed it: 15 against 35 GB/s).

* ``limit``: numba kernels that read the memory-mapped file and sum it on 2 threads without
  dask or copies (over nav: blocks of 32 frames x 4096 pixels into L1-sized sums, and 4
  frames at a time into a per-thread float32 frame -- int64 for integer scans, summed
  without conversion --, the faster counts; over sig: each frame in float32 lanes, int64
  lanes for integers) -- what reading this file costs on this machine;
* ``dask``: ``da.from_array(memmap).sum(axis, dtype=float32)`` at the chunking that was
  fastest in the warm-up (the best plain-dask expression);
* ``to_dask``: ``ltdask.open_raw(...).to_dask().sum(axis, dtype=float32)``; for integer
  scans also ``to_dask(dtype="float32").sum(axis)`` against dask's ``.astype(float32)
  .sum(axis)`` on the memmap (float32 chunks decoded from the integers);
* the shipped UDFs: Sum, SumSig, StdDev, ApplyMasks (1 ring, 16 dense), CoM and
  Sum+SumSig+StdDev in one pass.

The table gives each method's GB/s, its ratio to the dask expression of the same reduction
(sums only), and its ratio to the limit of that reduction.

``--against REV [REV ...]`` runs every ltdask method once more on each git revision REV, imported
beside this tree in the same process (``revision.py``), interleaved in the same rounds, and
prints, per method, the median over rounds of the per-round speed ratio this tree / REV:
the before/after comparison of a change (issue 32 asks that every such ratio stay within
5 %).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as da
import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import (  # noqa: E402
    AXES,
    SIG,
    THREADS,
    MemmapArray,
    cache_file,
    gbps,
    log,
    measure,
    memmap_candidates,
    scan_path,
    write_scan,
)
from bench_udfs import ring_masks  # noqa: E402
from revision import load_revision  # noqa: E402

import ltdask  # noqa: E402


@numba.njit(nogil=True, cache=True)
def _limit_nav(frames, out):
    """``out += frames.sum(axis=0)`` over (n, pixels) frames, in blocks of 32 frames x 4096
    pixels: the block's float32 sums stay in L1 while 32 streams are read."""
    n, px = frames.shape
    acc = np.zeros(4096, dtype=np.float32)
    for f0 in range(0, n, 32):
        f1 = min(n, f0 + 32)
        for p0 in range(0, px, 4096):
            p1 = min(px, p0 + 4096)
            block = acc[: p1 - p0]
            block[:] = out[p0:p1]
            for i in range(f0, f1):
                row = frames[i][p0:p1]
                for k in range(p1 - p0):
                    block[k] += np.float32(row[k])
            out[p0:p1] = block


@numba.njit(nogil=True, cache=True)
def _limit_nav4(frames, out):
    """``out += frames.sum(axis=0)`` over (n, pixels) frames, 4 frames per pass of `out`."""
    n = frames.shape[0]
    i = 0
    while i + 4 <= n:
        a, b, c, d = frames[i], frames[i + 1], frames[i + 2], frames[i + 3]
        for k in range(out.shape[0]):
            out[k] += (np.float32(a[k]) + np.float32(b[k])) + (np.float32(c[k]) + np.float32(d[k]))
        i += 4
    while i < n:
        a = frames[i]
        for k in range(out.shape[0]):
            out[k] += np.float32(a[k])
        i += 1


@numba.njit(nogil=True, cache=True)
def _limit_nav4_int(frames, out):
    """`_limit_nav4` for integer frames: exact sums in `out`'s integers (int64), no
    conversion (as fast as reading gets for counts)."""
    n = frames.shape[0]
    i = 0
    while i + 4 <= n:
        a, b, c, d = frames[i], frames[i + 1], frames[i + 2], frames[i + 3]
        for k in range(out.shape[0]):
            out[k] += (a[k] + b[k]) + (c[k] + d[k])
        i += 4
    while i < n:
        a = frames[i]
        for k in range(out.shape[0]):
            out[k] += a[k]
        i += 1


@numba.njit(nogil=True, cache=True)
def _limit_sig_int(frames, out):
    """``out[i] = frames[i].sum()`` for integer frames, in int64 lanes."""
    for i in range(frames.shape[0]):
        row = frames[i]
        total = 0
        for k in range(row.shape[0]):
            total += row[k]
        out[i] = total


@numba.njit(nogil=True, cache=True, fastmath=True)
def _limit_sig(frames, out):
    """``out[i] = frames[i].sum()``, each frame in float32 lanes (fastmath: vectorised)."""
    for i in range(frames.shape[0]):
        row = frames[i]
        total = np.float32(0)
        for k in range(row.shape[0]):
            total += np.float32(row[k])
        out[i] = total


def limit_method(path, dtype, nav, axis, pool: ThreadPoolExecutor, kernel=None):
    """The numba read limit of a sum over `axis`, on the pool's threads, one map for every
    run (ltdask keeps its maps between runs too; what a first pass costs is
    ``bench_first_pass.py``'s subject)."""
    n = nav[0] * nav[1]
    px = SIG[0] * SIG[1]
    halves = [(0, n // 2), (n // 2, n)]

    # counts are summed as integers (exactly, no conversion: the faster kernels for them)
    ints = np.dtype(dtype).kind in "ui" and kernel is _limit_nav4
    kernel = _limit_nav4_int if ints else (kernel or _limit_nav)
    sig_kernel = _limit_sig_int if np.dtype(dtype).kind in "ui" else _limit_sig

    flat = np.memmap(path, dtype=dtype, mode="r", shape=(n, px))

    def run():
        if axis == AXES["nav"]:
            outs = [np.zeros(px, dtype=np.int64 if ints else np.float32) for _ in halves]
            jobs = [(flat[a:b], o) for (a, b), o in zip(halves, outs, strict=True)]
            list(pool.map(lambda job: kernel(*job), jobs))
            return (outs[0] + outs[1]).reshape(SIG)
        out = np.empty(n, dtype=np.int64 if sig_kernel is _limit_sig_int else np.float64)
        list(pool.map(lambda h: sig_kernel(flat[h[0] : h[1]], out[h[0] : h[1]]), halves))
        return out.reshape(nav)

    return run


def dask_method(path, dtype, nav, axis, chunks, expr="sum"):
    """`expr`: ``sum`` (``.sum(dtype=float32)``), ``std`` or ``astype`` (``.astype(float32)
    .sum()``: what ``to_dask(dtype="float32")`` is compared with)."""

    mapped = MemmapArray(path, dtype, (*nav, *SIG))  # (one map for every run, as ltdask's)

    def run():
        arr = da.from_array(mapped, chunks=chunks)
        if expr == "std":
            return arr.astype(np.float32).std(axis=axis).compute()
        if expr == "astype":
            return arr.astype(np.float32).sum(axis=axis).compute()
        return arr.sum(axis=axis, dtype=np.float32).compute()

    return run


def best_dask(path, dtype, nav, axis, nbytes, expr="sum") -> tuple[str, object]:
    """The chunking of the dask expression that was fastest (best of 2 runs each)."""
    import time

    best = None
    for chunks in memmap_candidates(nav):
        fn = dask_method(path, dtype, nav, axis, chunks, expr)
        fn()
        t0 = time.perf_counter()
        fn()
        fn()
        t = (time.perf_counter() - t0) / 2
        log(f"    dask chunks {chunks}: {nbytes / t / 1e9:.1f} GB/s")
        if best is None or t < best[0]:
            best = (t, chunks, fn)
    assert best is not None
    return str(best[1]), best[2]


def ltdask_methods(lt, path, dtype, nav) -> dict:
    """The methods that run ltdask (`lt`: this package or `revision.load_revision`'s)."""
    udfs = lt.udf

    def open_ds():
        return lt.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)

    def udf(*make):
        return lambda: lt.compute(open_ds(), [m() for m in make])

    def to_dask(axis, **kwargs):
        return lambda: open_ds().to_dask(**kwargs).sum(axis=axis, dtype=np.float32).compute()

    ring = ring_masks(1)
    dense16 = np.random.default_rng(0).random((16, *SIG)).astype(np.float32)
    out = {f"to_dask sum/{red}": to_dask(axis) for red, axis in AXES.items()}
    if np.dtype(dtype).kind != "f":  # float32 chunks decoded from the integers
        out["to_dask(f32) sum/nav"] = to_dask(AXES["nav"], dtype="float32")
    out["SumUDF"] = udf(udfs.SumUDF)
    out["SumSigUDF"] = udf(udfs.SumSigUDF)
    out["StdDevUDF"] = udf(udfs.StdDevUDF)
    out["ApplyMasks (1 ring)"] = udf(lambda: udfs.ApplyMasksUDF(lambda: ring))
    out["ApplyMasks (16 dense)"] = udf(lambda: udfs.ApplyMasksUDF(lambda: dense16))
    out["CoMUDF"] = udf(lambda: udfs.CoMUDF.with_params(cy=SIG[0] / 2, cx=SIG[1] / 2, r=SIG[0] / 4))
    out["Sum+SumSig+StdDev"] = udf(udfs.SumUDF, udfs.SumSigUDF, udfs.StdDevUDF)
    return out


def methods_for(path, dtype, nav, nbytes, pool, against=()) -> tuple[dict, dict]:
    """The methods of one scan, and for each the reduction it does ('nav', 'sig' or None);
    for each package in `against` (other revisions'), each ltdask method once more on that
    revision, named ``"<method> @<revision>"``."""
    out, kind = {}, {}
    for red, axis in AXES.items():
        out[f"limit sum/{red}"] = limit_method(path, dtype, nav, axis, pool)
        if red == "nav":
            out["limit sum/nav 4 rows"] = limit_method(path, dtype, nav, axis, pool, _limit_nav4)
            kind["limit sum/nav 4 rows"] = "nav"
        label, fn = best_dask(path, dtype, nav, axis, nbytes)
        out[f"dask sum/{red}"] = fn
        log(f"  best dask expression over {red}: chunks {label}")
        kind.update({f"{m} sum/{red}": red for m in ("limit", "dask", "to_dask")})
    label, out["dask std/nav"] = best_dask(path, dtype, nav, AXES["nav"], nbytes, "std")
    log(f"  best dask std over nav: chunks {label}")
    if np.dtype(dtype).kind != "f":
        label, out["dask astype/nav"] = best_dask(path, dtype, nav, AXES["nav"], nbytes, "astype")
        log(f"  best dask astype(float32).sum() over nav: chunks {label}")
    mine = ltdask_methods(ltdask, path, dtype, nav)
    out.update(mine)
    for package in against:
        rev = package.__name__.partition("_")[2]
        for name, fn in ltdask_methods(package, path, dtype, nav).items():
            out[f"{name} @{rev}"] = fn
            kind[f"{name} @{rev}"] = kind.get(name, "sig" if name == "SumSigUDF" else "nav")
    for name in out:
        kind.setdefault(name, "sig" if name == "SumSigUDF" else "nav")
    return out, kind


#: the dask expression each method is compared with
BASELINE = {
    "SumUDF": "dask sum/nav",
    "to_dask sum/nav": "dask sum/nav",
    "SumSigUDF": "dask sum/sig",
    "to_dask sum/sig": "dask sum/sig",
    "StdDevUDF": "dask std/nav",
    "to_dask(f32) sum/nav": "dask astype/nav",
}


def report(dtype, times: dict, kind: dict, nbytes: int) -> None:
    rate = {name: gbps(nbytes, ts) for name, ts in times.items() if " @" not in name}
    print(f"\n{np.dtype(dtype)} scan, {nbytes / 2**30:.0f} GiB, threads x{THREADS}, medians")
    print(f"{'method':<24} {'GB/s':>7} {'/ dask':>7} {'/ limit':>8}")
    for name, r in rate.items():
        base = rate.get(BASELINE.get(name, ""))
        vs_dask = f"{r / base:7.2f}" if base else "      -"
        # the limit: the faster of the limit kernels of that reduction in this run
        limit = max(v for k, v in rate.items() if k.startswith(f"limit sum/{kind[name]}"))
        print(f"{name:<24} {r:7.2f} {vs_dask} {r / limit:8.2f}")


def report_revision(times: dict) -> None:
    """Each ltdask method against its twin on each other revision: the median over rounds
    of the per-round ratio of their speeds (this tree / the revision), and its spread."""
    revs = list(dict.fromkeys(name.partition(" @")[2] for name in times if " @" in name))
    for rev in revs:
        print(f"\nthis tree / {rev}, per-round speed ratios: median [min, max]")
        for twin in [n for n in times if n.endswith(f" @{rev}")]:
            name = twin.partition(" @")[0]
            ratios = sorted(t_rev / t for t, t_rev in zip(times[name], times[twin], strict=True))
            mid = statistics.median(ratios)
            print(f"{name:<24} {mid:7.3f}  [{ratios[0]:.3f}, {ratios[-1]:.3f}]")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench-read")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="nav 32x32, for a quick check")
    parser.add_argument("--dtypes", nargs="*", default=["float32", "uint16"])
    parser.add_argument(
        "--against",
        metavar="REV",
        nargs="+",
        default=[],
        help="also run every ltdask method on each git revision REV, interleaved (revision.py)",
    )
    args = parser.parse_args(argv)
    against = [load_revision(rev) for rev in args.against]
    nav = (32, 32) if args.small else (128, 128)
    os.makedirs(args.dir, exist_ok=True)
    dask.config.set(scheduler="threads", num_workers=THREADS)
    with ThreadPoolExecutor(THREADS) as pool:
        for name in args.dtypes:
            dtype = np.dtype(name)
            path = scan_path(args.dir, dtype, nav)
            if not os.path.exists(path):
                write_scan(path, dtype, nav)
            cache_file(path)
            nbytes = os.path.getsize(path)
            log(f"{dtype}: {path}")
            methods, kind = methods_for(path, dtype, nav, nbytes, pool, against)
            ref = methods["limit sum/nav"]()
            got = methods["SumUDF"]()[0]["intensity"].values
            assert np.allclose(got, ref, rtol=1e-3), "SumUDF differs from the limit's sum"
            times, load, rounds = measure(methods, args.repeats, nbytes, settle=True)
            report(dtype, times, kind, nbytes)
            report_revision(times)
            print(f"(other processes used {load:.0%} of the CPUs in the kept rounds of {rounds})")


if __name__ == "__main__":
    main()
