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
@click.option(
    "--clip",
    is_flag=True,
    help="clip values that --out-dtype cannot hold into its range (default: refuse them)",
)
@click.option("--overwrite", is_flag=True, help="replace OUTPUT if it exists")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="A bar of the partitions done (default: once a run takes a few seconds, in a terminal).",
)
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
    clip,
    overwrite,
    progress,
):
    """Convert SOURCE to a Zarr (v3) array OUTPUT, chunked by partition (corrected with
    --dark/--gain/--excluded, as floats). An --out-dtype that cannot hold a value of the
    data is refused, leaving OUTPUT as it was, unless --clip is given. The scan's
    calibrations (its header's, or --nav-calibration/--sig-calibration) are kept in OUTPUT."""
    import zarr

    from ltdask.exceptions import ConversionError
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
                clip=clip,
            )
        except FileExistsError:
            raise UserError(exists_message(output)) from None
        except StoreReplaceError as e:
            raise UserError(f"OUTPUT: {e}") from None
        except ConversionError as e:
            fix = (
                "convert to a float --out-dtype"
                if clip
                else "give --clip to clip them into the range, or an --out-dtype that holds them"
            )
            raise UserError(f"--out-dtype {out_dtype}: {e.problem}; {fix}") from None
    stored = zarr.open_array(output, mode="r")
    clipped = stored.attrs.get("ltdask", {}).get("clipped_values")
    note = "" if clipped is None else f"; {_clipped_text(clipped, stored)}"
    click.echo(
        f"wrote {output}: {ds.shape.to_tuple()} {stored.dtype} "
        f"in {time.perf_counter() - t0:.1f} s{note}"
    )


def _clipped_text(clipped: int, stored) -> str:
    from ltdask.store._convert import range_text

    return f"clipped {clipped} of {stored.size} values into {range_text(stored.dtype)}"
