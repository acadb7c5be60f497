"""A writer of Gatan DigitalMicrograph ``.dm3`` / ``.dm4`` files for the tests, written from
the published descriptions of the format (Greg Jefferis' DM3 notes, Chris Boothroyd's DM4
notes; summarised in ``shared/reference/detector-formats.md`` section 4), independent of
ltdask's reader: RosettaSciIO's reader checks what it writes.

A file is a header and a tree of tags. Structural numbers are big-endian, 4 bytes wide in
DM3 and 8 in DM4; tag values are in the file's byte order (little-endian in every file GMS
writes on a PC). Each DM4 tag carries the size of the rest of the tag after its label.

The tree written here::

    ImageList
      [0] the thumbnail: a small RGBA 2-D image (DataType 23, as GMS writes it)
      [1] ImageData  Calibrations {Brightness, Dimension [one per dim, fastest first]}
                     Data (array of pixels), DataType, Dimensions (fastest first), PixelDepth
          ImageTags  Meta Data {Format, Signal, Data Order Swapped}, Microscope Info {Voltage}
          Name
      [2...] extra, smaller images (``extra_images=``)
    Thumbnails
      [0] ImageIndex = 0
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: numpy dtype -> (ImageData/DataType, element type code of the Data array)
DTYPE_CODES = {
    "i2": (1, 2),
    "f4": (2, 6),
    "c8": (3, 6),  # complex: pairs of float32 elements
    "u1": (6, 10),
    "i4": (7, 3),
    "i1": (9, 9),
    "u2": (10, 4),
    "u4": (11, 5),
    "f8": (12, 7),
    "b1": (14, 8),  # binary images: one byte per pixel
}
#: element type code -> struct format character
FORMATS = {2: "h", 3: "i", 4: "H", 5: "I", 6: "f", 7: "d", 8: "?", 9: "b", 10: "B", 11: "q"}


@dataclass
class Scalar:
    code: int
    value: object


@dataclass
class Array:
    code: int
    #: a numpy array (its bytes are written in the file's byte order) or a buffer of the
    #: right bytes already
    values: object
    count: int


@dataclass
class Raw:
    """A data tag of any definition words and value bytes (for malformed files)."""

    words: list
    payload: bytes


def text(s: str) -> Array:
    """DM's text: an array of UTF-16 code units."""
    units = np.frombuffer(s.encode("utf-16-le"), dtype="<u2")
    return Array(4, units, units.size)


def i32(v) -> Scalar:
    return Scalar(3, int(v))


def u32(v) -> Scalar:
    return Scalar(5, int(v))


def f32(v) -> Scalar:
    return Scalar(6, float(v))


def f64(v) -> Scalar:
    return Scalar(7, float(v))


def boolean(v) -> Scalar:
    return Scalar(8, bool(v))


class Encoder:
    """Turns a tree of ``[(label, value), ...]`` lists into DM bytes (a list of pieces: bytes,
    or numpy arrays written as they are)."""

    def __init__(self, version: int, order: str = "<"):
        self.version = version
        self.order = order
        self.count_fmt = ">Q" if version == 4 else ">I"

    def count(self, n: int) -> bytes:
        return struct.pack(self.count_fmt, n)

    def group(self, entries) -> list:
        pieces: list = [b"\x00\x01", self.count(len(entries))]
        for label, value in entries:
            pieces += self.tag(label, value)
        return pieces

    def tag(self, label: str, value) -> list:
        name = label.encode("latin-1")
        if isinstance(value, list):
            kind, body = 20, self.group(value)
        else:
            kind, body = 21, self.data(value)
        head = struct.pack(">BH", kind, len(name)) + name
        if self.version == 4:
            head += struct.pack(">Q", size_of(body))
        return [head, *body]

    def data(self, value) -> list:
        if isinstance(value, Scalar):
            words = [value.code]
            payload: object = struct.pack(self.order + FORMATS[value.code], value.value)
        elif isinstance(value, Array):
            words = [20, value.code, value.count]
            if isinstance(value.values, np.ndarray):
                dt = np.dtype(FORMATS[value.code]).newbyteorder(self.order)
                raw = value.values
                if raw.dtype.kind == "c":  # complex pixels: pairs of float elements
                    raw = raw.astype(raw.dtype.newbyteorder(self.order)).view(dt)
                payload = raw if raw.dtype == dt else raw.astype(dt)
            else:
                payload = value.values
        elif isinstance(value, Raw):
            words, payload = value.words, value.payload
        else:
            raise TypeError(value)
        info = b"%%%%" + self.count(len(words)) + b"".join(self.count(w) for w in words)
        return [info, payload]


def size_of(pieces) -> int:
    return sum(p.nbytes if isinstance(p, (np.ndarray, memoryview)) else len(p) for p in pieces)


