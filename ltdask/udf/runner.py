"""The partition task: stream a partition's tiles through every UDF of a run.

`PartitionJob` is what every partition task of a run shares (one node of the graph,
:mod:`ltdask.udf.graph`); `partition_task` runs one partition and returns each UDF's
partial buffers in a `PartitionCell`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from dask.sizeof import sizeof

from ltdask.common import Shape, Slice
from ltdask.exceptions import UDFError
from ltdask.io.dataset import DataSet
from ltdask.io.maps import keeping_maps
from ltdask.io.partition import Partition
from ltdask.io.tiling import TilingScheme, flat_of
from ltdask.runtime import scratch, worker_gc
from ltdask.udf.backends import NUMPY as BACKEND_NUMPY
from ltdask.udf.backends import TileForms, on_device, to_host
from ltdask.udf.bind import PartitionPlace, RunContext, bind, partition_params
from ltdask.udf.buffers import BufferSpec, Namespace, declared_buffers, stored_buffers
from ltdask.udf.interface import UDFBase, UDFMethod
from ltdask.udf.shared import SharedStats


@dataclass(slots=True)
class PartitionJob:
    """What every partition task of a run shares: one node of the graph, so that the
    dataset, the UDFs and the ROI travel once per worker, not once per task."""

    dataset: DataSet
    partitions: list
    udfs: list
    scheme: TilingScheme
    context: RunContext
    #: whether the tasks keep their memory maps (see `ltdask.udf.graph.read_before`)
    keep_maps: bool
    #: detector corrections for the dataset's signal shape, or None
    corrections: object = None


def partition_task(job: PartitionJob, index: int, block=None) -> PartitionCell:
    """The task of partition `index`: every UDF's partial buffers (see `run_partition`);
    errors other than the UDFs' own get a note naming the UDFs and the partition."""
    p = job.partitions[index]
    try:
        with keeping_maps(job.keep_maps), scratch.task():
            partials = run_partition(
                job.dataset, p, job.udfs, job.scheme, job.context, block, job.corrections
            )
    except UDFError:
        raise
    except Exception as e:
        names = ", ".join(type(u).__name__ for u in job.udfs)
        if (
            isinstance(e, AttributeError)
            and e.name in _TILE_ATTRIBUTES
            and hasattr(e.obj, "shape")  # (an array: a tile)
        ):
            raise AttributeError(
                f"{e.name} of a tile: tiles are plain arrays (numpy, CuPy, sparse), as in "
                f"LiberTEM, which removed the attribute; use {_TILE_ATTRIBUTES[e.name]} "
                f"(while running {names} on partition {index})"
            ) from e
        e.add_note(
            f"ltdask: while running {names} on partition {index} (frames {p.start}:{p.stop})"
        )
        raise
    out = np.empty(1, dtype=object).view(PartitionCell)
    out[0] = partials
    worker_gc.after_task()
    return out


#: LiberTEM's former attributes of a tile -> where a UDF finds them now
_TILE_ATTRIBUTES = {"tile_slice": "self.meta.slice", "scheme_idx": "self.meta.tiling_scheme_idx"}


class PartitionCell(np.ndarray):
    """A partition task's result: a 1-element object array (a block of the run's cells)
    holding every UDF's partial buffers. ``dask.sizeof`` counts those buffers (a plain
    object array counts 8 bytes), so distributed's memory accounting sees them."""


@sizeof.register(PartitionCell)
def _sizeof_cell(cell) -> int:
    # cell[0]: one dict of partial buffers per UDF
    return 64 + sum(sizeof(a) for partials in cell[0] for a in partials.values())


