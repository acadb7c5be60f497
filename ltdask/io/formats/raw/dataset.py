"""Raw binary scans: frames of one dtype, optionally with file and per-frame headers."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.exceptions import DataSetError
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    check_bytes,
    check_dtype,
    check_file,
    check_shape,
    signature_of,
    stat_regular_file,
)
from ltdask.io.decode import Decoder
from ltdask.io.file_dataset import FileDataSet
from ltdask.io.fileset import File, FileSet


def files_with_frames(
    paths: Sequence[str],
    header_bytes: int,
    frame_stride: int,
    frame_bytes: int,
    footer_bytes: int = 0,
) -> list[File]:
    """One `File` per path, its frame count from its size; a clear error on a size mismatch.

    Each `File` carries the `Signature` of the version whose size was read."""
    files = []
    first = 0
    for path in paths:
        signature = signature_of(stat_regular_file(path))
        size = signature[2]
        payload = size - header_bytes
        if payload < frame_stride - footer_bytes:
            raise DataSetError(
                f"{path!r} is too small: {size} bytes, but the header ({header_bytes} bytes) "
                f"and one frame ({frame_stride} bytes) need {header_bytes + frame_stride}; "
                "check sig_shape, dtype and the header sizes"
            )
        n, rest = divmod(payload, frame_stride)
        if rest and rest == frame_stride - footer_bytes:
            n, rest = n + 1, 0  # the last frame's footer may be absent
        if rest:
            raise DataSetError(
                f"{path!r}: {size} bytes is not the header ({header_bytes} bytes) plus a whole "
                f"number of frames of {frame_stride} bytes ({rest} bytes left over); check "
                "sig_shape, dtype and the header/footer sizes"
            )
        files.append(File(path, first, n, header_bytes, signature))
        first += n
    return files


class RawDataSet(FileDataSet):
    """Frames stored back to back in one or more files (see :func:`open_raw`).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> np.zeros((6, 4, 5), dtype="<u2").tofile(path)
    >>> ds = ltdask.open(path, nav_shape=(2, 3), sig_shape=(4, 5), dtype="<u2")
    >>> type(ds).__name__, ds.nav_shape, ds.sig_shape, ds.fileset.image_count
    ('RawDataSet', (2, 3), (4, 5), 6)
    """

    def __init__(
        self,
        paths,
        nav_shape,
        sig_shape,
        dtype,
        file_header_bytes=0,
        frame_header_bytes=0,
        frame_footer_bytes=0,
        sync_offset=0,
        dims=None,
    ):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [check_file(p) for p in paths]
        if not paths:
            raise DataSetError("open_raw: no files given")
        where = paths[0]
        self.path = where if len(paths) == 1 else f"{where} (+{len(paths) - 1} files)"
        sig = check_shape(sig_shape, "sig_shape", where)
        check_shape(nav_shape, "nav_shape", where)
        native = check_dtype(dtype, where)
        file_header = check_bytes(file_header_bytes, "file_header_bytes", where)
        frame_header = check_bytes(frame_header_bytes, "frame_header_bytes", where)
        frame_footer = check_bytes(frame_footer_bytes, "frame_footer_bytes", where)
        frame_bytes = native.itemsize
        for s in sig:
            frame_bytes *= s
        stride = frame_header + frame_bytes + frame_footer
        files = files_with_frames(paths, file_header, stride, frame_bytes, frame_footer)
        fileset = FileSet(files, sig, native, frame_header, frame_footer)
        super().__init__(fileset, Decoder(native), nav_shape, sync_offset=sync_offset, dims=dims)


@takes_calibration
def open_raw(
    path: PathLike | Sequence[PathLike],
    nav_shape: Sequence[int],
    sig_shape: Sequence[int],
    dtype,
    file_header_bytes: int = 0,
    frame_header_bytes: int = 0,
    frame_footer_bytes: int = 0,
    sync_offset: int = 0,
    dims: Sequence[str] | None = None,
) -> RawDataSet:
    """Open a raw binary scan: frames of `sig_shape` pixels of `dtype`, one after another.

    Only file sizes are read here; the data is read by the tasks that need it.

    Parameters
    ----------
    path
        A file, or a list of files that hold consecutive parts of the frame stream.
    nav_shape, sig_shape
        Scan and frame shapes. The files may hold more or fewer frames than ``nav_shape``
        asks for: missing frames read as zeros (and are invalid in UDF results).
    dtype
        Pixel dtype as stored, e.g. ``"uint16"`` or ``">u2"`` for big-endian.
    file_header_bytes
        Bytes to skip at the start of each file.
    frame_header_bytes, frame_footer_bytes
        Bytes before and after each frame's pixels.
    sync_offset
        Positive: skip that many frames of the stream; negative: insert that many empty
        frames at the start.
    dims
        Names of the nav and sig dims (default ``scan_y, scan_x, det_y, det_x`` for 4-D).

    Raises
    ------
    FileNotFoundError
        A file does not exist.
    ltdask.DataSetError
        The sizes, shapes, dtype or offsets do not describe the files.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> data = np.random.default_rng(0).random((3, 4, 8, 8), dtype=np.float32)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.raw")
    >>> data.tofile(path)
    >>> ds = ltdask.open_raw(path, nav_shape=(3, 4), sig_shape=(8, 8), dtype="float32")
    >>> bool((ds.to_dask().compute() == data).all())
    True
    """
    return RawDataSet(
        path,
        nav_shape,
        sig_shape,
        dtype,
        file_header_bytes,
        frame_header_bytes,
        frame_footer_bytes,
        sync_offset,
        dims,
    )
