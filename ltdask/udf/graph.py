"""The partition graph of a run: one task per partition, and the per-partition arrays that
merges and results are built from.

A run's ``partition_results`` are a 1-D object dask array, one block per partition, each block the
`PartitionCell` of one partition task (:mod:`ltdask.udf.runner`): every UDF's partial
buffers, nav ones ROI-compressed. The tasks share one job node (the dataset, the UDFs, the
ROI). Everything downstream takes buffers out of the cells by reference (`TaskRef`), so a
run's partition tasks run once however many results use them.

Internally nav results are flat ``(nav_size, *extra)`` arrays with fill values outside the
ROI, chunked by partition (`PartitionGraph.nav_full`, `PartitionGraph.expand`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ltdask.common import Slice
from ltdask.runtime.progress import PARTITION_TASKS
from ltdask.udf.buffers import expand_nav, filled
from ltdask.udf.plan import RunPlan, plan_run
from ltdask.udf.runner import PartitionCell, PartitionJob, partition_task
from ltdask.udf.tasks import (
    DataNode,
    Task,
    TaskRef,
    array_expr,
    block_key,
    leading_block,
    lowered,
    task_array,
)

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["PartitionCell", "PartitionGraph", "Run", "read_before"]

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


@dataclass(frozen=True, eq=False)
class PartitionGraph:
    """The partition tasks of a run (`partition_results`) and what its results are valid for.

    `build` makes the tasks that read the data; `in_memory` wraps partial buffers already
    computed (results of a run partition group by partition group).
    """

    plan: RunPlan
    #: one block per partition: each partition task's partial buffers
    partition_results: da.Array
    #: flat, all positions: where results hold data
    valid_flat: np.ndarray
    #: the base of the names of every array built from `partition_results`
    token: str
    #: the partitions whose partial buffers exist (None: all); merges take only these
    ready: np.ndarray | None = None
    #: UDF index -> its buffers merged over the partitions `ready` so far (dataset-sized,
    #: `ltdask.udf.merge.RunningMerges`): these UDFs' partials are not kept
    folded: dict | None = None

    @classmethod
    def build(cls, plan: RunPlan) -> PartitionGraph:
        """One task per partition, sharing one job node."""
        dataset = plan.dataset
        job = PartitionJob(
            dataset.for_task(),
            plan.partitions,
            plan.udfs,
            plan.scheme,
            plan.context,
            read_before(plan.dataset_token),
            plan.tile_corrections,
        )
        name = f"{PARTITION_TASKS}{plan.token}"
        tasks: dict = {}
        job_arg = _job_arg(job, f"ltdask-job-{plan.token}", tasks, plan.target.on_cluster)
        deps = []
        blocks = dataset.partition_blocks()
        if blocks is not None:
            blocks = lowered(blocks)
            # the nav blocks are the partitions in C order (each a contiguous range of
            # frames), the signal in one chunk; the task takes its block as it is (no
            # reshape layer: array-expr has none, and it would be a task per partition)
            deps.append(blocks)
            nav_blocks = blocks.numblocks[: len(dataset.nav_shape)]
            sig_zeros = (0,) * len(plan.sig_shape)
        for i in range(len(plan.partitions)):
            args: list = [job_arg, i]
            if deps:
                nav_index = tuple(int(j) for j in np.unravel_index(i, nav_blocks))
                args.append(TaskRef((blocks.name, *nav_index, *sig_zeros)))
            tasks[(name, i)] = Task((name, i), partition_task, *args)
        with gpu_annotation(plan):
            cells = task_array(name, tasks, ((1,) * len(plan.partitions),), object, deps)
        return cls(plan, cells, plan.valid_flat, plan.token)

    @classmethod
    def in_memory(
        cls, plan: RunPlan, partials: list, done: np.ndarray, folded: dict | None = None
    ) -> PartitionGraph:
        """The partials of a run at hand: `partials` holds each partition's list of
        per-UDF buffers; only the partitions `done` are merged and valid. `folded`: the
        UDFs whose partials are merged already (see `PartitionGraph.folded`)."""
        import dask.array as da

        box = np.empty(len(partials), dtype=object)
        for i, part in enumerate(partials):
            box[i] = part
        # (a random name: hashing the partials' buffers cost ~0.1 s a live step)
        cells = da.from_array(box, chunks=1, name=False)
        mask = np.zeros_like(plan.valid_flat)
        for i, p in enumerate(plan.partitions):
            if done[i]:
                mask[p.start : p.stop] = True
        token = f"{plan.token}-partial-{int(done.sum())}"
        return cls(plan, cells, plan.valid_flat & mask, token, ready=done, folded=folded)

    # -- the cells ---------------------------------------------------------------------------
    def cell(self, i: int) -> TaskRef:
        """A reference to partition `i`'s cell, as a task argument."""
        return TaskRef((self.partition_results.name, i))

    def to_merge(self) -> list[int]:
        """The partitions a merge takes, in order: those with ROI frames (and results)."""
        counts = self.plan.counts
        return [
            i for i in range(len(counts)) if counts[i] and (self.ready is None or self.ready[i])
        ]

    def merge_keys(self, todo: list[int]) -> list[Slice]:
        """The keys of partitions `todo` in ``merge_all``'s ordered results: their slices of
        the ROI-compressed positions."""
        plan = self.plan
        sig, roi = plan.sig_shape, plan.roi.flat
        return [plan.partitions[i].slice(sig).adjust_for_roi(roi) for i in todo]

    def done(self) -> da.Array:
        """A dask array of one True per partition, computed when the partition tasks are:
        what runs a run whose UDFs have no results (their ``process_*`` still must run)."""
        out = f"ltdask-done-{self.token}"
        n = len(self.plan.partitions)
        tasks = {(key := block_key(out, i, 1)): Task(key, _done, self.cell(i)) for i in range(n)}
        return task_array(out, tasks, ((1,) * n,), bool, [self.partition_results])

    # -- buffers out of the cells --------------------------------------------------------------
    def nav_full(self, u: int, name: str) -> da.Array:
        """A nav buffer, flat and un-compressed (fill values outside the ROI), one chunk
        per partition, straight from the partition tasks."""
        plan, roi = self.plan, self.plan.roi
        spec = plan.specs[u][name]
        extra = spec.extra_shape
        out = f"ltdask-nav-{name}-{u}-{self.token}"
        ndim = 1 + len(extra)
        tasks = {
            (key := block_key(out, i, ndim)): Task(
                key, _extract_nav, self.cell(i), u, name, roi.part(p.start, p.stop), spec.dtype
            )
            for i, p in enumerate(plan.partitions)
        }
        return task_array(
            out, tasks, (plan.sizes, *((e,) for e in extra)), spec.dtype, [self.partition_results]
        )

    def partials(self, u: int, name: str) -> list[da.Array]:
        """Per-partition partial buffers as one dask array per partition (compressed)."""
        plan = self.plan
        spec = plan.specs[u][name]
        shape = spec.shape(0, plan.sig_shape)
        n = len(plan.partitions)
        if spec.kind == "nav":
            chunks = (plan.counts, *((e,) for e in shape[1:]))
        else:
            chunks = ((1,) * n, *((e,) for e in shape))
        out = f"ltdask-partial-{name}-{u}-{self.token}"
        stacked = spec.kind != "nav"
        tasks = {
            (key := block_key(out, i, len(chunks))): Task(
                key, _extract_partial, self.cell(i), u, name, stacked
            )
            for i in range(n)
        }
        arr = task_array(out, tasks, chunks, spec.dtype, [self.partition_results])
        if spec.kind == "nav":
            return [leading_block(arr, i) for i in range(n)]
        return [arr[i] for i in range(n)]

    def compress(self, flat) -> da.Array:
        """The flat nav dask array `flat` at the ROI's positions only (`Selection.compress`);
        under array-expr a task per partition (its integer indexing fails in dask 2026.8:
        ``AttributeError: 'Shuffle' object has no attribute '_token'``)."""
        plan, roi = self.plan, self.plan.roi
        if roi.flat is None or not array_expr():
            return roi.compress(flat)
        extra = tuple(flat.shape[1:])
        ndim = 1 + len(extra)
        out = f"ltdask-compress-{flat.name}"  # (before lowering: its names are not tokens)
        flat = lowered(flat.rechunk((plan.sizes, *((e,) for e in extra))))
        tasks = {
            (key := block_key(out, i, ndim)): Task(
                key, _selected, TaskRef(block_key(flat.name, i, ndim)), roi.part(p.start, p.stop)
            )
            for i, p in enumerate(plan.partitions)
        }
        return task_array(out, tasks, (plan.counts, *((e,) for e in extra)), flat.dtype, [flat])

    def expand(self, compressed, dtype) -> da.Array:
        """Un-compress a flat ROI-compressed nav array (dask or numpy) into flat nav."""
        import dask.array as da

        plan, roi = self.plan, self.plan.roi
        if roi.flat is None:
            return da.asarray(compressed)
        extra = tuple(compressed.shape[1:])
        if plan.n_sel == 0:
            # dask leaves a zero-length axis in one chunk instead of one empty chunk per
            # partition, so there is nothing to map over: the result is all fill values
            full = filled((roi.flat.size, *extra), dtype)
            return da.from_array(full, chunks=(plan.sizes, *((e,) for e in extra)))
        compressed = da.asarray(compressed)
        out = f"ltdask-expand-{compressed.name}"  # (before lowering: its names are not tokens)
        compressed = lowered(compressed.rechunk((plan.counts, *extra)))
        ndim = 1 + len(extra)
        tasks = {
            (key := block_key(out, i, ndim)): Task(
                key,
                expand_nav,
                TaskRef(block_key(compressed.name, i, ndim)),
                roi.part(p.start, p.stop),
                dtype,
            )
            for i, p in enumerate(plan.partitions)
        }
        return task_array(out, tasks, (plan.sizes, *((e,) for e in extra)), dtype, [compressed])


