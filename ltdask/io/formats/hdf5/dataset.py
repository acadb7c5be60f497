"""HDF5 datasets (through h5py): chunked and compressed, or read straight from the file.

Which read path a dataset takes depends on how HDF5 stores it:

* **contiguous**, no filters: one block of bytes at ``dataset.id.get_offset()``; read like a
  raw file (memory map, straight views, numba decoders) with a one-entry `FileSet`;
* **chunked without filters, whole frames per chunk**: every chunk is a run of frames at its
  own offset (``dataset.id.chunk_iter``); read like a raw file whose `FileSet` lists one
  entry per run of frames (both: :mod:`ltdask.io.formats.hdf5.mapped`);
* anything else (compression, chunks that cut frames, unallocated chunks, external or
  virtual storage): through h5py, chunk aligned (:class:`~ltdask.io.chunked.ChunkedArrayDataSet`),
  with a chunk cache large enough for the chunks a task reads in turn.

h5py serialises its calls with one lock per process, so the last path reads in parallel on
the processes or distributed schedulers, not on threads.

Compression filters that HDF5 does not ship (bitshuffle, LZ4, Blosc, Zstd, ... as detectors
write them) come from ``hdf5plugin`` (``pip install ltdask[hdf5]``), imported before a file
is opened; a dataset whose filter is missing is refused at open time, naming the filter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import stat
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    Signature,
    changed_error,
    check_dtype,
    check_file,
    check_shape,
    check_sig_dims,
    describe_candidates,
    same_version,
    signature_of,
    stat_regular_file,
)
from ltdask.io.chunked import ChunkedArrayDataSet
from ltdask.io.fileset import File
from ltdask.io.formats.hdf5.mapped import HDF5MappedDataSet, chunk_runs

#: HDF5 chunk cache per open file in a task: at least / at most
MIN_CACHE = 1 << 20
MAX_CACHE = 128 << 20
#: file suffixes that are HDF5 containers
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".nxs", ".emd", ".cxi", ".he5")
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


#: names of the filters hdf5plugin brings, by HDF5 filter id (for files that name none)
PLUGIN_FILTERS = {
    307: "bzip2",
    32001: "Blosc",
    32004: "LZ4",
    32008: "bitshuffle",
    32013: "zfp",
    32015: "Zstd",
    32017: "SZ",
    32018: "FCIDECOMP",
    32024: "SZ3",
    32026: "Blosc2",
    32028: "SPERR",
    32033: "HTJ2K",
}


def import_h5py():
    """h5py, with the compression filters of ``hdf5plugin`` registered where it is installed."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is a dependency of ltdask
        raise ImportError(
            "reading HDF5 files needs h5py: pip install h5py (or install ltdask[hdf5])"
        ) from None
    register_filters()
    return h5py


@functools.cache
def register_filters() -> bool:
    """Import ``hdf5plugin`` if it is installed (once per process: tasks call this too):
    importing it registers its filters with HDF5. Whether it was found."""
    try:
        import hdf5plugin  # noqa: F401
    except ImportError:
        return False
    return True


def check_filters(dset, path: str, key: str) -> None:
    """A `DataSetError` naming the file, the dataset and the filter if a compression filter
    of `dset` is not available in this process (reading would fail in every task)."""
    h5py = import_h5py()
    plist = dset.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code, _, _, name = plist.get_filter(i)
        if h5py.h5z.filter_avail(code):
            continue
        stored = bytes(name).split(b"\0")[0].decode("ascii", "replace").split(";")[0].strip()
        label = stored or PLUGIN_FILTERS.get(code, "unknown")
        raise DataSetError(
            f"{path!r}: dataset {key!r} is compressed with the HDF5 filter {label!r} (id "
            f"{code}), which is not available here; pip install ltdask[hdf5] (hdf5plugin) "
            "to read it"
        )


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


def open_h5(path: str):
    """`path` opened read-only by h5py, after checking it is HDF5 at all (a clear error for
    other files, and for truncated or damaged ones)."""
    h5py = import_h5py()
    if not is_hdf5(path):
        raise DataSetError(f"{path!r} is not an HDF5 file (no HDF5 signature)")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise DataSetError(f"cannot open {path!r} as HDF5 (truncated or damaged?): {e}") from None


def candidate_datasets(f, min_dims: int = 3) -> list[tuple[str, tuple[int, ...], str]]:
    """``(name, shape, dtype)`` of every dataset in the open h5py file with >= `min_dims`."""
    h5py = import_h5py()
    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.ndim >= min_dims:
            found.append(("/" + name, tuple(obj.shape), str(obj.dtype)))

    f.visititems(visit)
    return sorted(found)


def _candidates_text(found) -> str:
    return describe_candidates(found, "dataset", "file")


def find_dataset(f, key: str | None, path: str, sig_dims: int):
    """The h5py dataset `key` of the open file `f`; errors list the candidates."""
    h5py = import_h5py()
    if key is None:
        found = candidate_datasets(f, sig_dims + 1)
        if len(found) == 1:
            return f[found[0][0]]
        what = "several datasets could be the scan" if found else "no key given"
        raise DataSetError(f"{path!r}: {what}; pass key=... naming one ({_candidates_text(found)})")
    try:
        obj = f.get(key)
    except (KeyError, ValueError, OSError, TypeError):
        obj = None
    if obj is None or not isinstance(obj, h5py.Dataset):
        what = "is a group, not a dataset" if isinstance(obj, h5py.Group) else "does not exist"
        raise DataSetError(
            f"{path!r}: key={key!r} {what}; {_candidates_text(candidate_datasets(f))}"
        )
    if obj.ndim <= sig_dims:
        raise DataSetError(
            f"{path!r}: dataset {key!r} has shape {obj.shape}, which has no nav dims with "
            f"sig_dims={sig_dims}; {_candidates_text(candidate_datasets(f))}"
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


class HDF5DataSet(ChunkedArrayDataSet):
    """An HDF5 dataset read through h5py, chunk aligned (see :func:`open_hdf5`).

    What `open_hdf5` gives for compressed data, or with ``mmap=False``.

    Examples
    --------
    >>> import h5py, numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("data", data=np.zeros((2, 3, 4, 5)), compression="gzip")
    >>> ds = ltdask.open_hdf5(path, "data")
    >>> type(ds).__name__, ds.key, ds.layout
    ('HDF5DataSet', '/data', 'chunked')
    """

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
            raise changed_error(self.path, self.signature, now, st.st_mode)

    def _check_opened(self, f) -> None:
        """`check_unchanged` for the file h5py opened (it may have been replaced between
        the check and the opening)."""
        try:
            now = signature_of(os.fstat(f.id.get_vfd_handle()))
        except (OSError, ValueError, TypeError, AttributeError):
            return  # a file driver without a file descriptor: the check before opening holds
        if not same_version(self.signature, now):
            raise changed_error(self.path, self.signature, now)

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


@takes_calibration
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
    f = open_h5(path)
    with f:
        sig_dims = check_sig_dims(sig_dims, repr(path))
        dset = find_dataset(f, key, path, sig_dims)
        key = dset.name
        shape = tuple(int(s) for s in dset.shape)
        sig_dims = check_sig_dims(sig_dims, f"{path!r}: dataset {key!r}", shape)
        dtype = check_dtype(dset.dtype, f"{path!r}: dataset {key!r}")
        check_filters(dset, path, key)
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
