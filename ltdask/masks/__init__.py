"""Virtual-detector mask factories with the signatures of ``libertem.masks`` (LiberTEM 0.16).

Every factory returns an array of shape ``(imageSizeY, imageSizeX)`` (a stack
``(n, imageSizeY, imageSizeX)`` for :func:`radial_bins`), ready for ``ApplyMasksUDF``.

Conventions
-----------
* Pixel ``(y, x)`` has its centre at the integer coordinates ``(y, x)``; a centre
  ``(centerX, centerY)`` may be fractional and may lie outside the image. A mask left with
  no pixel in the image (a centre farther outside than the radius, a rectangle beside the
  image) warns `ltdask.EmptyMaskWarning`: every result it gives would be 0.
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

Modules
-------
The factories live in private modules by kind and are used from here: ``_shapes``
(disk, ring, rectangle, point, ramps), ``_radial`` (radial bins and templates), ``_sparse``
(sparse stacks and conversions); ``_geometry`` holds what they share (checks, pixel
offsets, radial coverage) and `polar_map`.

Examples
--------
>>> from ltdask import masks
>>> int(masks.circular(centerX=2, centerY=2, imageSizeX=5, imageSizeY=5, radius=1).sum())
5
"""

from ltdask.masks._geometry import bounding_radius, polar_map
from ltdask.masks._radial import (
    background_subtraction,
    balance,
    radial_bins,
    radial_gradient,
    radial_gradient_background_subtraction,
)
from ltdask.masks._shapes import circular, gradient_x, gradient_y, point, rectangular, ring
from ltdask.masks._sparse import is_sparse, sparse_template_multi_stack, to_dense, to_sparse

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
