"""Quantum Detectors Merlin ``.mib`` files (with their optional ``.hdr`` acquisition header).

Every frame of a ``.mib`` file is an ASCII header followed by the pixels
(:mod:`ltdask.io.formats.mib.headers` parses the headers). The integer modes are plain
big-endian pixels; raw mode packs the counters in 64-bit words and interleaves the chips of
a quad (:mod:`ltdask.io.formats.mib.layout`, with the numba kernels of
:mod:`ltdask.io.formats.mib.kernels`). Opening one file of an acquisition opens them all.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import FileSet
from ltdask.io.formats.mib.headers import (
    COUNTER_DEPTHS,
    describe_difference,
    hdr_int,
    nav_shape_from_hdr,
    read_hdr,
    read_mib_header,
)
from ltdask.io.formats.mib.layout import (
    MibRawDecoder,
    MibRawFileSet,
    files_for_headers,
    geometry,
)


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


# -- the dataset -------------------------------------------------------------------------------
class MibDataSet(FileDataSet):
    """A Merlin acquisition in one or more ``.mib`` files (see :func:`open_mib`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import MibDataSet
    >>> issubclass(MibDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.mib")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not a scan")
    >>> try:
    ...     ltdask.open_mib(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan.mib' is not a Merlin .mib file: it starts with b'not a scan', expected a ...
    >>> ds = ltdask.open_mib("/data/scan.hdr")  # doctest: +SKIP
    >>> ds.header.pixel_type, ds.header.layout, ds.header.counter_depth  # doctest: +SKIP
    ('R64', '2x2', 12)
    """

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
                how = describe_difference(h, first)
                raise DataSetError(
                    f"{h.path!r} does not match {first.path!r}: {how}; all files of a scan "
                    "need the same frame layout"
                )
        self.header = first
        self.hdr_path = hdr_path
        hdr = read_hdr(hdr_path) if hdr_path else None
        if hdr is not None and first.raw and first.counter_depth is None:
            depth = hdr_int(hdr, "Counter Depth (number)", hdr_path)
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
                nav_shape, self.nav_origin = nav_shape_from_hdr(hdr, hdr_path, image_count)
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


@takes_calibration
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
        a ``.hdr``, all frames in one dim. A header's scan with more frames than the files
        hold (an interrupted acquisition) warns `ltdask.MissingFramesWarning` naming the
        header fields; one far beyond them (mostly empty partitions) is an error.
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
        the files do not match each other, the raw layout cannot be decoded, or the ``.hdr``
        announces a scan far larger than the files hold (naming its fields).

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
