"""Dask chunks that line up with a Zarr store's chunks (or shards), one to one.

``dask.array.to_zarr`` silently writes wrong data when dask chunks straddle store chunks
(dask issue 12583), so every array ltdask writes gets store chunks equal to its dask chunks,
which must therefore lie on Zarr's regular grid; the alignment is checked before anything
is written.
"""

from __future__ import annotations

from collections.abc import Sequence

from dask.utils import format_bytes

from ltdask.exceptions import LtdaskError, PerformanceWarning, warn
from ltdask.runtime import settings


def regular_chunks(chunks: Sequence[Sequence[int]]) -> bool:
    """Whether every dim's chunks are one size except a smaller last one (Zarr's grid).

    Examples
    --------
    >>> from ltdask.store import regular_chunks
    >>> regular_chunks(((4, 4, 3), (8,))), regular_chunks(((3, 4, 4), (8,)))
    (True, False)
    """
    for c in chunks:
        if len(c) > 1 and (len(set(c[:-1])) > 1 or c[-1] > c[0]):
            return False
    return True


def zarr_aligned(arr, what: str = "a dask array", avoid: str | None = None):
    """`arr` (dask) rechunked, if needed, onto a regular grid; returns ``(arr, chunks)``,
    ``chunks`` being the store chunks (one size per dim) that line up with it.

    An array already on a regular grid (every chunk one size but a smaller last one, as a
    single chunk per dim always is) is returned as it is. Otherwise it is rechunked to its
    largest chunk along each dim, and that copy is announced by a `PerformanceWarning` when
    it is costly: when the array holds at least one partition's worth of bytes
    (``ltdask.partition-bytes``, 128 MiB by default). Copying less than that costs less than
    reading one partition, so smaller arrays (UDF results over the scan, mostly) are
    rechunked silently.

    Parameters
    ----------
    arr : dask.array.Array
        The array to write.
    what : str
        What `arr` is, for the warning (``"result variable 'intensity'"``).
    avoid : str, optional
        How the caller can give `arr` regular chunks in the first place, for the warning
        (``{target}`` stands for the chunks it is rechunked to).

    Returns
    -------
    arr, chunks
        The array on a regular grid, and its store chunks.

    Warns
    -----
    PerformanceWarning
        When a rechunk copies at least ``ltdask.partition-bytes``.

    Examples
    --------
    >>> import dask.array as da
    >>> from ltdask.store import zarr_aligned
    >>> arr, chunks = zarr_aligned(da.zeros(11, chunks=((3, 4, 4),)))
    >>> arr.chunks, chunks
    (((4, 4, 3),), (4,))
    """
    if not regular_chunks(arr.chunks):
        target = tuple(max(c) if c else 1 for c in arr.chunks)
        before = arr.chunks
        arr = arr.rechunk(target)
        if arr.nbytes >= settings.partition_bytes():
            _warn_rechunk(arr, what, before, target, avoid)
    chunks = tuple(max(c[0], 1) if c else 1 for c in arr.chunks)
    check_alignment(arr.chunks, chunks)
    return arr, chunks


_AVOID = (
    "give it chunks of one size along each dim (the last one may be smaller) where it is "
    "made, e.g. .rechunk({target})"
)


def _warn_rechunk(arr, what: str, before, target: tuple, avoid: str | None) -> None:
    size = format_bytes(arr.nbytes)
    avoid = (avoid or _AVOID).format(target=target)
    warn(
        f"{what} ({arr.shape} {arr.dtype}, {size}) is rechunked from chunks {_show(before)} "
        f"to {_show(arr.chunks)} before it is written: a Zarr store's chunks form a regular "
        "grid, and dask chunks straddling them would be written wrongly (dask issue 12583). "
        f"The rechunk copies all {size}, holding neighbouring chunks in memory together. "
        f"To avoid it, {avoid}; to silence it, warnings.simplefilter('ignore', "
        "ltdask.PerformanceWarning)",
        PerformanceWarning,
    )


def _show(chunks) -> str:
    """Chunks per dim as ``((3, 4, 4), (6,))``, a dim of many chunks shortened to
    ``(3, 4, 4, ..., 4, 2 [120 chunks])``."""
    dims = []
    for c in chunks:
        c = tuple(int(n) for n in c)
        if len(c) > 6:
            head, tail = ", ".join(map(str, c[:3])), ", ".join(map(str, c[-2:]))
            dims.append(f"({head}, ..., {tail} [{len(c)} chunks])")
        else:
            dims.append(str(c))
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def check_alignment(dask_chunks, store_chunks) -> None:
    """Raise unless each dask chunk covers exactly one store chunk (or shard).

    Examples
    --------
    >>> import ltdask
    >>> from ltdask.store import check_alignment
    >>> check_alignment(((4, 4, 3),), (4,))  # lines up: returns None
    >>> try:
    ...     check_alignment(((3, 4, 4),), (4,))
    ... except ltdask.LtdaskError as e:
    ...     print(e)  # doctest: +ELLIPSIS
    dask chunks (3, 4, 4) along dim 0 do not line up with the store's chunks of 4; ...
    """
    for dim, (dc, sc) in enumerate(zip(dask_chunks, store_chunks, strict=True)):
        if any(c != sc for c in dc[:-1]) or (dc and dc[-1] > sc):
            raise LtdaskError(
                f"dask chunks {tuple(dc)} along dim {dim} do not line up with the store's "
                f"chunks of {sc}; writing them would corrupt data (dask issue 12583)"
            )
