"""``get_results`` on the merged buffers, its buffer rules, and the valid masks.

The rules, as LiberTEM's: private buffers are no results (and may not be returned);
``result_only`` ones must be returned; the others pass through unless returned. A result
keeps the kind of its buffer; nav results may come back flat and ROI-compressed or
nav-shaped. Every result has a valid mask: the run's valid positions for nav results,
everything for the others, or what the UDF gives with ``self.with_mask(...)``.
"""

from __future__ import annotations

import numpy as np

from ltdask.exceptions import InvalidMaskError, UDFError, UndeclaredResultError
from ltdask.udf.bind import given_params, show_valid_nav
from ltdask.udf.buffers import BufferSpec, BufferView, ResultsNamespace
from ltdask.udf.graph import PartitionGraph
from ltdask.udf.interface import MaskedResult, UDFBase
from ltdask.udf.tasks import nav_shaped


def result_arrays(graph: PartitionGraph, u: int, merged: dict) -> dict[str, tuple]:
    """``{name: (data, valid)}`` of the results of UDF `u` from its `merged` buffers (see
    :func:`ltdask.udf.merge.merged`): data nav-shaped (dask); valid a numpy or dask
    boolean array of the data's shape."""
    import dask.array as da

    plan = graph.plan
    udf = plan.bound_udfs[u]
    raw = _show_merged(graph, udf, u, merged)
    returned = udf.get_results()
    if returned is None:
        returned = {}
    if not isinstance(returned, dict):
        raise UDFError(f"{type(udf).__name__}.get_results must return a dict")
    specs = plan.specs[u]
    cls = type(udf).__name__
    for name in returned:
        if name not in specs:
            raise UndeclaredResultError(
                f"{cls}.get_results returned {name!r}, which is not declared in get_result_buffers"
            )
        if specs[name].use == "private":
            raise UDFError(f"{cls}.get_results returned the private buffer {name!r}")
    out = {}
    for name, spec in specs.items():
        if spec.use == "private":
            continue
        if name not in returned:
            if spec.use == "result_only":
                raise UDFError(
                    f"{cls}: don't know how to set use='result_only' buffer {name!r}; "
                    "please implement `get_results`"
                )
            value, mask = merged[name], None
            is_raw = True
        else:
            value, mask = returned[name], None
            if isinstance(value, MaskedResult):
                value, mask = value.data, value.mask
            is_raw = value is raw.get(name)
            if is_raw:
                value = merged[name]
        value = da.asarray(value)
        _check_kind(cls, name, spec, value)
        if spec.kind == "nav":
            value = _nav_result(graph, cls, name, spec, value, is_raw)
        elif value.shape != spec.shape(0, plan.sig_shape):
            want = spec.shape(0, plan.sig_shape)
            raise UDFError(f"{cls}.get_results: {name!r} has shape {value.shape}, expected {want}")
        out[name] = (value, _valid(graph, cls, name, spec, value, mask))
    return out


def _show_merged(graph: PartitionGraph, udf: UDFBase, u: int, merged: dict) -> dict:
    """Set up `udf` for ``get_results``: ``self.results`` as LiberTEM's buffers show the
    merged ones (`BufferView`), the parameters as given, the run's valid nav mask. Returns
    the raw arrays it shows (nav ones ROI-compressed)."""
    plan = graph.plan
    show_valid_nav(udf, plan.context, graph.valid_flat)
    udf.params = given_params(udf)
    raw = {}
    views = {}
    nav_shape = tuple(plan.dataset.nav_shape)
    for name, value in merged.items():
        spec = plan.specs[u][name]
        if spec.kind == "nav":
            raw[name] = graph.compress(value)
            data = nav_shaped(value, nav_shape, plan.dataset.nav_chunks)
            valid = graph.valid_flat.reshape(nav_shape)
        else:
            raw[name] = data = value
            valid = np.broadcast_to(np.True_, value.shape)
        views[name] = BufferView(raw[name], data, valid)
    udf.results = ResultsNamespace(raw, views)
    return raw


def _nav_result(graph: PartitionGraph, cls, name, spec: BufferSpec, value, is_raw):
    plan = graph.plan
    nav_shape = tuple(plan.dataset.nav_shape)
    if is_raw:
        flat = value
    elif value.shape[: len(nav_shape)] == nav_shape and value.ndim >= len(nav_shape):
        return value
    elif value.ndim >= 1 and value.shape[0] == plan.n_sel:
        flat = graph.expand(value, spec.dtype)
    else:
        raise UDFError(
            f"{cls}.get_results: nav result {name!r} has shape {value.shape}; expected "
            f"({plan.n_sel}, ...) (flat, ROI-compressed) or {nav_shape + spec.extra_shape}"
        )
    return nav_shaped(flat, nav_shape, plan.dataset.nav_chunks)


def _valid(graph: PartitionGraph, cls, name, spec: BufferSpec, value, mask):
    if mask is None:
        if spec.kind == "nav":
            nav_shape = tuple(graph.plan.dataset.nav_shape)
            base = graph.valid_flat.reshape(nav_shape)
            base = base.reshape(base.shape + (1,) * (value.ndim - len(nav_shape)))
            return np.broadcast_to(base, value.shape)
        return np.broadcast_to(np.True_, value.shape)
    import dask.array as da

    mask = mask if isinstance(mask, da.Array) else np.asarray(mask)
    if not isinstance(mask, da.Array) and mask.dtype.kind in "iu" and np.isin(mask, (0, 1)).all():
        mask = mask.astype(bool)  # LiberTEM's with_mask(data, mask=1) / mask=0
    if mask.dtype != bool:
        raise InvalidMaskError(
            f"{cls}: the valid mask of {name!r} has dtype {mask.dtype}, not bool (integer "
            "masks may hold only 0 and 1)"
        )
    try:
        if isinstance(mask, da.Array):
            return da.broadcast_to(mask, value.shape)
        return np.broadcast_to(mask, value.shape)
    except ValueError:
        raise InvalidMaskError(
            f"{cls}: the valid mask of {name!r} (shape {mask.shape}) does not broadcast "
            f"to the result's shape {value.shape}"
        ) from None


def _check_kind(cls, name, spec: BufferSpec, value):
    if spec.dtype.kind == "O" or value.dtype.kind == "O":
        return
    kinds = {spec.dtype.kind, value.dtype.kind}
    if len(kinds) > 1 and not kinds <= set("iu") and not kinds <= set("SU"):
        raise UDFError(
            f"{cls}.get_results: {name!r} has dtype {value.dtype}, but the buffer is declared "
            f"as {spec.dtype}"
        )
