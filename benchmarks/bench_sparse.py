"""Sparse end to end: UDFs on a raw CSR scan as CSR tiles, against the same runs densified
and against LiberTEM 0.16 on the same files.

Run as ``python benchmarks/bench_sparse.py`` (``--small`` for a quick check, ``--libertem
PYTHON`` names the interpreter of an environment with ``libertem==0.16.0``, by default
``/tmp/lt-venv/bin/python``; ``--libertem ''`` leaves LiberTEM out).

Writes (once, to ``--dir``) raw CSR scans of nav 256x256, sig 256x256 (LiberTEM's raw_csr
layout: a TOML descriptor and three raw files; int64 row pointers, int32 column indices,
uint16 counts) at 0.1 % and 1 % fill, generated row by row (never dense). Per scan, every
round runs, interleaved in one process on the threaded scheduler with 2 threads:
``SumUDF``, ``SumSigUDF`` and ``ApplyMasksUDF`` with 16 sparse ring masks, each sparse end to
end (the default plan: CSR tiles from the mapped files) and densified
(``backends=("numpy",)``), and the same three in a LiberTEM child process (timed inside it
after a warm-up run). Prints frames/s, sparse/densified and sparse/LiberTEM.
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
import scipy.sparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_read import THREADS, log, measure  # noqa: E402

import ltdask  # noqa: E402
from ltdask.udf import ApplyMasksUDF, SumSigUDF, SumUDF  # noqa: E402

SIG = (256, 256)
MASKS = 16
ROWS_PER_BLOCK = 4096


def write_csr_scan(folder: str, nav, fill: float) -> str:
    """A raw CSR scan of random counts at `fill`, written block by block; the TOML's path."""
    name = f"csr_{nav[0]}x{nav[1]}_{fill:g}"
    toml = os.path.join(folder, f"{name}.toml")
    if os.path.exists(toml):
        return toml
    frames, px = nav[0] * nav[1], SIG[0] * SIG[1]
    rng = np.random.default_rng(2026)
    offset = 0
    with (
        open(os.path.join(folder, f"{name}_indptr.raw"), "wb") as fp,
        open(os.path.join(folder, f"{name}_indices.raw"), "wb") as fi,
        open(os.path.join(folder, f"{name}_data.raw"), "wb") as fd,
    ):
        np.zeros(1, np.int64).tofile(fp)
        for first in range(0, frames, ROWS_PER_BLOCK):
            n = min(ROWS_PER_BLOCK, frames - first)
            block = scipy.sparse.random(
                n, px, density=fill, format="csr", dtype=np.float64, random_state=rng
            )
            block.sort_indices()
            (block.indptr[1:].astype(np.int64) + offset).tofile(fp)
            block.indices.astype(np.int32).tofile(fi)
            (1 + block.data * 50).astype(np.uint16).tofile(fd)
            offset += block.nnz
    with open(toml, "w") as f:
        f.write(
            textwrap.dedent(
                f"""\
                [params]
                filetype = "raw_csr"
                nav_shape = [{nav[0]}, {nav[1]}]
                sig_shape = [{SIG[0]}, {SIG[1]}]

                [raw_csr]
                indptr_file = "{name}_indptr.raw"
                indptr_dtype = "<i8"
                indices_file = "{name}_indices.raw"
                indices_dtype = "<i4"
                data_file = "{name}_data.raw"
                data_dtype = "<u2"
                """
            )
        )
    return toml


def ring_masks():
    """16 sparse rings around the centre (scipy CSR), as LiberTEM's and ltdask's take."""
    h, w = SIG
    y, x = np.ogrid[:h, :w]
    r = np.hypot(y - h / 2, x - w / 2)
    edges = np.linspace(0, min(h, w) / 2, MASKS + 1)
    return [
        scipy.sparse.csr_matrix(((r >= a) & (r < b)).astype(np.float32))
        for a, b in zip(edges[:-1], edges[1:], strict=True)
    ]


