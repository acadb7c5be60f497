"""Merlin ``.mib`` / ``.hdr`` files written from counts, with numpy only.

The same counts can be written in every pixel mode: integer (``U08``/``U16``/``U32``,
big-endian) and raw (``R64``, packed in 64-bit big-endian words), for one chip and for a
2x2 quad (optionally with gap pixels). Reading them back must give the counts in every mode.

Raw mode, as written here (after LiberTEM's and LiberTEM-rs' descriptions of Merlin data):

* the pixels of a raw row are packed into 64-bit big-endian words, pixel ``k`` of a word in
  field ``k`` counted from the least significant bit; fields are 1 bit (counter depth 1),
  8 bits (depth 6) or 16 bits (depth 12);
* depth 24 is two 12-bit raw images, the high 12 bits first, and the header's width is twice
  the image width;
* quad: raw row ``r`` is ``[chip 4 | chip 3 | chip 2 | chip 1]``; chips 1 and 2 are rows ``r``
  of the top-left and top-right quarters, chips 3 and 4 the bottom-left and bottom-right
  quarters rotated by 180 degrees; the header says ``width = 4 * chip width``,
  ``height = chip height``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

PIXEL_TYPE = {1: "U08", 6: "U08", 12: "U16", 24: "U32"}
STORED_DTYPE = {"U08": ">u1", "U16": ">u2", "U32": ">u4"}
DECODED_DTYPE = {1: np.uint8, 6: np.uint8, 12: np.uint16, 24: np.uint32}
FIELD_BITS = {1: 1, 6: 8, 12: 16}
GAP = 2


def make_counts(rng: np.random.Generator, n: int, sig_shape: Sequence[int], depth: int, gap=0):
    """`n` frames of random counts below ``2**depth``; zero in the gap rows/columns of a quad."""
    counts = rng.integers(0, 2**depth, size=(n, *sig_shape), dtype=np.int64)
    if gap:
        h, w = sig_shape
        counts[:, (h - gap) // 2 : (h + gap) // 2, :] = 0
        counts[:, :, (w - gap) // 2 : (w + gap) // 2] = 0
    return counts.astype(DECODED_DTYPE[depth])


def header_bytes(
    seq: int,
    *,
    size: int,
    chips: int,
    width: int,
    height: int,
    pixel_type: str,
    layout: str,
    depth: int | None,
    pad: bytes = b"\x00",
    shutter: float = 0.001,
) -> bytes:
    """One frame header as Merlin writes it: comma-separated ASCII, padded to `size` bytes
    (`shutter`: the shutter time, seconds)."""
    stamp = "2024-06-14 11:31:30.060732"
    fields = [
        "MQ1",
        f"{seq:06d}",
        f"{size:05d}",
        f"{chips:02d}",
        f"{width:04d}",
        f"{height:04d}",
        pixel_type,
        f"{layout:>6}",
        f"{(1 << chips) - 1:02X}",
        stamp,
        f"{shutter:.6f}",
        "0",
        "0",
        "0",
    ]
    if pixel_type == "R64":
        fields.append("")  # raw headers leave out thresholds and DACs
    else:
        fields += ["1.000000E+1", "5.110000E+2"] + ["0.000000E+0"] * 6
        for _ in range(chips):
            fields += ["3RX"] + [f"{(7 * i) % 512:03d}" for i in range(27)]
    if depth is not None:
        fields += ["MQ1A", stamp.replace(" ", "T") + "123Z", "1000000ns", str(depth)]
    text = (",".join(fields) + ",").encode("ascii")
    assert len(text) <= size, (len(text), size)
    return text + pad * (size - len(text))


def pack_words(raw: np.ndarray, field_bits: int) -> bytes:
    """Pixels in stream order packed into big-endian 64-bit words, pixel k in field k."""
    ppw = 64 // field_bits
    flat = raw.reshape(-1).astype(np.uint64)
    assert flat.size % ppw == 0
    fields = flat.reshape(-1, ppw) & np.uint64((1 << field_bits) - 1)
    shifts = np.arange(ppw, dtype=np.uint64) * np.uint64(field_bits)
    words = np.bitwise_or.reduce(fields << shifts, axis=1)
    return words.astype(">u8").tobytes()


def quad_raw_rows(frame: np.ndarray, gap: int = 0) -> np.ndarray:
    """The raw (chip height, 4 * chip width) image of an assembled quad frame."""
    h, w = frame.shape
    ch, cw = (h - gap) // 2, (w - gap) // 2
    top, bottom = frame[:ch], frame[ch + gap :]
    q1, q2 = top[:, :cw], top[:, cw + gap :]
    q3, q4 = bottom[:, :cw], bottom[:, cw + gap :]
    return np.concatenate([q4[::-1, ::-1], q3[::-1, ::-1], q2, q1], axis=1)


def encode_frame(frame: np.ndarray, mode: str, depth: int, quad: bool, gap: int) -> bytes:
    """The stored bytes of one frame's pixels."""
    if mode != "R64":
        return frame.astype(STORED_DTYPE[mode]).tobytes()
    raw = quad_raw_rows(frame, gap) if quad else frame
    if depth == 24:
        hi = pack_words(raw.astype(np.uint64) >> 12, 16)
        lo = pack_words(raw.astype(np.uint64) & 0xFFF, 16)
        return hi + lo
    return pack_words(raw, FIELD_BITS[depth])


