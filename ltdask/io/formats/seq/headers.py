"""The headers of Direct Electron StreamPix ``.seq`` acquisitions and their side files.

* ``NAME.seq``: a fixed little-endian header (magic ``0xFEED``) of 1024 bytes, padded to
  8192 bytes from version 5 on, then one slot of ``true_image_size`` bytes per frame: the
  pixels, an 8-byte timestamp and padding.
* ``NAME.seq.dark.mrc`` / ``NAME.seq.gain.mrc``: dark and gain references, small MRC files.
* ``NAME.seq.metadata``: binary DE metadata; from byte 282 eleven int32 values and a bool
  (frame geometry, binning, bit mode, frame rate...).
* ``NAME.seq.Config.Metadata.xml``: among other things the sensor's bad-pixel maps
  (``BadPixelMap`` elements with ``Defect`` rows, columns and pixels), of the whole sensor:
  the frame is the part of it at ``OffsetX``/``OffsetY`` of the ``.metadata``.
"""

from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError, MetadataWarning, warn

SEQ_MAGIC = 0xFEED
#: the magic number as the file's first bytes (little-endian u4)
SEQ_MAGIC_BYTES = struct.pack("<I", SEQ_MAGIC)
#: image_format of monochrome frames, the only one DE cameras write
MONOCHROME = 100
HEADER_BYTES = 1024

# (name, offset, struct code): the fields this reader uses
_FIELDS = (
    ("magic", 0, "I"),
    ("version", 28, "i"),
    ("header_size", 32, "i"),
    ("width", 548, "I"),
    ("height", 552, "I"),
    ("bit_depth", 556, "I"),
    ("bit_depth_real", 560, "I"),
    ("image_size_bytes", 564, "I"),
    ("image_format", 568, "I"),
    ("allocated_frames", 572, "I"),
    ("true_image_size", 580, "I"),
    ("frame_rate", 584, "d"),
    ("compression_format", 620, "I"),
)

METADATA_FIELDS = (
    "DEMetadataSize",
    "DEMetadataVersion",
    "UnbinnedFrameSizeX",
    "UnbinnedFrameSizeY",
    "OffsetX",
    "OffsetY",
    "HardwareBinning",
    "Bitmode",
    "FrameRate",
    "RotationMode",
    "FlipMode",
    "OkraMode",
)
_METADATA_FORMAT = "<11i?"
_METADATA_OFFSET = 282


def _utf16(raw: bytes) -> str:
    """A zero-terminated UTF-16 string field (empty if it starts with zeros)."""
    n = len(raw) // 2 * 2
    text = raw[:n].decode("utf-16-le", errors="replace")
    return text.split("\0", 1)[0]


@dataclass(frozen=True)
class SeqHeader:
    """What the ``.seq`` header says (checked)."""

    path: str
    version: int
    width: int
    height: int
    bit_depth: int
    bit_depth_real: int
    true_image_size: int
    allocated_frames: int
    frame_rate: float
    name: str
    description: str

    @property
    def image_offset(self) -> int:
        """Where the first frame slot starts."""
        return 8192 if self.version >= 5 else 1024

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(f"<u{self.bit_depth // 8}")

    @property
    def frame_bytes(self) -> int:
        return self.width * self.height * self.bit_depth // 8


def read_seq_header(path: str) -> SeqHeader:
    """Parse and check the header of a ``.seq`` file."""
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        raise DataSetError(
            f"{path!r}: {len(raw)} bytes, shorter than a StreamPix .seq header "
            f"({HEADER_BYTES} bytes); the file is truncated or not a .seq file"
        )
    h = {name: struct.unpack_from("<" + code, raw, off)[0] for name, off, code in _FIELDS}
    if h["magic"] != SEQ_MAGIC:
        raise DataSetError(
            f"{path!r}: not a StreamPix .seq file (magic {h['magic']:#x} at byte 0, "
            f"expected {SEQ_MAGIC:#x})"
        )
    if h["image_format"] != MONOCHROME:
        raise DataSetError(
            f"{path!r}: header field image_format is {h['image_format']}; only monochrome "
            f"frames ({MONOCHROME}) can be read"
        )
    if h["compression_format"] != 0:
        raise DataSetError(
            f"{path!r}: header field compression_format is {h['compression_format']}; only "
            "uncompressed frames (0) can be read"
        )
    if h["bit_depth"] not in (8, 16, 32):
        raise DataSetError(
            f"{path!r}: header field bit_depth is {h['bit_depth']}; expected 8, 16 or 32"
        )
    for dim in ("width", "height"):
        if not 0 < h[dim] < 2**20:
            raise DataSetError(
                f"{path!r}: header field {dim} is {h[dim]}; expected a frame size in pixels"
            )
    header = SeqHeader(
        path=path,
        version=h["version"],
        width=h["width"],
        height=h["height"],
        bit_depth=h["bit_depth"],
        bit_depth_real=h["bit_depth_real"],
        true_image_size=h["true_image_size"],
        allocated_frames=h["allocated_frames"],
        frame_rate=h["frame_rate"],
        name=_utf16(raw[4:28]),
        description=_utf16(raw[36:548]),
    )
    if header.true_image_size < header.frame_bytes:
        raise DataSetError(
            f"{path!r}: header field true_image_size is {header.true_image_size} bytes, "
            f"smaller than a frame of {header.height} x {header.width} x "
            f"{header.bit_depth // 8} bytes ({header.frame_bytes})"
        )
    return header


