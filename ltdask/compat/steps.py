"""Running step by step: the iterator `Context.run_udf_iter` returns (`ResultGenerator`) and
its asynchronous form (the live plots fed by each step: `ltdask.views.viz.update_plots`)."""

from __future__ import annotations

import asyncio

from ltdask.compat.results import UDFResults
from ltdask.udf.api import RunControl


class ResultGenerator:
    """The steps of :meth:`Context.run_udf_iter`; between two steps,
    :meth:`update_parameters_experimental` changes the UDFs' parameters for the partitions
    still to come.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> steps = ctx.run_udf_iter(dataset=ds, udf=SumSigUDF())
    >>> type(steps).__name__
    'ResultGenerator'
    >>> [step.buffers[0]["intensity"].raw_data.tolist() for step in steps][-1]
    [16.0, 16.0, 16.0, 16.0, 16.0, 16.0]
    """

    def __init__(self, steps, control: RunControl):
        self._steps = steps
        self._control = control

    def __iter__(self):
        return self

    def __next__(self) -> UDFResults:
        return next(self._steps)

    def close(self):
        self._steps.close()

    def update_parameters_experimental(self, parameters: list[dict]) -> None:
        """One dict per UDF of the parameters to change (LiberTEM's experimental API)."""
        self._control.update_parameters(parameters)

    def throw(self, exc: BaseException):
        """Raise `exc` in the run where it waits between two steps (as a generator's
        ``throw``): the run ends and `exc` propagates to the caller, unless the run
        handles it."""
        return self._steps.throw(exc)


class ResultAsyncGenerator:
    """:meth:`Context.run_udf_iter` with ``sync=False``: the steps of a `ResultGenerator`,
    each computed in one worker thread of its own; ``aclose``, ``athrow`` and
    ``update_parameters_experimental`` are awaitables, as LiberTEM's.

    Examples
    --------
    >>> import asyncio
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context.make_with("inline")
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> async def last_step():
    ...     steps = ctx.run_udf_iter(dataset=ds, udf=SumSigUDF(), sync=False)
    ...     async for step in steps:
    ...         pass
    ...     return step
    >>> asyncio.run(last_step()).buffers[0]["intensity"].data.tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    """

    def __init__(self, steps: ResultGenerator):
        from concurrent.futures import ThreadPoolExecutor

        self._steps = steps
        # one thread: the run's generator is only ever advanced from one place
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ltdask-steps")
        self._finished = False

    def __aiter__(self):
        return self

    async def __anext__(self) -> UDFResults:
        if self._finished:
            raise StopAsyncIteration
        step = await self._call(next, self._steps, _DONE)
        if step is _DONE:
            self._finish()
            raise StopAsyncIteration
        return step

    async def aclose(self) -> None:
        if not self._finished:
            await self._call(self._steps.close)
            self._finish()

    def _finish(self) -> None:
        self._finished = True
        self._pool.shutdown(wait=False)

    async def athrow(self, exc: BaseException):
        """`ResultGenerator.throw`, awaited."""
        return await self._call(self._steps.throw, exc)

    async def update_parameters_experimental(self, parameters: list[dict]) -> None:
        """`ResultGenerator.update_parameters_experimental`, awaited."""
        await self._call(self._steps.update_parameters_experimental, parameters)

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)


_DONE = object()


async def in_thread(fn):
    return await asyncio.get_running_loop().run_in_executor(None, fn)
