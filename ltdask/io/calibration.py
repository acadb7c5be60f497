"""Physical calibrations of a scan's dims: `Axis` (scale, origin, units of one dim) and
`axes`, which turns what users and file headers give into one `Axis` per dim.

A calibrated dim's coordinate is ``origin + scale * index``, in `units` (a string that pint
understands where possible: ``"nm"``, ``"mrad"``, ``"1/nm"``). Datasets carry one `Axis` per
nav and per signal dim (:attr:`~ltdask.io.dataset.DataSet.nav_calibration`,
:attr:`~ltdask.io.dataset.DataSet.sig_calibration`); ``to_xarray()`` turns them into
coordinates with a ``units`` attribute.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import DataSetError


@dataclass(frozen=True)
class Axis:
    """The calibration of one dim: coordinate ``origin + scale * index`` in `units`.

    Examples
    --------
    >>> from ltdask.io.calibration import Axis
    >>> Axis(scale=0.5, origin=-1.0, units="nm").coordinate(4).tolist()
    [-1.0, -0.5, 0.0, 0.5]
    >>> Axis().calibrated
    False
    """

    scale: float = 1.0
    origin: float = 0.0
    units: str = ""

    def __post_init__(self) -> None:
        for name in ("scale", "origin"):
            value = getattr(self, name)
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise DataSetError(f"calibration {name}={value!r} is not a number") from None
            if not math.isfinite(number):
                raise DataSetError(f"calibration {name}={value!r} must be finite")
            object.__setattr__(self, name, number)
        if self.scale == 0:
            raise DataSetError("calibration scale=0: a dim's scale must not be zero")
        if not isinstance(self.units, str):
            raise DataSetError(f"calibration units={self.units!r} must be a string")

    @property
    def calibrated(self) -> bool:
        """Whether this axis says more than the index (a scale, origin or units)."""
        return self != Axis()

    def coordinate(self, size: int) -> np.ndarray:
        """The coordinate values of a dim of `size` entries."""
        return self.origin + self.scale * np.arange(size, dtype=np.float64)


def _one(value, what: str) -> Axis:
    if isinstance(value, Axis):
        return value
    if value is None:
        return Axis()
    if isinstance(value, Mapping):
        unknown = set(value) - {"scale", "origin", "units"}
        if unknown:
            raise DataSetError(
                f"{what}: unknown calibration keys {sorted(unknown)}; expected scale, origin, units"
            )
        return Axis(**value)
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return Axis(scale=float(value))
    if _is_units_tuple(value) and len(value) in (2, 3):
        # (scale, units) or (scale, origin, units)
        origin = value[1] if len(value) == 3 else 0.0
        return Axis(scale=value[0], origin=origin, units=value[-1])
    raise DataSetError(
        f"{what}={value!r}: expected an ltdask.io.calibration.Axis, a dict with scale, origin "
        "and units, a (scale, units) or (scale, origin, units) tuple, or a number (the scale)"
    )


def _is_units_tuple(value) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) > 0
        and isinstance(value[-1], str)
    )


def axes(value, ndim: int, what: str) -> tuple[Axis, ...]:
    """One `Axis` per dim of `ndim` dims from `value` (`what` names it in errors).

    `value` is None (uncalibrated), one calibration for every dim (an `Axis`, a dict, a
    ``(scale, units)`` or ``(scale, origin, units)`` tuple or a number), or a list or tuple
    of them, one per dim (a tuple that ends in a string is one calibration).

    Examples
    --------
    >>> from ltdask.io.calibration import axes
    >>> [a.units for a in axes((2.0, "nm"), 2, "nav_calibration")]
    ['nm', 'nm']
    >>> [a.scale for a in axes([1.5, {"scale": 2, "units": "mrad"}], 2, "sig_calibration")]
    [1.5, 2.0]
    """
    if value is None:
        return (Axis(),) * ndim
    if isinstance(value, (list, tuple)) and not _is_units_tuple(value):
        # one per dim
        if len(value) != ndim:
            raise DataSetError(
                f"{what}: {len(value)} calibrations for {ndim} dims; give one per dim "
                "or one for all"
            )
        return tuple(_one(v, f"{what}[{i}]") for i, v in enumerate(value))
    return (_one(value, what),) * ndim


def _fitting(calibration: tuple[Axis, ...], shape, what: str) -> tuple[Axis, ...]:
    """`calibration`, checked to give finite float64 coordinates over the dims of `shape`
    (scale = origin = 1e308 give inf from the second entry on)."""
    for i, (axis, size) in enumerate(zip(calibration, shape, strict=True)):
        with np.errstate(over="ignore", invalid="ignore"):
            last = axis.origin + axis.scale * np.float64(max(int(size) - 1, 0))
        if not np.isfinite(last):
            dim = f"{what}[{i}]" if len(shape) > 1 else what
            raise DataSetError(
                f"{dim}: scale={axis.scale:g}, origin={axis.origin:g} give coordinate {last} "
                f"at index {int(size) - 1} (origin + scale * index); the coordinates of a dim "
                "must be finite floats: give a smaller scale or origin (or other units)"
            )
    return calibration


class Calibrated:
    """The calibration part of `ltdask.io.dataset.DataSet` (which has the dims, shapes and
    coordinates these methods read).

    Examples
    --------
    >>> import ltdask, numpy as np
    >>> ds = ltdask.from_array(np.zeros((2, 3, 4, 4), np.float32), nav_calibration=(0.5, "nm"))
    >>> isinstance(ds, ltdask.io.calibration.Calibrated), ds.nav_calibration[1].units
    (True, 'nm')
    >>> ds.to_xarray().coords["scan_x"].values.tolist()
    [0.0, 0.5, 1.0]
    """

    path: str
    dims: tuple[str, ...]
    coords: dict

    @property
    def nav_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def sig_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    #: physical calibration of each nav and signal dim (see :meth:`calibrate`); None: none
    _calibration: tuple[tuple[Axis, ...], tuple[Axis, ...]] | None = None

    def calibrate(self, nav=None, sig=None):
        """Set the physical calibration of the nav and/or signal dims (in place; returns
        the dataset). Each is what :func:`ltdask.io.calibration.axes` takes: one calibration
        for all dims of the kind or one per dim; None keeps what is set.

        Examples
        --------
        >>> import ltdask, numpy as np
        >>> ds = ltdask.from_array(np.zeros((2, 3, 4, 4), np.float32))
        >>> ds = ds.calibrate(nav=(0.5, "nm"), sig=[(0.1, -0.2, "mrad"), (0.1, "mrad")])
        >>> [a.units for a in ds.nav_calibration], ds.sig_calibration[0].origin
        (['nm', 'nm'], -0.2)
        """
        where = self.path
        new_nav = self.nav_calibration
        new_sig = self.sig_calibration
        if nav is not None:
            what = f"{where}: nav_calibration"
            new_nav = _fitting(axes(nav, len(self.nav_shape), what), self.nav_shape, what)
        if sig is not None:
            what = f"{where}: sig_calibration"
            new_sig = _fitting(axes(sig, len(self.sig_shape), what), self.sig_shape, what)
        self._calibration = (new_nav, new_sig)
        return self

    @property
    def nav_calibration(self) -> tuple[Axis, ...]:
        """The physical calibration of each nav dim (`ltdask.io.calibration.Axis`)."""
        if self._calibration is None:
            return (Axis(),) * len(self.nav_shape)
        return self._calibration[0]

    @property
    def sig_calibration(self) -> tuple[Axis, ...]:
        """The physical calibration of each signal dim (`ltdask.io.calibration.Axis`)."""
        if self._calibration is None:
            return (Axis(),) * len(self.sig_shape)
        return self._calibration[1]

    def calibrated_coords(self) -> dict:
        """Coordinates (``xarray.Variable`` with a ``units`` attribute) of the calibrated
        dims, by dim name; the dataset's own :attr:`coords` come first."""
        import xarray as xr

        out = dict(self.coords)
        for dim, size, axis in zip(
            self.dims,
            self.nav_shape + self.sig_shape,
            self.nav_calibration + self.sig_calibration,
            strict=True,
        ):
            if axis.calibrated and dim not in out:
                attrs = {"units": axis.units} if axis.units else {}
                out[dim] = xr.Variable((dim,), axis.coordinate(size), attrs=attrs)
        return out


