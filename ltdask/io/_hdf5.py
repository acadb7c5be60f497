"""HDF5 datasets (through h5py): chunked and compressed, or read straight from the file.

Which read path a dataset takes depends on how HDF5 stores it:

* **contiguous**, no filters: one block of bytes at ``dataset.id.get_offset()``; read like a
  raw file (memory map, straight views, numba decoders) with a one-entry `FileSet`;
* **chunked without filters, whole frames per chunk**: every chunk is a run of frames at its
  own offset (``dataset.id.chunk_iter``); read like a raw file whose `FileSet` lists one
  entry per run of frames;
* anything else (compression, chunks that cut frames, unallocated chunks, external or
  virtual storage): through h5py, chunk aligned (:class:`~ltdask.io.chunked.ChunkedArrayDataSet`),
  with a chunk cache large enough for the chunks a task reads in turn.

h5py serialises its calls with one lock per process, so the last path reads in parallel on
the processes or distributed schedulers, not on threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import stat
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io._raw import check_file
from ltdask.io.chunked import ChunkedArrayDataSet, check_sig_dims
from ltdask.io.dataset import check_dtype, check_shape
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import (
    File,
    FileSet,
    MappedFiles,
    Signature,
    changed_error,
    same_version,
    signature_of,
    stat_regular_file,
)

#: at most this many runs of frames make a straight-read file set (more: read via h5py)
MAX_RUNS = 8192
#: HDF5 chunk cache per open file in a task: at least / at most
MIN_CACHE = 1 << 20
MAX_CACHE = 128 << 20
#: file suffixes that are HDF5 containers
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".nxs", ".emd", ".cxi", ".he5")
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def import_h5py():
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is installed with the test extras
        raise ImportError(
            "reading HDF5 files needs h5py: pip install h5py (or install ltdask[hdf5])"
        ) from None
    return h5py


def is_hdf5(path: str) -> bool:
    """Whether the file starts with the HDF5 signature (at 0, 512, 1024, ... bytes); False
    for anything but a regular file (reading a FIFO would block)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        size = st.st_size
        with open(path, "rb") as f:
            offset = 0
            while offset + 8 <= size:
                f.seek(offset)
                if f.read(8) == HDF5_MAGIC:
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False
    return False


def candidate_datasets(f, min_dims: int = 3) -> list[tuple[str, tuple[int, ...], str]]:
    """``(name, shape, dtype)`` of every dataset in the open h5py file with >= `min_dims`."""
    h5py = import_h5py()
    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.ndim >= min_dims:
            found.append(("/" + name, tuple(obj.shape), str(obj.dtype)))

    f.visititems(visit)
    return sorted(found)


def describe_candidates(found) -> str:
    if not found:
        return "the file holds no dataset with at least 3 dims"
    listed = ", ".join(f"{name!r} {shape} {dtype}" for name, shape, dtype in found)
    return f"datasets with at least 3 dims: {listed}"


def find_dataset(f, key: str | None, path: str, sig_dims: int):
    """The h5py dataset `key` of the open file `f`; errors list the candidates."""
    h5py = import_h5py()
    if key is None:
        found = candidate_datasets(f, sig_dims + 1)
        if len(found) == 1:
            return f[found[0][0]]
        what = "several datasets could be the scan" if found else "no key given"
        raise DataSetError(
            f"{path!r}: {what}; pass key=... naming one ({describe_candidates(found)})"
        )
    try:
        obj = f.get(key)
    except (KeyError, ValueError, OSError, TypeError):
        obj = None
    if obj is None or not isinstance(obj, h5py.Dataset):
        what = "is a group, not a dataset" if isinstance(obj, h5py.Group) else "does not exist"
        raise DataSetError(
            f"{path!r}: key={key!r} {what}; {describe_candidates(candidate_datasets(f))}"
        )
    if obj.ndim <= sig_dims:
        raise DataSetError(
            f"{path!r}: dataset {key!r} has shape {obj.shape}, which has no nav dims with "
            f"sig_dims={sig_dims}; {describe_candidates(candidate_datasets(f))}"
        )
    return obj


