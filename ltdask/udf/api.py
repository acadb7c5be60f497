"""Running UDFs: lazy and computed `xarray.Dataset` results, partial results."""

from __future__ import annotations

import numpy as np

from ltdask import _config
from ltdask._progress import compute as run_compute
from ltdask._version import __version__
from ltdask.exceptions import UDFError
from ltdask.io.dataset import DataSet
from ltdask.udf.base import UDF
from ltdask.udf.buffers import filled as filled_buffer
from ltdask.udf.graph import Run


def _dims(run: Run, name: str, spec, ndim: int) -> tuple[str, ...]:
    ds = run.dataset
    nav_dims = ds.dims[: len(ds.nav_shape)]
    sig_dims = ds.dims[len(ds.nav_shape) :]
    if spec.kind == "nav":
        lead = nav_dims
    elif spec.kind == "sig":
        lead = sig_dims
    else:
        lead = ()
    return lead + tuple(f"{name}_{i}" for i in range(ndim - len(lead)))


def to_datasets(run: Run) -> list:
    """The lazy `xarray.Dataset` of each UDF of `run`."""
    import xarray as xr

    out = []
    for u, udf in enumerate(run.mains):
        data_vars = {}
        coords = {}
        for name, (value, valid) in run.result_arrays(u).items():
            dims = _dims(run, name, run.specs[u][name], value.ndim)
            data_vars[name] = xr.Variable(dims, value)
            if isinstance(valid, np.ndarray):
                # chunked like the data, so that writing to Zarr streams it as well
                valid = _lazy_mask(valid, value.chunks, f"ltdask-valid-{name}-{u}-{run.token}")
            coords[f"{name}_valid"] = xr.Variable(dims, valid)
        attrs = {
            "udf": type(udf).__name__,
            "udf_module": type(udf).__module__,
            "ltdask_version": __version__,
            "dataset": str(run.dataset.path),
            "input_dtype": str(run.read_dtype),
            "roi": "none" if run.roi_flat is None else f"{int(run.roi_flat.sum())} positions",
        }
        # the dataset's own coordinates (from a DataArray) along the results' nav/sig dims
        used = {d for var in data_vars.values() for d in var.dims}
        for name, coord in getattr(run.dataset, "coords", {}).items():
            if set(coord.dims) <= used and name not in data_vars:
                coords.setdefault(name, coord)
        out.append(xr.Dataset(data_vars, coords=coords, attrs=attrs))
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


def lazy(dataset: DataSet, udfs: list[UDF] | UDF, roi=None, corrections=None) -> list:
    """Build the graph that runs `udfs` together on `dataset` (each tile read once).

    Parameters
    ----------
    dataset
        From ``ltdask.open_*`` or :func:`ltdask.from_array`.
    udfs
        UDF instances; they share the partition tasks.
    roi
        Boolean array of the nav shape (or the flat nav size), or None for all positions.
    corrections
        A `ltdask.CorrectionSet` (dark frame, gain map, excluded pixels) applied to every
        frame before the UDFs see it.

    Returns
    -------
    list of xarray.Dataset
        One per UDF, backed by dask arrays; nothing is computed yet.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumSigUDF
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> (res,) = ltdask.lazy(ds, [SumSigUDF()])
    >>> res["intensity"].values.tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    """
    if isinstance(udfs, UDF):
        udfs = [udfs]
    return to_datasets(Run(dataset, list(udfs), roi, corrections))


def compute(
    dataset: DataSet, udfs: list[UDF] | UDF, roi=None, progress: bool = False, corrections=None
) -> list:
    """Run `udfs` together on `dataset` in one pass; computed `xarray.Dataset` per UDF.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumUDF, SumSigUDF
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    >>> float(total["intensity"].sum()), float(per_frame["intensity"].sum())
    (96.0, 96.0)
    """
    if isinstance(udfs, UDF):
        udfs = [udfs]
    run = Run(dataset, list(udfs), roi, corrections)
    return compute_datasets(to_datasets(run), progress=progress, run=run)


