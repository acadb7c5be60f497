"""The partition task: stream a partition's tiles through every UDF of a run."""

from __future__ import annotations

import contextvars

import numpy as np

from ltdask.common import Shape, Slice
from ltdask.exceptions import UDFError
from ltdask.io.dataset import DataSet, flat_of
from ltdask.io.partition import Partition
from ltdask.io.tiling import TilingScheme
from ltdask.udf.base import UDF, AuxData, UDFMethod
from ltdask.udf.buffers import BufferSpec, Namespace
from ltdask.udf.meta import UDFMeta
from ltdask.udf.shared import SharedStats

#: the run whose partition this thread is processing (a fresh id per `Run`): per-process
#: caches of a run's derived data (mask stacks) are keyed by it, so nothing a UDF's
#: parameters computed leaks into a later run
RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("ltdask_run", default=None)


def selected_positions(partition: Partition, roi_flat: np.ndarray | None) -> np.ndarray:
    """Flat nav positions of the partition inside the ROI."""
    positions = np.arange(partition.start, partition.stop, dtype=np.int64)
    if roi_flat is None:
        return positions
    return positions[roi_flat[partition.start : partition.stop]]


def read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view of `arr`: tiles are shared by every UDF of a run and may be views of
    the files, so no UDF may write into them."""
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


def _written_tile(udf: UDF, method: str, err: ValueError) -> Exception:
    if "read-only" not in str(err):
        return err
    return UDFError(
        f"{type(udf).__name__}.{method} wrote into its input, but tiles, frames and partitions "
        f"are read-only (every UDF of the run shares them, and they may be views of the "
        f"file): copy it first, e.g. `tile = tile.copy()` ({err})"
    )


def declared_buffers(udf: UDF) -> dict[str, BufferSpec]:
    buffers = udf.get_result_buffers()
    if not isinstance(buffers, dict):
        raise UDFError(
            f"{type(udf).__name__}.get_result_buffers must return a dict of buffers, "
            f"got {type(buffers).__name__}"
        )
    for name, spec in buffers.items():
        if not (isinstance(name, str) and name.isidentifier()) or name.endswith("_valid"):
            raise UDFError(
                f"{type(udf).__name__}.get_result_buffers: {name!r} is not a valid buffer name; "
                "use a Python identifier (letters, digits and underscores, not starting with a "
                "digit) that does not end in '_valid' (the valid masks are NAME_valid)"
            )
        if not isinstance(spec, BufferSpec):
            raise UDFError(
                f"{type(udf).__name__}.get_result_buffers: {name!r} is not declared with "
                f"self.buffer(...) (got {type(spec).__name__})"
            )
    return buffers


class _Bound:
    """One UDF instance at work on one partition."""

    def __init__(self, template: UDF, meta: UDFMeta, n_sel: int, sig_shape, sig_dims):
        udf = template.copy()
        udf.meta = meta
        self.udf = udf
        self.method = udf.get_method()
        self.specs = {k: s for k, s in declared_buffers(udf).items() if s.use != "result_only"}
        self.arrays = {k: s.allocate(n_sel, sig_shape, k) for k, s in self.specs.items()}
        self.aux = {
            k: v.flat(meta.dataset_shape)
            for k, v in template._kwargs.items()
            if isinstance(v, AuxData)
        }
        self.aux_specs = {k: v.spec for k, v in template._kwargs.items() if isinstance(v, AuxData)}
        self._sig_cache: dict = {}
        self._nav_names = [k for k, sp in self.specs.items() if sp.kind == "nav"]
        self._other_names = [k for k, sp in self.specs.items() if sp.kind != "nav"]
        self._results = Namespace({}, assign_in_place=True, buffers=True)
        # result_only buffers are there while processing, as None (LiberTEM: placeholders)
        self._results._arrays.update(
            (k, None) for k, s in declared_buffers(udf).items() if s.use == "result_only"
        )
        self._params = Namespace(dict(template._kwargs))
        self.flat = self.method is UDFMethod.TILE and hasattr(udf, "process_flat_tile")
        #: whether the run's shared tile statistics feed it (set once the run's UDFs are known)
        self.shared = False

    def select_aux(self, selected: np.ndarray):
        for k, spec in self.aux_specs.items():
            if spec.kind == "nav":
                self.aux[k] = self.aux[k][selected]

    def set_views(
        self, nav: slice | None, sig_index: tuple | None, scheme_idx=None, frame: bool = False
    ):
        """Point ``results`` and aux ``params`` at a part of the partition's buffers.

        Called per tile (and per frame), so the namespaces are reused and the signal views
        are cached per signal slice.
        """
        sig_views = self._sig_cache.get(scheme_idx) if sig_index is not None else None
        if sig_views is None:
            sig_views = {
                k: _view(self.specs[k], a, None, sig_index, False)
                for k, a in self.arrays.items()
                if self.specs[k].kind != "nav"
            }
            sig_views.update(
                (k, _view(self.aux_specs[k], a, None, sig_index, False))
                for k, a in self.aux.items()
                if self.aux_specs[k].kind != "nav"
            )
            if sig_index is not None:
                self._sig_cache[scheme_idx] = sig_views
        results = self._results._arrays
        for k in self._nav_names:
            results[k] = _view(self.specs[k], self.arrays[k], nav, None, frame)
        for k in self._other_names:
            results[k] = sig_views[k]
        self.udf.results = self._results
        if self.aux:
            params = self._params._arrays
            for k, a in self.aux.items():
                spec = self.aux_specs[k]
                params[k] = (
                    _view(spec, a, nav, None, frame) if spec.kind == "nav" else (sig_views[k])
                )
            self.udf.params = self._params


def _view(spec: BufferSpec, arr: np.ndarray, nav, sig_index, frame: bool):
    if spec.kind == "nav":
        if nav is None:
            return arr
        if frame and spec.extra_shape:
            return arr[nav.start]
        return arr[nav]
    if spec.kind == "sig" and sig_index is not None:
        return arr[sig_index]
    return arr


def run_partition(
    dataset: DataSet,
    partition: Partition,
    udfs: list[UDF],
    scheme: TilingScheme,
    read_dtype,
    roi_flat: np.ndarray | None,
    block=None,
    corrections=None,
) -> list[dict[str, np.ndarray]]:
    """Process one partition with every UDF of a run; returns each UDF's partial buffers
    (nav buffers ROI-compressed and partition sized)."""
    read_dtype = np.dtype(read_dtype)
    sig_shape = tuple(dataset.sig_shape)
    sig_dims = len(sig_shape)
    selected = selected_positions(partition, roi_flat)
    n_sel = selected.size
    origin = (
        partition.start if roi_flat is None else int(np.count_nonzero(roi_flat[: partition.start]))
    )
    pstart, pstop = dataset.present_range
    k0, k1 = np.searchsorted(selected, [pstart, pstop])
    present = selected[k0:k1]
    roi_nd = None if roi_flat is None else roi_flat.reshape(dataset.nav_shape)
    full_sig = Slice.full(Shape(sig_shape, sig_dims=sig_dims))

    if n_sel == 0:
        # no frame of the ROI here: nothing of the UDFs runs (as LiberTEM, which makes no
        # task for it); empty nav buffers keep the result's chunks
        out = []
        for template in udfs:
            udf = template.copy()
            udf.meta = UDFMeta(dataset.shape, dataset.dtype, read_dtype, roi=roi_nd)
            specs = declared_buffers(udf).items()
            out.append({k: s.allocate(0, sig_shape, k) for k, s in specs if s.use != "result_only"})
        return out

    bound = []
    for template in udfs:
        meta = UDFMeta(
            dataset.shape,
            dataset.dtype,
            read_dtype,
            roi=roi_nd,
            partition_shape=Shape((n_sel, *sig_shape), sig_dims=sig_dims),
            tiling_scheme=scheme,
            positions=selected,
            slice_origin=origin,
        )
        meta.corrections = None if corrections is None else corrections.source
        b = _Bound(template, meta, n_sel, sig_shape, sig_dims)
        b.select_aux(selected)
        meta.set_slice(origin, n_sel, full_sig, None)
        b.set_views(None, None)
        b.udf.task_data = Namespace(b.udf.get_task_data() or {})
        if hasattr(b.udf, "preprocess"):
            b.udf.preprocess()
        bound.append(b)

    shared = SharedStats.make([b.udf for b in bound if b.flat], read_dtype)
    for b in bound:
        b.shared = shared is not None and b.flat and shared.wants(b.udf)
    if present.size:
        sig_indices = scheme.sig_indices
        tile_dtype = read_dtype if corrections is None else corrections.tile_dtype
        corrected = None  # the buffer corrected tiles are written to, reused
        for data, first, s, flat in dataset.iter_flat_tiles(present, scheme, tile_dtype, block):
            if corrections is not None:
                whole = len(scheme) == 1
                data = corrections.apply(
                    data, read_dtype, None if whole else sig_indices[s], corrected, flat
                )
                if corrected is None or corrected.size < data.size:
                    corrected = data
                flat = flat_of(data)
            data = read_only(data)
            if flat is not None:
                flat = (read_only(flat[0]), *flat[1:])
            n = data.shape[0]
            sig_slice = scheme.slices[s]
            sig_index = sig_indices[s]
            at = int(k0) + first
            stats = None
            for b in bound:
                udf, meta = b.udf, b.udf.meta
                if b.method is UDFMethod.TILE:
                    meta.set_slice(origin + at, n, sig_slice, s)
                    b.set_views(slice(at, at + n), sig_index, s)
                    if not b.flat:
                        try:
                            udf.process_tile(data)
                        except ValueError as e:
                            raise _written_tile(udf, "process_tile", e) from e
                        continue
                    if flat is None:
                        flat = flat_of(data, copy=True)
                        flat = (read_only(flat[0]), *flat[1:])
                    if b.shared:
                        if stats is None:
                            stats = shared.compute(*flat, s)
                        udf.process_shared_stats(stats)
                    else:
                        udf.process_flat_tile(*flat)
                elif b.method is UDFMethod.FRAME:
                    for i in range(n):
                        meta.set_slice(origin + at + i, 1, sig_slice, s)
                        b.set_views(slice(at + i, at + i + 1), sig_index, s, frame=True)
                        try:
                            udf.process_frame(data[i])
                        except ValueError as e:
                            raise _written_tile(udf, "process_frame", e) from e
                else:
                    meta.set_slice(origin + at, n, sig_slice, s)
                    b.set_views(slice(at, at + n), sig_index, s)
                    try:
                        udf.process_partition(data)
                    except ValueError as e:
                        raise _written_tile(udf, "process_partition", e) from e

    out = []
    for b in bound:
        b.udf.meta.set_slice(origin, n_sel, full_sig, None)
        b.set_views(None, None)
        if hasattr(b.udf, "postprocess"):
            b.udf.postprocess()
        b.udf.cleanup()
        out.append(b.arrays)
    return out
