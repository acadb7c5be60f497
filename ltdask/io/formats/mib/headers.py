"""The headers of Merlin ``.mib`` files: the frame header, and the ``.hdr`` acquisition header.

Every frame of a ``.mib`` file is an ASCII header followed by the pixels. The header is a
comma-separated list that starts with ``MQ1``; the fields used here are

====  ===================  ============================================================
idx   field                example
====  ===================  ============================================================
0     magic                ``MQ1``
1     sequence number      ``000001`` (of the file's first frame; orders the files)
2     header bytes         ``00384`` (one chip) or ``00768`` (four chips)
3     number of chips      ``01`` / ``04``
4, 5  width, height        ``0256``, ``0256`` (raw mode: the stored, not the assembled size)
6     pixel type           ``U08``, ``U16``, ``U32`` (big-endian), ``R64`` (raw)
7     chip layout          ``1x1``, ``2x2``, ``Nx1``; a trailing ``G`` means gap pixels
10    shutter time         ``0.000500`` (seconds: a frame's time in continuous read/write)
...   ``MQ1A``, timestamp, exposure, counter depth (1, 6, 12 or 24)
====  ===================  ============================================================

An acquisition header (``.hdr``) next to the files holds ``key: value`` lines, among them
the scan shape and the counter depth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ltdask.exceptions import DataSetError

#: stored dtype of the integer pixel types (LiberTEM-rs reads ``U01`` as one byte per pixel)
PIXEL_TYPES = {"U01": "u1", "U08": "u1", "U16": ">u2", "U32": ">u4", "U64": ">u8"}
RAW_PIXEL_TYPE = "R64"
COUNTER_DEPTHS = (1, 6, 12, 24)
QUAD_GAP = 2
HEADER_FIELDS = {
    1: "sequence number",
    2: "header size",
    3: "number of chips",
    4: "width",
    5: "height",
    6: "pixel type",
    7: "chip layout",
}
#: what every frame header starts with
MIB_MAGIC = b"MQ1,"


# -- frame headers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MibHeader:
    """The first frame header of a ``.mib`` file."""

    path: str
    sequence: int
    header_bytes: int
    chips: int
    width: int
    height: int
    pixel_type: str
    layout: str
    counter_depth: int | None
    #: the shutter time in seconds where field 10 gives one (> 0), else None
    shutter_seconds: float | None = None

    @property
    def raw(self) -> bool:
        return self.pixel_type == RAW_PIXEL_TYPE

    @property
    def gap(self) -> int:
        return QUAD_GAP if self.layout.endswith("G") else 0

    def describe(self) -> tuple:
        """What every file of one scan must share."""
        return (
            self.header_bytes,
            self.chips,
            self.width,
            self.height,
            self.pixel_type,
            self.layout,
            self.counter_depth,
        )


def read_mib_header(path: str) -> MibHeader:
    """Parse the first frame header of `path`; a `DataSetError` naming the field if malformed."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if not head.startswith(b"MQ1,"):
        raise DataSetError(
            f"{path!r} is not a Merlin .mib file: it starts with {head[:16]!r}, expected a frame "
            "header starting with 'MQ1,'"
        )
    return parse_mib_header(head, path)


def parse_mib_header(head: bytes, path: str) -> MibHeader:
    """Parse a frame header from `head` (a frame's first bytes, at least its header; from a
    file or a detector stream, named `path` in messages)."""
    header_bytes = _int_field(path, head.split(b",", 3), 2, "header")
    if not 16 <= header_bytes <= len(head):
        raise DataSetError(
            f"{path!r}: frame header field 2 (header size) is {header_bytes}; expected the "
            f"header size in bytes (e.g. 384 or 768), at most the {len(head)} bytes read"
        )
    try:
        text = head[:header_bytes].decode("ascii")
    except UnicodeDecodeError as e:
        raise DataSetError(
            f"{path!r}: the frame header ({header_bytes} bytes) is not ASCII text ({e})"
        ) from None
    fields = [p.strip(" \x00\r\n\t") for p in text.split(",")]
    if len(fields) < 8:
        raise DataSetError(
            f"{path!r}: the frame header has {len(fields)} fields, expected at least 8 "
            "(MQ1, sequence, header size, chips, width, height, pixel type, layout)"
        )
    sequence = _int_field(path, fields, 1, "header")
    chips = _int_field(path, fields, 3, "header", minimum=1)
    width = _int_field(path, fields, 4, "header", minimum=1)
    height = _int_field(path, fields, 5, "header", minimum=1)
    pixel_type = fields[6]
    if pixel_type not in PIXEL_TYPES and pixel_type != RAW_PIXEL_TYPE:
        raise DataSetError(
            f"{path!r}: frame header field 6 (pixel type) is {pixel_type!r}; expected one of "
            f"{', '.join([*PIXEL_TYPES, RAW_PIXEL_TYPE])}"
        )
    layout = fields[7]
    if not re.fullmatch(r"(\d+|N)x\d+G?", layout):
        raise DataSetError(
            f"{path!r}: frame header field 7 (chip layout) is {layout!r}; expected e.g. "
            "'1x1', '2x2', '2x2G' or 'Nx1'"
        )
    depth = None
    if "MQ1A" in fields:
        at = fields.index("MQ1A") + 3
        depth = _int_field(path, fields, at, "header", name="counter depth")
        if depth not in COUNTER_DEPTHS:
            raise DataSetError(
                f"{path!r}: frame header field {at} (counter depth) is {depth}; expected one "
                f"of {COUNTER_DEPTHS}"
            )
    shutter = _seconds(fields[10]) if len(fields) > 10 else None
    return MibHeader(
        path, sequence, header_bytes, chips, width, height, pixel_type, layout, depth, shutter
    )