def layout_fields(sig_shape, mode: str, depth: int, quad: bool, gap: int) -> dict:
    """Header size, chips, width, height and layout for frames of `sig_shape`."""
    h, w = sig_shape
    if not quad:
        width = 2 * w if mode == "R64" and depth == 24 else w
        return dict(size=384, chips=1, width=width, height=h, layout="1x1")
    layout = "2x2G" if gap else "2x2"
    if mode != "R64":
        return dict(size=768, chips=4, width=w, height=h, layout=layout)
    ch, cw = (h - gap) // 2, (w - gap) // 2
    width = 4 * cw * (2 if depth == 24 else 1)
    return dict(size=768, chips=4, width=width, height=ch, layout=layout)


def write_mib(
    path,
    frames: np.ndarray,
    *,
    depth: int,
    raw: bool = False,
    quad: bool = False,
    gap: int = 0,
    first_seq: int = 1,
    pixel_type: str | None = None,
    with_depth: bool = True,
    pad: bytes = b"\x00",
    shutter: float = 0.001,
) -> None:
    """Write `frames` (counts) as a ``.mib`` file in integer or raw mode (`shutter`: each
    header's shutter time, seconds)."""
    mode = "R64" if raw else (pixel_type or PIXEL_TYPE[depth])
    fields = layout_fields(frames.shape[1:], mode, depth, quad, gap)
    with open(path, "wb") as f:
        for i, frame in enumerate(frames):
            head = header_bytes(
                first_seq + i,
                pixel_type=mode,
                depth=depth if with_depth else None,
                pad=pad,
                shutter=shutter,
                **fields,
            )
            f.write(head)
            f.write(encode_frame(frame, mode, depth, quad, gap))


def write_hdr(path, frames: int, per_trigger: int = 1, depth: int = 12, scan=None) -> None:
    """A Merlin acquisition header (``.hdr``)."""
    lines = [
        "HDR,\t",
        "Time and Date Stamp (day, mnth, yr, hr, min, s):\t14/06/2024 11:31:30",
        "Chip ID:\tW529_F5,-,-,-",
        "Chip Type (Medipix 3.0, Medipix 3.1, Medipix 3RX):\tMedipix 3RX",
        "Assembly Size (NX1, 2X2):\t   1x1",
        "Chip Mode  (SPM, CSM, CM, CSCM):\tSPM",
        f"Counter Depth (number):\t{depth}",
        "Gain:\tHGM",
        "Active Counters:\tAlternating",
        "Thresholds (keV):\t1.000000E+1,5.110000E+2,0.000000E+0,0.000000E+0",
        "Acquisition Type (Normal, Th_scan, Config):\tNormal",
        f"Frames in Acquisition (Number):\t{frames}",
        f"Frames per Trigger (Number):\t{per_trigger}",
        "Trigger Start (Positive, Negative, Internal):\tRising Edge",
        "Sensor Bias (V):\t120 V",
        "Temperature (C):\tBoard Temp 38.907883 Deg C",
        "Humidity (%):\tBoard Humidity -0.026184 ",
        "Medipix Clock (MHz):\t120MHz",
        "Readout System:\tMerlin Quad",
        "Software Version:\t0.75.4.84",
    ]
    if scan is not None:
        lines += [f"ScanX:\t{scan[1]}", f"ScanY:\t{scan[0]}"]
    lines.append("End\t")
    with open(path, "w", newline="") as f:
        f.write("\r\n".join(lines) + "\r\n")


def split_counts(total: int, files: int) -> list[int]:
    """Uneven frame counts for `files` files."""
    if files == 1:
        return [total]
    first = max(1, total // (files + 1))
    rest = total - first
    base, extra = divmod(rest, files - 1)
    return [first] + [base + (1 if i < extra else 0) for i in range(files - 1)]


def write_scan(tmp_path, frames: np.ndarray, files: int = 1, name: str = "scan", **kw) -> list:
    """`frames` over `files` files ``NAME1.mib`` … with running sequence numbers."""
    paths = []
    start = 0
    for i, n in enumerate(split_counts(len(frames), files)):
        path = tmp_path / (f"{name}.mib" if files == 1 else f"{name}{i + 1}.mib")
        write_mib(path, frames[start : start + n], first_seq=start + 1, **kw)
        paths.append(str(path))
        start += n
    return paths


def expected_scan(stream: np.ndarray, nav_shape, sync_offset: int = 0):
    """The scan of `nav_shape`: position ``p`` holds frame ``p + sync_offset`` or zeros."""
    n = math.prod(nav_shape)
    out = np.zeros((n, *stream.shape[1:]), dtype=stream.dtype)
    for p in range(n):
        if 0 <= p + sync_offset < len(stream):
            out[p] = stream[p + sync_offset]
    return out.reshape((*nav_shape, *stream.shape[1:]))
