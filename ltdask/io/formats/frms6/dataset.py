"""PNDetector pnCCD ``.frms6`` acquisitions: a ``.hdr`` file and ``NAME_000.frms6`` (dark
frames), ``NAME_001.frms6``, … (signal frames).

Each raw frame holds the detector's two halves side by side, binned rows once each
(:mod:`ltdask.io.formats.frms6.kernels` unfolds them in the read ranges and the decoder). The
mean of the dark frames is the dataset's default dark correction, applied in the read path
of UDF runs and ``to_dask()`` by the corrections machinery; a gain map is added when given.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.frms6.headers import (
    FILE_HEADER_BYTES,
    FRAME_HEADER_BYTES,
    read_file_header,
    read_hdr,
)
from ltdask.io.formats.frms6.kernels import (
    decode_frms6,
    frms6_read_ranges,
    unfold,
    unfold_index,
)
from ltdask.io.layout import PixelLayout


def frms6_files(path: str) -> tuple[str, list[str]]:
    """``(hdr_path, frms6_paths)`` of the acquisition `path` (its ``.hdr`` or any ``.frms6``)
    belongs to; the ``.frms6`` files sorted by name (the first holds the dark frames)."""
    stem, ext = os.path.splitext(path)
    if ext.lower() == ".frms6":
        stem = re.sub(r"_\d+$", "", stem)
    elif ext.lower() != ".hdr":
        raise DataSetError(f"{path!r}: expected a .hdr or .frms6 file of a pnCCD acquisition")
    hdr = stem + ".hdr"
    if not os.path.isfile(hdr):
        raise DataSetError(f"{path!r}: the acquisition header {hdr!r} does not exist")
    folder, name = os.path.split(stem)
    pattern = re.compile(re.escape(name) + r"_\d+\.frms6", re.IGNORECASE)
    names = sorted(n for n in os.listdir(folder or ".") if pattern.fullmatch(n))
    paths = [os.path.join(folder, n) for n in names]
    if len(paths) < 2:
        raise DataSetError(
            f"{hdr!r}: expected {name}_000.frms6 (dark frames) and at least one file of "
            f"signal frames ({name}_001.frms6, ...); found {names or 'none'}"
        )
    return hdr, paths


class Frms6FileSet(FileSet):
    """Raw pnCCD frames behind 64-byte frame headers, unfolded by the read ranges."""

    def __init__(self, files, sig_shape, binning: int, raw_bytes: int):
        super().__init__(files, sig_shape, np.dtype("<u2"), FRAME_HEADER_BYTES)
        self.binning = int(binning)
        self._raw_bytes = int(raw_bytes)

    @property
    def frame_bytes(self) -> int:
        return self._raw_bytes

    def read_ranges(self, frames: np.ndarray, depth: int, slices: np.ndarray):
        return frms6_read_ranges(
            np.ascontiguousarray(frames, dtype=np.int64),
            int(depth),
            slices,
            self.table,
            np.array(self.sig_shape, dtype=np.int64),
            self.binning,
            self.frame_header_bytes,
            self._raw_bytes,
        )

    def straight_view(self, buffers, file_idx):
        return None

    def __dask_tokenize__(self):
        return (super().__dask_tokenize__(), self.binning, self._raw_bytes)


class Frms6Decoder(Decoder):
    """Unfolds the slices of raw frames the read ranges name: rows of the upper half
    forwards, of the lower half backwards, each raw row `binning` times."""

    def __init__(self, sig_shape, binning: int):
        super().__init__(np.dtype("<u2"))
        self.binning = int(binning)
        self.width = int(sig_shape[1])
        self.half = int(sig_shape[0]) // self.binning // 2

    @property
    def is_plain(self) -> bool:
        return False

    def _decode_file(self, src, file_idx, ranges, out):
        decode_frms6(src, file_idx, ranges, self.binning, self.width, self.half, out)

    def __dask_tokenize__(self):
        return (super().__dask_tokenize__(), self.binning, self.width, self.half)


class Frms6DataSet(FileDataSet):
    """A pnCCD acquisition (see :func:`open_frms6`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import Frms6DataSet
    >>> issubclass(Frms6DataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.hdr")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"[measurementInfo]\\nsignalframes=4\\n")
    >>> try:
    ...     ltdask.open_frms6(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.hdr': expected scan_000.frms6 (dark frames) and at least one file of signal ...
    >>> ds = ltdask.open_frms6("/data/scan.hdr", nav_shape=(256, 256))  # doctest: +SKIP
    >>> ds.metadata["binning"], ds.metadata["dark frames"]  # doctest: +SKIP
    (1, 1000)
    >>> dark = ds.dark_frame()  # the mean dark frame, subtracted by default  # doctest: +SKIP
    """

    def __init__(
        self,
        path,
        nav_shape=None,
        sig_shape=None,
        sync_offset=0,
        dims=None,
        enable_offset_correction=True,
        gain_map_path=None,
    ):
        path = check_file(path)
        hdr_path, paths = frms6_files(path)
        self.hdr_path = hdr_path
        self.path = f"{paths[1]} (+{len(paths) - 2} files)" if len(paths) > 2 else paths[1]
        self.hdr = hdr = read_hdr(hdr_path)
        headers = [read_file_header(p) for p in paths]
        first = headers[0]
        for h in headers[1:]:
            if (h.width, h.height) != (first.width, first.height):
                raise DataSetError(
                    f"{h.path!r}: frames of {h.height} x {h.width} raw pixels, but "
                    f"{first.path!r} has {first.height} x {first.width}; all files of an "
                    "acquisition need the same frame size"
                )
        binning = self.binning = hdr["binning"]
        natural = (2 * first.height * binning, first.width // 2)
        self.dark_header, signal = headers[0], headers[1:]
        if self.dark_header.num_frames == 0 and enable_offset_correction:
            raise DataSetError(
                f"{self.dark_header.path!r}: no whole dark frame in the file; pass "
                "enable_offset_correction=False to read the signal frames without it"
            )
        files = []
        start = 0
        for h in signal:
            files.append(File(h.path, start, h.num_frames, FILE_HEADER_BYTES))
            start += h.num_frames
        files = [f for f in files if f.num_frames > 0]
        if not files:
            raise DataSetError(f"{hdr_path!r}: the .frms6 files hold no whole signal frame")
        count = min(start, hdr["signalframes"]) if hdr["signalframes"] > 0 else start
        files = _cut(files, count)
        if sig_shape is None:
            sig = natural
        else:
            sig = check_shape(sig_shape, "sig_shape", self.path)
            if sig != natural:
                raise DataSetError(
                    f"{self.path}: sig_shape={sig}; pnCCD frames of this acquisition are "
                    f"{natural} (they cannot be reshaped: the halves are unfolded by row)"
                )
        if nav_shape is None:
            nav_shape = hdr.get("scan") or (count,)
        self.enable_offset_correction = bool(enable_offset_correction)
        self.gain_map_path = None if gain_map_path is None else os.fspath(gain_map_path)
        if self.gain_map_path is not None:
            read_gain_map(self.gain_map_path, sig)  # checked here, read again for a run
        self.metadata = {
            "detector": "PNDetector pnCCD (.frms6)",
            "binning": binning,
            "window": hdr["window"],
            "raw frame": (first.height, first.width),
            "signal frames": hdr["signalframes"],
            "dark frames": self.dark_header.num_frames,
            "gain setting": hdr.get("gain"),
            "dwell time (us)": hdr.get("dwelltimemicroseconds"),
            "offset correction": self.enable_offset_correction,
            "gain map": self.gain_map_path,
        }
        fileset = Frms6FileSet(files, natural, binning, first.raw_bytes)
        super().__init__(
            fileset, Frms6Decoder(natural, binning), nav_shape, sync_offset=sync_offset, dims=dims
        )

    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        return (self.binning, self.sig_shape[1])

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        # tiles of row blocks become whole frames of the same size: a frame's raw rows are
        # then read front to back, once (SumUDF 0.42 -> 0.58 of raw uint16's speed)
        depth, rows, cols = tileshape
        height = self.sig_shape[0]
        if rows < height and cols == self.sig_shape[1]:
            return (max(1, depth * rows // height), height, cols)
        return tileshape

    def pixel_layout(self) -> PixelLayout:
        """The raw frames as they are in the files (``(rows, 2 width)``, 64-byte headers
        between them), and where :func:`unfold` moves their pixels."""
        raw = self.metadata["raw frame"]
        fileset = self.fileset
        plain = FileSet(fileset.files, raw, np.dtype("<u2"), FRAME_HEADER_BYTES)
        twin = FileDataSet(
            plain, Decoder("<u2"), tuple(self.shape.nav), sync_offset=self.sync_offset
        )
        return PixelLayout(twin, unfold_index, (raw[0], raw[1], self.binning), self.binning)

    def dark_frame(self) -> np.ndarray:
        """The mean of the dark frames (``NAME_000.frms6``), unfolded, float32."""
        h = self.dark_header
        st = os.stat(h.path)
        stamp = (st.st_size, st.st_mtime_ns)
        return _dark_mean(h.path, h.num_frames, h.height, h.width, self.binning, stamp)

    def default_corrections(self):
        """The dark frame (with ``enable_offset_correction``) and the gain map, if given."""
        dark = self.dark_frame() if self.enable_offset_correction else None
        gain = None
        if self.gain_map_path is not None:
            gain = read_gain_map(self.gain_map_path, self.sig_shape)
        if dark is None and gain is None:
            return None
        from ltdask.corrections import CorrectionSet

        return CorrectionSet(dark=dark, gain=gain)

    def attrs(self) -> dict:
        return {**super().attrs(), "frms6_hdr": self.hdr_path}


def is_frms6_hdr(path) -> bool:
    """Whether `path` is the ``.hdr`` INI file of a pnCCD acquisition (Merlin's ``.hdr``
    files start with ``HDR,`` instead)."""
    if not str(path).lower().endswith(".hdr") or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return b"[measurementinfo]" in f.read(4096).lower()


def _cut(files: list[File], count: int) -> list[File]:
    """`files` holding only the first `count` frames of the stream."""
    out = []
    for f in files:
        if f.first_frame >= count:
            break
        out.append(
            File(f.path, f.first_frame, min(f.num_frames, count - f.first_frame), f.header_bytes)
        )
    return out


@functools.lru_cache(maxsize=8)
def _dark_mean(path: str, n: int, height: int, width: int, binning: int, stamp) -> np.ndarray:
    stride = FRAME_HEADER_BYTES + 2 * width * height
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=FILE_HEADER_BYTES, shape=(n, stride))
    pixels = raw[:, FRAME_HEADER_BYTES:].view("<u2").reshape(n, height, width)
    total = np.zeros((height, width), dtype=np.float64)
    for i in range(0, n, 64):
        total += pixels[i : i + 64].sum(axis=0, dtype=np.float64)
    dark = unfold((total / n)[None], binning)[0].astype(np.float32)
    dark.setflags(write=False)
    return dark


def read_gain_map(path: str, sig_shape: tuple[int, ...]) -> np.ndarray:
    """A gain map of the unfolded frame: a ``.mat`` file with ``GainMap``, or a CSV of
    ``;``-separated rows that is transposed (as LiberTEM reads both), or a ``.npy``."""
    path = check_file(path)
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".mat":
            import scipy.io

            gain = np.asarray(scipy.io.loadmat(path)["GainMap"])
        elif ext == ".csv":
            with open(path) as f:
                rows = [[float(x) for x in line.strip().split(";") if x.strip()] for line in f]
            gain = np.array([r for r in rows if r]).T
        elif ext == ".npy":
            gain = np.load(path)
        else:
            raise DataSetError(f"{path!r}: a gain map must be a .mat, .csv or .npy file")
    except (OSError, ValueError, KeyError) as e:
        raise DataSetError(
            f"{path!r}: cannot read the gain map ({type(e).__name__}: {e})"
        ) from None
    if gain.shape != tuple(sig_shape):
        raise DataSetError(
            f"{path!r}: gain map of shape {gain.shape}; expected the frame shape {sig_shape}"
        )
    return gain.astype(np.float32)


@takes_calibration
def open_frms6(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
    enable_offset_correction: bool = True,
    gain_map_path: PathLike | None = None,
) -> Frms6DataSet:
    """Open a PNDetector pnCCD acquisition (``NAME.hdr``, ``NAME_000.frms6``, …).

    Parameters
    ----------
    path
        The ``.hdr`` file or any ``.frms6`` file of the acquisition: all its files are
        opened; ``NAME_000.frms6`` (the first by name) holds the dark frames.
    nav_shape
        The scan shape; by default ``stemimagesize`` of the ``.hdr`` file.
    sig_shape
        The frame shape (only the natural one, ``(2 h b, W)``, is accepted).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames.
    dims
        Names of the nav and sig dims.
    enable_offset_correction
        Subtract the mean dark frame: UDF runs and ``to_dask()`` see float32 frames
        ``(frame - dark) * gain`` unless a run is given another ``corrections=``
        (``ltdask.CorrectionSet()``: the raw counts).
    gain_map_path
        A gain map of the unfolded frame (``.mat`` with ``GainMap``, ``;``-separated
        ``.csv``, transposed as LiberTEM does, or ``.npy``).

    Returns
    -------
    Frms6DataSet
        ``uint16`` frames of ``(2 h b, W)`` pixels: the two detector halves unfolded (the
        lower one turned by 180°), binned rows repeated ``b`` times.

    Raises
    ------
    ltdask.DataSetError
        A missing ``.hdr`` or dark file, malformed headers (naming the file and field),
        files of different frame sizes, an unreadable gain map.
    FileNotFoundError
        `path` does not exist.

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> hdr = os.path.join(tempfile.mkdtemp(), "scan.hdr")
    >>> with open(hdr, "w") as f:  # a header without its .frms6 files
    ...     _ = f.write("[measurementInfo]\\nsignalframes=4\\n")
    >>> try:
    ...     ltdask.open_frms6(hdr)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.hdr': expected scan_000.frms6 (dark frames) and at least one file of signal ...
    >>> ds = ltdask.open_frms6("/data/scan.hdr", nav_shape=(256, 256))  # doctest: +SKIP
    """
    return Frms6DataSet(
        path, nav_shape, sig_shape, sync_offset, dims, enable_offset_correction, gain_map_path
    )
