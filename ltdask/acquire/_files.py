"""What following a file still being written takes, whatever its format: waiting for it
to appear, and telling a growing file from one that was replaced, removed or cut short."""

from __future__ import annotations

import math
import os
import time

from ltdask.acquire.store import AcquisitionError
from ltdask.exceptions import DataSetError
from ltdask.io.checks import check_bytes, check_shape, stat_regular_file

#: seconds between two looks at a followed file's size or extent
POLL_S = 0.02
#: bytes of frames read and handed over at once
BATCH_BYTES = 32 * 2**20


def wait_for_file(path: str, timeout: float) -> os.stat_result:
    """``os.stat`` of the regular file `path`, waiting up to `timeout` s for it to appear."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return stat_regular_file(path)
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise FileNotFoundError(
                    f"{path!r} does not exist, and did not appear within {timeout} s "
                    "(timeout); check the path, or give the writer more time"
                ) from None
            time.sleep(POLL_S)


class FollowedFile:
    """The identity of a followed file, to tell a growing file from one that was replaced,
    removed or cut short."""

    def __init__(self, path: str, st: os.stat_result) -> None:
        self.path = path
        self.identity = (st.st_dev, st.st_ino)
        self.size = st.st_size

    def stat(self) -> os.stat_result:
        """The file's current ``os.stat``; `AcquisitionError` where it is no longer the
        file that was opened, or is smaller than it was."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise AcquisitionError(f"{self.path!r} was removed while it was followed") from None
        if (st.st_dev, st.st_ino) != self.identity:
            raise AcquisitionError(
                f"{self.path!r} was replaced by another file while it was followed "
                f"({st.st_size} bytes); the frames read before stay valid"
            )
        if st.st_size < self.size:
            raise AcquisitionError(
                f"{self.path!r} shrank from {self.size} to {st.st_size} bytes while it was "
                "followed (truncated or rewritten); the frames read before stay valid"
            )
        self.size = st.st_size
        return st


def frame_count(nav_shape, num_frames, where: str) -> tuple[tuple[int, ...] | None, int | None]:
    """The scan shape (if given) and the frame count from `nav_shape` and/or `num_frames`."""
    nav = None if nav_shape is None else check_shape(nav_shape, "nav_shape", where)
    if num_frames is None:
        return nav, None if nav is None else math.prod(nav)
    count = check_bytes(num_frames, "num_frames", where)
    if count < 1:
        raise DataSetError(f"{where}: num_frames={num_frames!r}; expected a count >= 1")
    if nav is not None and math.prod(nav) != count:
        raise DataSetError(
            f"{where}: nav_shape={nav} has {math.prod(nav)} frames, num_frames={count}; "
            "give one of them, or make them agree"
        )
    return nav, count
