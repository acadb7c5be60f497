"""HDF5 datasets read straight from the file, like raw files: contiguous storage, or
unfiltered chunks that hold whole frames (see :mod:`ltdask.io.formats.hdf5`).

The dataset's bytes are described by a `FileSet` whose entries are runs of frames at their
offsets in the one file; tasks memory-map the file, hand out views where nothing needs
decoding, and decode with the numba read path otherwise. h5py is only used at open time, to
find the offsets.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ltdask.exceptions import DataSetError
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet, MappedFiles

#: at most this many runs of frames make a straight-read file set (more: read via h5py)
MAX_RUNS = 8192


def chunk_runs(dset, path: str, sig_dims: int) -> list[File] | None:
    """Runs of whole frames stored back to back in an unfiltered chunked dataset, as `File`
    entries in stream order; None if the layout does not allow straight reads."""
    shape = dset.shape
    chunks = dset.chunks
    nav, sig = shape[:-sig_dims], shape[-sig_dims:]
    if tuple(chunks[-sig_dims:]) != tuple(sig):
        return None
    chunk_nav = chunks[:-sig_dims]
    expected = math.prod(-(-n // c) for n, c in zip(nav, chunk_nav, strict=True))
    if dset.id.get_num_chunks() != expected:
        return None  # unallocated chunks read as the fill value
    frame_bytes = math.prod(sig) * dset.dtype.itemsize
    size = os.path.getsize(path)
    inner = chunk_nav[-1]
    lead_shape = chunk_nav[:-1]
    runs: list[tuple[int, int, int]] = []  # (first frame, frames, byte offset)
    info: list = []
    dset.id.chunk_iter(info.append)
    if len(info) != expected:
        return None
    for chunk in info:
        origin = chunk.chunk_offset[: len(nav)]
        if chunk.byte_offset is None or chunk.byte_offset + chunk.size > size:
            raise DataSetError(
                f"{path!r}: a chunk of {dset.name!r} lies beyond the end of the file "
                f"({size} bytes); the file is truncated"
            )
        count = min(inner, nav[-1] - origin[-1])
        for lead in np.ndindex(*lead_shape):
            position = tuple(o + i for o, i in zip(origin[:-1], lead, strict=True))
            if any(p >= n for p, n in zip(position, nav[:-1], strict=True)):
                continue
            first = int(np.ravel_multi_index((*position, origin[-1]), nav))
            in_chunk = int(np.ravel_multi_index((*lead, 0), chunk_nav)) if lead_shape else 0
            runs.append((first, count, chunk.byte_offset + in_chunk * frame_bytes))
            if len(runs) > 4 * MAX_RUNS:
                return None
    runs.sort()
    merged: list[list[int]] = []
    for first, count, offset in runs:
        if merged:
            last = merged[-1]
            if last[0] + last[1] == first and last[2] + last[1] * frame_bytes == offset:
                last[1] += count
                continue
        merged.append([first, count, offset])
    if len(merged) > MAX_RUNS:
        return None
    return [File(path, first, count, offset) for first, count, offset in merged]


class SharedFileSet(FileSet):
    """A `FileSet` whose entries may be runs of frames in the same file: one memory map per
    distinct path, and read ranges that name it once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        first_of: dict[str, int] = {}
        self.canonical = np.array(
            [first_of.setdefault(f.path, i) for i, f in enumerate(self.files)], dtype=np.int64
        )

    def read_ranges(self, frames, depth, slices):
        tiles, ranges = super().read_ranges(frames, depth, slices)
        if ranges.size:
            ranges[..., 0] = self.canonical[ranges[..., 0]]
        return tiles, ranges

    def open(self) -> MappedFiles:
        return SharedMappedFiles(self)

    def bytes_needed(self) -> np.ndarray:
        """Per entry, the bytes its file needs for the frames of every entry in it."""
        needed = super().bytes_needed()
        per_file = np.zeros(len(self.files), dtype=np.int64)
        np.maximum.at(per_file, self.canonical, needed)
        return per_file[self.canonical]

    def __dask_tokenize__(self):
        return (
            "ltdask.SharedFileSet",
            self.signatures(),
            self.table.tobytes(),
            self.sig_shape,
            self.native_dtype.str,
        )


class SharedMappedFiles(MappedFiles):
    """One memory map per distinct file of a `SharedFileSet`."""

    def __init__(self, fileset: SharedFileSet):
        super().__init__(fileset)
        self._canonical = fileset.canonical

    def __getitem__(self, idx: int) -> np.ndarray:
        return super().__getitem__(int(self._canonical[int(idx)]))


class HDF5MappedDataSet(FileDataSet):
    """An HDF5 dataset whose bytes are read straight from the file (see :func:`open_hdf5`):
    contiguous storage, or unfiltered chunks of whole frames.

    Examples
    --------
    >>> import h5py, numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["data"] = np.zeros((2, 3, 4, 5), dtype=np.float32)
    >>> ds = ltdask.open_hdf5(path, "data")
    >>> type(ds).__name__, ds.key, ds.layout
    ('HDF5MappedDataSet', '/data', 'contiguous')
    >>> type(ltdask.open_hdf5(path, "data", mmap=False)).__name__  # read through h5py
    'HDF5DataSet'
    """

    def __init__(self, path, key, files, shape, dtype, sig_dims, layout, chunks, **kwargs):
        self.path = path
        self.key = key
        self.layout = layout
        self.chunks = chunks
        sig = shape[-sig_dims:]
        nav_shape = kwargs.pop("nav_shape", None) or shape[:-sig_dims]
        cls = SharedFileSet if len(files) > 1 else FileSet
        fileset = cls(files, sig, dtype)
        super().__init__(fileset, Decoder(dtype), nav_shape, **kwargs)

    def attrs(self) -> dict:
        return {**super().attrs(), "key": self.key, "layout": self.layout}

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self.key)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", {self.key!r} {self.layout}>"
