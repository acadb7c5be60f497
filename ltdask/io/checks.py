"""Checks every format makes of what it is given, with errors that name the file, the value
and what was expected.

* values: shapes, dtypes, byte counts and ``sig_dims``;
* files: a regular, readable file (checked before it is opened: a FIFO blocks its reader,
  a device never ends), and whether it is still the version that was opened (`Signature`);
* containers (HDF5 files, Zarr groups): the candidates to list when a key names none.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence

import numpy as np

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.runtime import settings

# -- values ----------------------------------------------------------------------------------

#: the pixel dtypes ltdask reads, converts to and runs UDFs on (either byte order), for messages
SUPPORTED_DTYPES = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, "
    "float64, complex64, complex128"
)


def check_shape(value, what: str, where: str) -> tuple[int, ...]:
    """`value` as a tuple of positive ints, or a `DataSetError` naming `what` and `where`."""
    try:
        if isinstance(value, (int, np.integer)):
            value = (value,)
        dims = tuple(int(v) for v in value)
        if any(int(v) != v for v in value):
            raise ValueError
    except (TypeError, ValueError):
        raise DataSetError(f"{where}: {what}={value!r} is not a sequence of integers") from None
    if not dims:
        raise DataSetError(f"{where}: {what}={value!r} needs at least one dim")
    if any(d <= 0 for d in dims):
        raise DataSetError(f"{where}: {what}={dims} has zero or negative dims; all must be >= 1")
    if math.prod(dims) >= 2**62:
        raise DataSetError(f"{where}: {what}={dims} is absurdly large")
    return dims


def unsupported(dt: np.dtype) -> str | None:
    """Why the read path cannot handle pixels of `dt`, or None if it can."""
    if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
        return "not a bool, integer, float or complex dtype"
    if (dt.kind == "f" and dt.itemsize > 8) or (dt.kind == "c" and dt.itemsize > 16):
        # numba and most of numpy's reductions have no extended precision
        return "extended precision (longdouble), which numba cannot compute with"
    return None


def check_dtype(value, where: str) -> np.dtype:
    """`value` as a numpy dtype the read path handles, or a `DataSetError` naming `where`,
    the value and the supported dtypes."""
    try:
        dt = np.dtype(value)
    except (TypeError, ValueError) as e:  # ValueError for e.g. "0\x1b"
        raise DataSetError(f"{where}: dtype={value!r} is not a numpy dtype ({e})") from None
    reason = unsupported(dt)
    if reason is not None:
        raise DataSetError(
            f"{where}: dtype={value!r} ({dt}) is not supported: {reason}; expected one of "
            f"{SUPPORTED_DTYPES}"
        )
    return dt


def check_bytes(value, what: str, where: str) -> int:
    """`value` as a byte count (an integer >= 0), or a `DataSetError`."""
    try:
        n = int(value)
        if n != value:
            raise ValueError
    except (TypeError, ValueError):
        raise DataSetError(f"{where}: {what}={value!r} is not an integer") from None
    if n < 0:
        raise DataSetError(f"{where}: {what}={n} is negative")
    return n


def check_fits_memory(shape: Sequence[int], dtype, where: str) -> None:
    """Refuse an array of `shape` and `dtype` larger than this machine's memory (sparse
    data of a few entries can stand for dense frames of any size), naming `where`."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    memory = settings.total_memory()
    if nbytes > memory:
        raise DataSetError(
            f"{where}: dense frames of shape {tuple(shape)} as {dt} need "
            f"{nbytes / 2**30:.1f} GiB, more than this machine's {memory / 2**30:.1f} GiB; "
            "check sig_shape, or process the frames sparse"
        )


def check_sig_dims(sig_dims, where: str, shape: Sequence[int] | None = None) -> int:
    """`sig_dims` as an int: positive and, given the stored `shape`, leaving a nav dim."""
    is_int = isinstance(sig_dims, (int, np.integer))
    if shape is None:
        if not is_int or sig_dims < 1:
            raise DataSetError(f"{where}: sig_dims={sig_dims!r} must be a positive integer")
        return int(sig_dims)
    shape = tuple(shape)
    if not is_int or not 0 < sig_dims < len(shape):
        expected = (
            f"expected 1 to {len(shape) - 1}"
            if len(shape) > 1
            else f"a scan needs a nav dim and a sig dim, the array has {len(shape)} dims"
        )
        raise DataSetError(
            f"{where}: sig_dims={sig_dims!r} does not fit the array shape {shape}; {expected}"
        )
    return int(sig_dims)


