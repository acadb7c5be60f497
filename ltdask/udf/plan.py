"""Planning a run: check the UDFs and what they declare, settle the dtype the tiles have and
negotiate the tiling scheme with the dataset, before any graph is built.

Every error a UDF's declarations can cause is raised here, when the graph is built, with
a message naming the UDF and the fix. The result, a `RunPlan`, is what the rest of the
engine works from: the partition graph (:mod:`ltdask.udf.graph`), the merges
(:mod:`ltdask.udf.merge`) and the results (:mod:`ltdask.udf.results`).
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from dataclasses import dataclass

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.exceptions import MergeNotImplementedError, UDFError
from ltdask.io.dataset import DataSet
from ltdask.io.partition import Partition
from ltdask.io.tiling import TilingPreferences, TilingScheme
from ltdask.runtime import settings
from ltdask.runtime.schedulers import RunTarget
from ltdask.udf.backends import NUMPY as BACKEND_NUMPY
from ltdask.udf.backends import plan_backends
from ltdask.udf.bind import RunContext, bind
from ltdask.udf.buffers import BufferSpec, declared_buffers, stored_buffers
from ltdask.udf.interface import UDFBase, UDFMethod, overrides
from ltdask.udf.roi import Selection

#: the largest per-pixel sums (uint32) of a frame that a run whose tiles are summed by the
#: decoder keeps whole (they stay in the core's cache as four frames at a time are added)
SUMMED_SLICE_BYTES = 2 << 20


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
    mains: list[UDFBase]
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
        UDFs fold them into their results."""
        return None if self.context.folded is not None else self.prepared

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

    if isinstance(udfs, UDFBase):
        udfs = [udfs]
    udfs = list(udfs)
    if not udfs:
        raise UDFError("empty list of UDFs - nothing to do!")
    for u in udfs:
        if not isinstance(u, UDFBase):
            raise UDFError(f"{u!r} is not an ltdask.UDF instance")
    selection = Selection.of(roi, dataset)
    read_dtype = input_dtype(dataset, udfs)
    prepared = None
    if corrections is None:
        corrections = dataset.default_corrections()
    if corrections is not None:
        if not hasattr(corrections, "for_shape"):
            raise UDFError(
                f"corrections={corrections!r}: expected an ltdask.CorrectionSet (dark, gain, "
                "excluded_pixels)"
            )
        if corrections.have_corrections():
            # corrected frames are floats (as LiberTEM's); tiles are read in the data's
            # own dtype (views of the files where possible) and the correction kernel
            # converts them: one pass, not a decode and then a correction
            read_dtype = np.dtype(np.result_type(read_dtype, np.float32))
            prepared = corrections.for_shape(
                dataset.sig_shape,
                dataset.path,
                tile_dtype=dataset.run_dtype(dataset.dtype),
                out_dtype=read_dtype,
            )
    # corrected tiles are dense: the dataset delivers numpy then
    sources = (BACKEND_NUMPY,) if prepared is not None else dataset.array_backends
    target = RunTarget.resolve(target)
    backend_plan = plan_backends(sources, udfs, backends, target=target)
    folded = prepared if folds_corrections(udfs, prepared) else None
    tile_dtype = native_tile_dtype(
        dataset, udfs, np.dtype(read_dtype), None if folded is not None else prepared, backend_plan
    )
    if tile_dtype is None:
        folded = None
    partitions = dataset.get_partitions()
    counts = tuple(selection.count(p.start, p.stop) for p in partitions)
    context = RunContext(
        dataset.shape,
        tuple(dataset.sig_shape),
        np.dtype(dataset.dtype),
        np.dtype(read_dtype),
        selection,
        sum(counts),
        corrections,
        backend_plan,
        nav_calibration=dataset.nav_calibration,
        sig_calibration=dataset.sig_calibration,
        tile_dtype=tile_dtype,
        folded=folded,
    )
    mains = [bind(u, context, backend=b) for u, b in zip(udfs, backend_plan.targets, strict=True)]
    for template, main in zip(udfs, mains, strict=True):
        template.meta = main.meta  # as LiberTEM: the instance given knows the run
    specs = [declared_buffers(m) for m in mains]
    memory = settings.total_memory()
    for declared in specs:
        for name, spec in declared.items():
            # results come back to this process, nav ones at the full nav size
            spec.check_fits(dataset.num_frames, context.sig_shape, name, memory)
    methods = [_check_method(m) for m in mains]
    for m, declared in zip(mains, specs, strict=True):
        _check_mergeable(m, declared)
    consumers = [_preferences(m) for m in mains]
    excluded = None if prepared is None else prepared.excluded_coordinates
    read_as = context.input_dtype if context.tile_dtype is None else context.tile_dtype
    scheme = dataset.negotiate(consumers, read_as, selection.flat, excluded=excluded)
    if not backend_plan.dense_source and not {BACKEND_NUMPY, "cuda"} & set(backend_plan.targets):
        # sparse tiles all the way: their size follows the non-zeros, not the frames, and
        # each costs some overhead: tiles of whole partitions
        depth = max([p.num_frames for p in partitions] + [1])
        scheme = TilingScheme(scheme.slices, depth=depth, intent=scheme.intent)
    tiles_corrected = prepared is not None and folded is None
    layout, layout_scheme = _raw_layout(
        dataset, udfs, methods, consumers, read_as, context, tiles_corrected
    )
    if layout is not None:
        # the UDFs sum the raw frames, whole, and move their sums to the image's pixels
        scheme = _whole_frames(context, layout_scheme.depth, layout_scheme.intent)
        context = dataclasses.replace(context, layout=layout, layout_scheme=layout_scheme)
    summed = _summed_scheme(dataset, udfs, context, partitions, scheme)
    if summed is not None:
        scheme = summed
        context = dataclasses.replace(context, decoder_sums=True)
    if any(meth is not UDFMethod.TILE for meth in methods) and len(scheme) != 1:
        raise UDFError(
            f"{dataset.path}: frame and partition UDFs need whole frames, but the "
            f"negotiated tiles cut the frame into {len(scheme)} slices"
        )
    dataset_token = tokenize(dataset)
    sizes = tuple(p.num_frames for p in partitions)
    # the partitions too: an iterated run cuts the same dataset finer (`with_min_partitions`);
    # and the calibrations, which UDFs may use (``meta.sig_calibration``)
    calibration = (dataset.nav_calibration, dataset.sig_calibration)
    token = tokenize(
        _cluster_nonce(target),
        dataset_token,
        udfs,
        selection.flat,
        context.input_dtype.str,
        read_as.str,
        scheme,
        prepared,
        sizes,
        calibration,
        layout,
    )
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
        mains=mains,
        specs=specs,
        scheme=scheme,
        dataset_token=dataset_token,
        token=token,
        target=target,
    )


