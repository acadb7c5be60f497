"""Garbage collection in ``dask.distributed`` workers: one ``gc.freeze()`` after a worker's
first partition task (``ltdask.worker-gc-freeze``).

A worker that has imported numba, dask, xarray and ltdask holds some 200 000 objects that
the cyclic garbage collector tracks. Python runs a full collection whenever the objects
that outlived two younger collections grew by a quarter, and each one walks all of them
with the GIL held: a partition task that meets one stalls for as long as a short run
takes (where workers import those modules at start-up, as a script's top-level imports
do in every spawned worker). Freezing what is alive after the first task (modules, classes,
compiled kernels: objects that live as long as the process) takes them out of later
collections. The measurements are in docs/performance.md.

Frozen objects are still freed when nothing refers to them any more; only reference cycles
among them are never collected (what the first task's modules and caches hold).
"""

from __future__ import annotations

import gc
import os

from ltdask.runtime import settings

#: the process (pid) that has frozen its objects: a forked child starts anew
_FROZEN_IN: list[int] = []


def after_task() -> None:
    """Called after each partition task: in a ``distributed`` worker, freezes the
    collector's objects once (where ``ltdask.worker-gc-freeze`` is on); a cheap no-op
    after that and outside workers."""
    pid = os.getpid()
    if pid in _FROZEN_IN or settings.current_worker() is None:
        return
    freeze = settings.worker_gc_freeze()  # (a bad setting fails every task alike)
    _FROZEN_IN[:] = [pid]
    if freeze:
        gc.freeze()
