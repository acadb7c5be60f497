"""DECTRIS file chunks decoded: ltdask's numba kernels against the decoders they replaced.

``python benchmarks/bench_chunk_codecs.py [--frames N] [--repeats R]``. The frames are
``live_dectris.py``'s (uint16 192x192 diffraction-like, a bright disk on 0.05 counts per
pixel), written by hdf5plugin's filters into chunks of 1 and of 16 frames (an in-memory
HDF5 file; the stored chunks are taken out with ``read_direct_chunk``). Each chunk is then
decoded, single-threaded, by:

* bitshuffle-LZ4 (filter 32008): **ltdask** (`codecs.decode_bitshuffle`, the numba kernels
  the DECTRIS stream decodes with); **bitshuffle C** (what the reader did before: the
  blocks checked to lie inside the chunk, then ``bshuf_decompress_lz4`` of the
  `bitshuffle` package through ctypes, on one OpenMP thread); **h5py** (``dset[a:b]``,
  hdf5plugin's filter and HDF5's own overhead);
* LZ4 (filter 32004): **ltdask** (`codecs.decode_lz4`); **lz4 library** (what the reader
  did before: a Python loop over the blocks, ``lz4.block.decompress`` each); **h5py**.

Every method's output is checked against the frames first. Times are the CPU time of the
thread (``time.thread_time``, the best of `repeats` passes over all chunks, the methods
interleaved; other programs on the machine change it less than wall time), in
microseconds per chunk and per frame.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_dectris import diffraction_frames  # noqa: E402


def stored_chunks(frames: np.ndarray, chunk_frames: int, filter_kwargs: dict):
    """The h5py file (kept open), its dataset and the stored bytes of each chunk."""
    import h5py

    f = h5py.File(io.BytesIO(), "w")
    dset = f.create_dataset(
        "data", data=frames, chunks=(chunk_frames, *frames.shape[1:]), **filter_kwargs
    )
    raws = [
        np.frombuffer(dset.id.read_direct_chunk((k, 0, 0))[1], np.uint8)
        for k in range(0, len(frames), chunk_frames)
    ]
    return f, dset, raws


def bitshuffle_c():
    """The reader's former bitshuffle-LZ4 path: blocks checked, then bitshuffle's C."""
    from bitshuffle import ext

    from ltdask.io.formats.dectris import codecs

    fn = ctypes.CDLL(ext.__file__).bshuf_decompress_lz4
    fn.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_size_t] * 3
    fn.restype = ctypes.c_int64
    codecs._one_openmp_thread()

    def decode(raw, nelems, dtype, out):
        block = codecs.chunk_header(raw, nelems * dtype.itemsize, "bench")
        items = block // dtype.itemsize
        if codecs.bitshuffle_blocks_fit(raw, nelems, dtype.itemsize, items) >= 0:
            raise ValueError("block past the end")
        if fn(raw[12:].ctypes.data, out.ctypes.data, nelems, dtype.itemsize, items) < 0:
            raise ValueError("bitshuffle error")
        return out

    return decode


def lz4_library(raw, nelems, dtype, out):
    """The reader's former LZ4 path: the blocks in Python, each by the lz4 library."""
    import lz4.block

    expected = nelems * dtype.itemsize
    block = int.from_bytes(raw[8:12].tobytes(), "big")
    target = out.reshape(-1).view(np.uint8)
    view = memoryview(raw.data)
    pos, done = 12, 0
    while done < expected:
        want = min(block, expected - done)
        length = int.from_bytes(raw[pos : pos + 4].tobytes(), "big")
        pos += 4
        if length == want:
            target[done : done + want] = raw[pos : pos + length]
        else:
            data = lz4.block.decompress(view[pos : pos + length], uncompressed_size=want)
            target[done : done + want] = np.frombuffer(data, np.uint8)
        pos += length
        done += want
    return out


def measure(methods: dict, raws, repeats: int) -> dict:
    """Best thread CPU seconds of one pass of each method over every chunk, the methods
    interleaved in each of `repeats` rounds (so that a change in the machine's load
    falls on all of them)."""
    best = dict.fromkeys(methods, float("inf"))
    for _ in range(repeats):
        for name, decode in methods.items():
            t0 = time.thread_time()
            for k, raw in enumerate(raws):
                decode(k, raw)
            best[name] = min(best[name], time.thread_time() - t0)
    return best


def methods_for(filter_name: str, dset, chunk_frames: int, dtype, old_bitshuffle) -> dict:
    """``{name: decode(chunk index, stored chunk)}`` of the filter's methods."""
    from ltdask.io.formats.dectris import codecs

    nelems = chunk_frames * int(np.prod(dset.shape[1:]))
    out = np.empty((chunk_frames, *dset.shape[1:]), dtype)
    if filter_name == "LZ4":
        methods = {
            "ltdask": lambda k, raw: codecs.decode_lz4(raw, nelems, dtype, "b", out),
            "lz4 library": lambda k, raw: lz4_library(raw, nelems, dtype, out),
        }
    else:
        methods = {
            "ltdask": lambda k, raw: codecs.decode_bitshuffle(raw, nelems, dtype, False, "b", out),
            "bitshuffle C": lambda k, raw: old_bitshuffle(raw, nelems, dtype, out),
        }
    methods["h5py"] = lambda k, raw: dset[k * chunk_frames : (k + 1) * chunk_frames]
    return methods


def run(frames: int = 256, repeats: int = 15) -> list[dict]:
    import hdf5plugin

    data = diffraction_frames(frames)
    rows = []
    old_bitshuffle = bitshuffle_c()
    for filter_name, kwargs in [
        ("bitshuffle-LZ4", hdf5plugin.Bitshuffle(cname="lz4")),
        ("LZ4", hdf5plugin.LZ4()),
    ]:
        for chunk_frames in (1, 16):
            f, dset, raws = stored_chunks(data, chunk_frames, kwargs)
            methods = methods_for(filter_name, dset, chunk_frames, data.dtype, old_bitshuffle)
            for decode in methods.values():
                for k, raw in enumerate(raws):  # (checked, and compiled/warmed up)
                    got = decode(k, raw)
                    want = data[k * chunk_frames : (k + 1) * chunk_frames]
                    np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)
            for name, seconds in measure(methods, raws, repeats).items():
                rows.append(
                    {
                        "filter": filter_name,
                        "chunk frames": chunk_frames,
                        "method": name,
                        "us per chunk": seconds / len(raws) * 1e6,
                        "us per frame": seconds / len(raws) / chunk_frames * 1e6,
                        "stored bytes per frame": sum(r.size for r in raws) / frames,
                    }
                )
            f.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    rows = run(options.frames, options.repeats)
    print(f"{'filter':16} {'chunk':>5} {'method':14} {'us/chunk':>9} {'us/frame':>9} {'ratio':>6}")
    for row in rows:
        ours = next(
            r
            for r in rows
            if (r["filter"], r["chunk frames"]) == (row["filter"], row["chunk frames"])
            and r["method"] == "ltdask"
        )
        print(
            f"{row['filter']:16} {row['chunk frames']:>5} {row['method']:14} "
            f"{row['us per chunk']:9.1f} {row['us per frame']:9.1f} "
            f"{row['us per frame'] / ours['us per frame']:6.2f}"
        )
    print("(ratio: time / ltdask's; stored bytes per frame: ", end="")
    print(
        ", ".join(
            f"{r['filter']} {r['stored bytes per frame']:.0f}"
            for r in rows
            if r["method"] == "ltdask" and r["chunk frames"] == 1
        )
        + ")"
    )


if __name__ == "__main__":
    main()
