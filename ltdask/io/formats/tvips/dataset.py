"""TVIPS ``.tvips`` series (EM-Menu recorder): ``NAME_000.tvips``, ``NAME_001.tvips``, …

The first file starts with a 256-byte series header (frame size, bits per pixel, binning,
pixel size, high tension, the size of the frame headers); every file then holds whole frame
records, a frame header followed by the pixels (uint8 or little-endian uint16). A new file is
started when one reaches its size cap, so frames continue across the files; they are read
straight from them, the frame headers skipped. Where the scan software filled the frame
headers' scan positions (or rotator index), the scan shape and the lead-in frames before the
scan are found from them (:mod:`ltdask.io.formats.tvips.scan`).
"""

from __future__ import annotations

import datetime
import os
import re
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
from ltdask.io.formats.tvips.scan import detect_scan, first_frame_header

SERIES_HEADER_BYTES = 256
#: frame header bytes of version 1 files (version 2 files say in their series header)
V1_FRAME_HEADER_BYTES = 12
SERIES_HEADER_FIELDS = (
    "size version width height bits x_offset y_offset x_binning y_binning pixel_size "
    "high_tension_kV magnification frame_header_bytes"
).split()
_NAME = re.compile(r"(?P<stem>.*)_(?P<index>\d{3})\.tvips", re.IGNORECASE)


def series_files(path: str) -> list[str]:
    """The files of the series `path` belongs to, in order; the first one is ``_000``.

    Raises
    ------
    ltdask.DataSetError
        ``_000`` or a file between two others of the series is missing.
    """
    folder, name = os.path.split(path)
    m = _NAME.fullmatch(name)
    if m is None:
        return [path]  # a file outside any series: it must carry the series header itself
    stem = m.group("stem")
    pattern = re.compile(re.escape(stem) + r"_(\d{3})\.tvips", re.IGNORECASE)
    found: dict[int, str] = {}
    for other in os.listdir(folder or "."):
        mo = pattern.fullmatch(other)
        if mo and os.path.isfile(os.path.join(folder, other)):
            found.setdefault(int(mo.group(1)), os.path.join(folder, other))
    last = max(found)
    missing = [i for i in range(last + 1) if i not in found]
    if missing:
        what = "the first file, which holds the series header" if missing[0] == 0 else "a file"
        names = ", ".join(os.path.basename(found[i]) for i in sorted(found))
        raise DataSetError(
            f"{path!r}: {stem}_{missing[0]:03d}.tvips ({what}) of the series is missing from "
            f"{folder or '.'!r}; found {names}"
        )
    return [found[i] for i in range(last + 1)]


def read_series_header(path: str) -> dict:
    """The series header at the start of `path` (checked), as a dict of ints."""
    with open(path, "rb") as f:
        raw = f.read(SERIES_HEADER_BYTES)
    if len(raw) < SERIES_HEADER_BYTES:
        raise DataSetError(
            f"{path!r} is truncated: {len(raw)} bytes, shorter than the "
            f"{SERIES_HEADER_BYTES}-byte TVIPS series header"
        )
    values = np.frombuffer(raw, "<i4", count=len(SERIES_HEADER_FIELDS)).tolist()
    h = dict(zip(SERIES_HEADER_FIELDS, values, strict=True))
    if h["size"] != SERIES_HEADER_BYTES or h["version"] not in (1, 2):
        raise DataSetError(
            f"{path!r} does not start with a TVIPS series header (header size {h['size']}, "
            f"version {h['version']}; expected 256 and 1 or 2); open the series' _000 file"
        )
    if h["bits"] not in (8, 16):
        raise DataSetError(f"{path!r}: {h['bits']} bits per pixel; expected 8 or 16")
    if not (0 < h["width"] <= 65536 and 0 < h["height"] <= 65536):
        raise DataSetError(
            f"{path!r}: frames of {h['width']} x {h['height']} pixels; expected 1 to 65536 each"
        )
    if h["version"] == 1:
        h["frame_header_bytes"] = V1_FRAME_HEADER_BYTES
    elif not 0 <= h["frame_header_bytes"] <= 2**24:
        raise DataSetError(
            f"{path!r}: frame headers of {h['frame_header_bytes']} bytes; expected 0 to 2**24"
        )
    return h


