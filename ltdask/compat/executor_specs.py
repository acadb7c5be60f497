"""LiberTEM's executor specs (``Context.make_with("inline")``, ``"threads"``, ``"dask"``...):
the executor each stands for, and what a worker count means to it."""

from __future__ import annotations

from ltdask.compat.executors import (
    ConcurrentJobExecutor,
    DaskJobExecutor,
    DelayedJobExecutor,
    InlineJobExecutor,
    JobExecutor,
    PipelinedExecutor,
)
from ltdask.exceptions import ExecutorSpecException

#: ``Context.make_with`` executor specs -> the executor class they stand for
_SPECS: dict[str, type[JobExecutor]] = {
    "inline": InlineJobExecutor,
    "synchronous": InlineJobExecutor,
    "threads": ConcurrentJobExecutor,
    "dask": DaskJobExecutor,
    "delayed": DelayedJobExecutor,
    "pipelined": PipelinedExecutor,
    "dask-integration": DaskJobExecutor,
    "dask-make-default": DaskJobExecutor,
}


#: the specs that take no ``cpus`` (as in LiberTEM), and why
_NO_CPUS = {
    "inline": "it runs in the calling thread",
    "synchronous": "it runs in the calling thread",
    "delayed": "it runs on the active dask scheduler, which has its own workers",
    "dask-integration": "it runs on the active dask scheduler, which has its own workers",
}


def executor_for_spec(spec: str, cpus=None) -> JobExecutor:
    """The executor that ``Context.make_with(spec, cpus=...)`` runs on: with `cpus`, that
    many threads of dask's threaded scheduler (except for ``"inline"``)."""
    if spec not in _SPECS:
        raise ExecutorSpecException(
            f"Context.make_with: unknown executor_spec={spec!r}; expected one of "
            f"{', '.join(map(repr, _SPECS))}"
        )
    cls = _SPECS[spec]
    count = None
    if cpus is not None and spec in _NO_CPUS:
        # LiberTEM's words: a worker count means nothing to these specs
        raise ExecutorSpecException(
            f"Executor type {spec} does not support specifying CPU workers at this time: "
            f"{_NO_CPUS[spec]}; use Context.make_with('threads', cpus={cpus!r})"
        )
    if cpus is not None:
        count = cpus if isinstance(cpus, int) else len(list(cpus))
        if count < 1:
            raise ValueError(f"Context.make_with: cpus={cpus!r} gives no CPU to work on")
    if cls is InlineJobExecutor:
        return InlineJobExecutor()
    if count is not None:
        # as many threads as LiberTEM would start worker processes
        executor: JobExecutor = ConcurrentJobExecutor.make_local(n_threads=count)
    else:
        executor = ConcurrentJobExecutor() if cls is ConcurrentJobExecutor else cls()
    executor.spec = spec
    return executor
