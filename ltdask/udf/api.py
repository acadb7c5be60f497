"""Running UDFs: lazy and computed `xarray.Dataset` results, partial results.

:func:`lazy`, :func:`compute` and :func:`iter_results` are ``ltdask.lazy``,
``ltdask.compute`` and ``ltdask.iter``. A run goes through the engine's modules in order:
:mod:`~ltdask.udf.plan` (check and negotiate), :mod:`~ltdask.udf.graph` (one task per
partition, :mod:`~ltdask.udf.runner` inside), :mod:`~ltdask.udf.merge`,
:mod:`~ltdask.udf.results` (``get_results``) and :mod:`~ltdask.udf.assemble` (xarray).
"""

from __future__ import annotations

from ltdask.io.dataset import DataSet
from ltdask.io.partition import for_run
from ltdask.runtime.schedulers import RunTarget
from ltdask.udf.assemble import compute_datasets, to_datasets
from ltdask.udf.backends import stages_to_gpu
from ltdask.udf.graph import Run
from ltdask.udf.interface import UDFBase
from ltdask.udf.steps import RunControl, initial_datasets, iter_steps

__all__ = [
    "RunControl",
    "compute",
    "compute_datasets",
    "initial_datasets",
    "iter_results",
    "iter_steps",
    "iter_with_damage",
    "lazy",
    "to_datasets",
]


def lazy(
    dataset: DataSet,
    udfs: list[UDFBase] | UDFBase,
    roi=None,
    corrections=None,
    backends=None,
    scheduler=None,
) -> list:
    """Build the graph that runs `udfs` together on `dataset` (each tile read once).

    Parameters
    ----------
    dataset
        From ``ltdask.open_*`` or :func:`ltdask.from_array`.
    udfs
        UDF instances; they share the partition tasks.
    roi
        Boolean array of the nav shape (or the flat nav size), or None for all positions.
    corrections
        A `ltdask.CorrectionSet` (dark frame, gain map, excluded pixels) applied to every
        frame before the UDFs see it.
    backends
        Array backends the run may use (``UDF.BACKEND_*`` names, e.g. ``("numpy",)`` to
        keep every UDF on dense CPU arrays); by default each UDF gets the one of its
        ``get_backends()`` that costs the least conversion (see :func:`ltdask.explain`).
    scheduler
        The scheduler the graph is planned for: its partition sizes (larger on the
        threaded scheduler and on a cluster, see ``ltdask.partition-bytes``), fresh
        task keys and GPU placement on a cluster. None (default): the one ``dask.compute``
        would use now; else a ``distributed.Client``, ``"distributed"`` (the default
        Client), ``"threads"``, ``"sync"`` or ``"processes"``. The graph computes with the
        same values on any scheduler; plan it for the one that will run it.

    Returns
    -------
    list of xarray.Dataset
        One per UDF, backed by dask arrays; nothing is computed yet.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumSigUDF
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> (res,) = ltdask.lazy(ds, [SumSigUDF()])
    >>> res["intensity"].values.tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    """
    return to_datasets(_run(dataset, udfs, roi, corrections, backends, scheduler).graph)


def compute(
    dataset: DataSet,
    udfs: list[UDFBase] | UDFBase,
    roi=None,
    progress: bool | None = None,
    corrections=None,
    backends=None,
    scheduler=None,
) -> list:
    """Run `udfs` together on `dataset` in one pass; computed `xarray.Dataset` per UDF
    (parameters as for :func:`lazy`; the run is planned for and computes on `scheduler`,
    by default the active one).

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumUDF, SumSigUDF
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    >>> float(total["intensity"].sum()), float(per_frame["intensity"].sum())
    (96.0, 96.0)
    """
    if dataset.ready_partitions(0) is not None and not RunTarget.resolve(scheduler).on_cluster:
        return _compute_as_it_arrives(dataset, udfs, roi, corrections, backends, scheduler)
    graph = _run(dataset, udfs, roi, corrections, backends, scheduler).graph
    return dataset.settle(compute_datasets(to_datasets(graph), progress, graph, scheduler))


def _compute_as_it_arrives(dataset, udfs, roi, corrections, backends, scheduler) -> list:
    """`compute` of a dataset whose frames arrive over time (a live acquisition): its
    partitions in scan order, those that have arrived in each step. (dask's schedulers
    take independent tasks in an order of their own: a thread would wait for a partition
    still to come while the ones before it pile up in memory.)"""
    import contextlib

    import dask

    local = isinstance(scheduler, str)
    with dask.config.set(scheduler=scheduler) if local else contextlib.nullcontext():
        *_, (make, _) = iter_steps(
            dataset, udfs, roi, corrections=corrections, backends=backends, partitions="run"
        )
        return dataset.settle(compute_datasets(make()))


def _run(dataset, udfs, roi, corrections, backends, scheduler) -> Run:
    """The run planned for `scheduler`, resolved here, once (`RunTarget`)."""
    if isinstance(udfs, UDFBase):
        udfs = [udfs]
    target = RunTarget.resolve(scheduler)
    udfs = list(udfs)
    device = stages_to_gpu(dataset, udfs, backends, target)
    return Run(for_run(dataset, target, device), udfs, roi, corrections, backends, target)


def iter_results(
    dataset: DataSet, udfs: list[UDFBase] | UDFBase, roi=None, corrections=None, backends=None
):
    """Yield partial results (one list of Datasets per step) as partitions finish.

    Each step's ``NAME_valid`` coordinates mark what is done; the last step is complete.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumSigUDF
    >>> ds = ltdask.from_array(np.ones((2, 3, 4, 4), dtype=np.float32))
    >>> *_, (last,) = ltdask.iter(ds, [SumSigUDF()])
    >>> bool(last["intensity_valid"].all())
    True
    """
    for datasets, _ in iter_with_damage(dataset, udfs, roi, corrections, backends):
        yield datasets


def iter_with_damage(
    dataset: DataSet, udfs: list[UDFBase] | UDFBase, roi=None, corrections=None, backends=None
):
    """Like `iter_results`, yielding ``(datasets, damage)``: damage is the flat boolean
    mask of the nav positions whose partitions are done."""
    for make, damage in iter_steps(dataset, udfs, roi, corrections=corrections, backends=backends):
        yield dataset.settle(compute_datasets(make())), damage
