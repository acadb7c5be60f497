"""``ltdask.open``: pick the format of a scan from its path (suffix, then magic bytes)."""

from __future__ import annotations

import importlib
import inspect
import os
import stat
from collections.abc import Callable

from ltdask.exceptions import DataSetError
from ltdask.io.dataset import DataSet
from ltdask.io.fileset import stat_regular_file

#: format name -> (how it is recognised, for messages)
FORMATS = {
    "raw": ".raw/.bin/.dat, with nav_shape=, sig_shape= and dtype=",
    "npy": ".npy",
    "hdf5": ".h5/.hdf5/.hdf/.nxs/.emd/.cxi (key= names the dataset)",
    "zarr": ".zarr directories, zarr.json/.zarray (path= or key= names the array)",
    "raw_csr": ".toml descriptor with filetype = 'raw_csr'",
    "mib": ".mib/.hdr (Quantum Detectors Merlin)",
}

RAW_SUFFIXES = (".raw", ".bin", ".dat")
RAW_NEEDS = ("nav_shape", "sig_shape", "dtype")
MIB_SUFFIXES = (".mib", ".hdr")
NPY_MAGIC = b"\x93NUMPY"
MIB_MAGIC = b"MQ1,"
#: descriptors larger than this are not TOML files worth parsing while guessing
TOML_MAX_BYTES = 1 << 20


def supported_formats() -> str:
    return "; ".join(f"{name}: {how}" for name, how in FORMATS.items())


def _opener(fmt: str) -> Callable[..., DataSet]:
    if fmt == "raw":
        from ltdask.io._raw import open_raw

        return open_raw
    if fmt == "npy":
        from ltdask.io._npy import open_npy

        return open_npy
    if fmt == "hdf5":
        from ltdask.io._hdf5 import open_hdf5

        return open_hdf5
    if fmt == "zarr":
        from ltdask.io._zarr import open_zarr

        return open_zarr
    if fmt == "raw_csr":
        from ltdask.io._raw_csr import open_raw_csr

        return open_raw_csr
    if fmt == "mib":
        try:
            module = importlib.import_module("ltdask.io._mib")
        except ModuleNotFoundError as e:
            if e.name != "ltdask.io._mib":
                raise
            raise DataSetError(
                "reading MIB files needs ltdask.io._mib, which this ltdask does not have"
            ) from None
        return module.open_mib
    raise DataSetError(f"format={fmt!r} is not known; supported: {', '.join(FORMATS)}")


def is_regular_file(path: str) -> bool:
    """Whether `path` is a regular file: only those may be opened to sniff their format (a
    FIFO blocks the reader, a device never ends)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _head(path: str, n: int = 8) -> bytes:
    if not is_regular_file(path):
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _is_raw_csr(path: str) -> bool:
    import tomllib

    try:
        if not is_regular_file(path) or os.path.getsize(path) > TOML_MAX_BYTES:
            return False
        with open(path, "rb") as f:
            conf = tomllib.load(f)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    params = conf.get("params")
    return isinstance(params, dict) and str(params.get("filetype", "")).lower() == "raw_csr"


def detect_format(path, kwargs: dict | None = None) -> str:
    """The format name (a key of ``FORMATS``) of the scan at `path`.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        The format cannot be told, or raw data lacks its shape and dtype.
    """
    from ltdask.io._hdf5 import HDF5_SUFFIXES, is_hdf5
    from ltdask.io._zarr import ZARR_METADATA, is_zarr

    kwargs = kwargs or {}
    try:
        import zarr

        if isinstance(path, zarr.Array):
            return "zarr"
    except ImportError:  # pragma: no cover
        pass
    path = os.fspath(path)
    if "://" in path:
        return "zarr"  # a remote store: only Zarr is read from URLs
    if os.path.basename(path) in ZARR_METADATA:
        return "zarr"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path!r} does not exist")
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    if os.path.isdir(path):
        if is_zarr(path) or suffix == ".zarr":
            return "zarr"
        raise DataSetError(
            f"{path!r} is a directory but not a Zarr store; ltdask.open reads {supported_formats()}"
        )
    # before a byte is read (the magic bytes below): a FIFO would block, /dev/zero never end
    stat_regular_file(path)
    if suffix == ".npy":
        return "npy"
    if suffix in HDF5_SUFFIXES:
        return "hdf5"
    if suffix == ".toml":
        return "raw_csr"
    if suffix in MIB_SUFFIXES:
        return "mib"
    if suffix in RAW_SUFFIXES:
        return "raw"
    head = _head(path)
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith(MIB_MAGIC):
        return "mib"
    if is_hdf5(path):
        return "hdf5"
    if _is_raw_csr(path):
        return "raw_csr"
    if all(k in kwargs for k in RAW_NEEDS):
        return "raw"
    raise DataSetError(
        f"cannot tell the format of {path!r} from its name or first bytes; pass format=... "
        f"or use the open_* function of the format. ltdask.open reads {supported_formats()}"
    )


def open_dataset(path, /, format: str | None = None, **kwargs) -> DataSet:
    """Open a scan, choosing the format from the path's suffix and first bytes.

    Parameters
    ----------
    path
        A file, a Zarr store directory (or its ``zarr.json`` / ``.zarray``), a Zarr URL, or
        a ``zarr.Array``.
    format
        Skip the guessing: one of ``raw``, ``npy``, ``hdf5``, ``zarr``, ``raw_csr``, ``mib``.
    **kwargs
        Passed to the format's ``open_*`` function (e.g. ``key=`` for HDF5, ``nav_shape=``,
        ``sig_shape=``, ``dtype=`` for raw files). For Zarr, ``key=`` is taken as ``path=``.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        The format is unknown (the message lists the supported ones), or the file does not
        fit the format.
    TypeError
        A keyword the format's ``open_*`` function does not take.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.zeros((2, 3, 4, 5), dtype=np.float32))
    >>> ds = open_dataset(path)  # ltdask.open(path)
    >>> type(ds).__name__, ds.nav_shape, ds.sig_shape
    ('NpyDataSet', (2, 3), (4, 5))
    """
    fmt = format if format is not None else detect_format(path, kwargs)
    if fmt not in FORMATS:
        where = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
        raise DataSetError(
            f"{where!r}: format={fmt!r} is not known; supported: {', '.join(FORMATS)}"
        )
    if fmt == "zarr" and "key" in kwargs:
        if "path" in kwargs:
            raise TypeError("ltdask.open: give a Zarr array's path as path= or key=, not both")
        kwargs["path"] = kwargs.pop("key")
    if fmt == "raw":
        missing = [k for k in RAW_NEEDS if k not in kwargs]
        if missing:
            raise DataSetError(
                f"{os.fspath(path)!r} is read as raw data, which has no header: pass "
                f"{', '.join(f'{k}=' for k in missing)} (e.g. nav_shape=(128, 128), "
                "sig_shape=(256, 256), dtype='uint16')"
            )
    opener = _opener(fmt)
    params = inspect.signature(opener).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in kwargs if k not in params]
    if unknown and not takes_any:
        accepted = [k for k in params if k != next(iter(params))]
        raise TypeError(
            f"ltdask.open: {fmt} data does not take {', '.join(map(repr, unknown))}; "
            f"{opener.__name__} takes {', '.join(accepted)}"
        )
    return opener(path, **kwargs)