def read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view of `arr`: tiles are shared by every UDF of a run and may be views of
    the files, so no UDF may write into them."""
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


def _written_tile(udf: UDFBase, method: str, err: ValueError) -> Exception:
    if "read-only" not in str(err):
        return err
    return UDFError(
        f"{type(udf).__name__}.{method} wrote into its input, but tiles, frames and partitions "
        f"are read-only (every UDF of the run shares them, and they may be views of the "
        f"file): copy it first, e.g. `tile = tile.copy()` ({err})"
    )


def _flat_copy(data: np.ndarray) -> tuple[np.ndarray, int, int]:
    """A flat tile (see `UDF.process_flat_tile`) copied from `data`, read-only."""
    flat = flat_of(data, copy=True)
    assert flat is not None  # (copy=True: always one)
    return read_only(flat[0]), flat[1], flat[2]


class _Bound:
    """One UDF instance at work on one partition (`udf`, bound to it), its buffers for the
    partition's `selected` positions and the views of them it sees."""

    def __init__(self, udf: UDFBase, selected: np.ndarray, sig_shape, target: str = "numpy"):
        n_sel = selected.size
        self.udf = udf
        self.method = udf.get_method()
        #: the array type of the tiles the UDF gets; `dense`: numpy (or host arrays for
        #: `cuda` UDFs), read through the flat-tile path
        self.target = target
        self.dense = target in (BACKEND_NUMPY, UDFBase.BACKEND_CUDA)
        declared = declared_buffers(udf)
        self.specs = stored_buffers(declared)
        self.arrays = {k: s.allocate(n_sel, sig_shape, k) for k, s in self.specs.items()}
        if target in UDFBase.CUPY_BACKENDS:
            self.arrays = on_device(self.arrays, self.specs)
        params, aux = partition_params(udf, selected)
        self.aux_specs = {k: spec for k, (spec, _) in aux.items()}
        self.aux = {k: data for k, (_, data) in aux.items()}
        self._sig_cache: dict = {}
        self._nav_names = [k for k, sp in self.specs.items() if sp.kind == "nav"]
        self._other_names = [k for k, sp in self.specs.items() if sp.kind != "nav"]
        # result_only buffers are there while processing, as None (LiberTEM: placeholders)
        self._result_views: dict = {k: None for k, s in declared.items() if s.use == "result_only"}
        self._results = Namespace.over(self._result_views, assign_in_place=True, buffers=True)
        self._param_views = params
        self._params = Namespace.over(self._param_views)
        #: the method that processes tiles, frames or the partition; for tile UDFs with
        #: flat tiles, the one that processes those
        self.process = getattr(udf, f"process_{self.method.value}")
        self.process_flat = getattr(udf, "process_flat_tile", None)
        if self.method is not UDFMethod.TILE or not self.dense:
            self.process_flat = None
        #: the run's shared tile statistics where they feed it (set once the run's UDFs are
        #: known), and the method that takes them
        self.shared: SharedStats | None = None
        self.process_shared: Any = getattr(udf, "process_shared_stats", None)

    def set_views(
        self, nav: slice | None, sig_index: tuple | None, scheme_idx=None, frame: bool = False
    ):
        """Point ``results`` and aux ``params`` at a part of the partition's buffers.

        Called per tile (and per frame), so the namespaces are reused and the signal views
        are cached per signal slice.
        """
        sig_views = self._sig_cache.get(scheme_idx) if sig_index is not None else None
        if sig_views is None:
            sig_views = {
                k: _view(self.specs[k], a, None, sig_index, False)
                for k, a in self.arrays.items()
                if self.specs[k].kind != "nav"
            }
            sig_views.update(
                (k, _view(self.aux_specs[k], a, None, sig_index, False))
                for k, a in self.aux.items()
                if self.aux_specs[k].kind != "nav"
            )
            if sig_index is not None:
                self._sig_cache[scheme_idx] = sig_views
        results = self._result_views
        for k in self._nav_names:
            results[k] = _view(self.specs[k], self.arrays[k], nav, None, frame)
        for k in self._other_names:
            results[k] = sig_views[k]
        self.udf.results = self._results
        if self.aux:
            params = self._param_views
            for k, a in self.aux.items():
                spec = self.aux_specs[k]
                params[k] = (
                    _view(spec, a, nav, None, frame) if spec.kind == "nav" else (sig_views[k])
                )
            self.udf.params = self._params