def calibration_group(scale=1.0, origin=0.0, units="") -> list:
    return [("Origin", f32(origin)), ("Scale", f32(scale)), ("Units", text(units))]


def image_group(
    data,
    shape: tuple[int, ...],
    dtype,
    calibrations=None,
    swapped: bool | None = True,
    name: str = "scan",
    voltage: float | None = 300e3,
    rgba: bool = False,
    kind: str | None = "Diffraction image",
    signal: str | None = None,
    image_tags: tuple = (),
) -> list:
    """One ImageList entry. `shape` and `calibrations` are in numpy order (slowest first);
    calibrations are DM's ``(scale, origin, units)`` with position ``(i - origin) * scale``.
    With `rgba`, uint32 `data` is written as an RGBA image (DataType 23). `kind` and
    `signal` are the ``Meta Data`` tags ``Format`` (what the image is: "Image", "Diffraction
    image", "Spectrum", "Spectrum image") and ``Signal`` (the spectroscopy: "EELS", "X-ray",
    "CL"); None leaves the tag out. `image_tags` are more ``(label, value)`` ImageTags."""
    dt = np.dtype(dtype)
    data_type, element = (23, 5) if rgba else DTYPE_CODES[dt.str[1:]]
    count = int(np.prod(shape)) * (2 if dt.kind == "c" else 1)
    dims_dm = list(shape)[::-1]
    cals = list(calibrations)[::-1] if calibrations is not None else [(1.0, 0.0, "")] * len(shape)
    meta: list = []
    if kind is not None:
        meta.append(("Format", text(kind)))
    if signal is not None:
        meta.append(("Signal", text(signal)))
    if swapped is not None:
        meta.append(("Data Order Swapped", boolean(swapped)))
    tags: list = [("Meta Data", meta)]
    if voltage is not None:
        tags.append(("Microscope Info", [("Voltage", f64(voltage))]))
    tags += list(image_tags)
    return [
        (
            "ImageData",
            [
                (
                    "Calibrations",
                    [
                        ("Brightness", calibration_group(1.0, 0.0, "counts")),
                        ("Dimension", [("", calibration_group(*c)) for c in cals]),
                        ("DisplayCalibratedUnits", boolean(True)),
                    ],
                ),
                ("Data", Array(element, data, count)),
                ("DataType", i32(data_type)),
                ("Dimensions", [("", u32(d)) for d in dims_dm]),
                ("PixelDepth", u32(dt.itemsize)),
            ],
        ),
        ("ImageTags", tags),
        ("Name", text(name)),
        ("UniqueID", [("", u32(1)), ("", u32(2)), ("", u32(3)), ("", u32(4))]),
    ]


def write_dm(
    path,
    data: np.ndarray,
    version: int = 4,
    calibrations=None,
    swapped: bool | None = True,
    byte_order: str = "<",
    extra_images: tuple[np.ndarray, ...] = (),
    name: str = "scan",
    pad: int = 0,
    **tags,
) -> Path:
    """Write `data` (numpy order, nav dims first) as the main image of a DM3/DM4 file.

    `pad` lengthens a label before the image by that many bytes: the pixels start at another
    offset (GMS aligns nothing: any offset occurs). `tags` (``kind``, ``signal``,
    ``image_tags``) go to the main image's `image_group`."""
    thumb = np.arange(8 * 6, dtype=np.uint32).reshape(8, 6) * 0x01010101
    images = [
        ("", image_group(thumb, thumb.shape, thumb.dtype, swapped=None, name="thumb", rgba=True)),
        ("", image_group(data, data.shape, data.dtype, calibrations, swapped, name, **tags)),
    ]
    for k, extra in enumerate(extra_images):
        images.append(("", image_group(extra, extra.shape, extra.dtype, name=f"extra {k}")))
    root = [
        (
            "ApplicationBounds" + "_" * pad,
            [("", i32(0)), ("", i32(0)), ("", i32(900)), ("", i32(1400))],
        ),
        ("ImageList", images),
        ("Thumbnails", [("", [("ImageIndex", u32(0)), ("SourceSize_Pixels", [])])]),
    ]
    return write_tree(path, root, version, byte_order)


def write_tree(path, root: list, version: int = 4, byte_order: str = "<") -> Path:
    """Write a tree of ``(label, value)`` lists as a DM3/DM4 file."""
    path = Path(path)
    enc = Encoder(version, byte_order)
    body = enc.group(root)
    tail = b"\0" * (8 if version == 4 else 4)
    size_fmt = ">Q" if version == 4 else ">I"
    total = 4 + struct.calcsize(size_fmt) + 4 + size_of(body) + len(tail)
    head = struct.pack(">I", version) + struct.pack(size_fmt, total)
    head += struct.pack(">I", 1 if byte_order == "<" else 0)
    with open(path, "wb") as f:
        for piece in (head, *body, tail):
            f.write(piece)
    return path
