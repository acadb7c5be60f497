"""Converting a scan to the dtype a store is written in without changing its values silently.

``numpy.astype`` wraps integers around (uint16 4000 becomes uint8 160), turns NaN and
infinities into arbitrary integers and overflows large floats to infinity. A conversion
that can do any of that (`needs_check`) is done chunk by chunk as the chunks are written
(`checked_astype`): a chunk holding a value the dtype cannot hold raises `ConversionError`,
or, when clipping is asked for, its values are clipped into the dtype's range and counted.
Floats converted to integers lose their fractions as ``astype`` does (towards zero); that is
rounding, not a value out of range.
"""

from __future__ import annotations

import numpy as np

from ltdask.exceptions import ConversionError


def _range(dtype: np.dtype) -> tuple[int | float, int | float]:
    """The smallest and largest finite value of `dtype` (bool: 0 and 1)."""
    if dtype.kind == "b":
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    if dtype.kind == "f":
        top = float(np.finfo(dtype).max)
        return -top, top
    raise TypeError(f"no range for {dtype}")


def needs_check(source, target) -> bool:
    """Whether converting values of dtype `source` to `target` can change one beyond
    rounding: wrap it around, make NaN or an infinity a number, or overflow to infinity.

    Examples
    --------
    >>> from ltdask.store._convert import needs_check
    >>> needs_check("uint16", "uint8"), needs_check("uint16", "float32")
    (True, False)
    >>> needs_check("float32", "uint16"), needs_check("float64", "float32")
    (True, True)
    """
    source, target = np.dtype(source), np.dtype(target)
    if np.can_cast(source, target, "safe") or target.kind == "c" or source.kind == "b":
        return False
    if source.kind == "f" and target.kind != "f":
        return True  # NaN and infinities
    low, high = _range(source)
    top_low, top_high = _range(target)
    return low < top_low or high > top_high


def range_text(dtype) -> str:
    """``uint8's range 0..255``, for messages."""
    dtype = np.dtype(dtype)
    low, high = _range(dtype)
    if dtype.kind == "f":
        return f"{dtype}'s finite range ±{high:.4g}"
    return f"{dtype}'s range {low}..{high}"


def _float_to_int_limits(target: np.dtype) -> tuple[np.float64, np.float64, bool]:
    """``(lower, upper, closed)``: a float `v` becomes an integer of `target` unchanged but
    for its fraction when ``lower < v < upper`` (``lower <= v`` where `closed`). ``upper`` is
    one more than the largest integer, a power of two and so exact in float64; ``lower`` is
    one less than the smallest, exact but for int64, whose smallest value is its own
    bound."""
    low, high = _range(target)
    lower, upper = np.float64(low - 1), np.float64(high + 1)
    return lower, upper, bool(lower == low)


def outside(block: np.ndarray, target: np.dtype) -> np.ndarray:
    """Where `block` holds a value that `target` cannot hold (NaN and infinities included
    where `target` holds no such value)."""
    if block.dtype.kind == "f" and target.kind != "f":
        lower, upper, closed = _float_to_int_limits(target)
        above = block >= lower if closed else block > lower
        # NaN compares false either way: it is outside
        return ~(above & (block < upper))
    low, high = _range(target)
    if block.dtype.kind == "f":  # to a narrower float: infinities and NaN stay what they are
        return np.isfinite(block) & (np.abs(block) > high)
    return (block < low) | (block > high)


def _clipped(block: np.ndarray, target: np.dtype) -> np.ndarray:
    """`block` with every value clipped into `target`'s range (infinities too, where the
    target is an integer; a float target keeps them)."""
    if block.dtype.kind == "f" and target.kind != "f":
        low, _ = _range(target)
        _, upper, _ = _float_to_int_limits(target)
        with np.errstate(over="ignore"):
            top = np.nextafter(block.dtype.type(upper), block.dtype.type(-np.inf))
            return np.clip(block, block.dtype.type(low), top)
    low, high = _range(target)
    if block.dtype.kind == "f":
        return np.where(np.isinf(block), block, np.clip(block, low, high))
    source_low, source_high = _range(block.dtype)
    return np.clip(block, max(low, source_low), min(high, source_high))


def _position(index: tuple[int, ...], nav_dims: int) -> str:
    nav, sig = index[:nav_dims], index[nav_dims:]
    return f"scan position {nav}, pixel {sig}"


def convert_block(block, target, clip: bool, where: str, nav_dims: int, block_info=None):
    """The task behind each chunk of `checked_astype`."""
    if not clip:
        bad = outside(block, target)
    elif block.dtype.kind == "f" and target.kind != "f":
        bad = np.isnan(block)  # the rest is clipped below; NaN has no place in the range
    else:
        bad = None
    if bad is not None and bad.any():
        count = int(np.count_nonzero(bad))
        first = np.unravel_index(int(np.argmax(bad)), block.shape)
        start = [a for a, _ in block_info[0]["array-location"]] if block_info else [0] * len(first)
        index = tuple(int(i) + int(s) for i, s in zip(first, start, strict=True))
        value = block[first].item()
        if clip:
            what = f"NaN, which {target} cannot hold"
            fix = f"convert to a float dtype (clipping cannot place NaN in {target}'s range)"
        else:
            to_int = block.dtype.kind == "f" and target.kind != "f"
            nans = int(np.count_nonzero(np.isnan(block))) if to_int else 0
            what = f"outside {range_text(target)}" + (f" ({nans} of them NaN)" if nans else "")
            fix = "pass clip=True to clip them into the range, or a dtype that holds them"
        raise ConversionError(
            f"{where}: converting to {target} would change values: {count} of the "
            f"{block.size} values in the chunk at {_chunk_text(block_info, block.shape)} are "
            f"{what} (the first: {value} at {_position(index, nav_dims)})",
            fix,
        )
    if clip:
        block = _clipped(block, target)
    return block.astype(target)


def _chunk_text(block_info, shape) -> str:
    if not block_info:
        return str(tuple(f"0:{n}" for n in shape))
    return "[" + ", ".join(f"{a}:{b}" for a, b in block_info[0]["array-location"]) + "]"


def _count_block(block, target):
    return np.full((1,) * block.ndim, np.count_nonzero(outside(block, target)), dtype=np.int64)


def checked_astype(arr, target, clip: bool, where: str, nav_dims: int):
    """`arr` (dask) converted to `target` chunk by chunk, each chunk checked: a value that
    `target` cannot hold raises `ConversionError` when the chunk is computed, or with `clip`
    is clipped into its range (NaN still raises). Returns ``(array, clipped)``: ``clipped``
    is a dask scalar, the number of values clipped (None without `clip`); compute it with
    the array to read each chunk once.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from ltdask.store._convert import checked_astype
    >>> arr = da.from_array(np.array([[3, 300], [-1, 7]], dtype=np.int16), chunks=1)
    >>> out, clipped = checked_astype(arr, np.dtype("uint8"), True, "values", 1)
    >>> out.compute().tolist(), int(clipped.compute())
    ([[3, 255], [0, 7]], 2)
    """
    import dask.array as da

    target = np.dtype(target)
    out = da.map_blocks(
        convert_block,
        arr,
        dtype=target,
        meta=np.empty((0,) * arr.ndim, dtype=target),
        target=target,
        clip=clip,
        where=where,
        nav_dims=nav_dims,
    )
    if not clip:
        return out, None
    counts = da.map_blocks(
        _count_block,
        arr,
        dtype=np.int64,
        chunks=tuple((1,) * len(c) for c in arr.chunks),
        meta=np.empty((0,) * arr.ndim, dtype=np.int64),
        target=target,
    )
    return out, counts.sum()
