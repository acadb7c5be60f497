"""Running step by step: the iterator `Context.run_udf_iter` returns (`ResultGenerator`),
its asynchronous form, and the live plots fed by each step."""

from __future__ import annotations

import asyncio

from ltdask.compat.results import UDFResults
from ltdask.udf.api import RunControl


class ResultGenerator:
    """The steps of :meth:`Context.run_udf_iter`; between two steps,
    :meth:`update_parameters_experimental` changes the UDFs' parameters for the partitions
    still to come."""

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


def update_plots(plots, udfs, step, force: bool):
    damage = step.damage.data
    for plot in plots:
        index = next(i for i, u in enumerate(udfs) if u is plot.get_udf())
        plot.new_data(step.buffers[index], damage, force=force)


async def in_thread(fn):
    return await asyncio.get_running_loop().run_in_executor(None, fn)


async def async_steps(steps):
    """The steps of a synchronous iterator, each computed in a thread."""
    done = object()
    try:
        while True:
            step = await in_thread(lambda: next(steps, done))
            if step is done:
                return
            yield step
    finally:
        steps.close()