class Run:
    """A run of `udfs` on `dataset` compiled: its `plan` (:func:`ltdask.udf.plan.plan_run`)
    and its partition `graph`; what :func:`ltdask.lazy` and :func:`ltdask.compute` build
    first.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumUDF
    >>> run = Run(ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32)), [SumUDF()])
    >>> run.partition_results.numblocks == (len(run.partitions),)
    True
    """

    def __init__(self, dataset, udfs, roi=None, corrections=None, backends=None, target=None):
        self.plan = plan_run(dataset, udfs, roi, corrections, backends, target)
        self.graph = PartitionGraph.build(self.plan)

    @property
    def partition_results(self) -> da.Array:
        return self.graph.partition_results

    @property
    def partitions(self) -> list:
        return self.plan.partitions

    @property
    def scheme(self):
        return self.plan.scheme


def _selected(block: np.ndarray, roi_part: np.ndarray) -> np.ndarray:
    return block[roi_part]


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


#: on a ``distributed`` cluster, partition jobs that pickle to at most this many bytes
#: travel inside each partition task (see `_job_arg`)
JOB_INLINE_BYTES = 64 * 2**10


def _job_arg(job: PartitionJob, key: str, tasks: dict, on_cluster: bool):
    """The job as the partition tasks take it: a reference to the node `key` added to
    `tasks` that holds it, or, built for a cluster (`on_cluster`), the job itself where it
    is small.

    On a cluster the job's node is computed first and then copied to each worker that
    needs it: a scheduler round trip before any partition starts (5 ms on a busy 2-core
    machine, 5 % of reading 2 GiB). A job that pickles small (a few KiB for a raw file)
    goes inside each task instead. Large ones (thousands of files, a large ROI) keep their
    node, so that each worker gets them once, and so do graphs built for the local
    schedulers (where the node costs nothing), since they may be computed on a cluster
    later.
    """
    if on_cluster:
        from distributed.protocol.pickle import dumps

        try:
            if len(dumps(job)) <= JOB_INLINE_BYTES:
                return job
        except Exception:  # (distributed's own pickling of the node reports what fails)
            pass
    tasks[key] = DataNode(key, job)
    return TaskRef(key)


def gpu_annotation(plan: RunPlan):
    """Where the run's UDFs run on a CUDA device and computations go to a cluster: the
    partition tasks annotated to need a ``GPU`` resource (see `ltdask.udf.backends`), so
    that the scheduler sends them to GPU workers."""
    import contextlib

    import dask

    bplan = plan.context.backends
    if bplan is None or bplan.device != "cuda" or not plan.target.on_cluster:
        return contextlib.nullcontext()
    return dask.annotate(resources={"GPU": 1})
