"""Virtual-detector mask factories with the signatures of ``libertem.masks`` (LiberTEM 0.16).

Every factory returns an array of shape ``(imageSizeY, imageSizeX)`` (a stack
``(n, imageSizeY, imageSizeX)`` for :func:`radial_bins`), ready for ``ApplyMasksUDF``.

Conventions
-----------
* Pixel ``(y, x)`` has its centre at the integer coordinates ``(y, x)``; a centre
  ``(centerX, centerY)`` may be fractional and may lie outside the image.
* Hard-edged masks are ``bool``, as in LiberTEM: :func:`circular` keeps pixels with
  ``(x - cx)**2 + (y - cy)**2 <= radius**2`` and :func:`ring` keeps
  ``radius_inner**2 < d**2 <= radius**2`` (so ``ring(..., radius_inner=0)`` leaves out a
  pixel sitting exactly on the centre).
* Antialiased masks and :func:`radial_bins` are ``float64`` by default. A pixel at distance
  ``r`` from the centre is given the radial extent ``[r - 1/2, r + 1/2]`` (moved to
  ``[0, 1]`` when ``r < 1/2``), and its value for the radial band ``[a, b]`` is the length of
  the overlap of the two intervals: LiberTEM's linear edge ramp
  ``clip(min(r - a, b - r) + 1/2, 0, 1)`` wherever the band is at least one pixel wide.
* :func:`radial_bins` is LiberTEM's: bin ``i`` is the ramp
  ``clip(w/2 + 1/2 - |r - r0_i|, 0, 1)`` around its centre ``r0_i`` (so bins narrower than a
  pixel overlap), and when ``radius_inner < 1/2`` the centre pixel (rounded half to even) of
  the first bin is set to ``1 - radius_inner`` (after ``normalize``). Bins at least a pixel
  wide add up to the antialiased ring away from the centre.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse
import sparse

__all__ = [
    "background_subtraction",
    "balance",
    "bounding_radius",
    "radial_gradient",
    "radial_gradient_background_subtraction",
    "circular",
    "gradient_x",
    "gradient_y",
    "is_sparse",
    "point",
    "polar_map",
    "radial_bins",
    "rectangular",
    "ring",
    "sparse_template_multi_stack",
    "to_dense",
    "to_sparse",
]

# LiberTEM's radial_bins(use_sparse=None) picks sparse output when the outermost bin covers
# less than this fraction of the image.
_SPARSE_AREA_FRACTION = 0.1


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

    Examples
    --------
    >>> circular(2, 2, 5, 5, radius=1).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    >>> circular(2, 2, 5, 5, radius=1, antialiased=True)[2]
    array([0. , 0.5, 1. , 0.5, 0. ])
    """
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

    Examples
    --------
    >>> ring(2, 2, 5, 5, radius=1, radius_inner=0.5).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 1, 0, 1, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    """
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

    Examples
    --------
    >>> rectangular(1, 0, 2, 1, imageSizeX=5, imageSizeY=3).astype(int)
    array([[0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 0, 0, 0]])
    """
    _check_finite(X=X, Y=Y, Width=Width, Height=Height)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    mask = np.zeros((sy, sx), dtype=bool)
    if Width == 0 or Height == 0:
        return mask
    xmin, xmax = sorted((int(X), int(X + Width)))
    ymin, ymax = sorted((int(Y), int(Y + Height)))
    mask[max(0, ymin) : max(0, min(ymax + 1, sy)), max(0, xmin) : max(0, min(xmax + 1, sx))] = True
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
    >>> gradient_y(3, 2)
    array([[0., 0., 0.],
           [1., 1., 1.]], dtype=float32)
    """
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    return np.broadcast_to(np.arange(sy, dtype=dtype)[:, np.newaxis], (sy, sx)).copy()


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
    >>> bounding_radius(2, 2, 5, 5)
    6
    """
    dy = max(centerY, imageSizeY - centerY)
    dx = max(centerX, imageSizeX - centerX)
    return math.ceil(math.hypot(dy, dx)) + 1


def radial_gradient(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius: float,
    antialiased: bool = False,
) -> np.ndarray:
    """A disk whose value rises linearly from 0 at the centre to 1 at `radius` (LiberTEM's).

    Without `antialiased`, pixels with ``d² <= radius²`` hold ``d / radius``, the others 0;
    with it, :func:`radial_gradient_background_subtraction` with ``r_outer=0`` (a ramp from 1
    to 0 over the last pixel).

    Examples
    --------
    >>> radial_gradient(2, 2, 5, 5, radius=2)[2].tolist()
    [1.0, 0.5, 0.0, 0.5, 1.0]
    """
    _check_finite(centerX=centerX, centerY=centerY)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    dy, dx = _offsets(centerX, centerY, sx, sy)
    d = np.hypot(dy, dx)
    if antialiased:
        return radial_gradient_background_subtraction(d, radius, 0)
    return np.where(dy**2 + dx**2 <= radius * radius, d / radius, 0.0)


