"""`Context`: LiberTEM's ``Context`` (``load``, ``run_udf``, ``run_udf_iter``, ``map``,
``display``, the Analysis API) on the active dask scheduler."""

from __future__ import annotations

import collections
import contextlib
import functools

from ltdask.analysis import AnalysisMixin
from ltdask.compat.datasets import MemoryDataSet
from ltdask.compat.devices import has_cupy, run_backends
from ltdask.compat.exceptions import JobCancelledError, UDFRunCancelled
from ltdask.compat.executor_specs import executor_for_spec
from ltdask.compat.executors import (
    DaskJobExecutor,
    JobExecutor,
    UnsupportedError,
    refuse,
)
from ltdask.compat.results import Damage, UDFInfo, UDFResults, dry_run, result_buffers
from ltdask.compat.steps import ResultAsyncGenerator, ResultGenerator, in_thread
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import DataSetError, ExecutorSpecException
from ltdask.udf.api import RunControl, compute, compute_datasets, iter_steps
from ltdask.udf.builtin.pick import AutoUDF
from ltdask.udf.roi import normalize_roi
from ltdask.views.viz import MPLLive2DPlot, prepare_plots, update_plots

_IGNORED_LOAD_KEYS = ("num_partitions", "io_backend", "tileshape", "enable_direct")
#: of those, what `MemoryDataSet` honours
_MEMORY_LOAD_KEYS = ("num_partitions", "tileshape")
#: file type -> {LiberTEM's ``Context.load`` keyword: the ``open_*`` keyword it is}
_RENAMED_LOAD_KEYS = {"hdf5": {"ds_path": "key"}}


def _gpu_executor(spec: str, cpus, gpus) -> DaskJobExecutor | None:
    """The executor of ``Context.make_with(spec, cpus, gpus)`` with GPUs: a local cluster of
    GPU and CPU workers (`ltdask.runtime.gpu_cluster`); None where `gpus` names none."""
    from ltdask.runtime.gpu_cluster import gpu_ids, start_local

    if spec != "dask" and gpus not in (0, [], ()):
        raise ExecutorSpecException(
            f"Context.make_with({spec!r}, gpus={gpus!r}): GPU workers are started for the "
            "'dask' executor spec; use Context.make_with('dask', gpus=...)"
        )
    ids = gpu_ids(gpus)
    if not ids:
        return None
    if cpus is None:
        from ltdask.compat.devices import detect

        n_cpus = len(detect()["cpus"])
    else:
        n_cpus = cpus if isinstance(cpus, int) else len(list(cpus))
    from ltdask.compat.alias import worker_settings

    client = start_local(n_cpus, ids, settings=worker_settings())
    return DaskJobExecutor(client=client, is_local=True)


def _as_executor(executor) -> JobExecutor:
    if isinstance(executor, JobExecutor):
        return executor
    if isinstance(executor, str):
        return executor_for_spec(executor)
    kind = type(executor)
    raise UnsupportedError(
        f"Context: executor={executor!r} (a {kind.__module__}.{kind.__qualname__}) is not "
        "supported by ltdask: work runs on dask schedulers; pass one of ltdask.compat's "
        "executors (InlineJobExecutor(), ConcurrentJobExecutor.make_local(), "
        "DaskJobExecutor(client), DaskJobExecutor.connect(address), "
        "DaskJobExecutor.make_local(), DelayedJobExecutor(), PipelinedExecutor()), an "
        "executor spec ('inline', 'threads', 'dask'), or None for the active dask scheduler"
    )


@contextlib.contextmanager
def _cancelled_as_lt(control: RunControl):
    """`JobCancelledError` raised in a run becomes `UDFRunCancelled`, as in LiberTEM."""
    try:
        yield
    except JobCancelledError as e:
        raise UDFRunCancelled(
            f"UDF run cancelled after {control.partitions_done} partitions"
        ) from e


def _check_run_arguments(where: str, corrections, backends) -> None:
    if corrections is not None and not isinstance(corrections, CorrectionSet):
        refuse(
            where,
            "corrections",
            corrections,
            "expected an ltdask.compat.CorrectionSet (ltdask.CorrectionSet)",
        )