class TVIPSDataSet(FileDataSet):
    """A TVIPS series (see :func:`open_tvips`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import TVIPSDataSet
    >>> issubclass(TVIPSDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "movie_000.tvips")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_tvips(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../movie_000.tvips' is truncated: 10 bytes, shorter than the 256-byte TVIPS series ...
    >>> ds = ltdask.open_tvips("/data/movie_000.tvips")  # doctest: +SKIP
    >>> ds.nav_shape, ds.scan_detection  # doctest: +SKIP
    ((128, 128), 'rotator index in the frame headers')
    >>> ds.header["bits"], ds.metadata["files"]  # doctest: +SKIP
    (16, 3)
    """

    def __init__(self, path, nav_shape=None, sig_shape=None, sync_offset=None, dims=None):
        paths = series_files(check_file(path))
        first = paths[0]
        self.path = first if len(paths) == 1 else f"{first} (+{len(paths) - 1} files)"
        h = read_series_header(first)
        dtype = np.dtype("<u1" if h["bits"] == 8 else "<u2")
        natural = (h["height"], h["width"])
        frame_header = h["frame_header_bytes"]
        stride = frame_header + h["width"] * h["height"] * dtype.itemsize
        files = []
        start = 0
        for i, p in enumerate(paths):
            signature = signature_of(stat_regular_file(p))
            header = SERIES_HEADER_BYTES if i == 0 else 0
            n = whole_records(p, signature[2], header, stride, 0, i == len(paths) - 1, start)
            files.append(File(p, start, n, header, signature))
            start += n
        # the last file ends inside a frame (whole_records warned): that frame has a scan
        # position, missing from the data
        partial = int(signature[2] > header + n * stride)
        if start == 0:
            raise DataSetError(f"{self.path}: the series holds no whole frame of {stride} bytes")
        files = [f for f in files if f.num_frames]  # empty files hold nothing to map
        fileset = FileSet(files, frame_shape(sig_shape, natural, first), dtype, frame_header)
        scan = None
        if nav_shape is None or sync_offset is None:
            scan = detect_scan(
                fileset, h["frame_header_bytes"] if h["version"] == 2 else 0, partial
            )
        self.scan_detection = "none" if scan is None else scan.how
        if nav_shape is None:
            nav_shape = (start,) if scan is None else scan.nav_shape
        if sync_offset is None:
            sync_offset = 0 if scan is None else scan.sync_offset
        self.header = h
        self.metadata = self._metadata(fileset)
        self.metadata["scan_detection"] = self.scan_detection
        super().__init__(fileset, Decoder(dtype), nav_shape, sync_offset=sync_offset, dims=dims)
        mode = self.metadata.get("mode")
        if h["version"] == 2 and h["pixel_size"] > 0 and len(self.sig_shape) == 2:
            self.calibrate(sig=(float(h["pixel_size"]), "1/nm" if mode == 2 else "nm"))

    def _metadata(self, fileset: FileSet) -> dict:
        h = self.header
        out = {
            "detector": "TVIPS",
            "version": h["version"],
            "files": len(fileset.files),
            "bits_per_pixel": h["bits"],
            "binning": (h["y_binning"], h["x_binning"]),
            "offset": (h["y_offset"], h["x_offset"]),
            "pixel_size": h["pixel_size"],
            "high_tension_kV": h["high_tension_kV"],
            "magnification": h["magnification"],
            "frame_header_bytes": h["frame_header_bytes"],
        }
        if h["version"] == 2:
            fields = first_frame_header(fileset)
            if "time" in fields:
                stamp = datetime.datetime.fromtimestamp(fields["time"], datetime.UTC)
                stamp += datetime.timedelta(milliseconds=fields["ms"])
                out["first_frame_time"] = stamp.isoformat(timespec="milliseconds")
            if "mode" in fields:
                out["mode"] = fields["mode"]
        return out

    def attrs(self) -> dict:
        return {**super().attrs(), "tvips_scan_detection": self.scan_detection}


@takes_calibration
def open_tvips(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int | None = None,
    dims: Sequence[str] | None = None,
) -> TVIPSDataSet:
    """Open a TVIPS series (``NAME_000.tvips``, ``NAME_001.tvips``, …) from any of its files.

    Only the series header, the file sizes and frame headers for the scan detection are read
    here.

    Parameters
    ----------
    path
        Any file of the series; the whole series opens, from its ``_000`` file (which holds
        the series header) on.
    nav_shape
        The scan shape. By default detected from the frame headers' scan positions (version
        2): the scan starts at the frame at (0, 0) followed by (0, 1), its width is where the
        x position first falls back, its height as many whole rows as the frames from the
        start hold. Without positions, a rotator index counting the scan's points over
        consecutive frames gives a square N-frame scan (or N frames in one dim): 0, 1, …
        N - 1 from the series' first frame (which is the scan's first point), else 1, 2, …
        N (after two or more frames of index 0, lead-in frames outside the scan); else all
        frames in one dim. Only frames the headers place before the scan's start are lead-in.
    sig_shape
        Reinterpret the frames with another shape of as many pixels.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames at the
        start. By default the lead-in frames found by the scan detection (else 0).
    dims
        Names of the nav and sig dims.

    Returns
    -------
    TVIPSDataSet
        uint8 or uint16 frames; signal dims calibrated by the series header's pixel size (nm,
        or 1/nm for diffraction); the headers' details in ``metadata``, and how the scan was
        found in ``scan_detection``.

    Raises
    ------
    FileNotFoundError
        The file given does not exist.
    ltdask.DataSetError
        A file of the series is missing, the series header is malformed, or a file other
        than the last ends inside a frame. A last file that ends inside a frame (an
        interrupted acquisition) is read without that frame, with a
        `ltdask.MissingFramesWarning`; a detected scan keeps the shape that frame completes,
        its position (and any after it) invalid in results.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> header = np.zeros(64, "<i4")
    >>> header[:5] = (256, 1, 4, 3, 16)  # header size, version, width, height, bits
    >>> frames = np.arange(5 * 12, dtype="<u2").reshape(5, 3, 4)
    >>> with open(os.path.join(folder, "movie_000.tvips"), "wb") as f:
    ...     _ = f.write(header.tobytes())
    ...     for frame in frames[:3]:
    ...         _ = f.write(bytes(12) + frame.tobytes())
    >>> with open(os.path.join(folder, "movie_001.tvips"), "wb") as f:
    ...     for frame in frames[3:]:
    ...         _ = f.write(bytes(12) + frame.tobytes())
    >>> ds = ltdask.open_tvips(os.path.join(folder, "movie_001.tvips"))
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((5,), (3, 4), dtype('uint16'))
    >>> bool((ds.to_dask().compute() == frames).all())
    True
    """
    return TVIPSDataSet(path, nav_shape, sig_shape, sync_offset, dims)
