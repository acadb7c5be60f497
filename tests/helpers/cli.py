"""Running the ``ltdask`` command in the tests' own process (click's `CliRunner`)."""

from __future__ import annotations

import os

from click.testing import CliRunner

from ltdask.cli import main


def invoke(args, cwd):
    """``ltdask ARGS`` run in folder `cwd`, as click's runner gives its result."""
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        os.chdir(previous)
