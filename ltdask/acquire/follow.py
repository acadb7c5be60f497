"""Files still being written, as acquisitions: frames processed as they land on disk.

`follow` opens a path by its format: a raw file being appended to
(`~ltdask.acquire.follow_raw.RawFollowSource`), an HDF5 dataset written with SWMR
(`~ltdask.acquire.follow_hdf5.Hdf5FollowSource`) or a Merlin ``.mib``
(``ltdask.acquire.follow_mib``). Each ends at its frame count (``nav_shape`` or a count;
an HDF5 dataset's fixed ``maxshape``) or after the acquisition's ``idle_timeout`` without
a new frame; a file that shrinks, is replaced or removed while it is followed breaks the
acquisition off (`AcquisitionError` naming the sizes), the frames so far staying valid.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.follow_hdf5 import Hdf5FollowSource
from ltdask.acquire.follow_raw import RawFollowSource
from ltdask.acquire.source import Source
from ltdask.exceptions import DataSetError

#: the formats `follow` knows, by the suffixes it tells them by
FORMATS = {
    "raw": (".raw", ".bin", ".dat"),
    "hdf5": (".h5", ".hdf5", ".hdf", ".nxs", ".emd", ".cxi", ".he5"),
    "mib": (".mib", ".hdr"),
}


def _format_of(path: str, format: str | None) -> str:
    if format is not None:
        name = str(format).lower()
        name = "hdf5" if name == "h5" else name
        if name not in FORMATS:
            raise DataSetError(
                f"follow({path!r}): format={format!r}; expected one of {', '.join(FORMATS)}"
            )
        return name
    suffix = os.path.splitext(path)[1].lower()
    for name, suffixes in FORMATS.items():
        if suffix in suffixes:
            return name
    known = ", ".join(f"{n} ({' '.join(s)})" for n, s in FORMATS.items())
    raise DataSetError(
        f"follow({path!r}): cannot tell the format from the suffix {suffix!r}; pass format= "
        f"(one of {known})"
    )


def follow(
    path: PathLike,
    nav_shape: Sequence[int] | None = None,
    sig_shape: Sequence[int] | None = None,
    dtype=None,
    ds_path: str | None = None,
    format: str | None = None,  # noqa: A002  (the word users know, as in ltdask.open)
    num_frames: int | None = None,
    file_header_bytes: int = 0,
    frame_header_bytes: int = 0,
    frame_footer_bytes: int = 0,
    **acquisition_options,
) -> Acquisition:
    """A file still being written, as an `Acquisition`: frames processed as they land.

    Parameters
    ----------
    path
        A raw file (``.raw``, ``.bin``, ``.dat``), an HDF5 file (``.h5``, ``.hdf5``, ...:
        the dataset grows along its first axis, written with SWMR; a finished file works
        too) or a Merlin ``.mib`` (`ltdask.acquire.follow_mib`). It may appear only
        after this call (within ``timeout`` s).
    nav_shape
        The scan's shape (raw: this or `num_frames` is needed; HDF5: by default the
        dataset's fixed ``maxshape``).
    sig_shape, dtype
        Raw: one frame's shape and its stored dtype. HDF5: checked against the dataset
        where given.
    ds_path
        HDF5: the dataset's path in the file (by default the one with > 2 dims).
    format
        ``"raw"``, ``"hdf5"`` or ``"mib"``; by default from the suffix.
    num_frames
        The frame count, where no `nav_shape` is given.
    file_header_bytes, frame_header_bytes, frame_footer_bytes
        Raw: bytes before the first frame, and before and after each frame's pixels.
    **acquisition_options
        `Acquisition`'s: ``frames_per_partition``, ``memory_limit``, ``timeout`` (for the
        file to appear), ``idle_timeout`` (how long without a new frame ends the scan),
        ``record``, ``dims``.

    Raises
    ------
    FileNotFoundError
        The file did not appear within ``timeout`` s.
    ltdask.DataSetError
        The shapes, dtype or format do not describe the file.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> from ltdask.acquire import follow
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> np.ones((4, 8, 8), dtype=np.float32).tofile(path)
    >>> with follow(path, nav_shape=(2, 2), sig_shape=(8, 8), dtype="float32") as acq:
    ...     (res,) = ltdask.compute(acq, [ltdask.udf.SumSigUDF()])
    >>> res["intensity"].values.tolist()
    [[64.0, 64.0], [64.0, 64.0]]
    """
    path = os.fspath(path)
    kind = _format_of(path, format)
    source: Source
    if kind == "mib":
        return _follow_mib(path, nav_shape, sig_shape, dtype, ds_path, acquisition_options)
    if kind == "raw":
        if sig_shape is None or dtype is None or ds_path is not None:
            raise DataSetError(
                f"follow({path!r}): a raw file needs sig_shape= and dtype= (given "
                f"sig_shape={sig_shape!r}, dtype={dtype!r}) and has no ds_path= "
                f"(given {ds_path!r})"
            )
        source = RawFollowSource(
            path,
            sig_shape,
            dtype,
            nav_shape,
            num_frames,
            file_header_bytes,
            frame_header_bytes,
            frame_footer_bytes,
        )
    else:
        if file_header_bytes or frame_header_bytes or frame_footer_bytes:
            raise DataSetError(f"follow({path!r}): an HDF5 dataset has no header bytes to skip")
        source = Hdf5FollowSource(
            path, ds_path, nav_shape, num_frames, sig_shape=sig_shape, dtype=dtype
        )
    return Acquisition(source, **acquisition_options)


def _follow_mib(path, nav_shape, sig_shape, dtype, ds_path, options) -> Acquisition:
    """A Merlin ``.mib`` (with its ``.hdr``): `ltdask.acquire.merlin`'s ``follow_mib``."""
    if sig_shape is not None or dtype is not None or ds_path is not None:
        raise DataSetError(
            f"follow({path!r}): a Merlin file's headers give its frames' shape and dtype; "
            f"drop sig_shape={sig_shape!r}, dtype={dtype!r}, ds_path={ds_path!r}"
        )
    try:
        from ltdask.acquire.merlin import follow_mib
    except ImportError:
        raise DataSetError(
            f"follow({path!r}): following a Merlin .mib file needs ltdask.acquire.follow_mib "
            "(ltdask.acquire.merlin), which this version of ltdask does not have yet; the "
            "finished file opens with ltdask.open_mib"
        ) from None
    return follow_mib(path, nav_shape=nav_shape, **options)
