"""`FileDataSet`: the read path shared by every format that stores frames in files.

A format supplies a :class:`~ltdask.io.fileset.FileSet` (where the bytes are) and a
:class:`~ltdask.io.decode.Decoder` (how bytes become pixels). Reading then goes one of two
ways: straight views of the memory-mapped files when nothing needs decoding, or numba read
ranges decoded into a reused buffer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ltdask.common import Slice
from ltdask.io.dataset import DataSet
from ltdask.io.decode import Decoder
from ltdask.io.fileset import FileBuffers, FileSet
from ltdask.io.tiling import TilingScheme, flat_of
from ltdask.runtime import scratch


class FileDataSet(DataSet):
    """A dataset whose frames are read from files through a `FileSet` and a `Decoder`.

    A format's dataset class derives from it, or a format's opener returns one directly.

    Examples
    --------
    Frames of 4 x 5 little-endian uint16 pixels after a 16-byte file header:

    >>> import numpy as np, tempfile, os
    >>> from ltdask.io import Decoder, File, FileDataSet, FileSet
    >>> frames = np.arange(6 * 4 * 5, dtype="<u2").reshape(6, 4, 5)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(16) + frames.tobytes())
    >>> fileset = FileSet([File(path, 0, 6, header_bytes=16)], (4, 5), "<u2")
    >>> ds = FileDataSet(fileset, Decoder("<u2"), nav_shape=(2, 3))
    >>> ds.nav_shape, ds.sig_shape, ds.dtype
    ((2, 3), (4, 5), dtype('uint16'))
    >>> bool((ds.to_dask().compute() == frames.reshape(2, 3, 4, 5)).all())
    True
    """

    def __init__(self, fileset: FileSet, decoder: Decoder, nav_shape, **kwargs):
        self.fileset = fileset
        self.decoder = decoder
        super().__init__(
            nav_shape,
            fileset.sig_shape,
            decoder.native_dtype,
            image_count=fileset.image_count,
            **kwargs,
        )

    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        base = self.fileset.base_shape()
        return super().get_base_shape(roi) if base is None else base

    def need_decode(self, read_dtype, roi=None) -> bool:
        return (
            super().need_decode(read_dtype, roi)
            or not self.decoder.is_plain
            or self.fileset.bits_per_px != self.raw_dtype.itemsize * 8
        )

    # -- reading -------------------------------------------------------------------------
    def hands_out_views(self, dtype) -> bool:
        f = self.fileset
        item = self.raw_dtype.itemsize
        aligned = all(
            x % item == 0
            for x in (f.frame_stride, f.frame_header_bytes, *(g.header_bytes for g in f.files))
        )
        return self._straight(dtype) and aligned and f.bits_per_px == item * 8

    def _straight(self, dtype) -> bool:
        return (
            self.decoder.is_plain
            and type(self.decoder) is Decoder
            and np.dtype(dtype) == self.raw_dtype
        )

    def _views(self, maps: FileBuffers, frames: np.ndarray) -> list[np.ndarray] | None:
        """Views of the files for a run of consecutive present `frames`, one per file."""
        if frames.size == 0 or frames[0] < 0 or frames[-1] - frames[0] != frames.size - 1:
            return None
        pieces = []
        first = int(frames[0])
        stop = int(frames[-1]) + 1
        while first < stop:
            idx = self.fileset.file_index(first)
            view = self.fileset.straight_view(maps, idx)
            if view is None:
                return None
            f = self.fileset.files[idx]
            end = min(stop, f.first_frame + f.num_frames)
            pieces.append(view[first - f.first_frame : end - f.first_frame])
            first = end
        return pieces

    def _record_rows(self, maps: FileBuffers, pieces: list[np.ndarray], first: int) -> list:
        """For each of `pieces` (of `_views`, from stream frame `first` on) whose frames are
        not one C-contiguous array (headers or footers between them): its frames' records as
        C-contiguous rows and the pixels' offset in a row (`FileSet.record_rows`), or None."""
        out: list = []
        for piece in pieces:
            idx = self.fileset.file_index(first)
            rows = None if piece.flags.c_contiguous else self.fileset.record_rows(maps, idx)
            if rows is not None:
                local = first - self.fileset.files[idx].first_frame
                rows = (rows[0][local : local + piece.shape[0]], rows[1])
            out.append(rows)
            first += piece.shape[0]
        return out

    def read_frames(self, positions: np.ndarray, sig_slice: Slice, dtype) -> np.ndarray:
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        maps = self.fileset.open()
        sig_index = sig_slice.get()
        if self._straight(dtype):
            pieces = self._views(maps, frames)
            if pieces is not None:
                if len(pieces) == 1:
                    return pieces[0][(slice(None), *sig_index)]
                return np.concatenate([p[(slice(None), *sig_index)] for p in pieces])
        shape = (frames.size, *sig_slice.shape)
        missing = bool((frames < 0).any())
        out = (
            np.zeros(shape, dtype)
            if missing or self.decoder.clear_first
            else np.empty(shape, dtype)
        )
        if frames.size:
            slices = np.array([[sig_slice.origin, tuple(sig_slice.shape)]], dtype=np.int64)
            _, ranges = self.fileset.read_ranges(frames, frames.size, slices)
            self.decoder.decode(maps, ranges[0], out.reshape(-1))
        return out

    def iter_flat_tiles(
        self, positions: np.ndarray, scheme: TilingScheme, dtype, block=None
    ) -> Iterator[tuple[np.ndarray, int, int, tuple | None]]:
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        if frames.size == 0:
            return
        maps = self.open_files(frames, block)
        pieces = self._views(maps, frames) if self._straight(dtype) else None
        if pieces is None:
            yield from self._decoded_tiles(maps, frames, scheme, dtype, 0)
            return
        rows = self._record_rows(maps, pieces, int(frames[0]))
        # files (or runs of HDF5 chunks) in the middle much shorter than a tile would give
        # tiny tiles: the decode kernel copies each run of them into whole tiles (with the
        # partition's first or last piece where that is short too); views of the others
        limit = max(1, scheme.depth // 4)
        inner = [0 < i < len(pieces) - 1 and len(p) < limit for i, p in enumerate(pieces)]
        copied = list(inner)
        if len(pieces) > 2:
            copied[0] = len(pieces[0]) < limit and inner[1]
            copied[-1] = len(pieces[-1]) < limit and inner[-2]
        start = 0
        group = None  # where the current run of short pieces starts
        for i, piece in enumerate(pieces):
            n = piece.shape[0]
            if copied[i]:
                group = start if group is None else group
            else:
                if group is not None:
                    yield from self._decoded_tiles(maps, frames[group:start], scheme, dtype, group)
                    group = None
                yield from _tiles_from_view(piece, scheme, rows[i], start)
            start += n
        if group is not None:
            yield from self._decoded_tiles(maps, frames[group:], scheme, dtype, group)

    def open_files(self, frames: np.ndarray, block=None) -> FileBuffers:
        """The files (by index in the file set) holding stream `frames`, for a task that
        reads them; `block`: the partition's dask block, where the dataset has blocks."""
        return self.fileset.open()

    def can_sum_tiles(self, scheme: TilingScheme) -> bool:
        """Whether `tile_sums` sums the tiles of `scheme` (`Decoder.can_sum`: packed or
        swapped pixels whose columns the slices do not cut inside a word)."""
        return self.decoder.can_sum(scheme)

    def tile_sums(self, positions: np.ndarray, scheme: TilingScheme, block=None):
        """An iterator of ``(first, n, scheme_idx, sums)`` per tile: its `n` frames summed
        per pixel of its signal slice (flat, in the decoder's `sum_dtype`; one buffer,
        reused), decoded on the way and never into a tile (`Decoder.add_sums`) -- or None
        where the decoder cannot for `scheme` (the run then reads tiles)."""
        if not self.can_sum_tiles(scheme):
            return None
        return self._tile_sums(self.stream_frames(positions), scheme, block)

    def _tile_sums(self, frames: np.ndarray, scheme: TilingScheme, block):
        if frames.size == 0:
            return
        tiles, ranges = self.fileset.read_ranges(frames, scheme.depth, scheme.slices_array)
        maps = self.open_files(frames, block)
        slice_px = [math.prod(s.shape) for s in scheme.slices]
        sums = scratch.empty(max(slice_px), self.decoder.sum_dtype)
        for t, (first, n, s) in enumerate(tiles.tolist()):
            acc = sums[: slice_px[s]]
            acc[:] = 0
            if not self.decoder.add_sums(maps, ranges[t], slice_px[s], acc):
                # (ranges it does not sum, columns cut inside a packed word: decoded)
                tile = np.zeros(n * slice_px[s], self.decoder.native_dtype.newbyteorder("="))
                self.decoder.decode(maps, ranges[t], tile)
                acc += tile.reshape(n, -1).sum(axis=0, dtype=acc.dtype)
            yield first, n, s, acc

    def _decoded_tiles(self, maps: FileBuffers, frames, scheme: TilingScheme, dtype, offset):
        """Flat tiles of `frames` decoded into a buffer (reused: each tile is processed
        before the next), numbered from `offset` within the partition."""
        tiles, ranges = self.fileset.read_ranges(frames, scheme.depth, scheme.slices_array)
        shapes = [tuple(s.shape) for s in scheme.slices]
        slice_px = [math.prod(shape) for shape in shapes]
        buf = scratch.empty(scheme.depth * max(slice_px), dtype)
        clear = self.decoder.clear_first
        for t, (first, n, s) in enumerate(tiles.tolist()):
            out = buf[: n * slice_px[s]]
            if clear:
                out[:] = 0
            self.decoder.decode(maps, ranges[t], out)
            flat = (out.reshape(n, -1), 0, slice_px[s])
            yield out.reshape((n, *shapes[s])), offset + first, s, flat

    def _token_fields(self) -> tuple:
        return (
            super()._token_fields(),
            self.fileset.__dask_tokenize__(),
            self.decoder.__dask_tokenize__(),
        )


def _tiles_from_view(piece: np.ndarray, scheme: TilingScheme, rows, start: int):
    """Flat tiles cut from the view of one file (or run of HDF5 chunks), ending where it
    ends (no tile spans two files: no copies), numbered from `start` within the partition.
    `rows`: where its frames are not C-contiguous, its records as C-contiguous rows and the
    pixels' offset in them (flat tiles of those rows), or None."""
    index = [(slice(None), *sl) for sl in scheme.sig_indices]
    ranges = scheme.flat_ranges
    n = piece.shape[0]
    for a in range(0, n, scheme.depth):
        b = min(n, a + scheme.depth)
        block = piece[a:b]
        # frames with headers between them are views, but not C-contiguous ones: their
        # records are (rows of the header, pixels and footer, pixels from `off` on)
        frames = block.reshape(block.shape[0], -1) if block.flags.c_contiguous else None
        off = 0
        if frames is None and rows is not None:
            frames, off = rows[0][a:b], rows[1]
        for s, idx in enumerate(index):
            data = block[idx]
            r = ranges[s]
            flat = (
                (frames, off + r[0], off + r[1])
                if r is not None and frames is not None
                else flat_of(data)
            )
            yield data, start + a, s, flat
