"""Compile UDF runs into dask graphs and assemble their results as xarray Datasets.

One task per partition (a 1-D object dask array ``cells``, one block per partition) runs
every UDF of the run over the partition's tiles and returns their partial buffers. Then,
per UDF:

* nav-only UDFs without their own ``merge``: each partition's nav buffers become one chunk
  of the result (no merge step at all);
* UDFs with ``merge_all``: one call with the partial buffers of the partitions that have
  ROI frames (dask arrays, or numpy in one task);
* UDFs with only ``merge``: LiberTEM's sequence of ``merge`` calls into the dataset-sized
  buffers, one partition after the other (a chain of tasks);

then ``get_results`` runs on dask arrays and the results become an `xarray.Dataset`.
Internally nav results are flat ``(nav_size, *extra)`` arrays with fill values outside the
ROI, chunked by partition.
"""

from __future__ import annotations

import math
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from dask.sizeof import sizeof

from ltdask import _config
from ltdask.common import Shape
from ltdask.exceptions import MergeNotImplementedError, UDFError, UndeclaredResultError, warn
from ltdask.io.dataset import DataSet
from ltdask.io.fileset import keeping_maps
from ltdask.io.tiling import TilingPreferences, TilingScheme
from ltdask.udf.base import UDF, AuxData, MaskedResult, UDFMethod, overrides, raw_params
from ltdask.udf.buffers import (
    BufferSpec,
    BufferView,
    Namespace,
    ResultsNamespace,
    expand_nav,
    filled,
)
from ltdask.udf.meta import UDFMeta
from ltdask.udf.runner import RUN_ID, declared_buffers, run_partition, selected_positions
from ltdask.udf.tasks import DataNode, Task, TaskRef, block_key, task_array, task_delayed

#: partitions merged per task of a `merge` chain
MERGE_GROUP = 8
#: merge_all runs in one task when all partial results together are at most this large
MERGE_IN_ONE_TASK_BYTES = 256 * 2**20


def normalize_roi(roi, dataset: DataSet) -> np.ndarray | None:
    """The ROI as a flat boolean array of the nav size, or None; clear errors otherwise.

    Accepted, as LiberTEM: a boolean array of the nav shape or the flat nav size; a sparse
    array (pydata ``sparse``, ``scipy.sparse``); a tuple of ints (one position); a list or
    tuple of ``(coordinates, value)`` pairs that all share one value (the other positions
    get the other). Other dtypes are cast to bool with a warning.
    """
    if roi is None:
        return None
    nav = dataset.nav_shape
    if isinstance(roi, (list, tuple)):
        roi = _roi_from_coordinates(roi, nav)
    if hasattr(roi, "todense"):
        roi = roi.todense()
    roi = np.asarray(roi)
    if roi.shape != nav and roi.shape != (math.prod(nav),):
        raise UDFError(
            f"roi of shape {roi.shape} does not fit the dataset's nav shape {nav} "
            f"(or its flat size {math.prod(nav)})"
        )
    if roi.dtype.kind not in "biuf":
        raise UDFError(f"roi must be a boolean (or numeric) array, got dtype {roi.dtype}")
    if roi.dtype != bool:
        warn(f"ROI dtype is {roi.dtype}, expected bool; casting it to bool", UserWarning)
        roi = roi.astype(bool)
    return np.ascontiguousarray(roi.reshape(-1)).copy()


def _roi_from_coordinates(items, nav: tuple[int, ...]) -> np.ndarray:
    if all(isinstance(i, (int, np.integer)) for i in items):
        items = [(tuple(items), True)]
    try:
        pairs = [(tuple(int(c) for c in coords), bool(value)) for coords, value in items]
    except (TypeError, ValueError):
        raise UDFError(
            f"roi={items!r}: a list or tuple ROI holds (coordinates, value) pairs, e.g. "
            "[((0, 1), True), ((2, 3), True)], or is one position as a tuple of ints"
        ) from None
    values = {v for _, v in pairs}
    if len(values) > 1:
        raise UDFError(f"roi={items!r}: all pairs need the same value, got both True and False")
    value = values.pop() if values else True
    roi = np.full(nav, not value, dtype=bool)
    for coords in (c for c, _ in pairs):
        if len(coords) != len(nav) or not all(0 <= c < n for c, n in zip(coords, nav, strict=True)):
            raise UDFError(f"roi: position {coords} is not in the nav shape {nav}")
        roi[coords] = value
    return roi