def read_metadata(path: str) -> dict:
    """The fields of a ``.seq.metadata`` file this reader knows (empty if it is too short)."""
    with open(path, "rb") as f:
        raw = f.read(_METADATA_OFFSET + struct.calcsize(_METADATA_FORMAT))
    if len(raw) < _METADATA_OFFSET + struct.calcsize(_METADATA_FORMAT):
        return {}
    values = struct.unpack_from(_METADATA_FORMAT, raw, _METADATA_OFFSET)
    pairs = zip(METADATA_FIELDS, values, strict=True)
    return {k: (bool(v) if k == "OkraMode" else int(v)) for k, v in pairs}


#: MRC ``mode`` -> pixel dtype (little-endian files; MRC2014 modes 0, 1, 2 and 6)
MRC_MODES = {0: "i1", 1: "i2", 2: "f4", 6: "u2"}


def read_mrc_reference(path: str, shape: tuple[int, int], data: bool = True):
    """The image of a dark or gain reference (a small MRC file) as float32 of `shape`; with
    ``data=False`` only the header is checked (None)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(1024)
    if len(raw) < 1024:
        raise DataSetError(f"{path!r}: {len(raw)} bytes, shorter than an MRC header (1024)")
    nx, ny, nz, mode = struct.unpack_from("<4i", raw, 0)
    extended = struct.unpack_from("<i", raw, 92)[0]
    big = raw[212] == 0x11  # machine stamp: 0x44 little-, 0x11 big-endian
    if mode not in MRC_MODES:
        raise DataSetError(
            f"{path!r}: MRC mode {mode} cannot be read as a reference; expected one of "
            f"{sorted(MRC_MODES)}"
        )
    if nz != 1 or extended < 0 or (ny, nx) != tuple(shape):
        raise DataSetError(
            f"{path!r}: an MRC image of nx={nx}, ny={ny}, nz={nz}; expected one image of "
            f"the frame size, nx={shape[1]}, ny={shape[0]}, nz=1"
        )
    dtype = np.dtype(MRC_MODES[mode]).newbyteorder(">" if big else "<")
    start = 1024 + extended
    need = start + nx * ny * dtype.itemsize
    if size < need:
        raise DataSetError(
            f"{path!r} is truncated: {size} bytes, its {ny} x {nx} image needs {need}"
        )
    if not data:
        return None
    image = np.fromfile(path, dtype=dtype, count=nx * ny, offset=start)
    return image.reshape(shape).astype(np.float32)


class _MapError(ValueError):
    """A bad-pixel map that cannot be used (the message says why)."""


def _map_int(element, name: str, default: int | None = None) -> int:
    value = element.get(name)
    if value is None and default is not None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _MapError(f"BadPixelMap attribute {name}={value!r} is not an integer") from None


def _span(text: str, what: str, size: int) -> slice:
    """``"5"`` or ``"3-7"`` (inclusive) as a slice of an axis of `size` pixels."""
    try:
        parts = [int(p) for p in text.split("-")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or not 0 <= parts[0] <= parts[-1] < size:
        raise _MapError(f"Defect {what}={text!r} is not a pixel or range in 0..{size - 1}")
    return slice(parts[0], parts[-1] + 1)


def _pick_map(maps: list, binning: int):
    """The map for `binning`: among the unbinned maps (``Binning`` < 2) or, for binned
    frames, the binned ones, the one with the most columns (the first of equals), as
    LiberTEM picks it."""
    wanted = [m for m in maps if (_map_int(m, "Binning", 1) > 1) == (binning > 1)]
    if not wanted:
        return None
    return max(wanted, key=lambda m: _map_int(m, "Columns"))  # max keeps the first of equals


def _defect_mask(element) -> np.ndarray:
    """The map's defects as a boolean ``(Rows, Columns)`` array: ``Row``/``Rows`` mark
    whole rows, ``Column``/``Columns`` whole columns, ``Row`` with ``Column`` one pixel."""
    shape = (_map_int(element, "Rows"), _map_int(element, "Columns"))
    if not (0 < shape[0] < 2**16 and 0 < shape[1] < 2**16):
        raise _MapError(f"BadPixelMap of Rows={shape[0]}, Columns={shape[1]}")
    mask = np.zeros(shape, dtype=bool)
    for defect in element.iter("Defect"):
        a = defect.attrib
        if "Row" in a and "Column" in a:
            mask[_span(a["Row"], "Row", shape[0]), _span(a["Column"], "Column", shape[1])] = True
            continue
        for key in ("Row", "Rows"):
            if key in a:
                mask[_span(a[key], key, shape[0]), :] = True
        for key in ("Column", "Columns"):
            if key in a:
                mask[:, _span(a[key], key, shape[1])] = True
    return mask


def read_bad_pixels(xml_path: str, metadata: dict, shape: tuple[int, int]) -> np.ndarray | None:
    """The excluded pixels of frames of `shape` from the bad-pixel maps of ``xml_path`` and
    the frame geometry of the ``.seq.metadata`` fields `metadata`, as LiberTEM reads them:

    1. the map for the frames' ``HardwareBinning`` (see `_pick_map`);
    2. its defects (`_defect_mask`);
    3. the frame's part of it: ``UnbinnedFrameSizeY`` x ``UnbinnedFrameSizeX`` pixels from
       (``OffsetY``, ``OffsetX``), all halved for binned frames; the whole map where that
       part does not fit in it.

    None, with a `ltdask.MetadataWarning` naming the file and the values, where the maps
    cannot be read or the result is not of the frame `shape` (the frames are then read
    without them). Maps are ``(Rows, Columns)``: LiberTEM makes them ``(Columns, Rows)``,
    the same for square sensors.
    """
    try:
        try:
            root = ET.parse(xml_path).getroot()
        except (ET.ParseError, OSError) as e:
            raise _MapError(f"not readable XML ({e})") from None
        maps = list(root.iter("BadPixelMap"))
        if not maps:
            return None
        binning = int(metadata["HardwareBinning"])
        element = _pick_map(maps, binning)
        if element is None:
            raise _MapError(f"no BadPixelMap for HardwareBinning={binning}")
        mask = _defect_mask(element)
        size = (int(metadata["UnbinnedFrameSizeY"]), int(metadata["UnbinnedFrameSizeX"]))
        offset = (int(metadata["OffsetY"]), int(metadata["OffsetX"]))
        if binning > 1:
            size = (size[0] // 2, size[1] // 2)
            offset = (offset[0] // 2, offset[1] // 2)
        fits = all(0 <= o and o + n <= m for o, n, m in zip(offset, size, mask.shape, strict=True))
        if fits:
            mask = mask[offset[0] : offset[0] + size[0], offset[1] : offset[1] + size[1]]
        if mask.shape != tuple(shape):
            where = f"cropped at OffsetY={offset[0]}, OffsetX={offset[1]} to" if fits else "of"
            raise _MapError(
                f"the map of Rows={_map_int(element, 'Rows')}, Columns="
                f"{_map_int(element, 'Columns')} {where} {mask.shape} does not fit frames of "
                f"{tuple(shape)} (UnbinnedFrameSizeY={metadata['UnbinnedFrameSizeY']}, "
                f"UnbinnedFrameSizeX={metadata['UnbinnedFrameSizeX']}, "
                f"HardwareBinning={binning})"
            )
        return mask
    except _MapError as e:
        warn(
            f"{xml_path!r}: the bad-pixel map is not used: {e}; the frames are read without "
            "excluded pixels (pass excluded_pixels=False to skip the file)",
            MetadataWarning,
        )
        return None
