"""NanoMEGAS ``.blo`` block files (ASTAR precession diffraction scans).

A 240-byte little-endian header (scan and frame sizes, scan steps, beam energy...), a note
text, a virtual bright-field image, then one record per scan position: a 6-byte header
(``AA 55`` and the frame's index as a u32) and a square frame of 8-bit pixels (16-bit where
the note says ``Blo Bit Depth: 16 bits``). The frames are read straight from the file, the
record headers skipped as frame headers.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, signature_of, stat_regular_file
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.records import frame_shape, whole_records

BLO_MAGIC = b"IMGBLO"
#: 8-bit files; newer ones (that may say 16 bits in their note)
MAGICS = (0x0102, 0x0103)
HEADER_BYTES = 240
RECORD_HEADER_BYTES = 6
RECORD_MARK = b"\xaa\x55"

HEADER_DTYPE = np.dtype(
    [
        ("id", "S6"),
        ("magic", "<u2"),
        ("vbf_offset", "<u4"),
        ("data_offset", "<u4"),
        ("flags", "<u4"),
        ("dp_size", "<u2"),
        ("dp_rotation", "<u2"),
        ("nx", "<u2"),
        ("ny", "<u2"),
        ("scan_rotation", "<u2"),
        ("step_x", "<f8"),
        ("step_y", "<f8"),
        ("beam_energy", "<u4"),
        ("sdp", "<u2"),
        ("camera_length", "<u4"),
        ("acquisition_time", "<f8"),
        ("centering", "<f8", (8,)),
        ("distortion", "<f8", (14,)),
    ]
)
assert HEADER_DTYPE.itemsize == HEADER_BYTES


def read_header(path: str) -> tuple[np.void, str]:
    """The header record and the note text of a ``.blo`` file (checked)."""
    size = stat_regular_file(path).st_size
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES:
            raise DataSetError(
                f"{path!r} is truncated: {len(head)} bytes, shorter than the "
                f"{HEADER_BYTES}-byte block file header"
            )
        h = np.frombuffer(head, HEADER_DTYPE)[0]
        if bytes(h["id"]) != BLO_MAGIC:
            raise DataSetError(f"{path!r} is not a block file: it starts with {head[:6]!r}")
        magic = int(h["magic"])
        if magic not in MAGICS:
            raise DataSetError(
                f"{path!r}: unknown block file version {magic:#06x}; expected one of "
                f"{', '.join(f'{m:#06x}' for m in MAGICS)}"
            )
        vbf, data = int(h["vbf_offset"]), int(h["data_offset"])
        if not HEADER_BYTES <= vbf <= data <= size:
            raise DataSetError(
                f"{path!r}: the header's offsets (virtual bright field at {vbf}, frames at "
                f"{data}) do not fit a file of {size} bytes after a {HEADER_BYTES}-byte header"
            )
        f.seek(HEADER_BYTES)
        note = f.read(min(vbf - HEADER_BYTES, 2**20))
    return h, note.decode("latin-1").strip("\0")


def bit_depth(note: str, magic: int) -> int:
    """8, or what a newer file's note says (``Blo Bit Depth: 16 bits``)."""
    if magic == 0x0102:
        return 8
    for line in note.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "blo bit depth":
            value = value.strip().lower()
            if value.endswith("bits") and value[:-4].strip().isdigit():
                return int(value[:-4])
    return 8


def _acquisition_time(serial: float) -> str | None:
    """An OLE serial date (days since 1899-12-30) as ISO text."""
    if not math.isfinite(serial) or not 1 < serial < 2_958_465:
        return None
    stamp = datetime.datetime(1899, 12, 30) + datetime.timedelta(days=serial)
    return stamp.isoformat(timespec="seconds")


