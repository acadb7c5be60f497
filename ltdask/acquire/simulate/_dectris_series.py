"""What the DECTRIS simulator streams: a series' configuration and each frame's message
parts, from an array, an ltdask dataset, a scan's file, or a zmq dump (LiberTEM-live's
recording of a stream: records of an int64 little-endian length and a message's bytes)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

import numpy as np

from ltdask.acquire import bslz4
from ltdask.acquire.store import AcquisitionError

_CODES = {"bslz4": bslz4.BSLZ4, "lz4": bslz4.LZ4, "none": bslz4.RAW}
_ENCODINGS = {bslz4.RAW: "<", bslz4.LZ4: "lz4<"}


class _Frames:
    """The frames to send, each as its blob, data header and data config parts."""

    def __init__(self, config: dict, images: list[tuple[bytes, bytes, bytes]]) -> None:
        self.config = config
        self.images = images  # per frame: (dimage_d part, blob, dconfig part)
        self.hashes = [hashlib.md5(blob).hexdigest() for _, blob, _ in images]


def _encoded(frames: np.ndarray, compression: str) -> _Frames:
    """`frames` ``(n, y, x)`` as blobs of `compression`."""
    if compression not in _CODES:
        raise AcquisitionError(f"compression={compression!r}; expected one of {', '.join(_CODES)}")
    if frames.dtype not in (np.uint8, np.uint16, np.uint32) or frames.ndim != 3:
        raise AcquisitionError(
            f"frames of {frames.dtype} and shape {frames.shape}: a DECTRIS stream sends 2D "
            "uint8, uint16 or uint32 frames"
        )
    from ltdask.acquire.simulate.encode import encode_frame

    code = _CODES[compression]
    n, y, x = frames.shape
    encoding = _ENCODINGS.get(code, f"bs{frames.dtype.itemsize * 8}-lz4<")
    config = {
        "trigger_mode": "exte",
        "ntrigger": n,
        "nimages": 1,
        "x_pixels_in_detector": x,
        "y_pixels_in_detector": y,
        "bit_depth_image": frames.dtype.itemsize * 8,
        "compression": compression,
        "count_time": 0.001,
        "frame_time": 0.001,
    }
    images = []
    for frame in frames:
        blob = encode_frame(frame, code)
        desc: dict[str, Any] = {"htype": "dimage_d-1.0", "shape": [x, y]}
        desc.update(type=frames.dtype.name, encoding=encoding, size=len(blob))
        images.append((json.dumps(desc).encode(), blob, _DCONFIG))
    return _Frames(config, images)


_DCONFIG = json.dumps(
    {"htype": "dconfig-1.0", "start_time": 0, "stop_time": 0, "real_time": 0}
).encode()


def read_dump(path: str) -> _Frames:
    """The series of a zmq dump file (LiberTEM-live's: [int64 LE length][message] records)
    from its first ``dheader-1.0``."""
    with open(path, "rb") as f:
        data = f.read()
    parts, at = [], 0
    while at < len(data):
        if len(data) - at < 8:
            raise AcquisitionError(f"{path}: a record's length cut off at byte {at}")
        length = int.from_bytes(data[at : at + 8], "little", signed=True)
        if length < 0 or at + 8 + length > len(data):
            raise AcquisitionError(
                f"{path}: a record of {length} bytes at byte {at} runs past the file's end "
                f"({len(data)} bytes): not a zmq dump"
            )
        parts.append(data[at + 8 : at + 8 + length])
        at += 8 + length
    start = next((i for i, p in enumerate(parts) if _htype(p) == "dheader-1.0"), None)
    if start is None or start + 1 >= len(parts):
        raise AcquisitionError(f"{path}: no series header (dheader-1.0) in the zmq dump")
    config = json.loads(parts[start + 1])
    images, i = [], start + 2
    while i < len(parts):
        htype = _htype(parts[i])
        if htype == "dimage-1.0" and i + 3 < len(parts):
            images.append((parts[i + 1], parts[i + 2], parts[i + 3]))
            i += 4
        elif htype.endswith("series_end-1.0"):
            break
        else:
            i += 1
    return _Frames(config, images)


def _htype(part: bytes) -> str:
    if not part.startswith(b"{"):
        return ""
    try:
        head = json.loads(part)
    except ValueError:
        return ""
    return str(head.get("htype", "")) if isinstance(head, dict) else ""


def is_dump(path: str) -> bool:
    """Whether `path` looks like a zmq dump: its first records' lengths fit the file and
    one of them is a JSON message with an ``htype``."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            at = 0
            for _ in range(16):
                head = f.read(8)
                length = int.from_bytes(head, "little", signed=True) if len(head) == 8 else -1
                if length < 0 or at + 8 + length > size:
                    return False
                if b'"htype"' in f.read(min(length, 256)):
                    return True
                at += 8 + length
                f.seek(at)
    except OSError:
        return False
    return False


def load(source, compression: str = "bslz4", limit: int | None = None) -> _Frames:
    """What to stream from `source`: a zmq dump's path, a scan's path (``ltdask.open``), an
    ltdask dataset or an array of frames (``(..., y, x)``); at most `limit` frames read."""
    import ltdask

    if isinstance(source, _Frames):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if is_dump(path):
            return read_dump(path)
        source = ltdask.open(path)
    if isinstance(source, np.ndarray):
        frames = source.reshape((-1, *source.shape[-2:]))
        return _encoded(frames[:limit], compression)
    sig = tuple(source.sig_shape)
    count = math.prod(source.nav_shape) if limit is None else min(limit, source.num_frames)
    flat = source.to_dask().reshape((-1, *sig))
    chunks = []
    for start in range(0, count, 256):
        chunks.append(_encoded(np.asarray(flat[start : min(count, start + 256)]), compression))
    config = dict(chunks[0].config, ntrigger=count)
    return _Frames(config, [image for c in chunks for image in c.images])
