"""Synthetic 4D-STEM scans for examples, notebooks, tests and ``ltdask demo``."""

from __future__ import annotations

import numpy as np

from ltdask.runtime.progress import progress_over

__all__ = ["synthetic_scan"]


def synthetic_scan(
    nav_shape=(64, 64), sig_shape=(128, 128), seed=0, progress: bool | None = None
) -> tuple:
    """A diffraction disk whose position and intensity vary across the scan, with Poisson
    noise (uint16); returns the scan and the true disk shifts ``(y, x)`` per position.

    Drawing the noise takes about a tenth of a microsecond a pixel (2-3 minutes for a
    128 x 128 scan of 256 x 256 frames): a bar of the scan rows done shows where someone
    watches once it takes a couple of seconds (``progress=None``), from the start
    (``True``) or never (``False``), as for `ltdask.compute`.

    Examples
    --------
    >>> from ltdask.io.synthetic import synthetic_scan
    >>> scan, shifts = synthetic_scan((4, 6), (16, 16))
    >>> scan.shape, scan.dtype, shifts.shape
    ((4, 6, 16, 16), dtype('uint16'), (4, 6, 2))
    """
    rng = np.random.default_rng(seed)
    ny, nx = nav_shape
    sy, sx = sig_shape
    yy, xx = np.mgrid[:ny, :nx]
    shift_y = 3 * np.sin(2 * np.pi * xx / nx) + 1.5 * np.cos(2 * np.pi * yy / ny)
    shift_x = 3 * np.cos(2 * np.pi * yy / ny) - 1.0 * np.sin(4 * np.pi * xx / nx)
    intensity = 40 + 30 * np.exp(-((yy - ny / 2) ** 2 + (xx - nx / 2) ** 2) / (ny * nx / 10))
    dy, dx = np.mgrid[:sy, :sx]
    radius = min(sy, sx) / 8
    out = np.empty((ny, nx, sy, sx), dtype=np.uint16)
    for y in progress_over(range(ny), progress, unit="scan row"):
        d2 = (dy[None] - (sy / 2 + shift_y[y])[:, None, None]) ** 2
        d2 = d2 + (dx[None] - (sx / 2 + shift_x[y])[:, None, None]) ** 2
        disk = np.clip(radius + 0.5 - np.sqrt(d2), 0, 1)
        # diffuse scattering that grows where the disk is dimmer (a "dark field" signal)
        halo = (80 - intensity[y])[:, None, None] * 0.02 * np.exp(-d2 / (2 * (3 * radius) ** 2))
        out[y] = rng.poisson(1 + disk * intensity[y][:, None, None] + halo)
    return out, np.stack([shift_y, shift_x], axis=-1)
