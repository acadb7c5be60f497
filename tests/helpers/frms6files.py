"""A test-side writer of PNDetector pnCCD ``.frms6`` acquisitions, from the published layout
(``shared/reference/detector-formats.md`` §6); numpy and struct only.

``NAME.hdr`` (INI, section ``[measurementInfo]``), ``NAME_000.frms6`` with the dark frames and
``NAME_001.frms6``, … with the signal frames. Each file: a 1024-byte header (header size
1024, frame header size 64, version 6 at byte 7, width and height at 88, frame count at
1020), then per frame a 64-byte header and ``h x 2W`` uint16 LE pixels: the image's top half
on the left, its bottom half turned by 180° on the right, binned rows stored once.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def fold(images: np.ndarray, binning: int = 1) -> np.ndarray:
    """Unfolded images ``(n, 2hb, W)`` (binned rows repeated) -> raw frames ``(n, h, 2W)``."""
    binned = images[:, ::binning]
    h = binned.shape[1] // 2
    top, bottom = binned[:, :h], binned[:, h:]
    right = bottom[:, ::-1, ::-1]
    return np.concatenate([top, right], axis=2)


def random_images(n, sig=(8, 6), binning=1, seed=0, high=4000) -> np.ndarray:
    """`n` unfolded images of `sig` whose binned rows repeat (`sig[0]` divides 2*binning)."""
    rng = np.random.default_rng(seed)
    binned = rng.integers(0, high, size=(n, sig[0] // binning, sig[1]), endpoint=True)
    return np.repeat(binned, binning, axis=1).astype(np.uint16)


def frms6_file(raw: np.ndarray, count_in_header: bool = True, comment: bytes = b"ltdask") -> bytes:
    """One ``.frms6`` file of raw frames ``(n, h, 2W)``."""
    n, h, w = raw.shape
    head = bytearray(1024)
    struct.pack_into("<HH", head, 0, 1024, 64)
    head[4:7] = bytes([1, w // 2 % 256, h % 256])
    head[7] = 6
    head[8 : 8 + len(comment)] = comment
    struct.pack_into("<HH", head, 88, w, h)
    struct.pack_into("<I", head, 1020, n if count_in_header else 0)
    out = bytearray(head)
    for i, frame in enumerate(raw):
        fh = bytearray(64)
        fh[2] = 0
        fh[3] = h % 256
        struct.pack_into("<III", fh, 4, 1_700_000_000 + i // 1000, (i * 1000) % 10**6, i)
        struct.pack_into("<d", fh, 16, -20.0)
        out += fh + frame.astype("<u2").tobytes()
    return bytes(out)


def write_hdr(path, signal_frames, scan=None, binning=1, window=(264, 264), dark_frames=1):
    scan_line = "" if scan is None else f"stemimagesize={scan[0]}x{scan[1]}\n"
    Path(path).write_text(
        "[measurementInfo]\n"
        f"darkframes={dark_frames}\n"
        "dwelltimemicroseconds=100\n"
        "gain=2\n"
        f'readoutmode="bin: {binning}, windowing: {window[0]} x {window[1]}"\n'
        f"signalframes={signal_frames}\n"
        f"{scan_line}"
    )


def write_acquisition(
    folder,
    images: np.ndarray,
    dark: np.ndarray,
    binning: int = 1,
    scan=None,
    splits=(),
    name: str = "scan",
    count_in_header: bool = True,
    signal_frames: int | None = None,
) -> Path:
    """Write `images` (``(n, 2hb, W)``) and `dark` frames; `splits`: frame indices where a new
    signal file starts. Returns the ``.hdr`` path."""
    folder = Path(folder)
    n = len(images)
    write_hdr(
        folder / f"{name}.hdr",
        n if signal_frames is None else signal_frames,
        scan,
        binning,
        dark_frames=len(dark),
    )
    (folder / f"{name}_000.frms6").write_bytes(frms6_file(fold(dark, binning), count_in_header))
    bounds = [0, *splits, n]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        data = frms6_file(fold(images[a:b], binning), count_in_header)
        (folder / f"{name}_{k + 1:03d}.frms6").write_bytes(data)
    return folder / f"{name}.hdr"
