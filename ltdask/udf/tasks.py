"""Dask graph layers written out task by task: the engine's adapter to dask's task spec.

``map_blocks`` and ``dask.delayed`` walk every argument looking for dask collections (a
list of partitions is thousands of calls) and ``map_blocks`` builds a blockwise layer that
is materialised again at compute time; for a run of a few dozen partition tasks that costs
tens of milliseconds, as much as reading a gigabyte. UDF runs know their tasks exactly, so
they write them out with dask's task spec: arguments are passed as they are, and only
`TaskRef` arguments are dependencies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from dask.highlevelgraph import HighLevelGraph
from dask.task_spec import DataNode, Task, TaskRef

__all__ = [
    "DataNode",
    "Task",
    "TaskRef",
    "block_key",
    "pick_array",
    "task_array",
    "task_delayed",
]


def block_key(name: str, index: int, ndim: int) -> tuple:
    """The key of block `index` along the first dim of an `ndim`-dim array with one chunk
    in every other dim."""
    return (name, index) + (0,) * (ndim - 1)


def task_array(name: str, tasks: dict, chunks: Sequence[Sequence[int]], dtype, deps=()):
    """A dask array made of `tasks` (``{key: Task}``; block keys ``(name, i, 0, ...)``,
    other keys allowed) that depend on the collections `deps`."""
    import dask.array as da

    chunks = tuple(tuple(c) for c in chunks)
    graph = HighLevelGraph.from_collections(name, tasks, dependencies=list(deps))
    meta = np.empty((0,) * len(chunks), dtype=dtype)
    return da.Array(graph, name, chunks, meta=meta)


def task_delayed(key: str, func, *args, deps=(), kwargs: dict | None = None):
    """``dask.delayed`` of one call ``func(*args, **kwargs)``, where `args` and `kwargs` may
    hold `TaskRef`s to the keys of `deps` (dask collections) and are otherwise passed as
    they are."""
    from dask.delayed import Delayed

    task = Task(key, func, *args, **(kwargs or {}))
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
