"""The partition task: stream a partition's tiles through every UDF of a run.

`PartitionJob` is what every partition task of a run shares (one node of the graph,
:mod:`ltdask.udf.graph`); `partition_task` runs one partition and returns each UDF's
partial buffers in a `PartitionCell`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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
from ltdask.udf.backends import TileForms, for_this_worker, on_device, to_host
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


class _BoundUDF:
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
    (nav buffers ROI-compressed and partition sized). The run's path
    (:mod:`ltdask.udf.paths`) delivers the frames; `corrections`: those applied to every
    tile, or None."""
    context = for_this_worker(context)  # (a GPU worker's partitions run its way)
    sig_shape = context.sig_shape
    selected = context.roi.positions(partition.start, partition.stop)
    origin = context.roi.count_before(partition.start)
    place = PartitionPlace(selected, origin, scheme)
    if selected.size == 0:
        # no frame of the ROI here: nothing of the UDFs runs (as LiberTEM, which makes no
        # task for it); empty nav buffers keep the result's chunks
        out = []
        for template in udfs:
            specs = stored_buffers(declared_buffers(bind(template, context, place)))
            out.append({k: s.allocate(0, sig_shape, k) for k, s in specs.items()})
        return out
    full_sig = Slice.full(Shape(sig_shape, sig_dims=len(sig_shape)))
    plan = context.backends
    targets = plan.targets if plan is not None else (BACKEND_NUMPY,) * len(udfs)
    bound = []
    for template, target in zip(udfs, targets, strict=True):
        b = _BoundUDF(bind(template, context, place, backend=target), selected, sig_shape, target)
        b.udf.meta.set_slice(origin, selected.size, full_sig, None)
        b.set_views(None, None)
        b.udf.task_data = Namespace(b.udf.get_task_data() or {})
        if hasattr(b.udf, "preprocess"):
            b.udf.preprocess()
        bound.append(b)
    pstart, pstop = dataset.present_range
    k0, k1 = (int(k) for k in np.searchsorted(selected, [pstart, pstop]))
    if k1 > k0:
        feed = PartitionFeed(dataset, selected[k0:k1], k0, origin, scheme, bound, context)
        feed.block, feed.corrections = block, corrections
        context.path.deliver(feed)
    out = []
    for b in bound:
        b.udf.meta.set_slice(origin, selected.size, full_sig, None)
        b.set_views(None, None)
        if hasattr(b.udf, "postprocess"):
            b.udf.postprocess()
        b.udf.cleanup()
        out.append({k: to_host(a) for k, a in b.arrays.items()})
    return out


class PartitionFeed:
    """A partition task's frames on their way to the bound UDFs: what a run's path
    (`ltdask.udf.paths.TilePath`) delivers them through. `present`: the selected
    positions of the partition whose frames exist, from its `first`-th selected one; its
    first selected one is the `origin`-th of the run."""

    def __init__(self, dataset, present, first: int, origin: int, scheme, bound, context):
        self.dataset: DataSet = dataset
        self.present: np.ndarray = present
        self.scheme: TilingScheme = scheme
        self.bound: list[_BoundUDF] = bound
        #: the run's input dtype: that of the tiles, unless the path reads the data's
        #: integers (`RunContext.tile_dtype`)
        self.read_dtype: np.dtype = context.input_dtype
        seen = self.read_dtype if context.tile_dtype is None else context.tile_dtype
        plan = context.backends
        #: the array type the dataset delivers
        self.source: str = BACKEND_NUMPY if plan is None else plan.source
        self.block = None
        #: the corrections applied to every tile (prepared), or None
        self.corrections: Any = None
        self._first = first
        self._origin = origin
        flat_udfs = [b for b in bound if b.process_flat is not None]
        shared = SharedStats.make([b.udf for b in flat_udfs], seen)
        if shared is not None:
            for b in flat_udfs:
                if shared.wants(b.udf):
                    b.shared = shared

    def point(self, b: _BoundUDF, first: int, n: int, s: int, frame: bool = False) -> None:
        """Point UDF `b` at `n` frames from the `first` present one, cut to slice `s` of
        the scheme (`frame`: a single frame, for ``process_frame``)."""
        at = self._first + first
        b.udf.meta.set_slice(self._origin + at, n, self.scheme.slices[s], s)
        b.set_views(slice(at, at + n), self.scheme.sig_indices[s], s, frame=frame)

    def consume(self, tiles: Iterable[tuple[Any, int, int, tuple | None]]) -> None:
        """Hand every UDF the tiles ``(data, first, scheme index, flat)`` (as
        `DataSet.iter_flat_tiles` yields them), corrected where the run corrects them."""
        source, corrections, whole = self.source, self.corrections, len(self.scheme) == 1
        dense = any(b.dense for b in self.bound)
        corrected = None  # the buffer corrected tiles are written to (the largest tile's)
        if corrections is not None:
            largest = max(math.prod(sl.shape) for sl in self.scheme.slices)
            corrected = scratch.empty(self.scheme.depth * largest, self.read_dtype)
        for data, first, s, flat in tiles:
            forms = None  # the tile in the array types of UDFs that want no numpy
            if source != BACKEND_NUMPY:
                forms = TileForms(data, source, self.scheme.slices[s].shape)
                if dense:
                    data = forms.dense()  # (once per tile, for the UDFs that want numpy)
                    flat = flat_of(data)
            if corrections is not None:
                index = None if whole else self.scheme.sig_indices[s]
                data = corrections.apply(data, self.read_dtype, index, corrected, flat)
                flat = flat_of(data)
            if forms is None:
                forms = TileForms(data, BACKEND_NUMPY, self.scheme.slices[s].shape)
            if isinstance(data, np.ndarray):
                data = read_only(data)
            if flat is not None:
                flat = (read_only(flat[0]), *flat[1:])
            stats = None
            for b in self.bound:
                if not b.dense:
                    self._give_other(b, forms, first, s)
                elif b.method is UDFMethod.FRAME:
                    for i in range(data.shape[0]):
                        self.point(b, first + i, 1, s, frame=True)
                        _process(b, "process_frame", data[i])
                elif b.process_flat is None:
                    self.point(b, first, data.shape[0], s)
                    _process(b, f"process_{b.method.value}", data)
                else:
                    self.point(b, first, data.shape[0], s)
                    if flat is None:
                        flat = _flat_copy(data)
                    if b.shared is None:
                        b.process_flat(*flat)
                        continue
                    if stats is None:
                        stats = b.shared.compute(flat[0], flat[1], flat[2], s)
                    b.process_shared(stats)

    def _give_other(self, b: _BoundUDF, forms: TileForms, first: int, s: int) -> None:
        """Hand the tile in the UDF's backend (not numpy) to its process method."""
        if b.method is UDFMethod.FRAME:
            for i in range(forms.tile.shape[0]):
                self.point(b, first + i, 1, s, frame=True)
                b.process(forms.frame(b.target, i))
            return
        tile = forms.get(b.target)
        self.point(b, first, tile.shape[0], s)
        b.process(tile)


def _process(b: _BoundUDF, method: str, data) -> None:
    try:
        b.process(data)
    except ValueError as e:
        raise _written_tile(b.udf, method, e) from e