def compute_datasets(datasets: list, progress: bool = False, run: Run | None = None) -> list:
    """Compute lazy Datasets together, sharing their tasks; the partition tasks of `run`
    run even where no result depends on them (UDFs without results).

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
    if run is not None and not any(
        run.cells.name in getattr(a.__dask_graph__(), "layers", ()) for a in arrays
    ):
        extra = [run.done()]
    values = run_compute(*arrays, *extra, progress=progress)
    out = [d.copy(deep=False) for d in datasets]
    for (i, name), value in zip(slots, values[: len(slots)], strict=True):
        out[i].variables[name].data = value
    return out


def iter_results(dataset: DataSet, udfs: list[UDF] | UDF, roi=None, corrections=None):
    """Yield partial results (one list of Datasets per step) as partitions finish.

    Each step's ``NAME_valid`` coordinates mark what is done; the last step is complete.
    """
    for datasets, _ in iter_with_damage(dataset, udfs, roi, corrections):
        yield datasets


def iter_with_damage(dataset: DataSet, udfs: list[UDF] | UDF, roi=None, corrections=None):
    """Like `iter_results`, yielding ``(datasets, damage)``: damage is the flat boolean
    mask of the nav positions whose partitions are done."""
    for make, damage in iter_steps(dataset, udfs, roi, corrections=corrections):
        yield compute_datasets(make()), damage


class RunControl:
    """Changes to a run that `iter_steps` makes between two steps."""

    def __init__(self):
        self.parameters: list[dict] | None = None

    def update_parameters(self, parameters: list[dict]) -> None:
        """New parameters (one dict per UDF, the keywords to change) for the partitions
        that are not processed yet (LiberTEM's ``update_parameters_experimental``)."""
        self.parameters = [dict(p) for p in parameters]


def iter_steps(
    dataset: DataSet,
    udfs: list[UDF] | UDF,
    roi=None,
    unprocessed: str = "fill",
    control: RunControl | None = None,
    corrections=None,
):
    """Run `udfs` partition group by partition group, yielding ``(make, damage)``:
    ``make()`` builds the lazy Datasets of what is done (``get_results`` runs then, on
    numpy partials in memory), ``damage`` is the flat boolean nav mask of the positions
    whose partitions are done. Nav positions not done yet hold fill values
    (``unprocessed="fill"``) or the buffers' values after ``preprocess`` on the whole
    dataset (``"initial"``, as LiberTEM shows them); their valid masks are False.
    Parameters given to `control` between steps apply to the partitions after them."""
    import dask

    if isinstance(udfs, UDF):
        udfs = [udfs]
    run = Run(dataset, list(udfs), roi, corrections)
    initial = _initial_states(run, unprocessed)
    n = len(run.partitions)
    step = max(1, _config.min_partitions())
    done = np.zeros(n, dtype=bool)
    cells = np.empty(n, dtype=object)
    for first in range(0, n, step):
        if control is not None and control.parameters is not None:
            if len(control.parameters) != len(run.udfs):
                raise UDFError(
                    f"update_parameters: {len(control.parameters)} dicts of parameters for "
                    f"{len(run.udfs)} UDFs; give one dict per UDF"
                )
            changed = [
                type(u)(**{**u._kwargs, **p})
                for u, p in zip(run.udfs, control.parameters, strict=True)
            ]
            control.parameters = None
            run = Run(dataset, changed, run.roi_flat, corrections)
            initial = _initial_states(run, unprocessed)
        idx = list(range(first, min(n, first + step)))
        computed = dask.compute(*[run.cells.blocks[i] for i in idx])
        for i, c in zip(idx, computed, strict=True):
            cells[i] = c[0]
            done[i] = True
        damage = np.zeros(dataset.num_frames, dtype=bool)
        for i, p in enumerate(run.partitions):
            damage[p.start : p.stop] = done[i]
        snapshot = (cells.copy(), done.copy())
        yield (lambda s=snapshot, r=run, i=initial: _partial_datasets(r, *s, i)), damage


def initial_datasets(dataset: DataSet, udfs: list[UDF], roi=None, corrections=None) -> list:
    """Lazy Datasets of `udfs` as before any partition is processed: nav values as after
    ``preprocess`` on the whole dataset, all invalid (a "dry run": shapes and dtypes)."""
    run = Run(dataset, list(udfs), roi, corrections)
    n = len(run.partitions)
    cells, done = np.empty(n, dtype=object), np.zeros(n, bool)
    return _partial_datasets(run, cells, done, _initial_states(run, "initial"))


def _initial_states(run: Run, unprocessed: str) -> list | None:
    """Each UDF's buffers after ``preprocess`` on the whole dataset, made once per run, for
    ``unprocessed="initial"``; None for fill values."""
    if unprocessed != "initial":
        return None
    return [run.initial_state(u) for u in range(len(run.udfs))]


def _partial_datasets(run: Run, cells: np.ndarray, done: np.ndarray, initial=None):
    """Datasets for the partitions done so far (others invalid and not merged); nav
    positions not done hold `initial`'s values (see `_initial_states`) or fill values."""
    import dask.array as da

    partial = object.__new__(Run)
    partial.__dict__.update(run.__dict__)
    partial.ready = done
    starts = np.concatenate([[0], np.cumsum(run.counts)]).astype(int)
    filled = np.empty(len(cells), dtype=object)
    for i in range(len(cells)):
        if done[i]:
            filled[i] = cells[i]
            continue
        # not processed yet: fill values (or the initial values) at nav positions, with
        # False valid masks; other buffers are not merged
        parts = []
        for u in range(len(run.udfs)):
            part = {}
            for k, s in run._stored(u).items():
                if s.kind != "nav":
                    part[k] = s.allocate(run.counts[i], run.sig_shape, k)
                elif initial is not None:  # shared by every step: copied
                    part[k] = initial[u][k][starts[i] : starts[i + 1]].copy()
                else:
                    part[k] = filled_buffer(s.shape(run.counts[i], run.sig_shape), s.dtype)
            parts.append(part)
        filled[i] = parts
    wrapped = np.empty(len(cells), dtype=object)
    for i in range(len(cells)):
        box = np.empty(1, dtype=object)
        box[0] = filled[i]
        wrapped[i] = box
    partial.cells = da.concatenate([da.from_array(w, chunks=1) for w in wrapped], axis=0)
    mask = np.zeros_like(run.valid_flat)
    for i, p in enumerate(run.partitions):
        if done[i]:
            mask[p.start : p.stop] = True
    partial.valid_flat = run.valid_flat & mask
    partial.token = f"{run.token}-partial-{int(done.sum())}"
    return to_datasets(partial)