def native_tile_dtype(dataset, udfs, input_dtype, prepared, backend_plan) -> np.dtype | None:
    """The data's own dtype where every UDF of the run takes tiles of it in place of float
    ones (``NATIVE_INTEGER_TILES``: their results are those of float tiles, the conversion
    done in their kernels) -- 8- and 16-bit integers, which float32 holds exactly, read
    without a converted copy (views of the files where there is nothing to decode) -- or
    None."""
    native = np.dtype(dataset.dtype).newbyteorder("=")
    if (
        prepared is not None
        or input_dtype.kind != "f"
        or native.kind not in "ui"
        or native.itemsize > 2
        or set(backend_plan.targets) != {BACKEND_NUMPY}
        or backend_plan.source != BACKEND_NUMPY
        # (declared by the class itself: a subclass may process tiles its own way)
        or not all(vars(type(u)).get("NATIVE_INTEGER_TILES", False) for u in udfs)
    ):
        return None
    return native


def _raw_layout(dataset, udfs, methods, consumers, read_as, context, tiles_corrected):
    """``(layout, scheme)``: the dataset's `PixelLayout` and the tiling scheme of its raw
    frames where every UDF of the run sums the raw frames and moves its per-pixel results
    (``FOLDS_LAYOUT``, declared by the class itself) -- tiles of whole raw frames, numpy,
    uncorrected (`tiles_corrected` False: no corrections, or corrections the UDFs fold) --
    else ``(None, None)``."""
    plan = context.backends
    if (
        tiles_corrected
        or (plan is not None and (plan.source, set(plan.targets)) != (BACKEND_NUMPY, {"numpy"}))
        or any(meth is not UDFMethod.TILE for meth in methods)
        or not all(vars(type(u)).get("FOLDS_LAYOUT", False) for u in udfs)
    ):
        return None, None
    layout = dataset.pixel_layout()
    if layout is None:
        return None, None
    scheme = layout.dataset.negotiate(consumers, read_as, context.roi.flat)
    return (layout, scheme) if len(scheme) == 1 else (None, None)


