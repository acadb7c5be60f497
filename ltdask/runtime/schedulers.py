"""Facts about the scheduler a compute would run on now: the `distributed.Client` (if any)
and its workers, and the local scheduler dask would pick. Planning reads them to size
partitions and place GPU work; `ltdask.runtime.progress` to choose how to show a run.

Nothing here imports distributed unless it is imported already (a new process's first
run would otherwise pay 0.15-0.2 s for it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ltdask.runtime import settings


def default_client():
    """The default `distributed.Client`, or None (without importing distributed)."""
    return settings.from_distributed("default_client")


def cluster_client():
    """The `distributed.Client` that ``dask.compute`` would run on now (the configured
    ``scheduler``, a Client or its ``get``, or else the default Client), or None."""
    import dask

    scheduler = dask.config.get("scheduler", None)
    if scheduler in (None, "dask.distributed", "distributed"):
        return default_client()
    return _client_of(scheduler)


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


#: ``scheduler=`` names of dask's local schedulers, by the kind of run they make
_LOCAL_NAMES = {
    "threads": "threads",
    "threading": "threads",
    "sync": "local",
    "synchronous": "local",
    "single-threaded": "local",
    "processes": "local",
    "multiprocessing": "local",
}


@dataclass(frozen=True)
class RunTarget:
    """The scheduler a run's graph is planned for, resolved once, where ``ltdask.lazy``,
    ``compute`` or ``explain`` is called (`resolve`), and passed down: building the graph
    reads no scheduler state. It decides the partition sizes (`ltdask.io.partition.for_run`),
    fresh task keys for cluster runs, whether partition jobs travel inside the tasks, and
    whether CUDA work is annotated for GPU workers. A graph planned for one scheduler
    computes on any other with the same values.

    `kind`: ``"threads"`` (dask's threaded scheduler), ``"cluster"`` (a
    ``distributed.Client``) or ``"local"`` (the synchronous and process schedulers, which
    keep the dataset's partitions). `threads`: the threads that run partition tasks (all
    workers' on a cluster; 0 where the cluster lists no worker yet). `memory_shares`: the
    memory of each thread's share, in bytes (per worker on a cluster, where it has a
    limit). `gpu_workers`: a worker of the cluster has a ``GPU`` resource; `cpu_workers`:
    a worker has none (with both, runs whose UDFs take CPU and CUDA backends use both:
    `ltdask.udf.backends.GpuRole`).
    """

    kind: str
    threads: int = 1
    memory_shares: tuple[int, ...] = ()
    gpu_workers: bool = False
    cpu_workers: bool = False

    @property
    def on_cluster(self) -> bool:
        return self.kind == "cluster"

    @classmethod
    def resolve(cls, scheduler=None) -> RunTarget:
        """The target for `scheduler`: None (the one ``dask.compute`` would use now), a
        name of dask's local schedulers (``"threads"``, ``"sync"``, ``"processes"``, ...),
        a ``distributed.Client`` (or its ``get``), or a `RunTarget` (returned as it is).

        Examples
        --------
        >>> from ltdask.runtime.schedulers import RunTarget
        >>> RunTarget.resolve("sync").kind
        'local'
        >>> RunTarget.resolve("threads").threads >= 1
        True
        """
        import dask

        if isinstance(scheduler, RunTarget):
            return scheduler
        if scheduler is None:
            client = cluster_client()
            if client is not None:
                return cls._of_cluster(client)
            configured = dask.config.get("scheduler", None)
            if configured is not None and not isinstance(configured, str):
                return cls("local")  # (a scheduler function: dask's get of its own)
            scheduler = configured or "threads"
        if isinstance(scheduler, str):
            if scheduler in ("distributed", "dask.distributed"):
                client = default_client()
                if client is None:
                    raise ValueError(
                        f"scheduler={scheduler!r}: no distributed.Client is running; make "
                        "one first (distributed.Client(...))"
                    )
                return cls._of_cluster(client)
            kind = _LOCAL_NAMES.get(scheduler)
            if kind is None:
                raise ValueError(
                    f"scheduler={scheduler!r}: expected one of {sorted(_LOCAL_NAMES)}, "
                    "'distributed', a distributed.Client or None (the active scheduler)"
                )
            if kind == "local":
                return cls("local")
            threads = int(dask.config.get("num_workers", None) or os.cpu_count() or 1)
            return cls("threads", threads, (settings.total_memory() // threads,))
        client = _client_of(scheduler)
        if client is None:
            raise ValueError(
                f"scheduler={scheduler!r}: expected a distributed.Client, the name of a "
                "dask scheduler ('threads', 'sync', 'processes', 'distributed') or None"
            )
        return cls._of_cluster(client)

    @classmethod
    def _of_cluster(cls, client) -> RunTarget:
        workers = cluster_workers(client)
        nthreads = [max(1, int(w.get("nthreads", 1))) for w in workers]
        shares = tuple(
            w["memory_limit"] // n
            for w, n in zip(workers, nthreads, strict=True)
            if w.get("memory_limit")
        )
        gpus = [w.get("resources", {}).get("GPU", 0) > 0 for w in workers]
        return cls("cluster", sum(nthreads), shares, any(gpus), not all(gpus))


def client_for(scheduler=None):
    """The `distributed.Client` that a compute with ``scheduler=`` `scheduler` runs on (None:
    as `cluster_client`; ``"distributed"``: the default Client), or None."""
    if scheduler is None:
        return cluster_client()
    if scheduler in ("distributed", "dask.distributed"):
        return default_client()
    return _client_of(scheduler)


def _client_of(scheduler):
    """`scheduler` as a `distributed.Client` (given as one or as its ``get``), or None."""
    import sys

    if "distributed" not in sys.modules:
        return None
    from distributed import Client

    owner = getattr(scheduler, "__self__", scheduler)
    return owner if isinstance(owner, Client) else None
