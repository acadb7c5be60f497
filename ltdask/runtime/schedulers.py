"""Facts about the scheduler a compute would run on now: the `distributed.Client` (if any)
and its workers, and the local scheduler dask would pick. Planning reads them to size
partitions and place GPU work; `ltdask.runtime.progress` to choose how to show a run.

Nothing here imports distributed unless it is imported already (a new process's first
run would otherwise pay 0.15-0.2 s for it).
"""

from __future__ import annotations


def default_client():
    """The default `distributed.Client`, or None (without importing distributed)."""
    from ltdask.runtime.settings import from_distributed

    return from_distributed("default_client")


def cluster_client():
    """The `distributed.Client` that ``dask.compute`` would run on now (the configured
    ``scheduler``, a Client or its ``get``, or else the default Client), or None."""
    import sys

    import dask

    scheduler = dask.config.get("scheduler", None)
    if scheduler in (None, "dask.distributed", "distributed"):
        return default_client()
    if "distributed" not in sys.modules:
        return None
    from distributed import Client

    owner = getattr(scheduler, "__self__", scheduler)  # (a Client's ``get``)
    return owner if isinstance(owner, Client) else None


#: how long `cluster_workers` answers from what it last fetched, in seconds
WORKERS_TTL = 1.0
_WORKERS: dict = {}  # id(client) -> (client, time fetched, workers)


def cluster_workers(client) -> list[dict]:
    """The workers of `client` as ``scheduler_info()`` lists them (``nthreads``,
    ``memory_limit``, ``resources``, ...); empty where the client lists none (an
    asynchronous client's cached view).

    Each fetch is a round trip to the scheduler (about a millisecond, more while workers
    are busy); what one fetched is used for `WORKERS_TTL` seconds, so that planning a run
    (partition sizes, GPU workers) asks once, and runs in quick succession not at all.
    """
    import time

    now = time.monotonic()
    held = _WORKERS.get(id(client))
    if held is not None and held[0] is client and now - held[1] < WORKERS_TTL:
        return held[2]
    workers = list(client.scheduler_info().get("workers", {}).values())
    _WORKERS.clear()  # (one client at a time is the rule; never a stale one kept alive)
    _WORKERS[id(client)] = (client, now, workers)
    return workers


#: ltdask's graphs are written task by task (`ltdask.udf.tasks`): dask's linear fusion only
#: adds work to them (10-30 % of a short run) and drops the tasks' annotations (the GPU
#: resource of CuPy runs on a cluster)
NO_FUSION = {"optimization.fuse.active": False}


def on_a_cluster() -> bool:
    """A compute now would run on a `distributed.Client`."""
    import dask

    client = default_client()
    return client is not None and dask.config.get("scheduler", None) in (None, "dask.distributed")


def local_scheduler(collections) -> dict:
    """``scheduler=`` for ``dask.compute(*collections)`` where no `distributed.Client` can
    exist (distributed is not imported) and none is configured: the collections' own
    default, the one dask would pick. Given explicitly, because dask looks for a Client
    first by importing distributed (0.15-0.2 s of a new process's first run). Empty (dask
    decides) otherwise.

    Examples
    --------
    >>> import dask.array as da
    >>> from dask.threaded import get
    >>> from ltdask.runtime.schedulers import local_scheduler
    >>> local_scheduler([da.ones(3)]) in ({"scheduler": get}, {})  # {}: distributed imported
    True
    """
    import sys

    import dask

    if "distributed" in sys.modules or dask.config.get("scheduler", None):
        return {}
    defaults = {c.__dask_scheduler__ for c in collections if dask.is_dask_collection(c)}
    return {"scheduler": defaults.pop()} if len(defaults) == 1 else {}
