"""Planning a run: check the UDFs and what they declare, settle the dtype the tiles have and
negotiate the tiling scheme with the dataset, before any graph is built.

Every error a UDF's declarations can cause is raised here, when the graph is built, with
a message naming the UDF and the fix. The result, a `RunPlan`, is what the rest of the
engine works from: the partition graph (:mod:`ltdask.udf.graph`), the merges
(:mod:`ltdask.udf.merge`) and the results (:mod:`ltdask.udf.results`).
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from dataclasses import dataclass

import numpy as np

from ltdask.exceptions import MergeNotImplementedError, UDFError
from ltdask.io.dataset import DataSet
from ltdask.io.partition import Partition
from ltdask.io.tiling import Negotiator, TilingPreferences, TilingScheme
from ltdask.runtime import settings
from ltdask.runtime.schedulers import RunTarget
from ltdask.udf.backends import NUMPY as BACKEND_NUMPY
from ltdask.udf.backends import plan_backends
from ltdask.udf.bind import RunContext, bind
from ltdask.udf.buffers import BufferSpec, declared_buffers, stored_buffers
from ltdask.udf.interface import UDFBase, UDFMethod, overrides
from ltdask.udf.paths import PathQuery, choose_path
from ltdask.udf.paths.device import with_gpu_role
from ltdask.udf.roi import Selection


@dataclass(frozen=True, eq=False)
class RunPlan:
    """A run of `udfs` on `dataset`, checked and negotiated; nothing is read yet."""

    dataset: DataSet
    #: the UDF instances as given (the templates every task copies)
    udfs: list[UDFBase]
    #: what the UDF instances of the run know about it
    context: RunContext
    #: the `CorrectionSet` of the run, and its form for the dataset's signal shape
    corrections: object
    prepared: object
    partitions: list[Partition]
    #: per partition: its number of frames, and of frames in the ROI
    sizes: tuple[int, ...]
    counts: tuple[int, ...]
    #: flat, all positions: those in the ROI that hold data read from the files
    valid_flat: np.ndarray
    #: per UDF: an instance bound to the whole run (merges, ``get_results``), and its
    #: declared buffers
    bound_udfs: list[UDFBase]
    specs: list[dict[str, BufferSpec]]
    scheme: TilingScheme
    #: the dataset's token (it stats the files: once per run) and the run's
    dataset_token: str
    token: str
    #: the scheduler the graph is planned for (`ltdask.runtime.schedulers.RunTarget`)
    target: RunTarget

    @property
    def tile_corrections(self):
        """The corrections the partition tasks apply to every tile: `prepared`, unless the
        run's path hands the tiles uncorrected (the UDFs fold them into their results)."""
        return self.prepared if self.context.path.corrects_tiles else None

    @property
    def roi(self) -> Selection:
        return self.context.roi

    @property
    def read_dtype(self) -> np.dtype:
        return self.context.input_dtype

    @property
    def n_sel(self) -> int:
        return self.context.n_sel

    @property
    def sig_shape(self) -> tuple[int, ...]:
        return self.context.sig_shape

    def stored(self, u: int) -> dict[str, BufferSpec]:
        """The buffers of UDF `u` that partition tasks fill (not ``result_only``)."""
        return stored_buffers(self.specs[u])


