"""Decoders: turn the bytes of read ranges into pixels of the requested dtype.

A decoder kernel is a module-level ``numba.njit(nogil=True, cache=True)`` function
``kernel(src, file_idx, ranges, *extra, out)``: ``src`` is one file's bytes (uint8), ``ranges``
a 2-D read-range array (see :mod:`ltdask.io.read_ranges`); the kernel decodes every row that
belongs to ``file_idx`` into the flat output buffer ``out``. A format whose bytes are not a
plain numpy dtype (packed bits, reordered quadrants) brings its own kernel and a
:class:`Decoder` subclass; the rest of the read path is shared.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def decode_plain(src, file_idx, ranges, proto, out):
    """View each range as ``proto.dtype`` (native byte order) and cast into `out`."""
    for i in range(ranges.shape[0]):
        start = ranges[i, 1]
        stop = ranges[i, 2]
        if ranges[i, 0] != file_idx or start == stop:
            continue
        values = src[start:stop].view(proto.dtype)
        dest = out[ranges[i, 3] : ranges[i, 3] + values.shape[0]]
        for k in range(values.shape[0]):
            dest[k] = values[k]


@numba.njit(nogil=True, cache=True)
def decode_swapped(src, file_idx, ranges, proto, unit, out):
    """Like `decode_plain` for data stored with the other byte order.

    `unit` is the byte-swap width: the itemsize, or half of it for complex numbers.
    """
    max_len = 0
    for i in range(ranges.shape[0]):
        max_len = max(max_len, ranges[i, 2] - ranges[i, 1])
    scratch = np.empty(max_len, dtype=np.uint8)
    for i in range(ranges.shape[0]):
        start = ranges[i, 1]
        stop = ranges[i, 2]
        if ranges[i, 0] != file_idx or start == stop:
            continue
        n = stop - start
        for w in range(0, n, unit):
            for j in range(unit):
                scratch[w + j] = src[start + w + unit - 1 - j]
        values = scratch[:n].view(proto.dtype)
        dest = out[ranges[i, 3] : ranges[i, 3] + values.shape[0]]
        for k in range(values.shape[0]):
            dest[k] = values[k]


class Decoder:
    """Decodes read ranges of plain numpy-dtype pixels (either byte order).

    Parameters
    ----------
    native_dtype
        The dtype of the pixels in the files, with its byte order.
    """

    #: whether the output must be zeroed before decoding (decoders that accumulate)
    clear_first = False

    def __init__(self, native_dtype):
        self.native_dtype = np.dtype(native_dtype)
        self._proto = np.empty(0, dtype=self.native_dtype.newbyteorder("="))
        self._swapped = not self.native_dtype.isnative and self.native_dtype.itemsize > 1
        unit = self.native_dtype.itemsize
        if self.native_dtype.kind == "c":
            unit //= 2
        self._unit = unit

    @property
    def is_plain(self) -> bool:
        """True when the file bytes are already pixels in this machine's byte order."""
        return not self._swapped

    def decode(self, buffers, ranges: np.ndarray, out: np.ndarray) -> None:
        """Decode all `ranges` (2-D) from the file `buffers` (uint8 arrays) into flat `out`."""
        if ranges.shape[0] == 0:
            return
        used = ranges[ranges[:, 1] != ranges[:, 2], 0]
        if used.size == 0:
            return
        for file_idx in np.unique(used):
            self._decode_file(buffers[file_idx], int(file_idx), ranges, out)

    def _decode_file(self, src, file_idx, ranges, out):
        if self._swapped:
            decode_swapped(src, file_idx, ranges, self._proto, self._unit, out)
        else:
            decode_plain(src, file_idx, ranges, self._proto, out)

    def __dask_tokenize__(self):
        return (type(self).__qualname__, self.native_dtype.str)
