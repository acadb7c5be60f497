"""LiberTEM's executors as ltdask reads them: each says which dask scheduler (or
``distributed`` client) a `Context` runs on; none of them is a worker pool of its own.

================================  =====================================================
LiberTEM                          ltdask runs on
================================  =====================================================
``InlineJobExecutor()``           dask's synchronous scheduler, in this thread
``ConcurrentJobExecutor(pool)``   dask's threaded scheduler on `pool` (a
                                  ``concurrent.futures.Executor``); ``make_local(n)``:
                                  ``n`` threads (default: dask's ``num_workers``)
``DaskJobExecutor(client)``       the ``distributed.Client`` `client` (``None``: the
                                  active scheduler); ``connect(address)`` connects a new
                                  client, ``make_local()`` starts a ``LocalCluster``
``DelayedJobExecutor()``          the active dask scheduler
``PipelinedExecutor()``           the active dask scheduler (ltdask has no pipeline of
                                  worker processes; start a cluster for that)
================================  =====================================================

``import ltdask`` never imports ``distributed``: only ``connect`` and ``make_local`` do,
when they are called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import dask

from ltdask.exceptions import ExecutorSpecException, LtdaskError

__all__ = [
    "ConcurrentJobExecutor",
    "DaskJobExecutor",
    "DelayedJobExecutor",
    "InlineJobExecutor",
    "JobExecutor",
    "PipelinedExecutor",
    "UnsupportedSpecError",
]


class UnsupportedError(LtdaskError, NotImplementedError):
    """A LiberTEM argument that ltdask cannot honour (yet): refused, never ignored.

    Examples
    --------
    >>> from ltdask.compat import DaskJobExecutor, UnsupportedError
    >>> try:
    ...     DaskJobExecutor(lt_resources=True)
    ... except UnsupportedError as e:
    ...     print(str(e)[:60])
    DaskJobExecutor: lt_resources=True is not supported by ltdas
    """


class UnsupportedSpecError(UnsupportedError, ExecutorSpecException):
    """A ``Context.make_with`` setting ltdask cannot honour: an `UnsupportedError` and
    LiberTEM's ``ExecutorSpecException``, which LiberTEM raises where an executor cannot
    take what it is asked for."""


def refuse(where: str, argument: str, value, why: str, error=UnsupportedError):
    raise error(f"{where}: {argument}={value!r} is not supported by ltdask: {why}")


class JobExecutor:
    """Where a `Context`'s runs go: a dask scheduler, entered around each run with
    :meth:`activate`. Subclasses are LiberTEM's executor names.

    Examples
    --------
    >>> from ltdask.compat import InlineJobExecutor, JobExecutor
    >>> executor = InlineJobExecutor()
    >>> isinstance(executor, JobExecutor), executor.run_function(sum, [1, 2, 3])
    (True, 6)
    """

    #: the executor spec of ``Context.make_with`` this executor stands for
    spec = "dask"
    #: the partitions a step of ``run_udf_iter`` computes, as LiberTEM's executor yields
    #: them: None, one per core; 1, one by one; 0, all (one step: the whole run)
    partitions_per_step: int | None = None

    def __init__(self) -> None:
        self.is_local = False

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this executor's scheduler the active one (nothing: the active one)."""
        yield

    def check_run(self, dataset, udfs) -> None:
        """Checks before a run (LiberTEM's ``debug`` executors check that tasks pickle)."""

    def run_function(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` as one task on this executor's scheduler."""
        with self.activate():
            return dask.delayed(fn, pure=False)(*args, **kwargs).compute()

    def close(self) -> None:
        """Release what this executor started (`DaskJobExecutor.make_local`'s cluster)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} (ltdask: {self._describe()})>"

    def _describe(self) -> str:
        return "the active dask scheduler"


class InlineJobExecutor(JobExecutor):
    """Runs every task in this thread, one after the other: dask's synchronous scheduler.

    Parameters
    ----------
    debug
        Check that the dataset and the UDFs survive pickling before each run (what would be
        sent to worker processes), as LiberTEM's debug mode does.
    inline_threads
        LiberTEM's limit on the threads libraries may start inside a task: BLAS and OpenMP
        pools are limited to it during runs through ``threadpoolctl`` where that is
        installed; ltdask's own (numba) kernels start no threads. 0 or less is refused.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context, InlineJobExecutor
    >>> from ltdask.udf import SumUDF
    >>> ctx = Context(executor=InlineJobExecutor())
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 3, 3), dtype=np.float32))
    >>> ctx.run_udf(dataset=ds, udf=SumUDF())["intensity"].data.sum().item()
    36.0
    """

    spec = "inline"
    partitions_per_step = 1

    def __init__(self, debug: bool = False, inline_threads: int | None = None) -> None:
        super().__init__()
        if inline_threads is not None and int(inline_threads) < 1:
            raise ValueError(
                f"InlineJobExecutor: inline_threads={inline_threads!r}; expected None or a "
                "count of at least 1"
            )
        self.debug = bool(debug)
        self.inline_threads = inline_threads

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        with dask.config.set(scheduler="synchronous"), self._thread_limit():
            yield

    def _thread_limit(self):
        if self.inline_threads is None:
            return contextlib.nullcontext()
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return contextlib.nullcontext()
        return threadpool_limits(limits=int(self.inline_threads))

    def check_run(self, dataset, udfs) -> None:
        if not self.debug:
            return
        import cloudpickle

        for what in (dataset, *udfs):
            try:
                cloudpickle.loads(cloudpickle.dumps(what))
            except Exception as e:
                raise LtdaskError(
                    f"InlineJobExecutor(debug=True): {what!r} does not survive pickling "
                    f"({type(e).__name__}: {e}); a run on worker processes would fail"
                ) from e

    def _describe(self) -> str:
        return "dask's synchronous scheduler"


class ConcurrentJobExecutor(JobExecutor):
    """Runs tasks on threads of this process: dask's threaded scheduler.

    Parameters
    ----------
    client
        A ``concurrent.futures.Executor`` (a ``ThreadPoolExecutor``) to run the tasks on;
        None: dask's own thread pool.
    is_local
        Shut `client` down when the executor is closed.

    Examples
    --------
    >>> from ltdask.compat import ConcurrentJobExecutor
    >>> ConcurrentJobExecutor.make_local(n_threads=2)
    <ConcurrentJobExecutor (ltdask: dask's threaded scheduler, 2 threads)>
    """

    spec = "threads"

    def __init__(self, client=None, is_local: bool = False) -> None:
        super().__init__()
        import concurrent.futures

        if client is not None and not isinstance(client, concurrent.futures.Executor):
            raise TypeError(
                f"ConcurrentJobExecutor: client={client!r}; expected a "
                "concurrent.futures.Executor (e.g. ThreadPoolExecutor) or None"
            )
        self.client = client
        self.is_local = is_local
        self.n_threads: int | None = None

    @classmethod
    def make_local(cls, n_threads: int | None = None) -> ConcurrentJobExecutor:
        """Dask's threaded scheduler with `n_threads` threads (None: dask's default)."""
        if n_threads is not None and int(n_threads) < 1:
            raise ValueError(
                f"ConcurrentJobExecutor.make_local: n_threads={n_threads!r}; expected at least 1"
            )
        executor = cls()
        executor.n_threads = None if n_threads is None else int(n_threads)
        return executor

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        config: dict[str, Any] = {"scheduler": "threads"}
        if self.client is not None:
            config["scheduler"] = self.client
        if self.n_threads is not None:
            config["num_workers"] = self.n_threads
        with dask.config.set(config):
            yield

    def close(self) -> None:
        if self.is_local and self.client is not None:
            self.client.shutdown(wait=True)

    def _describe(self) -> str:
        if self.client is not None:
            return f"dask's threaded scheduler on {self.client!r}"
        threads = "" if self.n_threads is None else f", {self.n_threads} threads"
        return f"dask's threaded scheduler{threads}"


class DaskJobExecutor(JobExecutor):
    """Runs tasks on a ``distributed`` cluster through `client`.

    Parameters
    ----------
    client
        A ``distributed.Client``; None: the active dask scheduler (a default client if one
        is set up).
    is_local
        Close `client` (and its cluster) when the executor is closed (`make_local` sets it).
    lt_resources
        LiberTEM's flag that its workers declare CPU/GPU resources; ltdask asks for none
        (GPU runs name the ``GPU`` resource themselves), so only None is taken.

    Examples
    --------
    >>> from ltdask.compat import DaskJobExecutor
    >>> DaskJobExecutor(client=None)
    <DaskJobExecutor (ltdask: the active dask scheduler)>
    """

    spec = "dask"

    def __init__(self, client=None, is_local: bool = False, lt_resources=None) -> None:
        super().__init__()
        if lt_resources not in (None, False):
            refuse(
                "DaskJobExecutor",
                "lt_resources",
                lt_resources,
                "ltdask's tasks declare no CPU resource; start workers with "
                "`--resources GPU=1` for GPU runs",
            )
        if client is not None and not (
            "Client" in type(client).__name__ and hasattr(client, "get")
        ):
            raise TypeError(
                f"DaskJobExecutor: client={client!r}; expected a distributed.Client or None"
            )
        self.client = client
        self.is_local = is_local

    @classmethod
    def connect(cls, scheduler_uri: str, *, client_kwargs: dict | None = None):
        """Connect a new client (not made the default one) to the scheduler at
        `scheduler_uri`; closing the executor closes that client."""
        from distributed import Client

        kwargs = {"set_as_default": False, **(client_kwargs or {})}
        return cls(client=Client(address=scheduler_uri, **kwargs), is_local=True)

    @classmethod
    def make_local(
        cls,
        spec: dict | None = None,
        cluster_kwargs: dict | None = None,
        client_kwargs: dict | None = None,
        preload=None,
    ) -> DaskJobExecutor:
        """Start a ``distributed.LocalCluster(**cluster_kwargs)`` and a client for it (not
        made the default one); closing the executor closes both.

        LiberTEM's `spec` (its own worker specification) and `preload` are refused: pass
        ``LocalCluster`` keywords (``n_workers``, ``threads_per_worker``, ...) in
        `cluster_kwargs`. Where the LiberTEM alias is on (`ltdask.compat.alias_libertem`),
        the worker processes get it too.
        """
        if spec is not None:
            refuse(
                "DaskJobExecutor.make_local",
                "spec",
                spec,
                "pass LocalCluster keywords (n_workers=, threads_per_worker=) as cluster_kwargs",
            )
        if preload:
            refuse(
                "DaskJobExecutor.make_local",
                "preload",
                preload,
                "ltdask's workers need no preload; import what you need in the UDF's module",
            )
        from distributed import Client, LocalCluster

        from ltdask.compat.alias import worker_settings

        kwargs = {"dashboard_address": None, **(cluster_kwargs or {})}
        if kwargs.get("processes", True):
            # worker processes import the UDFs' modules: with the LiberTEM alias on here,
            # they need it too
            for key, value in worker_settings().items():
                given = kwargs.get(key)
                if isinstance(value, dict):
                    kwargs[key] = {**value, **(given or {})}
                else:
                    kwargs[key] = [*(given or []), *value]
        cluster = LocalCluster(**kwargs)
        kwargs = {"set_as_default": False, **(client_kwargs or {})}
        return cls(client=Client(cluster, **kwargs), is_local=True)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        if self.client is None:
            yield
            return
        # the current client for ltdask's own look-ups (progress, task names) and dask's
        with self.client.as_current(), dask.config.set(scheduler=self.client):
            yield

    def close(self) -> None:
        if self.is_local and self.client is not None:
            cluster = getattr(self.client, "cluster", None)
            self.client.close()
            if cluster is not None:
                cluster.close()

    def _describe(self) -> str:
        if self.client is None:
            return "the active dask scheduler"
        return f"the distributed client of {getattr(self.client, 'scheduler', None)}"


class DelayedJobExecutor(JobExecutor):
    """LiberTEM's dask-graph executor: ltdask always builds dask graphs, and runs them on
    the active dask scheduler. (For results as dask-backed xarray, use ``ltdask.lazy``.)

    Examples
    --------
    >>> from ltdask.compat import Context, DelayedJobExecutor
    >>> Context(executor=DelayedJobExecutor()).executor
    <DelayedJobExecutor (ltdask: the active dask scheduler)>
    """

    spec = "delayed"
    partitions_per_step = 0


class PipelinedExecutor(JobExecutor):
    """LiberTEM's pipelined multi-process executor: ltdask starts no worker processes of
    its own, and runs on the active dask scheduler. Its worker settings are refused; for
    worker processes use ``DaskJobExecutor.make_local(cluster_kwargs=...)``.

    Examples
    --------
    >>> from ltdask.compat import PipelinedExecutor
    >>> PipelinedExecutor()
    <PipelinedExecutor (ltdask: the active dask scheduler)>
    """

    spec = "pipelined"

    def __init__(self, spec=None, **kwargs) -> None:
        super().__init__()
        for name, value in {"spec": spec, **kwargs}.items():
            if value is not None:
                refuse(
                    "PipelinedExecutor",
                    name,
                    value,
                    "ltdask starts no worker processes of its own; use "
                    "DaskJobExecutor.make_local(cluster_kwargs=...) for a local cluster",
                )

    @classmethod
    def make_local(cls, **kwargs) -> PipelinedExecutor:
        """The active dask scheduler (see the class); worker settings are refused."""
        return cls(**kwargs)