def _seconds(text: str) -> float | None:
    """A time in seconds, None where `text` is not a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def _int_field(path, fields, idx, what, name=None, minimum=0) -> int:
    name = name or HEADER_FIELDS.get(idx, f"field {idx}")
    if idx >= len(fields):
        raise DataSetError(
            f"{path!r}: the frame {what} ends before field {idx} ({name}); it has "
            f"{len(fields)} fields"
        )
    raw = fields[idx]
    value = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    try:
        number = int(value.strip(" \x00"))
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise DataSetError(
            f"{path!r}: frame {what} field {idx} ({name}) is {value!r}; expected an integer "
            f">= {minimum}"
        )
    return number


def describe_difference(a: MibHeader, b: MibHeader) -> str:
    """How two files' first headers differ, for messages."""
    names = ("header size", "chips", "width", "height", "pixel type", "chip layout", "depth")
    diffs = [
        f"{name} {x!r} vs {y!r}"
        for name, x, y in zip(names, a.describe(), b.describe(), strict=True)
        if x != y
    ]
    return ", ".join(diffs)


# -- .hdr acquisition headers --------------------------------------------------------------------
def read_hdr(path: str) -> dict[str, str]:
    """The ``key: value`` lines of a Merlin ``.hdr`` file (between ``HDR`` and ``End``)."""
    with open(path, "rb") as f:
        return parse_hdr(f.read(1 << 20), path)


def parse_hdr(data: bytes, path: str) -> dict[str, str]:
    """The ``key: value`` lines of an acquisition header's bytes (a ``.hdr`` file's, or a
    detector's ``HDR`` message), named `path` in messages."""
    text = data.decode("latin-1")
    lines = text.splitlines()
    if not lines or not lines[0].startswith("HDR"):
        raise DataSetError(
            f"{path!r} is not a Merlin .hdr file: its first line is "
            f"{(lines[0][:40] if lines else '')!r}, expected one starting with 'HDR'"
        )
    result = {}
    for line in lines[1:]:
        if line.strip() in ("End", ""):
            if line.strip() == "End":
                break
            continue
        # "Key (units):<tab>value"; keys hold commas and brackets, values may hold colons
        key, sep, value = line.partition("\t")
        if not sep:
            key, sep, value = line.partition(":")
        result[key.strip().rstrip(":").strip()] = value.strip()
    return result


def hdr_int(hdr: dict[str, str], key: str, path: str) -> int | None:
    if key not in hdr or hdr[key] == "":
        return None
    try:
        return int(hdr[key])
    except ValueError:
        raise DataSetError(
            f"{path!r}: {key!r} is {hdr[key]!r} in the .hdr file; expected an integer"
        ) from None


def nav_shape_from_hdr(
    hdr: dict[str, str], path: str, image_count: int
) -> tuple[tuple[int, ...], str]:
    """``(ScanY, ScanX)`` where the header has them, else ``(frames // fpt, fpt)`` with
    ``fpt`` the frames per trigger (a scan line), else all frames in one dim; and the header
    fields it came from, for messages."""
    scan_x = hdr_int(hdr, "ScanX", path)
    scan_y = hdr_int(hdr, "ScanY", path)
    if scan_x and scan_y and scan_x > 0 and scan_y > 0:
        return (scan_y, scan_x), f"ScanY={scan_y}, ScanX={scan_x} in {path!r}"
    frames = hdr_int(hdr, "Frames in Acquisition (Number)", path)
    counted = f"Frames in Acquisition (Number)={frames}"
    if not frames or frames <= 0:
        frames = image_count
        counted = "the frames in the files"
    per_trigger = hdr_int(hdr, "Frames per Trigger (Number)", path)
    if per_trigger and 1 < per_trigger <= frames:
        shape = (frames // per_trigger, per_trigger)
        return shape, f"{counted}, Frames per Trigger (Number)={per_trigger} in {path!r}"
    return (frames,), f"{counted} in {path!r}"
