"""The edge of a disk: its centre where a shadow or the frame cuts it, and its radius from
the radial profile."""

from __future__ import annotations

import math

import numpy as np

from ltdask.beam._constants import _BIN, _RAYS, _ROUNDS


def _balanced(image, cy, cx, reach, background, hidden) -> tuple[float, float, bool]:
    """The centre of mass of a disk partly `hidden` (a beam stop's shadow) or cut by the
    frame's edge: over the pixels within reach of the centre whose mirror image through it
    is seen too, so that what is lost on one side is left out on the other; iterated.
    Where nothing within `reach` is hidden or off the frame, ``(cy, cx)`` as it is; and
    whether something was."""
    sy, sx = image.shape
    cut = False
    for _ in range(_ROUNDS):
        y0, y1 = math.floor(cy - reach), math.ceil(cy + reach) + 1
        x0, x1 = math.floor(cx - reach), math.ceil(cx + reach) + 1
        yy, xx = np.mgrid[y0:y1, x0:x1]
        near = np.hypot(yy - cy, xx - cx) <= reach
        yy, xx = yy[near], xx[near]
        my, mx = np.rint(2 * cy - yy).astype(np.int64), np.rint(2 * cx - xx).astype(np.int64)

        def seen(y, x):
            ok = (y >= 0) & (y < sy) & (x >= 0) & (x < sx)
            ok[ok] = ~hidden[y[ok], x[ok]]
            return ok

        both = seen(yy, xx) & seen(my, mx)
        if both.all():
            break
        cut = True
        weights = np.clip(image[yy[both], xx[both]] - background, 0, None)
        total = weights.sum()
        if not total > 0:
            break
        new = float(yy[both] @ weights / total), float(xx[both] @ weights / total)
        moved = math.hypot(new[0] - cy, new[1] - cx)
        cy, cx = new
        if moved < 0.01:
            break
    return cy, cx, cut


def _fit_edge(image, cy, cx, reach, level, hidden) -> tuple[float, float] | None:
    """The centre of the circle through the disk's edge: where rays from ``(cy, cx)``
    last fall below `level` (linear between samples a quarter pixel apart, on the image
    smoothed), leaving out those points next to a `hidden` pixel or off the frame, by
    least squares without the points far off the circle; None where fewer than a third
    of the rays remain."""
    from scipy import ndimage

    sy, sx = image.shape
    angles = np.linspace(0, 2 * np.pi, _RAYS, endpoint=False)
    t = np.arange(0, reach + 2, 0.25)
    ys = cy + np.sin(angles)[:, None] * t
    xs = cx + np.cos(angles)[:, None] * t
    # smoothed, so that the counting noise inside the disk does not end rays early (a
    # circle's edge stays where it is but for a curvature term of sigma² / 2r)
    smooth = ndimage.gaussian_filter(image, 1.0, mode="nearest")
    values = ndimage.map_coordinates(smooth, [ys.ravel(), xs.ravel()], order=1, mode="nearest")
    values = values.reshape(ys.shape)
    # an edge point is where a ray last falls below the level (a ray may cross a shadow
    # on its way), unless that is next to a hidden pixel (which the smoothing spreads) or
    # off the frame: there the shadow or the frame's edge cut the disk
    blocked = ndimage.binary_dilation(hidden, iterations=3)
    iy, ix = np.rint(ys).astype(np.int64), np.rint(xs).astype(np.int64)
    off = (iy < 0) | (iy >= sy) | (ix < 0) | (ix >= sx)
    off[~off] = blocked[iy[~off], ix[~off]]
    above = (values >= level) & ~((iy < 0) | (iy >= sy) | (ix < 0) | (ix >= sx))
    last = len(t) - 1 - above[:, ::-1].argmax(axis=1)
    rows = np.arange(_RAYS)
    good = above.any(axis=1) & (last < len(t) - 1)
    good[good] &= ~off[rows[good], last[good]] & ~off[rows[good], last[good] + 1]
    if good.sum() < _RAYS // 3:
        return None
    rows, k = rows[good], last[good] + 1
    v0, v1 = values[rows, k - 1], values[rows, k]
    at = t[k - 1] + 0.25 * (v0 - level) / (v0 - v1)
    py, px = cy + np.sin(angles[rows]) * at, cx + np.cos(angles[rows]) * at
    keep = np.ones(len(py), dtype=bool)
    for _ in range(3):
        # the circle (y - a)² + (x - b)² = r², linear in a, b and r² - a² - b²
        design = np.column_stack([2 * py[keep], 2 * px[keep], np.ones(int(keep.sum()))])
        (fy, fx, c), *_ = np.linalg.lstsq(design, py[keep] ** 2 + px[keep] ** 2, rcond=None)
        residual = np.hypot(py - fy, px - fx) - math.sqrt(max(c + fy * fy + fx * fx, 0.0))
        spread = 1.4826 * float(np.median(np.abs(residual[keep])))
        keep = np.abs(residual) < max(3 * spread, 0.5)  # noise that ended a ray early
        if keep.sum() < _RAYS // 3:
            return None
    if not math.hypot(fy - cy, fx - cx) < reach:
        return None
    return float(fy), float(fx)


def _edge(frames, centres: np.ndarray, background: float, reach: float, inner: float, hidden):
    """``(radius, width)`` of the disk's edge in the azimuthal mean of `frames` around their
    `centres` (out to `reach` px, leaving out `hidden` pixels): where it first falls below
    half way from its plateau (its mean within `inner` px) to `background`, and how far it
    takes to fall from 3/4 to 1/4 of the way; NaN where it does not fall."""
    nbins = int(reach / _BIN) + 2
    sums = np.zeros(nbins)
    counts = np.zeros(nbins)
    distances = np.zeros(nbins)
    for frame, (cy, cx) in zip(frames, centres, strict=True):
        if not (np.isfinite(cy) and np.isfinite(cx)):
            continue
        sy, sx = frame.shape
        y0, y1 = max(int(cy - reach), 0), min(int(cy + reach) + 2, sy)
        x0, x1 = max(int(cx - reach), 0), min(int(cx + reach) + 2, sx)
        yy, xx = np.mgrid[y0:y1, x0:x1]
        d = np.hypot(yy - cy, xx - cx).ravel()
        inside = (d < reach) & ~hidden[y0:y1, x0:x1].ravel()
        d = d[inside]
        index = (d / _BIN).astype(np.int64)
        sums += np.bincount(index, frame[y0:y1, x0:x1].ravel()[inside], nbins)
        counts += np.bincount(index, None, nbins)
        distances += np.bincount(index, d, nbins)
    filled = counts > 0
    if not filled.any():
        return math.nan, math.nan
    profile = sums[filled] / counts[filled]
    d = distances[filled] / counts[filled]
    plateau = float(profile[: max(1, int(np.searchsorted(d, inner)))].mean())

    def crossing(fraction: float) -> float:
        level = background + fraction * (plateau - background)
        below = np.flatnonzero(profile < level)
        if below.size == 0 or below[0] == 0:
            return math.nan
        k = below[0]
        # linear between the last bin above the level and the first below
        step = (profile[k - 1] - level) / (profile[k - 1] - profile[k])
        return float(d[k - 1] + step * (d[k] - d[k - 1]))

    return crossing(0.5), crossing(0.25) - crossing(0.75)
