"""Pictures of analysis results: LiberTEM's scaled colour-mapped images, numpy-first.

`scaled_image` gives what LiberTEM's ``visualize_simple`` gives (its robust auto-range,
matplotlib's ``gist_earth`` by default). matplotlib is imported only when a picture is made;
without it the picture is a grey ramp of the same scaling. `vector_image` is the numpy-only
colour wheel of :func:`ltdask.plot.field_colours` (hue: direction, brightness: length);
LiberTEM's wheel needs colorcet and scikit-image, so its colours differ.
"""

from __future__ import annotations

import math

import numpy as np

from ltdask.views.plot import field_colours

__all__ = ["scaled_image", "vector_image"]

_QUANTILE = 0.001
_SNIP_FACTOR = 10.0


def _robust_limits(values: np.ndarray) -> tuple[float, float]:
    """Auto-range limits: the extremes, or the 0.1 % / 99.9 % quantiles of the non-zero
    values (widened to 0 when zeros are present) where the extremes are far outliers."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 1.0, math.nextafter(1.0, math.inf)
    low = float(np.real(values.min()))
    high = float(np.real(values.max()))
    zeros = values == 0
    if not zeros.all() and values.dtype.kind in "iuf":
        q_low, q_high = np.quantile(values[~zeros], (_QUANTILE, 1 - _QUANTILE))
        if zeros.any():
            q_low, q_high = min(q_low, 0), max(q_high, 0)
        inside = values[(values >= q_low) & (values <= q_high)]
        if inside.size:
            in_low, in_high = float(inside.min()), float(inside.max())
            # an extreme is snipped only when it is far outside the bulk
            if abs(in_low) > 0 and abs(in_low - low) / abs(in_low) > _SNIP_FACTOR:
                low = in_low
            if abs(in_high) > 0 and abs(in_high - high) / abs(in_high) > _SNIP_FACTOR:
                high = in_high
    if low == high:
        high = math.nextafter(low, math.inf)
    return low, high


def _limits(data: np.ndarray, vmin, vmax, damage) -> tuple[float, float]:
    if vmin is not None and vmax is not None:
        return vmin, vmax
    data = data.astype(np.float32)
    valid = (data != 0) if damage is None else np.asarray(damage)
    valid = valid & np.isfinite(data)
    if not np.any(valid):
        return 1, 1
    low, high = _robust_limits(data[valid])
    return (low if vmin is None else vmin), (high if vmax is None else vmax)


def scaled_image(
    data: np.ndarray,
    colormap=None,
    logarithmic: bool = False,
    vmin: float | None = None,
    vmax: float | None = None,
    damage=None,
) -> np.ndarray:
    """A colour picture (RGBA ``uint8``, shape ``data.shape + (4,)``) of a real array.

    Parameters
    ----------
    data : numpy.ndarray
        The values (NaN shows as matplotlib's "bad" colour).
    colormap : matplotlib colormap or str, optional
        ``gist_earth`` by default.
    logarithmic : bool
        Log scale, of ``data - min(data) + 1``.
    vmin, vmax : float, optional
        Colour range; by default a robust range of the valid values.
    damage : bool or numpy.ndarray, optional
        Which values count for the range (default: the non-zero ones).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.analysis._viz import scaled_image
    >>> scaled_image(np.arange(6.0).reshape(2, 3)).shape
    (2, 3, 4)
    """
    data = np.asarray(data)
    if logarithmic:
        data = data.astype(np.result_type(data, np.int8))
        data = data - np.min(data) + 1
    low, high = _limits(data, vmin, vmax, damage)
    try:
        from matplotlib import colormaps, colors
    except ImportError:
        return _grey(data, low, high, logarithmic)
    norm = (colors.LogNorm if logarithmic else colors.Normalize)(vmin=low, vmax=high)
    if colormap is None:
        colormap = "gist_earth"
    if isinstance(colormap, str):
        colormap = colormaps[colormap]
    scaled = norm(data.reshape(-1)).reshape(data.shape)
    return colormap(scaled, bytes=True)


def _grey(data: np.ndarray, low: float, high: float, logarithmic: bool) -> np.ndarray:
    values = data.astype(np.float64)
    if logarithmic:
        with np.errstate(divide="ignore", invalid="ignore"):
            values, low, high = np.log(values), math.log(low), math.log(high)
    span = (high - low) or 1.0
    level = np.clip(np.nan_to_num((values - low) / span), 0, 1)
    out = np.empty(data.shape + (4,), dtype=np.uint8)
    out[..., :3] = (level * 255).astype(np.uint8)[..., None]
    out[..., 3] = 255
    return out


def vector_image(x, y, vmax: float | None = None) -> np.ndarray:
    """An RGB ``uint8`` colour wheel picture of the vectors ``(x, y)``: hue gives the
    direction, brightness the length (full at ``vmax``; default: the longest finite).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.analysis._viz import vector_image
    >>> vector_image(np.array([1.0, 0.0]), np.array([0.0, 1.0])).shape
    (2, 3)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if vmax is None:
        length = np.hypot(x, y)
        finite = length[np.isfinite(length)]
        vmax = float(finite.max()) if finite.size else 1.0
    return (field_colours(y, x, vmax=vmax or 1.0) * 255).astype(np.uint8)
