"""How Merlin frames are stored: the geometry a frame header describes, the files' frame
counts, and for raw (``R64``) frames the file set and decoder over the numba read ranges and
kernels of :mod:`ltdask.io.formats.mib.kernels`. Integer modes are plain big-endian pixels
after each frame header: a `FileSet` with a frame header and the byte-swapping `Decoder`."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.decode import Decoder, sum_swapped16, used_files
from ltdask.io.fileset import File, FileSet
from ltdask.io.formats.mib.headers import MIB_MAGIC, PIXEL_TYPES, MibHeader
from ltdask.io.formats.mib.kernels import (
    LITTLE_ENDIAN,
    decode_raw,
    raw_read_ranges,
    sum_raw12,
)
from ltdask.runtime import scratch

#: raw mode: bits of one pixel's field in the 64-bit words, and the decoded dtype
RAW_FIELD_BITS = {1: 1, 6: 8, 12: 16, 24: 16}
RAW_DTYPES = {1: "u1", 6: "u1", 12: "u2", 24: "u4"}


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
        if magic != MIB_MAGIC:
            raise DataSetError(
                f"{h.path!r}: frame {n - 1} does not start with a frame header ({magic!r} at "
                f"byte {(n - 1) * stride}); the frames are not all {stride} bytes long"
            )
        files.append(File(h.path, first, n, 0))
        first += n
    return files


class MibRawFileSet(FileSet):
    """Raw (R64) frames: packed 64-bit words, read through :mod:`ltdask.io.formats.mib.kernels`."""

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

    def base_shape(self) -> tuple[int, ...] | None:
        """Quad frames: whole frames. Each raw row holds a row of all four chips, the top
        half's and the bottom half's (`ltdask.io.formats.mib.kernels`): tiles of whole
        frames decode each raw row once, front to back, where tiles of half frames (what
        whole rows and the tile size gave) read every raw row twice, half of it each time
        (12-bit 512x512 quads, Sum + CoM + ring: 170 -> 121 us a frame)."""
        return tuple(self.sig_shape) if self.layout[4] else None

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

    def can_sum(self, scheme) -> bool:
        # 16-bit fields (counter depth 12) of whole words; sums of a tile fit uint32
        return self.field_bits == 16 and self.counter_depth != 24 and scheme.depth < 65537

    def add_sums(self, buffers, ranges, slice_px: int, acc) -> bool:
        if not _stored_runs(ranges, slice_px):
            return super().add_sums(buffers, ranges, slice_px, acc)
        # runs of whole words, as stored: a word's fields are its big-endian 16-bit halves,
        # last first; summed as big-endian uint16 in the stored order, then each group of
        # four reversed
        stored = scratch.zeros(slice_px, acc.dtype)
        for file_idx in used_files(ranges):
            sum_swapped16(buffers[file_idx], int(file_idx), ranges, slice_px, stored)
        acc += stored.reshape(-1, 4)[:, ::-1].reshape(-1)
        return True

    def _sum_file(self, src, file_idx, ranges, slice_px, acc) -> bool:
        return sum_raw12(src, file_idx, ranges, slice_px, acc)

    def __dask_tokenize__(self):
        return (super().__dask_tokenize__(), self.field_bits, self.counter_depth, self.gap)


def _stored_runs(ranges: np.ndarray, slice_px: int) -> bool:
    """Whether every range is one run of whole words read forwards (``rows == 1``, no skip
    nor shift) placed at a multiple of four pixels of a slice of whole words: its pixels
    are the stored 16-bit halves, four to a word in reverse."""
    used = ranges[ranges[:, 1] != ranges[:, 2]]
    return bool(
        LITTLE_ENDIAN
        and slice_px % 4 == 0
        and (used[:, 1] % 8 == 0).all()
        and (used[:, 4] == 0).all()
        and (used[:, 5] % 4 == 0).all()
        and (used[:, 6] == 1).all()
        and (used[:, 8] == 1).all()
        and (used[:, 10] == 0).all()
        and (used[:, 3] % 4 == 0).all()
        and (used[:, 2] - used[:, 1] == 2 * used[:, 5]).all()
    )
