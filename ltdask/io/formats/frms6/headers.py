"""The headers of PNDetector pnCCD ``.frms6`` acquisitions: the ``.hdr`` INI file and the
1024-byte header of each ``.frms6`` file (little-endian)."""

from __future__ import annotations

import configparser
import os
import re
import struct
from dataclasses import dataclass

from ltdask.exceptions import DataSetError

FILE_HEADER_BYTES = 1024
FRAME_HEADER_BYTES = 64
VERSION = 6
#: the first bytes of every .frms6 file: header size 1024, frame header size 64 (u2 LE)
FRMS6_MAGIC = struct.pack("<HH", FILE_HEADER_BYTES, FRAME_HEADER_BYTES)

_READOUT = re.compile(r'^"?bin:\s*(\d+),\s*windowing:\s*(\d+)\s*x\s*(\d+)\s*"?$')


@dataclass(frozen=True)
class Frms6FileHeader:
    path: str
    width: int  # raw pixels per row (both halves)
    height: int  # raw rows
    num_frames: int  # whole frames in the file
    comment: str

    @property
    def raw_bytes(self) -> int:
        return self.width * self.height * 2

    @property
    def stride(self) -> int:
        return FRAME_HEADER_BYTES + self.raw_bytes


def read_file_header(path: str) -> Frms6FileHeader:
    """Parse and check one ``.frms6`` file header; the frame count is the header's, or the
    file's whole frames where the header says 0 (older files) or more than the file holds."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(FILE_HEADER_BYTES)
    if len(raw) < FILE_HEADER_BYTES:
        raise DataSetError(
            f"{path!r}: {len(raw)} bytes, shorter than the {FILE_HEADER_BYTES}-byte .frms6 "
            "file header; the file is truncated"
        )
    header_size, frame_header_size = struct.unpack_from("<HH", raw, 0)
    version = raw[7]
    if (header_size, frame_header_size, version) != (
        FILE_HEADER_BYTES,
        FRAME_HEADER_BYTES,
        VERSION,
    ):
        raise DataSetError(
            f"{path!r}: not a .frms6 file of version 6 (header size {header_size}, frame header "
            f"size {frame_header_size}, version {version}; expected 1024, 64, 6)"
        )
    width, height = struct.unpack_from("<HH", raw, 88)
    (count,) = struct.unpack_from("<I", raw, 1020)
    if width == 0 or height == 0 or width % 2:
        raise DataSetError(
            f"{path!r}: frames of {height} rows x {width} channels; expected an even, non-zero "
            "width (two detector halves) and at least one row"
        )
    stride = FRAME_HEADER_BYTES + 2 * width * height
    whole = max(0, size - FILE_HEADER_BYTES) // stride
    comment = raw[8:88].split(b"\0", 1)[0].decode("latin-1").strip()
    return Frms6FileHeader(path, width, height, whole if count == 0 else min(count, whole), comment)


def read_hdr(path: str) -> dict:
    """The ``[measurementInfo]`` section of a ``.hdr`` file, with ``binning``, ``window``
    (rows, cols) and ``scan`` (the ``stemimagesize``) parsed."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="latin-1") as f:
            parser.read_file(f)
    except (OSError, configparser.Error) as e:
        raise DataSetError(f"{path!r}: cannot read the .hdr file ({e})") from None
    if "measurementInfo" not in parser:
        raise DataSetError(f"{path!r}: no [measurementInfo] section; sections: {parser.sections()}")
    info = dict(parser["measurementInfo"])
    out: dict = dict(info)
    for key in ("signalframes", "darkframes", "gain", "dwelltimemicroseconds"):
        if key in info:
            try:
                out[key] = int(info[key])
            except ValueError:
                raise DataSetError(f"{path!r}: {key}={info[key]!r} is not an integer") from None
    if "signalframes" not in out:
        raise DataSetError(f"{path!r}: no signalframes entry in [measurementInfo]")
    mode = _READOUT.match(info.get("readoutmode", "").strip())
    if mode is None:
        raise DataSetError(
            f"{path!r}: readoutmode={info.get('readoutmode')!r} is not "
            '"bin: <n>, windowing: <rows> x <cols>"'
        )
    out["binning"] = int(mode.group(1))
    out["window"] = (int(mode.group(2)), int(mode.group(3)))
    if out["binning"] < 1:
        raise DataSetError(f"{path!r}: binning {out['binning']} in readoutmode; expected >= 1")
    if "stemimagesize" in info:
        try:
            out["scan"] = tuple(int(p) for p in info["stemimagesize"].lower().split("x"))
        except ValueError:
            raise DataSetError(
                f"{path!r}: stemimagesize={info['stemimagesize']!r} is not like '64x64'"
            ) from None
    return out