def dimension_labels(dset) -> tuple[str, ...] | None:
    """The dataset's HDF5 dimension labels, if every dim has a distinct one."""
    try:
        labels = tuple(str(d.label) for d in dset.dims)
    except Exception:  # dimension scales are optional and sometimes malformed
        return None
    if all(labels) and len(set(labels)) == len(labels):
        return labels
    return None


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
    info = []
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

    def __getitem__(self, idx: int) -> np.ndarray:
        return super().__getitem__(int(self._fileset.canonical[int(idx)]))


class HDF5MappedDataSet(FileDataSet):
    """An HDF5 dataset whose bytes are read straight from the file (see :func:`open_hdf5`):
    contiguous storage, or unfiltered chunks of whole frames."""

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


class HDF5DataSet(ChunkedArrayDataSet):
    """An HDF5 dataset read through h5py, chunk aligned (see :func:`open_hdf5`)."""

    def __init__(
        self,
        path: str,
        key: str,
        shape,
        dtype,
        sig_dims: int,
        chunks,
        layout: str,
        nav_shape=None,
        sync_offset=0,
        dims=None,
        signature: Signature | None = None,
    ):
        self.path = path
        self.key = key
        #: the opened version of the file; tasks refuse to read another
        self.signature = signature or signature_of(stat_regular_file(path))
        self.layout = layout
        self.chunks = chunks
        super().__init__(
            shape,
            dtype,
            sig_dims,
            read_chunks=chunks,
            nav_shape=nav_shape,
            sync_offset=sync_offset,
            dims=dims,
        )
        self.cache_bytes = self._cache_bytes()

    def _cache_bytes(self) -> int:
        """Room for every chunk that shares a position along the first dim: reading frames in
        order then decompresses each chunk once, however tiles cut across chunks."""
        if self.read_chunks is None:
            return MIN_CACHE
        per_chunk = math.prod(self.read_chunks) * self.dtype.itemsize
        band = math.prod(
            -(-n // c) for n, c in zip(self.array_shape[1:], self.read_chunks[1:], strict=True)
        )
        return int(min(MAX_CACHE, max(MIN_CACHE, 2 * band * per_chunk)))

    def check_unchanged(self) -> None:
        """A `DataSetError` if the file is not the version that was opened (one ``os.stat``):
        HDF5 may place the dataset elsewhere in a rewritten file, and h5py would read
        whatever the same key now holds, or another dataset's bytes."""
        try:
            st = os.stat(self.path)
            now = signature_of(st)
        except OSError as e:
            raise DataSetError(f"cannot read {self.path!r}: {e.strerror or e}") from None
        if not same_version(self.signature, now):
            raise changed_error(self.path, tuple(self.signature), now, st.st_mode)

    def _check_opened(self, f) -> None:
        """`check_unchanged` for the file h5py opened (it may have been replaced between
        the check and the opening)."""
        try:
            now = signature_of(os.fstat(f.id.get_vfd_handle()))
        except (OSError, ValueError, TypeError, AttributeError):
            return  # a file driver without a file descriptor: the check before opening holds
        if not same_version(self.signature, now):
            raise changed_error(self.path, tuple(self.signature), now)

    @contextlib.contextmanager
    def open_reader(self):
        h5py = import_h5py()
        nslots = max(10007, 20 * (self.cache_bytes // MIN_CACHE) + 1)
        self.check_unchanged()
        try:
            f = h5py.File(
                self.path,
                "r",
                rdcc_nbytes=self.cache_bytes,
                rdcc_nslots=nslots,
                rdcc_w0=1.0,
            )
        except OSError as e:
            raise DataSetError(f"cannot read {self.path!r} as HDF5: {e}") from None
        with f:
            self._check_opened(f)
            dset = f[self.key]

            def read(index, out):
                try:
                    dset.read_direct(out, source_sel=index)
                except OSError as e:  # a damaged chunk, a failing filter
                    raise DataSetError(
                        f"cannot read {self.path!r} dataset {self.key!r} at {index}: {e}"
                    ) from e

            yield read

    def attrs(self) -> dict:
        return {**super().attrs(), "key": self.key, "layout": self.layout}

    def _token_fields(self) -> tuple:
        return (super()._token_fields(), self.path, tuple(self.signature), self.key)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", {self.key!r} {self.layout}>"


def open_hdf5(
    path: PathLike,
    key: str | None = None,
    sig_dims: int = 2,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
    nav_shape: Sequence[int] | None = None,
    mmap: bool = True,
) -> HDF5DataSet | HDF5MappedDataSet:
    """Open the dataset `key` of an HDF5 file; its last `sig_dims` dims are the frame.

    Only the file's metadata is read here; tasks open the file themselves.

    Parameters
    ----------
    path
        The HDF5 file.
    key
        Path of the dataset inside the file, e.g. ``"/entry/data/data"``. If None, the one
        dataset with more than `sig_dims` dims (an error lists them if there are several).
    sig_dims
        How many trailing dims are the frame.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames first.
    dims
        Names of the nav and sig dims; by default the dataset's HDF5 dimension labels, if
        it has distinct ones, else ``scan_y, scan_x, det_y, det_x`` (for 4-D).
    nav_shape
        Reinterpret the stored frames (flattened) as this scan shape.
    mmap
        Read uncompressed data (contiguous, or chunks of whole frames) through memory maps
        of the file, like a raw file; False reads everything through h5py.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ltdask.DataSetError
        The file is not HDF5, `key` is not a dataset in it (the message lists the datasets
        with at least 3 dims), or shapes and offsets do not fit.

    Examples
    --------
    >>> import h5py, numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.h5")
    >>> data = np.arange(4 * 5 * 6 * 7, dtype=np.uint16).reshape(4, 5, 6, 7)
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("data", data=data, chunks=(2, 5, 6, 7), compression="gzip")
    >>> ds = open_hdf5(path, "data")
    >>> ds.nav_shape, ds.sig_shape, ds.layout
    ((4, 5), (6, 7), 'chunked')
    >>> bool((ds.to_dask().compute() == data).all())
    True
    """
    h5py = import_h5py()
    path = check_file(path)
    # before h5py reads the metadata: a file rewritten while it is read is then caught
    signature = signature_of(stat_regular_file(path))
    if not is_hdf5(path):
        raise DataSetError(f"{path!r} is not an HDF5 file (no HDF5 signature)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise DataSetError(f"cannot open {path!r} as HDF5 (truncated or damaged?): {e}") from None
    with f:
        if not isinstance(sig_dims, (int, np.integer)) or sig_dims < 1:
            raise DataSetError(f"{path!r}: sig_dims={sig_dims!r} must be a positive integer")
        dset = find_dataset(f, key, path, int(sig_dims))
        key = dset.name
        shape = tuple(int(s) for s in dset.shape)
        sig_dims = check_sig_dims(sig_dims, shape, f"{path!r}: dataset {key!r}")
        dtype = check_dtype(dset.dtype, f"{path!r}: dataset {key!r}")
        if nav_shape is not None:
            nav_shape = check_shape(nav_shape, "nav_shape", path)
        if dims is None and nav_shape is None:
            dims = dimension_labels(dset)
        plist = dset.id.get_create_plist()
        unfiltered = plist.get_nfilters() == 0 and dset.external is None
        layout = plist.get_layout()
        chunks = None if dset.chunks is None else tuple(int(c) for c in dset.chunks)
        files = None
        if mmap and unfiltered and math.prod(shape) > 0:
            if layout == h5py.h5d.CONTIGUOUS:
                offset = dset.id.get_offset()
                if offset is not None:
                    nbytes = math.prod(shape) * dtype.itemsize
                    size = os.path.getsize(path)
                    if offset + nbytes > size:
                        raise DataSetError(
                            f"{path!r}: dataset {key!r} needs bytes {offset} to "
                            f"{offset + nbytes}, the file has {size}; it is truncated"
                        )
                    frames = math.prod(shape[:-sig_dims])
                    files = [File(path, 0, frames, int(offset))]
            elif layout == h5py.h5d.CHUNKED:
                files = chunk_runs(dset, path, sig_dims)
        kind = {h5py.h5d.CONTIGUOUS: "contiguous", h5py.h5d.CHUNKED: "chunked"}.get(layout, "other")
        if dset.is_virtual:
            kind = "virtual"
    common = dict(nav_shape=nav_shape, sync_offset=sync_offset, dims=dims)
    if files is not None:
        files = [dataclasses.replace(f, signature=signature) for f in files]
        return HDF5MappedDataSet(path, key, files, shape, dtype, sig_dims, kind, chunks, **common)
    return HDF5DataSet(
        path, key, shape, dtype, sig_dims, chunks, kind, **common, signature=signature
    )
