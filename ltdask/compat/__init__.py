"""A landing place for LiberTEM scripts: ``Context().load(...)``, ``run_udf``, ``map``.

Only the imports of a LiberTEM script change::

    from ltdask.compat import Context
    from ltdask.udf import SumUDF

    ctx = Context()
    ds = ctx.load("raw", path="scan.raw", nav_shape=(64, 64), sig_shape=(128, 128),
                  dtype="uint16")
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    res["intensity"].data

The pieces: ``context`` (`Context`), ``executors`` (LiberTEM's executor names, each a dask
scheduler: `InlineJobExecutor`, `ConcurrentJobExecutor`, `DaskJobExecutor`,
`DelayedJobExecutor`, `PipelinedExecutor`), ``results`` (results as LiberTEM's buffers show
them: `ResultBuffer`, `Damage`, `UDFResults`, `dry_run`), ``steps`` (`ResultGenerator`, the
steps of ``run_udf_iter``; `ResultAsyncGenerator` with ``sync=False``), ``container``
(LiberTEM's `MaskContainer`), ``detector`` (`correct`), ``datasets`` (LiberTEM's
``MemoryDataSet``), ``tiles`` (LiberTEM's `DataTile`), ``exceptions``
(`JobCancelledError`, `UDFRunCancelled`), ``devices`` (``detect``, ``set_use_cuda``...), ``alias``
(`alias_libertem`: ``import libertem`` resolved to ltdask), ``live`` and ``hooks``
(LiberTEM-live's `LiveContext` and `Hooks`). LiberTEM names that ltdask
defines elsewhere are importable from here too (`CorrectionSet`, `UDF`,
`ExecutorSpecException`).
"""

from __future__ import annotations

from ltdask.compat.alias import AliasError, alias_libertem
from ltdask.compat.context import Context
from ltdask.compat.detector import correct
from ltdask.compat.exceptions import JobCancelledError, UDFRunCancelled
from ltdask.compat.executors import (
    ConcurrentJobExecutor,
    DaskJobExecutor,
    DelayedJobExecutor,
    InlineJobExecutor,
    JobExecutor,
    PipelinedExecutor,
    UnsupportedError,
)
from ltdask.compat.hooks import DetermineNavShapeEnv, Hooks, ReadyForDataEnv
from ltdask.compat.live import LiveContext
from ltdask.compat.results import Damage, ResultBuffer, UDFInfo, UDFResults, dry_run
from ltdask.compat.steps import ResultAsyncGenerator, ResultGenerator
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import ExecutorSpecException
from ltdask.masks.container import MaskContainer
from ltdask.udf.base import UDF

__all__ = [
    "LiveContext",
    "Hooks",
    "ReadyForDataEnv",
    "DetermineNavShapeEnv",
    "AliasError",
    "ConcurrentJobExecutor",
    "Context",
    "DaskJobExecutor",
    "DelayedJobExecutor",
    "InlineJobExecutor",
    "JobCancelledError",
    "JobExecutor",
    "MaskContainer",
    "PipelinedExecutor",
    "alias_libertem",
    "correct",
    "CorrectionSet",
    "Damage",
    "ExecutorSpecException",
    "ResultAsyncGenerator",
    "ResultBuffer",
    "ResultGenerator",
    "UDF",
    "UDFInfo",
    "UDFResults",
    "UDFRunCancelled",
    "UnsupportedError",
    "dry_run",
]
