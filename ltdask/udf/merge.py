"""Merging the partial buffers of a run's partitions, per UDF, in one of three ways:

* nav-only UDFs without their own ``merge``: each partition's nav buffers become one chunk
  of the result (no merge step at all);
* UDFs with ``merge_all``: one call with the partial buffers of the partitions that have
  ROI frames, on dask arrays on the main node, or, for UDFs that say it works on numpy
  (``TilePaths.merge_all_on_numpy``) and whose partials are small, on numpy in one task;
* UDFs with only ``merge``: LiberTEM's sequence of ``merge`` calls into the dataset-sized
  buffers, one partition after the other (a chain of tasks).

`merged` picks the way; the result is each stored buffer over the whole run as a dask
array (nav ones flat and un-compressed), which :mod:`ltdask.udf.results` hands to
``get_results``.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ltdask.exceptions import UDFError
from ltdask.udf.bind import RunContext, bind, dataset_params, show_valid_nav
from ltdask.udf.buffers import Namespace, declared_buffers
from ltdask.udf.graph import PartitionGraph
from ltdask.udf.interface import UDFBase, overrides
from ltdask.udf.paths import tile_paths
from ltdask.udf.tasks import TaskRef, pick_array, task_delayed

#: partitions merged per task of a `merge` chain
MERGE_GROUP = 8
#: merge_all runs in one task when all partial results together are at most this large
MERGE_IN_ONE_TASK_BYTES = 256 * 2**20


def merged(graph: PartitionGraph, u: int) -> dict:
    """Each stored buffer of UDF `u` merged over all partitions: nav ones flat and
    un-compressed, the others in their own shape (dask arrays)."""
    plan = graph.plan
    udf = plan.bound_udfs[u]
    stored = plan.stored(u)
    if graph.folded is not None and u in graph.folded:
        return _from_folded(graph, u, stored)
    if overrides(udf, "merge_all"):
        partial_bytes = sum(
            math.prod(s.shape(0, plan.sig_shape)) * s.dtype.itemsize for s in stored.values()
        ) * len(plan.partitions)
        if (
            tile_paths(udf).merge_all_on_numpy
            and all(s.kind != "nav" for s in stored.values())
            and partial_bytes <= MERGE_IN_ONE_TASK_BYTES
        ):
            return _merge_all_in_task(graph, u, stored)
        return _merge_all(graph, u, stored)
    if overrides(udf, "merge"):
        return _merge_fold(graph, u, stored)
    return {name: graph.nav_full(u, name) for name in stored}


def initial_state(template: UDFBase, context: RunContext, stored) -> dict[str, np.ndarray]:
    """The dataset-sized buffers a merge starts from: zeros, then ``preprocess`` with
    whole-dataset views (as on LiberTEM's main node); numpy."""
    n_sel = context.n_sel
    udf = bind(template, context, valid_nav=context.roi.scatter(np.zeros(n_sel, dtype=bool)))
    arrays = {k: s.allocate(n_sel, context.sig_shape, k) for k, s in stored.items()}
    # the result_only buffers are there as None (as in the partition tasks)
    views = dict(arrays)
    views.update((k, None) for k, s in declared_buffers(udf).items() if s.use == "result_only")
    udf.results = Namespace.over(views, assign_in_place=True, buffers=True)
    udf.params = dataset_params(template, context)
    udf.task_data = Namespace({})
    if hasattr(udf, "preprocess"):
        udf.preprocess()
    return arrays


def checked_merge_all(udf: UDFBase, ordered: OrderedDict, stored: dict) -> dict:
    """``udf.merge_all(ordered)`` (no call without partitions to merge), checked: a dict of
    declared, stored buffers."""
    merged = udf.merge_all(ordered) if ordered else {}  # type: ignore[attr-defined]
    cls = type(udf).__name__
    if not isinstance(merged, dict):
        raise UDFError(f"{cls}.merge_all must return a dict")
    unknown = set(merged) - set(stored)
    if unknown:
        raise UDFError(f"{cls}.merge_all returned undeclared buffers {sorted(unknown)}")
    return merged


def _bind_merge_all(udf: UDFBase, context: RunContext, valid_flat: np.ndarray) -> None:
    """What `udf` sees in ``merge_all``: aux data for the dataset (ROI applied), and the
    run's valid nav mask."""
    show_valid_nav(udf, context, valid_flat)
    udf.params = dataset_params(udf, context)


def _merge_all(graph: PartitionGraph, u: int, stored) -> dict:
    """``merge_all`` on the main node, on dask arrays of the partial buffers."""
    import dask.array as da

    plan = graph.plan
    udf = plan.bound_udfs[u]
    partials = {name: graph.partials(u, name) for name in stored}
    todo = graph.to_merge()  # as LiberTEM: partitions without ROI frames are left out
    ordered = OrderedDict(
        (key, Namespace({name: partials[name][i] for name in stored}, buffers=True))
        for i, key in zip(todo, graph.merge_keys(todo), strict=True)
    )
    _bind_merge_all(udf, plan.context, graph.valid_flat)
    merged = checked_merge_all(udf, ordered, stored)
    initial = None
    out = {}
    for name, spec in stored.items():
        if name in merged:
            value = merged[name]
        else:
            if initial is None:
                initial = initial_state(plan.udfs[u], plan.context, stored)
            value = initial[name]
        value = da.asarray(value)
        if spec.kind == "nav":
            value = graph.expand(value.reshape((-1, *spec.extra_shape)), spec.dtype)
        out[name] = value.astype(spec.dtype, copy=False)
    return out


def _merge_all_in_task(graph: PartitionGraph, u: int, stored) -> dict:
    """``merge_all`` in one task on the partial results as numpy arrays: for UDFs that
    say it works on numpy (``TilePaths.merge_all_on_numpy``) and whose partials are small; a
    graph of two layers instead of dozens."""
    plan = graph.plan
    todo = graph.to_merge()
    merge = _MergeAll(
        plan.udfs[u], u, graph.merge_keys(todo), plan.context, graph.valid_flat, stored
    )
    merged = task_delayed(
        f"ltdask-merge-all-{u}-{graph.token}",
        merge,
        *(graph.cell(i) for i in todo),
        deps=[graph.partition_results],
    )
    return {
        name: pick_array(merged, name, spec.shape(plan.n_sel, plan.sig_shape), spec.dtype)
        for name, spec in stored.items()
    }


class _MergeAll:
    """``merge_all`` of one UDF on the partition tasks' numpy results, in one task."""

    def __init__(self, template, u, keys, context: RunContext, valid_flat, stored):
        # no initial buffers here: dataset-sized, they would travel in the graph (32 MiB
        # for a float64 sum of 2048 x 2048 frames); the task makes them where needed
        self.template = template
        self.u = u
        self.keys = keys
        self.context = context
        self.valid_flat = valid_flat
        self.stored = stored

    def __call__(self, *cells):
        context, stored, u = self.context, self.stored, self.u
        udf = bind(self.template, context)
        _bind_merge_all(udf, context, self.valid_flat)
        ordered = OrderedDict(
            (key, Namespace({name: cell[0][u][name] for name in stored}, buffers=True))
            for key, cell in zip(self.keys, cells, strict=True)
        )
        merged = checked_merge_all(udf, ordered, stored)
        if any(name not in merged for name in stored):
            initial = initial_state(self.template, context, stored)
            merged = {name: merged.get(name, initial[name]) for name in stored}
        return {
            name: np.asarray(merged[name])
            .astype(spec.dtype, copy=False)
            .reshape(spec.shape(context.n_sel, context.sig_shape))
            for name, spec in stored.items()
        }


def _merge_fold(graph: PartitionGraph, u: int, stored) -> dict:
    """``merge(dest, src)`` as LiberTEM calls it: into the dataset-sized buffers, after
    ``preprocess`` on them, one partition after the other (partitions without ROI
    frames are left out); `dest`'s nav buffers are the partition's part of them. A chain
    of tasks of `MERGE_GROUP` partitions each, updating the buffers in place."""
    plan = graph.plan
    template, context = plan.udfs[u], plan.context
    state = task_delayed(
        f"ltdask-merge-init-{u}-{graph.token}", initial_state, template, context, stored
    )
    starts = np.concatenate([[0], np.cumsum(plan.counts)]).astype(int)
    todo = graph.to_merge()
    for k in range(0, len(todo), MERGE_GROUP):
        group = todo[k : k + MERGE_GROUP]
        bounds = [(int(starts[i]), int(starts[i + 1])) for i in group]
        state = task_delayed(
            f"ltdask-merge-{u}-{k}-{graph.token}",
            _merge_group,
            TaskRef(state.key),
            template,
            u,
            context,
            stored,
            bounds,
            *(graph.cell(i) for i in group),
            deps=[state, graph.partition_results],
        )
    out = {}
    for name, spec in stored.items():
        arr = pick_array(state, name, spec.shape(plan.n_sel, plan.sig_shape), spec.dtype)
        out[name] = graph.expand(arr, spec.dtype) if spec.kind == "nav" else arr
    return out


def _merge_group(state, template, u, context: RunContext, stored, bounds, *cells):
    """Merge the partitions of `cells` (ROI-compressed positions `bounds`) into `state`, in
    place: the chain holds the only reference to it."""
    for (start, stop), cell in zip(bounds, cells, strict=True):
        merged_before = np.zeros(context.n_sel, dtype=bool)
        merged_before[:start] = True
        udf = bind(template, context, valid_nav=context.roi.scatter(merged_before))
        udf.params = dataset_params(template, context, (start, stop))
        views = {
            name: state[name][start:stop] if spec.kind == "nav" else state[name]
            for name, spec in stored.items()
        }
        udf.merge(
            Namespace(views, assign_in_place=True, buffers=True),
            Namespace(cell[0][u], buffers=True),
        )
    return state


class RunningMerges:
    """The partitions of a run done so far merged as they finish (an iterated run of a live
    acquisition): for each UDF with its own ``merge``, dataset-sized buffers after
    ``preprocess`` into which each finished partition is merged (LiberTEM's way, on its
    main node), so that its partial buffers can go: the memory held does not grow with the
    partitions processed (a sum's partial is a frame per partition). UDFs with only
    ``merge_all`` keep their partials."""

    def __init__(self, plan) -> None:
        self.states = {
            u: initial_state(plan.udfs[u], plan.context, plan.stored(u))
            for u, udf in enumerate(plan.bound_udfs)
            if overrides(udf, "merge")
        }

    def add(self, plan, cells, idx) -> None:
        """Merge the partitions `idx` (their `cells`, in order) and let their partials of
        the merged UDFs go."""
        starts = np.concatenate([[0], np.cumsum(plan.counts)]).astype(int)
        todo = [i for i in idx if plan.counts[i]]
        bounds = [(int(starts[i]), int(starts[i + 1])) for i in todo]
        for u, state in self.states.items():
            boxed = [[cells[i]] for i in todo]  # (a cell as the partition tasks give it)
            _merge_group(state, plan.udfs[u], u, plan.context, plan.stored(u), bounds, *boxed)
        for i in idx:
            cells[i] = [None if u in self.states else p for u, p in enumerate(cells[i])]

    def copy(self) -> dict:
        """The states as they are now, copied: ``{udf index: {buffer: array}}``."""
        return {
            u: {k: np.array(v, copy=True) for k, v in s.items()} for u, s in self.states.items()
        }


def _from_folded(graph: PartitionGraph, u: int, stored) -> dict:
    """UDF `u`'s buffers from its running merge (`RunningMerges`)."""
    import dask.array as da

    state = graph.folded[u]  # type: ignore[index]
    return {
        name: graph.expand(da.asarray(state[name]), spec.dtype)
        if spec.kind == "nav"
        else da.asarray(state[name])
        for name, spec in stored.items()
    }


__all__ = [
    "RunningMerges",
    "MERGE_GROUP",
    "MERGE_IN_ONE_TASK_BYTES",
    "checked_merge_all",
    "initial_state",
    "merged",
]
