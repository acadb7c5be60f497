"""Post-processing a UDF's merged results with plain numpy, once, in one task.

In ``get_results`` a UDF sees its merged buffers as dask arrays. Element-wise arithmetic
and reductions work on them as on numpy arrays; a computation that needs the whole array
at once (a fit over the scan, gradients, ``numpy.linalg``) goes through :func:`apply_whole`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltdask.udf.tasks import Task, TaskRef, lowered, pick_array, task_array, task_delayed

__all__ = ["apply_whole"]


def apply_whole(func, *args, outputs, name: str | None = None, **kwargs):
    """Call ``func(*args, **kwargs)`` once, in one dask task, with the dask arrays among
    the arguments as whole numpy arrays; its outputs come back as dask arrays.

    Meant for ``get_results``: the task depends on the run's partition tasks by name, so
    other results of the same run share them (``dask.delayed`` of a result would rename
    them, and a run of several UDFs would process every partition twice). The arrays
    pass to `func` in one piece, so they should fit in one worker's memory, as nav-sized
    results do.

    Parameters
    ----------
    func : callable
        ``func(*args, **kwargs)``: returns a dict of arrays named as in `outputs`, or
        one array when `outputs` is one ``(shape, dtype)``. It must pickle (a
        module-level function) to run on a process or distributed scheduler.
    *args, **kwargs
        Dask arrays (each joined into one chunk first) or anything else, passed as it is.
    outputs : dict or tuple
        ``{name: (shape, dtype)}`` of the arrays `func` returns, or one ``(shape, dtype)``.
    name : str, optional
        The start of the task's name (default: `func`'s name); the rest is a token of
        `func` and the arguments, so equal calls make equal graphs.

    Returns
    -------
    dict of dask.array.Array or dask.array.Array
        One array of one chunk per output, computed by the one task.

    Examples
    --------
    A UDF whose result is each frame's sum relative to the largest in the scan:

    >>> import numpy as np, ltdask
    >>> from ltdask.udf import UDF, apply_whole
    >>> def relative(sums):
    ...     return sums / sums.max()
    >>> class RelativeSumUDF(UDF):
    ...     def get_result_buffers(self):
    ...         return {
    ...             "sums": self.buffer(kind="nav", use="private"),
    ...             "relative": self.buffer(kind="nav", use="result_only"),
    ...         }
    ...     def process_frame(self, frame):
    ...         self.results.sums[:] = frame.sum()
    ...     def get_results(self):
    ...         sums = self.results.get_buffer("sums").data  # nav-shaped, dask
    ...         shape = tuple(self.meta.dataset_shape.nav)
    ...         return {"relative": apply_whole(relative, sums, outputs=(shape, "float32"))}
    >>> data = np.ones((2, 2, 3, 3), dtype=np.float32); data[1, 1] *= 2
    >>> RelativeSumUDF().compute(ltdask.from_array(data))["relative"].values.tolist()
    [[0.5, 0.5], [0.5, 1.0]]
    """
    from dask.base import tokenize
    from dask.utils import funcname

    deps: list[Any] = []

    def argument(value):
        if not hasattr(value, "__dask_graph__") or not hasattr(value, "rechunk"):
            return value
        # (one chunk: a concatenation, for which dask's "tasks" rechunk is the plain one;
        # its default method imports distributed to look for a cluster, 0.3 s in the first
        # run of a process: the first live result waited for it)
        whole = lowered(value.rechunk(-1, method="tasks") if value.ndim else value)
        deps.append(whole)
        return TaskRef((whole.name,) + (0,) * whole.ndim)

    task_args = [argument(a) for a in args]
    task_kwargs = {k: argument(v) for k, v in kwargs.items()}
    token = tokenize(func, args, kwargs, outputs)
    key = f"{name or funcname(func)}-{token}"
    if not isinstance(outputs, dict):
        shape, dtype = outputs
        block = (key,) + (0,) * len(shape)
        task = Task(block, func, *task_args, **task_kwargs)
        return task_array(key, {block: task}, tuple((n,) for n in shape), np.dtype(dtype), deps)
    merged = task_delayed(key, func, *task_args, deps=deps, kwargs=task_kwargs)
    return {
        out: pick_array(merged, out, tuple(shape), np.dtype(dtype))
        for out, (shape, dtype) in outputs.items()
    }