def decoder_sums(dataset, udfs, context, scheme) -> bool:
    """Whether the run's one UDF takes each tile's per-pixel sums from the dataset's decoder
    in place of the tile (``SUMS_FROM_DECODER``, declared by the class itself: SumUDF):
    integer tiles of numpy, uncorrected, read through a decoder that sums them
    (`Decoder.can_sum`: packed or swapped pixels)."""
    decoder = getattr(dataset, "decoder", None)
    return (
        len(udfs) == 1
        and vars(type(udfs[0])).get("SUMS_FROM_DECODER", False)
        # (integer tiles: numpy everywhere and uncorrected, see `native_tile_dtype`)
        and context.tile_dtype is not None
        and context.layout is None
        and decoder is not None
        and decoder.can_sum(scheme)
    )


def _summed_scheme(dataset, udfs, context, partitions, scheme) -> TilingScheme | None:
    """Where the decoder sums the tiles (`decoder_sums`) no tile is made, so the negotiated
    size does not apply: tiles a partition deep (at most 65536 frames), of whole frames
    where their sums fit `SUMMED_SLICE_BYTES` (Merlin raw 12-bit, 256 x 256: 29 -> 41 GB/s),
    else of the negotiated slices; None where the decoder does not sum them."""
    depth = min(65536, max([p.num_frames for p in partitions] + [1]))
    if 4 * math.prod(context.sig_shape) <= SUMMED_SLICE_BYTES:
        whole = _whole_frames(context, depth)
        if decoder_sums(dataset, udfs, context, whole):
            return whole
    deep = TilingScheme(scheme.slices, depth=depth, intent=scheme.intent)
    return deep if decoder_sums(dataset, udfs, context, deep) else None


def _whole_frames(context, depth: int, intent="tile") -> TilingScheme:
    """Tiles of `depth` whole frames."""
    sig = context.sig_shape
    return TilingScheme([Slice.full(Shape(sig, sig_dims=len(sig)))], depth=depth, intent=intent)


def folds_corrections(udfs, prepared) -> bool:
    """Whether every UDF of the run applies the corrections of `prepared` to its results
    (``FOLDS_CORRECTIONS``, declared by the class itself: ``"dark"``, ``"gain"``, the
    ones it folds): ``(x - dark) * gain`` is affine in each pixel, so a sum over frames of
    uncorrected tiles is corrected by ``(sum - n * dark) * gain``. Excluded pixels are
    repaired from their neighbours in each tile, so with them the tiles are corrected as
    they are read."""
    if prepared is None or prepared.has_excluded:
        return False
    given = {name for name in ("dark", "gain") if getattr(prepared.source, name) is not None}
    return all(given <= set(vars(type(u)).get("FOLDS_CORRECTIONS", ())) for u in udfs)


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
