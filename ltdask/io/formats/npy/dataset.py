"""NumPy ``.npy`` files: a raw scan whose layout comes from the file's header (or, as in
LiberTEM, from ``nav_shape=`` / ``sig_shape=`` over the array's values in C order)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    Signature,
    check_dtype,
    check_file,
    check_shape,
    check_sig_dims,
    signature_of,
)
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet

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

    def __init__(self, path, sig_dims=2, sync_offset=0, dims=None, nav_shape=None, sig_shape=None):
        path = check_file(path)
        self.path = path
        shape, dtype, offset, signature = read_npy_header(path)
        dtype = check_dtype(dtype, path)
        nav, sig = _layout(path, shape, sig_dims, nav_shape, sig_shape)
        frames = math.prod(shape) // math.prod(sig) if math.prod(sig) else 0
        needed = offset + math.prod(shape) * dtype.itemsize
        size = signature[2]
        if size < needed:
            raise DataSetError(
                f"{path!r} is truncated: its header says {shape} {dtype} ({needed} bytes with "
                f"the header), the file has {size}"
            )
        fileset = FileSet([File(path, 0, frames, offset, signature)], sig, dtype)
        super().__init__(fileset, Decoder(dtype), nav, sync_offset=sync_offset, dims=dims)

    @classmethod
    def detect_params(cls, path, executor=None) -> dict | bool:
        """LiberTEM's ``detect_params``: ``{"parameters": {"path", "nav_shape",
        "sig_shape"}, "info": {"image_count", "native_sig_shape"}}`` as the file's header
        gives them (two signal dims), or False for a file that cannot be opened so.
        `executor` is accepted for LiberTEM's signature.

        Examples
        --------
        >>> import numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
        >>> np.save(path, np.zeros((2, 3, 4, 5), dtype=np.uint16))
        >>> NpyDataSet.detect_params(path)["parameters"]["nav_shape"]
        (2, 3)
        """
        try:
            ds = cls(path)
        except (DataSetError, OSError):
            return False
        return {
            "parameters": {"path": path, "nav_shape": ds.nav_shape, "sig_shape": ds.sig_shape},
            "info": {"image_count": ds.fileset.image_count, "native_sig_shape": ds.sig_shape},
        }


def _layout(path: str, shape, sig_dims, nav_shape, sig_shape):
    """The nav and sig shapes of the array `shape` (its header's): its last `sig_dims`
    dims, or `sig_shape` (frames of that many values, in C order: the file's values must
    be whole frames), and `nav_shape` over them (more positions than frames: the rest are
    missing; fewer: the frames after them are not read). Without `nav_shape`: the array's
    leading dims that hold the frames, else one dim of frames."""
    where = repr(path)
    if sig_shape is None:
        sig_dims = check_sig_dims(sig_dims, where, shape)
        sig = tuple(shape[-sig_dims:])
        default_nav = tuple(shape[:-sig_dims])
    else:
        sig = check_shape(sig_shape, "sig_shape", where)
        values, per_frame = math.prod(shape), math.prod(sig)
        if values % per_frame:
            raise DataSetError(
                f"{where}: sig_shape={sig} ({per_frame} values a frame) does not divide the "
                f"array of shape {tuple(shape)} ({values} values) into whole frames; expected "
                f"a frame size that divides {values}, such as its last dims {tuple(shape[1:])}"
            )
        frames = values // per_frame
        # the array's leading dims where they hold the frames exactly, else one dim
        leading = [tuple(shape[:k]) for k in range(len(shape) - 1, 0, -1)]
        default_nav = next((n for n in leading if math.prod(n) == frames), (frames,))
    nav = default_nav if nav_shape is None else check_shape(nav_shape, "nav_shape", where)
    return nav, sig


@takes_calibration
def open_npy(
    path: PathLike,
    sig_dims: int = 2,
    sync_offset: int = 0,
    dims=None,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
) -> NpyDataSet:
    """Open a ``.npy`` file; its last `sig_dims` dims are the frame, unless `sig_shape`
    and `nav_shape` say otherwise.

    Parameters
    ----------
    path
        The ``.npy`` file (memory-mapped, not loaded).
    sig_dims
        How many trailing dims are the frame (without `sig_shape`).
    nav_shape, sig_shape
        As LiberTEM's npy reader: the scan and frame shapes over the array's values in C
        order, e.g. ``nav_shape=(16, 64)`` makes a scan of a flat stack of 1024 frames.
        `sig_shape` must divide the values into whole frames; without it the frame is
        the array's last `sig_dims` dims. `nav_shape` may ask for fewer positions than
        there are frames (the rest are not read) or more (those are missing, see
        `ltdask.MissingFramesWarning`); without it: the array's leading dims that hold the
        frames (one dim of frames where no leading dims do).
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
    >>> ltdask.open_npy(path, nav_shape=(3, 2)).nav_shape  # the same 6 frames as 3 x 2
    (3, 2)
    """
    return NpyDataSet(
        path,
        sig_dims=sig_dims,
        sync_offset=sync_offset,
        dims=dims,
        nav_shape=nav_shape,
        sig_shape=sig_shape,
    )
