"""LiberTEM's ``libertem.common.buffers``: `BufferWrapper` (a result buffer's kind, extra
shape and dtype, and its default valid mask) and the helpers LiberTEM code uses on buffers
and masks: `reshaped_view`, `get_bbox`, `get_bbox_slice`, `get_inner_slice`.

Inside an ltdask run a UDF's buffers are plain arrays declared with
:meth:`ltdask.UDF.buffer` (`ltdask.udf.buffers.BufferSpec`); what ``Context.run_udf``
returns are `ltdask.compat.ResultBuffer` objects, which are `BufferWrapper` s, so LiberTEM
code that checks ``isinstance(result, BufferWrapper)`` runs unchanged.
"""

from __future__ import annotations

import numpy as np

from ltdask.exceptions import InvalidMaskError

__all__ = [
    "BufferWrapper",
    "InvalidMaskError",
    "get_bbox",
    "get_bbox_slice",
    "get_inner_slice",
    "reshaped_view",
]

_KINDS = ("nav", "sig", "single")
_USES = (None, "private", "result_only")


def reshaped_view(a, shape):
    """`a` seen with `shape`, always a view: raises `AttributeError` (as LiberTEM's) where
    the memory layout of `a` needs a copy for that shape.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.buffers import reshaped_view
    >>> a = np.zeros((2, 3))
    >>> reshaped_view(a, (-1,))[:] = 1
    >>> a.sum()
    np.float64(6.0)
    >>> try:
    ...     reshaped_view(a[:, :2], (-1,))  # every row's first two: not one stride
    ... except AttributeError as e:
    ...     print(str(e).split(": ")[1])
    an array of shape (2, 2) and strides (24, 8) cannot be seen with shape (-1,) without a copy
    """
    if isinstance(a, np.ndarray):
        try:
            return a.reshape(shape, copy=False)
        except ValueError:
            raise AttributeError(
                f"reshaped_view: an array of shape {a.shape} and strides {a.strides} cannot "
                f"be seen with shape {tuple(shape)} without a copy"
            ) from None
    view = a.view()  # (CuPy arrays) assigning the shape never copies
    view.shape = shape
    return view


def get_bbox(arr) -> tuple[int, ...]:
    """The bounding box of the non-zero elements of `arr`: ``(first, last)`` index per axis,
    flattened (``(ymin, ymax, xmin, xmax)`` for 2-D); an axis without any non-zero element
    gives ``(size, 0)``, as LiberTEM's.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.buffers import get_bbox
    >>> a = np.zeros((4, 5), dtype=bool)
    >>> a[1, 2] = a[2, 4] = True
    >>> get_bbox(a)
    (1, 2, 2, 4)
    """
    arr = np.asarray(arr)
    out: list[int] = []
    for axis in range(arr.ndim):
        others = tuple(d for d in range(arr.ndim) if d != axis)
        hits = np.flatnonzero(np.any(arr != 0, axis=others))
        out.extend((int(hits[0]), int(hits[-1])) if hits.size else (arr.shape[axis], 0))
    return tuple(out)


def get_bbox_slice(arr) -> tuple[slice, ...]:
    """`get_bbox` as one slice per axis (first to last non-zero element; the empty
    ``slice(size, 1)`` where there is none).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.buffers import get_bbox_slice
    >>> a = np.zeros((4, 5), dtype=bool)
    >>> a[1:3, 2] = True
    >>> get_bbox_slice(a)
    (slice(1, 3, None), slice(2, 3, None))
    """
    box = get_bbox(arr)
    return tuple(slice(box[i], box[i + 1] + 1) for i in range(0, len(box), 2))


def get_inner_slice(arr, axis: int = 0) -> tuple[slice, ...]:
    """The first contiguous range along `axis` whose elements are non-zero across all other
    axes, as a slice per axis (the whole of the others); ``slice(size, 1)`` where there is
    none.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.buffers import get_inner_slice
    >>> a = np.zeros((6, 3), dtype=bool)
    >>> a[1:3] = True
    >>> a[4] = True
    >>> get_inner_slice(a, axis=0)
    (slice(1, 3, None), slice(None, None, None))
    """
    arr = np.asarray(arr)
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"get_inner_slice: axis={axis}, but the array has {arr.ndim} axes")
    axis %= arr.ndim
    others = tuple(d for d in range(arr.ndim) if d != axis)
    full = np.all(arr != 0, axis=others)
    hits = np.flatnonzero(full)
    if hits.size:
        start = int(hits[0])
        gaps = np.flatnonzero(~full[start:])
        stop = start + int(gaps[0]) if gaps.size else full.size
    else:
        start, stop = arr.shape[axis], 1
    return tuple(slice(start, stop) if d == axis else slice(None) for d in range(arr.ndim))


class BufferWrapper:
    """A result buffer as LiberTEM declares it: `kind` (``"nav"``, ``"sig"`` or
    ``"single"``), `extra_shape` and `dtype` (plus ``where`` and ``use``, as
    :meth:`ltdask.UDF.buffer` takes them). The results of ``Context.run_udf``
    (`ltdask.compat.ResultBuffer`) are of this class.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask import Shape
    >>> from ltdask.compat.buffers import BufferWrapper
    >>> buf = BufferWrapper(kind="nav", extra_shape=(2,), dtype="float32")
    >>> shape = Shape((3, 8, 8), sig_dims=2)
    >>> buf.make_default_mask(np.array([True, True, False]), shape, roi=None).tolist()
    [[True, True], [True, True], [False, False]]
    """

    def __init__(self, kind, extra_shape=(), dtype="float32", where=None, use=None):
        if kind not in _KINDS:
            raise ValueError(f"BufferWrapper: kind={kind!r}; expected one of {_KINDS}")
        if use not in _USES:
            raise ValueError(f"BufferWrapper: use={use!r}; expected one of {_USES}")
        if where not in (None, "device"):
            raise ValueError(f"BufferWrapper: where={where!r}; expected None or 'device'")
        self._kind = kind
        self._extra_shape = tuple(int(n) for n in extra_shape)
        self._dtype = np.dtype(dtype)
        self.where = where
        self.use = use

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def extra_shape(self) -> tuple[int, ...]:
        return self._extra_shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def make_default_mask(self, valid_nav_mask, dataset_shape, roi) -> np.ndarray:
        """The valid mask a result of this buffer has unless ``get_results`` sets one, in
        the buffer's raw shape: for nav buffers `valid_nav_mask` (flat, compressed to `roi`
        where there is one) across `extra_shape`; all True for sig and single buffers.

        Parameters
        ----------
        valid_nav_mask : array of bool
            Flat: one entry per nav position, or per position of `roi` where one is given.
        dataset_shape : ltdask.Shape
            The dataset's shape (nav and sig).
        roi : array of bool or None
            The run's ROI (any shape with one entry per nav position).
        """
        valid = np.asarray(valid_nav_mask, dtype=bool).reshape(-1)
        if self._kind == "nav":
            expected = dataset_shape.nav.size if roi is None else int(np.count_nonzero(roi))
            if valid.size != expected:
                raise ValueError(
                    f"make_default_mask: valid_nav_mask has {valid.size} entries; expected "
                    f"{expected} (one per nav position{'' if roi is None else ' of the ROI'})"
                )
            column = valid.reshape((-1,) + (1,) * len(self._extra_shape))
            return np.broadcast_to(column, (valid.size, *self._extra_shape)).copy()
        if self._kind == "sig":
            return np.ones(tuple(dataset_shape.sig) + self._extra_shape, dtype=bool)
        return np.ones(self._extra_shape or (1,), dtype=bool)