class Context(AnalysisMixin):
    """LiberTEM's ``Context`` on top of ltdask; work runs on the active dask scheduler.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.udf import SumSigUDF
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 3, 3), dtype=np.float32), sig_dims=2)
    >>> ctx.run_udf(dataset=ds, udf=SumSigUDF())["intensity"].data.tolist()
    [[9.0, 9.0], [9.0, 9.0]]
    """

    def __init__(self, executor=None, plot_class=None):
        if plot_class is None:
            plot_class = MPLLive2DPlot
        #: the class of the live plots of ``run_udf(..., plots=True)`` (see `ltdask.viz`)
        self.plot_class = plot_class
        self.executor = executor

    @property
    def executor(self) -> JobExecutor:
        """The `JobExecutor` (`ltdask.compat.executors`) whose dask scheduler runs the work;
        set it to another executor, an executor spec (``"inline"``...) or None (the active
        dask scheduler)."""
        return self._executor

    @executor.setter
    def executor(self, executor) -> None:
        self._executor = _as_executor(executor) if executor is not None else DaskJobExecutor()

    @classmethod
    def make_with(
        cls,
        executor_spec: str = "dask",
        cpus=None,
        gpus=None,
        plot_class=None,
        main_process_gpu=None,
    ) -> Context:
        """A context on the dask scheduler LiberTEM's `executor_spec` stands for.

        ``"inline"`` runs synchronously; ``"threads"`` on dask's threaded scheduler;
        ``"dask"`` (and LiberTEM's other specs) on the active dask scheduler (a
        ``distributed.Client`` if one is set up). ``cpus`` (a count or a list of CPUs) runs
        that many threads. ``gpus`` (a count, or a list of device ids as LiberTEM takes
        it), with ``"dask"``: a new local ``distributed`` cluster of a worker per GPU (a
        ``GPU`` resource, ``CUDA_VISIBLE_DEVICES`` its device) and ``cpus`` CPU workers
        (default: one per core), closed with the context; runs whose UDFs take CPU and
        CUDA backends use both kinds of worker, CUDA-only ones the GPU workers (see
        docs/distributed.md). Raises `ExecutorSpecException` where CuPy is missing or
        sees fewer GPUs. The executor is ``ctx.executor`` (see `ltdask.compat.executors`).
        LiberTEM's
        ``main_process_gpu`` (True or a GPU number: this process may use a GPU) is
        refused with `ExecutorSpecException` where CuPy cannot use a GPU, as in LiberTEM;
        elsewhere None, False and a GPU all run as said above.
        """
        if main_process_gpu is True or type(main_process_gpu) is int:
            if not has_cupy():
                raise ExecutorSpecException(
                    f"Context.make_with: main_process_gpu={main_process_gpu!r} asks for a "
                    "GPU, but CuPy cannot use one here (install cupy for the CUDA "
                    "version, or give main_process_gpu=None or False)"
                )
        if gpus is not None:
            executor = _gpu_executor(executor_spec, cpus, gpus)
            if executor is not None:
                return cls(executor=executor, plot_class=plot_class)
        return cls(executor=executor_for_spec(executor_spec, cpus), plot_class=plot_class)

    def _scheduler(self):
        return self._executor.activate()

    def load(self, filetype: str, *args, **kwargs):
        """Open a dataset: a file format by its name in ltdask's format registry (every
        built-in format -- ``"raw"``, ``"mib"``, ``"dectris"``, ``"k2is"``, ... as
        ``ltdask.io.supported_formats()`` lists them -- or a plug-in's), ``"memory"``,
        ``"dask"`` or ``"auto"`` (by file name and contents), with the format's
        ``open_*`` keywords (and LiberTEM's names of them: ``ds_path`` for hdf5's ``key``)."""
        from ltdask.io.open import open_dataset
        from ltdask.io.registry import find_format, format_names

        kind = filetype.lower()
        for key in _IGNORED_LOAD_KEYS:
            if kind not in ("memory", "dask") or key not in _MEMORY_LOAD_KEYS:
                kwargs.pop(key, None)
        for theirs, ours in _RENAMED_LOAD_KEYS.get(kind, {}).items():
            if theirs in kwargs:
                if ours in kwargs:
                    raise TypeError(
                        f"Context.load({filetype!r}): give {ours}= or LiberTEM's {theirs}=, "
                        "not both"
                    )
                kwargs[ours] = kwargs.pop(theirs)
        if kind == "auto":
            if not args and "path" in kwargs:
                args = (kwargs.pop("path"),)  # ltdask.open takes the path positionally
            return _as_loaded(open_dataset(*args, **kwargs))
        if kind in ("memory", "dask"):
            return MemoryDataSet(*args, **kwargs)
        fmt = find_format(kind)
        if fmt is None:
            raise DataSetError(
                f"Context.load: unknown or unsupported file type {filetype!r}; expected one "
                f"of {', '.join(format_names())}, memory, dask or auto"
            )
        return _as_loaded(fmt.open(*args, **kwargs))

    def run_udf(
        self,
        dataset,
        udf,
        roi=None,
        corrections=None,
        progress: bool = False,
        backends=None,
        plots=None,
        sync: bool = True,
    ):
        """Run one UDF (→ dict of results) or a list of UDFs (→ tuple of dicts).

        With ``sync=False``, returns an awaitable of the same (the run goes on in a thread).
        ``plots``: True (every 2-D result of every UDF), a list per UDF of channels (buffer
        names, ``(name, function)`` pairs or functions) or a list of plot objects; they are
        updated as partitions finish (see `ltdask.viz`). ``corrections``: a `CorrectionSet`
        applied to every frame. ``backends``: the array backends the run may use (see
        :func:`ltdask.lazy`).
        """
        _check_run_arguments("Context.run_udf", corrections, backends)
        backends = run_backends(backends)
        if plots:
            run = functools.partial(
                self._run_udf_plotted, dataset, udf, roi, plots, corrections, backends
            )
        else:
            run = functools.partial(
                self._run_udf, dataset, udf, roi, progress, corrections, backends
            )
        if not sync:
            return in_thread(run)
        return run()

    def _run_udf_plotted(self, dataset, udf, roi, plots, corrections, backends=None):
        steps = self._run_udf_iter(
            dataset, udf, roi, plots, corrections=corrections, backends=backends
        )
        (last,) = collections.deque(steps, maxlen=1)
        out = last.buffers
        return out if isinstance(udf, (list, tuple)) else out[0]

    def _run_udf(self, dataset, udf, roi, progress, corrections=None, backends=None):
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        roi_flat = normalize_roi(roi, dataset)
        self._executor.check_run(dataset, udfs)
        with self._scheduler():
            results = compute(
                dataset,
                udfs,
                roi=roi_flat,
                progress=progress,
                corrections=corrections,
                backends=backends,
            )
        out = tuple(
            result_buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True)
        )
        return out if isinstance(udf, (list, tuple)) else out[0]

    def run_udf_iter(
        self,
        dataset,
        udf,
        roi=None,
        corrections=None,
        progress: bool = False,
        backends=None,
        plots=None,
        sync: bool = True,
    ):
        """Yield `UDFResults` as partitions finish (a `ResultGenerator`); with
        ``sync=False`` an async iterator (a `ResultAsyncGenerator`). ``plots`` as in
        :meth:`run_udf`.

        As in LiberTEM, the steps go through the partitions of :meth:`run_udf` (a step's
        results are bit for bit those of ``run_udf`` on the positions done): one partition
        a step with `InlineJobExecutor`, all in one step with `DelayedJobExecutor`, one
        per core with the others; partitions without ROI frames go with the next step.
        `JobCancelledError` raised in the run ends it with `UDFRunCancelled`."""
        _check_run_arguments("Context.run_udf_iter", corrections, backends)
        backends = run_backends(backends)
        control = RunControl()
        steps = ResultGenerator(
            self._run_udf_iter(dataset, udf, roi, plots, control, corrections, backends), control
        )
        return steps if sync else ResultAsyncGenerator(steps)

    def _run_udf_iter(
        self, dataset, udf, roi, plots=None, control=None, corrections=None, backends=None
    ):
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        roi_flat = normalize_roi(roi, dataset)
        self._executor.check_run(dataset, udfs)
        if plots:
            with self._scheduler():
                plots = self._prepare_plots(udfs, dataset, roi_flat, plots)

        def buffers(make):
            with self._scheduler():
                results = dataset.settle(compute_datasets(make()))
            return tuple(
                result_buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True)
            )

        if control is None:
            control = RunControl()
        with self._scheduler(), _cancelled_as_lt(control):
            steps = iter_steps(
                dataset,
                udfs,
                roi=roi_flat,
                unprocessed="initial",
                control=control,
                corrections=corrections,
                backends=backends,
                # as in LiberTEM: run_udf's partitions, so results are bit-identical
                partitions="run",
                per_step=self._executor.partitions_per_step,
            )
            step = None
            for make, damage in steps:
                step = UDFResults(
                    functools.partial(buffers, make), Damage(damage, dataset.nav_shape, roi_flat)
                )
                if plots:
                    update_plots(plots, udfs, step.buffers, step.damage.data, force=False)
                yield step
            if plots and step is not None:
                update_plots(plots, udfs, step.buffers, step.damage.data, force=True)

    def _prepare_plots(self, udfs, dataset, roi_flat, plots) -> list:
        # (the plots start from LiberTEM's buffers, as they are fed with them)
        return prepare_plots(
            self.plot_class,
            udfs,
            dataset,
            roi_flat,
            plots,
            before=lambda: dry_run(dataset, udfs, roi_flat),
        )

    def display(self, dataset, udf, roi=None):
        """What `udf` would give on `dataset`: its result buffers (name, kind, extra shape,
        shape, dtype), as an object that notebooks show as a table."""
        roi_flat = normalize_roi(roi, dataset)
        with self._scheduler():
            buffers = dry_run(dataset, [udf], roi_flat).buffers[0]
        return UDFInfo(type(udf).__name__, buffers)

    def map(self, dataset, f, roi=None, progress: bool = False, corrections=None, backends=None):
        """``f(frame)`` for every frame: the ``result`` buffer of an `AutoUDF`."""
        udf = AutoUDF(f=f)
        return self.run_udf(
            dataset=dataset,
            udf=udf,
            roi=roi,
            progress=progress,
            corrections=corrections,
            backends=backends,
        )["result"]

    def close(self):
        """Close the executor: what `DaskJobExecutor.make_local` or ``connect`` started."""
        self._executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _as_loaded(ds):
    """`ds` with LiberTEM's ``_path`` (the path it was opened from; LiberTEM's datasets keep
    it there, and scripts and LiberTEM's tests read it) beside ltdask's ``path``."""
    ds._path = str(ds.path)
    return ds
