"""Running step by step: the iterator `Context.run_udf_iter` returns (`ResultGenerator`),
its asynchronous form, and the live plots fed by each step."""

from __future__ import annotations

import asyncio

from ltdask.compat.results import UDFResults, dry_run
from ltdask.exceptions import warn
from ltdask.udf.api import RunControl
from ltdask.views.viz import plottable_channels


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


def prepare_plots(plot_class, udfs, dataset, roi_flat, plots, **plot_kwargs) -> list:
    """The live plots of a run, from LiberTEM's three forms of ``plots``: True (a plot of
    `plot_class` per 2-D result of each UDF), channels per UDF (buffer names, ``(name,
    function)`` pairs or functions; see `ltdask.viz.Live2DPlot`; UDFs after the last list
    are not plotted), or plot objects (shown by their maker). The plots made here are
    shown (``display()``); `plot_kwargs` go to them."""
    if plots is True:
        channels = None
    elif isinstance(plots, (list, tuple)) and all(
        isinstance(p, (list, tuple))
        and all(isinstance(c, (str, list, tuple)) or callable(c) for c in p)
        for p in plots
    ):
        channels = plots
    else:
        return list(plots)
    if channels is not None and len(channels) > len(udfs):
        raise ValueError(
            f"plots: {len(channels)} lists of channels for {len(udfs)} UDFs; expected one list "
            "per UDF, in the order of the UDFs (UDFs after the last list are not plotted)"
        )
    before = dry_run(dataset, udfs, roi_flat)
    if channels is None:
        channels = [plottable_channels(b) for b in before.buffers]
        for u, (udf, chans) in enumerate(zip(udfs, channels, strict=True)):
            if not chans:
                warn(
                    f"No plottable channels found for UDF #{u}: {type(udf).__name__}, "
                    "not plotting.",
                    UserWarning,
                )
    out = []
    # as LiberTEM: UDFs after the last list of channels are not plotted
    for u, (udf, chans) in enumerate(zip(udfs[: len(channels)], channels, strict=True)):
        for channel in chans:
            plot = plot_class(
                dataset,
                udf=udf,
                roi=roi_flat,
                channel=channel,
                udfresult=UDFResults((before.buffers[u],), before.damage),
                **plot_kwargs,
            )
            plot.display()
            out.append(plot)
    return out


def update_plots(plots, udfs, step, force: bool):
    damage = step.damage.data
    for plot in plots:
        index = next(i for i, u in enumerate(udfs) if u is plot.get_udf())
        plot.new_data(step.buffers[index], damage, force=force)


async def in_thread(fn):
    return await asyncio.get_running_loop().run_in_executor(None, fn)
