"""Decoders: turn the bytes of read ranges into pixels of the requested dtype.

A decoder kernel is a module-level ``numba.njit(nogil=True, cache=True)`` function
``kernel(src, file_idx, ranges, *extra, out)``: ``src`` is one file's bytes (uint8), ``ranges``
a 2-D read-range array (see :mod:`ltdask.io.read_ranges`); the kernel decodes every row that
belongs to ``file_idx`` into the flat output buffer ``out``. A format whose bytes are not a
plain numpy dtype (packed bits, reordered quadrants) brings its own kernel and a
:class:`Decoder` subclass; the rest of the read path is shared.

numba has no float16: float16 pixels are decoded through numpy (range by range), and a
float16 output is decoded as float64 and then cast.
"""

from __future__ import annotations

import numba
import numpy as np

from ltdask.runtime import scratch


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


@numba.njit(nogil=True, cache=True, inline="always")
def _swap2(x):
    return ((x >> 8) | (x << 8)) & 0xFFFF


@numba.njit(nogil=True, cache=True, inline="always")
def _swap4(x):
    return (
        ((x >> 24) & 0xFF) | ((x >> 8) & 0xFF00) | ((x << 8) & 0xFF0000) | ((x << 24) & 0xFF000000)
    )


@numba.njit(nogil=True, cache=True, inline="always")
def _swap8(x):
    return (_swap4(x & 0xFFFFFFFF) << 32) | _swap4((x >> 32) & 0xFFFFFFFF)


@numba.njit(nogil=True, cache=True)
def decode_swapped(src, file_idx, ranges, words, proto, out, direct):
    """Like `decode_plain` for the other byte order: each range's words (``words.dtype``,
    an unsigned int of the pixel's width) are swapped, then viewed as ``proto.dtype``.
    Without `direct`, they are swapped into `words`, which holds the longest range's.
    With `direct` (unsigned 16- and 32-bit pixels, whose swapped words are their values;
    64-bit ones would pass through int64 arithmetic) they are swapped straight into `out`,
    one pass instead of two (big-endian uint16: 14 -> 19 GB/s into uint16 tiles, 9.4 ->
    11.7 into float32 ones, one thread).

    One module-level kernel for every width (numba caches functions made by a factory
    under one name, so three of them would overwrite each other's cache entries and
    compile again in every process)."""
    for i in range(ranges.shape[0]):
        start = ranges[i, 1]
        stop = ranges[i, 2]
        if ranges[i, 0] != file_idx or start == stop:
            continue
        raw = src[start:stop].view(words.dtype)
        dest = out[ranges[i, 3] : ranges[i, 3] + raw.shape[0]]
        if direct:
            _swap_into(raw, dest)
            continue
        swapped = words[: raw.shape[0]]
        _swap_into(raw, swapped)
        values = swapped.view(proto.dtype)
        for k in range(values.shape[0]):
            dest[k] = values[k]


@numba.njit(nogil=True, cache=True, inline="always")
def _swap_into(raw, dest):
    """``dest[k] = `` the byte-swapped word ``raw[k]`` (unsigned words of 2, 4 or 8 bytes)."""
    width = raw.itemsize
    if width == 2:
        for k in range(raw.shape[0]):
            dest[k] = _swap2(raw[k])
    elif width == 4:
        for k in range(raw.shape[0]):
            dest[k] = _swap4(raw[k])
    else:
        for k in range(raw.shape[0]):
            dest[k] = _swap8(raw[k])


@numba.njit(nogil=True, cache=True, inline="always")
def _be16(x):
    """The big-endian uint16 loaded (little-endian) as `x`, as uint32."""
    x = np.uint32(x)
    return ((x >> np.uint32(8)) | (x << np.uint32(8))) & np.uint32(0xFFFF)


