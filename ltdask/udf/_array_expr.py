"""The expression of an array made of written-out tasks, for dask's array-expr engine
(imported by `ltdask.udf.tasks` only where that engine is on).

dask's own (``FromGraph``, what ``from_graph`` makes) names the array ``NAME-TOKEN``, the
token that of every task (the graph of every dependency included, tokenized again for
each array: slow, and not deterministic where a task holds a run's id), and adds an alias
task per block. `TaskGraph` keeps the name given (a token of what the tasks compute) and
the tasks as they are, culled to those its blocks need: array-expr arrays are not culled
when computed (``__dask_optimize__`` is the identity), and a run's graph holds the
partition tasks of partitions that no result of an ROI needs. It lives at module level so
that dask can tokenize expressions built on it (by their class's module and name).
"""

from __future__ import annotations

import functools

from dask.array._array_expr._io import FromGraph


class TaskGraph(FromGraph):
    """``TaskGraph(layer, meta, chunks, keys, name)``: the array `name` whose block `keys`
    (``(name, i, ...)``) and their dependencies are in the task dict `layer`."""

    @functools.cached_property
    def _name(self):
        return self.operand("name_prefix")

    def _layer(self) -> dict:
        from dask.optimization import cull

        return cull(dict(self.operand("layer")), list(self.operand("keys")))[0]
