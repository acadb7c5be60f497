"""Raw scan files written byte by byte, and numpy references read back from the bytes.

Nothing here calls ltdask: the references are what ltdask must reproduce.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: short test ids for the stored dtypes the raw read path must support
DTYPES = {
    "u8": "u1",
    "u16": "<u2",
    "u32": "<u4",
    "i16": "<i2",
    "f32": "<f4",
    "f64": "<f8",
    "c64": "<c8",
    "bool": "?",
    "u16-bigendian": ">u2",
    "f32-bigendian": ">f4",
    "c64-bigendian": ">c8",
}


def native(dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder("=")


def make_frames(rng: np.random.Generator, n: int, sig_shape: Sequence[int], dtype) -> np.ndarray:
    """`n` frames of random values that `dtype` holds exactly, in `dtype`'s byte order."""
    dt = np.dtype(dtype)
    shape = (n, *sig_shape)
    if dt.kind == "b":
        values = rng.integers(0, 2, size=shape).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(
            max(info.min, -30000), min(info.max, 60000), size=shape, endpoint=True
        )
    elif dt.kind == "f":
        values = rng.standard_normal(shape) * 1000
    else:
        values = rng.standard_normal(shape) * 1000 + 1j * rng.standard_normal(shape) * 1000
    return values.astype(dt)


def split_counts(total: int, files: int) -> list[int]:
    """Frame counts for `files` files holding `total` frames, deliberately uneven."""
    if files == 1:
        return [total]
    if files == 3 and total >= 3:
        first = max(1, total // 3)
        return [first, 1, total - first - 1]
    base, extra = divmod(total, files)
    return [base + (1 if i < extra else 0) for i in range(files)]


def write_raw(
    path,
    frames: np.ndarray,
    file_header: int = 0,
    frame_header: int = 0,
    frame_footer: int = 0,
    last_footer: bool = True,
    fill: int = 0xA5,
) -> None:
    """Write `frames` (already in the stored dtype) with filler bytes as headers/footers."""
    head = bytes([fill]) * file_header
    fh = bytes([(fill + 1) % 256]) * frame_header
    ff = bytes([(fill + 2) % 256]) * frame_footer
    with open(path, "wb") as f:
        f.write(head)
        for i, frame in enumerate(frames):
            f.write(fh)
            f.write(frame.tobytes())
            if last_footer or i < len(frames) - 1:
                f.write(ff)


def write_scan(
    tmp_path,
    stream: np.ndarray,
    files: int = 1,
    name: str = "scan",
    **layout,
) -> list[str]:
    """`stream` split over `files` files in `tmp_path`; their paths in stream order."""
    paths = []
    start = 0
    for i, n in enumerate(split_counts(len(stream), files)):
        path = str(tmp_path / f"{name}-{i}.raw")
        write_raw(path, stream[start : start + n], **layout)
        paths.append(path)
        start += n
    return paths


def read_stream(
    paths: Sequence[str],
    sig_shape: Sequence[int],
    dtype,
    file_header: int = 0,
    frame_header: int = 0,
    frame_footer: int = 0,
) -> np.ndarray:
    """All frames of the files, cut from their bytes with numpy (native byte order)."""
    dt = np.dtype(dtype)
    frame_bytes = math.prod(sig_shape) * dt.itemsize
    stride = frame_header + frame_bytes + frame_footer
    frames = []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)[file_header:]
        n = (raw.size + frame_footer) // stride
        for i in range(n):
            start = i * stride + frame_header
            pixels = raw[start : start + frame_bytes].view(dt)
            frames.append(pixels.reshape(sig_shape))
    return np.stack(frames).astype(native(dt))


def expected_scan(stream: np.ndarray, nav_shape: Sequence[int], sync_offset: int = 0):
    """The scan of `nav_shape`: position ``p`` holds stream frame ``p + sync_offset``, zeros
    where that frame does not exist. Returns ``(data, valid)``."""
    n = math.prod(nav_shape)
    out = np.zeros((n, *stream.shape[1:]), dtype=native(stream.dtype))
    valid = np.zeros(n, dtype=bool)
    for p in range(n):
        frame = p + sync_offset
        if 0 <= frame < len(stream):
            out[p] = stream[frame]
            valid[p] = True
    return out.reshape((*nav_shape, *stream.shape[1:])), valid.reshape(nav_shape)


def converted_dtype(dtype) -> np.dtype:
    """A different dtype to read `dtype` as: float32 for real data, complex128 for complex."""
    return np.dtype("complex128") if np.dtype(dtype).kind == "c" else np.dtype("float32")
