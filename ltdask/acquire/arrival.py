"""An acquisition's partitions as dask blocks taken in the order their frames arrive.

A block's task waits for its partition's frames. dask's schedulers run the tasks that can
run in an order of their own (`dask.order`), which for the independent blocks of a scan is
no scan order: on the threaded scheduler a thread took the last partition first and waited
for the end of the scan, while the frames before it piled up in the store (then in its
scratch file). Here each block's task comes after a small *turn* task of its partition, and
each turn after the one before it: the turns wait, one at a time and in scan order, for a
partition's frames to have arrived (or the acquisition to have ended), so a block can run
only once its frames are there and its turn has come. At most one thread then waits for
frames; the others process the partitions that came.

`ltdask.compute` and `ltdask.iter` step through the partitions themselves; these blocks
are for graphs that dask computes as it likes (``ltdask.lazy`` results, ``to_dask()``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from dask.task_spec import Task, TaskRef

from ltdask.udf.tasks import task_array


def arrival_blocks(
    fn, chunks: tuple, dtype, name: str, acquisition: Any, nav_ndim: int, turns: bool = True
) -> Any:
    """A dask array of `chunks` (nav dims first, `nav_ndim` of them; one block per
    partition in C order) whose block is ``fn(block_info=..., acquisition=acquisition,
    turn=...)``, as ``dask.array.map_blocks`` would call it (``block_info[None]``
    with its ``array-location`` and ``chunk-shape``), after its partition's turn.
    `acquisition`: the acquisition's task handle (its ``.acquisition`` has the store).

    Without `turns` (``turn=None``): blocks for runs that take the partitions in steps,
    each step those whose frames have arrived (`ltdask.udf.steps.iter_steps`). Their
    order is the steps'; with turns, a step's graph would hold the chain of every turn
    before its partitions, and the run would compute the turns of the whole scan again
    at each step (quadratic in the partitions: a 12-bit Merlin run of 224 partitions took
    124 us of CPU a frame with them, 100 without)."""
    chain = f"{name}-turn"
    tasks: dict = {}
    starts = [np.cumsum((0, *c[:-1])) for c in chunks]
    for p, index in enumerate(itertools.product(*(range(len(c)) for c in chunks[:nav_ndim]))):
        if turns:
            before = TaskRef((chain, p - 1)) if p else None
            tasks[(chain, p)] = Task((chain, p), _turn, acquisition, p, before)
        block = (*index, *((0,) * (len(chunks) - nav_ndim)))
        location = [
            (int(starts[d][i]), int(starts[d][i] + chunks[d][i])) for d, i in enumerate(block)
        ]
        info = {
            None: {
                "array-location": location,
                "chunk-shape": tuple(hi - lo for lo, hi in location),
                "chunk-location": block,
            }
        }
        key = (name, *block)
        turn = TaskRef((chain, p)) if turns else None
        tasks[key] = Task(key, fn, block_info=info, acquisition=acquisition, turn=turn)
    return task_array(name, tasks, chunks, dtype)


def _turn(acquisition, partition: int, before) -> int:
    """Waits until `partition`'s frames have all arrived or the acquisition has ended
    (after the turn `before`, of the partition before it)."""
    acquisition.acquisition.store.ready(partition)
    return partition
