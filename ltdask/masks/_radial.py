"""Radial masks: stacks of concentric rings (`radial_bins`), radial ramps and templates
with a background ring, and `balance` (a template that sums to zero)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import sparse

from ltdask.masks._geometry import (
    _args,
    _check_finite,
    _check_image_size,
    _check_radii,
    _offsets,
    _overlap,
    _pixel_extent_start,
    _warn_if_empty,
    bounding_radius,
)
from ltdask.masks._shapes import _MOVE_CENTRE, _circular, _ring

# LiberTEM's radial_bins(use_sparse=None) picks sparse output when the outermost bin covers
# less than this fraction of the image.
_SPARSE_AREA_FRACTION = 0.1


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
    to 0 over the last pixel). An all-zero result warns (`ltdask.EmptyMaskWarning`).

    Examples
    --------
    >>> from ltdask.masks import radial_gradient
    >>> radial_gradient(2, 2, 5, 5, radius=2)[2].tolist()
    [1.0, 0.5, 0.0, 0.5, 1.0]
    """
    _check_finite(centerX=centerX, centerY=centerY)
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    dy, dx = _offsets(centerX, centerY, sx, sy)
    d = np.hypot(dy, dx)
    if antialiased:
        mask = radial_gradient_background_subtraction(d, radius, 0)
    else:
        mask = np.where(dy**2 + dx**2 <= radius * radius, d / radius, 0.0)
    call = f"radial_gradient({_args(centerX=centerX, centerY=centerY, radius=radius)})"
    _warn_if_empty(mask, call, sx, sy, _MOVE_CENTRE)
    return mask


def radial_gradient_background_subtraction(
    r: np.ndarray, r0: float, r_outer: float, delta: float = 1
) -> np.ndarray:
    """A template from a map of radii `r` (LiberTEM's): ``r / r0`` inside ``r0 - delta/2``,
    a linear transition from 1 to -1 over ``[r0 - delta/2, r0 + delta/2)``, and -1 in the
    ring ``[r0 + delta/2, r_outer]``; 0 elsewhere. `r` may come from a distorted
    :func:`polar_map`.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import radial_gradient_background_subtraction
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
    weigh the same (LiberTEM's): the result of a uniform background is 0. A disk or ring
    without a pixel in the image warns (`ltdask.EmptyMaskWarning`).

    Examples
    --------
    >>> from ltdask.masks import background_subtraction
    >>> m = background_subtraction(5, 5, 11, 11, radius=4, radius_inner=2)
    >>> round(float(m.sum()), 12)
    0.0
    """
    disk = _circular(centerX, centerY, imageSizeX, imageSizeY, radius_inner, antialiased)
    outer = _ring(centerX, centerY, imageSizeX, imageSizeY, radius, radius_inner, antialiased)
    args = _args(centerX=centerX, centerY=centerY, radius=radius, radius_inner=radius_inner)
    for part, mask, effect in (
        ("disk", disk, "the template is 0 everywhere"),
        ("ring", outer, "the template is NaN (scaled by the disk's sum over the ring's, 0)"),
    ):
        call = f"background_subtraction({args})'s {part}"
        _warn_if_empty(mask, call, imageSizeX, imageSizeY, _MOVE_CENTRE, effect)
    return disk - outer * np.divide(np.sum(disk), np.sum(outer))


def balance(template: np.ndarray) -> np.ndarray:
    """`template` with its negative part scaled so that the whole sums to zero (LiberTEM's):
    such a mask gives 0 on a uniform background or a linear gradient.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import balance
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

    Warns
    -----
    ltdask.EmptyMaskWarning
        If no bin holds a pixel of the image (single bins may be empty: those beyond the
        farthest pixel, as the default `radius` makes the last one).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import circular, radial_bins
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
    if not np.any(values):
        args = _args(centerX=centerX, centerY=centerY, radius=radius, radius_inner=radius_inner)
        _warn_if_empty(values, f"radial_bins({args})", sx, sy, _MOVE_CENTRE)
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