__all__ = ["Axis", "Calibrated", "axes"]


#: the keywords every opener takes to set (or override) the calibrations of the file
CALIBRATION_KEYWORDS = ("nav_calibration", "sig_calibration")

_CALIBRATION_DOC = """    nav_calibration, sig_calibration
        The physical calibration of the nav and of the signal dims, over what the file says:
        ``(scale, units)``, ``(scale, origin, units)``, an `Axis`, or one of those per dim
        (see :func:`ltdask.io.calibration.axes`); None keeps the file's.
"""


def calibrated(ds, nav_calibration=None, sig_calibration=None):
    """`ds` with the calibrations given (None: as it is)."""
    if nav_calibration is not None or sig_calibration is not None:
        ds.calibrate(nav=nav_calibration, sig=sig_calibration)
    return ds


def takes_calibration(opener):
    """`opener` (a function returning a dataset) with the keyword-only arguments
    ``nav_calibration=`` and ``sig_calibration=`` added to its signature and docstring."""

    @functools.wraps(opener)
    def wrapper(*args, nav_calibration=None, sig_calibration=None, **kwargs):
        return calibrated(opener(*args, **kwargs), nav_calibration, sig_calibration)

    sig = inspect.signature(opener)
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
        for name in CALIBRATION_KEYWORDS
    ]
    wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])
    doc = opener.__doc__ or ""
    entry = _CALIBRATION_DOC
    if "\n    Parameters\n    ----------\n" not in doc:
        entry = "\n    Parameters\n    ----------\n" + entry
    for section in ("\n    Returns\n", "\n    Raises\n", "\n    Examples\n", "\n    Notes\n"):
        at = doc.find(section)
        if at >= 0:
            doc = doc[:at] + entry + doc[at:]
            break
    wrapper.__doc__ = doc
    return wrapper
