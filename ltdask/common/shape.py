"""`Shape`: a tuple of navigation dims followed by signal dims."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import overload

import numpy as np


class Shape:
    """An immutable shape split into navigation (leading) and signal (trailing) dims.

    Parameters
    ----------
    shape
        All dims, navigation first.
    sig_dims
        How many of the trailing dims are signal dims.

    Examples
    --------
    >>> from ltdask import Shape
    >>> s = Shape((4, 5, 16, 16), sig_dims=2)
    >>> s.nav, s.sig
    (Shape((4, 5), sig_dims=0), Shape((16, 16), sig_dims=2))
    >>> tuple(s.flatten_nav())
    (20, 16, 16)
    """

    __slots__ = ("_dims", "_sig_dims")

    def __init__(self, shape: Iterable[int], sig_dims: int):
        dims = tuple(int(d) for d in shape)
        sig_dims = int(sig_dims)
        if not 0 <= sig_dims <= len(dims):
            raise ValueError(f"sig_dims={sig_dims} is out of range for shape {dims}")
        if any(d < 0 for d in dims):
            raise ValueError(f"shape {dims} has negative dims")
        self._dims = dims
        self._sig_dims = sig_dims

    @property
    def sig_dims(self) -> int:
        return self._sig_dims

    @property
    def nav_dims(self) -> int:
        return len(self._dims) - self._sig_dims

    @property
    def nav(self) -> Shape:
        return Shape(self._dims[: self.nav_dims], sig_dims=0)

    @property
    def sig(self) -> Shape:
        return Shape(self._dims[self.nav_dims :], sig_dims=self._sig_dims)

    @property
    def size(self) -> int:
        return math.prod(self._dims)

    def flatten_nav(self) -> Shape:
        """The same shape with all navigation dims collapsed into one."""
        return Shape((math.prod(self.nav), *self.sig), sig_dims=self._sig_dims)

    def flatten_sig(self) -> Shape:
        """The same shape with all signal dims collapsed into one."""
        return Shape((*self.nav, math.prod(self.sig)), sig_dims=1)

    def to_tuple(self) -> tuple[int, ...]:
        return self._dims

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    @overload
    def __getitem__(self, k: int) -> int: ...
    @overload
    def __getitem__(self, k: slice) -> tuple[int, ...]: ...
    def __getitem__(self, k):
        return self._dims[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shape):
            return self._dims == other._dims and self._sig_dims == other._sig_dims
        if isinstance(other, tuple):
            return self._dims == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._dims, self._sig_dims))

    def __add__(self, other: Iterable[int]) -> tuple[int, ...]:
        return self._dims + tuple(other)

    def __radd__(self, other: Iterable[int]) -> tuple[int, ...]:
        return tuple(other) + self._dims

    def __repr__(self) -> str:
        return f"Shape({self._dims}, sig_dims={self._sig_dims})"

    def __reduce__(self):
        return (Shape, (self._dims, self._sig_dims))

    def __dask_tokenize__(self):
        return ("ltdask.Shape", self._dims, self._sig_dims)


class RoiBuilder:
    """``ds.roi[index]``: a nav-shaped boolean array that is True at `index` (LiberTEM's)."""

    def __init__(self, nav_shape: tuple[int, ...]):
        self.nav_shape = nav_shape

    def __getitem__(self, index) -> np.ndarray:
        roi = np.zeros(self.nav_shape, dtype=bool)
        roi[index] = True
        return roi


def default_dims(nav_dims: int, sig_dims: int) -> tuple[str, ...]:
    """Dim names: ``scan_y, scan_x`` / ``frame`` / ``nav_i`` and ``det_y, det_x`` / ``sig_i``."""
    nav: tuple[str, ...]
    if nav_dims == 2:
        nav = ("scan_y", "scan_x")
    elif nav_dims == 1:
        nav = ("frame",)
    else:
        nav = tuple(f"nav_{i}" for i in range(nav_dims))
    sig = ("det_y", "det_x") if sig_dims == 2 else tuple(f"sig_{i}" for i in range(sig_dims))
    return nav + sig
