"""The ``ltdask`` command: ``info``, ``convert``, ``run``, ``demo``, ``warmup`` and
``simulate``.

One module per command; what they share sits beside them:

* ``_app``: the ``ltdask`` click group (``--scheduler``, ``--workers``), how errors and
  warnings are shown, and the scheduler a command's work runs on;
* ``_options``: options and arguments every command parses the same way (opening a
  dataset, detector corrections, ROIs, ``key=value`` parameters, output paths);
* ``_info``, ``_convert``, ``_run``, ``_demo``, ``_warmup``, ``_simulate``: the commands.

The entry point is :func:`main` (``ltdask = "ltdask.cli:main"``); ``python -m ltdask.cli``
runs it too.
"""

from __future__ import annotations

from ltdask.cli._app import main, scheduler_context
from ltdask.cli._convert import convert
from ltdask.cli._demo import demo, field_colours, synthetic_scan
from ltdask.cli._info import info
from ltdask.cli._run import UDF_NAMES, make_udf, run
from ltdask.cli._simulate import simulate
from ltdask.cli._warmup import warmup

for _command in (info, convert, run, demo, warmup, simulate):
    main.add_command(_command)

__all__ = [
    "UDF_NAMES",
    "convert",
    "demo",
    "field_colours",
    "info",
    "main",
    "make_udf",
    "run",
    "scheduler_context",
    "simulate",
    "synthetic_scan",
    "warmup",
]
