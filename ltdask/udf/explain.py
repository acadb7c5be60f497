"""`explain`: how a run would read and process a dataset, without reading it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltdask.io.partition import for_run
from ltdask.runtime.schedulers import RunTarget
from ltdask.udf.backends import stages_to_gpu
from ltdask.udf.interface import UDFBase
from ltdask.udf.plan import plan_run


@dataclass(frozen=True)
class RunExplanation:
    """What :func:`explain` found: the plan's parts, and the plan in words (``str()``)."""

    #: the array types: `ltdask.udf.backends.BackendPlan`
    backends: object
    #: the negotiated tiling scheme (`ltdask.TilingScheme`)
    scheme: object
    #: the dtype the tiles have
    input_dtype: np.dtype
    partitions: int
    #: the number of positions the ROI selects
    frames: int
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def explain(
    dataset, udfs, roi=None, corrections=None, backends=None, scheduler=None
) -> RunExplanation:
    """How ``ltdask.compute(dataset, udfs, ...)`` would run, without reading any data: the
    partitions, the tiles, their dtype, and the array type each UDF gets (dense or sparse,
    CPU or GPU) with the conversions on the way — for a run that is slower than expected.
    `scheduler`: as for :func:`ltdask.lazy`.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumUDF
    >>> ds = ltdask.from_array(np.ones((4, 4, 8, 8), dtype=np.uint16))
    >>> print(ltdask.explain(ds, [SumUDF()], backends=("numpy", "sparse.COO")))
    ... # doctest: +ELLIPSIS
    16 frames of (8, 8) in ... read as float32 (the UDFs convert tiles of uint16)
    device: cpu; the dataset delivers numpy tiles
    SumUDF: numpy (as read; accepts numpy, sparse.COO)
    """
    if isinstance(udfs, UDFBase):
        udfs = [udfs]
    target = RunTarget.resolve(scheduler)
    udfs = list(udfs)
    device = stages_to_gpu(dataset, udfs, backends, target)
    plan = plan_run(for_run(dataset, target, device), udfs, roi, corrections, backends, target)
    scheme = plan.scheme
    shapes = sorted({tuple(s.shape) for s in scheme.slices})
    cut = ", ".join(str(s) for s in shapes)
    lines = [
        f"{plan.n_sel} frames of {tuple(dataset.sig_shape)} in {len(plan.partitions)} "
        f"partition(s); tiles of up to {scheme.depth} frames x {cut}, read as " + _read_as(plan)
    ]
    lines.extend(plan.context.path.describe())
    bplan = plan.context.backends
    assert bplan is not None
    lines.append(bplan.describe([type(u).__name__ for u in plan.udfs]))
    return RunExplanation(
        backends=bplan,
        scheme=scheme,
        input_dtype=plan.read_dtype,
        partitions=len(plan.partitions),
        frames=plan.n_sel,
        text="\n".join(lines),
    )


def _read_as(plan) -> str:
    tile_dtype = plan.context.tile_dtype
    if tile_dtype is None:
        return str(plan.read_dtype)
    return f"{plan.read_dtype} (the UDFs convert tiles of {tile_dtype})"
