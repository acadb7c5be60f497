"""Gatan K2 IS raw acquisitions: ``NAME.gtg`` and eight sector files ``NAME1.bin`` …
``NAME8.bin``.

Each sector file is a stream of fixed-size blocks, each a header and 930 x 16 pixels of one
frame packed in 12 bits (:mod:`ltdask.io.formats.k2is.kernels`). The sectors are
synchronised from their block headers when the dataset is opened
(:mod:`ltdask.io.formats.k2is.sync`); tiles follow the block shape (the base shape of the
tiling negotiation), and the read ranges of a tile point at its blocks, which the decoder
unpacks straight into the tile.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError, MissingFramesWarning, warn
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import check_file, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.k2is.gtg import read_tags, scan_shape
from ltdask.io.formats.k2is.kernels import (
    BLOCK_BYTES,
    BLOCK_COLS,
    BLOCK_ROWS,
    BLOCKS_PER_FRAME,
    FRAME_SHAPE,
    NUM_SECTORS,
    decode_k2is,
    k2is_read_ranges,
    sum_k2is,
)
from ltdask.io.formats.k2is.sync import SyncResult, sync_sectors


def k2is_files(path: str) -> tuple[str | None, list[str]]:
    """``(gtg_path, sector_paths)`` of the acquisition `path` (its ``.gtg`` or any ``.bin``)
    belongs to: ``NAME<n>.bin`` for n = 1..8, in sector order; the ``.gtg`` may be missing."""
    stem, ext = os.path.splitext(path)
    if ext.lower() == ".bin":
        stem = re.sub(r"\d+$", "", stem)
    elif ext.lower() != ".gtg":
        raise DataSetError(f"{path!r}: expected the .gtg or a .bin file of a K2 IS acquisition")
    gtg = stem + ".gtg"
    sectors = [f"{stem}{n}.bin" for n in range(1, NUM_SECTORS + 1)]
    missing = [p for p in sectors if not os.path.isfile(p)]
    if missing:
        raise DataSetError(
            f"{path!r}: the K2 IS acquisition {os.path.basename(stem)!r} needs 8 sector files; "
            f"missing: {', '.join(repr(p) for p in missing)}"
        )
    return (gtg if os.path.isfile(gtg) else None), sectors


def _short_sectors(sectors: list[str], sync: SyncResult) -> str:
    """Names the sector files that hold fewer whole frames than the others ('' if none)."""
    most = max(sync.sector_frames, default=sync.frames)
    if sync.frames >= most:
        return ""
    short = [
        f"{p!r} ({os.path.getsize(p)} bytes)"
        for p, n in zip(sectors, sync.sector_frames, strict=True)
        if n == sync.frames
    ]
    verb = "holds" if len(short) == 1 else "hold"
    return (
        f"{', '.join(short)} {verb} only {sync.frames} whole frame(s), the other sector files "
        f"up to {most}: cut short"
    )


class K2ISFileSet(FileSet):
    """Eight sector files that each hold a part of every frame."""

    def __init__(self, files, image_count: int):
        super().__init__(files, FRAME_SHAPE, np.dtype("u2"), bits_per_px=12)
        self._image_count = int(image_count)

    @property
    def frame_bytes(self) -> int:
        return BLOCKS_PER_FRAME * BLOCK_BYTES  # per sector file

    def file_index(self, frame: int) -> int:
        return 0  # every file holds (a part of) every frame

    def read_ranges(self, frames: np.ndarray, depth: int, slices: np.ndarray):
        return k2is_read_ranges(
            np.ascontiguousarray(frames, dtype=np.int64),
            int(depth),
            slices,
            self.table,
            np.array(self.sig_shape, dtype=np.int64),
        )

    def straight_view(self, buffers, file_idx):
        return None


class K2ISDecoder(Decoder):
    """Unpacks 12-bit blocks into tiles."""

    def __init__(self):
        super().__init__(np.dtype("u2"))

    @property
    def is_plain(self) -> bool:
        return False

    def _decode_file(self, src, file_idx, ranges, out):
        decode_k2is(src, file_idx, ranges, out)

    #: 12-bit pixels: sums of a tile's frames fit uint32 (up to 2**20 frames)
    sum_dtype = np.dtype(np.uint32)

    def can_sum(self, scheme) -> bool:
        # slices one block wide: each block's rows unpack into one run of the slice
        return scheme.depth < 2**20 and all(
            s.shape[1] == BLOCK_COLS and s.origin[1] % BLOCK_COLS == 0 for s in scheme.slices
        )

    def _sum_file(self, src, file_idx, ranges, slice_px, acc) -> bool:
        return sum_k2is(src, file_idx, ranges, slice_px, acc)


class K2ISDataSet(FileDataSet):
    """A K2 IS acquisition (see :func:`open_k2is`).

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> from ltdask.io import K2ISDataSet
    >>> issubclass(K2ISDataSet, ltdask.io.FileDataSet)
    True
    >>> path = os.path.join(tempfile.mkdtemp(), "scan1.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(4096))
    >>> try:
    ...     ltdask.open_k2is(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan1.bin': the K2 IS acquisition 'scan' needs 8 sector files; missing: ...
    >>> ds = ltdask.open_k2is("/data/scan.gtg")  # doctest: +SKIP
    >>> ds.sig_shape, ds.is_stem, ds.native_sync_offset  # doctest: +SKIP
    ((1860, 2048), True, 250)
    """

    def __init__(self, path, nav_shape=None, sig_shape=None, sync_offset=None, dims=None):
        path = check_file(path)
        gtg, sectors = k2is_files(path)
        self.gtg_path = gtg
        self.path = f"{sectors[0]} (+7 files)"
        tags = read_tags(gtg) if gtg is not None else {}
        scan = scan_shape(tags)
        sync = self.sync = sync_sectors(sectors)
        short = _short_sectors(sectors, sync)
        if short and max(sync.sector_frames) - sync.frames > 1:
            # sectors stop within a frame of each other when an acquisition ends
            warn(f"{short}; the frames after it are left out", MissingFramesWarning)
        if sync.shutter_frame is None and sync_offset is None:
            raise DataSetError(
                f"{sectors[0]!r}: none of the {sync.frames} whole frames has the shutter flag "
                f"set{'; ' + short if short else ''}; pass sync_offset= (and nav_shape=) to "
                "read the frames anyway"
            )
        shutter = sync.shutter_frame or 0
        self.is_stem = scan is not None
        # STEM: the flag is set one frame late, so the scan starts one frame earlier
        native = shutter - 1 if self.is_stem else shutter
        if sync_offset is None:
            if not -sync.frames < native < sync.frames:
                raise DataSetError(
                    f"{self.path}: the sector files hold {sync.frames} whole frame(s)"
                    f"{'; ' + short if short else ''}; a STEM scan starts one frame before the "
                    f"first frame with the shutter flag (frame {shutter}), at sync offset "
                    f"{native}, which needs at least {1 - native}; pass sync_offset= (and "
                    "nav_shape=) to read the frames anyway"
                )
            sync_offset = native
        if nav_shape is None:
            nav_shape = scan if scan is not None else (max(1, sync.frames - native),)
            if scan is not None:
                self.nav_origin = f"SI Dimensions Size Y={scan[0]}, Size X={scan[1]} in {gtg!r}"
        if sig_shape is not None:
            sig = check_shape(sig_shape, "sig_shape", self.path)
            if sig != FRAME_SHAPE:
                raise DataSetError(
                    f"{self.path}: sig_shape={sig}; K2 IS frames are {FRAME_SHAPE} (blocks of "
                    f"{BLOCK_ROWS} x {BLOCK_COLS} pixels cannot be reshaped)"
                )
        self.native_sync_offset = native
        self.metadata = {
            "detector": "Gatan K2 IS",
            "sectors": len(sectors),
            "gtg": gtg,
            "mode": "STEM" if self.is_stem else "time series",
            "scan (gtg)": scan,
            "whole frames": sync.frames,
            "whole frames per sector": sync.sector_frames,
            "first shutter frame": sync.shutter_frame,
            "block version": sync.version,
            **{k: v for k, v in tags.items() if k.startswith("SI Dimensions")},
        }
        files = [
            File(p, 0, sync.frames, offset)
            for p, offset in zip(sectors, sync.first_offsets, strict=True)
        ]
        fileset = K2ISFileSet(files, sync.frames)
        super().__init__(fileset, K2ISDecoder(), nav_shape, sync_offset=sync_offset, dims=dims)

    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        return (BLOCK_ROWS, BLOCK_COLS)

    def get_min_sig_size(self) -> int:
        return BLOCK_ROWS * BLOCK_COLS

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        # tiles that cut the frame into columns: one block wide, so that each block's rows
        # unpack as one run into the tile (4x faster than rows scattered across a wider
        # one, and a smaller tile that stays in L2 for the UDFs)
        depth, rows, cols = tileshape
        if cols < FRAME_SHAPE[1]:
            cols = BLOCK_COLS
        return (depth, rows, cols)

    def attrs(self) -> dict:
        attrs = {**super().attrs(), "k2is_native_sync_offset": self.native_sync_offset}
        if self.gtg_path:
            attrs["k2is_gtg"] = self.gtg_path
        return attrs

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self.sync.first_offsets)


@takes_calibration
def open_k2is(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int | None = None,
    dims: Sequence[str] | None = None,
) -> K2ISDataSet:
    """Open a Gatan K2 IS raw acquisition (``NAME.gtg`` and ``NAME1.bin`` … ``NAME8.bin``).

    Opening reads block headers only (a few hundred): the sector files are synchronised to
    their first frame that every sector holds whole, a trailing incomplete frame is left out,
    and the frame at which the shutter opened is found.

    Parameters
    ----------
    path
        The ``.gtg`` file or any of the eight ``.bin`` sector files.
    nav_shape
        The scan shape; by default ``SI Dimensions`` ``(Size Y, Size X)`` of the ``.gtg``
        (a STEM scan), else the frames from the shutter on (a time series).
    sig_shape
        ``(1860, 2048)`` (the only shape: frames are assembled from 930 x 16 blocks).
    sync_offset
        Frames of the synchronised stream to skip (negative: empty frames to insert). By
        default where the shutter opened: for a STEM scan one frame before the first frame
        with the shutter flag (the flag comes one frame late, as LiberTEM reads it), for a
        time series that frame itself. The default is ``ds.native_sync_offset``.
        (LiberTEM counts a STEM scan's ``sync_offset`` one higher.)
    dims
        Names of the nav and sig dims.

    Returns
    -------
    K2ISDataSet
        ``uint16`` frames of 1860 x 2048 (12-bit counts).

    Raises
    ------
    ltdask.DataSetError
        A missing sector file (named), blocks that are not K2 IS blocks (naming the file and
        the byte), sectors that do not belong together, no frame with the shutter flag and no
        `sync_offset`, too few frames for the default `sync_offset` (naming a sector file cut
        short), a malformed ``.gtg``.
    FileNotFoundError
        `path` does not exist.

    Warns
    -----
    ltdask.MissingFramesWarning
        A sector file holds more than one whole frame fewer than the others (cut short): the
        frames after its last are left out.

    Examples
    --------
    >>> import ltdask, tempfile, os
    >>> first = os.path.join(tempfile.mkdtemp(), "scan1.bin")
    >>> with open(first, "wb") as f:  # one sector file of eight
    ...     _ = f.write(bytes(4096))
    >>> try:
    ...     ltdask.open_k2is(first)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    '.../scan1.bin': the K2 IS acquisition 'scan' needs 8 sector files; missing: ...
    >>> ds = ltdask.open_k2is("/data/scan.gtg")  # doctest: +SKIP
    """
    return K2ISDataSet(path, nav_shape, sig_shape, sync_offset, dims)
