"""LiberTEM's I/O backend choices (``libertem.io.dataset.base``: `MMapBackend`,
`BufferedBackend`, `DirectBackend`), for ``ctx.load(..., io_backend=...)``.

In LiberTEM they choose how a dataset's files are read: memory maps (the default on Linux
and macOS), buffered reads into aligned buffers (Windows; slow disks), or the buffered
reads with the page cache bypassed. ltdask reads every format its own way (memory maps for
uncompressed frames, the format's reader otherwise), so ``io_backend=`` is taken and the
choice has no effect; these classes keep the options LiberTEM takes, checked, so that
scripts that make one run unchanged.
"""

from __future__ import annotations

__all__ = ["BufferedBackend", "DirectBackend", "IOBackend", "MMapBackend"]

_MIB = 1024 * 1024


class IOBackend:
    """A LiberTEM I/O backend choice (see the module's description); ltdask reads as it
    always does."""

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({options})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, *vars(self).items()))


class MMapBackend(IOBackend):
    """LiberTEM's memory-map backend; `enable_readahead_hints` (LiberTEM: Linux only,
    experimental) is kept.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.compat.io_backends import MMapBackend
    >>> backend = MMapBackend(enable_readahead_hints=True)
    >>> backend
    MMapBackend(enable_readahead_hints=True)
    >>> ds = Context().load("memory", data=np.ones((2, 2, 4, 4)), io_backend=backend)
    >>> tuple(ds.shape)
    (2, 2, 4, 4)
    """

    def __init__(self, enable_readahead_hints: bool = False):
        if not isinstance(enable_readahead_hints, bool):
            raise TypeError(
                f"MMapBackend: enable_readahead_hints={enable_readahead_hints!r}; expected "
                "True or False"
            )
        self.enable_readahead_hints = enable_readahead_hints


class BufferedBackend(IOBackend):
    """LiberTEM's buffered-read backend; `max_buffer_size` (bytes, LiberTEM's default
    16 MiB) is kept."""

    def __init__(self, max_buffer_size: int = 16 * _MIB):
        if isinstance(max_buffer_size, bool) or not isinstance(max_buffer_size, int):
            raise TypeError(
                f"{type(self).__name__}: max_buffer_size={max_buffer_size!r}; expected a "
                "number of bytes (int)"
            )
        if max_buffer_size <= 0:
            raise ValueError(
                f"{type(self).__name__}: max_buffer_size={max_buffer_size}; expected a "
                "positive number of bytes"
            )
        self.max_buffer_size = max_buffer_size


class DirectBackend(BufferedBackend):
    """LiberTEM's buffered reads that bypass the page cache (``O_DIRECT``); as
    `BufferedBackend`."""
