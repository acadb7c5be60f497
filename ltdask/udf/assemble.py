"""The results of a run as `xarray.Dataset`s: one per UDF, a variable per result with its
``NAME_valid`` coordinate (see `ltdask.udf.buffers.valid_names` for a result that is itself
named so), dims named after the dataset's, attrs naming the run.
"""

from __future__ import annotations

import numpy as np

from ltdask._version import __version__
from ltdask.exceptions import UDFError
from ltdask.runtime.progress import compute as run_compute
from ltdask.runtime.progress import partition_bar
from ltdask.runtime.schedulers import client_for, on_a_cluster
from ltdask.udf.buffers import BufferSpec, valid_names
from ltdask.udf.graph import PartitionGraph
from ltdask.udf.merge import merged
from ltdask.udf.results import result_arrays
from ltdask.udf.tasks import compute_arrays

#: valid masks of up to this many elements are numpy arrays in the Datasets (a few tasks
#: less per result); larger ones are dask arrays chunked like the result
SMALL_MASK = 2**20


def to_datasets(graph: PartitionGraph) -> list:
    """The lazy `xarray.Dataset` of each UDF of the run of `graph`."""
    import xarray as xr

    plan = graph.plan
    dataset = plan.dataset
    out = []
    for u, udf in enumerate(plan.bound_udfs):
        data_vars = {}
        coords = {}
        names = udf.get_extra_dims()
        results = result_arrays(graph, u, merged(graph, u))
        mask_names = valid_names(results)
        for name, (value, valid) in results.items():
            dims = _dims(dataset, udf, name, plan.specs[u][name], value.shape, names.get(name))
            data_vars[name] = xr.Variable(dims, value)
            if isinstance(valid, np.ndarray) and valid.size > SMALL_MASK:
                # chunked like the data, so that writing to Zarr streams it as well
                valid = _lazy_mask(valid, value.chunks, f"ltdask-valid-{name}-{u}-{graph.token}")
            elif isinstance(valid, np.ndarray):
                valid = np.array(valid)  # (small: no tasks to compute it, a copy of its own)
            coords[mask_names[name]] = xr.Variable(dims, valid)
        for name, var_attrs in udf.get_result_attrs().items():
            if name in data_vars:
                data_vars[name].attrs.update(var_attrs)
        attrs = {
            "udf": type(udf).__name__,
            "udf_module": type(udf).__module__,
            "ltdask_version": __version__,
            "dataset": str(dataset.path),
            "input_dtype": str(plan.read_dtype),
            "roi": plan.roi.describe(),
            # which dims are the scan's and the detector's (ltdask.to_hyperspy reads them)
            "nav_dims": list(dataset.dims[: len(dataset.nav_shape)]),
            "sig_dims": list(dataset.dims[len(dataset.nav_shape) :]),
        }
        # the dataset's own coordinates (from a DataArray) and its calibrated dims (with
        # units) along the results' nav/sig dims
        used = {d for var in data_vars.values() for d in var.dims}
        for name, coord in dataset.calibrated_coords().items():
            if set(coord.dims) <= used and name not in data_vars:
                coords.setdefault(name, coord)
        sizes = {d: n for var in data_vars.values() for d, n in var.sizes.items()}
        coords.update(_extra_coords(udf, sizes))
        out.append(xr.Dataset(data_vars, coords=coords, attrs=attrs))
    return out