def input_dtype(dataset: DataSet, udfs: list[UDF]) -> np.dtype:
    """``numpy.result_type`` of the data's dtype and every UDF's preferred dtype."""
    dtype = dataset.dtype
    for udf in udfs:
        dtype = np.result_type(udf.get_preferred_input_dtype(), dtype)
    return dataset.run_dtype(dtype)


def _preferences(udf: UDF) -> TilingPreferences:
    method = udf.get_method()
    prefs = udf.get_tiling_preferences() or {}
    depth = prefs.get("depth", UDF.TILE_DEPTH_DEFAULT)
    size = prefs.get("total_size", UDF.TILE_SIZE_MAX)
    return TilingPreferences(method.value, depth=depth, total_size=size)


def _check_method(udf: UDF) -> UDFMethod:
    method = udf.get_method()
    if not isinstance(method, UDFMethod):
        try:
            method = UDFMethod(method)
        except ValueError:
            raise UDFError(
                f"{type(udf).__name__}.get_method() returned {method!r}; expected a member "
                "of UDF.UDF_METHOD"
            ) from None
    if not hasattr(udf, f"process_{method.value}"):
        raise UDFError(
            f"{type(udf).__name__}.get_method() chose {method.value!r} but the class has no "
            f"process_{method.value}"
        )
    return method


#: datasets (by token) that UDF runs of this process have read, most recent last
_READ_BEFORE: OrderedDict[str, None] = OrderedDict()


def read_before(key: str) -> bool:
    """Whether an earlier run of this process read the dataset of token `key` (its files
    unchanged: the token covers their size and time); notes this one. Runs over such
    datasets keep their memory maps (see `MapCache`)."""
    seen = key in _READ_BEFORE
    _READ_BEFORE[key] = None
    _READ_BEFORE.move_to_end(key)
    while len(_READ_BEFORE) > 256:
        _READ_BEFORE.popitem(last=False)
    return seen


@dataclass(slots=True)
class PartitionJob:
    """What every partition task of a run shares: one node of the graph, so that the
    dataset, the UDFs and the ROI travel once per worker, not once per task."""

    dataset: DataSet
    partitions: list
    udfs: list
    scheme: TilingScheme
    read_dtype: np.dtype
    roi_flat: np.ndarray | None
    #: whether the tasks keep their memory maps (see `read_before`)
    keep_maps: bool
    #: detector corrections for the dataset's signal shape, or None
    corrections: object = None
    #: a fresh id per run, for per-process caches of a run's derived data
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)


def _partition_task(job: PartitionJob, index: int, block=None):
    p = job.partitions[index]
    try:
        run = RUN_ID.set(job.run_id)
        try:
            with keeping_maps(job.keep_maps):
                partials = run_partition(
                    job.dataset,
                    p,
                    job.udfs,
                    job.scheme,
                    job.read_dtype,
                    job.roi_flat,
                    block,
                    job.corrections,
                )
        finally:
            RUN_ID.reset(run)
    except UDFError:
        raise
    except Exception as e:
        names = ", ".join(type(u).__name__ for u in job.udfs)
        e.add_note(
            f"ltdask: while running {names} on partition {index} (frames {p.start}:{p.stop})"
        )
        raise
    out = np.empty(1, dtype=object).view(PartitionCell)
    out[0] = partials
    return out


class PartitionCell(np.ndarray):
    """A partition task's result: a 1-element object array (a block of ``Run.cells``)
    holding every UDF's partial buffers. ``dask.sizeof`` counts those buffers (a plain
    object array counts 8 bytes), so distributed's memory accounting sees them."""


@sizeof.register(PartitionCell)
def _sizeof_cell(cell) -> int:
    # cell[0]: one dict of partial buffers per UDF
    return 64 + sum(sizeof(a) for partials in cell[0] for a in partials.values())


