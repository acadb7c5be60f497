"""Hand-off to HyperSpy (and pyxem, py4DSTEM's readers of HyperSpy signals): `to_hyperspy`
turns a dataset or a UDF result into a HyperSpy signal with calibrated axes.

HyperSpy is GPL-3 and an optional extra (``pip install "ltdask[hyperspy]"``): it is imported
inside `to_hyperspy`, never by ``import ltdask``.

How dims become axes
--------------------
HyperSpy holds navigation axes first and signal axes last in numpy order, and lists them in
reverse (x before y) in its axes manager; ltdask keeps numpy order and the dim names.

* A dataset: its nav dims navigate, its signal dims are the signal (a `Signal2D` of the
  frames for a 2-D detector).
* A result over the detector's dims (``SumUDF``, a frame of ``StdDevUDF``...): those dims are
  the signal, the others (extra dims of the result) navigate.
* A result over the scan without the detector's dims: the scan's dims are the signal, as a
  virtual image is an image of the scan; extra dims navigate (a CoM ``field`` of dims
  ``(scan_y, scan_x, yx)`` is a stack of two images, y then x; ``.T`` in HyperSpy gives
  pyxem's ``BeamShift`` layout with the scan navigating).
* A result over neither: every dim is the signal.

``signal_dims=`` chooses otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

#: the extra that installs HyperSpy, named by the error when it is missing
EXTRA = "hyperspy"
#: pyxem's signal type of 2-D diffraction patterns (its ``Diffraction2D``)
DIFFRACTION = "diffraction"
#: default dim names of the scan and of the detector (see `ltdask.common.shape.default_dims`),
#: recognised in a result that does not say which its dataset had
_NAV_NAME = re.compile(r"scan_y|scan_x|frame|nav_\d+")
_SIG_NAME = re.compile(r"det_y|det_x|sig_\d+")


def _import_hyperspy():
    try:
        import hyperspy.api as hs
    except ImportError as err:
        raise ImportError(
            f"to_hyperspy needs HyperSpy (GPL-3, not installed with ltdask): "
            f'pip install "ltdask[{EXTRA}]" (or pip install "hyperspy>=2")'
        ) from err
    return hs


def to_hyperspy(
    source,
    name: str | None = None,
    *,
    signal_dims: Sequence[str] | None = None,
    dtype=None,
    chunks=None,
    corrections=None,
):
    """A HyperSpy signal of a dataset or of a result, with its calibrated axes and units.

    Parameters
    ----------
    source
        A `ltdask.DataSet` (the signal is lazy: its data is ``source.to_dask(...)``), a
        result ``xarray.Dataset`` of a UDF (`name` picks the variable where it has several)
        or one ``xarray.DataArray`` of one. A result stays as lazy as it is: a lazy result
        (``udf.lazy``) gives a lazy signal, a computed one a signal holding numpy data.
    name
        The variable of a result Dataset to convert (required where it has several).
    signal_dims
        The dims that become the signal axes (the rest navigate), in place of the rules in
        `ltdask.store.hyperspy`.
    dtype, chunks, corrections
        For a dataset: as :meth:`ltdask.DataSet.to_dask` takes them.

    Returns
    -------
    hyperspy.signal.BaseSignal
        ``Signal2D`` for two signal dims (pyxem's ``Diffraction2D`` where pyxem is installed
        and the signal is the detector's), ``Signal1D`` for one, ``BaseSignal`` otherwise;
        lazy where the data is a dask array. Each axis has the dim's name, and the scale,
        offset and units of its calibration (a coordinate that is not evenly spaced becomes a
        non-uniform axis; one that is not numeric, an index axis). The signal's
        ``metadata.General.title`` is the variable's name (the file's for a dataset) and
        ``metadata.ltdask`` holds the attrs of the result (or the dataset) and ``valid``: a
        result's valid mask as a signal of the same axes (values outside it are NaN for
        floats, 0 for integers, as in the result); for a dataset, an image of the scan, False
        where the files hold no frame (read as zeros).

    Raises
    ------
    ImportError
        HyperSpy is not installed; the message names the extra to install.
    ValueError
        `name` or `signal_dims` do not name what `source` has.
    TypeError
        `source` is neither a dataset nor a result.

    Examples
    --------
    With HyperSpy installed (``pip install "ltdask[hyperspy]"``; the ``test`` extra has it):

    >>> import ltdask, numpy as np
    >>> ds = ltdask.from_array(np.ones((4, 6, 8, 8), np.float32), nav_calibration=(2.5, "nm"))
    >>> s = ds.to_hyperspy()
    >>> s
    <LazySignal2D, title: <array>, dimensions: (6, 4|8, 8)>
    >>> [(a.name, a.scale, a.units) for a in s.axes_manager.navigation_axes]
    [('scan_x', 2.5, 'nm'), ('scan_y', 2.5, 'nm')]
    >>> image = ltdask.to_hyperspy(ltdask.udf.SumSigUDF().compute(ds))
    >>> image, float(image.data[3, 5])
    (<Signal2D, title: intensity, dimensions: (|6, 4)>, 64.0)
    """
    hs = _import_hyperspy()
    import xarray as xr

    # (a dataset by what it offers: this package sits below the datasets, whose
    # ``to_hyperspy`` method calls this function)
    if not isinstance(source, (xr.Dataset, xr.DataArray)) and hasattr(source, "to_dask"):
        if name is not None:
            raise TypeError(
                f"to_hyperspy: name={name!r} picks a variable of a result, not of a dataset"
            )
        return _dataset_signal(hs, source, signal_dims, dtype, chunks, corrections)
    if dtype is not None or chunks is not None or corrections is not None:
        raise TypeError(
            "to_hyperspy: dtype=, chunks= and corrections= apply to datasets; got a "
            f"{type(source).__name__}"
        )
    attrs: dict = {}
    if isinstance(source, xr.Dataset):
        attrs = dict(source.attrs)
        source = _pick(source, name)
    elif not isinstance(source, xr.DataArray):
        raise TypeError(
            f"to_hyperspy: got a {type(source).__name__}; expected an ltdask DataSet, a "
            "result xarray.Dataset or one of its DataArrays"
        )
    elif name is not None and name != source.name:
        raise ValueError(f"to_hyperspy: name={name!r} but the DataArray is {source.name!r}")
    return _result_signal(hs, source, attrs, signal_dims)


def _pick(result, name: str | None):
    names = list(result.data_vars)
    if name is None:
        if len(names) != 1:
            raise ValueError(
                f"to_hyperspy: the result has the variables {names}; name one "
                f"(to_hyperspy(result, {names[0]!r}) or to_hyperspy(result[{names[0]!r}]))"
                if names
                else "to_hyperspy: the result has no variables"
            )
        name = names[0]
    if name not in names:
        raise ValueError(f"to_hyperspy: name={name!r}; the result has the variables {names}")
    return result[name]


def _dataset_signal(hs, ds, signal_dims, dtype, chunks, corrections):
    nav_count = len(ds.nav_shape)
    calibration = dict(zip(ds.dims, ds.nav_calibration + ds.sig_calibration, strict=True))
    axes = {}
    for dim, size in zip(ds.dims, ds.nav_shape + ds.sig_shape, strict=True):
        if dim in ds.coords:  # the dataset's own coordinates (from a DataArray) come first
            axes[dim] = _coordinate_axis(dim, size, ds.coords[dim])
        else:
            axis = calibration[dim]
            axes[dim] = _axis(dim, size, offset=axis.origin, scale=axis.scale, units=axis.units)
    sig = _signal_dims(signal_dims, ds.dims, ds.dims[nav_count:])
    data = ds.to_dask(dtype=dtype, chunks=chunks, corrections=corrections)
    title = os.path.basename(str(ds.path).rstrip("/\\")) or type(ds).__name__
    meta = ds.attrs()
    detector = set(sig) == set(ds.dims[nav_count:])
    out = _signal(hs, data, ds.dims, axes, sig, title, meta, detector)
    # which positions hold frames (False: none in the files, read as zeros), as an image of
    # the scan like a result's mask
    nav_dims = ds.dims[:nav_count]
    valid = _signal(hs, ds.valid_nav_mask(), nav_dims, axes, nav_dims, f"{title} valid", {}, False)
    out.metadata.set_item("ltdask.valid", valid)
    return out


def _result_signal(hs, array, attrs: dict, signal_dims):
    dims = tuple(str(d) for d in array.dims)
    nav_dims = attrs.get("nav_dims")
    sig_dims = attrs.get("sig_dims")
    scan = set(nav_dims) if nav_dims is not None else {d for d in dims if _NAV_NAME.fullmatch(d)}
    detector = (
        set(sig_dims) if sig_dims is not None else {d for d in dims if _SIG_NAME.fullmatch(d)}
    )
    if any(d in detector for d in dims):
        default = tuple(d for d in dims if d in detector)
    elif any(d in scan for d in dims):
        default = tuple(d for d in dims if d in scan)
    else:
        default = dims
    sig = _signal_dims(signal_dims, dims, default)
    axes = {
        d: _coordinate_axis(d, size, array.coords[d] if d in array.coords else None)
        for d, size in zip(dims, array.shape, strict=True)
    }
    title = str(array.name) if array.name is not None else ""
    meta = {**attrs, **array.attrs}
    valid_name = f"{array.name}_valid"
    valid = None
    if valid_name in array.coords and array.coords[valid_name].dims == array.dims:
        valid = array.coords[valid_name].data
    is_detector = bool(sig) and set(sig) <= detector
    out = _signal(hs, array.data, dims, axes, sig, title, meta, is_detector)
    units = array.attrs.get("units")
    if units:  # HyperSpy labels the values with it (plots, colour bars)
        out.metadata.set_item("Signal.quantity", f"{title} ({units})")
    if valid is not None:
        mask = _signal(hs, valid, dims, axes, sig, f"{title} valid", {}, False)
        out.metadata.set_item("ltdask.valid", mask)
    return out


def _signal_dims(given, dims: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    if given is None:
        return default
    if isinstance(given, str):
        given = (given,)
    given = tuple(given)
    unknown = [d for d in given if d not in dims]
    if unknown or len(set(given)) != len(given):
        raise ValueError(f"to_hyperspy: signal_dims={given!r}; expected distinct dims of {dims}")
    return tuple(d for d in dims if d in given)  # in the data's order


def _axis(dim: str, size: int, offset=None, scale=None, units="", values=None) -> dict:
    """HyperSpy's description of one axis (its ``axes=`` dicts)."""
    out: dict[str, Any] = {"name": dim, "size": int(size)}
    if values is not None:
        out["axis"] = values
    else:
        if offset is not None:
            out["offset"] = float(offset)
        if scale is not None:
            out["scale"] = float(scale)
    if units:
        out["units"] = str(units)
    return out


