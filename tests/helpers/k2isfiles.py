"""A test-side writer of Gatan K2 IS raw acquisitions, from the published layout
(``shared/reference/detector-formats.md`` §5); numpy and struct only.

Eight sector files ``NAME1.bin`` … ``NAME8.bin`` of 22360-byte blocks: a 40-byte big-endian
header (sync word 0xFFFF0055, version, flags with bit 0 = shutter active, block count,
sector width 256 and height 1860, frame id, first and last pixel of the block, block size)
and 930 rows x 16 pixels packed in 12 bits (3 bytes per 2 pixels, low nibble first). Sector
``s`` holds columns ``256 s`` … of the 1860 x 2048 frame, 32 blocks per frame: the top band
of 930 rows first, its 16 blocks of 16 columns right to left. ``NAME.gtg`` is a DM4 tag file.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

BLOCK_BYTES = 0x5758
ROWS, COLS = 930, 16
SHAPE = (1860, 2048)

HEADER = np.dtype(
    [
        ("sync", ">u4"),
        ("pad1", "V4"),
        ("version", "u1"),
        ("flags", "u1"),
        ("pad2", "V6"),
        ("block_count", ">u4"),
        ("width", ">u2"),
        ("height", ">u2"),
        ("frame_id", ">u4"),
        ("x_start", ">u2"),
        ("y_start", ">u2"),
        ("x_end", ">u2"),
        ("y_end", ">u2"),
        ("block_size", ">u4"),
    ]
)


def pack12(pixels: np.ndarray) -> np.ndarray:
    """uint16 pixels (< 4096, even count on the last axis) -> packed bytes."""
    p = pixels.astype(np.uint16)
    a, b = p[..., 0::2], p[..., 1::2]
    out = np.empty((*p.shape[:-1], p.shape[-1] // 2, 3), dtype=np.uint8)
    out[..., 0] = a & 0xFF
    out[..., 1] = ((a >> 8) & 0x0F) | ((b & 0x0F) << 4)
    out[..., 2] = b >> 4
    return out.reshape(*p.shape[:-1], -1)


def sector_blocks(frame: np.ndarray, sector: int) -> np.ndarray:
    """The 32 blocks ``(32, 930, 16)`` of one sector of a frame, in file order."""
    part = frame[:, sector * 256 : (sector + 1) * 256]
    blocks = part.reshape(2, ROWS, 16, COLS).transpose(0, 2, 1, 3)  # band, xb, row, col
    return blocks[:, ::-1].reshape(32, ROWS, COLS)


def frame_blocks(frame, sector, frame_id, first_count, shutter, version=1) -> bytes:
    """One sector's 32 blocks of `frame` as bytes."""
    headers = np.zeros(32, dtype=HEADER)
    headers["sync"] = 0xFFFF0055
    headers["version"] = version
    headers["flags"] = 1 if shutter else 0
    headers["block_count"] = first_count + np.arange(32)
    headers["width"] = 256
    headers["height"] = 1860
    headers["frame_id"] = frame_id
    k = np.arange(32)
    band, xb = k // 16, 15 - k % 16
    headers["x_start"] = xb * 16
    headers["x_end"] = xb * 16 + 15
    headers["y_start"] = band * ROWS
    headers["y_end"] = band * ROWS + ROWS - 1
    headers["block_size"] = BLOCK_BYTES
    payload = pack12(sector_blocks(frame, sector).reshape(32, -1))
    return np.concatenate([headers.view(np.uint8).reshape(32, 40), payload], axis=1).tobytes()


def random_frames(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4096, size=(n, *SHAPE), dtype=np.uint16)


def write_k2is(
    folder,
    frames: np.ndarray,
    name: str = "Capture_",
    shutter_from: int = 0,
    lead_blocks=(0,) * 8,
    tail_blocks=(0,) * 8,
    first_count: int = 1000,
    first_frame_id: int = 70,
    scan=None,
    gtg: bool = True,
) -> Path:
    """Write `frames` (``(n, 1860, 2048)`` uint16 < 4096) as 8 sector files and a ``.gtg``.

    `lead_blocks[s]`: blocks of an incomplete frame before frame 0 in sector `s` (the last
    blocks of frame ``first_frame_id - 1``); `tail_blocks[s]`: blocks of an incomplete frame
    after the last one. `shutter_from`: first frame with the shutter flag. `scan`: ``(y, x)``
    for ``SI Dimensions`` in the ``.gtg`` (a STEM scan), None for a time series.
    Returns the ``.gtg`` path."""
    folder = Path(folder)
    pad = np.zeros(SHAPE, dtype=np.uint16)
    for s in range(8):
        with open(folder / f"{name}{s + 1}.bin", "wb") as f:
            lead = lead_blocks[s]
            if lead:
                blocks = frame_blocks(pad, s, first_frame_id - 1, first_count - 32, False)
                f.write(blocks[(32 - lead) * BLOCK_BYTES :])
            for i, frame in enumerate(frames):
                count = first_count + 32 * i
                f.write(frame_blocks(frame, s, first_frame_id + i, count, i >= shutter_from))
            tail = tail_blocks[s]
            if tail:
                n = len(frames)
                blocks = frame_blocks(pad, s, first_frame_id + n, first_count + 32 * n, True)
                f.write(blocks[: tail * BLOCK_BYTES])
    path = folder / f"{name}.gtg"
    if gtg:
        tags = {"SI Dimensions": {"Size X": scan[1], "Size Y": scan[0]}} if scan else {}
        tags["Acquisition"] = {"Exposure (s)": 0.0025, "Frames": len(frames)}
        path.write_bytes(dm4(tags))
    return path


# -- DM4 tag files ------------------------------------------------------------------------
def _tag(name: str, value) -> bytes:
    key = name.encode("latin-1")
    if isinstance(value, dict):
        body = _group(value)
        kind = 20
    else:
        if isinstance(value, float):
            code, data = 7, struct.pack("<d", value)
        else:
            code, data = 5, struct.pack("<I", value)
        body = b"%%%%" + struct.pack(">QQ", 1, code) + data
        kind = 21
    return struct.pack(">BH", kind, len(key)) + key + struct.pack(">Q", len(body)) + body


def _group(tags: dict) -> bytes:
    return struct.pack(">BBQ", 0, 1, len(tags)) + b"".join(_tag(k, v) for k, v in tags.items())


def dm4(tags: dict) -> bytes:
    """A DM4 tag file (little-endian data) holding the nested dict `tags`."""
    root = _group(tags)
    return struct.pack(">IQI", 4, len(root), 1) + root + bytes(8)
