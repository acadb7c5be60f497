"""Dask graph layers written out task by task: the engine's adapter to dask's task spec.

``map_blocks`` and ``dask.delayed`` walk every argument looking for dask collections (a
list of partitions is thousands of calls) and ``map_blocks`` builds a blockwise layer that
is materialised again at compute time; for a run of a few dozen partition tasks that costs
tens of milliseconds, as much as reading a gigabyte. UDF runs know their tasks exactly, so
they write them out with dask's task spec: arguments are passed as they are, and only
`TaskRef` arguments are dependencies.

This module is the one place where arrays are made from written-out tasks, for either of
dask's array engines: the legacy one (a `HighLevelGraph` layer and the ``dask.array.Array``
constructor) and, with ``array.query-planning`` on, array-expr (an expression of dask's
``FromGraph`` kind, what its own ``persist`` makes of a computed graph, in
`ltdask.udf._array_expr`; dask 2026.8 has no public constructor for it). Either way the
array's name and block keys are the ones given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dask.highlevelgraph import HighLevelGraph
from dask.task_spec import DataNode, GraphNode, Task, TaskRef

__all__ = [
    "DataNode",
    "Task",
    "TaskRef",
    "array_expr",
    "block_key",
    "compute_arrays",
    "leading_block",
    "lowered",
    "nav_shaped",
    "pick_array",
    "task_array",
    "task_delayed",
]


def block_key(name: str, index: int, ndim: int) -> tuple:
    """The key of block `index` along the first dim of an `ndim`-dim array with one chunk
    in every other dim."""
    return (name, index) + (0,) * (ndim - 1)


def array_expr() -> bool:
    """Whether dask arrays are array-expr ones (dask's ``array.query-planning`` config,
    read once, when ``dask.array`` is first imported)."""
    import dask.array as da

    return bool(getattr(da, "ARRAY_EXPR_ENABLED", False))


def leading_block(arr, i: int):
    """Block `i` along the first dim of the dask array `arr` (one chunk in every other
    dim): ``arr.blocks[i]``, or under array-expr (which has no ``blocks`` in dask 2026.8)
    the slice of its rows."""
    if not array_expr():
        return arr.blocks[i]
    start = int(sum(arr.chunks[0][:i]))
    return arr[start : start + arr.chunks[0][i]]


def lowered(arr):
    """`arr` (a dask array) as one whose ``name`` is that of its blocks' keys, for
    `TaskRef`\\ s to them: `arr` itself, or under array-expr its expression lowered (an
    expression's name is not its keys' where lowering rewrites it: a rechunk)."""
    if not array_expr():
        return arr
    from dask._collections import new_collection

    return new_collection(arr.expr.lower_completely())


def task_array(name: str, tasks: dict, chunks: Sequence[Sequence[int]], dtype, deps=()):
    """A dask array made of `tasks` (``{key: Task}``; block keys ``(name, i, 0, ...)``,
    other keys allowed) that depend on the collections `deps`."""
    import dask.array as da

    chunks = tuple(tuple(c) for c in chunks)
    meta = np.empty((0,) * len(chunks), dtype=dtype)
    if array_expr():
        from dask._collections import new_collection

        from ltdask.udf._array_expr import TaskGraph

        blocks = [(name, *index) for index in np.ndindex(*(len(c) for c in chunks))]
        return new_collection(TaskGraph(_with_deps(tasks, deps), meta, chunks, blocks, name))
    graph = HighLevelGraph.from_collections(name, tasks, dependencies=list(deps))
    return da.Array(graph, name, chunks, meta=meta)


def _with_deps(tasks: dict, deps) -> dict:
    """`tasks` and every task of the collections `deps`, in one dict (array-expr: an
    array made from a graph holds all of it)."""
    out: dict = {}
    for dep in deps:
        out.update(dep.__dask_graph__())
    out.update(tasks)
    return out


def nav_shaped(flat, nav_shape: tuple[int, ...], nav_chunks) -> object:
    """The flat-nav dask array `flat` (``(nav_size, *extra)``) as ``(*nav_shape, *extra)``,
    where its nav blocks are those of the nav grid `nav_chunks` in C order (the partitions).

    Dask's ``reshape``; under array-expr (which has none in dask 2026.8) a task per block
    that reshapes it, the same number of tasks as the legacy reshape of such chunks.
    """
    extra = tuple(flat.shape[1:])
    if not array_expr():
        return flat.reshape(nav_shape + extra)
    grid = [tuple(int(c) for c in chunks) for chunks in nav_chunks]
    indices = list(np.ndindex(*(len(c) for c in grid)))
    shapes = [tuple(c[j] for c, j in zip(grid, index, strict=True)) for index in indices]
    sizes = tuple(math.prod(shape) for shape in shapes)
    out = f"ltdask-navshaped-{flat.name}"  # (before lowering: its names are not tokens)
    if flat.chunks[0] != sizes:
        flat = flat.rechunk((sizes, *flat.chunks[1:]))
    flat = lowered(flat)
    tasks = {}
    for i, (index, shape) in enumerate(zip(indices, shapes, strict=True)):
        for rest in np.ndindex(*flat.numblocks[1:]):
            extra_shape = tuple(flat.chunks[1 + d][j] for d, j in enumerate(rest))
            key = (out, *index, *rest)
            source = TaskRef((flat.name, i, *rest))
            tasks[key] = Task(key, np.reshape, source, shape + extra_shape)
    return task_array(out, tasks, (*grid, *flat.chunks[1:]), flat.dtype, [flat])


def task_delayed(key: str, func, *args, deps=(), kwargs: dict | None = None):
    """``dask.delayed`` of one call ``func(*args, **kwargs)``, where `args` and `kwargs` may
    hold `TaskRef`s to the keys of `deps` (dask collections) and are otherwise passed as
    they are."""
    from dask.delayed import Delayed

    task = Task(key, func, *args, **(kwargs or {}))
    if array_expr():
        return Delayed(key, _with_deps({key: task}, deps))
    graph = HighLevelGraph.from_collections(key, {key: task}, list(deps))
    return Delayed(key, graph)


def pick_array(source, name: str, shape: tuple[int, ...], dtype):
    """Item `name` of the dict that the Delayed `source` computes, as a dask array of one
    chunk of `shape` and `dtype`."""
    out = f"ltdask-pick-{name}-{source.key}"
    key = (out,) + (0,) * len(shape)
    task = Task(key, _pick, TaskRef(source.key), name)
    return task_array(out, {key: task}, tuple((e,) for e in shape), dtype, [source])


def _pick(mapping, name):
    return mapping[name]


def compute_arrays(arrays: Sequence, remote: str | None = None, scheduler=None) -> list:
    """The dask `arrays` computed together as ``dask.compute`` would (on `scheduler`, or
    the one it would use), their chunks fetched by key and put together here.

    ``dask.compute`` adds a task per array that joins its chunks where they were computed,
    and result arrays are a few cheap tasks (picks, reshapes) after their merges: on a
    ``distributed`` cluster each such step is a round trip through the scheduler (3-5 ms
    on a busy machine: a quarter of a 2 GiB run's time). Given the layer name `remote`
    (the partition tasks), a cluster computes only that layer, the tasks that take from it
    (merges) and what they need; the cheap rest runs here on what comes back.
    """
    from dask.base import get_scheduler
    from dask.core import flatten
    from dask.highlevelgraph import HighLevelGraph

    from ltdask.runtime.schedulers import client_for, local_scheduler

    graph = HighLevelGraph.merge(*(a.__dask_graph__() for a in arrays))
    nested = [a.__dask_keys__() for a in arrays]
    wanted = list(dict.fromkeys(flatten(nested)))
    how = local_scheduler(arrays) if scheduler is None else {"scheduler": scheduler}
    get = get_scheduler(collections=list(arrays), **how)
    client = client_for(scheduler)
    values = None
    if remote is not None and client is not None and getattr(get, "__self__", None) is client:
        values = _on_workers_then_here(graph, wanted, remote, get)
    if values is None:
        values = dict(zip(wanted, get(graph.cull(set(wanted)), wanted), strict=True))

    def chunks(keys):
        return [chunks(k) for k in keys] if isinstance(keys, list) else values[keys]

    out = []
    for a, keys in zip(arrays, nested, strict=True):
        finalize, extra = a.__dask_postcompute__()
        out.append(finalize(chunks(keys), *extra))
    return out


def _on_workers_then_here(graph, wanted: list, remote: str, get) -> dict | None:
    """``{key: value}`` of `wanted`: the tasks of layer `remote`, those that depend on
    them and their dependencies computed by `get` (a cluster); the rest here, on the
    values that come back. None where the graph holds tasks of the old spec (not in dask
    2025+): then everything goes to the cluster."""
    from dask.local import get_sync

    dsk = dict(graph.cull(set(wanted)))
    if not all(isinstance(t, GraphNode) for t in dsk.values()):
        return None

    def layer(key):
        return key[0] if isinstance(key, tuple) else key

    there = {k for k, t in dsk.items() if remote in (layer(k), *map(layer, t.dependencies))}
    todo = list(there)
    while todo:
        for dep in dsk[todo.pop()].dependencies:
            if dep not in there:
                there.add(dep)
                todo.append(dep)
    here = {k: t for k, t in dsk.items() if k not in there}
    used_here = set(wanted).union(*(t.dependencies for t in here.values()))
    needed = [k for k in there if k in used_here]
    if needed:
        got = dict(zip(needed, get(graph.cull(set(needed)), needed), strict=True))
        here.update({k: DataNode(k, v) for k, v in got.items()})
    return dict(zip(wanted, get_sync(here, wanted), strict=True))