def plan_run(
    dataset: DataSet,
    udfs: list[UDFBase],
    roi=None,
    corrections=None,
    backends=None,
    target: RunTarget | None = None,
) -> RunPlan:
    """Check `udfs` for a run on `dataset` (with `roi` and `corrections`) and plan it for
    `target` (default: the scheduler active now).

    Raises
    ------
    UDFError
        For anything a UDF declares or returns that the run cannot use.
    MergeNotImplementedError
        For a UDF with buffers that are not nav buffers but no ``merge`` or ``merge_all``.
    MemoryError
        For a result buffer larger than this machine's memory.
    """
    from dask.base import tokenize

    udfs = _checked_udfs(udfs)
    selection = Selection.of(roi, dataset)
    corrections, prepared, read_dtype = _corrections(
        dataset, corrections, input_dtype(dataset, udfs)
    )
    # corrected tiles are dense: the dataset delivers numpy then
    sources = (BACKEND_NUMPY,) if prepared is not None else dataset.array_backends
    target = RunTarget.resolve(target)
    partitions = dataset.get_partitions()
    counts = tuple(selection.count(p.start, p.stop) for p in partitions)
    sizes = tuple(p.num_frames for p in partitions)
    context = RunContext(
        dataset.shape, tuple(dataset.sig_shape), np.dtype(dataset.dtype), np.dtype(read_dtype),
        selection, sum(counts), corrections, plan_backends(sources, udfs, backends, target=target),
        nav_calibration=dataset.nav_calibration, sig_calibration=dataset.sig_calibration,
    )  # fmt: skip
    bound_udfs, specs, methods = _bind_all(dataset, udfs, context)
    consumers = [_preferences(m) for m in bound_udfs]
    negotiate = functools.partial(_negotiate, dataset, consumers, context, prepared, sizes)
    query = PathQuery(
        dataset, udfs, [m.value for m in methods], consumers, context, prepared,
        max(sizes, default=0), negotiate,
    )  # fmt: skip
    path, scheme = choose_path(query)
    context = with_gpu_role(query, path, dataclasses.replace(context, path=path))
    _check_whole_frames(dataset, methods, scheme)
    dataset_token = tokenize(dataset)
    return RunPlan(
        dataset=dataset,
        udfs=udfs,
        context=context,
        corrections=corrections,
        prepared=prepared,
        partitions=partitions,
        sizes=sizes,
        counts=counts,
        valid_flat=selection.restrict(dataset.valid_nav_mask().reshape(-1)),
        bound_udfs=bound_udfs,
        specs=specs,
        scheme=scheme,
        dataset_token=dataset_token,
        token=_run_token(dataset, dataset_token, udfs, context, scheme, prepared, sizes, target),
        target=target,
    )


def _run_token(dataset, dataset_token, udfs, context, scheme, prepared, sizes, target) -> str:
    """The run's token: of the data, the UDFs, the ROI, the dtype, the tiling and the
    path; the partitions too (an iterated run cuts the same dataset finer:
    `with_min_partitions`), and the calibrations, which UDFs may use
    (``meta.sig_calibration``)."""
    from dask.base import tokenize

    calibration = (dataset.nav_calibration, dataset.sig_calibration)
    return tokenize(
        _cluster_nonce(target), dataset_token, udfs, context.roi.flat, context.input_dtype.str,
        scheme, prepared, sizes, calibration, context.path,
    )  # fmt: skip


def _check_whole_frames(dataset: DataSet, methods: list[UDFMethod], scheme) -> None:
    if any(meth is not UDFMethod.TILE for meth in methods) and len(scheme) != 1:
        raise UDFError(
            f"{dataset.path}: frame and partition UDFs need whole frames, but the "
            f"negotiated tiles cut the frame into {len(scheme)} slices"
        )


def _checked_udfs(udfs) -> list[UDFBase]:
    if isinstance(udfs, UDFBase):
        udfs = [udfs]
    udfs = list(udfs)
    if not udfs:
        raise UDFError("empty list of UDFs - nothing to do!")
    for u in udfs:
        if not isinstance(u, UDFBase):
            raise UDFError(f"{u!r} is not an ltdask.UDF instance")
    return udfs


def _corrections(dataset: DataSet, corrections, read_dtype: np.dtype):
    """``(corrections, prepared, read_dtype)``: the run's `CorrectionSet` (by default the
    dataset's), its form for the dataset's signal shape (None without corrections) and
    the dtype of the tiles the UDFs see."""
    if corrections is None:
        corrections = dataset.default_corrections()
    if corrections is None:
        return None, None, read_dtype
    if not hasattr(corrections, "for_shape"):
        raise UDFError(
            f"corrections={corrections!r}: expected an ltdask.CorrectionSet (dark, gain, "
            "excluded_pixels)"
        )
    if not corrections.have_corrections():
        return corrections, None, read_dtype
    # corrected frames are floats (as LiberTEM's); tiles are read in the data's own dtype
    # (views of the files where possible) and the correction kernel converts them: one
    # pass, not a decode and then a correction
    read_dtype = np.dtype(np.result_type(read_dtype, np.float32))
    prepared = corrections.for_shape(
        dataset.sig_shape,
        dataset.path,
        tile_dtype=dataset.run_dtype(dataset.dtype),
        out_dtype=read_dtype,
    )
    return corrections, prepared, read_dtype


