"""Pictures of scans and UDF results on axes in physical units, with matplotlib.

`virtual_image` shows a nav-shaped result (a virtual detector, a sum over the frames) with
a scale bar and a colour bar; `com_field` shows a centre-of-mass shift field in colours
(hue: direction, brightness: length) with a colour wheel for a legend; `frame` shows a
detector frame on the detector's axes. Axes follow the xarray coordinates of the results,
which carry the dataset's calibration (``units`` attributes); where there is none, they
count pixels. Each takes an ``ax`` to draw into (else it makes a figure with pyplot) and
returns the `matplotlib.axes.Axes`.

matplotlib is imported when a picture is made, never by ``import ltdask``;
`field_colours` is numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

__all__ = ["com_field", "field_colours", "frame", "virtual_image"]


def field_colours(fy, fx, vmax: float | None = None) -> np.ndarray:
    """Direction as hue, length as brightness: an RGB image (floats 0..1, shape
    ``fy.shape + (3,)``) of the vectors ``(fy, fx)``.

    Hue 0 (red) points along +x, a quarter turn towards +y is yellow-green, half a turn
    cyan. Full brightness at length `vmax` (default: the 99th percentile of the finite
    lengths); NaN vectors are black.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.views.plot import field_colours
    >>> field_colours(np.array([0.0, 0.0]), np.array([1.0, -0.5]), vmax=1).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]
    """
    fy = np.asarray(fy, dtype=np.float64)
    fx = np.asarray(fx, dtype=np.float64)
    length = np.hypot(fy, fx)
    if vmax is None:
        finite = length[np.isfinite(length)]
        vmax = float(np.percentile(finite, 99)) if finite.size else 1.0
    value = np.clip(np.nan_to_num(length / (vmax or 1.0)), 0, 1)
    hue = (np.nan_to_num(np.arctan2(fy, fx)) / (2 * np.pi)) % 1.0
    # HSV (saturation 1) to RGB: each channel a triangle wave of the hue
    channels = [np.clip(np.abs((hue * 6 + shift) % 6 - 3) - 1, 0, 1) for shift in (0.0, 4.0, 2.0)]
    return np.stack(channels, axis=-1) * value[..., None]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "ltdask.plot needs matplotlib: pip install matplotlib (or conda install matplotlib)"
        ) from None
    return plt


def _axes(ax):
    """`ax`, or the axes of a new pyplot figure."""
    if ax is None:
        _, ax = _pyplot().subplots()
    else:
        _pyplot()  # the same error when matplotlib is missing
    return ax


def _two_dims(array):
    """`array` without dims of size 1, from the last, while it has more than two."""
    for dim in reversed(array.dims):
        if array.ndim > 2 and array.sizes[dim] == 1:
            array = array.squeeze(dim, drop=True)
    return array


def _as_image(source, name: str | None, what: str):
    """A 2-D `xarray.DataArray` from a DataArray, a result Dataset (its variable `name`,
    or the only 2-D one) or an array."""
    import xarray as xr

    if isinstance(source, xr.Dataset):
        key: Hashable = name
        if key is None:
            names = [n for n, v in source.data_vars.items() if _two_dims(v).ndim == 2]
            if len(names) != 1:
                names = list(source.data_vars)
            if len(names) != 1:
                raise ValueError(
                    f"{what}: which of the result's variables {names}? Name one with name=..."
                )
            key = names[0]
        source = source[key]
    if not isinstance(source, xr.DataArray):
        array = np.asarray(source)
        source = xr.DataArray(array, dims=[f"dim_{i}" for i in range(array.ndim)])
    image = _two_dims(source)
    if image.ndim != 2:
        raise ValueError(
            f"{what}: {source.name or 'the data'} has dims {dict(source.sizes)}, expected two "
            f"(choose one image, e.g. .isel({source.dims[-1]}=0))"
        )
    return image


def _edges(image, dim: str) -> tuple[float, float, str]:
    """The outer edges of the first and last pixel along `dim` (its coordinate, else the
    index) and the units of that coordinate ("" for none)."""
    n = image.sizes[dim]
    coord = image.coords.get(dim)
    values = np.arange(n, dtype=np.float64)
    units = ""
    if coord is not None and coord.ndim == 1 and np.issubdtype(coord.dtype, np.number):
        values = np.asarray(coord.values, dtype=np.float64)
        units = str(coord.attrs.get("units", ""))
    step = (values[-1] - values[0]) / (n - 1) if n > 1 else 1.0
    return values[0] - step / 2, values[-1] + step / 2, units


def _label(dim: str, units: str) -> str:
    return f"{dim} ({units})" if units else dim


def _show(image, ax, data=None, **kwargs):
    """imshow of `image` (or `data`, e.g. its colours) with its physical extent, axis labels
    and an equal aspect where both axes share units."""
    ydim, xdim = image.dims
    y0, y1, yunits = _edges(image, ydim)
    x0, x1, xunits = _edges(image, xdim)
    values = image.values if data is None else data
    kwargs.setdefault("interpolation", "nearest")
    aspect = "equal" if yunits == xunits else "auto"
    im = ax.imshow(values, extent=(x0, x1, y1, y0), origin="upper", aspect=aspect, **kwargs)
    ax.set_xlabel(_label(xdim, xunits))
    ax.set_ylabel(_label(ydim, yunits))
    return im, (x0, x1, xunits)


def _nice_length(span: float) -> float:
    """A round length (1, 2 or 5 times a power of ten) of about a fifth of `span`."""
    target = abs(span) / 5
    power = 10 ** math.floor(math.log10(target))
    return max(m * power for m in (1, 2, 5) if m * power <= target)


def _scale_bar(ax, x_extent) -> None:
    """A scale bar in the lower right, where the x axis has units."""
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

    x0, x1, units = x_extent
    if not units:
        return
    length = _nice_length(x1 - x0)
    bar = AnchoredSizeBar(
        ax.transData,
        length,
        f"{length:g} {units}",
        "lower right",
        color="white",
        frameon=True,
        size_vertical=0,
        pad=0.3,
        sep=3,
    )
    # on a dark box, to show on bright images too
    bar.patch.set(facecolor="black", alpha=0.5, edgecolor="none")
    ax.add_artist(bar)


def _colour_bar(ax, im, image) -> None:
    units = image.attrs.get("units", "")
    ax.figure.colorbar(im, ax=ax, label=_label(str(image.name or ""), units) or None)


def virtual_image(
    image,
    ax=None,
    *,
    name: str | None = None,
    title: str | None = None,
    cmap: str = "gray",
    scale_bar: bool = True,
    colour_bar: bool = True,
    **kwargs,
):
    """Show a 2-D image (a virtual detector, a sum per frame) on axes in physical units.

    Parameters
    ----------
    image : xarray.DataArray, xarray.Dataset or array
        A result variable (extra dims of size 1 are dropped), a UDF's result Dataset (its
        variable `name`, or its only 2-D one) or a plain array (axes in pixels).
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new pyplot figure.
    name : str, optional
        The variable of a Dataset to show.
    title : str, optional
        By default the variable's name.
    cmap : str
        The colour map.
    scale_bar, colour_bar : bool
        A scale bar (where the x axis has units) and a colour bar (labelled with the
        variable's units).
    **kwargs
        Passed to ``imshow`` (``vmin``, ``vmax``, ``norm``, ...).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from matplotlib.figure import Figure
    >>> ds = ltdask.from_array(np.ones((4, 6, 8, 8), np.float32), nav_calibration=(2.5, "nm"))
    >>> res = ltdask.udf.SumSigUDF().compute(ds)
    >>> ax = ltdask.plot.virtual_image(res, ax=Figure().add_subplot())
    >>> ax.get_xlabel(), ax.get_xlim()
    ('scan_x (nm)', (np.float64(-1.25), np.float64(13.75)))
    """
    image = _as_image(image, name, "virtual_image")
    ax = _axes(ax)
    im, x_extent = _show(image, ax, cmap=cmap, **kwargs)
    if scale_bar:
        _scale_bar(ax, x_extent)
    if colour_bar:
        _colour_bar(ax, im, image)
    ax.set_title(str(image.name or "") if title is None else title)
    return ax


def _wheel(ax, vmax: float, units: str) -> None:
    """The colour wheel legend of `com_field`, beside `ax`: +y points down, as in the image."""
    size = 65
    yy, xx = np.mgrid[-1 : 1 : size * 1j, -1 : 1 : size * 1j]
    rgba = np.ones((size, size, 4))
    rgba[..., :3] = field_colours(yy, xx, vmax=1.0)
    rgba[..., 3] = np.hypot(yy, xx) <= 1
    inset = ax.inset_axes((1.04, 0.66, 0.3, 0.3))
    inset.imshow(rgba, extent=(-1, 1, 1, -1), interpolation="nearest")
    inset.set_axis_off()
    inset.set_title(f"{vmax:.3g} {units}".strip(), fontsize="small")


def com_field(
    result,
    ax=None,
    *,
    vmax: float | None = None,
    title: str | None = "CoM field",
    wheel: bool = True,
    scale_bar: bool = True,
):
    """Show a centre-of-mass shift field in colours, with a colour wheel for a legend.

    Hue gives the direction of the shift, brightness its length (see `field_colours`), on
    the scan's axes in physical units.

    Parameters
    ----------
    result : xarray.Dataset
        `ltdask.udf.CoMUDF`'s results (``field_y`` and ``field_x``), or a Dataset or
        DataArray with a ``field`` whose last dim holds (y, x).
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new pyplot figure.
    vmax : float, optional
        The length shown at full brightness (the wheel's rim); by default the 99th
        percentile of the lengths.
    title : str, optional
    wheel, scale_bar : bool
        The colour wheel (beside the axes, labelled with `vmax` and the field's units) and
        a scale bar (where the scan has units).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from matplotlib.figure import Figure
    >>> data = np.zeros((3, 4, 8, 8), np.float32); data[..., 4, 6] = 1  # 2 px along +x
    >>> ds = ltdask.from_array(data, sig_calibration=(0.5, "mrad"))
    >>> res = ltdask.udf.CoMUDF.with_params(cy=4, cx=4, physical_units=True).compute(ds)
    >>> ax = ltdask.plot.com_field(res, ax=Figure().add_subplot())
    >>> ax.images[0].get_array()[0, 0].tolist(), ax.child_axes[0].get_title()
    ([1.0, 0.0, 0.0], '1 mrad')
    """
    import xarray as xr

    if isinstance(result, xr.Dataset) and {"field_y", "field_x"} <= set(result.data_vars):
        fy, fx = result["field_y"], result["field_x"]
    else:
        field = result["field"] if isinstance(result, xr.Dataset) else result
        last = field.dims[-1]
        fy, fx = field.isel({last: 0}, drop=True), field.isel({last: 1}, drop=True)
    fy = _as_image(fy, None, "com_field")
    fx = _as_image(fx, None, "com_field")
    if vmax is None:
        length = np.hypot(fy.values, fx.values)
        finite = length[np.isfinite(length)]
        vmax = float(np.percentile(finite, 99)) if finite.size else 1.0
    vmax = vmax or 1.0
    ax = _axes(ax)
    _, x_extent = _show(fy, ax, data=field_colours(fy.values, fx.values, vmax=vmax))
    if scale_bar:
        _scale_bar(ax, x_extent)
    if wheel:
        _wheel(ax, vmax, str(fy.attrs.get("units", "")))
    if title is not None:
        ax.set_title(title)
    return ax


def _frame_image(source, index):
    """Frame `index` (a nav index tuple or a flat position) of a dataset, a DataArray (nav
    dims first, sig dims last) or an array, as a 2-D DataArray on the detector's axes."""
    import xarray as xr

    from ltdask.io.dataset import DataSet

    if isinstance(source, DataSet):
        from ltdask.udf.builtin.pick import PickUDF

        roi = np.zeros(source.num_frames, dtype=bool)
        flat = index if np.ndim(index) == 0 else np.ravel_multi_index(index, source.nav_shape)
        roi[int(flat)] = True
        picked = PickUDF().compute(source, roi=roi)["intensity"].values[0]
        sig_dims = source.dims[len(source.nav_shape) :]
        coords = {d: c for d, c in source.calibrated_coords().items() if d in sig_dims}
        return xr.DataArray(picked, dims=sig_dims, coords=coords, name="frame")
    if not isinstance(source, xr.DataArray):
        array = np.asarray(source)
        source = xr.DataArray(array, dims=[f"dim_{i}" for i in range(array.ndim)])
    nav = source.dims[:-2]
    if np.ndim(index) == 0:
        index = np.unravel_index(int(index), tuple(source.sizes[d] for d in nav))
    picked = source.isel(dict(zip(nav, (int(i) for i in index), strict=True)))
    return picked.rename(source.name or "frame")


def frame(
    source,
    index,
    ax=None,
    *,
    log: bool = False,
    title: str | None = None,
    cmap: str = "gray",
    colour_bar: bool = True,
    scale_bar: bool = True,
    **kwargs,
):
    """Show one detector frame on the detector's axes (its signal calibration).

    Parameters
    ----------
    source : ltdask.DataSet, xarray.DataArray or array
        A dataset (only that frame is read), ``ds.to_xarray()`` or an array with the
        frame's two dims last.
    index : int or tuple of int
        The frame's nav index, or its flat position in the scan.
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new pyplot figure.
    log : bool
        A logarithmic colour scale (values at or below 0 show as the smallest positive).
    title : str, optional
        By default ``"frame"`` and the index.
    cmap : str
    colour_bar, scale_bar : bool
    **kwargs
        Passed to ``imshow``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from matplotlib.figure import Figure
    >>> data = np.random.default_rng(0).random((2, 3, 16, 16)).astype(np.float32)
    >>> ds = ltdask.from_array(data, sig_calibration=(0.25, -2.0, "mrad"))
    >>> ax = ltdask.plot.frame(ds, (1, 2), ax=Figure().add_subplot())
    >>> ax.get_ylabel(), ax.get_ylim()
    ('det_y (mrad)', (np.float64(1.875), np.float64(-2.125)))
    >>> bool((ax.images[0].get_array() == data[1, 2]).all())
    True
    """
    image = _frame_image(source, index)
    ax = _axes(ax)
    if log:
        from matplotlib.colors import LogNorm

        values = image.values.astype(np.float64)
        positive = values[values > 0]
        low = float(positive.min()) if positive.size else 1.0
        kwargs["norm"] = LogNorm(vmin=low, vmax=max(low, float(np.nanmax(values))))
        image = image.copy(data=np.maximum(values, low))
    im, x_extent = _show(image, ax, cmap=cmap, **kwargs)
    if scale_bar:
        _scale_bar(ax, x_extent)
    if colour_bar:
        ax.figure.colorbar(im, ax=ax, label="intensity")
    ax.set_title(f"frame {tuple(index) if np.ndim(index) else index}" if title is None else title)
    return ax