def udfs():
    masks = ring_masks()
    return {
        "SumUDF": lambda: SumUDF(),
        "SumSigUDF": lambda: SumSigUDF(),
        "ApplyMasksUDF 16 sparse": lambda: ApplyMasksUDF(
            [lambda m=m: m for m in masks], use_sparse=True
        ),
    }


LIBERTEM_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import scipy.sparse
    from libertem.api import Context
    from libertem.udf.masks import ApplyMasksUDF
    from libertem.udf.sum import SumUDF
    from libertem.udf.sumsigudf import SumSigUDF

    path, sig, n_masks = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    h, w = sig
    y, x = np.ogrid[:h, :w]
    r = np.hypot(y - h / 2, x - w / 2)
    edges = np.linspace(0, min(h, w) / 2, n_masks + 1)
    masks = [scipy.sparse.csr_matrix(((r >= a) & (r < b)).astype(np.float32))
             for a, b in zip(edges[:-1], edges[1:])]
    ctx = Context.make_with("threads", cpus=2)
    ds = ctx.load("raw_csr", path=path)
    udfs = {
        "SumUDF": lambda: SumUDF(),
        "SumSigUDF": lambda: SumSigUDF(),
        "ApplyMasksUDF 16 sparse": lambda: ApplyMasksUDF(
            mask_factories=[lambda m=m: m for m in masks], use_sparse=True),
    }
    times = {}
    for name, make in udfs.items():
        ctx.run_udf(dataset=ds, udf=make())  # warm-up: compilation
        t0 = time.perf_counter()
        ctx.run_udf(dataset=ds, udf=make())
        times[name] = time.perf_counter() - t0
    print(json.dumps(times))
    """
)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench", help="where the scans live")
    parser.add_argument("--small", action="store_true", help="nav 64x64 for a quick check")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--fills", default="0.001,0.01", help="fill factors")
    parser.add_argument("--libertem", default="/tmp/lt-venv/bin/python")
    args = parser.parse_args(argv)
    nav = (64, 64) if args.small else (256, 256)
    frames = nav[0] * nav[1]
    os.makedirs(args.dir, exist_ok=True)
    for fill in (float(f) for f in args.fills.split(",")):
        path = write_csr_scan(args.dir, nav, fill)
        ds = ltdask.open_raw_csr(path)
        log(f"{path}: nnz {ds.nnz}")
        log(ltdask.explain(ds, [make() for make in udfs().values()]))
        methods = {}
        for name, make in udfs().items():
            methods[f"{name} sparse"] = lambda make=make, ds=ds: make().compute(ds)
            methods[f"{name} densified"] = lambda make=make, ds=ds: make().compute(
                ds, backends=("numpy",)
            )
        libertem: dict[str, list[float]] = {name: [] for name in udfs()}
        if args.libertem:

            def libertem_run(path=path, libertem=libertem):
                out = subprocess.run(
                    [args.libertem, "-c", LIBERTEM_SCRIPT, path, json.dumps(SIG), str(MASKS)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for name, t in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    libertem[name].append(t)

            methods["LiberTEM (child process)"] = libertem_run
        with dask.config.set(scheduler="threads", num_workers=THREADS):
            times, foreign, _ = measure(methods, args.repeats, frames)

        def rate(ts):
            return frames / statistics.median(ts)

        print(
            f"### raw CSR uint16, nav {nav}, sig {SIG}, fill {fill:.1%} (nnz {ds.nnz}), "
            f"{THREADS} threads, median of {args.repeats} rounds (other processes {foreign:.0%})"
        )
        print(f"{'UDF':<26}{'sparse':>11}{'densified':>11}{'x':>7}{'LiberTEM':>11}{'x':>7}")
        for name in udfs():
            sp = rate(times[f"{name} sparse"])
            dense = rate(times[f"{name} densified"])
            line = f"{name:<26}{sp:11.0f}{dense:11.0f}{sp / dense:7.1f}"
            if libertem[name]:
                lt = rate(libertem[name])
                line += f"{lt:11.0f}{sp / lt:7.1f}"
            print(line)
        print("frames/s; x: sparse / densified (target >= 10 at 0.1 %), sparse / LiberTEM")


if __name__ == "__main__":
    main()
