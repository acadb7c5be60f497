"""Reading the compressed chunks of DECTRIS data files in tasks, without HDF5's filter pipeline.

Each data file holds ``/entry/data/data`` of shape ``(frames, y, x)`` in chunks of one or more
whole frames. A task looks up where the chunks are once per process and file (h5py's
``chunk_iter``, cached), memory-maps the file and decompresses the chunks it needs
(`ltdask.io.formats.dectris.codecs`): bitshuffle-LZ4 (HDF5 filter 32008) and LZ4 (filter
32004) with ltdask's numba kernels, bitshuffle-Zstd with the `bitshuffle` package. All
release the GIL, so tasks on the threaded scheduler decompress in parallel; h5py decodes one
chunk at a time under its process-wide lock.

Chunk framing (both filters): a big-endian u64 with the decompressed byte count and a u32
block size in bytes, then blocks, each a big-endian u32 compressed length and the block.
Bitshuffle transposes bits inside each block; LZ4 stores a block whose compressed length
equals its raw length uncompressed.

Codecs the task cannot decode itself (another filter, a chunk shape that cuts frames, or
bitshuffle-Zstd without `bitshuffle` installed) are read through h5py with ``hdf5plugin``'s
filters.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.checks import Signature, changed_error, same_version, signature_of
from ltdask.io.formats.dectris.codecs import decode_bitshuffle, decode_lz4
from ltdask.io.formats.hdf5.dataset import import_h5py
from ltdask.io.maps import map_file

#: decoded chunks a reader keeps for the tiles that cut them (several signal slices)
CACHE_BYTES = 64 << 20
#: the codecs whose chunks decode into a buffer the reader gives (see `decode_bitshuffle`)
INTO_BUFFERS = ("bslz4", "bszstd", "lz4")
#: the dataset inside every data file
DATA_KEY = "/entry/data/data"


@dataclass(frozen=True)
class DataFile:
    """One data file: frames ``first .. first + count`` of the series, in chunks of
    `chunk_frames` frames of the dataset `key`."""

    path: str
    key: str
    first: int
    count: int
    chunk_frames: int
    signature: Signature


def codec_of(dset) -> str:
    """How tasks decode the chunks of the h5py dataset `dset`: ``"none"``, ``"bslz4"``,
    ``"bszstd"``, ``"lz4"``, or ``"h5py"`` (through HDF5's own filter pipeline)."""
    plist = dset.id.get_create_plist()
    filters = [plist.get_filter(i)[:3] for i in range(plist.get_nfilters())]
    if dset.chunks is None or tuple(dset.chunks[1:]) != tuple(dset.shape[1:]):
        return "h5py"  # chunks that cut frames: HDF5 assembles them
    if not filters:
        return "none"
    if len(filters) > 1:
        return "h5py"
    code, _, values = filters[0]
    if code == 32004:
        return "lz4"
    if code == 32008 and len(values) >= 5 and values[4] == 2:
        return "bslz4"
    if code == 32008 and len(values) >= 5 and values[4] == 3 and _have("bitshuffle"):
        return "bszstd"
    return "h5py"


@functools.cache
def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class ChunkTable:
    """Where each chunk of a data file is: byte offset, stored size, HDF5 filter mask."""

    offsets: np.ndarray
    sizes: np.ndarray
    masks: np.ndarray


@functools.lru_cache(maxsize=256)
def chunk_table(path: str, key: str, chunk_frames: int, count: int, signature) -> ChunkTable:
    """The chunks of the dataset `key` in `path`, in frame order (once per process and file
    version: `signature` is part of the cache key)."""
    h5py = import_h5py()
    try:
        now = signature_of(os.stat(path))
    except OSError as e:
        raise DataSetError(f"cannot read {path!r}: {e.strerror or e}") from None
    if not same_version(signature, now):
        raise changed_error(path, signature, now)
    nchunks = -(-count // chunk_frames)
    offsets = np.full(nchunks, -1, dtype=np.int64)
    sizes = np.zeros(nchunks, dtype=np.int64)
    masks = np.zeros(nchunks, dtype=np.uint32)
    try:
        with h5py.File(path, "r") as f:
            dset = f[key]

            def visit(info):
                index = info.chunk_offset[0] // chunk_frames
                if 0 <= index < nchunks and info.byte_offset is not None:
                    offsets[index] = info.byte_offset
                    sizes[index] = info.size
                    masks[index] = info.filter_mask

            dset.id.chunk_iter(visit)
    except (OSError, KeyError) as e:
        raise DataSetError(f"cannot read the chunk index of {path!r} ({key}): {e}") from None
    size = signature[2]
    missing = np.flatnonzero(offsets < 0)
    if missing.size:
        raise DataSetError(
            f"{path!r}: chunk {int(missing[0])} of {key} (frames from "
            f"{int(missing[0]) * chunk_frames}) was never written; the file is incomplete"
        )
    beyond = np.flatnonzero(offsets + sizes > size)
    if beyond.size:
        raise DataSetError(
            f"{path!r}: chunk {int(beyond[0])} of {key} lies beyond the end of the file "
            f"({size} bytes); the file is truncated"
        )
    return ChunkTable(offsets, sizes, masks)


class ChunkReader:
    """``read(index, out)`` over the series' frames, for one task: decoded chunks are kept
    (those of about two reads, up to `CACHE_BYTES`) while tiles cut them into signal slices
    or a read ends inside a chunk."""

    def __init__(self, files, frame_shape, dtype, codec: str):
        self.files = files
        self.frame_shape = tuple(frame_shape)
        self.dtype = np.dtype(dtype)
        self.codec = codec
        self.starts = np.array([f.first for f in files], dtype=np.int64)
        self._maps: dict[int, np.ndarray] = {}
        self._h5: dict[int, tuple] = {}
        self._cache: OrderedDict = OrderedDict()
        self._cached_bytes = 0
        #: bytes of decoded chunks kept: those of two reads (see `read`), at most CACHE_BYTES
        self._budget = CACHE_BYTES
        self._free: list[np.ndarray] = []
        self._frame_bytes = int(np.prod(self.frame_shape)) * self.dtype.itemsize
        self._chunk_bytes = max(f.chunk_frames for f in files) * self._frame_bytes

    def close(self) -> None:
        for f, _ in self._h5.values():
            f.close()
        self._h5.clear()
        self._maps.clear()
        self._cache.clear()
        self._free.clear()

    def _map(self, i: int) -> np.ndarray:
        if i not in self._maps:
            entry = self.files[i]
            # (the process's map cache: repeated runs find the pages mapped)
            self._maps[i] = map_file(entry.path, signature=entry.signature)
        return self._maps[i]

    def _through_h5py(self, i: int, c: int) -> np.ndarray:
        entry = self.files[i]
        if i not in self._h5:
            h5py = import_h5py()
            try:
                f = h5py.File(entry.path, "r")
            except OSError as e:
                raise DataSetError(f"cannot read {entry.path!r} as HDF5: {e}") from None
            self._h5[i] = (f, f[entry.key])
        dset = self._h5[i][1]
        a = c * entry.chunk_frames
        try:
            return dset[a : min(a + entry.chunk_frames, entry.count)]
        except OSError as e:
            raise DataSetError(f"cannot read {entry.path!r} chunk {c}: {e}") from e

    def _decode(self, i: int, c: int, into: np.ndarray | None = None) -> np.ndarray:
        entry = self.files[i]
        if self.codec == "h5py":
            return self._through_h5py(i, c)
        table = chunk_table(entry.path, entry.key, entry.chunk_frames, entry.count, entry.signature)
        mm = self._map(i)
        off, size = int(table.offsets[c]), int(table.sizes[c])
        raw = mm[off : off + size]
        nelems = entry.chunk_frames * int(np.prod(self.frame_shape))
        where = f"{entry.path!r}: chunk {c} of {entry.key} (at byte {off})"
        if self.codec == "none" or table.masks[c] & 1:
            # a chunk stored without the filter (HDF5 skipped it): its raw items
            if size < nelems * self.dtype.itemsize:
                raise DataSetError(
                    f"{where}: {size} bytes, expected {nelems * self.dtype.itemsize}"
                )
            flat = raw[: nelems * self.dtype.itemsize].view(self.dtype)
        elif self.codec == "lz4":
            flat = decode_lz4(raw, nelems, self.dtype, where, into)
        else:
            zstd = self.codec == "bszstd"
            flat = decode_bitshuffle(raw, nelems, self.dtype, zstd, where, into)
        n = min(entry.chunk_frames, entry.count - c * entry.chunk_frames)
        return flat.reshape((entry.chunk_frames, *self.frame_shape))[:n]

    def _spare(self, entry: DataFile) -> np.ndarray | None:
        """A buffer for one decoded chunk of `entry` (bitshuffle codecs decode into it):
        one given back by :meth:`_give_back` where there is one, whose memory is mapped and
        likely in the CPU's cache, rather than new pages to fault in for every chunk."""
        if self.codec not in INTO_BUFFERS:
            return None
        nbytes = entry.chunk_frames * self._frame_bytes
        while self._free:
            buf = self._free.pop()
            if buf.size == nbytes:
                return buf
        return np.empty(nbytes, dtype=np.uint8)

    def _give_back(self, buf: np.ndarray | None) -> None:
        if buf is not None and len(self._free) < 4:
            self._free.append(buf)

    def chunk(self, i: int, c: int) -> np.ndarray:
        key = (i, c)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit[0]
        buf = self._spare(self.files[i])
        data = self._decode(i, c, buf)
        self._cache[key] = (data, buf)
        self._cached_bytes += data.nbytes
        while self._cached_bytes > self._budget and len(self._cache) > 1:
            _, (old, old_buf) = self._cache.popitem(last=False)
            self._cached_bytes -= old.nbytes
            self._give_back(old_buf)
        return data

    def _whole(self, sig: tuple) -> bool:
        """Whether the signal slices `sig` are whole frames."""
        return all(
            (s.start or 0) == 0 and (s.stop is None or s.stop >= n) and s.step in (None, 1)
            for s, n in zip(sig, self.frame_shape, strict=True)
        )

    def read(self, index: tuple, out: np.ndarray) -> None:
        """Fill `out` with the frames ``index[0]`` (a slice of the series) cut to the signal
        slices ``index[1:]``."""
        frames, sig = index[0], index[1:]
        start, stop = frames.start, frames.stop
        i = int(np.searchsorted(self.starts, start, side="right")) - 1
        pos = start
        whole = self._whole(sig)
        # the chunks of this read and the next (the signal slices of a tile read the same
        # frames one after another): decoded once, in buffers that are then reused
        self._budget = min(
            CACHE_BYTES, 2 * (stop - start) * self._frame_bytes + 2 * self._chunk_bytes
        )
        while pos < stop:
            entry = self.files[i]
            local = pos - entry.first
            c, within = divmod(local, entry.chunk_frames)
            chunk_len = min(entry.chunk_frames, entry.count - c * entry.chunk_frames)
            buf = None  # (a buffer to give back once copied from)
            if whole and within == 0 and stop - pos >= chunk_len:
                # all of the chunk, once: not kept; decoded straight into `out` where it is
                # the chunk's dtype, else into a reused buffer (in the CPU's cache, no new
                # pages to fault in for each chunk)
                if (
                    chunk_len == entry.chunk_frames
                    and out.dtype == self.dtype
                    and out.flags.c_contiguous
                    and self.codec in INTO_BUFFERS
                ):
                    self._decode(i, c, out[pos - start : pos - start + chunk_len])
                    data = None
                else:
                    buf = self._spare(entry)
                    data = self._decode(i, c, buf)
            else:
                data = self.chunk(i, c)
            if data is None:
                n = chunk_len
            else:
                n = min(stop - pos, data.shape[0] - within)
                out[pos - start : pos - start + n] = data[(slice(within, within + n), *sig)]
                self._give_back(buf)
            pos += n
            if pos - entry.first >= entry.count:
                i += 1