def radial_gradient_background_subtraction(
    r: np.ndarray, r0: float, r_outer: float, delta: float = 1
) -> np.ndarray:
    """A template from a map of radii `r` (LiberTEM's): ``r / r0`` inside ``r0 - delta/2``,
    a linear transition from 1 to -1 over ``[r0 - delta/2, r0 + delta/2)``, and -1 in the
    ring ``[r0 + delta/2, r_outer]``; 0 elsewhere. `r` may come from a distorted
    :func:`polar_map`.

    Examples
    --------
    >>> radial_gradient_background_subtraction(np.arange(6.0), r0=2, r_outer=4).tolist()
    [0.0, 0.5, 0.0, -1.0, -1.0, 0.0]
    """
    r = np.asarray(r)
    result = np.zeros_like(r, dtype=np.result_type(r, np.float64))
    half = delta / 2
    within = r < r0 - half
    result[within] = r[within] / r0
    transition = (r >= r0 - half) & (r < r0 + half)
    result[transition] = (r0 - r[transition]) / half
    result[(r >= r0 + half) & (r <= r_outer)] = -1
    return result


def background_subtraction(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius: float,
    radius_inner: float,
    antialiased: bool = False,
) -> np.ndarray:
    """A disk of `radius_inner` minus the ring out to `radius`, scaled so that the two
    weigh the same (LiberTEM's): the result of a uniform background is 0.

    Examples
    --------
    >>> m = background_subtraction(5, 5, 11, 11, radius=4, radius_inner=2)
    >>> round(float(m.sum()), 12)
    0.0
    """
    disk = circular(centerX, centerY, imageSizeX, imageSizeY, radius_inner, antialiased)
    outer = ring(centerX, centerY, imageSizeX, imageSizeY, radius, radius_inner, antialiased)
    return disk - outer * (np.sum(disk) / np.sum(outer))


def balance(template: np.ndarray) -> np.ndarray:
    """`template` with its negative part scaled so that the whole sums to zero (LiberTEM's):
    such a mask gives 0 on a uniform background or a linear gradient.

    Examples
    --------
    >>> balance(np.array([1.0, 1.0, -1.0])).tolist()
    [1.0, 1.0, -2.0]
    """
    result = np.array(template, dtype=np.result_type(template, np.float64), copy=True)
    above, below = template > 0, template < 0
    result[below] *= -template[above].sum() / template[below].sum()
    return result


