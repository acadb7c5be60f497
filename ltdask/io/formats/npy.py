"""NumPy ``.npy`` files: a raw scan whose layout comes from the file's header."""

from __future__ import annotations

import os

import numpy as np

from ltdask._types import PathLike
from ltdask.calibration import takes_calibration
from ltdask.exceptions import DataSetError
from ltdask.io.checks import Signature, check_dtype, check_file, check_sig_dims, signature_of
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet
from ltdask.io.registry import Format

NPY_MAGIC = b"\x93NUMPY"


def read_npy_header(path: str) -> tuple[tuple[int, ...], np.dtype, int, Signature]:
    """``(shape, dtype, data_offset, signature)`` of a C-ordered ``.npy`` file; `signature`
    is that of the version whose header was read."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        signature = signature_of(os.fstat(f.fileno()))
        try:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = fmt.read_array_header_2_0(f)
        except Exception as e:
            # numpy's parser lets more than ValueError escape from malformed headers
            # (tokenize.TokenError, IndexError, TypeError for odd 'descr' values...)
            raise DataSetError(
                f"{path!r} is not a valid .npy file: {type(e).__name__}: {e}"
            ) from None
        offset = f.tell()
    if fortran:
        raise DataSetError(f"{path!r} stores a Fortran-ordered array; expected C order")
    return tuple(shape), dtype, offset, signature


class NpyDataSet(FileDataSet):
    """A ``.npy`` file read through memory maps (see :func:`open_npy`).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.zeros((2, 3, 4, 5), dtype=np.uint16))
    >>> ds = ltdask.open(path)  # or ltdask.open_npy(path)
    >>> type(ds).__name__, ds.fileset.files[0].header_bytes  # frames after the npy header
    ('NpyDataSet', 128)
    """

    def __init__(self, path, sig_dims=2, sync_offset=0, dims=None):
        path = check_file(path)
        self.path = path
        shape, dtype, offset, signature = read_npy_header(path)
        dtype = check_dtype(dtype, path)
        sig_dims = check_sig_dims(sig_dims, repr(path), shape)
        nav, sig = shape[:-sig_dims], shape[-sig_dims:]
        frames = int(np.prod(nav))
        needed = offset + frames * dtype.itemsize * int(np.prod(sig))
        size = signature[2]
        if size < needed:
            raise DataSetError(
                f"{path!r} is truncated: its header says {shape} {dtype} ({needed} bytes with "
                f"the header), the file has {size}"
            )
        fileset = FileSet([File(path, 0, frames, offset, signature)], sig, dtype)
        super().__init__(fileset, Decoder(dtype), nav, sync_offset=sync_offset, dims=dims)


@takes_calibration
def open_npy(path: PathLike, sig_dims: int = 2, sync_offset: int = 0, dims=None) -> NpyDataSet:
    """Open a ``.npy`` file; its last `sig_dims` dims are the frame.

    Parameters
    ----------
    path
        The ``.npy`` file (memory-mapped, not loaded).
    sig_dims
        How many trailing dims are the frame.
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames first.
    dims
        Names of the nav and sig dims.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.ones((2, 3, 4, 5), dtype=np.uint8))
    >>> ds = ltdask.open_npy(path)
    >>> ds.nav_shape, ds.sig_shape
    ((2, 3), (4, 5))
    """
    return NpyDataSet(path, sig_dims=sig_dims, sync_offset=sync_offset, dims=dims)


FORMAT = Format(
    name="npy",
    opener=open_npy,
    description=".npy",
    suffixes=(".npy",),
    magic=(NPY_MAGIC,),
    keywords=("sig_dims", "sync_offset", "dims"),
    engine_suffixes=(".npy",),
)
