"""DECTRIS live path, stage by stage: CPU microseconds per frame, single-threaded.

``python benchmarks/live_dectris_stages.py [--frames N]``. On the frames of
``live_dectris.py`` (bitshuffle-LZ4 uint16 192x192 diffraction-like, ~12x compression),
each stage of ``ltdask.acquire.dectris`` alone, as CPU time of the thread that runs it
(the best of `repeats`; other programs on the machine change it much less than wall time):

* **receive**: `DectrisSource.receive` on prebuilt four-part messages from a stand-in
  socket (no zmq: the Python side of taking an image, parsing its JSON parts, copying its
  blob into a batch), into a sink that keeps nothing;
* **put**: `FrameStore.put` of those batches, into buffers whose pages are new (a receiver
  far ahead of the compute) and into buffers used before (one that keeps up);
* **decode**: `bslz4.decode_slots` of one partition of slots;
* **udfs**: Sum, CoM and one ring (``ApplyMasksUDF``), each and together, on 1024 decoded
  frames through ``ltdask.compute`` on the synchronous scheduler (the run's own cost, its
  graph and merges, included).

The zmq socket's own cost (its I/O thread) is not here: ``live_dectris.py``'s ceiling
measures the stream as a plain PULL client takes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_dectris import SIG, _udfs, diffraction_frames  # noqa: E402


class _Socket:
    """Hands out prebuilt multipart messages as a PULL socket's recv_multipart would."""

    def __init__(self, messages: list[list[bytes]]) -> None:
        self._messages = iter(messages)

    def recv_multipart(self, flags: int = 0, copy: bool = True) -> list[bytes]:
        return list(next(self._messages))

    def poll(self, timeout: int = 0, flags: int = 0) -> int:
        return 1


class _Nowhere:
    cancelled = False

    def put(self, first, payloads, used=None) -> None:
        pass


def messages(frames: int, blobs: list[bytes]) -> list[list[bytes]]:
    """A series' stream as the simulator sends it: header, configuration, images, end."""
    config = {"x_pixels_in_detector": SIG[1], "y_pixels_in_detector": SIG[0]}
    config.update(bit_depth_image=16, trigger_mode="exte", ntrigger=frames, nimages=1)
    out = [
        [json.dumps({"htype": "dheader-1.0", "series": 1, "header_detail": "basic"}).encode()],
        [json.dumps(config).encode()],
    ]
    dconfig = json.dumps({"htype": "dconfig-1.0", "start_time": 0, "stop_time": 0}).encode()
    for i in range(frames):
        blob = blobs[i % len(blobs)]
        desc = {"htype": "dimage_d-1.0", "shape": [SIG[1], SIG[0]], "type": "uint16"}
        desc.update(encoding="bs16-lz4<", size=len(blob))
        head = {"htype": "dimage-1.0", "series": 1, "frame": i}
        head["hash"] = hashlib.md5(blob).hexdigest()
        out.append([json.dumps(head).encode(), json.dumps(desc).encode(), blob, dconfig])
    out.append([json.dumps({"htype": "dseries_end-1.0", "series": 1}).encode()])
    return out


def _best(function, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        function()
        best = min(best, time.thread_time() - t0)
    return best


def run(frames: int = 4096, repeats: int = 3, partition: int = 256) -> dict:
    """Microseconds of CPU per frame of each stage."""
    import dask

    import ltdask
    from ltdask.acquire import bslz4
    from ltdask.acquire.dectris import DectrisSource
    from ltdask.acquire.simulate.encode import encode_frame
    from ltdask.acquire.store import FrameStore
    from ltdask.udf import CoMUDF, SumUDF

    decoded = diffraction_frames(partition)
    blobs = [encode_frame(frame, bslz4.BSLZ4) for frame in decoded]
    stream = messages(frames, blobs)
    result: dict = {"frames": frames, "blob_bytes": float(np.mean([len(b) for b in blobs]))}

    def source() -> DectrisSource:
        src = DectrisSource()
        src._socket = _Socket(stream)
        src._read_header(time.monotonic() + 10, 10)
        return src

    result["receive"] = _best(lambda: source().receive(_Nowhere()), repeats) / frames * 1e6

    batches: list = []

    class _Keep(_Nowhere):
        def put(self, first, payloads, used=None) -> None:
            batches.append((first, payloads.copy(), None if used is None else used.copy()))

    src = source()
    src.receive(_Keep())
    slot = src._slot

    def put(store: FrameStore) -> None:
        for first, payloads, used in batches:
            store.put(first, payloads, used)

    def store() -> FrameStore:
        starts = list(range(0, frames, partition))
        return FrameStore(starts, frames, (slot,), np.uint8, memory_limit=2**40)

    result["put_new_pages"] = _best(lambda: put(store()), repeats) / frames * 1e6
    used_before = store()
    put(used_before)
    buffers = dict(used_before._buffers)

    def put_again() -> None:
        again = store()
        again._buffers.update(buffers)  # (what `FrameStore.recycle` gives a store)
        put(again)

    result["put_used_pages"] = _best(put_again, repeats) / frames * 1e6
    slots = buffers[0]
    out = bslz4.decode_slots(slots, SIG, np.uint16)
    assert (out == decoded).all(), "decoded frames differ from the encoded ones"
    seconds = _best(lambda: bslz4.decode_slots(slots, SIG, np.uint16), repeats)
    result["decode"] = seconds / len(slots) * 1e6
    # (1024 frames: a run's own cost, its graph and merge, spread as over a scan's)
    tiled = np.concatenate([out] * max(1, 1024 // partition))
    data = ltdask.from_array(tiled.reshape(-1, 64, *SIG))
    cases = {"sum": [SumUDF()], "com": [CoMUDF()], "ring": [_udfs()[2]], "udfs": _udfs()}
    with dask.config.set(scheduler="synchronous"):
        for name, udfs in cases.items():
            ltdask.compute(data, udfs)
            seconds = _best(lambda udfs=udfs: ltdask.compute(data, udfs), repeats)
            result[name] = seconds / len(tiled) * 1e6
    return result


def report(result: dict) -> str:
    names = {
        "receive": "receive (Python: parts, JSON, blob copy)",
        "put_new_pages": "store put, new pages",
        "put_used_pages": "store put, pages used before",
        "decode": "decode bitshuffle-LZ4",
        "sum": "SumUDF",
        "com": "CoMUDF",
        "ring": "ApplyMasksUDF (one ring)",
        "udfs": "Sum + CoM + ring in one run",
    }
    lines = [
        f"DECTRIS stages, CPU us/frame, one thread ({result['frames']} frames, "
        f"blobs of {result['blob_bytes']:.0f} B):"
    ]
    lines += [f"  {text:42s} {result[key]:7.1f}" for key, text in names.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out = run(args.frames, args.repeats)
    print(report(out))
    print(json.dumps(out))