def radial_bins(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius: float | None = None,
    radius_inner: float = 0,
    n_bins: int | None = None,
    normalize: bool = False,
    use_sparse: bool | None = None,
    dtype: npt.DTypeLike | None = None,
) -> np.ndarray | sparse.COO:
    """Make a stack of antialiased concentric rings of equal width.

    The interval ``[radius_inner, radius]`` is cut into ``n_bins`` bins of equal width
    ``w``; bin ``i`` is LiberTEM's ramp ``clip(w/2 + 1/2 - |r - r0_i|, 0, 1)`` around its
    centre ``r0_i`` (see the module docstring). Bins at least a pixel wide add up to
    ``ring(..., antialiased=True)`` away from the centre pixel, which LiberTEM sets to
    ``1 - radius_inner`` in the first bin.

    Parameters
    ----------
    centerX, centerY : float
        Centre of the rings in pixel coordinates.
    imageSizeX, imageSizeY : int
        Width and height of the image.
    radius : float, optional
        Outer radius; by default one that reaches past the farthest pixel.
    radius_inner : float, optional
        Inner radius, ``0 <= radius_inner <= radius``.
    n_bins : int, optional
        Number of bins, by default ``round(radius - radius_inner)`` (at least 1) so that
        bins are about one pixel wide.
    normalize : bool, optional
        Scale every bin that is not empty to a sum of 1.
    use_sparse : bool, optional
        Return a ``sparse.COO``; by default when the outermost bin covers less than a tenth
        of the image, as LiberTEM decides.
    dtype : numpy dtype, optional
        Data type of the values, ``float64`` by default.

    Returns
    -------
    numpy.ndarray or sparse.COO
        Shape ``(n_bins, imageSizeY, imageSizeX)``.

    Raises
    ------
    ValueError
        If a radius is negative, ``radius_inner > radius`` or ``n_bins < 1``.

    Examples
    --------
    >>> bins = radial_bins(2, 2, 5, 5, radius=2, n_bins=2, use_sparse=False)
    >>> bins.shape
    (2, 5, 5)
    >>> bins[:, 2]
    array([[0. , 0.5, 1. , 0.5, 0. ],
           [0.5, 0.5, 0. , 0.5, 0.5]])
    >>> np.array_equal(bins.sum(axis=0), circular(2, 2, 5, 5, radius=2, antialiased=True))
    True
    """
    _check_finite(centerX=centerX, centerY=centerY)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    if radius is None:
        radius = bounding_radius(centerX, centerY, sx, sy)
    _check_radii(radius, radius_inner, infinite=False)
    if n_bins is None:
        n_bins = max(1, round(radius - radius_inner))
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    n_bins = int(n_bins)
    width = (radius - radius_inner) / n_bins
    if use_sparse is None:
        outer_bin_area = np.pi * (radius**2 - (radius - width) ** 2)
        use_sparse = bool(outer_bin_area / (sx * sy) < _SPARSE_AREA_FRACTION)
    out_dtype = np.dtype(np.float64 if dtype is None else dtype)

    bin_index, pixel_index, values = _radial_bin_entries(
        centerX, centerY, sx, sy, radius_inner, radius, n_bins
    )
    if normalize:
        sums = np.bincount(bin_index, weights=values, minlength=n_bins)
        safe = np.where(np.isclose(sums, 0), 1.0, sums)
        values = values / safe[bin_index]
    # LiberTEM patches the centre pixel (rounded half to even) of the first bin to
    # 1 - radius_inner when radius_inner < 0.5, after normalising
    centre = (int(np.round(centerY)), int(np.round(centerX)))
    if radius_inner < 0.5 and 0 <= centre[0] < sy and 0 <= centre[1] < sx:
        flat = centre[0] * sx + centre[1]
        at = (bin_index == 0) & (pixel_index == flat)
        bin_index = np.append(bin_index[~at], 0)
        pixel_index = np.append(pixel_index[~at], flat)
        values = np.append(values[~at], 1.0 - radius_inner)
    if use_sparse:
        coords = np.stack((bin_index, *np.unravel_index(pixel_index, (sy, sx))))
        return sparse.COO(
            coords, values.astype(out_dtype), shape=(n_bins, sy, sx), has_duplicates=False
        )
    stack = np.zeros((n_bins, sy * sx), dtype=out_dtype)
    stack[bin_index, pixel_index] = values
    return stack.reshape((n_bins, sy, sx))


