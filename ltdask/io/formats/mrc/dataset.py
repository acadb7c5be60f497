"""MRC files (MRC2014): stacks of frames after a 1024-byte header, as Velox and ``mrcfile``
write 4D-STEM scans.

The header gives the frame shape ``(ny, nx)``, the frame count ``nz``, the pixel type
(``mode``), the size of an extended header (``nsymbt``: the data starts at byte
``1024 + nsymbt``), the cell size in Å (pixel size = cell / sampling) and the byte order
(the machine stamp). The frames are mapped straight from the file. A *volume stack* (space
group 401-630, ``mrcfile``'s layout for 4-D arrays) holds ``nz / mz`` volumes of ``mz``
sections: its scan shape is ``(nz / mz, mz)``; every other file is a flat stack of ``nz``
frames, whatever ``mz`` says.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import Signature, check_file, signature_of
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet

HEADER_BYTES = 1024
#: mode -> dtype (MRC2014; mode 0 is signed, as mrcfile reads it, RosettaSciIO reads uint8)
MODES = {0: "i1", 1: "i2", 2: "f4", 4: "c8", 6: "u2", 12: "f2"}
MODE_NAMES = {3: "complex int16", 101: "packed 4-bit"}
#: the first two bytes of the machine stamp (byte 212)
STAMPS = {b"DD": "<", b"DA": "<", b"\x11\x11": ">"}
#: record size of the FEI extended header types
FEI_RECORD_BYTES = {b"FEI1": 768, b"FEI2": 888}
#: space groups of volume stacks
VOLUME_STACK_GROUPS = range(401, 631)


@dataclass(frozen=True)
class MrcHeader:
    """What ltdask uses of an MRC header."""

    path: str
    byte_order: str
    #: (nx, ny, nz): columns, rows, sections
    size: tuple[int, int, int]
    mode: int
    #: (mx, my, mz): the sampling grid
    sampling: tuple[int, int, int]
    #: cell size in Å
    cell: tuple[float, float, float]
    space_group: int
    extended_bytes: int
    extended_type: bytes
    version: int
    #: origin in Å
    origin: tuple[float, float, float]
    signature: Signature

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.byte_order + MODES[self.mode])

    @property
    def data_offset(self) -> int:
        return HEADER_BYTES + self.extended_bytes

    @property
    def frame_shape(self) -> tuple[int, int]:
        return (self.size[1], self.size[0])

    @property
    def frames(self) -> int:
        return self.size[2]

    def natural_nav_shape(self) -> tuple[int, ...]:
        """``(nz / mz, mz)`` for a volume stack, else ``(nz,)``."""
        nz, mz = self.size[2], self.sampling[2]
        if self.space_group in VOLUME_STACK_GROUPS and mz > 0:
            if nz % mz:
                raise DataSetError(
                    f"{self.path!r}: a volume stack (space group {self.space_group}) of "
                    f"nz={nz} sections in volumes of mz={mz}, which does not divide it; "
                    "pass nav_shape="
                )
            return (nz // mz, mz)
        return (nz,)

    def pixel_size(self) -> tuple[float | None, float | None]:
        """``(x, y)`` pixel size in Å (cell / sampling) where the header sets one."""
        out: list[float | None] = []
        for cell, m in zip(self.cell[:2], self.sampling[:2], strict=True):
            size = cell / m if m > 0 else 0.0
            out.append(size if math.isfinite(size) and size > 0 else None)
        return out[0], out[1]


def _unpack(raw: bytes, order: str):
    ints = struct.unpack_from(order + "10i", raw, 0)
    cell = struct.unpack_from(order + "3f", raw, 40)
    space_group, extended = struct.unpack_from(order + "2i", raw, 88)
    version = struct.unpack_from(order + "i", raw, 108)[0]
    origin = struct.unpack_from(order + "3f", raw, 196)
    return ints, cell, space_group, extended, version, origin


def _plausible(raw: bytes, order: str, size: int) -> bool:
    ints, _, _, extended, _, _ = _unpack(raw, order)
    nx, ny, nz, mode = ints[:4]
    return mode in MODES and nx > 0 and ny > 0 and nz > 0 and 0 <= extended <= size


def read_mrc_header(path: str) -> MrcHeader:
    """Parse and check the header of the MRC file at `path`.

    Raises
    ------
    ltdask.DataSetError
        The header is not MRC, names a mode ltdask does not read, or describes more data
        than the file holds.
    """
    with open(path, "rb") as f:
        signature = signature_of(os.fstat(f.fileno()))
        raw = f.read(HEADER_BYTES)
    size = signature[2]
    if len(raw) < HEADER_BYTES:
        raise DataSetError(
            f"{path!r} is not an MRC file: {len(raw)} bytes, shorter than the "
            f"{HEADER_BYTES}-byte header"
        )
    order = STAMPS.get(raw[212:214])
    fits = [o for o in ("<", ">") if _plausible(raw, o, size)]
    if order is None or (order not in fits and fits):
        # old writers leave the stamp empty, some set it wrong (as mrcfile's permissive mode
        # does): take the byte order in which the header makes sense
        order = fits[0] if fits else "<"
    ints, cell, space_group, extended, version, origin = _unpack(raw, order)
    nx, ny, nz, mode, _, _, _, mx, my, mz = ints
    where = repr(path)
    if raw[208:211] != b"MAP" and not _plausible(raw, order, size):
        raise DataSetError(
            f"{where} is not an MRC file: no 'MAP ' at byte 208 and the header does not "
            "describe a stack of frames"
        )
    for name, value in (("nx", nx), ("ny", ny), ("nz", nz)):
        if value <= 0:
            raise DataSetError(
                f"{where}: the header says {name}={value}; an image dimension must be >= 1"
            )
    if mode not in MODES:
        known = ", ".join(f"{m} ({np.dtype(d)})" for m, d in MODES.items())
        what = f" ({MODE_NAMES[mode]})" if mode in MODE_NAMES else ""
        raise DataSetError(
            f"{where}: MRC mode {mode}{what} is not supported; ltdask reads modes {known}"
        )
    if extended < 0:
        raise DataSetError(
            f"{where}: the extended header size (nsymbt) is {extended}; it must be >= 0"
        )
    header = MrcHeader(
        path=path,
        byte_order=order,
        size=(nx, ny, nz),
        mode=mode,
        sampling=(mx, my, mz),
        cell=cell,
        space_group=space_group,
        extended_bytes=extended,
        extended_type=raw[104:108],
        version=version,
        origin=origin,
        signature=signature,
    )
    needed = header.data_offset + nx * ny * nz * header.dtype.itemsize
    if size < needed:
        raise DataSetError(
            f"{where} is truncated or its header is wrong: {nz} frames of {ny} x {nx} "
            f"{header.dtype} after {header.data_offset} header bytes need {needed} bytes, "
            f"the file has {size}"
        )
    return header


def _fei_metadata(path: str, header: MrcHeader) -> dict:
    """A few fields of the first record of an FEI1/FEI2 extended header (Velox)."""
    record = FEI_RECORD_BYTES.get(header.extended_type)
    if record is None or header.extended_bytes < record:
        return {}
    with open(path, "rb") as f:
        f.seek(HEADER_BYTES)
        raw = f.read(record)
    order = header.byte_order
    if len(raw) < record or struct.unpack_from(order + "i", raw, 0)[0] != record:
        return {}

    def text(offset: int) -> str:
        return raw[offset : offset + 16].split(b"\0")[0].decode("latin-1").strip()

    out: dict = {}
    for key, value in (("application", text(52)), ("camera", text(435))):
        if value:
            out[key] = value
    px = struct.unpack_from(order + "2d", raw, 156)
    if all(math.isfinite(v) and v > 0 for v in px):
        out["pixel_size_xy"] = px
    dwell = struct.unpack_from(order + "d", raw, 571)[0]
    if math.isfinite(dwell) and dwell > 0:
        out["dwell_time_s"] = dwell
    return out


# -- DE movies: the scan shape is in ``<name>_info.txt`` next to ``<name>_movie.mrc`` ----------
_DE_MOVIE = re.compile(r"(?P<stem>(?P<acq>\d{8}_\d+)(_.+?)?)_movie\.mrc", re.IGNORECASE)
#: the ``_info.txt`` is read only up to this size (it is a page of ``key = value`` lines)
_DE_INFO_BYTES = 1 << 20


def find_de_info(path: str) -> str | None:
    """The ``_info.txt`` of a Direct Electron movie ``YYYYMMDD_<acq>[_suffix]_movie.mrc``."""
    folder, name = os.path.split(path)
    match = _DE_MOVIE.fullmatch(name)
    if match is None:
        return None
    for stem in dict.fromkeys([match["stem"], match["acq"]]):
        candidate = os.path.join(folder, stem + "_info.txt")
        if os.path.isfile(candidate):
            return candidate
    return None


def read_de_info(path: str) -> dict[str, str]:
    """The ``key = value`` lines of a DE ``_info.txt`` (other lines are left out)."""
    try:
        with open(path, "rb") as f:
            text = f.read(_DE_INFO_BYTES).decode("utf-8", errors="replace")
    except OSError as e:
        raise DataSetError(f"cannot read {path!r}: {e.strerror or e}") from None
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def de_scan_shape(info: dict[str, str], frames: int) -> tuple[int, ...] | None:
    """``(y, x)`` of a raster scan (``(repeats, y, x)`` for repeated scans), or None."""
    if info.get("Scan - Enable") != "Enable" or info.get("Scan - Type", "Raster") != "Raster":
        return None
    roi = "ROI " if info.get("Scan - ROI Enable") == "Enable" else ""
    try:
        x = int(info[f"Scan - {roi}Size X"])
        y = int(info[f"Scan - {roi}Size Y"])
    except (KeyError, ValueError):
        return None
    if not (0 < x < 2**31 and 0 < y < 2**31):
        return None
    if frames > x * y and frames % (x * y) == 0:
        return (frames // (x * y), y, x)
    # fewer frames than positions: an aborted scan, its missing frames invalid
    return (y, x) if frames <= x * y else None


class MrcDataSet(FileDataSet):
    """The frames of an MRC file (see :func:`open_mrc`).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, struct
    >>> header = bytearray(1024)
    >>> header[0:16] = struct.pack("<4i", 5, 3, 4, 1)  # nx, ny, nz (frames), mode 1 (int16)
    >>> header[208:216] = b"MAP DD\\0\\0"
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.mrc")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(header) + np.zeros((4, 3, 5), "<i2").tobytes())
    >>> ds = ltdask.open(path, nav_shape=(2, 2))
    >>> type(ds).__name__, ds.sig_shape, ds.dtype, ds.header.mode, ds.attrs()["mrc_mode"]
    ('MrcDataSet', (3, 5), dtype('int16'), 1, 1)
    """

    def __init__(self, path, nav_shape=None, sync_offset=0, dims=None):
        path = check_file(path)
        self.path = path
        header = self.header = read_mrc_header(path)
        info_path = find_de_info(path)
        info = read_de_info(info_path) if info_path else {}
        scan = de_scan_shape(info, header.frames) if nav_shape is None else None
        if nav_shape is None:
            nav_shape = scan or header.natural_nav_shape()
        dtype = header.dtype
        files = [File(path, 0, header.frames, header.data_offset, header.signature)]
        fileset = FileSet(files, header.frame_shape, dtype)
        super().__init__(fileset, Decoder(dtype), nav_shape, sync_offset=sync_offset, dims=dims)
        exttyp = header.extended_type.split(b"\0")[0].decode("latin-1").strip()
        self.metadata = {
            "format": "MRC",
            "mode": header.mode,
            "space_group": header.space_group,
            "extended_header_bytes": header.extended_bytes,
            **({"extended_header_type": exttyp} if exttyp else {}),
            **_fei_metadata(path, header),
        }
        if info_path:
            self.metadata["de_info"] = info_path
            for key, name in (("Camera Model", "camera"), ("Scan - Type", "scan_type")):
                if key in info:
                    self.metadata[name] = info[key]
        px, py = header.pixel_size()
        if px is not None and py is not None:
            # Å -> nm; the origin field is in Å too (RosettaSciIO reads it the same way)
            ox, oy = (o / 10 if math.isfinite(o) else 0.0 for o in header.origin[:2])
            self.calibrate(sig=[(py / 10, oy, "nm"), (px / 10, ox, "nm")])
            self.metadata["pixel_size_nm"] = (py / 10, px / 10)
        if scan is not None:
            self._calibrate_de_scan(info, len(scan))

    def _calibrate_de_scan(self, info: dict[str, str], ndim: int) -> None:
        """The scan step of a DE raster scan (nm) on its y and x dims."""
        steps = []
        for key in ("Specimen Pixel Size Y (nanometers)", "Specimen Pixel Size X (nanometers)"):
            try:
                step = float(info[key])
            except (KeyError, ValueError):
                return
            if not (math.isfinite(step) and step > 0):
                return
            steps.append((step, "nm"))
        self.calibrate(nav=[None] * (ndim - 2) + steps)

    def attrs(self) -> dict:
        return {**super().attrs(), "mrc_mode": self.header.mode}


@takes_calibration
def open_mrc(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> MrcDataSet:
    """Open an MRC file (MRC2014) as a scan of its frames.

    Only the 1024-byte header is read here; the frames are mapped straight from the file.

    Parameters
    ----------
    path
        The ``.mrc`` file.
    nav_shape
        The scan shape. By default: for a Direct Electron movie
        (``YYYYMMDD_<acq>[_suffix]_movie.mrc``) the raster scan of its ``_info.txt``
        (``Scan - Size Y, X``, or the ``ROI`` sizes; ``(repeats, y, x)`` for repeated
        scans); ``(nz / mz, mz)`` for a volume stack (how ``mrcfile`` writes 4-D arrays);
        else all frames in one dim (Velox stacks carry no scan shape).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.

    Returns
    -------
    MrcDataSet
        Frames of ``(ny, nx)`` pixels of the mode's dtype (mode 0 as ``int8``); the signal
        dims calibrated in nm where the header sets a cell size; `metadata` with the mode,
        the extended header and, for Velox files, the FEI record's camera and pixel size.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ltdask.DataSetError
        The header is not MRC, its mode is not supported, or it describes more data than
        the file holds.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, struct
    >>> frames = np.arange(4 * 3 * 5, dtype="<u2").reshape(4, 3, 5)
    >>> header = bytearray(1024)
    >>> header[0:16] = struct.pack("<4i", 5, 3, 4, 6)  # nx, ny, nz, mode 6 (uint16)
    >>> header[208:216] = b"MAP DD\\0\\0"
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.mrc")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(header) + frames.tobytes())
    >>> ds = ltdask.open_mrc(path, nav_shape=(2, 2))
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2, 2), (3, 5), dtype('uint16'))
    >>> bool((ds.to_dask().compute() == frames.reshape(2, 2, 3, 5)).all())
    True
    """
    return MrcDataSet(path, nav_shape=nav_shape, sync_offset=sync_offset, dims=dims)


def is_mrc(path: str) -> bool:
    """Whether `path` has ``MAP`` where an MRC2014 header has it (byte 208)."""
    try:
        with open(path, "rb") as f:
            f.seek(208)
            return f.read(3) == b"MAP"
    except OSError:
        return False
