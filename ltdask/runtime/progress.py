"""Computing with progress: a bar of the partitions done (tqdm's, in terminals and notebooks)
on the local schedulers, distributed's own on a Client (which scheduler a compute runs on:
`ltdask.runtime.schedulers`).

``progress=None`` (the default of ``ltdask.compute`` and friends) shows the bar only where
someone watches (stderr is a terminal, or a Jupyter kernel runs the code) and only once a
run has taken `PROGRESS_DELAY` seconds: quick runs print nothing. ``True`` shows it from
the start, anywhere; ``False`` never.
"""

from __future__ import annotations

import contextlib
import sys
import threading

from dask.callbacks import Callback

from ltdask.runtime.schedulers import (
    NO_FUSION,
    client_for,
    default_client,
    local_scheduler,
    on_a_cluster,
)

#: seconds a run takes before its bar appears, with ``progress=None``
PROGRESS_DELAY = 2.0
#: the name of every UDF run's partition tasks starts so (`ltdask.udf.graph`): the bar counts
#: the tasks whose names hold it, as the steps of a run
PARTITION_TASKS = "ltdask-udf-"


def compute(*collections, progress: bool | None = None, scheduler=None) -> tuple:
    """``dask.compute(*collections)`` (without low-level fusion, see `NO_FUSION`) on
    `scheduler` (None: the active one), showing progress as `progress` asks (see the
    module's notes)."""
    import dask

    if scheduler is None:
        client = default_client() if on_a_cluster() else None
    else:
        client = client_for(scheduler)
    how = local_scheduler(collections) if scheduler is None else {"scheduler": scheduler}
    with dask.config.set(NO_FUSION):
        if progress and client is not None:
            return _on_cluster_with_progress(collections, client)
        with partition_bar(progress):
            return dask.compute(*collections, **how)


def _watched() -> bool:
    """Someone sees stderr: a terminal, or a Jupyter kernel's output."""
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def _bar_delay(progress: bool | None) -> float | None:
    """Seconds before a bar appears, as `progress` asks; None: no bar."""
    if progress is False or (progress is None and not _watched()):
        return None
    return 0.0 if progress else PROGRESS_DELAY


def partition_bar(progress: bool | None):
    """A context manager that shows a `PartitionBar` over the computes on the local
    schedulers inside it, as `progress` asks; a null context where no bar is wanted."""
    delay = _bar_delay(progress)
    return contextlib.nullcontext() if delay is None else PartitionBar(delay=delay)


def progress_over(items, progress: bool | None, unit: str):
    """`items`, shown as a bar of those done as `progress` asks (see the module's notes)."""
    delay = _bar_delay(progress)
    if delay is None:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, delay=delay, unit=unit, desc="ltdask", file=sys.stderr)


#: the bars drawing now, so that other output (the compile notice) goes above them
_ACTIVE: list = []
_ACTIVE_LOCK = threading.Lock()


def write_line(text: str) -> None:
    """`text` on its own line of stderr, above any progress bar being drawn."""
    with _ACTIVE_LOCK:
        bar = _ACTIVE[-1] if _ACTIVE else None
    if bar is None:
        print(text, file=sys.stderr, flush=True)
    else:
        bar.write(text, file=sys.stderr)


class PartitionBar(Callback):
    """A tqdm bar (``tqdm.auto``: a widget in notebooks) of the partitions a compute on a
    local scheduler has finished (its `PARTITION_TASKS`), or of all its tasks where it runs
    no UDF (``to_dask()`` chunks). It appears after `delay` seconds."""

    def __init__(self, delay: float):
        super().__init__()
        self.delay = delay
        self.bar = None
        self.counts_all = True

    def _counts(self, key) -> bool:
        if self.counts_all:
            return True
        # (dask's blockwise fusion names a fused task after all its layers: writes to Zarr
        # carry the partition tasks' name inside theirs)
        return isinstance(key, tuple) and PARTITION_TASKS in str(key[0])

    def _start_state(self, dsk, state):
        from tqdm.auto import tqdm

        # (keys in the state's cache hold data, not tasks: they never run)
        tasks = [key for key in dsk if key not in state.get("cache", ())]
        self.counts_all = False
        total = sum(1 for key in tasks if self._counts(key))
        unit = "partition"
        if total == 0:
            self.counts_all, total, unit = True, len(tasks), "task"
        self.bar = tqdm(total=total, delay=self.delay, unit=unit, desc="ltdask", file=sys.stderr)
        with _ACTIVE_LOCK:
            _ACTIVE.append(self.bar)

    def _posttask(self, key, result, dsk, state, worker_id):
        if self.bar is not None and self._counts(key):
            self.bar.update(1)

    def _finish(self, dsk, state, errored):
        if self.bar is None:
            return
        with _ACTIVE_LOCK:
            if self.bar in _ACTIVE:
                _ACTIVE.remove(self.bar)
        self.bar.close()
        self.bar = None


def _on_cluster_with_progress(collections, client) -> tuple:
    """The collections computed on `client`, with distributed's progress bar."""
    from distributed import progress as show

    futures = client.compute(list(collections))
    show(futures)
    return tuple(client.gather(futures))