def _coordinate_axis(dim: str, size: int, coord) -> dict:
    """The axis of `dim` from its xarray coordinate (None: an index axis): uniform where the
    values are evenly spaced, non-uniform where they are strictly monotonic, an index axis
    where they are not numbers."""
    if coord is None:
        return _axis(dim, size)
    units = coord.attrs.get("units", "")
    values = np.asarray(coord.values)
    if values.dtype.kind not in "iuf" or values.shape != (size,) or size == 0:
        return _axis(dim, size, units=units)
    values = values.astype(np.float64)
    if size == 1:
        return _axis(dim, size, offset=values[0], units=units)
    scale = (values[-1] - values[0]) / (size - 1)
    steps = np.diff(values)
    if scale != 0 and np.allclose(steps, scale, rtol=1e-9, atol=0):
        return _axis(dim, size, offset=values[0], scale=scale, units=units)
    if (steps > 0).all() or (steps < 0).all():
        return _axis(dim, size, units=units, values=values)
    return _axis(dim, size, units=units)


def _signal(hs, data, dims, axes: dict, sig, title: str, meta: dict, detector: bool):
    """The signal of `data` (dims `dims`) with the `sig` dims as the signal: transposed so
    that they come last, as HyperSpy holds them."""
    import dask.array as da

    nav = tuple(d for d in dims if d not in sig)
    order = nav + tuple(sig)
    if order != tuple(dims):
        perm = [dims.index(d) for d in order]
        data = data.transpose(perm) if isinstance(data, da.Array) else np.transpose(data, perm)
    described = [{**axes[d], "navigate": d in nav} for d in order]
    cls = {1: hs.signals.Signal1D, 2: hs.signals.Signal2D}.get(len(sig), hs.signals.BaseSignal)
    metadata = {"General": {"title": title}, "ltdask": dict(meta)}
    out = cls(data, axes=described, metadata=metadata)
    if isinstance(data, da.Array):
        out = out.as_lazy()
    if detector and len(sig) == 2 and _known_signal_type(DIFFRACTION):
        out.set_signal_type(DIFFRACTION)
    return out


def _known_signal_type(signal_type: str) -> bool:
    """Whether an installed HyperSpy extension (pyxem) defines `signal_type`."""
    from hyperspy.extensions import ALL_EXTENSIONS

    for spec in ALL_EXTENSIONS.get("signals", {}).values():
        if spec.get("signal_type") == signal_type:
            return True
        if signal_type in spec.get("signal_type_aliases", ()):
            return True
    return False


__all__ = ["to_hyperspy"]
