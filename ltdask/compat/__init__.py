"""A landing place for LiberTEM scripts: ``Context().load(...)``, ``run_udf``, ``map``.

Only the imports of a LiberTEM script change::

    from ltdask.compat import Context
    from ltdask.udf import SumUDF

    ctx = Context()
    ds = ctx.load("raw", path="scan.raw", nav_shape=(64, 64), sig_shape=(128, 128),
                  dtype="uint16")
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    res["intensity"].data

The pieces: ``context`` (`Context`), ``results`` (results as LiberTEM's buffers show them:
`ResultBuffer`, `Damage`, `UDFResults`, `dry_run`), ``steps`` (`ResultGenerator`, the steps
of ``run_udf_iter``; `ResultAsyncGenerator` with ``sync=False``). LiberTEM names that
ltdask defines elsewhere are importable from here too (`CorrectionSet`, `UDF`,
`ExecutorSpecException`).
"""

from __future__ import annotations

from ltdask.compat.context import Context, UnsupportedError
from ltdask.compat.results import Damage, ResultBuffer, UDFInfo, UDFResults, dry_run
from ltdask.compat.steps import ResultAsyncGenerator, ResultGenerator
from ltdask.corrections import CorrectionSet
from ltdask.exceptions import ExecutorSpecException
from ltdask.udf.base import UDF

__all__ = [
    "Context",
    "CorrectionSet",
    "Damage",
    "ExecutorSpecException",
    "ResultAsyncGenerator",
    "ResultBuffer",
    "ResultGenerator",
    "UDF",
    "UDFInfo",
    "UDFResults",
    "UnsupportedError",
    "dry_run",
]
