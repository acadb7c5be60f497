"""Masks of simple shapes: disks, rings, rectangles, a point, and coordinate ramps."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ltdask.masks._geometry import (
    _args,
    _band_coverage,
    _check_finite,
    _check_image_size,
    _check_radii,
    _disk,
    _offsets,
    _warn_if_empty,
)

#: what to change when a disk or ring has no pixel in the frame
_MOVE_CENTRE = (
    "move the centre (centerX, centerY) to within the radius of the frame, or make the radius "
    "larger"
)
#: a ring around a centre in the frame, too thin to hold a pixel centre
_WIDEN_RING = "no pixel centre lies between the radii: make radius_inner smaller or radius larger"


def circular(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius: float,
    antialiased: bool = False,
) -> npt.NDArray[np.bool_] | npt.NDArray[np.float64]:
    """Make a disk-shaped mask.

    Parameters
    ----------
    centerX, centerY : float
        Centre of the disk in pixel coordinates; may be fractional or outside the image.
    imageSizeX, imageSizeY : int
        Width and height of the image.
    radius : float
        Radius of the disk in pixels, ``>= 0``.
    antialiased : bool, optional
        Give edge pixels their fractional coverage instead of a hard edge.

    Returns
    -------
    numpy.ndarray
        Shape ``(imageSizeY, imageSizeX)``: ``bool``, True where
        ``(x - centerX)**2 + (y - centerY)**2 <= radius**2``; ``float64`` in ``[0, 1]`` if
        ``antialiased``: 1 where ``1/2 <= r <= radius - 1/2``, 0 where ``r >= radius + 1/2``,
        ``radius + 1/2 - r`` in between, and ``min(radius, 1)`` on a pixel with ``r < 1/2``.

    Raises
    ------
    ValueError
        If ``radius`` is negative, a size is not a positive integer or the centre is not finite.

    Warns
    -----
    ltdask.EmptyMaskWarning
        If the disk holds no pixel of the image (a centre farther outside than the radius).

    Examples
    --------
    >>> from ltdask.masks import circular
    >>> circular(2, 2, 5, 5, radius=1).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    >>> circular(2, 2, 5, 5, radius=1, antialiased=True)[2]
    array([0. , 0.5, 1. , 0.5, 0. ])
    """
    mask = _circular(centerX, centerY, imageSizeX, imageSizeY, radius, antialiased)
    call = f"circular({_args(centerX=centerX, centerY=centerY, radius=radius)})"
    _warn_if_empty(mask, call, imageSizeX, imageSizeY, _MOVE_CENTRE)
    return mask


def _circular(centerX, centerY, imageSizeX, imageSizeY, radius, antialiased):
    _check_radii(radius)
    if antialiased:
        dy, dx = _offsets(centerX, centerY, imageSizeX, imageSizeY)
        return _band_coverage(np.hypot(dy, dx), 0.0, radius)
    return _disk(centerX, centerY, imageSizeX, imageSizeY, radius)


def ring(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius: float,
    radius_inner: float,
    antialiased: bool = False,
) -> npt.NDArray[np.bool_] | npt.NDArray[np.float64]:
    """Make an annular (ring-shaped) mask.

    Parameters
    ----------
    centerX, centerY : float
        Centre of the ring in pixel coordinates; may be fractional or outside the image.
    imageSizeX, imageSizeY : int
        Width and height of the image.
    radius : float
        Outer radius in pixels.
    radius_inner : float
        Inner radius in pixels, ``0 <= radius_inner <= radius``.
    antialiased : bool, optional
        Give edge pixels their fractional coverage instead of hard edges.

    Returns
    -------
    numpy.ndarray
        Shape ``(imageSizeY, imageSizeX)``: ``bool``, True where
        ``radius_inner**2 < d**2 <= radius**2`` (empty if the radii are equal); ``float64``
        in ``[0, 1]`` if ``antialiased``.

    Raises
    ------
    ValueError
        If a radius is negative or ``radius_inner > radius``.

    Warns
    -----
    ltdask.EmptyMaskWarning
        If the ring holds no pixel of the image (a centre farther outside than the outer
        radius, radii too close to hold a pixel centre).

    Examples
    --------
    >>> from ltdask.masks import ring
    >>> ring(2, 2, 5, 5, radius=1, radius_inner=0.5).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 1, 0, 1, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    """
    mask = _ring(centerX, centerY, imageSizeX, imageSizeY, radius, radius_inner, antialiased)
    args = _args(centerX=centerX, centerY=centerY, radius=radius, radius_inner=radius_inner)
    inside = 0 <= centerX <= imageSizeX - 1 and 0 <= centerY <= imageSizeY - 1
    fix = _WIDEN_RING if inside else _MOVE_CENTRE
    _warn_if_empty(mask, f"ring({args})", imageSizeX, imageSizeY, fix)
    return mask


def _ring(centerX, centerY, imageSizeX, imageSizeY, radius, radius_inner, antialiased):
    _check_radii(radius, radius_inner)
    if antialiased:
        dy, dx = _offsets(centerX, centerY, imageSizeX, imageSizeY)
        return _band_coverage(np.hypot(dy, dx), radius_inner, radius)
    outer = _disk(centerX, centerY, imageSizeX, imageSizeY, radius)
    inner = _disk(centerX, centerY, imageSizeX, imageSizeY, radius_inner)
    return outer & ~inner


def rectangular(
    X: float, Y: float, Width: float, Height: float, imageSizeX: int, imageSizeY: int
) -> npt.NDArray[np.bool_]:
    """Make a rectangular mask.

    As in LiberTEM, the rectangle spans the pixel rows ``int(Y)`` to ``int(Y + Height)`` and
    columns ``int(X)`` to ``int(X + Width)``, *both ends included*, so it holds
    ``(|Width| + 1) * (|Height| + 1)`` pixels before clipping to the image; negative
    ``Width`` or ``Height`` extend the rectangle to the left or up, and a zero ``Width`` or
    ``Height`` gives an empty mask.

    Parameters
    ----------
    X, Y : float
        Corner of the rectangle in pixel coordinates.
    Width, Height : float
        Extent from the corner in pixels; may be negative.
    imageSizeX, imageSizeY : int
        Width and height of the image.

    Returns
    -------
    numpy.ndarray of bool
        Shape ``(imageSizeY, imageSizeX)``.

    Warns
    -----
    ltdask.EmptyMaskWarning
        If the rectangle holds no pixel of the image (it lies beside the image, or
        ``Width`` or ``Height`` is 0).

    Examples
    --------
    >>> from ltdask.masks import rectangular
    >>> rectangular(1, 0, 2, 1, imageSizeX=5, imageSizeY=3).astype(int)
    array([[0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 0, 0, 0]])
    """
    _check_finite(X=X, Y=Y, Width=Width, Height=Height)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    mask = np.zeros((sy, sx), dtype=bool)
    if Width != 0 and Height != 0:
        xmin, xmax = sorted((int(X), int(X + Width)))
        ymin, ymax = sorted((int(Y), int(Y + Height)))
        ys = slice(max(0, ymin), max(0, min(ymax + 1, sy)))
        mask[ys, max(0, xmin) : max(0, min(xmax + 1, sx))] = True
    _warn_if_empty(
        mask,
        f"rectangular({_args(X=X, Y=Y, Width=Width, Height=Height)})",
        sx,
        sy,
        "move the corner (X, Y) so that the rectangle overlaps the frame, and give it a "
        "Width and Height other than 0",
    )
    return mask


def point(imageSizeX: int, imageSizeY: int, cx: float, cy: float) -> npt.NDArray[np.bool_]:
    """Make a mask that selects the single pixel ``(floor(cy), floor(cx))``.

    ``libertem.masks`` has no point mask; this matches the mask of LiberTEM's point analysis
    (parameters ``cx``, ``cy``; coordinates truncated to integers), returned dense like
    the other factories (use :func:`to_sparse` for a sparse one).

    Parameters
    ----------
    imageSizeX, imageSizeY : int
        Width and height of the image.
    cx, cy : float
        Coordinates of the pixel.

    Returns
    -------
    numpy.ndarray of bool
        Shape ``(imageSizeY, imageSizeX)`` with exactly one True pixel.

    Raises
    ------
    ValueError
        If the point lies outside the image.

    Examples
    --------
    >>> from ltdask.masks import point
    >>> point(4, 2, cx=2, cy=1).astype(int)
    array([[0, 0, 0, 0],
           [0, 0, 1, 0]])
    """
    _check_finite(cx=cx, cy=cy)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    x, y = math.floor(cx), math.floor(cy)
    if not (0 <= x < sx and 0 <= y < sy):
        raise ValueError(
            f"point (cx={cx!r}, cy={cy!r}) lies outside the image of "
            f"{sx} x {sy} pixels; expected 0 <= cx < {sx} and 0 <= cy < {sy}"
        )
    mask = np.zeros((sy, sx), dtype=bool)
    mask[y, x] = True
    return mask


def gradient_x(imageSizeX: int, imageSizeY: int, dtype: npt.DTypeLike = np.float32) -> np.ndarray:
    """Make a mask whose value is the pixel's x coordinate (column index).

    Parameters
    ----------
    imageSizeX, imageSizeY : int
        Width and height of the image.
    dtype : numpy dtype, optional
        Data type of the result, ``float32`` by default as in LiberTEM.

    Returns
    -------
    numpy.ndarray
        Shape ``(imageSizeY, imageSizeX)``.

    Examples
    --------
    >>> from ltdask.masks import gradient_x
    >>> gradient_x(3, 2)
    array([[0., 1., 2.],
           [0., 1., 2.]], dtype=float32)
    """
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    return np.broadcast_to(np.arange(sx, dtype=dtype), (sy, sx)).copy()


def gradient_y(imageSizeX: int, imageSizeY: int, dtype: npt.DTypeLike = np.float32) -> np.ndarray:
    """Make a mask whose value is the pixel's y coordinate (row index).

    Parameters
    ----------
    imageSizeX, imageSizeY : int
        Width and height of the image.
    dtype : numpy dtype, optional
        Data type of the result, ``float32`` by default as in LiberTEM.

    Returns
    -------
    numpy.ndarray
        Shape ``(imageSizeY, imageSizeX)``.

    Examples
    --------
    >>> from ltdask.masks import gradient_y
    >>> gradient_y(3, 2)
    array([[0., 0., 0.],
           [1., 1., 1.]], dtype=float32)
    """
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    return np.broadcast_to(np.arange(sy, dtype=dtype)[:, np.newaxis], (sy, sx)).copy()
