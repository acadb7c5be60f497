"""Merlin live partition tasks: CPU microseconds per frame, whole-frame decode vs tiles.

``python benchmarks/live_merlin_stages.py [--streams merlin-raw1 ...] [--rounds N]``. On the
``.mib`` files of ``bench_live.py`` (random counts), the records as a Merlin acquisition's
store holds them (each frame's header and pixels, one partition of the acquisition's
default size to a buffer), a UDF run of Sum + CoM + one ring on the synchronous scheduler
(one thread; the run's graph and merges included), as CPU time of this thread:

* **whole**: each partition's records decoded into an array of frames
  (`MibFrames.decode`), then read by the UDFs (an in-memory dataset over those blocks) --
  the acquisition's tasks before tiles;
* **tiles**: the records read tile by tile by the ``.mib`` reader's file set and decoder
  (`ltdask.io.block_files.BlockFileDataSet`, as `ltdask.acquire.blocks` hands them to a run);
* **decode**: `MibFrames.decode` of the partitions alone; **udfs**: the UDFs alone on
  decoded frames in memory.

The variants run interleaved, `rounds` times; the table gives each one's median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_live import _udfs, write_merlin  # noqa: E402


def _records(hdr: str, frames: int):
    from ltdask.acquire.mpx import MibFrames

    with open(hdr.replace(".hdr", ".mib"), "rb") as f:
        data = np.frombuffer(f.read(), np.uint8)
    records = data.reshape(frames, -1)
    return records, MibFrames(records[0].tobytes(), hdr)


def _variants(records, mib, nav, fpp: int):
    """name -> a function that runs it once."""
    import dask.array as da

    import ltdask
    from ltdask.io.block_files import BlockFileDataSet, partition_files

    sig = mib.sig_shape
    rows = fpp // nav[1]
    grid = ((rows,) * (nav[0] // rows), (nav[1],))
    stride = records.shape[1]
    payloads = da.from_array(records.reshape(*nav, 1, stride), chunks=(rows, nav[1], 1, stride))

    def decode_block(block):
        return mib.decode(block.reshape(-1, stride)).reshape((*block.shape[:2], *sig))

    decoded = payloads.map_blocks(
        decode_block, chunks=(*grid, (sig[0],), (sig[1],)), dtype=mib.dtype
    )
    frames = mib.decode(records).reshape((*nav, *sig))
    starts = np.arange(0, nav[0] * nav[1], fpp)
    fileset, decoder = mib.fileset(partition_files(starts, starts + fpp))
    udfs = _udfs(sig)

    whole_ds = ltdask.from_array(decoded)
    tiles_ds = BlockFileDataSet(fileset, decoder, nav, grid, payloads)
    frames_ds = ltdask.from_array(da.from_array(frames, chunks=(rows, nav[1], *sig)))

    def whole():
        ltdask.compute(whole_ds, udfs, scheduler="sync")

    def tiles():
        ltdask.compute(tiles_ds, udfs, scheduler="sync")

    def decode():
        for a in range(0, len(records), fpp):
            mib.decode(records[a : a + fpp])

    def udfs_only():
        ltdask.compute(frames_ds, udfs, scheduler="sync")

    return {"whole": whole, "tiles": tiles, "decode": decode, "udfs": udfs_only}


def measure(name: str, folder: str, rounds: int) -> dict:
    from ltdask.acquire.dataset import MAX_PARTITION_FRAMES, PARTITION_BYTES

    hdr, frames, sig = write_merlin(folder, name)
    records, mib = _records(hdr, frames)
    decoded_bytes = int(np.prod(sig)) * mib.dtype.itemsize
    fpp = max(1, min(MAX_PARTITION_FRAMES, PARTITION_BYTES // decoded_bytes))
    # at least 16 partitions (the file's frames repeated)
    copies = max(1, -(-16 * fpp // frames))
    records = np.tile(records, (copies, 1))
    frames *= copies
    width = min(64, fpp)  # (partitions of whole scan rows)
    fpp -= fpp % width
    nav = (frames // width, width)
    runs = _variants(records[: nav[0] * nav[1]], mib, nav, fpp)
    frames = nav[0] * nav[1]
    for run in runs.values():  # (compiled, pages faulted in)
        run()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            t0 = time.thread_time()
            run()
            times[key].append((time.thread_time() - t0) / frames * 1e6)
    row = {"stream": name, "frames": frames, "per partition": fpp}
    row.update({k: statistics.median(v) for k, v in times.items()})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--streams", nargs="+", default=["merlin-raw1", "merlin-raw12", "merlin-raw12-quad"]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--folder", default=os.path.join(tempfile.gettempdir(), "ltdask-bench"))
    args = parser.parse_args()
    print(
        "| stream | frames/partition | whole us/frame | tiles us/frame | tiles/whole "
        "| decode alone | udfs alone |"
    )
    for name in args.streams:
        r = measure(name, args.folder, args.rounds)
        print(
            f"| {name} | {r['per partition']} | {r['whole']:.1f} | {r['tiles']:.1f} | "
            f"{r['tiles'] / r['whole']:.2f} | {r['decode']:.1f} | {r['udfs']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