def _bind_all(dataset: DataSet, udfs: list[UDFBase], context: RunContext):
    """``(bound_udfs, specs, methods)``: per UDF an instance bound to the whole run (merges,
    ``get_results``), its declared buffers (checked against this machine's memory and
    for a way to merge them) and its method."""
    backends = context.backends
    assert backends is not None
    bound_udfs = [bind(u, context, backend=b) for u, b in zip(udfs, backends.targets, strict=True)]
    for template, main in zip(udfs, bound_udfs, strict=True):
        template.meta = main.meta  # as LiberTEM: the instance given knows the run
    specs = [declared_buffers(m) for m in bound_udfs]
    memory = settings.total_memory()
    for declared in specs:
        for name, spec in declared.items():
            # results come back to this process, nav ones at the full nav size
            spec.check_fits(dataset.num_frames, context.sig_shape, name, memory)
    methods = [_check_method(m) for m in bound_udfs]
    for m, declared in zip(bound_udfs, specs, strict=True):
        _check_mergeable(m, declared)
    return bound_udfs, specs, methods


def _negotiate(
    dataset, consumers, context, prepared, sizes, read_as, tile_bytes=None
) -> TilingScheme:
    """The tiling scheme `dataset` negotiates with the UDFs for tiles read as `read_as`
    (tiles of about `tile_bytes`; default: ``ltdask.tile-bytes``)."""
    excluded = None if prepared is None else prepared.excluded_coordinates
    negotiator = None if tile_bytes is None else Negotiator(tile_bytes)
    scheme = dataset.negotiate(
        consumers, read_as, context.roi.flat, negotiator=negotiator, excluded=excluded
    )
    plan = context.backends
    if not plan.dense_source and not {BACKEND_NUMPY, "cuda"} & set(plan.targets):
        # sparse tiles all the way: their size follows the non-zeros, not the frames, and
        # each costs some overhead: tiles of whole partitions
        depth = max(sizes, default=1)
        scheme = TilingScheme(scheme.slices, depth=depth, intent=scheme.intent)
    return scheme


def _cluster_nonce(target: RunTarget) -> str | None:
    """A new random string where the run goes to a ``distributed`` cluster, else None.

    The keys of a run are those of its UDFs and data; on a cluster, runs get keys of their
    own: a run of the same UDFs right after another one (a loop) would submit keys that
    the scheduler is still releasing, and the client then gathers them before they are
    computed again ("Couldn't gather keys ... rescheduling", logged as errors; 3-10 in 60
    back-to-back SumUDF runs)."""
    return uuid.uuid4().hex if target.on_cluster else None


def input_dtype(dataset: DataSet, udfs: list[UDFBase]) -> np.dtype:
    """``numpy.result_type`` of the data's dtype and every UDF's preferred dtype."""
    dtype = dataset.dtype
    for udf in udfs:
        dtype = np.result_type(udf.get_preferred_input_dtype(), dtype)
    return dataset.run_dtype(dtype)


def _preferences(udf: UDFBase) -> TilingPreferences:
    method = udf.get_method()
    prefs = udf.get_tiling_preferences() or {}
    depth = prefs.get("depth", UDFBase.TILE_DEPTH_DEFAULT)
    size = prefs.get("total_size", UDFBase.TILE_SIZE_MAX)
    return TilingPreferences(method.value, depth=depth, total_size=size)


def _check_method(udf: UDFBase) -> UDFMethod:
    method = udf.get_method()
    if not isinstance(method, UDFMethod):
        try:
            method = UDFMethod(method)
        except ValueError:
            raise UDFError(
                f"{type(udf).__name__}.get_method() returned {method!r}; expected a member "
                "of UDF.UDF_METHOD"
            ) from None
    if not hasattr(udf, f"process_{method.value}"):
        raise UDFError(
            f"{type(udf).__name__}.get_method() chose {method.value!r} but the class has no "
            f"process_{method.value}"
        )
    return method


def _check_mergeable(udf: UDFBase, specs: dict[str, BufferSpec]) -> None:
    if overrides(udf, "merge_all") or overrides(udf, "merge"):
        return
    others = [k for k, s in specs.items() if s.kind != "nav" and s.use != "result_only"]
    if others:
        raise MergeNotImplementedError(
            f"{type(udf).__name__} has non-nav buffers {others}; it must implement "
            "merge(dest, src) or merge_all(ordered_results)"
        )
