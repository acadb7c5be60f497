"""Computing with an optional progress bar: dask's own on the local schedulers,
distributed's on a Client."""

from __future__ import annotations


def default_client():
    """The default `distributed.Client`, or None (without importing distributed)."""
    import sys

    if "distributed" not in sys.modules:
        return None
    from distributed import default_client as get

    try:
        return get()
    except ValueError:
        return None


#: ltdask's graphs are written task by task (`ltdask.udf.tasks`): dask's linear fusion only
#: adds work to them (10-30 % of a short run) and drops the tasks' annotations (the GPU
#: resource of CuPy runs on a cluster)
NO_FUSION = {"optimization.fuse.active": False}


def compute(*collections, progress: bool = False) -> tuple:
    """``dask.compute(*collections)`` (without low-level fusion, see `NO_FUSION`),
    showing progress when asked."""
    import dask

    with dask.config.set(NO_FUSION):
        return _compute(collections, progress)


def _compute(collections, progress: bool) -> tuple:
    import dask

    if not progress:
        return dask.compute(*collections)
    client = default_client()
    if client is not None and dask.config.get("scheduler", None) in (None, "dask.distributed"):
        from distributed import progress as show

        futures = client.compute(list(collections))
        show(futures)
        return tuple(client.gather(futures))
    from dask.diagnostics import ProgressBar

    with ProgressBar():
        return dask.compute(*collections)
