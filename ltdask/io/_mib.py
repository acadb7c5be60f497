"""Quantum Detectors Merlin ``.mib`` files (with their optional ``.hdr`` acquisition header).

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
...   ``MQ1A``, timestamp, exposure, counter depth (1, 6, 12 or 24)
====  ===================  ============================================================

The integer modes are plain big-endian pixels after each header: a :class:`FileSet` with a
frame header and the byte-swapping :class:`Decoder`. Raw mode packs the counters in 64-bit
words and interleaves the chips of a quad; :mod:`ltdask.io._mib_decode` holds its read ranges
and decoders.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io._mib_decode import decode_raw, raw_read_ranges
from ltdask.io._raw import check_file
from ltdask.io.dataset import check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet

#: stored dtype of the integer pixel types (LiberTEM-rs reads ``U01`` as one byte per pixel)
PIXEL_TYPES = {"U01": "u1", "U08": "u1", "U16": ">u2", "U32": ">u4", "U64": ">u8"}
RAW_PIXEL_TYPE = "R64"
COUNTER_DEPTHS = (1, 6, 12, 24)
#: raw mode: bits of one pixel's field in the 64-bit words, and the decoded dtype
RAW_FIELD_BITS = {1: 1, 6: 8, 12: 16, 24: 16}
RAW_DTYPES = {1: "u1", 6: "u1", 12: "u2", 24: "u4"}
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
    fields = head.split(b",", 3)
    header_bytes = _int_field(path, fields, 2, "header")
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
    return MibHeader(path, sequence, header_bytes, chips, width, height, pixel_type, layout, depth)


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


# -- .hdr acquisition headers --------------------------------------------------------------------
def read_hdr(path: str) -> dict[str, str]:
    """The ``key: value`` lines of a Merlin ``.hdr`` file (between ``HDR`` and ``End``)."""
    with open(path, "rb") as f:
        text = f.read(1 << 20).decode("latin-1")
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


def _hdr_int(hdr: dict[str, str], key: str, path: str) -> int | None:
    if key not in hdr or hdr[key] == "":
        return None
    try:
        return int(hdr[key])
    except ValueError:
        raise DataSetError(
            f"{path!r}: {key!r} is {hdr[key]!r} in the .hdr file; expected an integer"
        ) from None


def nav_shape_from_hdr(hdr: dict[str, str], path: str, image_count: int) -> tuple[int, ...]:
    """``(ScanY, ScanX)`` where the header has them, else ``(frames // fpt, fpt)`` with
    ``fpt`` the frames per trigger (a scan line), else all frames in one dim."""
    scan_x = _hdr_int(hdr, "ScanX", path)
    scan_y = _hdr_int(hdr, "ScanY", path)
    if scan_x and scan_y and scan_x > 0 and scan_y > 0:
        return (scan_y, scan_x)
    frames = _hdr_int(hdr, "Frames in Acquisition (Number)", path)
    if not frames or frames <= 0:
        frames = image_count
    per_trigger = _hdr_int(hdr, "Frames per Trigger (Number)", path)
    if per_trigger and 1 < per_trigger <= frames:
        return (frames // per_trigger, per_trigger)
    return (frames,)


# -- finding the files -------------------------------------------------------------------------
def _stem_without_counter(stem: str) -> str:
    return re.sub(r"[_-]?\d+$", "", stem)


def find_hdr(mib_path: str) -> str | None:
    """The ``.hdr`` next to a ``.mib``: same name, or the name without its file counter."""
    folder, name = os.path.split(mib_path)
    stem = os.path.splitext(name)[0]
    for candidate in dict.fromkeys([stem, _stem_without_counter(stem)]):
        for ext in (".hdr", ".HDR"):
            path = os.path.join(folder, candidate + ext)
            if os.path.isfile(path):
                return path
    return None


def _files_matching(path: str, pattern: str) -> list[str]:
    """The regular files next to `path` whose names match `pattern` (case-insensitive)."""
    folder = os.path.dirname(path)
    regex = re.compile(pattern, re.IGNORECASE)
    try:
        names = os.listdir(folder or ".")
    except OSError as e:
        raise DataSetError(f"cannot list the folder of {path!r}: {e}") from e
    paths = [os.path.join(folder, n) for n in names if regex.fullmatch(n)]
    return [p for p in paths if os.path.isfile(p)]


def mib_files_for_hdr(hdr_path: str) -> list[str]:
    """The ``.mib`` files an acquisition header describes: ``NAME.mib``, ``NAME<n>.mib`` and
    ``NAME_<n>.mib`` next to ``NAME.hdr``."""
    folder, name = os.path.split(hdr_path)
    stem = os.path.splitext(name)[0]
    paths = _files_matching(hdr_path, re.escape(stem) + r"([_-]?\d+)?\.mib")
    if not paths:
        raise DataSetError(
            f"{hdr_path!r}: no .mib files next to it (looked for {stem}.mib, {stem}<n>.mib "
            f"and {stem}_<n>.mib in {folder or '.'!r}); pass the .mib files instead"
        )
    return paths


def mib_siblings(mib_path: str) -> list[str]:
    """The ``.mib`` files of the acquisition `mib_path` belongs to, as LiberTEM finds them:
    the name without its trailing file counter, then any counter (``scan_1.mib`` →
    ``scan_<n>.mib``; ``scan.mib`` → ``scan.mib``, ``scan<n>.mib``)."""
    prefix = re.sub(r"\d+$", "", os.path.splitext(os.path.basename(mib_path))[0])
    siblings = _files_matching(mib_path, re.escape(prefix) + r"\d*\.mib")
    if not any(os.path.samefile(p, mib_path) for p in siblings):
        siblings.append(mib_path)
    return siblings


def _natural_key(path: str):
    name = os.path.basename(path)
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


# -- layout of the stored frames ---------------------------------------------------------------
@dataclass(frozen=True)
class MibGeometry:
    """How a header's frames are stored and what they decode to."""

    sig_shape: tuple[int, ...]
    dtype: np.dtype  # decoded pixels (native byte order for raw data)
    stored_dtype: np.dtype  # pixels as stored (integer modes)
    data_bytes: int  # bytes of one frame's pixels
    field_bits: int = 0  # raw: bits per pixel field in the 64-bit words
    quad: bool = False
    gap: int = 0
    chip_shape: tuple[int, int] = (0, 0)
    low_offset: int = 0  # raw depth 24: bytes from the high to the low sub-frame


def geometry(header: MibHeader) -> MibGeometry:
    """The frame layout a header describes; a `DataSetError` for layouts that cannot be read."""
    path = header.path
    if not header.raw:
        stored = np.dtype(PIXEL_TYPES[header.pixel_type])
        sig = (header.height, header.width)
        return MibGeometry(sig, stored.newbyteorder("="), stored, math.prod(sig) * stored.itemsize)
    depth = header.counter_depth
    if depth is None:
        raise DataSetError(
            f"{path!r}: raw (R64) frames, but the frame header has no counter depth (the "
            "'MQ1A,...' part); cannot decode raw data without it"
        )
    field_bits = RAW_FIELD_BITS[depth]
    ppw = 64 // field_bits
    raw_w = header.width
    if depth == 24:
        # two 12-bit sub-frames side by side in the header's width
        if raw_w % 2:
            raise DataSetError(
                f"{path!r}: raw 24-bit frames need an even width (two 12-bit halves); "
                f"frame header field 4 (width) is {raw_w}"
            )
        raw_w //= 2
    raw_h = header.height
    sub_bytes = raw_w * raw_h * field_bits // 8
    data_bytes = sub_bytes * (2 if depth == 24 else 1)
    low_offset = sub_bytes if depth == 24 else 0
    dtype = np.dtype(RAW_DTYPES[depth])
    square_layout = header.layout.rstrip("G")
    if header.chips == 1 or square_layout == "1x1":
        if (raw_w * raw_h) % ppw:
            raise DataSetError(
                f"{path!r}: a raw {depth}-bit frame of {raw_h} x {raw_w} pixels is not a whole "
                f"number of 64-bit words ({ppw} pixels each)"
            )
        return MibGeometry(
            (raw_h, raw_w), dtype, dtype, data_bytes, field_bits, low_offset=low_offset
        )
    if square_layout == "2x2" and header.chips == 4:
        chip_w = raw_w // 4
        if raw_w % 4 or chip_w % ppw:
            raise DataSetError(
                f"{path!r}: raw quad frames of width {raw_w} do not split into four chips of "
                f"whole 64-bit words ({ppw} pixels each)"
            )
        gap = header.gap
        sig = (2 * raw_h + gap, 2 * chip_w + gap)
        return MibGeometry(
            sig, dtype, dtype, data_bytes, field_bits, True, gap, (raw_h, chip_w), low_offset
        )
    raise DataSetError(
        f"{path!r}: raw (R64) frames with chip layout {header.layout!r} and {header.chips} "
        "chips cannot be decoded; raw data is supported for 1x1 and 2x2 (quad) layouts "
        "(record U08/U16/U32 frames for other layouts)"
    )


def files_for_headers(headers: Sequence[MibHeader], geom: MibGeometry) -> list[File]:
    """One `File` per header's file, its frame count from its size (checked)."""
    stride = headers[0].header_bytes + geom.data_bytes
    files = []
    first = 0
    for h in headers:
        size = os.path.getsize(h.path)
        n, rest = divmod(size, stride)
        if n == 0 or rest:
            raise DataSetError(
                f"{h.path!r} is truncated or not what its header says: {size} bytes is not a "
                f"whole number of frames of {stride} bytes ({h.header_bytes} header + "
                f"{geom.data_bytes} pixel bytes for {h.pixel_type} {h.width} x {h.height}"
                f"{'' if h.counter_depth is None else f', {h.counter_depth}-bit'}); "
                f"{rest} bytes left over after {n} frames"
                + (
                    f"; to read the {n} whole frames of an interrupted acquisition, copy the "
                    f"first {n * stride} bytes to a new file"
                    if n
                    else ""
                )
            )
        with open(h.path, "rb") as f:
            f.seek((n - 1) * stride)
            magic = f.read(4)
        if magic != b"MQ1,":
            raise DataSetError(
                f"{h.path!r}: frame {n - 1} does not start with a frame header ({magic!r} at "
                f"byte {(n - 1) * stride}); the frames are not all {stride} bytes long"
            )
        files.append(File(h.path, first, n, 0))
        first += n
    return files


class MibRawFileSet(FileSet):
    """Raw (R64) frames: packed 64-bit words, read through :mod:`ltdask.io._mib_decode`."""

    def __init__(self, files, sig_shape, dtype, frame_header_bytes, geom: MibGeometry):
        super().__init__(
            files,
            sig_shape,
            dtype,
            frame_header_bytes,
            bits_per_px=geom.field_bits * (2 if geom.low_offset else 1),
        )
        self._data_bytes = geom.data_bytes
        chip_h, chip_w = geom.chip_shape
        self.layout = np.array(
            [
                self.frame_header_bytes,
                self.frame_header_bytes + geom.data_bytes,
                64 // geom.field_bits,
                geom.low_offset,
                int(geom.quad),
                geom.gap,
                chip_h,
                chip_w,
            ],
            dtype=np.int64,
        )

    @property
    def frame_bytes(self) -> int:
        return self._data_bytes

    def read_ranges(self, frames: np.ndarray, depth: int, slices: np.ndarray):
        return raw_read_ranges(
            np.ascontiguousarray(frames, dtype=np.int64),
            int(depth),
            slices,
            self.table,
            np.array(self.sig_shape, dtype=np.int64),
            self.layout,
        )

    def straight_view(self, buffers, file_idx):
        return None

    def __dask_tokenize__(self):
        return (super().__dask_tokenize__(), self.layout.tobytes())


class MibRawDecoder(Decoder):
    """Decodes raw (R64) read ranges into pixels."""

    def __init__(self, dtype, field_bits: int, counter_depth: int, gap: int):
        super().__init__(dtype)
        self.field_bits = int(field_bits)
        self.counter_depth = int(counter_depth)
        self.gap = int(gap)
        # depth 24 adds its two halves; gap pixels are never written
        self.clear_first = self.counter_depth == 24 or self.gap > 0

    @property
    def is_plain(self) -> bool:
        return False

    def _decode_file(self, src, file_idx, ranges, out):
        decode_raw(src, file_idx, ranges, self.field_bits, self.counter_depth == 24, out)

    def __dask_tokenize__(self):
        return (super().__dask_tokenize__(), self.field_bits, self.counter_depth, self.gap)


# -- the dataset -------------------------------------------------------------------------------
class MibDataSet(FileDataSet):
    """A Merlin acquisition in one or more ``.mib`` files (see :func:`open_mib`)."""

    def __init__(
        self, path, nav_shape=None, sig_shape=None, sync_offset=0, dims=None, disable_glob=False
    ):
        mib_paths, hdr_path = _resolve_paths(path, disable_glob)
        headers = sorted(
            (read_mib_header(p) for p in mib_paths),
            key=lambda h: (h.sequence, _natural_key(h.path)),
        )
        first = headers[0]
        self.path = first.path if len(headers) == 1 else f"{first.path} (+{len(headers) - 1} files)"
        for h in headers[1:]:
            if h.describe() != first.describe():
                raise DataSetError(
                    f"{h.path!r} does not match {first.path!r}: {_difference(h, first)}; all "
                    "files of a scan need the same frame layout"
                )
        self.header = first
        self.hdr_path = hdr_path
        hdr = read_hdr(hdr_path) if hdr_path else None
        if hdr is not None and first.raw and first.counter_depth is None:
            depth = _hdr_int(hdr, "Counter Depth (number)", hdr_path)
            if depth in COUNTER_DEPTHS:
                headers = [dataclasses.replace(h, counter_depth=depth) for h in headers]
                first = self.header = headers[0]
        geom = geometry(first)
        files = files_for_headers(headers, geom)
        image_count = files[-1].first_frame + files[-1].num_frames

        natural_sig = geom.sig_shape
        if sig_shape is None:
            sig = natural_sig
        else:
            sig = check_shape(sig_shape, "sig_shape", self.path)
            if math.prod(sig) != math.prod(natural_sig) or (geom.quad and sig != natural_sig):
                expected = (
                    f"{natural_sig} (raw quad frames cannot be reshaped)"
                    if geom.quad
                    else f"{math.prod(natural_sig)} pixels, like {natural_sig}"
                )
                raise DataSetError(
                    f"{self.path}: sig_shape={sig} does not fit the frames; expected {expected}"
                )
        if nav_shape is None:
            if hdr is not None:
                nav_shape = nav_shape_from_hdr(hdr, hdr_path, image_count)
            else:
                nav_shape = (image_count,)

        if first.raw:
            fileset: FileSet = MibRawFileSet(files, sig, geom.dtype, first.header_bytes, geom)
            decoder: Decoder = MibRawDecoder(
                geom.dtype, geom.field_bits, first.counter_depth, geom.gap
            )
        else:
            fileset = FileSet(files, sig, geom.stored_dtype, first.header_bytes)
            decoder = Decoder(geom.stored_dtype)
        super().__init__(fileset, decoder, nav_shape, sync_offset=sync_offset, dims=dims)

    def attrs(self) -> dict:
        h = self.header
        attrs = {
            **super().attrs(),
            "mib_pixel_type": h.pixel_type,
            "mib_chip_layout": h.layout,
            "mib_chips": h.chips,
        }
        if h.counter_depth is not None:
            attrs["mib_counter_depth"] = h.counter_depth
        if self.hdr_path:
            attrs["mib_hdr"] = self.hdr_path
        return attrs


def _difference(a: MibHeader, b: MibHeader) -> str:
    names = ("header size", "chips", "width", "height", "pixel type", "chip layout", "depth")
    diffs = [
        f"{name} {x!r} vs {y!r}"
        for name, x, y in zip(names, a.describe(), b.describe(), strict=True)
        if x != y
    ]
    return ", ".join(diffs)


def _resolve_paths(path, disable_glob: bool = False) -> tuple[list[str], str | None]:
    """``(mib_paths, hdr_path)`` for what `open_mib` was given."""
    if isinstance(path, (str, os.PathLike)):
        path = check_file(path)
        if path.lower().endswith(".hdr"):
            return mib_files_for_hdr(path), path
        return ([path] if disable_glob else mib_siblings(path)), find_hdr(path)
    paths = [check_file(p) for p in path]
    if not paths:
        raise DataSetError("open_mib: no files given")
    hdrs = [p for p in paths if p.lower().endswith(".hdr")]
    if hdrs:
        raise DataSetError(
            f"open_mib: {hdrs[0]!r} is an acquisition header; pass either the .hdr file alone "
            "or a list of .mib files"
        )
    return paths, find_hdr(min(paths, key=_natural_key))


def open_mib(
    path: PathLike | Sequence[PathLike],
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
    disable_glob: bool = False,
) -> MibDataSet:
    """Open a Quantum Detectors Merlin acquisition (``.mib`` files, optionally a ``.hdr``).

    Only the first frame header of each file (and the ``.hdr``) is read here.

    Parameters
    ----------
    path
        A ``.mib`` file, which opens the whole acquisition it belongs to (as LiberTEM: the
        files next to it whose names differ only in the trailing file counter, e.g.
        ``scan_1.mib``, ``scan_2.mib``, …); a list of ``.mib`` files that together hold one
        scan; or a ``.hdr`` acquisition header, which opens ``NAME.mib`` / ``NAME<n>.mib``
        next to ``NAME.hdr``. Frames come in the order of the files' first sequence numbers.
    nav_shape
        The scan shape. By default from the ``.hdr`` file (the one given, or one next to the
        ``.mib`` with the same name, with or without its file counter): ``(ScanY, ScanX)``
        where present, else ``(frames // frames_per_trigger, frames_per_trigger)``; without
        a ``.hdr``, all frames in one dim.
    sig_shape
        Reinterpret the frames with another shape of the same number of pixels (not for raw
        quad data).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.
    disable_glob
        Open only the ``.mib`` file given, not the other files of its acquisition.

    Returns
    -------
    MibDataSet
        Pixels as ``uint8`` (``U08``, raw 1 and 6 bit), ``uint16`` (``U16``, raw 12 bit) or
        ``uint32`` (``U32``, raw 24 bit), oriented as the detector stores the assembled image
        (row 0 first; RosettaSciIO/HyperSpy show it flipped upside down). Raw (``R64``)
        frames of 1x1 and 2x2 (quad, optionally with ``G`` gap pixels) layouts are decoded
        tile by tile.

    Raises
    ------
    FileNotFoundError
        A file does not exist.
    ltdask.DataSetError
        A header is malformed (the message names the file and the field), a file is truncated,
        the files do not match each other, or the raw layout cannot be decoded.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> frames = np.arange(2 * 3 * 4, dtype=">u2").reshape(2, 3, 4)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.mib")
    >>> with open(path, "wb") as f:
    ...     for i, frame in enumerate(frames):
    ...         header = f"MQ1,{i + 1:06d},00384,01,0004,0003,U16,   1x1,01,,MQ1A,,,12,"
    ...         _ = f.write(header.encode().ljust(384, b"\\0") + frame.tobytes())
    >>> ds = ltdask.open_mib(path)
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2,), (3, 4), dtype('uint16'))
    >>> bool((ds.to_dask().compute() == frames).all())
    True
    """
    return MibDataSet(path, nav_shape, sig_shape, sync_offset, dims, disable_glob)
