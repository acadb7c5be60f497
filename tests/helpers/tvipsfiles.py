"""A test-side TVIPS series writer, from the published description (numpy only).

``NAME_000.tvips`` starts with the 256-byte series header (13 little-endian int32: header
size 256, version, width, height, bits per pixel, x/y offset, x/y binning, pixel size, high
tension, magnification, frame header bytes; the rest filler text). Every file then holds
frame records: a frame header (version 1: 12 bytes; version 2: as the series header says)
and the pixels. A version 2 frame header carries a counter (u4 at 0), Unix time and
milliseconds (u4 at 4 and 8), the mode (u4 at 24), the rotator index (u4 at 48) and the
scan position x, y (f4 at 68 and 72).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def series_header(
    width: int,
    height: int,
    bits: int = 16,
    version: int = 2,
    frame_header_bytes: int = 128,
    pixel_size: int = 7,
    high_tension: int = 300,
) -> bytes:
    values = np.zeros(13, "<i4")
    values[:] = (
        256,
        version,
        width,
        height,
        bits,
        0,
        0,
        1,
        1,
        pixel_size,
        high_tension,
        60000,
        frame_header_bytes,
    )
    filler = b"TVIPS " * 34
    return (values.tobytes() + filler)[:256]


def frame_headers(
    n: int,
    nbytes: int,
    positions: np.ndarray | None = None,
    rotator: np.ndarray | None = None,
    mode: int = 2,
    first_counter: int = 0,
) -> np.ndarray:
    """``(n, nbytes)`` uint8 version 2 frame headers; `positions` ``(n, 2)`` as (y, x)."""
    heads = np.zeros((n, nbytes), np.uint8)

    def put(offset, values, dtype):
        data = np.ascontiguousarray(np.asarray(values, dtype).reshape(n, -1)).view(np.uint8)
        end = min(nbytes, offset + data.shape[1])
        if end > offset:
            heads[:, offset:end] = data[:, : end - offset]

    put(0, np.arange(first_counter, first_counter + n), "<u4")
    put(4, np.full(n, 1_767_225_600), "<u4")  # 2026-01-01T00:00:00Z
    put(8, np.arange(n) % 1000, "<u4")
    put(24, np.full(n, mode), "<u4")
    if rotator is not None:
        put(48, rotator, "<u4")
    if positions is not None:
        put(68, np.asarray(positions)[:, ::-1], "<f4")  # x, then y
    return heads


def scan_positions(nav: tuple[int, int], lead_in: int = 0, tail: int = 0) -> np.ndarray:
    """(y, x) of `lead_in` frames parked at (0, 0), a row-major scan of `nav`, then `tail`
    frames back at (0, 0)."""
    ys, xs = np.divmod(np.arange(nav[0] * nav[1]), nav[1])
    scan = np.stack([ys, xs], axis=1)
    zeros = np.zeros((lead_in, 2), int), np.zeros((tail, 2), int)
    return np.concatenate([zeros[0], scan, zeros[1]]).astype(np.float32)


def write_tvips(
    folder: Path,
    frames: np.ndarray,
    per_file: int | list[int],
    name: str = "scan",
    version: int = 2,
    frame_header_bytes: int = 128,
    positions: np.ndarray | None = None,
    rotator: np.ndarray | None = None,
    cut_bytes: int = 0,
    **header,
) -> list[Path]:
    """Write `frames` (``(n, h, w)`` uint8/uint16) as a series of files of `per_file` frames
    each (or the counts listed); `cut_bytes` are cut off the last file. Returns the paths."""
    folder = Path(folder)
    n, height, width = frames.shape
    bits = frames.dtype.itemsize * 8
    fh = 12 if version == 1 else frame_header_bytes
    heads = frame_headers(n, fh, positions, rotator)
    if version == 1:
        heads[:] = 0
    counts = per_file if isinstance(per_file, list) else [per_file] * -(-n // per_file)
    paths = []
    first = 0
    for i, k in enumerate(counts):
        k = min(k, n - first)
        blob = bytearray()
        if i == 0:
            blob += series_header(width, height, bits, version, frame_header_bytes, **header)
        pixels = frames[first : first + k].astype(f"<u{bits // 8}").reshape(k, -1).view(np.uint8)
        blob += np.concatenate([heads[first : first + k], pixels], axis=1).tobytes()
        path = folder / f"{name}_{i:03d}.tvips"
        path.write_bytes(bytes(blob))
        paths.append(path)
        first += k
    if cut_bytes:
        data = paths[-1].read_bytes()
        paths[-1].write_bytes(data[: len(data) - cut_bytes])
    return paths


def tvips_frames(n: int, sig: tuple[int, int], bits: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = 255 if bits == 8 else 65535
    return rng.integers(0, top, size=(n, *sig), endpoint=True).astype(f"<u{bits // 8}")
