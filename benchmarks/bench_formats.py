"""SumUDF throughput by file format: HDF5 and Zarr next to raw files of the same data.

Run as ``.venv/bin/python benchmarks/bench_formats.py`` (``--nav 128`` for a 128x128 scan,
``--small`` for a quick check).

Writes (once) one uint16 scan, nav 64x64 by default, sig 256x256 (512 MiB), to ``--dir`` in
each format, by the format's own writer:

* ``raw``: ``ndarray.tofile``;
* ``hdf5 chunked``: h5py, chunks ``(1, 16, 256, 256)``, no compression; ltdask reads it
  straight from the file (memory map, one run of frames per chunk) and, as
  ``hdf5 chunked, h5py``, through h5py (``open_hdf5(..., mmap=False)``);
* ``hdf5 gzip``: h5py, the same chunks, gzip level 1 (through h5py; compression costs CPU);
* ``zarr v3``: zarr-python, the same chunks, no compressor;
* ``mib raw 12-bit``: Merlin ``R64`` frames of counter depth 12 (pixels in 16-bit fields of
  big-endian 64-bit words, decoded by ltdask tile by tile), by the test writer
  ``tests/helpers/mibfiles.py``, one scan row at a time, with a 384-byte header per frame;
* ``mib U16``: Merlin ``U16`` frames (big-endian uint16), the same way.

The counts are below 4096, so the 12-bit raw file holds the same data as the others.

Each is measured as ``SumUDF().compute(open_*(...))`` (opening included) with dask's
threaded scheduler on 2 threads; every method is warmed up once (which also pulls its file
into the page cache), then the methods run interleaved, ``--repeats`` rounds; the table
shows the median time and GB/s of uncompressed scan bytes (``nav x sig x 2``), and the
ratio to raw. The machine is noisy (about +-17 %): compare numbers from one run only.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import dask
import numpy as np

import ltdask
from ltdask.io import open_hdf5, open_zarr

# the Merlin writer of the tests (numpy only)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from helpers.mibfiles import write_mib  # noqa: E402

SIG = (256, 256)
DTYPE = np.dtype("uint16")
THREADS = 2
CHUNK_FRAMES = 16


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def block(nav: tuple[int, int], row: int) -> np.ndarray:
    """Scan row `row`: ``(nav[1], *SIG)`` random counts, the same every time."""
    rng = np.random.default_rng([2026, row])
    return rng.integers(0, 4096, size=(nav[1], *SIG), dtype=DTYPE)


def write_all(folder: str, nav: tuple[int, int]) -> dict[str, str]:
    import h5py
    import zarr

    os.makedirs(folder, exist_ok=True)
    tag = f"{nav[0]}x{nav[1]}"
    paths = {
        "raw": os.path.join(folder, f"scan_{tag}.raw"),
        "hdf5": os.path.join(folder, f"scan_{tag}_chunked.h5"),
        "gzip": os.path.join(folder, f"scan_{tag}_gzip.h5"),
        "zarr": os.path.join(folder, f"scan_{tag}.zarr"),
        "mib raw": os.path.join(folder, f"scan_{tag}_r64_12bit.mib"),
        "mib u16": os.path.join(folder, f"scan_{tag}_u16.mib"),
    }
    shape = (*nav, *SIG)
    chunks = (1, min(CHUNK_FRAMES, nav[1]), *SIG)
    size = math.prod(shape) * DTYPE.itemsize
    if not (os.path.exists(paths["raw"]) and os.path.getsize(paths["raw"]) == size):
        log(f"  writing {paths['raw']} ({size / 2**30:.2f} GiB)")
        with open(paths["raw"] + ".part", "wb") as f:
            for row in range(nav[0]):
                block(nav, row).tofile(f)
        os.replace(paths["raw"] + ".part", paths["raw"])
    for key, compression in (("hdf5", None), ("gzip", "gzip")):
        if os.path.exists(paths[key]):
            continue
        log(f"  writing {paths[key]}")
        with h5py.File(paths[key] + ".part", "w") as f:
            opts = {"compression_opts": 1} if compression else {}
            d = f.create_dataset(
                "data", shape, DTYPE, chunks=chunks, compression=compression, **opts
            )
            for row in range(nav[0]):
                d[row] = block(nav, row)
        os.replace(paths[key] + ".part", paths[key])
    if not os.path.exists(os.path.join(paths["zarr"], "zarr.json")):
        log(f"  writing {paths['zarr']}")
        z = zarr.create_array(
            paths["zarr"],
            shape=shape,
            dtype=DTYPE,
            chunks=chunks,
            compressors=None,
            overwrite=True,
        )
        for row in range(nav[0]):
            z[row] = block(nav, row)
    for key, raw in (("mib raw", True), ("mib u16", False)):
        # 384 header bytes + 2 bytes per pixel (raw 12-bit: 16-bit fields), per frame
        mib_size = math.prod(nav) * (384 + math.prod(SIG) * 2)
        if os.path.exists(paths[key]) and os.path.getsize(paths[key]) == mib_size:
            continue
        log(f"  writing {paths[key]}")
        row_file = paths[key] + ".row"
        with open(paths[key] + ".part", "wb") as f:
            for row in range(nav[0]):
                # one scan row per call (write_mib writes whole files), appended
                write_mib(row_file, block(nav, row), depth=12, raw=raw, first_seq=row * nav[1] + 1)
                with open(row_file, "rb") as r:
                    f.write(r.read())
        os.remove(row_file)
        os.replace(paths[key] + ".part", paths[key])
    return paths


def methods(paths: dict[str, str], nav) -> dict:
    return {
        "raw": lambda: ltdask.open_raw(paths["raw"], nav, SIG, DTYPE),
        "hdf5 chunked (mmap)": lambda: open_hdf5(paths["hdf5"], "data"),
        "hdf5 chunked, h5py": lambda: open_hdf5(paths["hdf5"], "data", mmap=False),
        "hdf5 gzip-1, h5py": lambda: open_hdf5(paths["gzip"], "data"),
        "zarr v3, raw chunks": lambda: open_zarr(paths["zarr"]),
        "mib raw 12-bit": lambda: ltdask.open_mib(paths["mib raw"], nav_shape=nav),
        "mib U16": lambda: ltdask.open_mib(paths["mib u16"], nav_shape=nav),
    }


def run(open_ds) -> float:
    t0 = time.perf_counter()
    ds = open_ds()
    ltdask.udf.SumUDF().compute(ds)
    return time.perf_counter() - t0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench")
    parser.add_argument("--nav", type=int, default=64, help="scan is NAV x NAV frames")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="nav 16x16, for a quick check")
    parser.add_argument("--only", nargs="*", help="method names to run (default: all)")
    parser.add_argument("--detectors", action="store_true", help="K2IS, FRMS6, DE SEQ instead")
    parser.add_argument("--gib", type=float, default=2.0, help="--detectors: GiB of frames")
    args = parser.parse_args(argv)
    if args.detectors:
        return main_detectors(args)
    n = 16 if args.small else args.nav
    nav = (n, n)
    paths = write_all(args.dir, nav)
    todo = methods(paths, nav)
    if args.only:
        todo = {k: v for k, v in todo.items() if any(o in k for o in args.only)}
    nbytes = math.prod(nav) * math.prod(SIG) * DTYPE.itemsize
    ds = open_hdf5(paths["hdf5"], "data")
    log(
        f"  scan {nav} x {SIG} {DTYPE} ({nbytes / 2**20:.0f} MiB); {ds!r}: "
        f"{len(ds.fileset.files)} runs of frames, {len(ds.get_partitions())} partitions"
    )
    times: dict[str, list[float]] = {k: [] for k in todo}
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        for name, open_ds in todo.items():
            log(f"  warm-up {name}")
            run(open_ds)
        for r in range(args.repeats):
            for name, open_ds in todo.items():
                times[name].append(run(open_ds))
            log(f"  round {r + 1}/{args.repeats} done")
    base = statistics.median(times["raw"]) if "raw" in times else None
    print(
        f"SumUDF, {nav[0]}x{nav[1]} x {SIG[0]}x{SIG[1]} uint16, threads x{THREADS}, "
        f"median of {args.repeats}"
    )
    print(f"{'format':<24} {'median s':>9} {'GB/s':>7} {'vs raw':>7}")
    for name, ts in times.items():
        median = statistics.median(ts)
        ratio = f"{base / median:7.2f}" if base else "      -"
        print(f"{name:<24} {median:9.3f} {nbytes / median / 1e9:7.2f} {ratio}")


def main_detectors(args) -> None:
    """K2IS, FRMS6 and DE SEQ (``benchmarks/formats_a.py``), each next to a raw uint16 file of
    the same frames: GB/s of decoded uint16 frames, ratio to that raw file."""
    from formats_a import entries, partner

    todo = entries(os.path.join(args.dir, "detectors"), args.gib, args.only)
    nbytes = {name: open_ds().nbytes for name, open_ds in todo.items()}
    times: dict[str, list[float]] = {k: [] for k in todo}
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        for name, open_ds in todo.items():
            log(f"  warm-up {name}")
            run(open_ds)
        for r in range(args.repeats):
            for name, open_ds in todo.items():
                times[name].append(run(open_ds))
            log(f"  round {r + 1}/{args.repeats} done")
    print(f"SumUDF, {args.gib:g} GiB of frames each, threads x{THREADS}, median of {args.repeats}")
    print(f"{'format':<24} {'median s':>9} {'GB/s':>7} {'vs raw':>7}")
    for name, ts in times.items():
        median = statistics.median(ts)
        base = times.get(partner(name))
        ratio = f"{statistics.median(base) / median:7.2f}" if base else "      -"
        print(f"{name:<24} {median:9.3f} {nbytes[name] / median / 1e9:7.2f} {ratio}")


if __name__ == "__main__":
    main()