def _radial_bin_entries(
    centerX: float,
    centerY: float,
    imageSizeX: int,
    imageSizeY: int,
    radius_inner: float,
    radius: float,
    n_bins: int,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Non-zero ``(bin, flat pixel, coverage)`` triples of :func:`radial_bins`.

    Only the few bins each pixel's unit radial extent can touch are visited, so the work
    grows with the number of non-zero values rather than ``n_bins * pixels``.
    """
    empty = np.zeros(0, dtype=np.intp)
    if radius == radius_inner:
        return empty, empty, np.zeros(0)
    dy, dx = _offsets(centerX, centerY, imageSizeX, imageSizeY)
    r = np.hypot(dy, dx).ravel()
    low = _pixel_extent_start(r)
    pixels = np.flatnonzero(_overlap(low, radius_inner, radius) > 0)
    low = low[pixels]
    r = r[pixels]

    edges = np.linspace(radius_inner, radius, n_bins + 1)
    width = (radius - radius_inner) / n_bins
    # one bin of slack on each side guards against rounding; empty overlaps are dropped below
    first = np.floor((np.maximum(low, radius_inner) - radius_inner) / width).astype(np.intp)
    last = np.floor((np.minimum(low + 1.0, radius) - radius_inner) / width).astype(np.intp)
    first = np.clip(first - 1, 0, n_bins - 1)
    last = np.clip(last + 1, 0, n_bins - 1)
    counts = last - first + 1
    pixel_of_entry = np.repeat(np.arange(len(pixels)), counts)
    starts = np.cumsum(counts) - counts
    bin_index = first[pixel_of_entry] + np.arange(counts.sum()) - starts[pixel_of_entry]
    # LiberTEM's ramp around each bin's centre r0: clip(w/2 + 1/2 - |r - r0|, 0, 1); for
    # bins at least a pixel wide this is the overlap of [r - 1/2, r + 1/2] with the bin
    centres = edges[bin_index] + width / 2
    value = np.clip(width / 2 + 0.5 - np.abs(r[pixel_of_entry] - centres), 0.0, 1.0)
    keep = value > 0
    return bin_index[keep], pixels[pixel_of_entry[keep]], value[keep]


def sparse_template_multi_stack(
    mask_index: Sequence[int] | npt.ArrayLike,
    offsetX: Sequence[int] | npt.ArrayLike,
    offsetY: Sequence[int] | npt.ArrayLike,
    template: npt.ArrayLike,
    imageSizeX: int,
    imageSizeY: int,
) -> sparse.COO:
    """Stamp a template into a sparse stack of masks at given offsets.

    Copy ``i`` of ``template`` is placed in mask ``mask_index[i]`` with its top-left corner
    at ``(offsetY[i], offsetX[i])``; whatever falls outside the image is clipped away, and
    copies stamped into the same mask add up.

    Parameters
    ----------
    mask_index : sequence of int
        Index of the mask each copy goes to.
    offsetX, offsetY : sequence of int
        Column and row of each copy's top-left corner; may be negative.
    template : array_like
        2D template.
    imageSizeX, imageSizeY : int
        Width and height of the image.

    Returns
    -------
    sparse.COO
        Shape ``(max(mask_index) + 1, imageSizeY, imageSizeX)``, dtype of ``template``.

    Raises
    ------
    ValueError
        If the index and offset sequences differ in length or are empty, or the template
        is not 2D.

    Examples
    --------
    >>> stack = sparse_template_multi_stack([0, 1], [0, 2], [0, 1], np.ones((2, 2)), 4, 3)
    >>> stack.todense().astype(int)
    array([[[1, 1, 0, 0],
            [1, 1, 0, 0],
            [0, 0, 0, 0]],
    <BLANKLINE>
           [[0, 0, 0, 0],
            [0, 0, 1, 1],
            [0, 0, 1, 1]]])
    """
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    template = np.asarray(template)
    if template.ndim != 2:
        raise ValueError(f"template must be 2D, got shape {template.shape}")
    index = np.asarray(mask_index, dtype=np.intp).ravel()
    ox = np.asarray(offsetX, dtype=np.intp).ravel()
    oy = np.asarray(offsetY, dtype=np.intp).ravel()
    if not (len(index) == len(ox) == len(oy)) or len(index) == 0:
        raise ValueError(
            "mask_index, offsetX and offsetY must be non-empty and of equal length, got "
            f"lengths {len(index)}, {len(ox)} and {len(oy)}"
        )
    if index.min() < 0:
        raise ValueError(f"mask_index must be >= 0, got {index.min()}")
    ty, tx = np.indices(template.shape).reshape(2, -1)
    ys = oy[:, np.newaxis] + ty
    xs = ox[:, np.newaxis] + tx
    masks = np.broadcast_to(index[:, np.newaxis], ys.shape)
    data = np.broadcast_to(template.ravel(), ys.shape)
    inside = (ys >= 0) & (ys < sy) & (xs >= 0) & (xs < sx)
    return sparse.COO(
        np.stack((masks[inside], ys[inside], xs[inside])),
        data[inside],
        shape=(int(index.max()) + 1, sy, sx),
    )


def is_sparse(a: Any) -> bool:
    """Tell whether ``a`` is a pydata ``sparse`` array or a ``scipy.sparse`` matrix/array.

    Examples
    --------
    >>> is_sparse(np.eye(2)), is_sparse(to_sparse(np.eye(2)))
    (False, True)
    """
    return isinstance(a, sparse.SparseArray) or scipy.sparse.issparse(a)


def to_dense(a: Any) -> np.ndarray:
    """Convert a sparse (pydata or scipy) or array-like mask to a dense ``numpy.ndarray``.

    Examples
    --------
    >>> to_dense(to_sparse(np.eye(2)))
    array([[1., 0.],
           [0., 1.]])
    """
    if isinstance(a, sparse.SparseArray):
        return a.todense()
    if scipy.sparse.issparse(a):
        return a.toarray()
    return np.asarray(a)


def to_sparse(a: Any) -> sparse.COO:
    """Convert a dense, scipy.sparse or pydata sparse mask to a ``sparse.COO``.

    Examples
    --------
    >>> to_sparse(np.eye(3)).nnz
    3
    """
    if isinstance(a, sparse.COO):
        return a
    if isinstance(a, sparse.SparseArray):
        return sparse.COO(a)
    if scipy.sparse.issparse(a):
        return sparse.COO.from_scipy_sparse(a)
    return sparse.COO.from_numpy(np.asarray(a))
