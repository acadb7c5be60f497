"""``ltdask.open``: pick the format of a scan from its path, through the format registry.

The formats are asked in stages, each over all formats in registry order (built-in ones
first): what they claim before any file is examined (a ``zarr.Array``, a URL), then for a
directory the formats of directories; for a regular file the strict content checks of
formats whose files carry other formats' suffixes (a K2 IS ``.bin`` sector file), its
suffix, its first bytes, each format's sniffing function, and last a headerless format whose
required keywords are given.
"""

from __future__ import annotations

import os

from ltdask.exceptions import DataSetError
from ltdask.io.calibration import CALIBRATION_KEYWORDS, calibrated
from ltdask.io.checks import is_regular_file, stat_regular_file
from ltdask.io.dataset import DataSet
from ltdask.io.registry import (
    Format,
    broken_formats,
    formats,
    get_format,
    supported_formats,
)

__all__ = ["detect_format", "open_dataset", "supported_formats"]


def _head(path: str, n: int) -> bytes:
    if not is_regular_file(path):
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _cannot_tell(what: str, known: tuple[Format, ...]) -> DataSetError:
    broken = broken_formats()
    note = f" (formats that could not be loaded: {'; '.join(broken.values())})" if broken else ""
    return DataSetError(f"{what}; ltdask.open reads {supported_formats(known)}{note}")


def detect_format(path, kwargs: dict | None = None) -> str:
    """The name of the format of the scan at `path` (see :mod:`ltdask.io.registry`).

    `kwargs` are the keywords ``ltdask.open`` was given: a file that no format recognises
    is read as a headerless format (raw) when they hold all it needs.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ltdask.DataSetError
        The format cannot be told (the message lists the formats and how they are told).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> np.save(os.path.join(folder, "scan.npy"), np.zeros((2, 3, 4, 5), np.uint16))
    >>> detect_format(os.path.join(folder, "scan.npy"))
    'npy'
    >>> path = os.path.join(folder, "scan.frames")
    >>> np.zeros((6, 4, 5), np.uint16).tofile(path)
    >>> try:  # no format claims the suffix or the first bytes
    ...     detect_format(path)
    ... except ltdask.DataSetError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    cannot tell the format of '.../scan.frames' from its name or first bytes; pass format=...
    >>> detect_format(path, dict(nav_shape=(2, 3), sig_shape=(4, 5), dtype="uint16"))
    'raw'
    """
    kwargs = kwargs or {}
    known = formats()
    for fmt in known:
        if fmt.claims is not None and fmt.claims(path):
            return fmt.name
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path!r} does not exist")
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    if os.path.isdir(path):
        stores = [f for f in known if f.directory]
        for fmt in stores:
            if suffix in fmt.suffixes or (fmt.sniff is not None and fmt.sniff(path)):
                return fmt.name
        names = " or ".join(f.name for f in stores) or "directory"
        raise _cannot_tell(f"{path!r} is a directory but not a {names} store", known)
    # before a byte is read (the magic bytes below): a FIFO would block, /dev/zero never end
    stat_regular_file(path)
    files = [f for f in known if not f.directory]
    for fmt in files:
        if fmt.content is not None and fmt.content(path):
            return fmt.name
    for fmt in files:
        if suffix in fmt.suffixes:
            return fmt.name
    head = _head(path, max((len(m) for f in files for m in f.magic), default=0))
    for fmt in files:
        if any(head.startswith(m) for m in fmt.magic):
            return fmt.name
    for fmt in files:
        if fmt.sniff is not None and fmt.sniff(path):
            return fmt.name
    for fmt in files:
        if fmt.required and all(k in kwargs for k in fmt.required):
            return fmt.name
    raise _cannot_tell(
        f"cannot tell the format of {path!r} from its name or first bytes; pass format=... "
        "or use the open_* function of the format",
        known,
    )


def open_dataset(path, /, format: str | None = None, **kwargs) -> DataSet:
    """Open a scan, choosing the format from the path's suffix and first bytes.

    Parameters
    ----------
    path
        A file, a Zarr store directory (or its ``zarr.json`` / ``.zarray``), a Zarr URL, or
        a ``zarr.Array``.
    format
        Skip the guessing: a format's name (``raw``, ``npy``, ``hdf5``, ``zarr``,
        ``raw_csr``, ``mib``, or a plug-in's; see :func:`supported_formats`).
    **kwargs
        Passed to the format's ``open_*`` function (e.g. ``key=`` for HDF5, ``nav_shape=``,
        ``sig_shape=``, ``dtype=`` for raw files). For Zarr, ``key=`` is taken as ``path=``.
        Every format takes ``nav_calibration=`` and ``sig_calibration=`` (see
        :meth:`~ltdask.io.dataset.DataSet.calibrate`), over what the file says.

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
    >>> import ltdask
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.npy")
    >>> np.save(path, np.zeros((2, 3, 4, 5), dtype=np.float32))
    >>> ds = ltdask.open(path)  # ltdask.io.open_dataset is the same function
    >>> type(ds).__name__, ds.nav_shape, ds.sig_shape
    ('NpyDataSet', (2, 3), (4, 5))
    """
    # applied here, so that formats from plug-ins take them too
    calibrations = {k: kwargs.pop(k) for k in CALIBRATION_KEYWORDS if k in kwargs}
    return calibrated(_open(path, format, kwargs), **calibrations)


def _open(path, format: str | None, kwargs: dict) -> DataSet:
    if format is None:
        fmt = get_format(detect_format(path, kwargs))
    else:
        where = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
        fmt = get_format(format, where=where)
    for given, taken in fmt.keyword_aliases:
        if given in kwargs:
            if taken in kwargs:
                raise TypeError(f"ltdask.open: give {fmt.name} data {taken}= or {given}=, not both")
            kwargs[taken] = kwargs.pop(given)
    missing = [k for k in fmt.required if k not in kwargs]
    if missing:
        raise DataSetError(
            f"{os.fspath(path)!r} is read as {fmt.name} data ({fmt.description}), which has "
            f"no header: pass {', '.join(f'{k}=' for k in missing)}"
        )
    accepted = fmt.keyword_names()
    unknown = [k for k in kwargs if accepted is not None and k not in accepted]
    if unknown:
        opener = fmt.load_opener()
        raise TypeError(
            f"ltdask.open: {fmt.name} data does not take {', '.join(map(repr, unknown))}; "
            f"{getattr(opener, '__name__', fmt.name)} takes {', '.join(accepted or ())}"
        )
    return fmt.open(path, **kwargs)
