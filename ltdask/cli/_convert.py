"""``ltdask convert``: a dataset to a Zarr array, corrected on the way if asked."""

from __future__ import annotations

import time

import click
import numpy as np

from ltdask.cli._app import run_context
from ltdask.cli._errors import UserError
from ltdask.cli._options import (
    _open,
    check_output,
    check_suffix,
    correction_options,
    exists_message,
    input_files,
    load_corrections,
    open_options,
)


@click.command()
@click.argument("source", type=click.Path(exists=True))
@click.argument("output", type=click.Path())
@open_options
@correction_options
@click.option("--out-dtype", help="dtype to store (default: the data's)")
@click.option("--overwrite", is_flag=True, help="replace OUTPUT if it exists")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def convert(
    ctx,
    source,
    output,
    opening,
    dark,
    gain,
    excluded,
    out_dtype,
    overwrite,
    progress,
):
    """Convert SOURCE to a Zarr (v3) array OUTPUT, chunked by partition (corrected with
    --dark/--gain/--excluded, as floats)."""
    from ltdask.store import StoreReplaceError

    ds = _open(source, opening)
    check_output(output, "OUTPUT", input_files(ds, source, dark, gain, excluded))
    check_suffix(output, "OUTPUT")
    corrections = load_corrections(dark, gain, excluded, ds.sig_shape)
    if out_dtype is not None:
        try:
            np.dtype(out_dtype)
        except TypeError:
            raise UserError(
                f"--out-dtype {out_dtype!r}: not a numpy dtype such as float32 or uint16"
            ) from None
    t0 = time.perf_counter()
    with run_context(ctx):
        try:
            ds.to_zarr(
                output,
                dtype=out_dtype,
                mode="w" if overwrite else "w-",
                progress=progress,
                corrections=corrections,
            )
        except FileExistsError:
            raise UserError(exists_message(output)) from None
        except StoreReplaceError as e:
            raise UserError(f"OUTPUT: {e}") from None
    click.echo(
        f"wrote {output}: {ds.shape.to_tuple()} {out_dtype or ds.dtype} "
        f"in {time.perf_counter() - t0:.1f} s"
    )