# -- files ------------------------------------------------------------------------------------

#: what identifies one version of a file: ``(st_dev, st_ino, st_size, st_mtime_ns)``
Signature = tuple[int, int, int, int]


def signature_of(st: os.stat_result) -> Signature:
    """The `Signature` of a file's ``os.stat`` / ``os.fstat`` result."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_version(old: Sequence[int], new: Sequence[int]) -> bool:
    """Whether the file with `new` is the version `old` was taken of: same inode, size and
    modification time. Device numbers are not compared: they are local to a machine, and
    differ between the hosts of a cluster that mount the same network file system."""
    return tuple(old[1:]) == tuple(new[1:])


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` `mode` is, for messages (``"a FIFO (named pipe)"``)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def stat_regular_file(path: str) -> os.stat_result:
    """``os.stat(path)``, or a `DataSetError` if `path` is not a regular file.

    Called before a file is opened: opening a FIFO blocks until someone writes to it, and
    reading a device such as ``/dev/zero`` never ends.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        `path` is a directory, FIFO, device or socket, or cannot be examined.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path!r} does not exist") from None
    except OSError as e:
        raise DataSetError(f"cannot examine {path!r}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataSetError(f"{path!r} is {file_kind(st.st_mode)}; expected a regular file")
    return st


def is_regular_file(path: str) -> bool:
    """Whether `path` is a regular file: only those may be opened to sniff their format."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def check_file(path: PathLike) -> str:
    """`path` as a string, or a `DataSetError` if it is not a readable regular file (checked
    without opening it: a FIFO would block, a device never end)."""
    path = os.fspath(path)
    stat_regular_file(path)
    if not os.access(path, os.R_OK):
        raise DataSetError(f"{path!r} is not readable")
    return path


class KeptByVersion:
    """What opening a file works out from it (layouts found in headers or chunk indexes),
    kept for the next opening under a key that holds the file's version (`Signature`): a
    changed file is never given an old result. The `size` most recent are kept.

    Examples
    --------
    >>> kept, key = KeptByVersion(size=2), ("scan.raw", (1, 2, 3))  # (path, its version)
    >>> kept.get(key, lambda: "layout"), kept.get(key, lambda: "not asked again")
    ('layout', 'layout')
    """

    def __init__(self, size: int = 32):
        self.size = size
        self._kept: dict = {}

    def get(self, key, make):
        """The result kept under `key`, or ``make()``'s, kept from now on."""
        if key not in self._kept:
            value = make()
            if len(self._kept) >= self.size:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = value
        return self._kept[key]


def describe_change(old: Sequence[int], new: Sequence[int], mode: int | None = None) -> str:
    """How the file `new` (of ``st_mode`` `mode`) differs from the file `old`, for messages."""
    if mode is not None and not stat.S_ISREG(mode):
        return f"it was replaced by {file_kind(mode)}"
    if old[1] != new[1]:
        return "it was replaced by another file"
    if old[2] != new[2]:
        return f"its size went from {old[2]} to {new[2]} bytes"
    return "it was modified"


def changed_error(
    path: str, old: Sequence[int], new: Sequence[int], mode: int | None = None
) -> DataSetError:
    """The error for a file that is no longer the version that was opened."""
    how = describe_change(old, new, mode)
    return DataSetError(f"{path!r} changed since it was opened ({how}); open it again")


# -- containers -------------------------------------------------------------------------------


def describe_candidates(
    found: Sequence[tuple[str, tuple[int, ...], str]], noun: str, where: str
) -> str:
    """What a container holds that could be the scan, for an error about a key or path:
    `found` lists ``(name, shape, dtype)``; `noun` is ``"dataset"`` or ``"array"``, `where`
    ``"file"`` or ``"store"``."""
    if not found:
        return f"the {where} holds no {noun} with at least 3 dims"
    listed = ", ".join(f"{name!r} {shape} {dtype}" for name, shape, dtype in found)
    return f"{noun}s with at least 3 dims: {listed}"
