"""`Slice`: a rectangular region (origin + shape) of a nav+sig array."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from ltdask.common.shape import Shape


class Slice:
    """A box inside an array: `origin` (one int per dim) and a `Shape`.

    Parameters
    ----------
    origin
        Start index along each dim.
    shape
        Extent along each dim; its ``sig_dims`` says which dims are signal dims.

    Examples
    --------
    >>> from ltdask import Shape, Slice
    >>> s = Slice(origin=(2, 0, 0), shape=Shape((3, 8, 8), sig_dims=2))
    >>> s.get()
    (slice(2, 5, None), slice(0, 8, None), slice(0, 8, None))
    >>> s.get(sig_only=True)
    (slice(0, 8, None), slice(0, 8, None))
    """

    __slots__ = ("origin", "shape")

    def __init__(self, origin: Sequence[int], shape: Shape):
        origin = tuple(int(o) for o in origin)
        if len(origin) != len(shape):
            raise ValueError(f"origin {origin} and shape {tuple(shape)} differ in length")
        self.origin = origin
        self.shape = shape

    @classmethod
    def full(cls, shape: Shape) -> Slice:
        """The slice that covers all of `shape`."""
        return cls(origin=(0,) * len(shape), shape=shape)

    @property
    def stop(self) -> tuple[int, ...]:
        return tuple(o + s for o, s in zip(self.origin, self.shape, strict=True))

    def get(self, arr=None, nav_only: bool = False, sig_only: bool = False):
        """Python slices for this box, or `arr` indexed by them.

        With ``nav_only`` / ``sig_only`` only the nav / sig part is returned.
        """
        if nav_only and sig_only:
            raise ValueError("nav_only and sig_only are exclusive")
        nd = self.shape.nav_dims
        pairs = list(zip(self.origin, self.stop, strict=True))
        if nav_only:
            pairs = pairs[:nd]
        elif sig_only:
            pairs = pairs[nd:]
        slices = tuple(slice(a, b) for a, b in pairs)
        if arr is not None:
            return arr[slices]
        return slices

    def intersection_with(self, other: Slice) -> Slice:
        """The overlap of two slices (zero-sized where they do not overlap)."""
        if len(self.origin) != len(other.origin):
            raise ValueError("slices of different dimensionality")
        origin = tuple(max(a, b) for a, b in zip(self.origin, other.origin, strict=True))
        stop = tuple(min(a, b) for a, b in zip(self.stop, other.stop, strict=True))
        dims = tuple(max(0, b - a) for a, b in zip(origin, stop, strict=True))
        return Slice(origin, Shape(dims, sig_dims=self.shape.sig_dims))

    def is_null(self) -> bool:
        return any(d == 0 for d in self.shape)

    def shift(self, other: Slice) -> Slice:
        """This slice relative to the origin of `other`."""
        origin = tuple(a - b for a, b in zip(self.origin, other.origin, strict=True))
        return Slice(origin, self.shape)

    def sig_part(self) -> Slice:
        nd = self.shape.nav_dims
        return Slice(self.origin[nd:], self.shape.sig)

    @property
    def sig(self) -> Slice:
        """The signal part of this slice (LiberTEM's ``Slice.sig``)."""
        return self.sig_part()

    @property
    def nav(self) -> Slice:
        """The nav part of this slice, with no sig dims (LiberTEM's ``Slice.nav``)."""
        nd = self.shape.nav_dims
        return Slice(self.origin[:nd], self.shape.nav)

    def subslices(self, shape: Sequence[int]) -> Iterator[Slice]:
        """Cut this slice into boxes of `shape` (smaller at the far borders), C order."""
        shape = tuple(int(s) for s in shape)
        if len(shape) != len(self.shape) or any(s <= 0 for s in shape):
            raise ValueError(f"bad subslice shape {shape} for {self!r}")
        ranges = [
            range(o, o + n, step) for o, n, step in zip(self.origin, self.shape, shape, strict=True)
        ]
        stop = self.stop
        for start in itertools.product(*ranges):
            dims = tuple(min(st, e - a) for a, st, e in zip(start, shape, stop, strict=True))
            yield Slice(start, Shape(dims, sig_dims=self.shape.sig_dims))

    def adjust_for_roi(self, roi: np.ndarray | None) -> Slice:
        """Map a flat-nav slice to ROI-compressed flat-nav coordinates.

        `roi` is the flattened boolean ROI of the whole dataset; the origin becomes the number
        of selected positions before this slice, the nav extent the number inside it.
        """
        if roi is None:
            return self
        if self.shape.nav_dims != 1:
            raise ValueError("adjust_for_roi needs a slice with one (flat) nav dim")
        start = self.origin[0]
        before = int(np.count_nonzero(roi[:start]))
        inside = int(np.count_nonzero(roi[start : start + self.shape[0]]))
        return Slice(
            (before, *self.origin[1:]),
            Shape((inside, *self.shape.sig), sig_dims=self.shape.sig_dims),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Slice):
            return NotImplemented
        return self.origin == other.origin and self.shape == other.shape

    def __hash__(self) -> int:
        return hash((self.origin, self.shape))

    def __repr__(self) -> str:
        return f"Slice(origin={self.origin}, shape={self.shape!r})"

    def __dask_tokenize__(self):
        return ("ltdask.Slice", self.origin, self.shape.__dask_tokenize__())
