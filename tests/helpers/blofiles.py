"""A test-side NanoMEGAS ``.blo`` writer, from the published description (struct + numpy).

Layout: a 240-byte little-endian header; the note text from byte 240 (latin-1, CRLF lines),
NUL-padded up to the virtual bright-field image at ``vbf_offset`` (4096 as in every sample
file); the VBF (NY x NX bytes); NUL padding up to ``data_offset``; then one record per frame:
``AA 55``, the frame index as u32, and the frame's pixels (u8, or u16 LE with magic 0x0103 and
``Blo Bit Depth: 16 bits`` in the note).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

VBF_OFFSET = 4096


def blo_header(
    nx: int,
    ny: int,
    edge: int,
    data_offset: int,
    magic: int = 0x0102,
    step: tuple[float, float] = (1.5, 2.5),
    sdp: int = 500,
    beam_energy: int = 200_000,
    camera_length: int = 1500,
    acquisition_time: float = 42339.65,
    vbf_offset: int = VBF_OFFSET,
) -> bytes:
    """The 240 header bytes; `step` is (y, x) in nm."""
    head = struct.pack(
        "<6sHIIIHHHHHddIHId",
        b"IMGBLO",
        magic,
        vbf_offset,
        data_offset,
        131141,  # flags seen in sample files
        edge,
        0,  # DP rotation
        nx,
        ny,
        1250,  # scan rotation, 100 x degrees
        step[1],
        step[0],
        beam_energy,
        sdp,
        camera_length,
        acquisition_time,
    )
    head += struct.pack("<8d", *range(8)) + struct.pack("<14d", *([0.0] * 14))
    assert len(head) == 240
    return head


def write_blo(
    path: Path,
    frames: np.ndarray,
    nav: tuple[int, int],
    bits: int = 8,
    cut_bytes: int = 0,
    records: int | None = None,
    pad: int | None = None,
    **header,
) -> Path:
    """Write `frames` (``(n, edge, edge)``) as a block file of scan `nav` (y, x); `records`
    frame records (default n: fewer than ny * nx makes a truncated acquisition); `cut_bytes`
    cut off the end. The padding before the frames is `pad` (default: as RosettaSciIO's
    writer, ``offset % 16``)."""
    ny, nx = nav
    n, edge = len(frames), frames.shape[-1]
    dtype = np.dtype("<u1" if bits == 8 else "<u2")
    magic = 0x0102 if bits == 8 else 0x0103
    data_offset = VBF_OFFSET + nx * ny
    data_offset += (data_offset % 16) if pad is None else pad
    note = "Precession angle : 0.6\r\nScan speed : 20 ms\r\n"
    if bits != 8:
        note += f"Blo Bit Depth: {bits} bits\r\n"
    blob = bytearray(blo_header(nx, ny, edge, data_offset, magic=magic, **header))
    blob += note.encode("latin-1")
    blob += b"\0" * (VBF_OFFSET - len(blob))
    vbf = np.clip(frames.reshape(n, -1).mean(axis=1), 0, 255).astype(np.uint8)
    blob += np.resize(vbf, ny * nx).tobytes()
    blob += b"\0" * (data_offset - len(blob))
    for i in range(n if records is None else records):
        blob += b"\xaa\x55" + struct.pack("<I", i) + frames[i].astype(dtype).tobytes()
    path = Path(path)
    path.write_bytes(bytes(blob[: len(blob) - cut_bytes]))
    return path


def blo_frames(n: int, edge: int, bits: int = 8, seed: int = 0, sparse: bool = False):
    """`n` random square frames of counts that `bits` hold."""
    rng = np.random.default_rng(seed)
    top = 255 if bits == 8 else 65535
    values = rng.integers(0, top, size=(n, edge, edge), endpoint=True)
    if sparse:
        values = np.where(rng.random(values.shape) < 0.05, values, 0)
    return values.astype(np.uint8 if bits == 8 else np.uint16)