@numba.njit(nogil=True, cache=True)
def sum_swapped16(src, file_idx, ranges, slice_px, acc):
    """``acc += `` the big-endian uint16 pixels of the ranges of file `file_idx`, each range
    a run of pixels placed at its ``dest`` modulo `slice_px` (one frame's part of the
    tile's signal slice): four frames' runs at a time where four ranges in a row fill the
    same pixels."""
    n = ranges.shape[0]
    i = 0
    while i < n:
        start, stop = ranges[i, 1], ranges[i, 2]
        if ranges[i, 0] != file_idx or start == stop:
            i += 1
            continue
        d = ranges[i, 3] % slice_px
        size = stop - start
        a = acc[d : d + size // 2]
        four = i + 3 < n
        for j in range(i + 1, min(i + 4, n)):
            four = four and ranges[j, 0] == file_idx and ranges[j, 2] - ranges[j, 1] == size
            four = four and ranges[j, 3] % slice_px == d
        v0 = src[start:stop].view(np.uint16)
        if four:
            v1 = src[ranges[i + 1, 1] : ranges[i + 1, 2]].view(np.uint16)
            v2 = src[ranges[i + 2, 1] : ranges[i + 2, 2]].view(np.uint16)
            v3 = src[ranges[i + 3, 1] : ranges[i + 3, 2]].view(np.uint16)
            for k in range(a.shape[0]):
                a[k] += (_be16(v0[k]) + _be16(v1[k])) + (_be16(v2[k]) + _be16(v3[k]))
            i += 4
        else:
            for k in range(a.shape[0]):
                a[k] += _be16(v0[k])
            i += 1


#: the unsigned word `decode_swapped` swaps, by pixel width
_WORDS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def used_files(ranges: np.ndarray) -> np.ndarray:
    """The files that the read-range rows with bytes to read name (padding rows: none)."""
    return np.unique(ranges[ranges[:, 1] != ranges[:, 2], 0])


class Decoder:
    """Decodes read ranges of plain numpy-dtype pixels (either byte order).

    Parameters
    ----------
    native_dtype
        The dtype of the pixels in the files, with its byte order.

    Examples
    --------
    >>> Decoder("<u2").is_plain, Decoder(">u2").is_plain  # big-endian bytes are swapped
    (True, False)

    A `FileDataSet` of big-endian frames reads them as native pixels:

    >>> import numpy as np, tempfile, os
    >>> from ltdask.io import File, FileDataSet, FileSet
    >>> frames = np.arange(4 * 3 * 5, dtype=">u2").reshape(4, 3, 5)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.bin")
    >>> frames.tofile(path)
    >>> fileset = FileSet([File(path, 0, 4)], (3, 5), ">u2")
    >>> ds = FileDataSet(fileset, Decoder(">u2"), nav_shape=(2, 2))
    >>> data = ds.to_dask().compute()
    >>> data.dtype, bool((data == frames.reshape(2, 2, 3, 5)).all())
    (dtype('uint16'), True)
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
        #: pixels numba cannot read (float16, either byte order): decoded through numpy
        self._through_numpy = self.native_dtype.kind == "f" and self.native_dtype.itemsize == 2

    @property
    def is_plain(self) -> bool:
        """True when the file bytes are already pixels in this machine's byte order."""
        return not self._swapped

    def decode(self, buffers, ranges: np.ndarray, out: np.ndarray) -> None:
        """Decode all `ranges` (2-D) from the file `buffers` (uint8 arrays) into flat `out`."""
        if ranges.shape[0] == 0:
            return
        files = used_files(ranges)
        if files.size == 0:
            return
        if out.dtype == np.float16 and not self._through_numpy:
            # numba kernels cannot write float16: decode as float64 (exact for every pixel
            # dtype up to 32 bits, so float16 is rounded once, as numpy's astype does),
            # starting from `out` (decoders that accumulate rely on its zeros)
            wide = out.astype(np.float64)
            self.decode(buffers, ranges, wide)
            out[...] = wide
            return
        for file_idx in files:
            if self._through_numpy:
                self._decode_file_numpy(buffers[file_idx], int(file_idx), ranges, out)
            else:
                self._decode_file(buffers[file_idx], int(file_idx), ranges, out)

    def _decode_file_numpy(self, src, file_idx, ranges, out):
        """:func:`decode_plain` in numpy, for pixels numba cannot read."""
        rows = ranges[(ranges[:, 0] == file_idx) & (ranges[:, 1] != ranges[:, 2])]
        dtype = self.native_dtype
        for start, stop, dest in rows[:, 1:4].tolist():
            values = src[start:stop].view(dtype)
            out[dest : dest + values.size] = values

    def _decode_file(self, src, file_idx, ranges, out):
        if self._swapped:
            direct = self.native_dtype.kind == "u" and self._unit <= 4
            # (task scratch: a new array per tile maps fresh pages in a distributed worker)
            longest = 0 if direct else int((ranges[:, 2] - ranges[:, 1]).max())
            words = scratch.empty(longest // self._unit, _WORDS[self._unit])
            decode_swapped(src, file_idx, ranges, words, self._proto, out, direct)
        else:
            decode_plain(src, file_idx, ranges, self._proto, out)

    #: the dtype `add_sums` adds a tile's pixels in (a tile's sums of 16-bit pixels fit
    #: uint32 up to 65537 frames)
    sum_dtype: np.dtype | None = np.dtype(np.uint32)

    def can_sum(self, scheme) -> bool:
        """Whether `add_sums` sums the tiles of `scheme`: big-endian uint16 pixels (plain
        ones are read as views of the files, which is faster still)."""
        dt = self.native_dtype
        if type(self)._decode_file is not Decoder._decode_file:
            return False  # (a decoder of its own sums its own way, or not at all)
        return self._swapped and (dt.kind, dt.itemsize) == ("u", 2) and scheme.depth < 65537

    def add_sums(self, buffers, ranges: np.ndarray, slice_px: int, acc: np.ndarray) -> bool:
        """``acc += `` the frames of one tile's `ranges` summed per pixel of its signal
        slice (`slice_px` pixels), decoded on the way, never into a tile (where
        `can_sum`); False, nothing added, where it cannot for these ranges."""
        for file_idx in used_files(ranges):
            if not self._sum_file(buffers[file_idx], int(file_idx), ranges, slice_px, acc):
                return False
        return True

    def _sum_file(self, src, file_idx, ranges, slice_px, acc) -> bool:
        """`add_sums` for the ranges of one file (big-endian uint16 here)."""
        sum_swapped16(src, file_idx, ranges, slice_px, acc)
        return True

    def __dask_tokenize__(self):
        return (type(self).__qualname__, self.native_dtype.str)
