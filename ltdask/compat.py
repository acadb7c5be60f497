"""A landing place for LiberTEM scripts: ``Context().load(...)``, ``run_udf``, ``map``.

Only the imports of a LiberTEM script change::

    from ltdask.compat import Context
    from ltdask.udf import SumUDF

    ctx = Context()
    ds = ctx.load("raw", path="scan.raw", nav_shape=(64, 64), sig_shape=(128, 128),
                  dtype="uint16")
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    res["intensity"].data
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools

import dask
import numpy as np

import ltdask
from ltdask.analysis import AnalysisMixin
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import DataSetError, LtdaskError, warn
from ltdask.udf.api import (
    RunControl,
    compute,
    compute_datasets,
    initial_datasets,
    iter_steps,
)
from ltdask.udf.base import UDF
from ltdask.udf.builtin.pick import AutoUDF
from ltdask.udf.graph import normalize_roi

_IGNORED_LOAD_KEYS = ("num_partitions", "io_backend", "tileshape", "enable_direct")


class ResultBuffer:
    """One result as LiberTEM's ``BufferWrapper`` shows it: ``data`` (nav-shaped, fill
    values outside the ROI), ``raw_data`` (nav results flat and ROI-compressed, the shape
    of the buffer: ``shape``), ``valid_mask`` (shaped as ``data``), ``masked_data``,
    ``raw_masked_data``, ``valid_slice_bounding``, ``kind``, ``extra_shape``, ``dtype``."""

    def __init__(self, variable, valid, kind: str, roi_flat, nav_dims: int):
        self.data = np.asarray(variable)
        self.valid_mask = np.asarray(valid)
        self.kind = kind
        self._roi_flat = roi_flat
        self._nav_dims = nav_dims

    def _raw(self, arr: np.ndarray) -> np.ndarray:
        if self.kind != "nav":
            return arr
        flat = arr.reshape((-1, *arr.shape[self._nav_dims :]))
        return flat if self._roi_flat is None else flat[self._roi_flat]

    @property
    def raw_data(self) -> np.ndarray:
        return self._raw(self.data)

    @property
    def masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.data, mask=~self.valid_mask)

    @property
    def raw_masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.raw_data, mask=~self._raw(self.valid_mask))

    @property
    def valid_slice_bounding(self) -> tuple[slice, ...]:
        """Per dim of ``data``, the slice from the first to the last valid element (for no
        valid element, LiberTEM's empty ``slice(size, 1)``)."""
        out = []
        for axis in range(self.valid_mask.ndim):
            others = tuple(d for d in range(self.valid_mask.ndim) if d != axis)
            hits = np.flatnonzero(self.valid_mask.any(axis=others))
            size = self.valid_mask.shape[axis]
            out.append(slice(int(hits[0]), int(hits[-1]) + 1) if hits.size else slice(size, 1))
        return tuple(out)

    @property
    def extra_shape(self) -> tuple[int, ...]:
        if self.kind == "nav":
            return tuple(self.data.shape[self._nav_dims :])
        if self.kind == "sig":
            return tuple(self.data.shape[self._nav_dims :])
        return tuple(self.data.shape) if self.data.shape != (1,) else ()

    @property
    def shape(self):
        return self.raw_data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"<ResultBuffer kind={self.kind} shape={self.shape} dtype={self.data.dtype}>"


def _buffers(result, udf: UDF, dataset, roi) -> dict[str, ResultBuffer]:
    roi_flat = None if roi is None else np.asarray(roi, dtype=bool).reshape(-1)  # normalized
    nav_dims = len(dataset.nav_shape)
    nav_names = set(dataset.dims[:nav_dims])
    out = {}
    for name, var in result.data_vars.items():
        dims = set(var.dims)
        if nav_names and nav_names <= dims:
            kind = "nav"
        elif set(dataset.dims[nav_dims:]) <= dims:
            kind = "sig"
        else:
            kind = "single"
        out[name] = ResultBuffer(
            var.values, result[f"{name}_valid"].values, kind, roi_flat, nav_dims
        )
    return out


class Damage:
    """Which nav positions a step of `Context.run_udf_iter` has processed, as LiberTEM's
    nav-kind boolean buffer: ``data`` (nav-shaped, False outside the ROI) and ``raw_data``
    (flat, ROI-compressed)."""

    def __init__(self, flat: np.ndarray, nav_shape, roi_flat):
        self._flat = flat if roi_flat is None else flat & roi_flat
        self._nav_shape = tuple(nav_shape)
        self._roi_flat = roi_flat
        self.kind = "nav"
        self.dtype = np.dtype(bool)

    @property
    def data(self) -> np.ndarray:
        return self._flat.reshape(self._nav_shape)

    @property
    def raw_data(self) -> np.ndarray:
        return self._flat if self._roi_flat is None else self._flat[self._roi_flat]

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


class UDFResults:
    """One step of :meth:`Context.run_udf_iter`: ``buffers`` (a tuple with one dict per
    UDF; computed, and ``get_results`` run, when first read) and ``damage``."""

    def __init__(self, buffers, damage):
        self._buffers = buffers
        self.damage = damage

    @functools.cached_property
    def buffers(self):
        return self._buffers() if callable(self._buffers) else self._buffers


class UnsupportedError(LtdaskError, NotImplementedError):
    """A LiberTEM argument that ltdask cannot honour (yet): refused, never ignored."""


def _refuse(where: str, argument: str, value, why: str):
    raise UnsupportedError(f"{where}: {argument}={value!r} is not supported by ltdask: {why}")


#: LiberTEM executor specs → dask scheduler (None: the active one)
_EXECUTORS = {
    "inline": "synchronous",
    "synchronous": "synchronous",
    "threads": "threads",
    "dask": None,
    "delayed": None,
    "pipelined": None,
    "dask-integration": None,
    "dask-make-default": None,
}


def _check_run_arguments(where: str, corrections, backends) -> None:
    if corrections is not None and not isinstance(corrections, CorrectionSet):
        _refuse(
            where,
            "corrections",
            corrections,
            "expected an ltdask.compat.CorrectionSet (ltdask.CorrectionSet)",
        )
    if backends is not None:
        names = [backends] if isinstance(backends, str) else list(backends)
        if "numpy" not in names:
            _refuse(
                where,
                "backends",
                backends,
                "UDFs run on numpy arrays only for now; include 'numpy' or leave backends out",
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
        if executor is not None and not isinstance(executor, str):
            _refuse(
                "Context",
                "executor",
                executor,
                "work runs on the active dask scheduler; use Context() or "
                "Context.make_with('inline' | 'threads' | 'dask', cpus=N)",
            )
        if plot_class is None:
            from ltdask.viz import MPLLive2DPlot

            plot_class = MPLLive2DPlot
        #: the class of the live plots of ``run_udf(..., plots=True)`` (see `ltdask.viz`)
        self.plot_class = plot_class
        self.executor = executor
        self._config: dict = {}
        if executor is not None:
            self._config = self._scheduler_config(executor, None)

    @staticmethod
    def _scheduler_config(spec: str, cpus) -> dict:
        if spec not in _EXECUTORS:
            raise ValueError(
                f"Context.make_with: unknown executor_spec={spec!r}; expected one of "
                f"{', '.join(map(repr, _EXECUTORS))}"
            )
        config: dict = {}
        scheduler = _EXECUTORS[spec]
        if cpus is not None:
            count = cpus if isinstance(cpus, int) else len(list(cpus))
            if count < 1:
                raise ValueError(f"Context.make_with: cpus={cpus!r} gives no CPU to work on")
            if scheduler != "synchronous":
                # as many threads as LiberTEM would start worker processes
                scheduler = "threads"
                config["num_workers"] = count
        if scheduler is not None:
            config["scheduler"] = scheduler
        return config

    @classmethod
    def make_with(
        cls, executor_spec: str = "dask", cpus=None, gpus=None, plot_class=None
    ) -> Context:
        """A context on the dask scheduler LiberTEM's `executor_spec` stands for.

        ``"inline"`` runs synchronously; ``"threads"`` on dask's threaded scheduler;
        ``"dask"`` (and LiberTEM's other specs) on the active dask scheduler (a
        ``distributed.Client`` if one is set up). ``cpus`` (a count or a list of CPUs) runs
        that many threads. GPUs are not supported yet.
        """
        if gpus not in (None, 0) and not (hasattr(gpus, "__len__") and len(gpus) == 0):
            _refuse("Context.make_with", "gpus", gpus, "UDFs run on the CPU only for now")
        ctx = cls(plot_class=plot_class)
        ctx.executor = executor_spec
        ctx._config = cls._scheduler_config(executor_spec, cpus)
        return ctx

    def _scheduler(self):
        return dask.config.set(self._config) if self._config else contextlib.nullcontext()

    def load(self, filetype: str, *args, **kwargs):
        """Open a dataset: ``"raw"``, ``"npy"``, ``"hdf5"``, ``"zarr"``, ``"raw_csr"``,
        ``"mib"``, ``"memory"``, ``"dask"`` or ``"auto"`` (by file contents)."""
        for key in _IGNORED_LOAD_KEYS:
            kwargs.pop(key, None)
        kind = filetype.lower()
        openers = {
            "raw": ltdask.open_raw,
            "npy": ltdask.open_npy,
            "hdf5": ltdask.open_hdf5,
            "h5": ltdask.open_hdf5,
            "zarr": ltdask.open_zarr,
            "raw_csr": ltdask.open_raw_csr,
            "mib": ltdask.open_mib,
            "auto": ltdask.open,
        }
        if kind == "auto" and not args and "path" in kwargs:
            args = (kwargs.pop("path"),)  # ltdask.open takes the path positionally
        if kind in openers:
            return openers[kind](*args, **kwargs)
        if kind in ("memory", "dask"):
            data = kwargs.pop("data", args[0] if args else None)
            if data is None:
                shape = kwargs.pop("datashape")
                data = np.zeros(shape, dtype=kwargs.pop("dtype", np.float32))
            sig_dims = kwargs.pop("sig_dims", 2)
            return ltdask.from_array(data, sig_dims=sig_dims, **kwargs)
        raise DataSetError(f"Context.load: unknown or unsupported file type {filetype!r}")

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
        applied to every frame. Backends other than numpy are refused, not ignored.
        """
        _check_run_arguments("Context.run_udf", corrections, backends)
        if plots:
            run = functools.partial(self._run_udf_plotted, dataset, udf, roi, plots, corrections)
        else:
            run = functools.partial(self._run_udf, dataset, udf, roi, progress, corrections)
        if not sync:
            return _in_thread(run)
        return run()

    def _run_udf_plotted(self, dataset, udf, roi, plots, corrections):
        steps = self._run_udf_iter(dataset, udf, roi, plots, corrections=corrections)
        (last,) = collections.deque(steps, maxlen=1)
        out = last.buffers
        return out if isinstance(udf, (list, tuple)) else out[0]

    def _run_udf(self, dataset, udf, roi, progress, corrections=None):
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        roi_flat = normalize_roi(roi, dataset)
        with self._scheduler():
            results = compute(
                dataset, udfs, roi=roi_flat, progress=progress, corrections=corrections
            )
        out = tuple(_buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True))
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
        """Yield `UDFResults` as partitions finish; with ``sync=False`` an async iterator.
        ``plots`` as in :meth:`run_udf`."""
        _check_run_arguments("Context.run_udf_iter", corrections, backends)
        control = RunControl()
        steps = ResultGenerator(
            self._run_udf_iter(dataset, udf, roi, plots, control, corrections), control
        )
        return steps if sync else _async_steps(steps)

    def _run_udf_iter(self, dataset, udf, roi, plots=None, control=None, corrections=None):
        udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
        roi_flat = normalize_roi(roi, dataset)
        if plots:
            with self._scheduler():
                plots = self._prepare_plots(udfs, dataset, roi_flat, plots)

        def buffers(make):
            with self._scheduler():
                results = compute_datasets(make())
            return tuple(
                _buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True)
            )

        with self._scheduler():
            steps = iter_steps(
                dataset,
                udfs,
                roi=roi_flat,
                unprocessed="initial",
                control=control,
                corrections=corrections,
            )
            step = None
            for make, damage in steps:
                step = UDFResults(
                    functools.partial(buffers, make), Damage(damage, dataset.nav_shape, roi_flat)
                )
                if plots:
                    _update_plots(plots, udfs, step, force=False)
                yield step
            if plots and step is not None:
                _update_plots(plots, udfs, step, force=True)

    def _prepare_plots(self, udfs, dataset, roi_flat, plots) -> list:
        """LiberTEM's three forms of ``plots``: True, channels per UDF, plot objects."""
        if plots is True:
            channels = None
        elif isinstance(plots, (list, tuple)) and all(
            isinstance(p, (list, tuple))
            and all(isinstance(c, (str, list, tuple)) or callable(c) for c in p)
            for p in plots
        ):
            channels = plots
        else:
            return list(plots)
        before = dry_run(dataset, udfs, roi_flat)
        if channels is None:
            from ltdask.viz import plottable_channels

            channels = [plottable_channels(b) for b in before.buffers]
            for udf, chans in zip(udfs, channels, strict=True):
                if not chans:
                    warn(
                        f"No plottable channels found for {type(udf).__name__}, not plotting",
                        UserWarning,
                    )
        out = []
        for u, (udf, chans) in enumerate(zip(udfs, channels, strict=True)):
            for channel in chans:
                plot = self.plot_class(
                    dataset,
                    udf=udf,
                    roi=roi_flat,
                    channel=channel,
                    udfresult=UDFResults((before.buffers[u],), before.damage),
                )
                plot.display()
                out.append(plot)
        return out

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
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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


def _update_plots(plots, udfs, step, force: bool):
    damage = step.damage.data
    for plot in plots:
        index = next(i for i, u in enumerate(udfs) if u is plot.get_udf())
        plot.new_data(step.buffers[index], damage, force=force)


def dry_run(dataset, udfs, roi=None) -> UDFResults:
    """The results of `udfs` before any partition is processed (their buffers after
    ``preprocess``), as a `UDFResults` step: shapes and dtypes of what a run gives."""
    roi_flat = normalize_roi(roi, dataset)
    results = compute_datasets(initial_datasets(dataset, udfs, roi_flat))
    buffers = tuple(_buffers(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True))
    return UDFResults(
        buffers, Damage(np.zeros(dataset.num_frames, bool), dataset.nav_shape, roi_flat)
    )


class UDFInfo:
    """A UDF's result buffers on a dataset (from :meth:`Context.display`)."""

    def __init__(self, title: str, buffers: dict):
        self.title = title
        self.buffers = buffers

    def rows(self) -> list[tuple]:
        return [(name, b.kind, b.extra_shape, b.shape, b.dtype) for name, b in self.buffers.items()]

    def __repr__(self) -> str:
        lines = [self.title] + [
            f"  {n}: kind={k}, extra_shape={e}, shape={s}, dtype={d}"
            for n, k, e, s, d in self.rows()
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        cells = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
            for row in self.rows()
        )
        head = "".join(f"<th>{h}</th>" for h in ("name", "kind", "extra_shape", "shape", "dtype"))
        return (
            f"<h4>{html.escape(self.title)}</h4><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{cells}</tbody></table>"
        )


async def _in_thread(fn):
    return await asyncio.get_running_loop().run_in_executor(None, fn)


async def _async_steps(steps):
    """The steps of a synchronous iterator, each computed in a thread."""
    done = object()
    try:
        while True:
            step = await _in_thread(lambda: next(steps, done))
            if step is done:
                return
            yield step
    finally:
        steps.close()