class BloDataSet(FileDataSet):
    """A NanoMEGAS block file (see :func:`open_blo`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import BloDataSet
    >>> issubclass(BloDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.blo")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_blo(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.blo' is truncated: 10 bytes, shorter than the 240-byte block file header
    >>> ds = ltdask.open_blo("/data/scan.blo")  # doctest: +SKIP
    >>> ds.header["nx"], ds.header["ny"], ds.metadata["bit_depth"]  # doctest: +SKIP
    (144, 144, 8)
    >>> vbf = ds.virtual_bright_field()  # the file's own image, (ny, nx)  # doctest: +SKIP
    """

    def __init__(self, path, nav_shape=None, sig_shape=None, sync_offset=0, dims=None):
        path = check_file(path)
        self.path = path
        h, note = read_header(path)
        magic = int(h["magic"])
        bits = bit_depth(note, magic)
        if bits not in (8, 16):
            raise DataSetError(f"{path!r}: the note says {bits}-bit pixels; expected 8 or 16")
        dtype = np.dtype(f"<u{bits // 8}")
        edge, nx, ny = int(h["dp_size"]), int(h["nx"]), int(h["ny"])
        if min(edge, nx, ny) == 0:
            raise DataSetError(
                f"{path!r}: the header gives frames of {edge} x {edge} pixels in a scan of "
                f"{ny} x {nx}; all must be at least 1"
            )
        data_offset = int(h["data_offset"])
        stride = RECORD_HEADER_BYTES + edge * edge * dtype.itemsize
        signature = signature_of(stat_regular_file(path))
        count = whole_records(path, signature[2], data_offset, stride)
        if count == 0:
            raise DataSetError(
                f"{path!r} holds no whole frame: {signature[2]} bytes, frames of {stride} "
                f"bytes from byte {data_offset}"
            )
        count = min(count, nx * ny)  # anything after the scan's records is not a frame
        self._check_records(path, data_offset, stride, count)
        #: the header's fields (names of `HEADER_DTYPE`), as Python numbers
        self.header = {
            name: h[name].tolist()
            for name in HEADER_DTYPE.names or ()
            if name not in ("id", "centering", "distortion")
        }
        self.note = note
        self.metadata = {
            "detector": "NanoMEGAS block file",
            "version": f"{magic:#06x}",
            "bit_depth": bits,
            "beam_energy_kV": int(h["beam_energy"]) / 1000,
            "camera_length": int(h["camera_length"]),
            "scan_rotation_deg": int(h["scan_rotation"]) / 100,
            "dp_rotation": int(h["dp_rotation"]),
            "acquisition_time": _acquisition_time(float(h["acquisition_time"])),
            "note": " / ".join(line.strip() for line in note.splitlines() if line.strip()),
        }
        sig = frame_shape(sig_shape, (edge, edge), path)
        nav = (ny, nx) if nav_shape is None else nav_shape
        fileset = FileSet([File(path, 0, count, data_offset, signature)], sig, dtype, 6)
        super().__init__(fileset, Decoder(dtype), nav, sync_offset=sync_offset, dims=dims)
        self.calibrate(nav=self._nav_calibration(), sig=self._sig_calibration())

    @staticmethod
    def _check_records(path: str, data_offset: int, stride: int, count: int) -> None:
        """The first and last records start with their mark and index: the offsets and the
        frame size are right."""
        with open(path, "rb") as f:
            for i in sorted({0, count - 1}):
                f.seek(data_offset + i * stride)
                head = f.read(RECORD_HEADER_BYTES)
                index = int.from_bytes(head[2:], "little")
                if head[:2] != RECORD_MARK or index != i:
                    raise DataSetError(
                        f"{path!r}: the record of frame {i} at byte {data_offset + i * stride} "
                        f"starts with {head!r}, not AA 55 and its index {i}; the header's "
                        f"frame offset or frame size does not describe the file"
                    )

    def _nav_calibration(self):
        if len(self.nav_shape) != 2:
            return None
        steps = [self.header["step_y"], self.header["step_x"]]
        if not all(math.isfinite(s) and s > 0 for s in steps):
            return None
        return [(s, "nm") for s in steps]

    def _sig_calibration(self):
        sdp = self.header["sdp"]
        if sdp == 0 or len(self.sig_shape) != 2:
            return None
        return (100.0 / sdp, "cm")  # the header holds 100 x pixels per cm

    def virtual_bright_field(self) -> np.ndarray:
        """The file's virtual bright-field image, ``(NY, NX)`` uint8."""
        ny, nx = self.header["ny"], self.header["nx"]
        with open(self.fileset.files[0].path, "rb") as f:
            f.seek(self.header["vbf_offset"])
            raw = f.read(ny * nx)
        if len(raw) < ny * nx:
            raise DataSetError(f"{self.path!r}: the virtual bright field is cut off")
        return np.frombuffer(raw, np.uint8).reshape(ny, nx).copy()

    def attrs(self) -> dict:
        return {**super().attrs(), "blo_bit_depth": self.metadata["bit_depth"]}


@takes_calibration
def open_blo(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> BloDataSet:
    """Open a NanoMEGAS ``.blo`` block file.

    Only the header and the first and last frame records' 6-byte headers are read here.

    Parameters
    ----------
    path
        The ``.blo`` file.
    nav_shape
        The scan shape; ``(NY, NX)`` of the header by default.
    sig_shape
        Reinterpret the square frames with another shape of as many pixels.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the start.
    dims
        Names of the nav and sig dims.

    Returns
    -------
    BloDataSet
        uint8 frames (uint16 where a newer file's note says 16 bits); nav dims calibrated
        by the scan steps (nm) and signal dims by the header's pixels per cm; the header's
        details in ``metadata``.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ltdask.DataSetError
        Not a block file, a header whose sizes and offsets do not fit the file, or frame
        records without their ``AA 55`` mark and index. A file that ends inside a frame (an
        interrupted acquisition) is read without that frame, with a
        `ltdask.MissingFramesWarning`; the missing positions are invalid in results.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> from ltdask.io.formats.blo.dataset import HEADER_DTYPE
    >>> frames = np.arange(6 * 16, dtype=np.uint8).reshape(6, 4, 4)
    >>> header = np.zeros(1, HEADER_DTYPE)
    >>> header[["id", "magic", "vbf_offset", "data_offset", "dp_size", "nx", "ny"]] = (
    ...     b"IMGBLO", 0x0102, 256, 272, 4, 3, 2)
    >>> records = b"".join(b"\\xaa\\x55" + i.to_bytes(4, "little") + f.tobytes()
    ...                    for i, f in enumerate(frames))
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.blo")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(header.tobytes().ljust(272, b"\\0") + records)
    >>> ds = ltdask.open_blo(path)
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2, 3), (4, 4), dtype('uint8'))
    >>> bool((ds.to_dask().compute().reshape(6, 4, 4) == frames).all())
    True
    """
    return BloDataSet(path, nav_shape, sig_shape, sync_offset, dims)