def _view(spec: BufferSpec, arr: np.ndarray, nav, sig_index, frame: bool):
    if spec.kind == "nav":
        if nav is None:
            return arr
        if frame and spec.extra_shape:
            return arr[nav.start]
        return arr[nav]
    if spec.kind == "sig" and sig_index is not None:
        return arr[sig_index]
    return arr


def run_partition(
    dataset: DataSet,
    partition: Partition,
    udfs: list[UDFBase],
    scheme: TilingScheme,
    context: RunContext,
    block=None,
    corrections=None,
) -> list[dict[str, np.ndarray]]:
    """Process one partition with every UDF of a run; returns each UDF's partial buffers
    (nav buffers ROI-compressed and partition sized)."""
    read_dtype = context.input_dtype
    sig_shape = context.sig_shape
    sig_dims = len(sig_shape)
    selected = context.roi.positions(partition.start, partition.stop)
    n_sel = selected.size
    origin = context.roi.count_before(partition.start)
    place = PartitionPlace(selected, origin, scheme)
    full_sig = Slice.full(Shape(sig_shape, sig_dims=sig_dims))

    if n_sel == 0:
        # no frame of the ROI here: nothing of the UDFs runs (as LiberTEM, which makes no
        # task for it); empty nav buffers keep the result's chunks
        out = []
        for template in udfs:
            specs = stored_buffers(declared_buffers(bind(template, context, place)))
            out.append({k: s.allocate(0, sig_shape, k) for k, s in specs.items()})
        return out

    pstart, pstop = dataset.present_range
    k0, k1 = np.searchsorted(selected, [pstart, pstop])
    present = selected[k0:k1]
    plan = context.backends
    targets = plan.targets if plan is not None else (BACKEND_NUMPY,) * len(udfs)
    bound = []
    for template, target in zip(udfs, targets, strict=True):
        b = _Bound(bind(template, context, place, backend=target), selected, sig_shape, target)
        b.udf.meta.set_slice(origin, n_sel, full_sig, None)
        b.set_views(None, None)
        b.udf.task_data = Namespace(b.udf.get_task_data() or {})
        if hasattr(b.udf, "preprocess"):
            b.udf.preprocess()
        bound.append(b)

    # (the dtype of the tiles the UDFs see: the data's integers where they take them)
    seen = read_dtype if context.tile_dtype is None else context.tile_dtype
    shared = SharedStats.make([b.udf for b in bound if b.process_flat is not None], seen)
    if shared is not None:
        for b in bound:
            if b.process_flat is not None and shared.wants(b.udf):
                b.shared = shared
    source = BACKEND_NUMPY if plan is None else plan.source
    sums = None
    if present.size and context.decoder_sums:
        sums = dataset.tile_sums(present, scheme)  # type: ignore[attr-defined]
    if sums is not None:
        b = bound[0]
        for first, n, s, acc in sums:
            at = int(k0) + first
            b.udf.meta.set_slice(origin + at, n, scheme.slices[s], s)
            b.set_views(slice(at, at + n), scheme.sig_indices[s], s)
            b.udf.process_tile_sums(acc, n, context.tile_dtype)  # type: ignore[attr-defined]
    elif present.size:
        sig_indices = scheme.sig_indices
        tile_dtype = read_dtype if corrections is None else corrections.tile_dtype
        if context.tile_dtype is not None:  # (integers, for UDFs that take them)
            tile_dtype = context.tile_dtype
        corrected = None  # the buffer corrected tiles are written to (the largest tile's)
        if corrections is not None:
            largest = max(math.prod(sl.shape) for sl in scheme.slices)
            corrected = scratch.empty(scheme.depth * largest, read_dtype)
        if context.layout is not None:  # (the raw frames, for UDFs that move their sums)
            tiles = context.layout.dataset.iter_flat_tiles(
                present, context.layout_scheme, tile_dtype, block
            )
        elif source == BACKEND_NUMPY:
            tiles = dataset.iter_flat_tiles(present, scheme, tile_dtype, block)
        else:
            tiles = _native_tiles(dataset, present, scheme, tile_dtype, block, source)
        for data, first, s, flat in tiles:
            forms = None  # the tile in the array types of UDFs that want no numpy
            if source != BACKEND_NUMPY:
                forms = TileForms(data, source, scheme.slices[s].shape)
                if any(b.dense for b in bound):
                    data = forms.dense()  # (once per tile, for the UDFs that want numpy)
                    flat = flat_of(data)
            if corrections is not None:
                whole = len(scheme) == 1
                data = corrections.apply(
                    data, read_dtype, None if whole else sig_indices[s], corrected, flat
                )
                flat = flat_of(data)
            if forms is None:
                forms = TileForms(data, BACKEND_NUMPY, scheme.slices[s].shape)
            if isinstance(data, np.ndarray):
                data = read_only(data)
            if flat is not None:
                flat = (read_only(flat[0]), *flat[1:])
            n = data.shape[0]
            sig_slice = scheme.slices[s]
            sig_index = sig_indices[s]
            at = int(k0) + first
            stats = None
            for b in bound:
                udf, meta = b.udf, b.udf.meta
                if not b.dense:
                    _process_other(b, forms, origin, at, sig_slice, sig_index, s)
                    continue
                if b.method is UDFMethod.TILE:
                    meta.set_slice(origin + at, n, sig_slice, s)
                    b.set_views(slice(at, at + n), sig_index, s)
                    if b.process_flat is None:
                        try:
                            b.process(data)
                        except ValueError as e:
                            raise _written_tile(udf, "process_tile", e) from e
                        continue
                    if flat is None:
                        flat = _flat_copy(data)
                    if b.shared is not None:
                        if stats is None:
                            stats = b.shared.compute(flat[0], flat[1], flat[2], s)
                        b.process_shared(stats)
                    else:
                        b.process_flat(*flat)
                elif b.method is UDFMethod.FRAME:
                    for i in range(n):
                        meta.set_slice(origin + at + i, 1, sig_slice, s)
                        b.set_views(slice(at + i, at + i + 1), sig_index, s, frame=True)
                        try:
                            b.process(data[i])
                        except ValueError as e:
                            raise _written_tile(udf, "process_frame", e) from e
                else:
                    meta.set_slice(origin + at, n, sig_slice, s)
                    b.set_views(slice(at, at + n), sig_index, s)
                    try:
                        b.process(data)
                    except ValueError as e:
                        raise _written_tile(udf, "process_partition", e) from e

    out = []
    for b in bound:
        b.udf.meta.set_slice(origin, n_sel, full_sig, None)
        b.set_views(None, None)
        if hasattr(b.udf, "postprocess"):
            b.udf.postprocess()
        b.udf.cleanup()
        out.append({k: to_host(a) for k, a in b.arrays.items()})
    return out


def _native_tiles(dataset: DataSet, present, scheme: TilingScheme, dtype, block, source: str):
    """``(tile, first, scheme index, None)`` in the dataset's native array type `source`."""
    for tile, first, s in dataset.iter_tiles(present, scheme, dtype, block, array_backend=source):
        yield tile, first, s, None


def _process_other(
    b: _Bound, forms: TileForms, origin: int, at: int, sig_slice, sig_index, s: int
) -> None:
    """Hand the tile in the UDF's backend (not numpy) to its process method; `at`: the
    tile's first frame among the partition's selected ones, `origin`: the partition's."""
    meta = b.udf.meta
    tile = forms.get(b.target) if b.method is not UDFMethod.FRAME else forms.tile
    n = tile.shape[0]
    if b.method is UDFMethod.FRAME:
        for i in range(n):
            meta.set_slice(origin + at + i, 1, sig_slice, s)
            b.set_views(slice(at + i, at + i + 1), sig_index, s, frame=True)
            b.process(forms.frame(b.target, i))
        return
    meta.set_slice(origin + at, n, sig_slice, s)
    b.set_views(slice(at, at + n), sig_index, s)
    b.process(tile)
