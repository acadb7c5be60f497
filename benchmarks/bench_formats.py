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
* ``mib U16``: Merlin ``U16`` frames (big-endian uint16), the same way;
* ``mrc``: an MRC image stack written by ``mrcfile`` (``new_mmap``), read by ltdask and, as
  ``mrc, mrcfile mmap + dask``, as ``mrcfile.mmap(...).data`` in a dask array summed over the
  frames (chunks of one scan row);
* ``dm4``: the tests' DM4 writer (``tests/helpers/dmfiles.py``), the pixels at an even offset,
  and as ``dm4, odd offset`` one byte further (DM aligns nothing; ltdask hands out
  unaligned views there);
* ``dectris bslz4``: a DECTRIS series (master + data files of 1000 frames, chunks of 16
  frames, bitshuffle + LZ4 by hdf5plugin) of counting-detector frames (`counts_block`:
  Poisson counts, a bright disk on a sparse background, as ARINA records them; the random
  12-bit frames above are not what a counting detector writes, nor what it compresses),
  decompressed by ltdask in its tasks; and, as
  ``dectris bslz4, h5py+dask``, the same data files read by h5py + hdf5plugin through
  ``dask.array.from_array`` (chunks of 16 frames) and ``ltdask.from_array``;
* ``velox emd``: a Velox ``.emd`` (frames last, one uncompressed chunk per frame) read
  straight from the file; and ``velox emd, h5py+dask`` as above;
