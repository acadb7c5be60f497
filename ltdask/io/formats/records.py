"""What the camera formats with per-frame records share (EMPAD, NanoMEGAS BLO, TVIPS): frame
counts from file sizes, with an interrupted acquisition's partial last frame left out, and
the optional reshaping of frames by ``sig_shape=``."""

from __future__ import annotations

import math

from ltdask.exceptions import DataSetError, MissingFramesWarning, warn
from ltdask.io.checks import check_shape


def whole_records(
    path: str,
    size: int,
    header_bytes: int,
    stride: int,
    footer_bytes: int = 0,
    last: bool = True,
    first_frame: int = 0,
) -> int:
    """The number of whole frame records of `stride` bytes after `header_bytes` in a file of
    `size` bytes.

    The last record may lack its `footer_bytes`. A partial record at the end of the `last`
    file of a set (an interrupted acquisition) is left out with a `MissingFramesWarning`; in
    any other file it is a `DataSetError`, as the frames after it would be misplaced.
    """
    if size < header_bytes:
        raise DataSetError(
            f"{path!r} is truncated: {size} bytes, shorter than its {header_bytes}-byte header"
        )
    n, rest = divmod(size - header_bytes, stride)
    if rest >= stride - footer_bytes:
        n, rest = n + 1, 0  # the last frame's footer may be cut off: its pixels are all there
    if rest:
        where = (
            f"{path!r} ends inside frame {first_frame + n} of the stream (frame {n} of the "
            f"file): {rest} of its {stride - footer_bytes} bytes are there"
        )
        if not last:
            raise DataSetError(
                f"{where}; only the last file of a set may end early, the frames of the files "
                "after it would be misplaced"
            )
        warn(f"{where}; that partial frame is left out", MissingFramesWarning)
    return n


def frame_shape(sig_shape, natural: tuple[int, ...], where: str) -> tuple[int, ...]:
    """`sig_shape` checked to hold the pixels of a `natural` frame (the file's own shape
    when None)."""
    if sig_shape is None:
        return natural
    sig = check_shape(sig_shape, "sig_shape", where)
    if math.prod(sig) != math.prod(natural):
        raise DataSetError(
            f"{where}: sig_shape={sig} does not fit the frames; expected "
            f"{math.prod(natural)} pixels, like {natural}"
        )
    return sig