class Run:
    """The graph of one run: a dataset, the UDFs that share its tiles, a ROI."""

    def __init__(self, dataset: DataSet, udfs: list[UDF], roi=None, corrections=None):
        from dask.base import tokenize

        if isinstance(udfs, UDF):
            udfs = [udfs]
        udfs = list(udfs)
        if not udfs:
            raise UDFError("empty list of UDFs - nothing to do!")
        for u in udfs:
            if not isinstance(u, UDF):
                raise UDFError(f"{u!r} is not an ltdask.UDF instance")
        self.dataset = dataset
        self.udfs = udfs
        self.roi_flat = normalize_roi(roi, dataset)
        self.read_dtype = input_dtype(dataset, udfs)
        #: the `CorrectionSet` of the run and its form for the dataset's signal shape
        self.corrections = corrections
        self.prepared = None
        if corrections is not None:
            if not hasattr(corrections, "for_shape"):
                raise UDFError(
                    f"corrections={corrections!r}: expected an ltdask.CorrectionSet (dark, gain, "
                    "excluded_pixels)"
                )
            if corrections.have_corrections():
                # corrected frames are floats (as LiberTEM's); tiles are read in the data's
                # own dtype (views of the files where possible) and the correction kernel
                # converts them: one pass, not a decode and then a correction
                self.read_dtype = np.dtype(np.result_type(self.read_dtype, np.float32))
                self.prepared = corrections.for_shape(
                    dataset.sig_shape,
                    dataset.path,
                    tile_dtype=dataset.run_dtype(dataset.dtype),
                    out_dtype=self.read_dtype,
                )
        self.partitions = dataset.get_partitions()
        sig = tuple(dataset.sig_shape)
        self.sig_shape = sig
        self.sizes = tuple(p.num_frames for p in self.partitions)
        self.counts = tuple(selected_positions(p, self.roi_flat).size for p in self.partitions)
        self.n_sel = sum(self.counts)
        valid = dataset.valid_nav_mask().reshape(-1)
        self.valid_flat = valid if self.roi_flat is None else valid & self.roi_flat

        #: partitions whose results exist (None: all); partial results merge only these
        self.ready: np.ndarray | None = None
        self.mains = [self._main_instance(u) for u in udfs]
        for template, main in zip(udfs, self.mains, strict=True):
            template.meta = main.meta  # as LiberTEM: the instance given knows the run
        self.specs = [declared_buffers(m) for m in self.mains]
        memory = _config.total_memory()
        for specs in self.specs:
            for name, spec in specs.items():
                # results come back to this process, nav ones at the full nav size
                spec.check_fits(dataset.num_frames, sig, name, memory)
        methods = [_check_method(m) for m in self.mains]
        for m, specs in zip(self.mains, self.specs, strict=True):
            self._check_mergeable(m, specs)
        consumers = [_preferences(m) for m in self.mains]
        excluded = None if self.prepared is None else self.prepared.excluded_coordinates
        self.scheme = dataset.negotiate(
            consumers, self.read_dtype, self.roi_flat, excluded=excluded
        )
        if any(meth is not UDFMethod.TILE for meth in methods) and len(self.scheme) != 1:
            raise UDFError(
                f"{dataset.path}: frame and partition UDFs need whole frames, but the "
                f"negotiated tiles cut the frame into {len(self.scheme)} slices"
            )
        # the dataset's token stats its files: once per run
        dataset_token = tokenize(dataset)
        self.token = tokenize(
            dataset_token, udfs, self.roi_flat, self.read_dtype.str, self.scheme, self.prepared
        )
        job = PartitionJob(
            dataset.for_task(),
            self.partitions,
            udfs,
            self.scheme,
            self.read_dtype,
            self.roi_flat,
            read_before(dataset_token),
            self.prepared,
        )
        name = f"ltdask-udf-{self.token}"
        job_key = f"ltdask-job-{self.token}"
        tasks = {job_key: DataNode(job_key, job)}
        deps = []
        blocks = dataset.partition_blocks()
        if blocks is not None:
            # one block per partition, the signal in one chunk
            flat = blocks.reshape((dataset.num_frames, *sig))
            deps.append(flat)
        for i in range(len(self.partitions)):
            args = [TaskRef(job_key), i]
            if deps:
                args.append(TaskRef(block_key(flat.name, i, flat.ndim)))
            tasks[(name, i)] = Task((name, i), _partition_task, *args)
        self.cells = task_array(name, tasks, ((1,) * len(self.partitions),), object, deps)

    def done(self):
        """A dask array of one True per partition, computed when the partition tasks are:
        what runs a run whose UDFs have no results (their ``process_*`` still must run)."""
        out = f"ltdask-done-{self.token}"
        tasks = {
            (key := block_key(out, i, 1)): Task(key, _done, self._cell(i))
            for i in range(len(self.partitions))
        }
        return task_array(out, tasks, ((1,) * len(self.partitions),), bool, [self.cells])

    def _to_merge(self) -> list[int]:
        """The partitions a merge takes, in order: those with ROI frames (and results)."""
        return [
            i
            for i in range(len(self.partitions))
            if self.counts[i] and (self.ready is None or self.ready[i])
        ]

    def initial_state(self, u: int) -> dict[str, np.ndarray]:
        """UDF `u`'s dataset-sized buffers after ``preprocess`` on them (numpy)."""
        return _initial_state(self.udfs[u], self._meta_args(), self._stored(u))

    def _cell(self, i: int) -> TaskRef:
        return TaskRef((self.cells.name, i))

    def _roi_part(self, i: int):
        if self.roi_flat is None:
            return None
        p = self.partitions[i]
        return self.roi_flat[p.start : p.stop]

    # -- set up ------------------------------------------------------------------------
    def _meta(self, udf_input_dtype=None) -> UDFMeta:
        ds = self.dataset
        roi_nd = None if self.roi_flat is None else self.roi_flat.reshape(ds.nav_shape)
        meta = UDFMeta(
            ds.shape,
            ds.dtype,
            self.read_dtype if udf_input_dtype is None else udf_input_dtype,
            roi=roi_nd,
            partition_shape=Shape((self.n_sel, *self.sig_shape), sig_dims=len(self.sig_shape)),
        )
        meta.corrections = self.corrections
        return meta

    def _main_instance(self, template: UDF) -> UDF:
        udf = template.copy()
        udf.meta = self._meta()
        return udf

    @staticmethod
    def _check_mergeable(udf: UDF, specs: dict[str, BufferSpec]):
        if overrides(udf, "merge_all") or overrides(udf, "merge"):
            return
        others = [k for k, s in specs.items() if s.kind != "nav" and s.use != "result_only"]
        if others:
            raise MergeNotImplementedError(
                f"{type(udf).__name__} has non-nav buffers {others}; it must implement "
                "merge(dest, src) or merge_all(ordered_results)"
            )

    # -- partial buffers ----------------------------------------------------------------
    def _stored(self, u: int) -> dict[str, BufferSpec]:
        return {k: s for k, s in self.specs[u].items() if s.use != "result_only"}

    def nav_full(self, u: int, name: str):
        """A nav buffer, flat and un-compressed (fill values outside the ROI), one chunk
        per partition, straight from the partition tasks."""
        spec = self.specs[u][name]
        extra = spec.extra_shape
        out = f"ltdask-nav-{name}-{u}-{self.token}"
        ndim = 1 + len(extra)
        tasks = {
            (key := block_key(out, i, ndim)): Task(
                key, _extract_nav, self._cell(i), u, name, self._roi_part(i), spec.dtype
            )
            for i in range(len(self.partitions))
        }
        return task_array(
            out, tasks, (self.sizes, *((e,) for e in extra)), spec.dtype, [self.cells]
        )

    def _partials(self, u: int, name: str):
        """Per-partition partial buffers as one dask array per partition (compressed)."""
        spec = self.specs[u][name]
        shape = spec.shape(0, self.sig_shape)
        if spec.kind == "nav":
            chunks = (self.counts, *((e,) for e in shape[1:]))
        else:
            chunks = ((1,) * len(self.partitions), *((e,) for e in shape))
        out = f"ltdask-partial-{name}-{u}-{self.token}"
        stacked = spec.kind != "nav"
        tasks = {
            (key := block_key(out, i, len(chunks))): Task(
                key, _extract_partial, self._cell(i), u, name, stacked
            )
            for i in range(len(self.partitions))
        }
        arr = task_array(out, tasks, chunks, spec.dtype, [self.cells])
        if spec.kind == "nav":
            return [arr.blocks[i] for i in range(len(self.partitions))]
        return [arr[i] for i in range(len(self.partitions))]

    def expand(self, compressed, spec: BufferSpec):
        """Un-compress a flat ROI-compressed nav array (dask or numpy) into flat nav."""
        import dask.array as da

        if self.roi_flat is None:
            return da.asarray(compressed)
        extra = tuple(compressed.shape[1:])
        if self.n_sel == 0:
            # dask leaves a zero-length axis in one chunk instead of one empty chunk per
            # partition, so there is nothing to map over: the result is all fill values
            full = filled((self.roi_flat.size, *extra), spec.dtype)
            return da.from_array(full, chunks=(self.sizes, *((e,) for e in extra)))
        compressed = da.asarray(compressed).rechunk((self.counts, *extra))
        out = f"ltdask-expand-{compressed.name}"
        ndim = 1 + len(extra)
        tasks = {
            (key := block_key(out, i, ndim)): Task(
                key,
                expand_nav,
                TaskRef(block_key(compressed.name, i, ndim)),
                self._roi_part(i),
                spec.dtype,
            )
            for i in range(len(self.partitions))
        }
        return task_array(
            out, tasks, (self.sizes, *((e,) for e in extra)), spec.dtype, [compressed]
        )

    # -- merging ---------------------------------------------------------------------------
    def merged(self, u: int) -> dict:
        """Each stored buffer of UDF `u` merged over all partitions: nav ones flat and
        un-compressed, the others in their own shape (dask arrays)."""
        udf = self.mains[u]
        stored = self._stored(u)
        if overrides(udf, "merge_all"):
            partial_bytes = sum(
                math.prod(s.shape(0, self.sig_shape)) * s.dtype.itemsize for s in stored.values()
            ) * len(self.partitions)
            if (
                getattr(udf, "MERGE_ALL_ON_NUMPY", False)
                and all(s.kind != "nav" for s in stored.values())
                and partial_bytes <= MERGE_IN_ONE_TASK_BYTES
            ):
                return self._merge_all_in_task(u, stored)
            return self._merge_all(u, stored)
        if overrides(udf, "merge"):
            return self._merge_fold(u, stored)
        return {name: self.nav_full(u, name) for name in stored}

    def _merge_all(self, u: int, stored) -> dict:
        import dask.array as da

        udf = self.mains[u]
        partials = {name: self._partials(u, name) for name in stored}
        ordered = OrderedDict()
        for i in self._to_merge():  # as LiberTEM: partitions without ROI frames are left out
            key = self.partitions[i].slice(self.sig_shape).adjust_for_roi(self.roi_flat)
            ordered[key] = Namespace({name: partials[name][i] for name in stored}, buffers=True)
        self._set_main_views(udf, u, None)
        merged = udf.merge_all(ordered) if ordered else {}
        if not isinstance(merged, dict):
            raise UDFError(f"{type(udf).__name__}.merge_all must return a dict")
        unknown = set(merged) - set(stored)
        if unknown:
            raise UDFError(
                f"{type(udf).__name__}.merge_all returned undeclared buffers {sorted(unknown)}"
            )
        initial = None
        out = {}
        for name, spec in stored.items():
            if name in merged:
                value = merged[name]
            else:
                initial = initial if initial is not None else self.initial_state(u)
                value = initial[name]
            value = da.asarray(value)
            if spec.kind == "nav":
                value = self.expand(value.reshape((-1, *spec.extra_shape)), spec)
            out[name] = value.astype(spec.dtype, copy=False)
        return out

    def _merge_all_in_task(self, u: int, stored) -> dict:
        """``merge_all`` in one task on the partial results as numpy arrays: for UDFs that
        say it works on numpy (``MERGE_ALL_ON_NUMPY``) and whose partials are small; a
        graph of two layers instead of dozens."""
        todo = self._to_merge()
        keys = [
            self.partitions[i].slice(self.sig_shape).adjust_for_roi(self.roi_flat) for i in todo
        ]
        initial = self.initial_state(u)
        merge = _MergeAll(self.udfs[u], u, keys, self._meta_args(), stored, initial)
        merged = task_delayed(
            f"ltdask-merge-all-{u}-{self.token}",
            merge,
            *(self._cell(i) for i in todo),
            deps=[self.cells],
        )
        return {name: self._picked(merged, name, spec, self.n_sel) for name, spec in stored.items()}

    def _picked(self, merged, name: str, spec: BufferSpec, n: int):
        """Buffer `name` of the dict that the Delayed `merged` computes, as a dask array
        of one chunk."""
        shape = spec.shape(n, self.sig_shape)
        out = f"ltdask-pick-{name}-{merged.key}"
        key = (out,) + (0,) * len(shape)
        task = Task(key, _pick, TaskRef(merged.key), name)
        return task_array(out, {key: task}, tuple((e,) for e in shape), spec.dtype, [merged])

    def _merge_fold(self, u: int, stored) -> dict:
        """``merge(dest, src)`` as LiberTEM calls it: into the dataset-sized buffers, after
        ``preprocess`` on them, one partition after the other (partitions without ROI
        frames are left out); `dest`'s nav buffers are the partition's part of them. A chain
        of tasks of `MERGE_GROUP` partitions each, updating the buffers in place."""
        template = self.udfs[u]
        meta_args = self._meta_args()
        state = task_delayed(
            f"ltdask-merge-init-{u}-{self.token}", _initial_state, template, meta_args, stored
        )
        starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(int)
        todo = self._to_merge()
        for k in range(0, len(todo), MERGE_GROUP):
            group = todo[k : k + MERGE_GROUP]
            bounds = [(int(starts[i]), int(starts[i + 1])) for i in group]
            state = task_delayed(
                f"ltdask-merge-{u}-{k}-{self.token}",
                _merge_group,
                TaskRef(state.key),
                template,
                u,
                meta_args,
                stored,
                bounds,
                *(self._cell(i) for i in group),
                deps=[state, self.cells],
            )
        out = {}
        for name, spec in stored.items():
            arr = self._picked(state, name, spec, self.n_sel)
            out[name] = self.expand(arr, spec) if spec.kind == "nav" else arr
        return out

    def _meta_args(self):
        return (
            self.dataset.shape,
            self.dataset.dtype,
            self.read_dtype,
            self.roi_flat,
            self.n_sel,
            self.sig_shape,
            self.corrections,
        )

    # -- results ---------------------------------------------------------------------------
    def _set_main_views(self, udf: UDF, u: int, merged: dict | None):
        udf.meta._set_valid_nav_mask(self.valid_flat, self.roi_flat)
        # merge_all sees aux data for the dataset (ROI applied), get_results the raw data
        if merged is None:
            udf.params = _dataset_params(udf, self.dataset.shape, self.roi_flat)
        else:
            udf.params = raw_params(udf._kwargs)
        if merged is None:
            return {}
        raw = {}
        views = {}
        nav_shape = self.dataset.nav_shape
        for name, value in merged.items():
            spec = self.specs[u][name]
            if spec.kind == "nav":
                raw[name] = value if self.roi_flat is None else value[self.roi_flat]
                data = value.reshape(nav_shape + spec.extra_shape)
                valid = self.valid_flat.reshape(nav_shape)
            else:
                raw[name] = data = value
                valid = np.broadcast_to(np.True_, value.shape)
            views[name] = BufferView(raw[name], data, valid)
        udf.results = ResultsNamespace(raw, views)
        return raw

    def result_arrays(self, u: int) -> dict[str, tuple]:
        """``{name: (data, valid)}`` of the results of UDF `u`: data nav-shaped (dask)."""
        import dask.array as da

        udf = self.mains[u]
        merged = self.merged(u)
        raw = self._set_main_views(udf, u, merged)
        returned = udf.get_results()
        if returned is None:
            returned = {}
        if not isinstance(returned, dict):
            raise UDFError(f"{type(udf).__name__}.get_results must return a dict")
        specs = self.specs[u]
        cls = type(udf).__name__
        for name in returned:
            if name not in specs:
                raise UndeclaredResultError(
                    f"{cls}.get_results returned {name!r}, which is not declared in "
                    "get_result_buffers"
                )
            if specs[name].use == "private":
                raise UDFError(f"{cls}.get_results returned the private buffer {name!r}")
        out = {}
        nav_shape = self.dataset.nav_shape
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
                value = self._nav_result(cls, name, spec, value, is_raw)
            elif value.shape != spec.shape(0, self.sig_shape):
                want = spec.shape(0, self.sig_shape)
                raise UDFError(
                    f"{cls}.get_results: {name!r} has shape {value.shape}, expected {want}"
                )
            out[name] = (value, self._valid(cls, name, spec, value, mask, nav_shape))
        return out

    def _nav_result(self, cls, name, spec, value, is_raw):
        nav_shape = self.dataset.nav_shape
        extra = tuple(value.shape[1:]) if value.ndim else ()
        if is_raw:
            flat = value
        elif value.shape[: len(nav_shape)] == nav_shape and value.ndim >= len(nav_shape):
            return value
        elif value.ndim >= 1 and value.shape[0] == self.n_sel:
            flat = self.expand(value, spec)
        else:
            raise UDFError(
                f"{cls}.get_results: nav result {name!r} has shape {value.shape}; expected "
                f"({self.n_sel}, ...) (flat, ROI-compressed) or {nav_shape + spec.extra_shape}"
            )
        return flat.reshape(nav_shape + extra)

    def _valid(self, cls, name, spec, value, mask, nav_shape):
        if mask is None:
            if spec.kind == "nav":
                base = self.valid_flat.reshape(nav_shape)
                base = base.reshape(base.shape + (1,) * (value.ndim - len(nav_shape)))
                return np.broadcast_to(base, value.shape)
            return np.broadcast_to(np.True_, value.shape)
        import dask.array as da

        mask = mask if isinstance(mask, da.Array) else np.asarray(mask)
        if mask.dtype != bool:
            raise UDFError(f"{cls}: the valid mask of {name!r} has dtype {mask.dtype}, not bool")
        try:
            if isinstance(mask, da.Array):
                return da.broadcast_to(mask, value.shape)
            return np.broadcast_to(mask, value.shape)
        except ValueError:
            raise UDFError(
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


def _dataset_params(udf: UDF, dataset_shape, roi_flat, nav_range=None) -> Namespace:
    """``self.params`` on the main node: aux data for the whole dataset (ROI applied), or
    with nav aux data cut to `nav_range` of the ROI-compressed positions (in ``merge``)."""
    params = dict(udf._kwargs)
    for k, v in params.items():
        if isinstance(v, AuxData):
            flat = v.flat(dataset_shape)
            if v.spec.kind == "nav":
                if roi_flat is not None:
                    flat = flat[roi_flat]
                if nav_range is not None:
                    flat = flat[nav_range[0] : nav_range[1]]
            params[k] = flat
    return Namespace(params)


def _done(cell) -> np.ndarray:
    return np.ones(1, dtype=bool)


def _extract_nav(cell, u, key, roi_part, dtype_):
    arr = cell[0][u][key]
    if roi_part is None:
        return arr
    return expand_nav(arr, roi_part, dtype_)


def _extract_partial(cell, u, key, stacked):
    arr = cell[0][u][key]
    return arr[np.newaxis] if stacked else arr


# -- merge chains (UDFs with only `merge`) ------------------------------------------------
def _merge_udf(template: UDF, meta_args, valid_before: np.ndarray):
    ds_shape, ds_dtype, read_dtype, roi_flat, n_sel, sig_shape, corrections = meta_args
    udf = template.copy()
    roi_nd = None if roi_flat is None else roi_flat.reshape(tuple(ds_shape.nav))
    udf.meta = UDFMeta(
        ds_shape,
        ds_dtype,
        read_dtype,
        roi=roi_nd,
        partition_shape=Shape((n_sel, *sig_shape), sig_dims=len(sig_shape)),
    )
    udf.meta.corrections = corrections
    full = np.zeros(math.prod(ds_shape.nav), dtype=bool)
    if roi_flat is None:
        full[: valid_before.size] = valid_before
    else:
        full[np.flatnonzero(roi_flat)] = valid_before
    udf.meta._set_valid_nav_mask(full, roi_flat)
    return udf


def _preprocess_results(udf: UDF, arrays: dict) -> Namespace:
    """``self.results`` for ``preprocess`` on the main node: the buffers, and the
    ``result_only`` ones as None (as in the partition tasks)."""
    results = Namespace(arrays, assign_in_place=True, buffers=True)
    for name, spec in declared_buffers(udf).items():
        if spec.use == "result_only":
            results._arrays[name] = None
    return results


def _initial_state(template, meta_args, stored) -> dict[str, np.ndarray]:
    """The dataset-sized buffers a `merge` chain starts from: zeros, then ``preprocess``
    with whole-dataset views (as on LiberTEM's main node)."""
    n_sel, sig_shape = meta_args[4], meta_args[5]
    udf = _merge_udf(template, meta_args, np.zeros(n_sel, dtype=bool))
    arrays = {k: s.allocate(n_sel, sig_shape, k) for k, s in stored.items()}
    udf.results = _preprocess_results(udf, arrays)
    udf.params = _dataset_params(template, meta_args[0], meta_args[3])
    udf.task_data = Namespace({})
    if hasattr(udf, "preprocess"):
        udf.preprocess()
    return arrays


def _merge_group(state, template, u, meta_args, stored, bounds, *cells):
    """Merge the partitions of `cells` (ROI-compressed positions `bounds`) into `state`, in
    place: the chain holds the only reference to it."""
    n_sel = meta_args[4]
    for (start, stop), cell in zip(bounds, cells, strict=True):
        merged_before = np.zeros(n_sel, dtype=bool)
        merged_before[:start] = True
        udf = _merge_udf(template, meta_args, merged_before)
        udf.params = _dataset_params(template, meta_args[0], meta_args[3], (start, stop))
        views = {
            name: state[name][start:stop] if spec.kind == "nav" else state[name]
            for name, spec in stored.items()
        }
        udf.merge(
            Namespace(views, assign_in_place=True, buffers=True),
            Namespace(cell[0][u], buffers=True),
        )
    return state


def _pick(mapping, name):
    return mapping[name]


class _MergeAll:
    """``merge_all`` of one UDF on the partition tasks' numpy results, in one task."""

    def __init__(self, template, u, keys, meta_args, stored, initial):
        self.template = template
        self.u = u
        self.keys = keys
        self.meta_args = meta_args
        self.stored = stored
        self.initial = initial

    def __call__(self, *cells):
        meta_args, stored, u = self.meta_args, self.stored, self.u
        udf = _merge_udf(self.template, meta_args, np.zeros(meta_args[4], dtype=bool))
        ordered = OrderedDict(
            (key, Namespace({name: cell[0][u][name] for name in stored}, buffers=True))
            for key, cell in zip(self.keys, cells, strict=True)
        )
        merged = udf.merge_all(ordered) if ordered else {}
        cls = type(self.template).__name__
        if not isinstance(merged, dict):
            raise UDFError(f"{cls}.merge_all must return a dict")
        unknown = set(merged) - set(stored)
        if unknown:
            raise UDFError(f"{cls}.merge_all returned undeclared buffers {sorted(unknown)}")
        return {
            name: np.asarray(merged.get(name, self.initial[name]))
            .astype(spec.dtype, copy=False)
            .reshape(spec.shape(meta_args[4], meta_args[5]))
            for name, spec in stored.items()
        }
