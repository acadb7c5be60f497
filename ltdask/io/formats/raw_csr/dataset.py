"""Sparse scans stored as CSR: LiberTEM's ``raw_csr`` format.

A TOML descriptor names three raw files that hold one CSR matrix of shape
``(frames, frame pixels)``: row pointers, column indices and values::

    [params]
    filetype = "raw_csr"
    nav_shape = [512, 512]
    sig_shape = [516, 516]
    sync_offset = 0            # optional

    [raw_csr]
    indptr_file = "rowind.dat"
    indptr_dtype = "<i4"
    indices_file = "coords.dat"
    indices_dtype = "<i4"
    data_file = "values.dat"
    data_dtype = "<i4"

File names are relative to the descriptor's directory. Tiles are whole frames, delivered
dense (the default, and what UDFs get) or as ``scipy.sparse.csr_matrix`` of shape
``(frames, frame pixels)`` with ``iter_tiles(..., array_backend="scipy.sparse.csr_matrix")``.
:mod:`~ltdask.io.formats.raw_csr.descriptor` reads the descriptor, and the numba kernels that
densify or gather rows are in :mod:`~ltdask.io.formats.raw_csr.kernels`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.common import Slice
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    Signature,
    check_file,
    check_fits_memory,
    check_shape,
    signature_of,
    stat_regular_file,
)
from ltdask.io.dataset import DataSet
from ltdask.io.formats.raw_csr.descriptor import read_descriptor
from ltdask.io.formats.raw_csr.kernels import (
    csr_densify,
    csr_densify_reference,
    csr_gather,
    numba_cannot,
)
from ltdask.io.maps import map_file
from ltdask.io.tiling import TilingScheme

BACKEND_NUMPY = "numpy"
BACKEND_SCIPY_CSR = "scipy.sparse.csr_matrix"


def _count(path: str, size: int, dtype: np.dtype, what: str) -> int:
    n, rest = divmod(size, dtype.itemsize)
    if rest:
        raise DataSetError(
            f"{path!r}: {size} bytes is not a whole number of {what} ({dtype}, "
            f"{dtype.itemsize} bytes each); the file is truncated or the dtype is wrong"
        )
    return n


def _view(path: str, dtype: np.dtype, signature: Signature) -> np.ndarray:
    raw = map_file(path, signature=signature)
    usable = raw.size - raw.size % dtype.itemsize
    return raw[:usable].view(dtype)


class RawCSRDataSet(DataSet):
    """A sparse scan stored as CSR (see :func:`open_raw_csr`).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> np.array([0, 1, 1, 2], "<i4").tofile(os.path.join(folder, "ptr.raw"))  # 3 frames
    >>> np.array([5, 0], "<i4").tofile(os.path.join(folder, "idx.raw"))
    >>> np.array([7, 9], "<u2").tofile(os.path.join(folder, "val.raw"))
    >>> with open(os.path.join(folder, "scan.toml"), "w") as f:
    ...     _ = f.write('''[params]
    ... filetype = "raw_csr"
    ... nav_shape = [3]
    ... sig_shape = [2, 4]
    ... [raw_csr]
    ... indptr_file = "ptr.raw"
    ... indptr_dtype = "<i4"
    ... indices_file = "idx.raw"
    ... indices_dtype = "<i4"
    ... data_file = "val.raw"
    ... data_dtype = "<u2"
    ... ''')
    >>> ds = ltdask.open(os.path.join(folder, "scan.toml"))
    >>> type(ds).__name__, ds.nnz, ds.array_backends
    ('RawCSRDataSet', 2, ('scipy.sparse.csr_matrix', 'numpy'))
    >>> ds.to_dask().compute().reshape(3, 8).tolist()
    [[0, 0, 0, 0, 0, 7, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [9, 0, 0, 0, 0, 0, 0, 0]]
    """

    #: tile types :meth:`iter_tiles` can deliver (LiberTEM's ``array_backends``)
    array_backends = (BACKEND_SCIPY_CSR, BACKEND_NUMPY)

    def __init__(self, path, nav_shape=None, sig_shape=None, sync_offset=None, dims=None):
        path = check_file(path)
        self.path = path
        params, files = read_descriptor(path)
        self.files = files
        #: the opened version of each file (descriptor, indptr, indices, data); tasks
        #: refuse to read files that changed since
        self.signatures: tuple[Signature, ...] = tuple(
            signature_of(stat_regular_file(check_file(name)))
            for name in (path, files.indptr, files.indices, files.data)
        )
        _, ptr_sig, idx_sig, data_sig = self.signatures
        file_nav = params.get("nav_shape")
        file_sig = params.get("sig_shape")
        if nav_shape is None:
            if file_nav is None:
                raise DataSetError(f"{path!r}: [params] has no nav_shape; pass nav_shape=...")
            nav_shape = file_nav
        if sig_shape is None:
            if file_sig is None:
                raise DataSetError(f"{path!r}: [params] has no sig_shape; pass sig_shape=...")
            sig_shape = file_sig
        sig = check_shape(sig_shape, "sig_shape", path)
        if file_sig is not None:
            stored = check_shape(file_sig, "[params] sig_shape", path)
            if math.prod(stored) != math.prod(sig):
                raise DataSetError(
                    f"{path!r}: sig_shape={sig} has {math.prod(sig)} pixels, the file's "
                    f"frames {stored} have {math.prod(stored)}"
                )
        if sync_offset is None:
            sync_offset = params.get("sync_offset", 0)

        n_ptr = _count(files.indptr, ptr_sig[2], files.indptr_dtype, "row pointers")
        n_idx = _count(files.indices, idx_sig[2], files.indices_dtype, "indices")
        nnz = _count(files.data, data_sig[2], files.data_dtype, "values")
        if n_ptr < 1:
            raise DataSetError(f"{files.indptr!r} is empty; it needs frames + 1 row pointers")
        if n_idx != nnz:
            raise DataSetError(
                f"{path!r}: {files.indices!r} holds {n_idx} indices but {files.data!r} "
                f"{nnz} values; they must match (is one of them truncated?)"
            )
        indptr = _view(files.indptr, files.indptr_dtype, ptr_sig)
        first, last = int(indptr[0]), int(indptr[-1])
        if not 0 <= first <= last or last != nnz:
            raise DataSetError(
                f"{path!r}: the row pointers run from {first} to {last}, but the files hold "
                f"{nnz} values; expected 0 <= first <= last == {nnz} (truncated files?)"
            )
        self.nnz = nnz
        super().__init__(
            nav_shape,
            sig,
            files.data_dtype,
            sync_offset=sync_offset,
            image_count=n_ptr - 1,
            dims=dims,
        )

    def partition_frame_bytes(self) -> int:
        # a partition's tiles are CSR rows: its stored entries (values as float32 or wider,
        # and their indices), not its frames' pixels
        per_entry = max(4, self.dtype.itemsize) + np.dtype(self.files.indices_dtype).itemsize
        return -(-self.nnz * per_entry // max(1, self.image_count)) + 16

    # -- negotiation: whole frames only ---------------------------------------------------
    def get_base_shape(self, roi=None) -> tuple[int, ...]:
        return self.sig_shape

    def get_min_sig_size(self) -> int:
        return math.prod(self.sig_shape)

    def adjust_tileshape(self, tileshape: tuple[int, ...], roi=None) -> tuple[int, ...]:
        return (tileshape[0], *self.sig_shape)

    def need_decode(self, read_dtype, roi=None) -> bool:
        return True

    # -- reading (in tasks) -----------------------------------------------------------------
    def _arrays(self):
        f = self.files
        _, ptr_sig, idx_sig, data_sig = self.signatures
        arrays = (
            _view(f.indptr, f.indptr_dtype, ptr_sig),
            _view(f.indices, f.indices_dtype, idx_sig),
            _view(f.data, f.data_dtype, data_sig),
        )
        # the kernels trust the row pointers: files that shrank since opening must not be read
        need = (self.image_count + 1, self.nnz, self.nnz)
        for name, arr, n in zip((f.indptr, f.indices, f.data), arrays, need, strict=True):
            if arr.size < n:
                raise DataSetError(
                    f"{name!r} holds {arr.size} items, but the dataset was opened with {n}; "
                    "was the file truncated or replaced since? Open it again"
                )
        return arrays

    def _rows(self, arrays, frames: np.ndarray):
        """``(starts, stops, indices, values)`` for present `frames`: native arrays that
        numba can read, with starts/stops relative to them."""
        indptr, indices, values = arrays
        starts = indptr[frames].astype(np.int64)
        stops = indptr[frames + 1].astype(np.int64)
        # the kernels trust the row pointers: damaged ones would read outside the files
        bad = (starts > stops) | (starts < 0) | (stops > self.nnz)
        if bad.any():
            frame = int(frames[np.argmax(bad)])
            raise DataSetError(
                f"{self.files.indptr!r}: the row pointers of frame {frame} run from "
                f"{int(indptr[frame])} to {int(indptr[frame + 1])}; expected "
                f"0 <= start <= stop <= {self.nnz} (the file is damaged)"
            )
        lo = int(starts.min()) if starts.size else 0
        hi = int(stops.max()) if stops.size else 0
        indices = indices[lo:hi]
        values = values[lo:hi]
        if not indices.dtype.isnative:
            indices = indices.astype(indices.dtype.newbyteorder("="))
        if not values.dtype.isnative:
            values = values.astype(values.dtype.newbyteorder("="))
        return starts - lo, stops - lo, indices, values

    def _densify(self, rows, out2d: np.ndarray) -> None:
        starts, stops, indices, values = rows
        if numba_cannot(out2d.dtype, values.dtype):
            bad = csr_densify_reference(starts, stops, indices, values, out2d)
        else:
            bad = csr_densify(starts, stops, indices, values, out2d)
        if bad:
            raise DataSetError(
                f"{self.path!r}: {bad} column indices in {self.files.indices!r} are outside "
                f"the frame of {out2d.shape[1]} pixels; check sig_shape and indices_dtype"
            )

    def _sparse(self, rows, dtype: np.dtype):
        import scipy.sparse

        starts, stops, indices, values = rows
        n = starts.size
        sig_px = math.prod(self.sig_shape)
        index_dtype = np.int32 if max(sig_px, self.nnz) < 2**31 else np.int64
        counts = stops - starts
        total = int(counts.sum())
        idx_out = np.empty(total, dtype=index_dtype)
        val_out = np.empty(total, dtype=dtype)
        indptr_out = np.empty(n + 1, dtype=index_dtype)
        canonical = False  # (scipy checks when asked)
        if numba_cannot(values.dtype, dtype):
            # numba does not cast to and from bool or handle float16; this path is rare
            indptr_out[0] = 0
            np.cumsum(counts, out=indptr_out[1:])
            for i, (a, b) in enumerate(zip(starts.tolist(), stops.tolist(), strict=True)):
                idx_out[indptr_out[i] : indptr_out[i + 1]] = indices[a:b]
                val_out[indptr_out[i] : indptr_out[i + 1]] = values[a:b]
        else:
            canonical = csr_gather(starts, stops, indices, values, idx_out, val_out, indptr_out)
        if total and (idx_out.min() < 0 or idx_out.max() >= sig_px):
            raise DataSetError(
                f"{self.path!r}: column indices in {self.files.indices!r} are outside the "
                f"frame of {sig_px} pixels; check sig_shape and indices_dtype"
            )
        tile = scipy.sparse.csr_matrix((val_out, idx_out, indptr_out), shape=(n, sig_px))
        if canonical:
            # (kernels that need one value per pixel then skip scipy's check of the rows;
            # rows with duplicate or unsorted indices are canonicalised by them)
            tile.has_canonical_format = True
        return tile

    def read_frames(self, positions: np.ndarray, sig_slice: Slice, dtype) -> np.ndarray:
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        sig_px = math.prod(self.sig_shape)
        check_fits_memory((frames.size, *self.sig_shape), dtype, repr(self.path))
        out = np.zeros((frames.size, sig_px), dtype=dtype)
        present = np.flatnonzero(frames >= 0)
        if present.size:
            rows = self._rows(self._arrays(), frames[present])
            if present.size == frames.size:
                self._densify(rows, out)
            else:
                part = np.zeros((present.size, sig_px), dtype=dtype)
                self._densify(rows, part)
                out[present] = part
        out = out.reshape((frames.size, *self.sig_shape))
        if tuple(sig_slice.shape) == self.sig_shape:
            return out
        return np.ascontiguousarray(out[(slice(None), *sig_slice.get())])

    def iter_tiles(
        self,
        positions: np.ndarray,
        scheme: TilingScheme,
        dtype,
        block=None,
        array_backend: str | None = None,
    ) -> Iterator[tuple[np.ndarray, int, int]]:
        """Tiles of whole frames (see :meth:`DataSet.iter_tiles`).

        `array_backend` ``"numpy"`` (default) gives dense ``(n, *sig_shape)`` arrays;
        ``"scipy.sparse.csr_matrix"`` gives ``csr_matrix`` tiles of shape
        ``(n, frame pixels)``, as LiberTEM does.
        """
        backend = BACKEND_NUMPY if array_backend is None else array_backend
        if backend not in self.array_backends:
            raise DataSetError(
                f"{self.path!r}: array_backend={array_backend!r}; expected one of "
                f"{self.array_backends}"
            )
        if len(scheme) != 1 or tuple(scheme[0].shape) != self.sig_shape:
            raise DataSetError(
                f"{self.path!r}: CSR data is read in whole frames; the tiling scheme cuts "
                f"the frame into {len(scheme)} slices of {tuple(scheme[0].shape)}"
            )
        dtype = np.dtype(dtype).newbyteorder("=")
        frames = self.stream_frames(positions)
        if frames.size == 0:
            return
        arrays = self._arrays()
        sig_px = math.prod(self.sig_shape)
        buf = None
        for first in range(0, frames.size, scheme.depth):
            block_frames = frames[first : first + scheme.depth]
            n = block_frames.size
            rows = self._rows(arrays, block_frames)
            if backend == BACKEND_SCIPY_CSR:
                yield self._sparse(rows, dtype), first, 0
                continue
            if buf is None:
                check_fits_memory((scheme.depth, *self.sig_shape), dtype, repr(self.path))
                buf = np.empty(scheme.depth * sig_px, dtype=dtype)
            out = buf[: n * sig_px].reshape((n, sig_px))
            out[...] = 0
            self._densify(rows, out)
            yield out.reshape((n, *self.sig_shape)), first, 0

    def attrs(self) -> dict:
        return {**super().attrs(), "nnz": self.nnz}

    def _token_fields(self) -> tuple:
        names = (self.path, self.files.indptr, self.files.indices, self.files.data)
        return (
            super()._token_fields(),
            tuple(zip(names, self.signatures, strict=True)),
            self.files.indptr_dtype.str,
            self.files.indices_dtype.str,
        )


@takes_calibration
def open_raw_csr(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    sync_offset: int | None = None,
    dims: Sequence[str] | None = None,
) -> RawCSRDataSet:
    """Open a sparse scan in LiberTEM's ``raw_csr`` layout from its TOML descriptor.

    Only the descriptor, the file sizes and two row pointers are read here.

    Parameters
    ----------
    path
        The TOML descriptor (see :mod:`ltdask.io.formats.raw_csr` for its keys).
    nav_shape, sig_shape
        Override the shapes of the descriptor (``sig_shape`` must keep the frame size).
    sync_offset
        Override the descriptor's ``sync_offset`` (0 if it has none).
    dims
        Names of the nav and sig dims.

    Raises
    ------
    FileNotFoundError
        The descriptor or a file it names does not exist.
    ltdask.DataSetError
        The descriptor is not valid TOML or lacks keys, or the files do not fit together.

    Examples
    --------
    >>> import numpy as np, scipy.sparse, ltdask, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> dense = np.zeros((2, 3, 4, 4), dtype=np.float32)
    >>> dense[0, 1, 2, 3] = 7
    >>> csr = scipy.sparse.csr_matrix(dense.reshape(6, 16))
    >>> for name, arr in [("ptr", csr.indptr), ("idx", csr.indices), ("val", csr.data)]:
    ...     arr.tofile(os.path.join(folder, name + ".raw"))
    >>> with open(os.path.join(folder, "scan.toml"), "w") as f:
    ...     _ = f.write('''[params]
    ... filetype = "raw_csr"
    ... nav_shape = [2, 3]
    ... sig_shape = [4, 4]
    ... [raw_csr]
    ... indptr_file = "ptr.raw"
    ... indptr_dtype = "<i4"
    ... indices_file = "idx.raw"
    ... indices_dtype = "<i4"
    ... data_file = "val.raw"
    ... data_dtype = "<f4"
    ... ''')
    >>> ds = open_raw_csr(os.path.join(folder, "scan.toml"))
    >>> ds.shape, ds.nnz
    (Shape((2, 3, 4, 4), sig_dims=2), 1)
    >>> bool((ds.to_dask().compute() == dense).all())
    True
    """
    return RawCSRDataSet(path, nav_shape, sig_shape, sync_offset, dims)
