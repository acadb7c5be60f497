"""``ltdask warmup``: compile ltdask's kernels into numba's cache ahead of the first run."""

from __future__ import annotations

import click

from ltdask.udf.warmup import WARMUP_DTYPES


def _dtypes(ctx, param, values):
    import numpy as np

    for value in values:
        try:
            np.dtype(value)
        except TypeError:
            raise click.BadParameter(
                f"{value!r} is not a numpy dtype such as uint16 or float32"
            ) from None
    return tuple(values) or WARMUP_DTYPES


@click.command()
@click.option(
    "--dtype",
    "dtypes",
    multiple=True,
    callback=_dtypes,
    help=f"pixel dtype to compile for (repeatable; default: {', '.join(WARMUP_DTYPES)})",
)
def warmup(dtypes):
    """Compile the kernels of the shipped analyses and readers into numba's cache, so that
    later processes (and cluster workers that share the cache folder) start warm."""
    from ltdask.udf.warmup import warmup as compile_kernels

    report = compile_kernels(dtypes, verbose=True)
    what = (
        f"compiled {report['compiled']} kernel signatures"
        if report["compiled"]
        else "nothing to compile: the cache was warm"
    )
    click.echo(
        f"{what} ({', '.join(report['dtypes'])}) in {report['seconds']:.1f} s; "
        f"numba cache: {report['cache']}"
    )
