"""A test-side writer of Direct Electron StreamPix ``.seq`` acquisitions, from the published
layout (``shared/reference/detector-formats.md`` §9); numpy and struct only.

The header is little-endian: magic 0xFEED, a UTF-16 name (24 bytes) and description (512
bytes), version, header size, then width, height, bit depth, real bit depth, image size,
image format (100 = monochrome), allocated frames, origin, true image size (the slot of a
frame: pixels, 8-byte timestamp, padding), frame rate. Frames start at 8192 (version >= 5)
or 1024. References are MRC2014 files (1024-byte header, float32 image).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def seq_header(
    width: int,
    height: int,
    bit_depth: int,
    frames: int,
    true_image_size: int,
    version: int = 5,
    name: str = "ltdask test",
    description: str = "synthetic frames",
    fps: float = 100.0,
    image_format: int = 100,
    compression: int = 0,
    magic: int = 0xFEED,
) -> bytes:
    size = 8192 if version >= 5 else 1024
    h = bytearray(size)
    struct.pack_into("<I", h, 0, magic)
    h[4:28] = name.encode("utf-16-le")[:22].ljust(24, b"\0")
    struct.pack_into("<ii", h, 28, version, 1024)
    h[36:548] = description.encode("utf-16-le")[:510].ljust(512, b"\0")
    image_size = width * height * bit_depth // 8
    struct.pack_into(
        "<9I",
        h,
        548,
        width,
        height,
        bit_depth,
        bit_depth,
        image_size,
        image_format,
        frames,
        0,
        true_image_size,
    )
    struct.pack_into("<d", h, 584, fps)
    struct.pack_into("<I", h, 620, compression)
    return bytes(h)


def write_seq(
    path,
    frames: np.ndarray,
    version: int = 5,
    pad: int = 0,
    truncate: int = 0,
    **header,
) -> Path:
    """Write `frames` (``(n, h, w)``, uint8/16/32) as ``path``; `pad` extra bytes after each
    timestamp; `truncate` bytes cut from the end of the file."""
    path = Path(path)
    frames = np.asarray(frames)
    n, height, width = frames.shape
    bits = frames.dtype.itemsize * 8
    slot = width * height * frames.dtype.itemsize + 8 + pad
    out = bytearray(seq_header(width, height, bits, n, slot, version=version, **header))
    for i, frame in enumerate(frames):
        out += frame.astype(frames.dtype.newbyteorder("<")).tobytes()
        out += struct.pack("<IHH", 1_700_000_000 + i, i % 1000, 0)
        out += bytes(pad)
    if truncate:
        out = out[:-truncate]
    path.write_bytes(bytes(out))
    return path


def write_mrc(path, image: np.ndarray, mode: int = 2) -> Path:
    """One 2-D image as an MRC2014 file (mode 2: float32; 1: int16; 6: uint16)."""
    dtype = {2: "<f4", 1: "<i2", 6: "<u2", 0: "i1"}[mode]
    image = np.asarray(image).astype(dtype)
    ny, nx = image.shape
    h = bytearray(1024)
    struct.pack_into("<10i", h, 0, nx, ny, 1, mode, 0, 0, 0, nx, ny, 1)
    struct.pack_into("<3f", h, 40, float(nx), float(ny), 1.0)
    struct.pack_into("<3f", h, 52, 90.0, 90.0, 90.0)
    struct.pack_into("<3i", h, 64, 1, 2, 3)
    struct.pack_into("<3f", h, 76, float(image.min()), float(image.max()), float(image.mean()))
    struct.pack_into("<ii", h, 88, 0, 0)  # space group, extended header bytes
    struct.pack_into("<i", h, 108, 20140)
    h[208:212] = b"MAP "
    h[212:216] = bytes([0x44, 0x44, 0, 0])
    path = Path(path)
    path.write_bytes(bytes(h) + image.tobytes())
    return path


def write_metadata(path, binning: int = 1, size=(64, 64), fps: int = 100, offset=(0, 0)) -> Path:
    """A ``.seq.metadata`` file: the eleven int32 values and the bool at byte 282 (size
    ``(UnbinnedFrameSizeY, UnbinnedFrameSizeX)``, offset ``(OffsetY, OffsetX)``)."""
    raw = bytearray(400)
    values = (400, 3, size[1], size[0], offset[1], offset[0], binning, 16, fps, 0, 0, 0)
    struct.pack_into("<11i?", raw, 282, *values)
    path = Path(path)
    path.write_bytes(bytes(raw))
    return path


def write_bad_pixel_xml(path, maps) -> Path:
    """A ``.seq.Config.Metadata.xml`` holding bad-pixel maps: `maps` is a list of
    ``(rows, columns, binning or None, defects)``, each defect a dict of ``Defect``
    attributes (``{"Row": "3"}``, ``{"Columns": "2-4"}``, ``{"Row": "1", "Column": "5"}``)."""
    from xml.sax.saxutils import quoteattr

    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<Configuration>",
             '  <FileInfo><SegmentPreBuffer Value="1"/></FileInfo>', "  <BadPixels>"]  # fmt: skip
    for rows, columns, binning, defects in maps:
        extra = "" if binning is None else f' Binning="{binning}"'
        lines.append(f'    <BadPixelMap Columns="{columns}" Rows="{rows}"{extra}>')
        for defect in defects:
            attrs = " ".join(f"{k}={quoteattr(str(v))}" for k, v in defect.items())
            lines.append(f"      <Defect {attrs}/>")
        lines.append("    </BadPixelMap>")
    lines += ["  </BadPixels>", "</Configuration>"]
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def frames_for(n: int, shape=(7, 9), dtype="<u2", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = min(np.iinfo(np.dtype(dtype)).max, 4000)
    return rng.integers(0, top, size=(n, *shape), endpoint=True).astype(dtype)


def write_scan(
    folder,
    n: int = 12,
    shape=(7, 9),
    dtype="<u2",
    seed: int = 0,
    dark: bool = False,
    gain: bool = False,
    metadata: bool = False,
    name: str = "scan.seq",
    **kw,
):
    """``(path, frames, dark, gain)``: a ``.seq`` of `n` random frames and, if asked, its dark
    and gain references and metadata file."""
    folder = Path(folder)
    frames = frames_for(n, shape, dtype, seed)
    path = write_seq(folder / name, frames, **kw)
    base = str(folder / name)
    base = base[: -len(".seq")] if base.endswith(".seq") else base
    base = base[: -len(".seq")] if base.endswith(".seq") else base
    rng = np.random.default_rng(seed + 1)
    d = g = None
    if dark:
        d = np.round(rng.random(shape) * 50, 3).astype(np.float32)
        write_mrc(base + ".seq.dark.mrc", d)
    if gain:
        g = (0.5 + rng.random(shape)).astype(np.float32)
        write_mrc(base + ".seq.gain.mrc", g)
    if metadata:
        write_metadata(base + ".seq.metadata", size=shape)
    return path, frames, d, g
