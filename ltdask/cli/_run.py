"""``ltdask run``: one of the shipped UDFs over a dataset, its results to a Zarr store."""

from __future__ import annotations

import os
import time

import click

from ltdask.cli._app import run_context
from ltdask.cli._options import (
    _open,
    check_output,
    correction_options,
    exists_message,
    input_files,
    load_corrections,
    open_options,
    parse_roi,
    parse_value,
)

UDF_NAMES = ("sum", "sumsig", "stddev", "com", "pick", "disk", "ring")


def make_udf(name: str, params: dict, sig_shape):
    """A shipped UDF from its command-line name and ``key=value`` parameters."""
    from ltdask import masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF

    sy, sx = sig_shape[-2], sig_shape[-1]
    cy, cx = params.pop("cy", sy / 2), params.pop("cx", sx / 2)
    if name == "sum":
        return SumUDF(**params)
    if name == "sumsig":
        return SumSigUDF(**params)
    if name == "stddev":
        return StdDevUDF(**params)
    if name == "pick":
        return PickUDF(**params)
    if name == "com":
        return CoMUDF.with_params(cy=cy, cx=cx, **params)
    r = params.pop("r", min(sy, sx) / 4)
    if name == "disk":
        return ApplyMasksUDF([lambda: masks.circular(cx, cy, sx, sy, r)], **params)
    if name == "ring":
        ri = params.pop("ri", r / 2)
        return ApplyMasksUDF([lambda: masks.ring(cx, cy, sx, sy, r, ri)], **params)
    raise click.BadParameter(f"unknown UDF {name!r}; choose from {', '.join(UDF_NAMES)}")


@click.command()
@click.argument("udf_name", metavar="UDF", type=click.Choice(UDF_NAMES))
@click.argument("path", type=click.Path(exists=True))
@open_options
@correction_options
@click.option("--param", "-p", multiple=True, help="UDF parameter key=value (repeatable)")
@click.option("--roi", help="a .npy file of booleans, or slices such as 10:20,0:64")
@click.option("--out", required=True, type=click.Path(), help="results Zarr store")
@click.option("--overwrite", is_flag=True, help="replace --out if it exists")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def run(
    ctx,
    udf_name,
    path,
    nav_shape,
    sig_shape,
    dtype,
    sync_offset,
    key,
    dark,
    gain,
    excluded,
    param,
    roi,
    out,
    overwrite,
    progress,
):
    """Run a shipped UDF on PATH and write its results to a Zarr store."""
    import ltdask
    from ltdask.store import StoreReplaceError

    ds = _open(path, nav_shape, sig_shape, dtype, sync_offset, key)
    params = {}
    for p in param:
        if "=" not in p:
            raise click.BadParameter(f"--param {p!r}: expected key=value")
        k, v = p.split("=", 1)
        params[k.strip()] = parse_value(v.strip())
    try:
        udf = make_udf(udf_name, params, ds.sig_shape)
    except (TypeError, ValueError) as e:
        raise click.BadParameter(f"--param for {udf_name}: {e}") from None
    roi_mask = parse_roi(roi, ds.nav_shape)
    roi_file = roi if roi is not None and os.path.exists(roi) else None
    check_output(out, "--out", input_files(ds, path, roi_file, dark, gain, excluded))
    corrections = load_corrections(dark, gain, excluded, ds.sig_shape)
    t0 = time.perf_counter()
    with run_context(ctx):
        try:
            lazy = udf.lazy(ds, roi=roi_mask, corrections=corrections)
            ltdask.to_zarr(lazy, out, mode="w" if overwrite else "w-", progress=progress)
        except FileExistsError:
            raise click.ClickException(exists_message(out)) from None
        except StoreReplaceError as e:
            raise click.ClickException(f"--out: {e}") from None
        except (ltdask.UDFError, TypeError, ValueError) as e:
            raise click.ClickException(f"{type(udf).__name__}: {e}") from None
    click.echo(f"wrote {out}: {', '.join(lazy.data_vars)} in {time.perf_counter() - t0:.1f} s")