* ``blo u16``, ``tvips u16``: the scan as a 16-bit NanoMEGAS block file and as a TVIPS series
  of three files (headers by the tests' writers ``tests/helpers/{blo,tvips}files.py``),
  frames straight from the files with their record headers skipped;
* ``empad f32``: EMPAD's fixed 128 x 128 float32 frames (each with its two metadata rows),
  ``nav[0] x 2 nav[1]`` of them (as many bytes as the uint16 scan), next to the same frames
  as a raw float32 file and a raw uint16 file of as many 128 x 128 frames; a second table
  gives each of these formats' ratio to the raw file of the same frames.

The counts are below 4096, so the 12-bit raw file holds the same data as the others.

Before measuring, every file the methods read is dropped from the page cache and read back
(`bench_read.recache_file`), so that all are cached alike whatever earlier runs did.
Each is measured as ``SumUDF().compute(open_*(...))`` (opening included) with dask's
threaded scheduler on 2 threads; every method is warmed up once (which also pulls its file
into the page cache), then the methods run interleaved, ``--repeats`` rounds; the table
shows the median time and GB/s of uncompressed scan bytes (``nav x sig x 2``), and the
ratio to raw. The machine is noisy (about +-17 %): compare numbers from one run only.
"""

from __future__ import annotations

import argparse
import json
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
from helpers.blofiles import blo_header  # noqa: E402
from helpers.dectrisfiles import write_master  # noqa: E402
from helpers.dmfiles import write_dm  # noqa: E402
from helpers.emdfiles import frame_metadata  # noqa: E402
from helpers.mibfiles import write_mib  # noqa: E402
from helpers.tvipsfiles import frame_headers, series_header  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_read import recache_file  # noqa: E402

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


def write_all(folder: str, nav: tuple[int, int], names=None) -> dict[str, str]:
    """The files of the methods `names` (all by default), each written once; the raw file
    always (the reference of every table)."""
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

    def wanted(*prefixes: str) -> bool:
        return names is None or any(n.startswith(prefixes) for n in names)

    for key, compression in (("hdf5", None), ("gzip", "gzip")):
        if os.path.exists(paths[key]) or not wanted("hdf5 gzip" if compression else "hdf5 c"):
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
    if wanted("zarr") and not os.path.exists(os.path.join(paths["zarr"], "zarr.json")):
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
        done = os.path.exists(paths[key]) and os.path.getsize(paths[key]) == mib_size
        if done or not wanted("mib raw" if raw else "mib U16"):
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
    if wanted("mrc", "dm4"):
        paths.update(write_mrc_dm(folder, nav, paths["raw"]))
    if wanted("dectris", "velox"):
        paths.update(write_dectris_velox(folder, nav))
    if wanted("blo", "tvips", "empad", "raw f32", "raw u16"):
        paths.update(write_empad_blo_tvips(folder, nav))
    return paths


def write_empad_blo_tvips(folder: str, nav: tuple[int, int]) -> dict[str, str]:
    """The scan as a 16-bit block file and a three-file TVIPS series; EMPAD frames of as many
    bytes, also as raw float32 and (as many frames) raw uint16 files."""
    tag = f"{nav[0]}x{nav[1]}"
    paths = {
        "blo": os.path.join(folder, f"scan_{tag}_u16.blo"),
        "tvips": os.path.join(folder, f"scan_{tag}_000.tvips"),
        "empad": os.path.join(folder, f"empad_{tag}.xml"),
        "empad raw f32": os.path.join(folder, f"empad_{tag}_f32.raw"),
        "empad raw u16": os.path.join(folder, f"empad_{tag}_u16.raw"),
    }
    n = math.prod(nav)
    stride = 6 + math.prod(SIG) * 2
    data_offset = 4096 + n + 16
    if not os.path.exists(paths["blo"]):
        log(f"  writing {paths['blo']}")
        with open(paths["blo"] + ".part", "wb") as f:
            head = blo_header(nav[1], nav[0], SIG[0], data_offset, magic=0x0103)
            f.write(head + b"Blo Bit Depth: 16 bits\r\n")
            f.seek(data_offset)
            for row in range(nav[0]):
                records = np.zeros((nav[1], stride), np.uint8)
                records[:, :2] = (0xAA, 0x55)
                index = np.arange(row * nav[1], (row + 1) * nav[1], dtype="<u4")
                records[:, 2:6] = index.view(np.uint8).reshape(-1, 4)
                records[:, 6:] = block(nav, row).reshape(nav[1], -1).view(np.uint8)
                f.write(records.tobytes())
        os.replace(paths["blo"] + ".part", paths["blo"])
    rows_per_file = -(-nav[0] // 3)
    if not os.path.exists(paths["tvips"]):
        for i, first in enumerate(range(0, nav[0], rows_per_file)):
            path = paths["tvips"].replace("_000.tvips", f"_{i:03d}.tvips")
            log(f"  writing {path}")
            with open(path, "wb") as f:
                if i == 0:
                    f.write(series_header(SIG[1], SIG[0], 16, frame_header_bytes=128))
                for row in range(first, min(nav[0], first + rows_per_file)):
                    heads = frame_headers(nav[1], 128, first_counter=row * nav[1])
                    pixels = block(nav, row).reshape(nav[1], -1).view(np.uint8)
                    f.write(np.concatenate([heads, pixels], axis=1).tobytes())
    if not os.path.exists(paths["empad"]):
        rows, cols = nav[0], 2 * nav[1]  # float32 128 x 128 frames: bytes of the uint16 scan
        raw_name = os.path.basename(paths["empad"]).replace(".xml", ".raw")
        log(f"  writing {paths['empad']} and its raw files")
        with (
            open(os.path.join(folder, raw_name), "wb") as f,
            open(paths["empad raw f32"], "wb") as f32,
            open(paths["empad raw u16"], "wb") as u16,
        ):
            for row in range(rows):
                counts = block(nav, row).reshape(-1, 128, 128)[:cols]
                frames = np.zeros((cols, 130, 128), "<f4")
                frames[:, :128] = counts
                f.write(frames.tobytes())
                counts.astype("<f4").tofile(f32)
                counts.tofile(u16)
        with open(paths["empad"], "w") as f:
            f.write(
                f'<root><type>scan</type><raw_file filename="{raw_name}"/>'
                f'<scan_parameters mode="acquire"><scan_resolution_x>{cols}'
                f"</scan_resolution_x><scan_resolution_y>{rows}</scan_resolution_y>"
                "</scan_parameters></root>"
            )
    return paths


def write_mrc_dm(folder: str, nav: tuple[int, int], raw: str) -> dict[str, str]:
    """The raw scan as an MRC stack (by mrcfile) and as DM4 files (by the tests' writer)."""
    import mrcfile

    tag = f"{nav[0]}x{nav[1]}"
    paths = {
        "mrc": os.path.join(folder, f"scan_{tag}.mrc"),
        "dm4": os.path.join(folder, f"scan_{tag}.dm4"),
        "dm4 odd": os.path.join(folder, f"scan_{tag}_odd.dm4"),
    }
    data = np.memmap(raw, dtype=DTYPE, mode="r", shape=(*nav, *SIG))
    if not os.path.exists(paths["mrc"]):
        log(f"  writing {paths['mrc']}")
        with mrcfile.new_mmap(paths["mrc"] + ".part", (math.prod(nav), *SIG), mrc_mode=6) as m:
            m.set_image_stack()
            for row in range(nav[0]):
                m.data[row * nav[1] : (row + 1) * nav[1]] = data[row]
        os.replace(paths["mrc"] + ".part", paths["mrc"])
    for key, pad in (("dm4", 0), ("dm4 odd", 1)):
        if not os.path.exists(paths[key]):
            log(f"  writing {paths[key]}")
            write_dm(paths[key] + ".part", data, version=4, pad=pad)
            os.replace(paths[key] + ".part", paths[key])
    return paths


def mrcfile_dask(path: str, nav):
    """The frames of an MRC file as mrcfile maps them, in a dask array of one scan row per
    chunk."""
    import dask.array as da
    import mrcfile

    data = mrcfile.mmap(path, mode="r").data
    return da.from_array(data, chunks=(nav[1], *SIG), asarray=False)


def counts_block(nav: tuple[int, int], row: int) -> np.ndarray:
    """Scan row `row` as a counting detector records it: Poisson counts of mean 0.2 and,
    inside a disk of radius 40 pixels (the bright-field disk), of mean 15."""
    rng = np.random.default_rng([2027, row])
    y, x = np.ogrid[: SIG[0], : SIG[1]]
    disk = (y - SIG[0] / 2) ** 2 + (x - SIG[1] / 2) ** 2 <= 40**2
    return rng.poisson(np.where(disk, 15.0, 0.2), size=(nav[1], *SIG)).astype(DTYPE)


def frame_stream(nav: tuple[int, int], rows=block):
    """The scan's frames in order, as ``(first frame, block of frames)`` rows."""
    for row in range(nav[0]):
        yield row * nav[1], rows(nav, row)


def write_dectris_velox(folder: str, nav: tuple[int, int]) -> dict[str, str]:
    """A DECTRIS bitshuffle-LZ4 series and a Velox EMD of the scan (once)."""
    import h5py
    import hdf5plugin

    tag = f"{nav[0]}x{nav[1]}"
    n = math.prod(nav)
    master = os.path.join(folder, f"arina_{tag}_counts_master.h5")
    emd = os.path.join(folder, f"velox_{tag}.emd")
    per_file = 1000
    if not os.path.exists(master):
        log(f"  writing {master} and its data files")
        links = [f"arina_{tag}_counts_data_{k + 1:06d}.h5" for k in range(-(-n // per_file))]
        files = [h5py.File(os.path.join(folder, name), "w") for name in links]
        bslz4 = hdf5plugin.Bitshuffle(nelems=0, cname="lz4")
        for k, f in enumerate(files):
            count = min(per_file, n - k * per_file)
            d = f.create_dataset("entry/data/data", (count, *SIG), DTYPE,
                                 chunks=(CHUNK_FRAMES, *SIG), **bslz4)  # fmt: skip
            d.attrs["image_nr_low"], d.attrs["image_nr_high"] = (
                k * per_file + 1,
                k * per_file + count,
            )
        for first, frames in frame_stream(nav, counts_block):
            for k in range(first // per_file, (first + len(frames) - 1) // per_file + 1):
                lo, hi = max(first, k * per_file), min(first + len(frames), (k + 1) * per_file)
                files[k]["entry/data/data"][lo - k * per_file : hi - k * per_file] = frames[
                    lo - first : hi - first
                ]
        for f in files:
            f.close()
        with write_master(master + ".part", (n, *SIG), DTYPE, "bslz4", links):
            pass
        os.replace(master + ".part", master)
    if not os.path.exists(emd):
        log(f"  writing {emd}")
        with h5py.File(emd + ".part", "w") as f:
            f["Version"] = '{"version": "11", "format": "Velox"}'
            d = f.create_dataset("Data/Image/0123abcd/Data", (*SIG, n), DTYPE, chunks=(*SIG, 1))
            for first, frames in frame_stream(nav):
                d[:, :, first : first + len(frames)] = np.moveaxis(frames, 0, 2)
            text = frame_metadata(np.zeros((1, *SIG), DTYPE), scan=nav)
            column = np.zeros(60000, np.uint8)
            raw = np.frombuffer(json.dumps(text).encode(), np.uint8)
            column[: raw.size] = raw
            meta = f.create_dataset("Data/Image/0123abcd/Metadata", (60000, n), np.uint8,
                                    chunks=(60000, 1), compression="gzip")  # fmt: skip
            meta[:, 0] = column
        os.replace(emd + ".part", emd)
    return {"dectris": master, "velox": emd}


def through_h5py_and_dask(path: str, key: str, frames_last: bool = False):
    """The dataset `key` read by h5py (+ hdf5plugin) chunk by chunk through dask."""
    import dask.array as da
    import h5py
    import hdf5plugin  # noqa: F401

    f = h5py.File(path, "r")  # stays open while the dataset is used
    if key == "dectris":
        group = f["entry/data"]
        parts = [group[k] for k in sorted(group) if k.startswith("data_")]
        arr = da.concatenate([da.from_array(p, chunks=(CHUNK_FRAMES, *SIG)) for p in parts])
    else:
        arr = da.from_array(f[key], chunks=(*SIG, CHUNK_FRAMES)).transpose(2, 0, 1)
    return arr


def methods(paths: dict[str, str], nav) -> dict:
    return {
        "raw": lambda: ltdask.open_raw(paths["raw"], nav, SIG, DTYPE),
        "hdf5 chunked (mmap)": lambda: open_hdf5(paths["hdf5"], "data"),
        "hdf5 chunked, h5py": lambda: open_hdf5(paths["hdf5"], "data", mmap=False),
        "hdf5 gzip-1, h5py": lambda: open_hdf5(paths["gzip"], "data"),
        "zarr v3, raw chunks": lambda: open_zarr(paths["zarr"]),
        "mib raw 12-bit": lambda: ltdask.open_mib(paths["mib raw"], nav_shape=nav),
        "mib U16": lambda: ltdask.open_mib(paths["mib u16"], nav_shape=nav),
        "mrc": lambda: ltdask.open_mrc(paths["mrc"], nav_shape=nav),
        "mrc, mrcfile mmap + dask": lambda: mrcfile_dask(paths["mrc"], nav),
        "dm4": lambda: ltdask.open_dm(paths["dm4"]),
        "dm4, odd offset": lambda: ltdask.open_dm(paths["dm4 odd"]),
        "dectris bslz4": lambda: ltdask.open_dectris(paths["dectris"], nav_shape=nav),
        "dectris bslz4, h5py+dask": lambda: ltdask.from_array(
            through_h5py_and_dask(paths["dectris"], "dectris").reshape(*nav, *SIG)
        ),
        "velox emd": lambda: ltdask.open_emd(paths["velox"]),
        "velox emd, h5py+dask": lambda: ltdask.from_array(
            through_h5py_and_dask(paths["velox"], "Data/Image/0123abcd/Data").reshape(*nav, *SIG)
        ),
        "blo u16": lambda: ltdask.open_blo(paths["blo"]),
        "tvips u16, 3 files": lambda: ltdask.open_tvips(paths["tvips"]),
        "empad f32": lambda: ltdask.open_empad(paths["empad"]),
        "raw f32 (empad frames)": lambda: ltdask.open_raw(
            paths["empad raw f32"], (nav[0], 2 * nav[1]), (128, 128), "<f4"
        ),
        "raw u16 (empad count)": lambda: ltdask.open_raw(
            paths["empad raw u16"], (nav[0], 2 * nav[1]), (128, 128), "<u2"
        ),
    }


#: format -> (raw file of the same frames and dtype, raw uint16 file of as many frames)
SAME_FRAMES = {
    "blo u16": ("raw", "raw"),
    "tvips u16, 3 files": ("raw", "raw"),
    "empad f32": ("raw f32 (empad frames)", "raw u16 (empad count)"),
}


def print_same_frames(times: dict[str, list[float]], nbytes: int) -> None:
    """GB/s of each format's decoded frames, and its ratio to raw files of the same frames."""
    rows = [(name, base) for name, base in SAME_FRAMES.items() if name in times]
    if not rows:
        return
    print(f"\n{'format':<24} {'GB/s':>7} {'vs raw same dtype':>18} {'vs raw u16 (frames/s)':>22}")
    for name, (same, u16) in rows:
        median = statistics.median(times[name])
        ratios = [
            f"{statistics.median(times[b]) / median:.2f}" if b in times else "-"
            for b in (same, u16)
        ]
        print(f"{name:<24} {nbytes / median / 1e9:7.2f} {ratios[0]:>18} {ratios[1]:>22}")


def run(open_ds) -> float:
    t0 = time.perf_counter()
    ds = open_ds()
    if isinstance(ds, ltdask.DataSet):
        ltdask.udf.SumUDF().compute(ds)
    else:  # a dask array read by another library: the same sum, by dask
        ds.sum(axis=0, dtype="float32").compute()
    return time.perf_counter() - t0


def selected(names: list[str], only) -> list[str]:
    """The methods `only` names: each entry a method's name, or else a part of names."""
    if not only:
        return names
    return [n for n in names if any(o == n or (o not in names and o in n) for o in only)]


def dataset_files(ds) -> list[str]:
    """The files an ltdask dataset reads (the frames' files; else its path, if a file)."""
    fileset = getattr(ds, "fileset", None)
    if fileset is not None:
        return [f.path for f in fileset.files]
    path = getattr(ds, "path", None)
    return [path] if isinstance(path, str) and os.path.isfile(path) else []


def recache(todo: dict) -> None:
    """Every file the methods read dropped from the page cache and read back, so that all
    are cached alike: as a file just read is (in 2 MiB folios where the kernel and the
    filesystem have them), whatever earlier runs did to them -- a file first faulted in
    through a map stays in 4 KiB pages, and faulting those in halves a run's speed."""
    files: set[str] = set()
    for open_ds in todo.values():
        ds = open_ds()
        if isinstance(ds, ltdask.DataSet):
            files.update(dataset_files(ds))
    total = sum(os.path.getsize(f) for f in files)
    if total > 0.6 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"):
        log(f"  {total / 2**30:.1f} GiB of files: more than the page cache keeps; use --only")
    for path in sorted(files):
        recache_file(path)


def interleaved(todo: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds of each method's runs: one warm-up each, then `repeats` rounds of all of them
    in turn (the machine's drift hits every method alike)."""
    times: dict[str, list[float]] = {k: [] for k in todo}
    recache(todo)
    with dask.config.set(scheduler="threads", num_workers=THREADS):
        for name, open_ds in todo.items():
            log(f"  warm-up {name}")
            run(open_ds)
        for r in range(repeats):
            for name, open_ds in todo.items():
                times[name].append(run(open_ds))
            log(f"  round {r + 1}/{repeats} done")
    return times


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ltdask-bench")
    parser.add_argument("--nav", type=int, default=64, help="scan is NAV x NAV frames")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="nav 16x16, for a quick check")
    parser.add_argument("--only", nargs="*", help="methods: names or parts of names (default: all)")
    parser.add_argument("--detectors", action="store_true", help="K2IS, FRMS6, DE SEQ instead")
    parser.add_argument("--gib", type=float, default=2.0, help="--detectors: GiB of frames")
    args = parser.parse_args(argv)
    if args.detectors:
        return main_detectors(args)
    n = 16 if args.small else args.nav
    nav = (n, n)
    names = selected(list(methods({}, nav)), args.only)
    paths = write_all(args.dir, nav, names)
    todo = {k: v for k, v in methods(paths, nav).items() if k in names}
    nbytes = math.prod(nav) * math.prod(SIG) * DTYPE.itemsize
    ds = ltdask.open_raw(paths["raw"], nav, SIG, DTYPE)
    parts = len(ds.get_partitions())
    log(f"  scan {nav} x {SIG} {DTYPE} ({nbytes / 2**20:.0f} MiB), {parts} partitions")
    times = interleaved(todo, args.repeats)
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
    print_same_frames(times, nbytes)


def main_detectors(args) -> None:
    """K2IS, FRMS6 and DE SEQ (``benchmarks/formats_a.py``), each next to a raw uint16 file of
    the same frames: GB/s of decoded uint16 frames, ratio to that raw file."""
    from formats_a import entries, partner

    todo = entries(os.path.join(args.dir, "detectors"), args.gib, args.only)
    nbytes = {name: open_ds().nbytes for name, open_ds in todo.items()}
    times = interleaved(todo, args.repeats)
    print(f"SumUDF, {args.gib:g} GiB of frames each, threads x{THREADS}, median of {args.repeats}")
    print(f"{'format':<24} {'median s':>9} {'GB/s':>7} {'vs raw':>7}")
    for name, ts in times.items():
        median = statistics.median(ts)
        base = times.get(partner(name))
        ratio = f"{statistics.median(base) / median:7.2f}" if base else "      -"
        print(f"{name:<24} {median:9.3f} {nbytes[name] / median / 1e9:7.2f} {ratio}")


if __name__ == "__main__":
    main()