def compute_datasets(
    datasets: list,
    progress: bool | None = None,
    graph: PartitionGraph | None = None,
    scheduler=None,
) -> list:
    """Compute lazy Datasets together (on `scheduler`, None: the active one), sharing their
    tasks; the partition tasks of `graph` run even where no result depends on them (UDFs
    without results).

    (``dask.compute(*datasets)`` would do the same, but with dask 2026.8 / xarray 2026.9 it
    fails when one variable is computed from another.)
    """
    import dask

    slots, arrays = [], []
    for i, d in enumerate(datasets):
        for name, var in d.variables.items():
            if dask.is_dask_collection(var.data):
                slots.append((i, name))
                arrays.append(var.data)
    # results that use the partition tasks use every one with ROI frames; where none does
    # (UDFs without results), run them anyway
    extra = []
    if graph is not None and not any(
        graph.partition_results.name in getattr(a.__dask_graph__(), "layers", ()) for a in arrays
    ):
        extra = [graph.done()]
    remote = graph.partition_results.name if graph is not None else None
    cluster = on_a_cluster() if scheduler is None else client_for(scheduler) is not None
    if progress and cluster:
        values = list(run_compute(*arrays, *extra, progress=True, scheduler=scheduler))
    else:
        with partition_bar(progress):
            values = compute_arrays([*arrays, *extra], remote, scheduler)
    out = [d.copy(deep=False) for d in datasets]
    for (i, name), value in zip(slots, values[: len(slots)], strict=True):
        out[i].variables[name].data = value
    return out


def _dims(dataset, udf, name: str, spec: BufferSpec, shape, names) -> tuple[str, ...]:
    """The dims of result `name`: the dataset's nav or signal dims, then the `names` that
    ``udf.get_extra_dims()`` gives (``...``: the signal dims), or ``NAME_0``, ... ."""
    nav_dims = dataset.dims[: len(dataset.nav_shape)]
    sig_dims = dataset.dims[len(dataset.nav_shape) :]
    if spec.kind == "nav":
        lead = nav_dims
    elif spec.kind == "sig":
        lead = sig_dims
    else:
        lead = ()
    extra = len(shape) - len(lead)
    if names is None:
        return tuple(lead) + tuple(f"{name}_{i}" for i in range(extra))
    given = tuple(names)
    expanded: tuple[str, ...] = ()
    for n in given:
        expanded += tuple(sig_dims) if n is Ellipsis else (str(n),)
    if len(expanded) != extra or len(set(lead + expanded)) != len(shape):
        raise UDFError(
            f"{type(udf).__name__}.get_extra_dims(): result {name!r} of shape {tuple(shape)} "
            f"has {extra} dims besides {tuple(lead) or 'none'}; got the names {given}"
        )
    return tuple(lead) + expanded


def _extra_coords(udf, sizes: dict) -> dict:
    """``udf.get_extra_coords()`` for the dims the results have, checked against their sizes."""
    out = {}
    for dim, values in udf.get_extra_coords().items():
        if dim not in sizes:
            continue
        values = np.asarray(values)
        if values.shape != (sizes[dim],):
            raise UDFError(
                f"{type(udf).__name__}.get_extra_coords(): {values.shape[0] if values.ndim else 0}"
                f" coordinates for dim {dim!r} of size {sizes[dim]}"
            )
        # text as Python strings: Zarr v3 has a specification for those, not for numpy's
        # fixed-width unicode (which warns when written)
        out[dim] = values.astype(object) if values.dtype.kind in "US" else values
    return out


def _lazy_mask(valid: np.ndarray, chunks, name: str):
    """`valid` as a dask array of `chunks`, without materialising its broadcast dims.

    ``da.from_array`` copies a numpy array into its chunks when the graph is built: for a
    nav mask broadcast over a result's extra dims (``np.broadcast_to``, no memory) that is
    one bool per result element, held as long as the lazy result lives (1 GiB for a 4 GiB
    float32 result). Only the un-broadcast part is copied here; the chunks broadcast it.
    """
    import dask.array as da

    broadcast = tuple(n > 1 and s == 0 for n, s in zip(valid.shape, valid.strides, strict=True))
    if not any(broadcast):
        return da.from_array(valid, chunks=chunks, name=name)
    base = np.ascontiguousarray(valid[tuple(slice(0, 1) if b else slice(None) for b in broadcast)])
    base_chunks = tuple((1,) if b else c for b, c in zip(broadcast, chunks, strict=True))
    return da.broadcast_to(da.from_array(base, chunks=base_chunks, name=name), valid.shape, chunks)
