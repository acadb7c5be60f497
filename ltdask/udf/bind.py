"""Binding UDF instances to a run: the one place an instance gets its ``self.meta`` and
the parameters (``self.params``) it sees where it runs.

The engine never works on the instances a user passes (the *templates*): wherever a UDF
runs (on the main node, in a partition task, in a merge task) it is a fresh copy
(`UDFBase.copy`) bound to the run's `RunContext` by `bind`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from ltdask.common import Shape
from ltdask.io.tiling import TilingScheme
from ltdask.udf.backends import BackendPlan
from ltdask.udf.buffers import BufferSpec, Namespace
from ltdask.udf.interface import AuxData, UDFBase, raw_params
from ltdask.udf.meta import UDFMeta
from ltdask.udf.paths import DECODED, DecodedTiles, TilePath
from ltdask.udf.roi import Selection


@dataclass(frozen=True, eq=False)
class RunContext:
    """What every UDF instance of a run knows about it; small, and pickled into tasks."""

    dataset_shape: Shape
    #: ``tuple(dataset_shape.sig)``
    sig_shape: tuple[int, ...]
    dataset_dtype: np.dtype
    #: the dtype of the tiles the UDFs see
    input_dtype: np.dtype
    roi: Selection
    #: the number of positions the ROI selects
    n_sel: int
    #: the run's `CorrectionSet` (None without)
    corrections: object = None
    #: the run's array types (None: numpy everywhere)
    backends: BackendPlan | None = None
    #: a fresh id per run (see `UDFMeta.run_id`)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: the dataset's calibrations (`UDFMeta.nav_calibration`, ``sig_calibration``)
    nav_calibration: tuple = ()
    sig_calibration: tuple = ()
    #: how the tiles reach the UDFs (see :mod:`ltdask.udf.paths`), picked by the planner
    path: TilePath = DecodedTiles()

    @property
    def tile_dtype(self) -> np.dtype | None:
        """The dtype tiles are read as, where it is not `input_dtype`: the data's own
        integers for UDFs that take them in place of floats."""
        return self.path.tile_dtype


@dataclass(frozen=True, eq=False)
class PartitionPlace:
    """Where in the run a partition task is: its selected flat `positions`, the
    ROI-compressed index of the first (`origin`), and the tiling `scheme`."""

    positions: np.ndarray
    origin: int
    scheme: TilingScheme


def make_meta(
    context: RunContext,
    place: PartitionPlace | None = None,
    valid_nav: np.ndarray | None = None,
    backend: str | None = None,
) -> UDFMeta:
    """``self.meta`` for a UDF of the run of `context`: the one place a `UDFMeta` is made.

    In the partition task at `place`, or for the whole dataset (`place` None: main node
    and merges), where `valid_nav` (flat, all positions) says which positions hold valid
    results so far.
    """
    if place is None:
        n, scheme, positions, origin, run_id = context.n_sel, None, None, 0, None
    else:
        n, scheme, positions = place.positions.size, place.scheme, place.positions
        origin, run_id = place.origin, context.run_id
    sig = context.sig_shape
    meta = UDFMeta(
        context.dataset_shape,
        context.dataset_dtype,
        context.input_dtype,
        roi=context.roi.nd,
        partition_shape=Shape((n, *sig), sig_dims=len(sig)),
        tiling_scheme=scheme,
        positions=positions,
        slice_origin=origin,
        corrections=context.corrections,
        run_id=run_id,
        nav_calibration=context.nav_calibration,
        sig_calibration=context.sig_calibration,
    )
    if backend is not None:
        meta.array_backend = backend
        meta.device_class = "cuda" if backend in UDFBase.CUDA_BACKENDS else "cpu"
    if valid_nav is not None:
        meta.set_valid_nav_mask(valid_nav, context.roi.compress(valid_nav))
    return meta


def bind(
    template: UDFBase,
    context: RunContext,
    place: PartitionPlace | None = None,
    valid_nav: np.ndarray | None = None,
    backend: str | None = None,
) -> UDFBase:
    """A fresh instance of `template`, bound to the run of `context` (see `make_meta`),
    processing arrays of `backend` (``meta.array_backend``).

    Its ``self.params`` are the parameters as given (`given_params`); `dataset_params`
    and `partition_params` give them as merges and partition tasks see them. Its
    ``self.tile_form`` is what the run's path hands it with the tiles.
    """
    udf = template.copy()
    udf.meta = make_meta(context, place, valid_nav, backend)
    if context.path.form is not DECODED:
        udf.tile_form = context.path.form
    return udf


def show_valid_nav(udf: UDFBase, context: RunContext, valid_nav: np.ndarray) -> None:
    """Set what ``udf.meta.get_valid_nav_mask()`` says: `valid_nav` (flat, all positions)."""
    udf.meta.set_valid_nav_mask(valid_nav, context.roi.compress(valid_nav))


def given_params(udf: UDFBase) -> Namespace:
    """``self.params`` as given (``get_results``): aux data as arrays, see
    `AuxData.raw_data`."""
    return raw_params(udf._kwargs)


def partition_params(
    udf: UDFBase, selected: np.ndarray
) -> tuple[dict, dict[str, tuple[BufferSpec, np.ndarray]]]:
    """The parameters of `udf` in the partition task of the `selected` flat positions: all
    of them as given (a dict the runner points ``self.params`` at), and the aux data among
    them as ``{name: (spec, data)}``, nav ones at the selected positions; the runner
    replaces them in the dict by views of the current tile or frame."""
    params = dict(udf._kwargs)
    aux = {}
    for k, v in params.items():
        if isinstance(v, AuxData):
            data = v.flat(udf.meta.dataset_shape)
            aux[k] = (v.spec, data[selected] if v.spec.kind == "nav" else data)
    return params, aux


def dataset_params(
    template: UDFBase, context: RunContext, nav_range: tuple[int, int] | None = None
) -> Namespace:
    """``self.params`` for the whole dataset (``merge_all``, ``preprocess`` on the main
    node): nav aux data at the ROI's positions, cut to `nav_range` of those (in ``merge``:
    the partition merged)."""
    params = dict(template._kwargs)
    for k, v in params.items():
        if isinstance(v, AuxData):
            flat = v.flat(context.dataset_shape)
            if v.spec.kind == "nav":
                flat = context.roi.compress(flat)
                if nav_range is not None:
                    flat = flat[nav_range[0] : nav_range[1]]
            params[k] = flat
    return Namespace(params)
