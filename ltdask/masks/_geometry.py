"""Pixel geometry shared by the mask factories: argument checks, each pixel's offset from
a centre, and how much of a pixel's radial extent falls inside a band of radii."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt


def _check_image_size(imageSizeX: int, imageSizeY: int) -> tuple[int, int]:
    sizes = []
    for name, value in (("imageSizeX", imageSizeX), ("imageSizeY", imageSizeY)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        sizes.append(int(value))
    return sizes[0], sizes[1]


def _check_finite(**values: float) -> None:
    for name, value in values.items():
        if not np.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")


def _check_radii(radius: float, radius_inner: float | None = None, infinite: bool = True) -> None:
    """Radii as LiberTEM takes them: an infinite outer radius (a disk over the whole frame)
    where `infinite`."""
    if not (infinite and radius == np.inf):
        _check_finite(radius=radius)
    if radius < 0:
        raise ValueError(f"radius must be >= 0, got {radius!r}")
    if radius_inner is None:
        return
    _check_finite(radius_inner=radius_inner)
    if radius_inner < 0:
        raise ValueError(f"radius_inner must be >= 0, got {radius_inner!r}")
    if radius_inner > radius:
        raise ValueError(
            f"radius_inner ({radius_inner!r}) must not be larger than radius ({radius!r}); "
            "swap the two values"
        )


#: what an empty mask does
_ZEROS = "every value is 0, and so is every result it gives"


def _warn_if_empty(
    mask: Any, call: str, imageSizeX: int, imageSizeY: int, fix: str, effect: str = _ZEROS
) -> None:
    """Warn (`ltdask.EmptyMaskWarning`) when `mask` (dense or sparse) has no non-zero pixel:
    applied, it gives zeros everywhere. `call` is the factory's call with its arguments,
    `fix` what to change, `effect` what the empty mask does."""
    from ltdask.exceptions import EmptyMaskWarning, warn

    nonzero = mask.nnz if hasattr(mask, "nnz") else np.count_nonzero(mask)
    if nonzero:
        return
    warn(
        f"masks.{call} has no pixel in the {imageSizeX} x {imageSizeY} frame (pixel centres "
        f"at x = 0..{imageSizeX - 1}, y = 0..{imageSizeY - 1}): {effect}; {fix}",
        EmptyMaskWarning,
    )


def _args(**values: Any) -> str:
    """``centerX=500, centerY=500`` for a factory's call in a message."""
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def _offsets(
    centerX: float, centerY: float, imageSizeX: int, imageSizeY: int
) -> tuple[np.ndarray, np.ndarray]:
    """Broadcastable ``(dy, dx)`` of every pixel centre from the mask centre."""
    _check_finite(centerX=centerX, centerY=centerY)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    dy = np.arange(sy, dtype=np.float64)[:, np.newaxis] - centerY
    dx = np.arange(sx, dtype=np.float64)[np.newaxis, :] - centerX
    return dy, dx


def _disk(
    centerX: float, centerY: float, imageSizeX: int, imageSizeY: int, radius: float
) -> npt.NDArray[np.bool_]:
    dy, dx = _offsets(centerX, centerY, imageSizeX, imageSizeY)
    return dy * dy + dx * dx <= radius * radius


def _pixel_extent_start(r: np.ndarray) -> np.ndarray:
    """Start of the radial interval ``[low, low + 1]`` that a pixel at distance ``r`` covers."""
    return np.maximum(r - 0.5, 0.0)


def _overlap(low: np.ndarray, inner: Any, outer: Any) -> npt.NDArray[np.float64]:
    """Length (0..1) of ``[low, low + 1]`` within ``[inner, outer]``.

    Written as ``min(1 - max(inner - low, 0), outer - max(low, inner))`` rather than
    ``min(low + 1, outer) - max(low, inner)`` so that a pixel wholly inside gets exactly 1.
    """
    start = np.maximum(low, inner)
    return np.clip(np.minimum(1.0 - (start - low), outer - start), 0.0, 1.0)


def _band_coverage(r: np.ndarray, inner: float, outer: float) -> npt.NDArray[np.float64]:
    """Fraction (0..1) of each pixel's radial extent that lies within ``[inner, outer]``."""
    return _overlap(_pixel_extent_start(r), inner, outer)


def polar_map(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    stretchY: float = 1.0,
    angle: float = 0.0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Map every pixel to its radius and polar angle around a centre.

    Parameters
    ----------
    centerX, centerY : float
        Origin of the polar coordinates in pixel coordinates.
    imageSizeX, imageSizeY : int
        Width and height of the image.
    stretchY : float, optional
        Elliptical distortion: distances along the direction ``angle`` are divided by
        ``stretchY``.
    angle : float, optional
        Direction of the stretch in radians; 0 is the y direction.

    Returns
    -------
    radius, phi : numpy.ndarray
        Shape ``(imageSizeY, imageSizeX)`` each; ``phi = arctan2(dy, dx)`` in ``[-pi, pi]``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import polar_map
    >>> r, phi = polar_map(1, 1, 3, 3)
    >>> r[1]
    array([1., 0., 1.])
    >>> np.degrees(phi[:, 1])
    array([-90.,   0.,  90.])
    """
    _check_finite(stretchY=stretchY, angle=angle)
    dy, dx = _offsets(centerX, centerY, imageSizeX, imageSizeY)
    dy, dx = np.broadcast_arrays(dy, dx)
    if stretchY != 1.0 or angle != 0.0:
        cos, sin = np.cos(angle), np.sin(angle)
        dy, dx = (dy * cos - dx * sin) / stretchY, dx * cos + dy * sin
    return np.hypot(dy, dx), np.arctan2(dy, dx)


def bounding_radius(centerX: float, centerY: float, imageSizeX: int, imageSizeY: int) -> int:
    """A radius around the centre that reaches past every pixel of the image (LiberTEM's).

    Examples
    --------
    >>> from ltdask.masks import bounding_radius
    >>> bounding_radius(2, 2, 5, 5)
    6
    """
    dy = max(centerY, imageSizeY - centerY)
    dx = max(centerX, imageSizeX - centerX)
    return math.ceil(math.hypot(dy, dx)) + 1
